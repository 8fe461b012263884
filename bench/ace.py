"""Reproduction of the ACE study (Rashidi et al., "Enabling Compute-Communication Overlap in
Distributed Deep Learning Training Platforms", ISCA 2021): training iterations of ResNet-50
and GNMT (data parallel) and DLRM (embedding tables split over the NPUs with all-to-all, MLPs
data parallel), with the collectives run by the NPUs themselves (`workload.engine = "npu"`)
and by an offload engine beside each NPU (`"offload"`), on two platforms:

- torus4x4x4: the shipped 64-NPU 4x4x4 torus (32/16/16 GB/s per direction, ASTRA-sim's
  sample platform), hierarchical all-reduce (dimension by dimension);
- dgx1-v100: the shipped 8-GPU DGX-1 (NVLink hybrid cube-mesh), ring all-reduce over its
  double NVLinks.

Assumptions (the paper's exact NPU and engine parameters are not used here): V100-class NPUs
(topology.npu.preset = "v100": 125 TFLOP/s at 16 bits, 900 GB/s HBM), mixed precision, SGD
with momentum, per-NPU mini-batches of 32 (ResNet-50, GNMT) and 512 (DLRM), 25 MiB gradient
buckets issued as the backward pass produces them, 4 chunks per collective, the NPU's own
reductions at 450 GB/s, the engine's at 256 GB/s with 8 MiB of SRAM; 2 iterations, the last
reported. Writes JSON and a Markdown table (docs/training.md quotes it).

    python bench/ace.py [--platform torus4x4x4,dgx1-v100] [--models resnet50,gnmt,dlrm]
"""
import argparse
import json
import os
import platform as _platform
import resource
import time

import pysim

HERE = os.path.dirname(os.path.abspath(__file__))
TOPO = os.path.join(HERE, "..", "topologies")

PLATFORMS = {
    "torus4x4x4": ("torus4x4x4.toml", {"workload.algorithm": "hierarchical"}),
    "dgx1-v100": ("dgx1-v100.toml", {"workload.algorithm": "ring"}),
}
MODELS = {                     # per-NPU mini-batch
    "resnet50": 32,
    "gnmt": 32,
    "dlrm": 512,
}
PAPER = {"resnet50": 1.41, "gnmt": 1.12, "dlrm": 1.13}


def run(plat, model, engine, npus, iterations=2, pieces=16):
    path, over = PLATFORMS[plat]
    cfg = pysim.load(os.path.join(TOPO, path), {
        **over, "topology.npu.preset": "v100", "topology.npu.offload_pieces": pieces,
        "workload.kind": "training",
        "workload.model": model, "workload.batch": MODELS[model] * npus,
        "workload.precision": "mixed", "workload.engine": engine,
        "workload.iterations": iterations})
    t = time.perf_counter()
    r = pysim.simulate(cfg)
    d = r.to_dict()
    per = d["per_npu"].values()
    s_per_cycle = d["iteration_seconds"] / d["iteration_cycles"]
    net = sum(v["network_bytes"] for v in per)
    hbm_comm = sum(v["hbm_comm_bytes"] for v in per)
    return dict(platform=plat, model=model, engine=engine, npus=npus, offload_pieces=pieces,
                batch=MODELS[model] * npus,
                iteration_cycles=d["iteration_cycles"],
                iteration_ms=d["iteration_seconds"] * 1e3,
                compute_cycles=d["compute_cycles"], comm_cycles=d["comm_cycles"],
                exposed_comm_cycles=d["exposed_comm_cycles"],
                hbm_comm_bytes_per_network_byte=hbm_comm / net if net else 0.0,
                network_gbps_per_npu=net / len(d["per_npu"]) / d["iteration_seconds"] / 1e9,
                comm_network_gbps_per_npu=(net / len(d["per_npu"]) /
                                           (d["comm_cycles"] * s_per_cycle) / 1e9
                                           if d["comm_cycles"] else 0.0),
                wall_seconds=time.perf_counter() - t)


def table(rows):
    out = ["| platform | model | iteration, NPU (ms) | iteration, engine (ms) | speed-up "
           "(paper) | HBM per network byte, NPU / engine | network GB/s per NPU while "
           "communicating, NPU / engine (ratio; paper 1.44x on average) |",
           "|---|---|---|---|---|---|---|"]
    by = {(r["platform"], r["model"], r["engine"]): r for r in rows}
    for (plat, model, eng), a in by.items():
        if eng != "npu" or (plat, model, "offload") not in by:
            continue
        b = by[(plat, model, "offload")]
        sp = a["iteration_cycles"] / b["iteration_cycles"]
        ratio = b["comm_network_gbps_per_npu"] / a["comm_network_gbps_per_npu"] \
            if a["comm_network_gbps_per_npu"] else float("nan")
        out.append(f"| {plat} | {model} | {a['iteration_ms']:.2f} | {b['iteration_ms']:.2f} | "
                   f"{sp:.3f}x ({PAPER[model]}x) | {a['hbm_comm_bytes_per_network_byte']:.2f} / "
                   f"{b['hbm_comm_bytes_per_network_byte']:.2f} "
                   f"({a['hbm_comm_bytes_per_network_byte'] / max(b['hbm_comm_bytes_per_network_byte'], 1e-9):.2f}x less) | "
                   f"{a['comm_network_gbps_per_npu']:.1f} / {b['comm_network_gbps_per_npu']:.1f} "
                   f"({ratio:.2f}x) |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--platform", default=",".join(PLATFORMS))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--engines", default="npu,offload")
    ap.add_argument("--merge", nargs="*", default=None,
                    help="print the table of these earlier JSON outputs together, run nothing")
    ap.add_argument("--offload-pieces", type=int, default=16,
                    help="topology.npu.offload_pieces (fewer: larger pieces, smaller graphs)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "ace.json"))
    a = ap.parse_args()
    if a.merge:
        rows = [r for path in a.merge for r in json.load(open(path))["rows"]]
        print(table(rows))
        return
    rows = []
    for plat in a.platform.split(","):
        npus = 64 if plat == "torus4x4x4" else 8
        for model in a.models.split(","):
            for engine in a.engines.split(","):
                r = run(plat, model, engine, npus, a.iterations, a.offload_pieces)
                rows.append(r)
                print(f"{plat:>11} {model:>9} {engine:>8}: iteration {r['iteration_ms']:8.3f} ms"
                      f" (compute {r['compute_cycles'] / 1e6:.3f} ms, exposed comm "
                      f"{r['exposed_comm_cycles'] / 1e6:.3f} ms), HBM/network "
                      f"{r['hbm_comm_bytes_per_network_byte']:.2f}, "
                      f"{r['comm_network_gbps_per_npu']:.1f} GB/s per NPU while communicating;"
                      f" {r['wall_seconds']:.0f} s wall", flush=True)
    md = table(rows)
    print(md)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(dict(rows=rows, table=md, paper=PAPER,
                       peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                       machine=_platform.platform(), version=pysim.__version__), f, indent=1)
    print(f"written {a.out}")


if __name__ == "__main__":
    main()
