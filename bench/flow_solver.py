"""The flow level's max-min solver under many concurrent flows (a benchmark, not a test).

    python bench/flow_solver.py [--sizes 1024,4096,16384] [--flows-per-npu 1,4,8]
                                [--pattern uniform,neighbour] [--out FILE]

Each case runs in a fresh process: a 3-D torus of N NPUs (the sizes of bench/scale.py: 100 GB/s
links of 20 ns, 2 VCs) and a synthetic op graph of many concurrent flows, at the flow level.
Every NPU runs k chains (k = flows per NPU), each a random delay of 0-10,000 cycles and then
one send of 256-1,024 KB (uniform in 32 KB steps) to a destination: any other NPU at random
(`uniform`: routes cross the whole torus, so the flows form one connected component of
shared links) or a torus neighbour (`neighbour`: small components). About N x k flows are
active at once, and they start and end at distinct cycles, so nearly every event changes
the flows of some component.

Reported per case: the engine's CPU seconds, the flow events and rate recomputations, the
pairs the recomputations covered (their mean is the size of the component an event
recomputes), the max-min solver's CPU seconds (measured inside the engine), its CPU per
recomputation and per pair recomputed, the time-averaged number of active flows, and the
Python phases of run_graph (profile). Writes JSON with provenance.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

from outputs import FORCE, check, write_json

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
TORUS = {64: [4, 4, 4], 256: [8, 8, 4], 1024: [16, 8, 8], 4096: [16, 16, 16],
         16384: [32, 32, 16]}


def graph(dims, k, pattern, seed=1):
    """The synthetic op graph (see the module docstring), built in bulk."""
    from pysim.workload import OpGraph
    n = int(np.prod(dims))
    rng = np.random.default_rng(seed)
    src = np.repeat(np.arange(n), k)
    if pattern == "uniform":
        dst = (src + rng.integers(1, n, src.size)) % n
    else:                         # a neighbour along a random dimension and direction
        coord = np.stack(np.unravel_index(src, dims, order="F"))
        d = rng.integers(0, len(dims), src.size)
        step = rng.choice([-1, 1], src.size)
        dd = np.asarray(dims)[d]
        coord[d, np.arange(src.size)] = (coord[d, np.arange(src.size)] + step) % dd
        dst = np.ravel_multi_index(coord, dims, order="F")
    names = [f"n{'_'.join(str(c) for c in xy)}" for xy in
             zip(*np.unravel_index(np.arange(n), dims, order="F"))]
    m = src.size
    g = OpGraph()
    first = g.add_ops(["delay"] * m, [names[s] for s in src], [None] * m,
                      rng.integers(0, 10001, m).tolist(), [[]] * m)
    g.add_ops(["send"] * m, [names[s] for s in src], [names[d] for d in dst],
              (rng.integers(8, 33, m) * 32768).tolist(),
              [[first + i] for i in range(m)])
    return g


def one(n, k, pattern):
    import pysim
    from pysim.workload import run_graph
    dims = TORUS[n]
    path = os.path.join("/tmp", f"flow_solver_torus_{os.getpid()}.toml")
    with open(path, "w") as f:
        f.write('[topology]\nkind = "torus"\nlink_gbps = 100.0\nlink_latency_ns = 20.0\n'
                '[network]\nflit_bytes = 32\nvcs = 2\nvc_buffer_flits = 32\n')
    cfg = pysim.load(path, {"topology.dims": dims, "workload.kind": "graph",
                            "network.model": "flow"})
    os.unlink(path)
    t = time.perf_counter()
    g = graph(dims, k, pattern)
    build = time.perf_counter() - t
    r = run_graph(cfg, g)
    p = r.profile
    f = r.flow
    sends = np.asarray([i for i in range(len(g)) if g.kind[i] == "send"])
    start = np.asarray(r.ops.start)[sends] if hasattr(r.ops, "start") else \
        np.asarray([r.ops[i]["start"] for i in sends])
    finish = np.asarray(r.ops.finish)[sends] if hasattr(r.ops, "finish") else \
        np.asarray([r.ops[i]["finish"] for i in sends])
    active = float((finish - start).sum() / max(1, finish.max() - start.min()))
    rec = max(1, f["rate_recomputations"])
    return dict(npus=n, dims=dims, flows_per_npu=k, pattern=pattern, flows=f["flows_started"],
                mean_active_flows=active, makespan_cycles=r.makespan_cycles,
                events=p["events"], rate_recomputations=f["rate_recomputations"],
                pairs_recomputed=f["pairs_recomputed"],
                pairs_per_recomputation=f["pairs_recomputed"] / rec,
                solver_seconds=p["solver_seconds"], solver_fallbacks=p["solver_fallbacks"],
                solver_rounds=p["solver_rounds"], solver_work=p["solver_work"],
                solver_full_work=p["solver_full_work"],
                pairs_changed=p["pairs_changed"],
                rounds_per_recomputation=p["solver_rounds"] / rec,
                entries_per_recomputation=p["solver_work"] / rec,
                changed_per_recomputation=p["pairs_changed"] / rec,
                engine_cpu_seconds=p["cpu"]["engine"],
                solver_us_per_recomputation=1e6 * p["solver_seconds"] / rec,
                solver_ns_per_pair=1e9 * p["solver_seconds"] / max(1, f["pairs_recomputed"]),
                build_seconds=build, cpu=p["cpu"],
                peak_memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        print(json.dumps(one(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,4096,16384")
    ap.add_argument("--flows-per-npu", default="1,4")
    ap.add_argument("--pattern", default="uniform,neighbour")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default=None)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    path = a.out or os.path.join(HERE, "results", "flow_solver.json")
    check(ap, a.force, [("--out", path)])
    rows = []
    for pattern in a.pattern.split(","):
        for n in (int(x) for x in a.sizes.split(",")):
            for k in (int(x) for x in a.flows_per_npu.split(",")):
                t = time.perf_counter()
                try:
                    out = subprocess.run([sys.executable, __file__, "child", str(n), str(k),
                                          pattern], capture_output=True, text=True,
                                         timeout=a.timeout)
                except subprocess.TimeoutExpired:
                    row = dict(npus=n, flows_per_npu=k, pattern=pattern,
                               timeout_seconds=a.timeout)
                    print(f"{pattern:>9} {n:>6} NPUs x {k}: timed out after {a.timeout:.0f} s",
                          flush=True)
                    rows.append(row)
                    continue
                if out.returncode != 0:
                    raise SystemExit(out.stderr)
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["wall_seconds"] = time.perf_counter() - t
                rows.append(row)
                print(f"{pattern:>9} {n:>6} NPUs x {k}: {row['flows']:>7,} flows, "
                      f"{row['mean_active_flows']:>9,.0f} active, "
                      f"{row['rate_recomputations']:>7,} recomputations of "
                      f"{row['pairs_per_recomputation']:>9,.0f} pairs "
                      f"({row['changed_per_recomputation']:,.0f} changed, "
                      f"{row['rounds_per_recomputation']:.1f} rounds, "
                      f"{row['entries_per_recomputation']:,.0f} entries, "
                      f"{row['solver_full_work'] / max(1, row['solver_work']):.0%} in "
                      f"fallbacks); solver "
                      f"{row['solver_seconds']:8.2f} s = "
                      f"{row['solver_us_per_recomputation']:9.1f} us/recomputation, "
                      f"{row['solver_ns_per_pair']:6.1f} ns/pair, "
                      f"{row['solver_fallbacks']} fallbacks; engine "
                      f"{row['engine_cpu_seconds']:7.2f} s; wall {row['wall_seconds']:.1f} s, "
                      f"{row['peak_memory_mb']:.0f} MB", flush=True)
    from provenance import provenance
    res = dict(benchmark="flow solver", rows=rows, **provenance(), argv=sys.argv[1:])
    write_json(path, res)


if __name__ == "__main__":
    main()
