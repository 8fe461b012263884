"""Memory-virtualisation studies (not tests): the reproductions of docs/memory.md.

    python bench/memory.py [--study lms|karma|comet|all] [--out bench/results/memory.json]

- lms:   the largest batch of ResNet-152 (fp32) that trains on one 16 GB V100, with every
         stash kept in HBM and with LMS swapping to host memory over NVLink (an AC922-like
         CPU-GPU link of 3 x 25 GB/s);
- karma: KARMA against LMS, recomputation and vDNN-style offload on models that do not fit
         one 16 GB V100 (host memory over PCIe gen3 x16, 16 GB/s, as on x86 servers);
- comet: peak memory and iteration time with COMET-style compression of the stashes, alone
         and joined to offload, against no compression.

Each run is one training iteration of one NPU (its layers' forward and backward ops as a
chain of compute ops timed by the NPU's roofline, pysim.workload.memory.chain) with the
memory plan's ops and holds, simulated as an op graph. Every run prints its wall time.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import pysim  # noqa: E402
from pysim import models  # noqa: E402
from pysim.config import KEY_MAP, from_dict  # noqa: E402
from pysim.models.presets import npu_spec  # noqa: E402
from pysim.topology import build  # noqa: E402
from pysim.workload import OpGraph, run_graph  # noqa: E402
from pysim.workload.graph import GraphError  # noqa: E402
from pysim.workload.memory import (GraphSink, NpuWork, apply, chain, estimate,  # noqa: E402
                                   layer_costs, resident_bytes)

FLOW = "network.model" in KEY_MAP


def fidelity():
    """The network model the studies use: the flow level when the simulator has it, else
    the flit level at a coarse clock (1 cycle = 100 ns, 2 KiB flits), which keeps the
    transfers' bandwidth exact and rounds every latency up to 100 ns."""
    if FLOW:
        return dict(network={"model": "flow"}), "flow level (network.model = 'flow')"
    return (dict(network={"clock_ghz": 0.01, "flit_bytes": 2048, "vcs": 2,
                          "vc_buffer_flits": 8}),
            "flit level, coarse: 1 cycle = 100 ns, 2 KiB flits")


def one_gpu(link_gbps, links=1, hbm_gb=16.0, dram_gb=512.0, **memory):
    """One V100 (datasheet preset, hbm_gb of HBM) and its host's DRAM over `links` links of
    link_gbps each way."""
    net, _ = fidelity()
    bw = link_gbps * links
    nodes = [{"name": "gpu0", "kind": "npu", "preset": "v100", "hbm_gb": hbm_gb,
              "injection_gbps": bw, "ejection_gbps": bw},
             {"name": "cpu0", "kind": "host", "dram_gb": dram_gb, "dram_gbps": 170.0,
              "injection_gbps": bw, "ejection_gbps": bw}]
    links_ = [{"a": "gpu0", "b": "cpu0", "gbps": link_gbps, "count": links,
               "latency_ns": 200.0}]
    workload = {"kind": "graph", "mem_piece_bytes": 64 << 20, "packet_flits": 64}
    if memory:
        workload["memory"] = memory
    return from_dict({"topology": {"kind": "graph", "nodes": nodes, "links": links_},
                      "workload": workload, **net})


def iteration(cfg, model, batch, precision="fp32", run=True):
    """One iteration of `model` at `batch` on gpu0 with cfg's memory plan: the result's
    numbers, or the refusal when a device is over its capacity."""
    topo = build(cfg)
    spec = npu_spec(cfg, topo, "gpu0")
    costs = layer_costs(model, spec, precision, batch, cfg.network.clock_ghz)
    res = resident_bytes(model, precision)
    g = OpGraph()
    start = g.delay(0)
    sk = chain(GraphSink(g, {}), "gpu0", costs, after=[start])
    end = g.delay(0, after=[sk.order[-1]])
    t0 = time.perf_counter()
    applied = apply(cfg, topo, g, {"gpu0": NpuWork(costs, [sk], res, start, end)})
    plan = applied.plans["gpu0"]
    pred = estimate(plan, costs, applied.budgets["gpu0"])
    swapped = sum(c.stash_bytes for c, a in zip(costs, plan.action) if a == "swap")
    out = dict(model=model.name, batch=batch, policy=cfg.workload.memory.policy,
               plan=plan.counts(), chosen=plan.chosen, predicted_seconds=pred.cycles /
               (cfg.network.clock_ghz * 1e9), predicted_peak_gb=pred.peak / 1e9,
               predicted_fits=pred.fits, swapped_gb=swapped / 1e9,
               stash_gb=sum(c.stash_bytes for c in costs) / 1e9, resident_gb=res / 1e9,
               ops=len(g))
    if not run:
        return out
    try:
        r = run_graph(cfg, g)
    except GraphError as e:
        out.update(fits=False, error=str(e), wall_seconds=time.perf_counter() - t0)
        return out
    mem = r.memory["devices"]
    out.update(fits=True, iteration_seconds=r.makespan_cycles / (cfg.network.clock_ghz * 1e9),
               peak_gb={d: v["peak_bytes"] / 1e9 for d, v in mem.items()},
               offloaded_gb=mem.get("gpu0", {}).get("offloaded_bytes", 0) / 1e9,
               recomputed_gflop=applied.recomputed_flops.get("gpu0", 0.0) / 1e9,
               wall_seconds=time.perf_counter() - t0)
    return out


def largest_batch(fits, lo=1, hi=4096):
    """The largest batch in [lo, hi] for which fits(batch), by doubling then bisection."""
    if not fits(lo):
        return 0
    b = lo
    while b * 2 <= hi and fits(b * 2):
        b *= 2
    step = b // 2
    while step >= 1:
        if b + step <= hi and fits(b + step):
            b += step
        step //= 2
    return b


def study_lms(log, host_gb=256.0):
    """ResNet-152, fp32, SGD, one 16 GB V100: the largest batch that trains without and with
    LMS (host memory over 3 NVLinks, 75 GB/s each way; host_gb of host DRAM for this GPU).
    The batch is searched with the plans' predictions (HBM within its capacity, LMS's
    auto-tuned plan within its budget, the stashes swapped within the host's DRAM), then
    the batch found is simulated, stepping down until the run fits, and the next batch up
    is simulated to show it does not."""
    m = models.get("resnet152")
    rows = []
    for policy in ("none", "lms"):
        cfg = one_gpu(25.0, links=3, dram_gb=host_gb, policy=policy)

        def predicted(b):
            r = iteration(cfg, m, b, run=False)
            return r["predicted_peak_gb"] <= 16.0 and r["predicted_fits"] or (
                policy == "none" and r["predicted_peak_gb"] <= 16.0) if (
                r["swapped_gb"] <= host_gb) else False

        b = largest_batch(predicted)
        at = iteration(cfg, m, b)
        while not at.get("fits") and b > 1:
            log(f"lms: {policy}: batch {b} predicted to fit does not: {at['error'][:120]}")
            b = int(b * 0.97)
            at = iteration(cfg, m, b)
        above = iteration(cfg, m, b + 1)
        rows.append(dict(policy=policy, largest_batch=b, host_gb=host_gb, at=at,
                         above=above))
        log(f"lms: {policy}: largest batch {b}, simulated: "
            f"{at.get('iteration_seconds', float('nan')):.3f} s per iteration, peak "
            f"{at.get('peak_gb')}; batch {b + 1}: fits {above.get('fits')}; "
            f"{at['wall_seconds'] + above['wall_seconds']:.1f} s wall")
    return rows


KARMA_MODELS = [("resnet50", 256, {}), ("resnet152", 128, {}), ("bert_large", 32, {}),
                ("gpt2", 8, {"size": "medium"})]


def study_karma(log):
    """Models that do not fit one 16 GB V100 (mixed precision for the transformers), each
    with KARMA, LMS, recomputation and vDNN-style offload to host memory over PCIe
    (16 GB/s): iteration time, and KARMA's speedup over the best of the others that fit."""
    rows = []
    for name, batch, params in KARMA_MODELS:
        m = models.get(name, **params)
        prec = "fp32" if name.startswith("resnet") else "mixed"
        row = dict(model=name, batch=batch, precision=prec, runs={})
        for policy in ("none", "karma", "lms", "recompute", "offload"):
            cfg = one_gpu(16.0, policy=policy)
            r = iteration(cfg, m, batch, prec)
            row["runs"][policy] = r
            log(f"karma: {name} b={batch} {policy}: fits {r.get('fits')}, "
                f"{r.get('iteration_seconds', float('nan')):.3f} s, {r['plan']}, "
                f"{r['wall_seconds']:.1f} s wall")
        others = [r["iteration_seconds"] for p, r in row["runs"].items()
                  if p not in ("none", "karma") and r.get("fits")]
        k = row["runs"]["karma"]
        row["speedup_over_best"] = (min(others) / k["iteration_seconds"]
                                    if others and k.get("fits") else None)
        rows.append(row)
    return rows


COMET_MODELS = [("resnet50", 64), ("resnet152", 32)]


def study_comet(log):
    """Peak HBM and iteration time with the stashes compressed (COMET: convolutions' at
    15x by default, compressor 100 GB/s and decompressor 200 GB/s on the NPU), kept in HBM
    and joined to offload, against no compression."""
    rows = []
    for name, batch in COMET_MODELS:
        m = models.get(name)
        row = dict(model=name, batch=batch, runs={})
        for policy in ("none", "compression", "offload", "offload+compression"):
            cfg = one_gpu(16.0, hbm_gb=80.0, policy=policy)
            r = iteration(cfg, m, batch)
            row["runs"][policy] = r
            log(f"comet: {name} b={batch} {policy}: peak {r.get('peak_gb', {}).get('gpu0')}"
                f" GB, {r.get('iteration_seconds', float('nan')):.3f} s, "
                f"{r['wall_seconds']:.1f} s wall")
        base, comp = row["runs"]["none"], row["runs"]["compression"]
        row["memory_saved_x"] = base["peak_gb"]["gpu0"] / comp["peak_gb"]["gpu0"]
        row["time_cost_x"] = comp["iteration_seconds"] / base["iteration_seconds"]
        rows.append(row)
    return rows


# MC-DLA: eight applications, data parallel on the 8 NPUs, at a global batch (8 x the
# per-NPU batch) whose stashes take about 1.25 x a 16 GB V100's HBM on each NPU
MCDLA_APPS = [("alexnet", {}, 32768), ("vgg16", {}, 1536), ("googlenet", {}, 4096),
              ("inception_v3", {}, 1280), ("resnet50", {}, 1280), ("resnet152", {}, 640),
              ("gnmt", {}, 3584), ("transformer", {"layers": 12, "hidden": 1024, "heads": 16,
                                                  "seq": 512, "vocab": 32000}, 320)]
# and model parallel: Megatron-style tensor parallelism over the 8 NPUs, and an 8-stage
# GPipe pipeline of 8 micro-batches
MCDLA_MP = [("transformer", {"layers": 12, "hidden": 1024, "heads": 16, "seq": 512,
                             "vocab": 32000}, 320, {"tp": 8}),
            ("gnmt", {}, 3584, {"pp": 8, "micro_batches": 8, "schedule": "gpipe"})]
MCDLA_SYSTEMS = [("DC-DLA", "dgx1-v100"), ("HC-DLA", "hcdla-8"), ("MC-DLA", "mcdla-8")]


def training_config(system, model, params, batch, policy="offload", **extra):
    """A data-parallel training iteration of `model` on the shipped `system` with V100-like
    NPUs of 16 GB and the memory plan `policy`, at the studies' network fidelity."""
    net, _ = fidelity()
    over = {"workload.kind": "training", "workload.model": model, "workload.batch": batch,
            "workload.iterations": 1, "workload.memory.policy": policy,
            "workload.mem_piece_bytes": 64 << 20, "workload.packet_flits": 64,
            "topology.npu.preset": "v100", "topology.npu.hbm_gb": 16.0}
    if params:
        over["workload.model_params"] = params
    for sec, body in net.items():
        for k, v in body.items():
            if k != "vc_buffer_flits":
                over[f"{sec}.{k}"] = v
    over.update(extra)
    return pysim.load(system, over)


def run_training(cfg):
    t = time.perf_counter()
    try:
        r = pysim.simulate(cfg).to_dict()
    except pysim.ConfigError as e:
        return dict(fits=False, error=str(e), wall_seconds=time.perf_counter() - t)
    mem = r.get("memory", {}).get("devices", {})
    npus = {k: v for k, v in mem.items() if v["kind"] == "npu"}
    return dict(fits=True, iteration_seconds=r["iteration_seconds"],
                samples_per_second=r["samples_per_second"],
                exposed_comm_seconds=r["exposed_comm_cycles"] / (cfg.network.clock_ghz * 1e9),
                peak_hbm_gb=max(v["peak_bytes"] for v in npus.values()) / 1e9,
                offloaded_gb_per_npu=max(v["offloaded_bytes"] for v in npus.values()) / 1e9,
                remote_peak_gb={k: v["peak_bytes"] / 1e9 for k, v in mem.items()
                                if v["kind"] != "npu"},
                wall_seconds=time.perf_counter() - t)


def study_mcdla(log, apps=None, mp=None, layers="all"):
    """MC-DLA (Kwon and Rhu, MICRO 2018): eight applications trained data parallel on 8
    V100-like NPUs (16 GB) with vDNN-style offload of every stash, on DC-DLA (host memory
    over PCIe), HC-DLA (host memory over NVLink) and MC-DLA (memory nodes on the device-side
    rings): iteration time, and the speedup over DC-DLA."""
    rows = []
    cases = [(n, p, b, {}) for n, p, b in (MCDLA_APPS if apps is None else apps)] + \
        list(MCDLA_MP if mp is None else mp)
    for name, params, batch, parallel in cases:
        row = dict(model=name, params=params, batch=batch, parallel=parallel or {"dp": 8},
                   layers=layers, runs={})
        for label, system in MCDLA_SYSTEMS:
            extra = {"workload.parallel": parallel} if parallel else {}
            if layers != "all":
                extra["workload.memory.layers"] = layers
            r = run_training(training_config(system, name, params, batch, **extra))
            row["runs"][label] = r
            log(f"mcdla: {name} {parallel or 'dp'} b={batch} {label}: "
                f"{r.get('iteration_seconds', float('nan')):.3f}"
                f" s, HBM peak {r.get('peak_hbm_gb', float('nan')):.1f} GB, "
                f"{r.get('offloaded_gb_per_npu', float('nan')):.1f} GB out per NPU, "
                f"{r['wall_seconds']:.1f} s wall" + ("" if r["fits"] else f" {r['error'][:200]}"))
        # the bound: every stash kept in an HBM large enough, on MC-DLA's network
        extra = {"workload.parallel": parallel} if parallel else {}
        ideal = run_training(training_config("mcdla-8", name, params, batch, policy="none",
                                             **{**extra, "topology.npu.hbm_gb": 1000.0}))
        row["ideal"] = ideal
        log(f"mcdla: {name} {parallel or 'dp'} b={batch} every stash in HBM: "
            f"{ideal.get('iteration_seconds', float('nan')):.3f} s")
        base = row["runs"]["DC-DLA"]
        row["speedup"] = {k: base["iteration_seconds"] / v["iteration_seconds"]
                          for k, v in row["runs"].items() if v.get("fits") and base.get("fits")}
        rows.append(row)
    sp = [r["speedup"]["MC-DLA"] for r in rows if "MC-DLA" in r["speedup"]
          and r["parallel"] == {"dp": 8}]
    if sp:
        geo = float(np.exp(np.mean(np.log(sp))))
        log(f"mcdla: MC-DLA over DC-DLA: geometric mean {geo:.2f}x, arithmetic "
            f"{float(np.mean(sp)):.2f}x over {len(sp)} applications")
    return rows


def study_mcdla_conv(log):
    """The same data-parallel runs with vDNN's other policy: only convolutions' stashes
    offloaded (layers = 'conv')."""
    return study_mcdla(log, mp=[], layers="conv")


STUDIES = {"mcdla": study_mcdla, "mcdla_conv": study_mcdla_conv, "lms": study_lms,
           "karma": study_karma, "comet": study_comet}


def tables(out):
    """Markdown tables of a results JSON (as docs/memory.md shows them)."""
    lines = []
    st = out["studies"]
    for key in ("mcdla", "mcdla_conv"):
        if key not in st:
            continue
        lines += [f"study {key}", "",
                  "| application | parallel | batch | DC-DLA (s) | HC-DLA (s) | MC-DLA (s) | "
                  "MC over DC | HC over DC | offloaded per NPU (GB) | every stash in HBM (s) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in st[key]["rows"]:
            runs = r["runs"]
            t = {k: (f"{v['iteration_seconds']:.2f}" if v.get("fits") else "does not fit")
                 for k, v in runs.items()}
            sp = r.get("speedup", {})
            par = " x ".join(f"{k} {v}" for k, v in r.get("parallel", {"dp": 8}).items()
                             if k in ("dp", "tp", "pp"))
            lines.append(f"| {r['model']} | {par} | {r['batch']} | {t['DC-DLA']} | "
                         f"{t['HC-DLA']} | {t['MC-DLA']} | "
                         f"{sp.get('MC-DLA', float('nan')):.2f}x | "
                         f"{sp.get('HC-DLA', float('nan')):.2f}x | "
                         f"{runs['MC-DLA'].get('offloaded_gb_per_npu', float('nan')):.1f} | "
                         f"{(r.get('ideal') or {}).get('iteration_seconds', float('nan')):.2f} |")
        lines.append("")
    if "karma" in st:
        lines += ["study karma", "", "| model | batch | none | KARMA | LMS | recompute | "
                  "offload (vDNN) | KARMA over the best other | KARMA's plan |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in st["karma"]["rows"]:
            runs = r["runs"]
            t = {k: (f"{v['iteration_seconds']:.3f} s" if v.get("fits") else "does not fit")
                 for k, v in runs.items()}
            k = runs["karma"]["plan"]
            lines.append(f"| {r['model']} | {r['batch']} | {t['none']} | {t['karma']} | "
                         f"{t['lms']} | {t['recompute']} | {t['offload']} | "
                         f"{r['speedup_over_best']:.2f}x | {k['keep']} kept, {k['swap']} "
                         f"swapped, {k['recompute']} recomputed |")
        lines.append("")
    if "comet" in st:
        lines += ["study comet", "", "| model | batch | policy | peak HBM (GB) | iteration (s) |",
                  "|---|---|---|---|---|"]
        for r in st["comet"]["rows"]:
            for p, v in r["runs"].items():
                lines.append(f"| {r['model']} | {r['batch']} | {p} | "
                             f"{v['peak_gb']['gpu0']:.2f} | {v['iteration_seconds']:.3f} |")
        lines.append("")
    if "lms" in st:
        lines += ["study lms", ""]
        for r in st["lms"]["rows"]:
            a = r["at"]
            lines.append(f"- {r['policy']}: largest batch {r['largest_batch']}, "
                         f"{a.get('iteration_seconds', float('nan')):.3f} s per iteration, "
                         f"peak {a.get('peak_gb')}, next batch fits: "
                         f"{(r.get('above') or {}).get('fits')}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--study", default="all", choices=list(STUDIES) + ["all"])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "memory.json"))
    ap.add_argument("--tables", metavar="JSON", help="print the Markdown tables of a results "
                                                     "file and exit")
    a = ap.parse_args()
    if a.tables:
        with open(a.tables) as f:
            print(tables(json.load(f)))
        return
    _, fid = fidelity()

    def log(msg):
        print(msg, flush=True)

    from provenance import provenance
    out = dict(fidelity=fid, **provenance(), studies={})
    for name, fn in STUDIES.items():
        if a.study in (name, "all"):
            t = time.perf_counter()
            out["studies"][name] = dict(rows=fn(log), wall_seconds=time.perf_counter() - t)
            log(f"{name}: {out['studies'][name]['wall_seconds']:.1f} s wall ({fid})")
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_average_at_end"] = list(os.getloadavg())
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(f"written {a.out}")


if __name__ == "__main__":
    main()
