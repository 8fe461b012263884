"""Reproduction of MAPA's headline on a DGX-1 V100 (Ranganath et al., "MAPA: Multi-Accelerator
Pattern Allocation Policy for Multi-Tenant GPU Servers", SC 2021): against the baseline
policy, the pattern-aware policy (preserve) makes the 75th-percentile job 12.4% faster and cuts
the worst-case execution time by up to 35%.

    python bench/mapa.py [--jobs 1000] [--seed 1] [--workers 2] [--model flow]
                         [--variants fp32-sync,fp32-overlap,mixed-sync] [--set KEY=VALUE]
                         [--out bench/results/mapa.json] [--figures bench/results]
                         [--cache shapes.sqlite]

A stream from MAPA's generator (2-5 GPUs, its six networks, rings, 500-2,400 iterations, all
jobs queued at time 0 as MAPA's simulator runs them) on the dgx1-v100 preset under the four
policies; each job's time from its training iterations simulated on the GPUs it got, with the
jobs it shares links with. Prints, per policy, the execution-time statistics and the per-job
speedup over baseline (a job's time under baseline / under the policy: its 75th percentile is
the paper's "75th percentile of jobs") and the worst case relative to baseline, beside the
paper's numbers; wall time, simulations, simulated cycles/s, flit-hops/s, peak memory; writes
JSON and the CDF figures. Variants say how jobs train: fp32 with the gradients exchanged after
the backward pass (as Caffe, which MAPA's jobs ran, does), fp32 with the exchange overlapping
the backward pass (buckets, as PyTorch DDP), and mixed precision exchanged after the backward
pass (compute 8x faster on the V100's tensor cores: communication weighs more).
"""
import argparse
import os
import resource
import sys
import time

from outputs import FORCE, check, write_json, wrote

PAPER = {"p75_speedup": 1.124, "worst_reduction": 0.35}

# how the jobs train: MAPA's jobs ran Caffe, which exchanges gradients after the backward pass
# (no overlap) in fp32; the other two bracket it
VARIANTS = {
    "fp32-sync": {"workload.overlap": False},
    "fp32-overlap": {},
    "mixed-sync": {"workload.overlap": False, "workload.precision": "mixed"},
}


FIGURES = ("fp32-sync", "mixed-sync")      # the variants docs/jobs.md shows


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--model", default=None,
                    help="network.model (job streams run at the flow level unless set)")
    ap.add_argument("--server", default="dgx1-v100")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=os.path.join(here, "results", "mapa.json"))
    ap.add_argument("--figures", default=os.path.join(here, "results"),
                    help="folder for the CDF figures (jobs-mapa-VARIANT.png); '' for none "
                         "(docs/figures/make.sh passes the docs' folder)")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    unknown = [v for v in a.variants.split(",") if v not in VARIANTS]
    if unknown:
        ap.error(f"--variants {a.variants!r}: {unknown[0]!r} unknown; expected some of "
                 f"{', '.join(VARIANTS)}")
    figures = [(f"--figures {a.figures}:", os.path.join(a.figures, f"jobs-mapa-{v}.png"))
               for v in a.variants.split(",") if a.figures and v in FIGURES]
    check(ap, a.force, [("--out", a.out)] + figures, inputs=[("the --cache database", a.cache)])
    from pysim.config import parse_override
    from pysim.jobs import load_server, run_stream
    from pysim.jobs.cache import Cache
    from pysim.plot import jobs_cdf
    from provenance import provenance
    out = dict(bench="mapa", server=a.server, jobs=a.jobs, seed=a.seed,
               network_model=a.model or "flow", paper=PAPER, variants={}, **provenance(),
               argv=sys.argv[1:])
    summary = []
    for name in a.variants.split(","):
        over = {"jobs.count": a.jobs, "simulation.seed": a.seed, **VARIANTS[name]}
        if a.model:
            over["network.model"] = a.model
        over.update(dict(parse_override(s) for s in a.sets))
        server = load_server(a.server, over)
        t0 = time.perf_counter()
        last = [0.0]

        def progress(done, total):
            t = time.perf_counter() - t0
            if t - last[0] > 30 or done == total:
                last[0] = t
                print(f"  {name}: {done}/{total} jobs, {t:.0f} s", file=sys.stderr)
        cache = Cache(a.cache)
        res = run_stream(server, workers=a.workers, cache=cache, progress=progress)
        cache.close()
        wall = time.perf_counter() - t0
        d = res.to_dict()
        st = d["stats"]
        print(f"== {name}: {VARIANTS[name] or 'the defaults'}")
        print(res.summary())
        base = d["policies"]["baseline"]
        rows = []
        for pol, p in d["policies"].items():
            rows.append(dict(policy=pol, p75_speedup=p["speedup"]["p75"],
                             worst_reduction=1 - p["worst"] / base["worst"],
                             mean_reduction=1 - p["mean"] / base["mean"],
                             p75_exec_reduction=1 - p["p75"] / base["p75"]))
        cps = st["sim_cycles"] / st["sim_wall_seconds"] if st["sim_wall_seconds"] else 0.0
        fhs = st["flit_hops"] / st["sim_wall_seconds"] if st["sim_wall_seconds"] else 0.0
        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
        print(f"wall {wall:.1f} s, {st['simulations']} simulations ({st['together']} of jobs "
              f"together, {st['sim_wall_seconds']:.1f} s), cache hits {st['cache_hits']}, "
              f"{cps:,.0f} simulated cycles/s, {fhs / 1e6:.1f} M flit-hops/s, peak memory "
              f"{peak:.0f} MB, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
              f"cores\n")
        out["variants"][name] = dict(overrides=VARIANTS[name], wall_seconds=wall, stats=st,
                                     simulated_cycles_per_second=cps,
                                     flit_hops_per_second=fhs, peak_memory_mb=peak,
                                     headline=rows, policies=d["policies"],
                                     version=d["version"], config=d["config"])
        mine = [r for r in rows if r["policy"] == "preserve"]
        if mine:
            summary.append((name, mine[0]))
        if a.figures and name in FIGURES:
            path = os.path.join(a.figures, f"jobs-mapa-{name}.png")
            jobs_cdf(d, path, title=f"{d['server']}, {name}: {a.jobs} jobs (MAPA's "
                                    f"generator), seed {a.seed}", force=True)    # (checked)
            wrote(path)
            print(f"figure written to {path}")
    print(f"{'preserve (MAPA) vs baseline':<28} {'p75 job speedup':>16} {'worst-case cut':>15}")
    for name, r in summary:
        print(f"{name:<28} {r['p75_speedup']:>16.3f} {r['worst_reduction']:>14.1%}")
    print(f"{'paper':<28} {PAPER['p75_speedup']:>16.3f} {PAPER['worst_reduction']:>14.0%} "
          f"(up to)")
    for name, r in summary:
        print(f"ratio to the paper ({name}): p75 speedup {(r['p75_speedup'] - 1) / 0.124:.2f}, "
              f"worst-case cut {r['worst_reduction'] / 0.35:.2f}")
    write_json(a.out, out)


if __name__ == "__main__":
    main()
