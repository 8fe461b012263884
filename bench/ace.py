"""The ACE study (Rashidi et al., "Enabling Compute-Communication Overlap in Distributed Deep
Learning Training Platforms", ISCA 2021): data-parallel training iterations with the
collectives run by the NPUs themselves (`workload.engine = "npu"`) under a family of baseline
configurations, each giving communication `workload.comm_sms` compute units and a memory
budget of `workload.comm_hbm_gbps`, against an offload engine beside each NPU (`"offload"`,
which holds no units). Per (platform, model):

- speedup_over_best_baseline: the best baseline's iteration time over the engine's;
- net_bw_ratio: the network bandwidth per NPU while communicating, engine over that best
  baseline;
- hbm_for_same_net_bw_ratio: the memory bandwidth the NPU-run collective needs to reach the
  network bandwidth the engine reaches, over what the engine needs, each found by sweeping
  the budget of one all-reduce of the model's gradients alone on the platform (the least
  budget of the sweep reaching 95% of the engine's bandwidth with the whole HBM).

Platforms (the paper's kinds: tori and rings of rings of 16-64 NPUs): torus4x4x4, the 64-NPU
4x4x4 torus of the paper's sample platform (32/16/16 GB/s); torus4x4, its first two
dimensions (16 NPUs); torus4x4-4x, the same with links of four times the bandwidth (128/64
GB/s, NICs of 512 GB/s: assumed, an NPU with as much network bandwidth as the paper's
platforms give it, which the paper's text gives as hundreds of GB/s); ring-of-rings4x4
(four rings of four, 50/25 GB/s). The all-reduce is the bidirectional hierarchical one
(`bidir_hierarchical`: dimension by dimension, each dimension's shard halved, one half each
way round its rings), as the paper's simulator uses both directions of a dimension's rings
(ASTRA-sim's system layer, QueueLevelHandler::get_next_queue_id, sends half of a
dimension's chunks anticlockwise); `--set workload.algorithm=hierarchical` runs the one-way
form. Collectives of one communicator run in stream order.

Precision: ResNet-50 trains under `amp` (fp32 weights and gradients, 4 bytes per weight
all-reduced, 16-bit activations and products), as ASTRA-sim 1.0's shipped
Resnet50_DataParallel.txt, written by the paper's group, all-reduces it (its weight-gradient
sizes are 4 bytes per weight: conv1's 37,632 bytes are its 9,408 weights, the 54 layers'
102,011,648 bytes 25.5 M weights) and as PyTorch's automatic mixed precision with
DistributedDataParallel trains it; GNMT and DLRM in `mixed` (2 bytes per weight all-reduced),
assumed: ASTRA-sim 1.0 ships no GNMT file, and its DLRM file (DLRM_HybridParallel.txt) is
not the zoo's model and does not decide (its MLPs' gradient sizes read as layers of
13-512-512-512-16 at 2 bytes per weight or 13-256-512-256-16 at 4, with no biases).
`--set workload.precision=mixed` runs every model in one precision.

Assumed (not taken from the paper): V100-class NPUs (80 SMs, 125 TFLOP/s at 16 bits, 900 GB/s
HBM), SGD with momentum; per-NPU mini-batches of 2 (ResNet-50), 4 (GNMT) and
64 (DLRM), communication-heavy points; the baseline family comm_sms in
{2, 4, 8, 16, 32, 48, 64} x comm_hbm_gbps in {45, 90, 225, 450, 900}; 25 MiB buckets, 4
chunks per collective; the engine's 256 GB/s of reduction and 8 MiB of SRAM. The last of 2 iterations is reported
(`iteration_ms`: from its first op to its last), and the mean period (`period_ms`: the time
from the end of the first iteration to the end of the last, over the iterations after the
first; `--iterations N` runs N). The two differ where iterations overlap: DLRM's table
lookups and all-to-all of one iteration start while the previous one's all-reduce runs, so
its last iteration spans more than its period.

    python bench/ace.py [--platform torus4x4,torus4x4x4] [--models resnet50,gnmt,dlrm]
        [--network flow|flit] [--per-npu N | --per-npu 32,16,8,4,2,1] [--decompose]
        [--baselines 8x450,16x225] [--chunks 4,8,16,32] [--no-hbm-sweep] [--iterations N]
        [--set network.flit_bytes=64 ...] [--json out.json]
    python bench/ace.py --combine flow.json flit.json [--json both.json]

`--network flow,flit` runs both levels; `--combine` joins the rows of earlier runs' JSON (one
level each, say, with their own families and settings) into one table and one JSON.

`--per-npu` with several values runs a row per batch (a sweep). `--decompose` adds to each
row `loss_breakdown_cycles`: the best baseline's loss to the engine per iteration split into
compute slowed by the SMs its collectives hold, compute slowed by sharing the HBM, and
exposed communication, from one more run of that member with its held SMs made free for
compute (see breakdown()); a second table prints them.

`--chunks 4,8,16,32` runs every member of the baseline family at each chunk count
(`workload.chunks`) and compares the engine (at 4 chunks: its SRAM pieces pipeline it) with
the best of all; the row keeps the speed-up over the best member at 4 chunks beside it
(`speedup_over_best_baseline_at_default_chunks`).

`--set key=value` overrides the platform's configuration for every run (at the flit level,
coarser flits make a long run shorter: say which were used).
"""
import argparse
import itertools
import json
import os
import re
import resource
import time

from outputs import FORCE, check, write_json

import pysim
from pysim import models
from pysim.workload import endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
TOPO = os.path.join(HERE, "..", "topologies")

PLATFORMS = {
    "torus4x4": ("torus4x4x4.toml", {"topology.dims": [4, 4],
                                     "topology.dim_link_gbps": [32.0, 16.0]}, 16),
    "torus4x4-4x": ("torus4x4x4.toml", {"topology.dims": [4, 4],
                                        "topology.dim_link_gbps": [128.0, 64.0],
                                        "topology.nic.npu.injection_gbps": 512.0,
                                        "topology.nic.npu.ejection_gbps": 512.0}, 16),
    "torus4x4x4": ("torus4x4x4.toml", {}, 64),
    "ring-of-rings4x4": ("ring-of-rings4x4.toml", {}, 16),
}
MODELS = {"resnet50": 2, "gnmt": 4, "dlrm": 64}          # per-NPU mini-batch
# workload.precision per model: ResNet-50 as ASTRA-sim 1.0's shipped Resnet50_DataParallel.txt
# and PyTorch's AMP with DDP train it (fp32 gradients all-reduced, 16-bit compute); GNMT and
# DLRM, for which no file gives the gradient's bytes per weight, in mixed precision
PRECISION = {"resnet50": "amp", "gnmt": "mixed", "dlrm": "mixed"}
PAPER = {"resnet50": 1.41, "gnmt": 1.12, "dlrm": 1.13}    # mean speed-up over the best baseline
COMM_SMS = (2, 4, 8, 16, 32, 48, 64)      # of a V100's 80
COMM_HBM = (45.0, 90.0, 225.0, 450.0, 900.0)   # 900: the whole of its HBM
BUDGETS = tuple(round(5.625 * 2 ** (i / 2), 2) for i in range(15))   # 5.6 .. 720 GB/s
REDUCE_GBPS = 450.0              # the SMs' reduction rate (topology.npu.reduce_gbps's default)
SWEEP_SMS = 16                   # the NPU-run collective's units in the budget sweep
ALGORITHM = "bidir_hierarchical"  # the all-reduce (workload.algorithm; --set overrides it)
CHUNKS = 4                       # workload.chunks's default: chunks per collective


SETTINGS = {}                    # --set key=value, for every run
ITERATIONS = 2                   # --iterations: training iterations per run
ITERATION_NAME = re.compile(r"it(\d+) ")


def config(plat, overrides):
    path, over, _ = PLATFORMS[plat]
    return pysim.load(os.path.join(TOPO, path), {
        **over, "topology.npu.preset": "v100", "workload.algorithm": ALGORITHM,
        **SETTINGS, **overrides})


def _value(text):
    """A --set value: an int, a float, true/false, else the text."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def iteration_ends(res):
    """Per iteration, the cycle its last op ends (a training graph's ops are named
    'it<k> ...'; its collectives' ops, unnamed, end before the steps that wait for them)."""
    t = res.ops
    ends = {}
    for name, f in zip(t.names[:len(t)], t.finish.tolist()):
        m = ITERATION_NAME.match(name) if name is not None else None
        if m:
            k = int(m.group(1))
            if f > ends.get(k, -1):
                ends[k] = f
    return [ends[k] for k in sorted(ends)]


def training(plat, model, engine, per_npu, network, sms=None, hbm=None, iterations=None,
             extra=None, chunks=None):
    iterations = iterations or ITERATIONS
    over = {"workload.kind": "training", "workload.model": model,
            "workload.batch": per_npu * PLATFORMS[plat][2],
            "workload.precision": precision(model),
            "workload.engine": engine, "workload.iterations": iterations,
            "network.model": network, **(extra or {})}
    if sms is not None:
        over["workload.comm_sms"] = sms
    if hbm is not None:
        over["workload.comm_hbm_gbps"] = hbm
    if chunks is not None:
        over["workload.chunks"] = chunks
    t = time.perf_counter()
    res = pysim.simulate(config(plat, over))
    ends = iteration_ends(res)
    d = res.to_dict()
    per = d["per_npu"].values()
    s_per_cycle = d["iteration_seconds"] / d["iteration_cycles"]
    net = sum(v["network_bytes"] for v in per) / len(d["per_npu"])
    return dict(platform=plat, model=model, engine=engine, comm_sms=sms, comm_hbm_gbps=hbm,
                chunks=chunks or SETTINGS.get("workload.chunks", CHUNKS), per_npu=per_npu, network=network, iteration_ms=d["iteration_seconds"] * 1e3,
                iteration_cycles=d["iteration_cycles"],
                iterations=iterations,
                period_ms=(ends[-1] - ends[0]) / (len(ends) - 1) * s_per_cycle * 1e3,
                compute_cycles=d["compute_cycles"], comm_cycles=d["comm_cycles"],
                exposed_comm_cycles=d["exposed_comm_cycles"],
                comm_network_gbps_per_npu=(net / (d["comm_cycles"] * s_per_cycle) / 1e9
                                           if d["comm_cycles"] else 0.0),
                wall_seconds=time.perf_counter() - t)


def gradient_bytes(model):
    """The gradient bytes of one data-parallel iteration (4 per weight under amp, 2 under
    mixed precision)."""
    return models.precision_bytes(precision(model)).grad * models.get(model).params


def precision(model):
    """The model's workload.precision: PRECISION's, unless --set gives one for every run."""
    return SETTINGS.get("workload.precision", PRECISION[model])


def allreduce_gbps(plat, engine, nbytes, budget, network):
    """Network GB/s per NPU of one all-reduce of nbytes alone, with a memory budget."""
    over = {"workload.kind": "collective", "workload.collective": "all_reduce",
            "workload.bytes": int(nbytes), "workload.chunks": 4, "workload.engine": engine,
            "workload.comm_hbm_gbps": budget, "network.model": network,
            "workload.comm_sms": SWEEP_SMS}
    res = pysim.simulate(config(plat, over))
    return res.collective["busbw_gbps"]         # (the bytes each NPU sends per second)


def _crossing(pts, target):
    """The budget at which the swept bandwidth first reaches target (linear between points)."""
    for (b0, g0), (b1, g1) in zip(pts, pts[1:]):
        if g0 >= target:
            return b0
        if g1 >= target:
            return b0 + (b1 - b0) * (target - g0) / (g1 - g0)
    return None


_CURVES = {}


def hbm_needed(plat, model, network, log=print):
    """Per engine, the least budget at which one all-reduce of the model's gradients (at
    most 64 MiB) reaches a target network bandwidth, and the ratio npu / engine, for targets
    of 90% and 50% of the lesser of the two engines' best bandwidths."""
    nbytes = min(gradient_bytes(model), 64 << 20)
    key = (plat, nbytes, network)
    if key not in _CURVES:
        _CURVES[key] = {e: [(b, allreduce_gbps(plat, e, nbytes, b, network))
                            for b in BUDGETS] for e in ("npu", "offload")}
    curve = _CURVES[key]
    best = min(max(g for _, g in c) for c in curve.values())
    ratios, need = {}, {}
    for frac in (0.9, 0.5):
        need[frac] = {e: _crossing(pts, frac * best) for e, pts in curve.items()}
        ratios[frac] = need[frac]["npu"] / need[frac]["offload"]
    for e, pts in curve.items():
        log(f"  {plat} {model}: {e} all-reduce GB/s per NPU by budget: "
            + ", ".join(f"{b:g}:{g:.1f}" for b, g in pts) + f"; {0.9 * best:.1f} GB/s needs "
            f"{need[0.9][e]:.1f} GB/s", flush=True)
    return ratios, curve, need


FREE = 100        # the breakdown's units made free: sms and reduce_gbps x FREE (see below)


def breakdown(plat, model, per_npu, network, best, eng):
    """Where the best baseline's iteration loses to the engine's, in cycles of one iteration,
    by a counterfactual run U of the same member with FREE times the SMs and FREE times the
    reduction rate (topology.npu.sms, topology.npu.reduce_gbps): U's collectives hold the
    same units, reduce at the same rate on the same budget and schedule, but their holds cost
    compute k / (FREE sms) of peak instead of k / sms.

    - held_units: the baseline's iteration over U's (what the SMs the collectives hold cost
      the iteration, whether on compute's path or hidden under communication);
    - hbm_sharing: U's compute time over the engine's (chiefly the NPU-run collective's 3.5
      bytes of HBM per network byte, against the engine's about 1.07, taken from compute's
      memory traffic; also compute overlapping a longer collective);
    - exposed_comm: U's exposed communication over the engine's (the collective's own
      schedule and rate: its chunks, its budget, its reductions).

    An iteration is its compute_cycles plus its exposed_comm_cycles, so the three add up to
    the difference of the iterations (`other`: what they leave, 0 when that holds).
    """
    sms = SETTINGS.get("topology.npu.sms", endpoint.SMS["v100"])
    red = SETTINGS.get("topology.npu.reduce_gbps", REDUCE_GBPS)
    u = training(plat, model, "npu", per_npu, network, best["comm_sms"],
                 best["comm_hbm_gbps"], extra={"topology.npu.sms": sms * FREE,
                                               "topology.npu.reduce_gbps": red * FREE},
                 chunks=best["chunks"])
    out = dict(held_units=best["iteration_cycles"] - u["iteration_cycles"],
               hbm_sharing=u["compute_cycles"] - eng["compute_cycles"],
               exposed_comm=u["exposed_comm_cycles"] - eng["exposed_comm_cycles"])
    out["other"] = (best["iteration_cycles"] - eng["iteration_cycles"] - sum(out.values()))
    out["units_free"] = {k: u[k] for k in ("iteration_cycles", "compute_cycles",
                                            "exposed_comm_cycles",
                                            "comm_network_gbps_per_npu")}
    return out


def study(plat, model, per_npu, network, log=print, sweep_hbm=True, family=None,
          decompose=False, chunks=None):
    """The engine against the best of the baseline family (comm_sms x comm_hbm_gbps
    members, each run at every chunk count of `chunks`, default the one of
    workload.chunks). With several chunk counts the row also gives the speed-up over the
    best member at the default count (`speedup_over_best_baseline_at_default_chunks`)."""
    family = family or list(itertools.product(COMM_SMS, COMM_HBM))
    counts = chunks or [None]
    rows = [training(plat, model, "npu", per_npu, network, s, h,
                     chunks=c) for s, h in family for c in counts]
    for r in rows:
        log(f"  {plat} {model} npu sms {r['comm_sms']:>2} hbm {r['comm_hbm_gbps']:>5g} "
            f"chunks {r['chunks']:>2}: "
            f"{r['iteration_ms']:.3f} ms (period {r['period_ms']:.3f}), "
            f"{r['comm_network_gbps_per_npu']:.1f} GB/s "
            f"({r['wall_seconds']:.1f} s)", flush=True)
    eng = training(plat, model, "offload", per_npu, network)
    log(f"  {plat} {model} offload: {eng['iteration_ms']:.3f} ms (period {eng['period_ms']:.3f}), "
        f"{eng['comm_network_gbps_per_npu']:.1f} GB/s ({eng['wall_seconds']:.1f} s)")
    best = min(rows, key=lambda r: r["iteration_ms"])
    best_period = min(rows, key=lambda r: r["period_ms"])
    out = dict(platform=plat, model=model, per_npu=per_npu, network=network,
               speedup_over_best_baseline=best["iteration_ms"] / eng["iteration_ms"],
               best_baseline=dict(comm_sms=best["comm_sms"],
                                  comm_hbm_gbps=best["comm_hbm_gbps"], chunks=best["chunks"]),
               best_baseline_ms=best["iteration_ms"], engine_ms=eng["iteration_ms"],
               net_bw_ratio=(eng["comm_network_gbps_per_npu"] /
                             best["comm_network_gbps_per_npu"]
                             if best["comm_network_gbps_per_npu"] else None),
               paper_speedup=PAPER[model], baselines=rows, engine=eng,
               iterations=ITERATIONS,
               period_speedup_over_best_baseline=best_period["period_ms"] / eng["period_ms"],
               best_baseline_by_period=dict(comm_sms=best_period["comm_sms"],
                                            comm_hbm_gbps=best_period["comm_hbm_gbps"],
                                            chunks=best_period["chunks"]),
               best_baseline_period_ms=best_period["period_ms"],
               engine_period_ms=eng["period_ms"])
    default = SETTINGS.get("workload.chunks", CHUNKS)
    at_default = [r for r in rows if r["chunks"] == default]
    if chunks and at_default:
        d = min(at_default, key=lambda r: r["iteration_ms"])
        dp = min(at_default, key=lambda r: r["period_ms"])
        out.update(speedup_over_best_baseline_at_default_chunks=d["iteration_ms"] /
                   eng["iteration_ms"],
                   period_speedup_over_best_baseline_at_default_chunks=dp["period_ms"] /
                   eng["period_ms"],
                   best_baseline_at_default_chunks=dict(comm_sms=d["comm_sms"],
                                                        comm_hbm_gbps=d["comm_hbm_gbps"],
                                                        chunks=d["chunks"]))
    if decompose:
        out["loss_breakdown_cycles"] = b = breakdown(plat, model, per_npu, network, best, eng)
        log(f"  {plat} {model} ({per_npu} per NPU): the best baseline's "
            f"{best['iteration_cycles'] - eng['iteration_cycles']:,} cycles over the engine: "
            + ", ".join(f"{k} {v:,}" for k, v in b.items() if not k.startswith("units_free")),
            flush=True)
    if sweep_hbm:
        ratios, curve, need = hbm_needed(plat, model, network, log)
        out.update(hbm_for_same_net_bw_ratio=ratios[0.9],
                   hbm_for_same_net_bw_ratio_by_target={str(k): v for k, v in ratios.items()},
                   hbm_needed_gbps={str(k): v for k, v in need.items()},
                   hbm_sweep={e: [list(p) for p in c] for e, c in curve.items()})
    return out


def _member(b):
    """A baseline member as the tables give it: SMs, GB/s (and its chunks, if not 4)."""
    c = b.get("chunks")
    return f"{b['comm_sms']}, {b['comm_hbm_gbps']:g}" + \
        (f", {c} chunks" if c not in (None, CHUNKS) else "")


def _at_default(r, digits):
    """The speed-up over the best member at 4 chunks, where the family had more counts."""
    x = r.get("speedup_over_best_baseline_at_default_chunks")
    return "" if x is None else f"; at {CHUNKS} chunks {x:.{digits}f}x"


def table(rows):
    out = ["| platform | model (per NPU) | level | all-reduce | best baseline (SMs, GB/s) | "
           "best baseline (ms) | engine (ms) | speed-up (paper's mean) | network GB/s ratio | "
           "HBM for the same network GB/s, NPU / engine, at 90% (50%) of the NPU's best |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["best_baseline"]
        h = r.get("hbm_for_same_net_bw_ratio")
        by = r.get("hbm_for_same_net_bw_ratio_by_target") or {}
        hs = "-" if h is None else f"{h:.2f}x ({by['0.5']:.2f}x)"
        flit = (r.get("settings") or {}).get("network.flit_bytes")
        level = r["network"] + (f" ({flit}-byte flits)" if flit else "")
        alg = r.get("algorithm", "hierarchical")
        out.append(f"| {r['platform']} | {r['model']} ({r['per_npu']}) | {level} | {alg} | "
                   f"{_member(b)} | {r['best_baseline_ms']:.2f} | "
                   f"{r['engine_ms']:.2f} | {r['speedup_over_best_baseline']:.2f}x "
                   f"({r['paper_speedup']}x){_at_default(r, 2)} | {r['net_bw_ratio']:.2f}x | "
                   f"{hs} |")
    return "\n".join(out)


def breakdown_table(rows):
    """The rows with a loss breakdown: the best baseline's loss to the engine per iteration
    and its parts (ms at 1 GHz), with the engine's iteration as compute + exposed."""
    out = ["| platform | model (per NPU) | level | best baseline (SMs, GB/s) | speed-up | "
           "engine: compute + exposed comm (ms) | baseline's loss (ms) | held SMs | "
           "HBM sharing | exposed comm | other |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r.get("loss_breakdown_cycles")
        if not b:
            continue
        e, ms = r["engine"], 1e-6        # (cycles at 1 GHz)
        loss = b["held_units"] + b["hbm_sharing"] + b["exposed_comm"] + b["other"]
        out.append(f"| {r['platform']} | {r['model']} ({r['per_npu']}) | {r['network']} | "
                   f"{_member(r['best_baseline'])} | "
                   f"{r['speedup_over_best_baseline']:.3f}x{_at_default(r, 3)} | "
                   f"{e['compute_cycles'] * ms:.2f} + {e['exposed_comm_cycles'] * ms:.2f} | "
                   f"{loss * ms:.3f} | {b['held_units'] * ms:.3f} | "
                   f"{b['hbm_sharing'] * ms:.3f} | {b['exposed_comm'] * ms:.3f} | "
                   f"{b['other'] * ms:.3f} |")
    return "\n".join(out) if len(out) > 2 else ""


def _positive_ints(ap, option, text, example):
    """A comma-separated option of positive integers (None if not given); anything else is a
    usage error naming the option and its value."""
    if text is None:
        return None
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        ap.error(f"{option} {text!r}: expected positive integers, as {example}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--platform", default="torus4x4,torus4x4x4")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--network", default="flow",
                    help="flow, flit, or both: flow,flit")
    ap.add_argument("--combine", nargs="+", default=None, metavar="JSON",
                    help="join the rows of these earlier runs' JSON files; run nothing")
    ap.add_argument("--per-npu", default=None,
                    help="samples per NPU for every model, or a sweep of them: 32,16,8,4,2,1 "
                         "(default: 2, 4, 64)")
    ap.add_argument("--decompose", action="store_true",
                    help="split the best baseline's loss to the engine into compute slowed "
                         "by held SMs, by HBM sharing, and exposed communication")
    ap.add_argument("--no-hbm-sweep", action="store_true",
                    help="skip the memory-budget sweep of one all-reduce")
    ap.add_argument("--baselines", default=None,
                    help="the baseline family as SMSxGBPS,... (default: 2,4,8,16,32,48,64 "
                         "x 45,90,225,450,900)")
    ap.add_argument("--chunks", default=None,
                    help="run every baseline member at each of these chunk counts (as "
                         "4,8,16,32), the best over all of them compared; default: "
                         "workload.chunks alone")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration override for every run (repeatable)")
    ap.add_argument("--iterations", type=int, default=2,
                    help="training iterations per run (at least 2; default 2): the last is "
                         "reported, and the mean period over those after the first")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "ace.json"))
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.iterations < 2:
        ap.error(f"--iterations {a.iterations}: expected at least 2")
    global ITERATIONS
    ITERATIONS = a.iterations
    for kv in a.set:
        if "=" not in kv:
            ap.error(f"--set {kv!r}: expected KEY=VALUE")
        k, v = kv.split("=", 1)
        SETTINGS[k.strip()] = _value(v.strip())
    levels = a.network.split(",")
    if any(x not in ("flit", "flow") for x in levels):
        ap.error(f"--network {a.network!r}: expected flow, flit or flow,flit")
    check(ap, a.force, [("--json", a.json)],
          inputs=[("a --combine file", p) for p in a.combine or ()])
    from provenance import provenance
    prov = provenance()                  # the load average as the runs begin
    rows = []
    if a.combine:
        for path in a.combine:
            with open(path) as f:
                d = json.load(f)
            for r in d["rows"]:
                r.setdefault("settings", d.get("settings", {}))
                r.setdefault("run", {k: d.get(k) for k in ("date", "commit", "dirty",
                                                           "version", "load_average")})
                rows.append(r)
    per_npu = _positive_ints(ap, "--per-npu", a.per_npu or None, "32,16,8")
    family = None
    if a.baselines is not None:
        try:
            family = [(int(s), float(h)) for s, h in (x.split("x") for x in
                                                     a.baselines.split(","))]
        except ValueError:
            family = []
        if not family or min(min(f) for f in family) <= 0:
            ap.error(f"--baselines {a.baselines!r}: expected SMSxGBPS pairs of positive "
                     f"numbers, as 16x900,48x450")
    chunks = _positive_ints(ap, "--chunks", a.chunks, "4,8,16,32")
    for plat in ([] if a.combine else a.platform.split(",")):
        for model, level, per in itertools.product(a.models.split(","), levels,
                                                   per_npu or [None]):
            r = study(plat, model, per or MODELS[model], level,
                      sweep_hbm=not a.no_hbm_sweep, family=family, decompose=a.decompose,
                      chunks=chunks)
            r["settings"] = dict(SETTINGS)
            r["algorithm"] = SETTINGS.get("workload.algorithm", ALGORITHM)
            rows.append(r)
            print(f"{plat} {model} ({r['per_npu']} per NPU): speed-up over the best baseline "
                  f"{r['speedup_over_best_baseline']:.3f}x (by the mean period over "
                  f"{ITERATIONS} iterations: {r['period_speedup_over_best_baseline']:.3f}x), "
                  f"network GB/s ratio "
                  f"{r['net_bw_ratio']:.2f}, HBM for the same network GB/s "
                  f"{r.get('hbm_for_same_net_bw_ratio')}", flush=True)
    md = table(rows)
    bd = breakdown_table(rows)
    md = md + ("\n\n" + bd if bd else "")
    print(md)
    write_json(a.json, dict(benchmark="ace", **prov, settings=SETTINGS, rows=rows, table=md,
                            paper=PAPER,
                            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                            load_average_after=list(os.getloadavg())))


if __name__ == "__main__":
    main()
