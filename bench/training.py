"""Training-iteration benchmark (not a test): data-parallel ResNet-50, 2 iterations of a batch
of 256 on the 8 NPUs of the shipped DGX-1, at flit level; wall time split into building the
op graph and running it, simulated cycles per second, flit-hops per second, cycles skipped
(nothing in flight), peak memory. Writes JSON.

    python bench/training.py [--engine npu|offload] [--repeat 1] [--out bench/results/training.json]
"""
import argparse
import os
import resource
import time

from outputs import FORCE, check, write_json

import pysim
from pysim.topology import build as build_topology
from pysim.workload.graph import run_graph
from pysim.workload.training import training_graph, training_report

HERE = os.path.dirname(os.path.abspath(__file__))
TOPO = os.path.join(HERE, "..", "topologies")


def config(engine="npu", model="resnet50", batch=256, iterations=2):
    return pysim.load(os.path.join(TOPO, "dgx1-v100.toml"), {
        "workload.kind": "training", "workload.model": model, "workload.batch": batch,
        "workload.iterations": iterations, "workload.engine": engine})


def one(cfg):
    t0 = time.perf_counter()
    topo = build_topology(cfg)
    graph, plan = training_graph(cfg, topo)
    t_build = time.perf_counter() - t0
    res = run_graph(cfg, graph)
    wall = time.perf_counter() - t0
    rep = training_report(graph, plan, res, cfg)
    cycles = res.makespan_cycles
    return dict(wall_seconds=wall, build_seconds=t_build,
                run_seconds=wall - t_build, ops=len(graph),
                simulated_cycles=cycles, cycles_skipped=res.cycles_skipped,
                cycles_per_second=res.cycles_per_second,
                flit_hops=res.flit_hops,
                flit_hops_per_second=res.flit_hops / (wall - t_build),
                iteration_cycles=rep["iteration_cycles"],
                samples_per_second=rep["samples_per_second"],
                compute_cycles=rep["compute_cycles"],
                exposed_comm_cycles=rep["exposed_comm_cycles"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="npu", choices=["npu", "offload"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "training.json"))
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    check(ap, a.force, [("--out", a.out)])
    from provenance import provenance
    prov = provenance()                  # the load average as the runs begin
    cfg = config(a.engine)
    runs = []
    for _ in range(a.repeat):
        r = one(cfg)
        runs.append(r)
        print(f"resnet50 dp8 batch 256 x 2 iterations on dgx1-v100 ({a.engine}): "
              f"{r['wall_seconds']:.2f} s wall ({r['build_seconds']:.2f} s building "
              f"{r['ops']:,} ops), {r['simulated_cycles']:,} cycles "
              f"({r['cycles_skipped']:,} skipped), {r['cycles_per_second']:,.0f} cycles/s, "
              f"{r['flit_hops_per_second'] / 1e6:.1f} M flit-hops/s; iteration "
              f"{r['iteration_cycles']:,} cycles, {r['samples_per_second']:,.0f} samples/s")
    best = min(runs, key=lambda r: r["wall_seconds"])
    out = dict(benchmark="training",
               case="resnet50 data parallel, batch 256, 2 iterations, dgx1-v100, flit level",
               engine=a.engine, **prov, runs=runs, best=best,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               load_average_after=list(os.getloadavg()))
    print(f"peak memory {out['peak_rss_mb']:.0f} MB")
    write_json(a.out, out)


if __name__ == "__main__":
    main()
