"""Memory-virtualisation studies (not tests): the reproductions of docs/memory.md, each at
its paper's setting where the paper gives it (and with the assumptions stated where not).

    python bench/memory.py [--study mcdla|mcdla_conv|mcdla_dynamic|mcdla_sens|vdnn|karma|comet|
                            lms|all]
                           [--out bench/results/memory.json] [--tables JSON]

- mcdla: MC-DLA (Kwon and Rhu, MICRO 2018): eight applications, data parallel on 8 V100-like
         NPUs (16 GB), fp32, vDNN-style offload (all tensors; _conv: those convolutions keep;
         _dynamic: vDNN's dynamic choice), on DC-DLA (host memory over PCIe at an effective
         DMA rate of 12 GB/s, two GPUs per switch), HC-DLA and MC-DLA (memory nodes of
         150 GB/s and 1.28 TB each on the device-side rings: 150 GB/s per device);
- mcdla_sens: what moves MC-DLA's speed-up: DC-DLA's PCIe rate (12 or 16 GB/s) and sharing
         (two GPUs per switch or a link each), and the batch (less over-subscribed), under
         vDNN's dynamic policy on VGG-16 and ResNet-50;
- vdnn:  vDNN (Rhu et al., MICRO 2016): VGG-16 (batch 256), AlexNet and GoogLeNet (128) on a
         Titan-X-like NPU (12 GB, 6.1 TFLOPS fp32, 336 GB/s) behind PCIe (12 GB/s), its
         three policies against an NPU with memory enough;
- karma: KARMA (Wahib et al., SC20): a node of 4 V100s (16 GB), NVLink between them, two per
         PCIe switch (12 GB/s each way, shared), data parallel over two such nodes with the
         optimizer on the hosts; its six models (ResNet-50, VGG-16, ResNet-200, ResNet-1001,
         WRN-28-10 and a Megatron-LM-like transformer) over-subscribed about 2x, KARMA
         against vDNN-style offload, LMS and gradient checkpointing;
- comet: COMET-style compression of the kept tensors (convolutions', batch norms', ReLUs'
         and poolings' at an assumed 15x; compressor 100 GB/s and decompressor 200 GB/s,
         each a roofline op that reads S and writes S/r of HBM), alone and joined to offload;
- lms:   the largest batch of ResNet-152 (fp32) on one 16 GB V100 with and without LMS over
         an AC922-like NVLink to the host, convolution workspaces counted.

All at the flow level (network.model = 'flow'), each memory transfer one flow. Every run
prints its wall time.
"""
import argparse
import json
import os
import resource
import sys
import time

from outputs import FORCE, check, write_json

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import pysim  # noqa: E402
from memory_tables import tables  # noqa: E402
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


def one_gpu(link_gbps, links=1, hbm_gb=16.0, dram_gb=512.0, npu=None, **memory):
    """One V100 (datasheet preset, hbm_gb of HBM; `npu`: other fields of the node, e.g. a
    Titan X's) and its host's DRAM over `links` links of link_gbps each way."""
    net, _ = fidelity()
    bw = link_gbps * links
    gpu = npu or {"preset": "v100"}
    nodes = [{"name": "gpu0", "kind": "npu", **gpu, "hbm_gb": hbm_gb,
              "injection_gbps": bw, "ejection_gbps": bw},
             {"name": "cpu0", "kind": "host", "dram_gb": dram_gb, "dram_gbps": 170.0,
              "injection_gbps": bw, "ejection_gbps": bw}]
    links_ = [{"a": "gpu0", "b": "cpu0", "gbps": link_gbps, "count": links,
               "latency_ns": 200.0}]
    workload = {"kind": "graph", "packet_flits": 64}
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


LMS_WORKSPACE_MB = (0.0, 256.0)   # per convolution op (256 MiB: an assumed cuDNN workspace)


def study_lms(log, host_gb=256.0):
    """ResNet-152, fp32, SGD, one 16 GB V100: the largest batch that trains without and with
    LMS (host memory over 3 NVLinks, 75 GB/s each way; host_gb of host DRAM for this GPU),
    without and with a workspace held by every convolution op.
    The batch is searched with the plans' predictions (HBM within its capacity, LMS's
    auto-tuned plan within its budget, the stashes swapped within the host's DRAM), then
    the batch found is simulated, stepping down until the run fits, and the next batch up
    is simulated to show it does not."""
    m = models.get("resnet152")
    rows = []
    for ws, policy in [(w, p) for w in LMS_WORKSPACE_MB for p in ("none", "lms")]:
        cfg = one_gpu(25.0, links=3, dram_gb=host_gb, policy=policy, workspace_mb=ws)

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
                         above=above, workspace_mb=ws))
        log(f"lms: {policy}, workspace {ws} MiB: largest batch {b}, simulated: "
            f"{at.get('iteration_seconds', float('nan')):.3f} s per iteration, peak "
            f"{at.get('peak_gb')}; batch {b + 1}: fits {above.get('fits')}; "
            f"{at['wall_seconds'] + above['wall_seconds']:.1f} s wall")
    return rows


PCIE_DMA_GBPS = 12.0     # assumed: DMA over PCIe gen3 x16 (16 GB/s nominal) at pinned-copy rates


def system_cfg(name, edit=None, **over):
    """A shipped system (by name) as its TOML table, changed by edit(raw), with dotted
    overrides, at the studies' network fidelity."""
    from pysim import systems
    from pysim.config import apply_override, read_toml
    path = systems.resolve(name)
    raw = read_toml(path, "config file")
    if edit is not None:
        edit(raw)
    net, _ = fidelity()
    for sec, body in net.items():
        for k, v in body.items():
            apply_override(raw, f"{sec}.{k}", v)
    for k, v in over.items():
        apply_override(raw, k, v)
    return from_dict(raw, base_dir=os.path.dirname(path), source=path)


def pcie_at(gbps):
    """An edit: every link to a PCIe switch at gbps (an effective DMA rate)."""
    def edit(raw):
        for link in raw["topology"]["links"]:
            if "pcie" in link["a"] or "pcie" in link["b"]:
                link["gbps"] = gbps
    return edit


def memory_nodes(gbps, capacity_gb):
    """An edit: every memory node's controller at gbps, capacity_gb of DRAM."""
    def edit(raw):
        raw["topology"]["mem"] = {"gbps": gbps, "capacity_gb": capacity_gb, "latency_ns": 50.0}
    return edit


def run_training(cfg):
    t = time.perf_counter()
    try:
        r = pysim.simulate(cfg).to_dict()
    except pysim.ConfigError as e:
        return dict(fits=False, error=str(e), wall_seconds=time.perf_counter() - t)
    mem = r.get("memory", {}).get("devices", {})
    npus = {k: v for k, v in mem.items() if v["kind"] == "npu"}
    plans = r.get("memory", {}).get("plans", {})
    first = plans[sorted(plans)[0]] if plans else {}
    return dict(fits=True, iteration_seconds=r["iteration_seconds"],
                samples_per_second=r["samples_per_second"],
                exposed_comm_seconds=r["exposed_comm_cycles"] / (cfg.network.clock_ghz * 1e9),
                peak_hbm_gb=max(v["peak_bytes"] for v in npus.values()) / 1e9,
                offloaded_gb_per_npu=max(v["offloaded_bytes"] for v in npus.values()) / 1e9,
                remote_peak_gb={k: v["peak_bytes"] / 1e9 for k, v in mem.items()
                                if v["kind"] != "npu"},
                plan=first.get("layers"), chosen=first.get("chosen"),
                recomputed_gflop=sum(v.get("recomputed_flops", 0.0)
                                     for v in npus.values()) / 1e9 / max(1, len(npus)),
                wall_seconds=time.perf_counter() - t)


def training(system, model, params, batch, policy, precision="fp32", edit=None, **extra):
    """A training iteration on `system` (V100-like NPUs of 16 GB) with the memory plan
    `policy`."""
    over = {"workload.kind": "training", "workload.model": model, "workload.batch": batch,
            "workload.iterations": 1, "workload.memory.policy": policy,
            "workload.packet_flits": 64, "workload.precision": precision,
            "topology.npu.preset": "v100", "topology.npu.hbm_gb": 16.0}
    if params:
        over["workload.model_params"] = params
    over.update(extra)
    return system_cfg(system, edit, **over)


# --------------------------------------------------------------------------- MC-DLA
# eight applications of the paper's kinds (CNNs, an RNN, a transformer), fp32, data parallel
# on 8 NPUs; per-NPU batches whose kept tensors take about 1.25 x a 16 GB V100's HBM (the
# paper's batches are not given), VGG-16 at 256 per NPU (vDNN's batch)
MCDLA_APPS = [("alexnet", {}, 5376), ("vgg16", {}, 256), ("googlenet", {}, 560),
              ("inception_v3", {}, 192), ("resnet50", {}, 224), ("resnet152", {}, 112),
              ("gnmt", {}, 416), ("transformer", {"layers": 12, "hidden": 1024, "heads": 16,
                                                  "seq": 512, "vocab": 32000}, 20)]
MCDLA_SYSTEMS = [("DC-DLA", "dgx1-v100", pcie_at(PCIE_DMA_GBPS)), ("HC-DLA", "hcdla-8", None),
                 ("MC-DLA", "mcdla-8", memory_nodes(150.0, 1280.0))]


def study_mcdla(log, layers="all", apps=None, systems=MCDLA_SYSTEMS):
    """MC-DLA against DC-DLA and HC-DLA: per application the iteration time on each, with
    vDNN's policy `layers` (all, conv, dynamic), and every tensor kept in an HBM large
    enough (on MC-DLA's network) as the bound."""
    rows = []
    for name, params, per_npu in (MCDLA_APPS if apps is None else apps):
        batch = 8 * per_npu
        row = dict(model=name, params=params, batch=batch, per_npu=per_npu, layers=layers,
                   runs={})
        for label, system, edit in systems:
            r = run_training(training(system, name, params, batch, "offload", edit=edit,
                                      **{"workload.memory.layers": layers}))
            row["runs"][label] = r
            log(f"mcdla[{layers}]: {name} {per_npu}/NPU {label}: "
                f"{r.get('iteration_seconds', float('nan')):.3f} s, HBM peak "
                f"{r.get('peak_hbm_gb', float('nan')):.1f} GB, "
                f"{r.get('offloaded_gb_per_npu', float('nan')):.1f} GB out per NPU, "
                f"{(r.get('chosen') or {}).get('layers', layers)}, "
                f"{r['wall_seconds']:.1f} s wall" + ("" if r["fits"] else f" {r['error'][:200]}"))
        ideal = run_training(training("mcdla-8", name, params, batch, "none",
                                      **{"topology.npu.hbm_gb": 1000.0}))
        row["ideal"] = ideal
        base = row["runs"]["DC-DLA"]
        row["speedup"] = {k: base["iteration_seconds"] / v["iteration_seconds"]
                          for k, v in row["runs"].items() if v.get("fits") and base.get("fits")}
        rows.append(row)
    sp = [r["speedup"]["MC-DLA"] for r in rows if "MC-DLA" in r["speedup"]]
    if sp:
        log(f"mcdla[{layers}]: MC-DLA over DC-DLA: arithmetic mean {float(np.mean(sp)):.2f}x, "
            f"geometric {float(np.exp(np.mean(np.log(sp)))):.2f}x over {len(sp)} applications")
    return rows


def pcie_dedicated(gbps):
    """An edit: every GPU's PCIe link at gbps and each switch's uplink at twice that, the
    hosts' NICs and DRAM wide enough, so that each GPU has its gbps to host memory
    whatever its neighbour does."""
    def edit(raw):
        for link in raw["topology"]["links"]:
            ends = (link["a"], link["b"])
            if any("pcie" in e for e in ends):
                link["gbps"] = 2 * gbps if any(e.startswith("cpu") for e in ends) else gbps
        for nd in raw["topology"]["nodes"]:
            if nd.get("kind") == "host":
                nd.update(dram_gbps=200.0, injection_gbps=200.0, ejection_gbps=200.0)
    return edit


# what moves MC-DLA's speed-up over DC-DLA: DC-DLA's PCIe (its rate, its sharing) and the
# over-subscription (the per-NPU batch), on two applications under vDNN's dynamic policy
MCDLA_SENS_APPS = [("vgg16", {}, 256), ("resnet50", {}, 224)]
MCDLA_SENS_CASES = [
    ("DC-DLA, PCIe 12 GB/s, two GPUs per switch", "dgx1-v100", pcie_at(PCIE_DMA_GBPS), 1.0),
    ("DC-DLA, PCIe 16 GB/s (nominal), two GPUs per switch", "dgx1-v100", pcie_at(16.0), 1.0),
    ("DC-DLA, PCIe 12 GB/s per GPU, dedicated", "dgx1-v100", pcie_dedicated(PCIE_DMA_GBPS),
     1.0),
    ("MC-DLA", "mcdla-8", memory_nodes(150.0, 1280.0), 1.0),
    ("DC-DLA, PCIe 12 GB/s, two GPUs per switch", "dgx1-v100", pcie_at(PCIE_DMA_GBPS), 0.75),
    ("MC-DLA", "mcdla-8", memory_nodes(150.0, 1280.0), 0.75),
]


def study_mcdla_sens(log):
    """MC-DLA's speed-up as its causes vary: DC-DLA's PCIe rate and sharing, and the batch
    (three quarters of the study's: less over-subscribed), vDNN's dynamic policy."""
    rows = []
    for name, params, per_npu in MCDLA_SENS_APPS:
        for label, system, edit, scale in MCDLA_SENS_CASES:
            per = int(per_npu * scale)
            r = run_training(training(system, name, params, 8 * per, "offload", edit=edit,
                                      **{"workload.memory.layers": "dynamic"}))
            rows.append(dict(model=name, per_npu=per, case=label, run=r))
            log(f"mcdla_sens: {name} {per}/NPU {label}: "
                f"{r.get('iteration_seconds', float('nan')):.3f} s, "
                f"{(r.get('chosen') or {}).get('layers')}, "
                f"{r.get('offloaded_gb_per_npu', float('nan')):.1f} GB out per NPU, "
                f"{r['wall_seconds']:.1f} s wall" + ("" if r["fits"] else f" {r['error'][:200]}"))
    return rows


def study_mcdla_pcie16(log):
    """vDNN's dynamic policy with DC-DLA's PCIe at its nominal 16 GB/s (two GPUs per
    switch), the rate the paper states, against MC-DLA."""
    return study_mcdla(log, "dynamic", systems=[
        ("DC-DLA", "dgx1-v100", pcie_at(16.0)), MCDLA_SYSTEMS[2]])


def study_mcdla_conv(log):
    return study_mcdla(log, "conv")


def study_mcdla_dynamic(log):
    return study_mcdla(log, "dynamic")


# --------------------------------------------------------------------------- vDNN
TITAN_X = {"tflops_fp32": 6.1, "hbm_gbps": 336.0}      # Maxwell GTX Titan X (2015) datasheet
VDNN_CASES = [("vgg16", 256), ("vgg16", 128), ("alexnet", 128), ("googlenet", 128)]


def study_vdnn(log):
    """vDNN on one Titan-X-like NPU (12 GB) behind PCIe (12 GB/s effective): per network and
    batch, the iteration with each of vDNN's policies against an NPU whose memory holds
    everything (the paper's oracular GPU), and the peak HBM each needs."""
    rows = []
    for name, batch in VDNN_CASES:
        m = models.get(name)
        row = dict(model=name, batch=batch, runs={})
        oracle = iteration(one_gpu(PCIE_DMA_GBPS, hbm_gb=1000.0, npu=TITAN_X), m, batch)
        row["runs"]["oracle"] = oracle
        for layers in ("all", "conv", "dynamic"):
            r = iteration(one_gpu(PCIE_DMA_GBPS, hbm_gb=12.0, npu=TITAN_X, policy="offload",
                                  layers=layers), m, batch)
            row["runs"][layers] = r
            log(f"vdnn: {name} b={batch} {layers}: fits {r.get('fits')}, "
                f"{r.get('iteration_seconds', float('nan')):.3f} s (oracle "
                f"{oracle['iteration_seconds']:.3f}), peak {r.get('peak_gb', {}).get('gpu0')} "
                f"GB, {r['wall_seconds']:.1f} s wall")
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- KARMA
def abci_nodes(n_nodes=2, pcie_gbps=PCIE_DMA_GBPS):
    """ABCI-like nodes: 4 V100s (16 GB) each, every pair joined by two NVLinks (50 GB/s),
    two GPUs per PCIe switch (pcie_gbps each way, shared by the two), the switches on the
    host (two sockets as one host of 384 GB), and one InfiniBand EDR port (12.5 GB/s) per
    switch to the nodes' common switch."""
    nodes, links = [{"name": "ib", "kind": "switch"}], []
    for k in range(n_nodes):
        host = f"n{k}cpu"
        nodes.append({"name": host, "kind": "host", "dram_gb": 384.0, "dram_gbps": 128.0,
                      "tflops": 2.0, "injection_gbps": 2 * pcie_gbps,
                      "ejection_gbps": 2 * pcie_gbps})
        gpus = [f"n{k}gpu{i}" for i in range(4)]
        for i, gname in enumerate(gpus):
            nodes.append({"name": gname, "kind": "npu", "preset": "v100", "hbm_gb": 16.0})
        for i in range(4):
            for j in range(i + 1, 4):
                links.append({"a": gpus[i], "b": gpus[j], "gbps": 25.0, "count": 2,
                              "latency_ns": 20.0})
        for s in range(2):
            sw = f"n{k}pcie{s}"
            nodes.append({"name": sw, "kind": "switch"})
            for gname in gpus[2 * s:2 * s + 2]:
                links.append({"a": gname, "b": sw, "gbps": pcie_gbps, "latency_ns": 100.0})
            links.append({"a": sw, "b": host, "gbps": pcie_gbps, "latency_ns": 100.0})
            links.append({"a": sw, "b": "ib", "gbps": 12.5, "latency_ns": 600.0})
    return {"kind": "graph", "nodes": nodes, "links": links}


# KARMA's six models. Per-GPU batches at which the training state and every kept tensor
# take about twice a 16 GB V100 (the paper's over-subscription factors are not given here:
# assumed); VGG-16 at 1.2x, as at twice its largest layer's working set alone (input,
# output and their gradients) leaves no room. ResNet-1001 and WRN-28-10 on CIFAR's 32 x 32
# images.
KARMA_MODELS = [("resnet50", {}, 368, "fp32"), ("vgg16", {}, 256, "fp32"),
                ("resnet200", {}, 120, "fp32"), ("resnet1001", {}, 208, "fp32"),
                ("wrn28_10", {}, 1696, "fp32"),
                ("transformer", {"layers": 24, "hidden": 1024, "heads": 16, "seq": 1024,
                                 "vocab": 51200}, 8, "mixed")]
KARMA_POLICIES = ("karma", "offload", "lms", "recompute")


def study_karma(log, n_nodes=2):
    """KARMA on ABCI-like nodes, data parallel over every GPU, gradients all-reduced over
    NVLink and InfiniBand; KARMA with the optimizer on the hosts (host_update), against
    vDNN-style offload, LMS and gradient checkpointing (optimizer on the GPUs), and every
    tensor kept in an HBM large enough (the bound)."""
    rows = []
    gpus = 4 * n_nodes
    net, _ = fidelity()
    for name, params, per_gpu, prec in KARMA_MODELS:
        row = dict(model=name, params=params, per_gpu=per_gpu, gpus=gpus, precision=prec,
                   runs={})
        for policy in ("ideal",) + KARMA_POLICIES:
            mem = {"policy": "none" if policy == "ideal" else policy}
            if policy == "karma":
                mem["host_update"] = True
            topo = abci_nodes(n_nodes)
            if policy == "ideal":
                for nd in topo["nodes"]:
                    if nd["kind"] == "npu":
                        nd["hbm_gb"] = 1000.0
            w = {"kind": "training", "model": name, "batch": per_gpu * gpus,
                 "iterations": 1, "precision": prec, "packet_flits": 64, "memory": mem,
                 "parallel": {"dp": gpus}}
            if params:
                w["model_params"] = params
            cfg = from_dict({"topology": topo, "workload": w, **net})
            r = run_training(cfg)
            row["runs"][policy] = r
            log(f"karma: {name} {per_gpu}/GPU x {gpus} {policy}: "
                f"{r.get('iteration_seconds', float('nan')):.3f} s, plan {r.get('plan')}, "
                f"{r['wall_seconds']:.1f} s wall" + ("" if r["fits"] else f" {r['error'][:160]}"))
        k = row["runs"]["karma"]

        def over(policies):
            t = [row["runs"][p]["iteration_seconds"] for p in policies
                 if row["runs"][p].get("fits")]
            return min(t) / k["iteration_seconds"] if t and k.get("fits") else None
        row["speedup_over_best"] = over(("offload", "lms", "recompute"))
        row["speedup_over_swapping"] = over(("offload", "lms"))
        row["speedup_over_checkpointing"] = over(("recompute",))
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- COMET
# CNNs of the kinds COMET evaluates (five CNNs on ImageNet; which five, and their batches,
# are assumed here), fp32
COMET_MODELS = [("alexnet", 256), ("vgg16", 32), ("resnet50", 64), ("resnet152", 32)]
COMET_RATIOS = (2.0, 5.0, 15.0, 50.0, 1000.0)      # the sweep on ResNet-50


def kept_saving(model, batch, ratio):
    """The kept tensors alone: their bytes over what they take compressed (the tensors of
    layers of the kinds in `ratio` divided by it, the others whole)."""
    costs = layer_costs(model, npu_spec(one_gpu(16.0), build(one_gpu(16.0)), "gpu0"),
                        "fp32", batch)
    full = sum(c.stash_bytes for c in costs)
    comp = sum(c.stash_bytes / ratio.get(c.kind, 1.0) for c in costs)
    return full / comp


def study_comet(log):
    """Peak HBM and iteration time with the kept tensors compressed (COMET-style, an assumed
    15x for convolutions', batch norms', element-wise and poolings' feature maps; compressor
    100 GB/s and decompressor 200 GB/s, each a roofline op of the NPU reading S and writing
    S/r), kept in HBM and joined to offload, against no compression; the kept tensors'
    own saving beside the whole HBM's; and on ResNet-50 the saving as the ratio grows (it
    is bounded by what does not compress)."""
    rows = []
    table = {k: 15.0 for k in ("conv", "norm", "eltwise", "pool")}
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
        row["kept_saved_x"] = kept_saving(m, batch, table)
        row["time_cost_x"] = comp["iteration_seconds"] / base["iteration_seconds"]
        rows.append(row)
    m = models.get("resnet50")
    base = next(r for r in rows if r["model"] == "resnet50")
    sweep = []
    for ratio in COMET_RATIOS:
        tab = {k: ratio for k in table}
        r = iteration(one_gpu(16.0, hbm_gb=80.0, policy="compression", ratio=tab), m, 64)
        sweep.append(dict(ratio=ratio, peak_gb=r["peak_gb"]["gpu0"],
                          memory_saved_x=base["runs"]["none"]["peak_gb"]["gpu0"] /
                          r["peak_gb"]["gpu0"], kept_saved_x=kept_saving(m, 64, tab),
                          iteration_seconds=r["iteration_seconds"]))
        log(f"comet: resnet50 b=64 ratio {ratio}: saved {sweep[-1]['memory_saved_x']:.2f}x "
            f"(kept tensors {sweep[-1]['kept_saved_x']:.2f}x)")
    rows.append(dict(model="resnet50", batch=64, sweep=sweep))
    return rows


STUDIES = {"mcdla": study_mcdla, "mcdla_conv": study_mcdla_conv,
           "mcdla_dynamic": study_mcdla_dynamic, "mcdla_sens": study_mcdla_sens,
           "mcdla_pcie16": study_mcdla_pcie16, "vdnn": study_vdnn, "lms": study_lms,
           "karma": study_karma, "comet": study_comet}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--study", default="all", choices=list(STUDIES) + ["all"])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "memory.json"))
    ap.add_argument("--tables", metavar="JSON", help="print the Markdown tables of a results "
                                                     "file and exit")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.tables:
        with open(a.tables) as f:
            print(tables(json.load(f)))
        return
    check(ap, a.force, [("--out", a.out)])
    _, fid = fidelity()

    def log(msg):
        print(msg, flush=True)

    from provenance import provenance
    studies = {}
    if a.study != "all" and os.path.exists(a.out):
        with open(a.out) as f:      # one study rerun (--force): the others' rows are kept
            studies = json.load(f).get("studies", {})
    out = dict(fidelity=fid, **provenance(), studies=studies)
    for name, fn in STUDIES.items():
        if a.study in (name, "all"):
            t = time.perf_counter()
            rows = fn(log)
            out["studies"][name] = dict(provenance(), rows=rows,
                                        wall_seconds=time.perf_counter() - t)
            log(f"{name}: {out['studies'][name]['wall_seconds']:.1f} s wall ({fid})")
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_average_at_end"] = list(os.getloadavg())
    write_json(a.out, out, default=str)


if __name__ == "__main__":
    main()
