"""Reproduction of MAPA's headline on a DGX-1 V100 (Ranganath et al., "MAPA: Multi-Accelerator
Pattern Allocation Policy for Multi-Tenant GPU Servers", SC 2021): against the baseline
policy, the pattern-aware policy (preserve) makes the 75th-percentile job 12.4% faster and cuts
the worst-case execution time by up to 35%.

    python bench/mapa.py [--jobs 1000] [--seed 1] [--workers 2] [--model flow]
                         [--out bench/results/mapa.json] [--figure docs/jobs-mapa-dgx1.png]
                         [--cache shapes.sqlite]

A stream from MAPA's generator (2-5 GPUs, its six networks, rings, 500-2,400 iterations, all
jobs queued at time 0 as MAPA's simulator runs them) on the dgx1-v100 preset under the four
policies; each job's time from its training iterations simulated on the GPUs it got, with the
jobs it shares links with. Prints, per policy, the execution-time statistics and the per-job
speedup over baseline (a job's time under baseline / under the policy: its 75th percentile is
the paper's "75th percentile of jobs") and the worst case relative to baseline, beside the
paper's numbers; wall time, simulations, simulated cycles/s, flit-hops/s, peak memory; writes
JSON and the CDF figure.
"""
import argparse
import json
import os
import platform
import resource
import sys
import time

PAPER = {"p75_speedup": 1.124, "worst_reduction": 0.35}


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--model", default=None, help="network.model (flit level by default)")
    ap.add_argument("--server", default="dgx1-v100")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=os.path.join(here, "results", "mapa.json"))
    ap.add_argument("--figure", default=os.path.join(here, "..", "docs", "jobs-mapa-dgx1.png"))
    a = ap.parse_args()
    from pysim.config import parse_override
    from pysim.jobs import load_server, run_stream
    from pysim.jobs.cache import Cache
    from pysim.plot import jobs_cdf
    over = {"jobs.count": a.jobs, "simulation.seed": a.seed}
    if a.model:
        over["network.model"] = a.model
    over.update(dict(parse_override(s) for s in a.sets))
    server = load_server(a.server, over)
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done, total):
        t = time.perf_counter() - t0
        if t - last[0] > 10 or done == total:
            last[0] = t
            print(f"  {done}/{total} jobs, {t:.0f} s", file=sys.stderr)
    cache = Cache(a.cache)
    res = run_stream(server, workers=a.workers, cache=cache, progress=progress)
    cache.close()
    wall = time.perf_counter() - t0
    d = res.to_dict()
    st = d["stats"]
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    print(res.summary())
    print()
    base = d["policies"]["baseline"]
    rows = []
    for name, p in d["policies"].items():
        rows.append(dict(policy=name, p75_speedup=p["speedup"]["p75"],
                         worst_reduction=1 - p["worst"] / base["worst"],
                         mean_reduction=1 - p["mean"] / base["mean"],
                         p75_exec_reduction=1 - p["p75"] / base["p75"]))
    print(f"{'policy':<12} {'p75 job speedup':>16} {'worst-case cut':>15} {'mean cut':>9}")
    for r in rows:
        print(f"{r['policy']:<12} {r['p75_speedup']:>16.3f} {r['worst_reduction']:>14.1%} "
              f"{r['mean_reduction']:>9.1%}")
    print(f"{'paper (MAPA)':<12} {PAPER['p75_speedup']:>16.3f} "
          f"{PAPER['worst_reduction']:>14.0%}   (up to)")
    mine = [r for r in rows if r["policy"] == "preserve"][0]
    print(f"ratio to the paper: p75 speedup {(mine['p75_speedup'] - 1) / 0.124:.2f} x of its "
          f"12.4%, worst-case cut {mine['worst_reduction'] / 0.35:.2f} x of its 35%")
    cps = st["sim_cycles"] / st["sim_wall_seconds"] if st["sim_wall_seconds"] else 0.0
    fhs = st["flit_hops"] / st["sim_wall_seconds"] if st["sim_wall_seconds"] else 0.0
    print(f"wall {wall:.1f} s, {st['simulations']} simulations ({st['together']} of jobs "
          f"together, {st['sim_wall_seconds']:.1f} s), cache hits {st['cache_hits']}, "
          f"{cps:,.0f} simulated cycles/s, {fhs / 1e6:.1f} M flit-hops/s, peak memory "
          f"{peak:.0f} MB (machine: {os.cpu_count()} cores, shared)")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(dict(bench="mapa", server=d["server"], jobs=a.jobs, seed=a.seed,
                       network_model=a.model or "flit", wall_seconds=wall, stats=st,
                       simulated_cycles_per_second=cps, flit_hops_per_second=fhs,
                       peak_memory_mb=peak, headline=rows, paper=PAPER,
                       policies=d["policies"], python=platform.python_version(),
                       version=d["version"], config=d["config"]), f, indent=1)
    if a.figure:
        jobs_cdf(d, a.figure, title=f"{d['server']}: {a.jobs} jobs (MAPA's generator), seed "
                                    f"{a.seed}")
        print(f"figure written to {a.figure}")
    print(f"results written to {a.out}")


if __name__ == "__main__":
    main()
