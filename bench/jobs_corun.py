"""How far the job streams' event loop is from simulating a stream whole.

The loop (pysim/jobs/loop.py) takes each job's speed as steady between events: alone, or
slowed by the jobs it shares links with, as measured by simulating them together for a few
iterations. Here a small stream is also simulated whole -- every iteration of every job in
one op graph on the server, with the loop's decisions (pysim/jobs/whole.py) -- and each job's
execution time compared, for jobs simulated together ('together') and for jobs each taken
alone ('apart').

    python bench/jobs_corun.py [--jobs 12] [--seeds 1,2,3,6] [--iterations 3:12]
                               [--policies baseline,preserve] [--model flow]
                               [--set KEY=VALUE ...] [--out bench/results/jobs_corun.json]

Prints per seed, policy and mode: mean and largest |error| of the jobs' execution times, the
error of the makespan, the simulations of jobs together, and the wall time of the loop and of
the whole simulation; writes JSON.
"""
import argparse
import os
import sys
import time

from outputs import FORCE, check, write_json

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--seeds", default="1,2,3,6")
    ap.add_argument("--iterations", default="3:12")
    ap.add_argument("--policies", default="baseline,preserve")
    ap.add_argument("--model", default=None,
                    help="network.model (job streams run at the flow level unless set)")
    ap.add_argument("--server", default="dgx1-v100")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=os.path.join(here, "results", "jobs_corun.json"))
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    check(ap, a.force, [("--out", a.out)])
    from pysim.config import parse_override
    from pysim.jobs import generate, load_server, run_stream
    from pysim.jobs.execute import training
    from pysim.jobs.whole import compare
    lo, hi = (int(x) for x in a.iterations.split(":"))
    policies = a.policies.split(",")
    rows = []
    for seed in [int(x) for x in a.seeds.split(",")]:
        for corun in ("together", "apart"):
            over = {"jobs.count": a.jobs, "simulation.seed": seed, "jobs.min_iterations": lo,
                    "jobs.max_iterations": hi, "jobs.policies": policies, "jobs.corun": corun}
            if a.model:
                over["network.model"] = a.model
            over.update(dict(parse_override(x) for x in a.sets))
            server = load_server(a.server, over)
            jobs = generate(server.cfg)
            t = time.perf_counter()
            res = run_stream(server, jobs)
            t_loop = time.perf_counter() - t
            for p in policies:
                t = time.perf_counter()
                cmp_ = compare(server, jobs, res, training, p)
                t_whole = time.perf_counter() - t
                err = np.array([r["error"] for r in cmp_])
                mk_l = max(r["loop_end_s"] for r in cmp_)
                mk_w = max(r["whole_end_s"] for r in cmp_)
                row = dict(seed=seed, corun=corun, policy=p,
                           mean_abs_error=float(abs(err).mean()),
                           max_abs_error=float(abs(err).max()),
                           makespan_error=(mk_l - mk_w) / mk_w, loop_seconds=t_loop,
                           whole_seconds=t_whole,
                           together_simulations=res.stats["together"], jobs=cmp_)
                rows.append(row)
                print(f"seed {seed} {corun:<9} {p:<10} |error| mean "
                      f"{row['mean_abs_error']:.2%} max {row['max_abs_error']:.2%}, makespan "
                      f"{row['makespan_error']:+.2%}; loop {t_loop:.1f} s "
                      f"({row['together_simulations']} together), whole {t_whole:.1f} s",
                      flush=True)
    for corun in ("together", "apart"):
        sel = [r for r in rows if r["corun"] == corun]
        print(f"{corun}: over {len(sel)} runs, mean |error| "
              f"{np.mean([r['mean_abs_error'] for r in sel]):.2%}, largest "
              f"{max(r['max_abs_error'] for r in sel):.2%}, makespan within "
              f"{max(abs(r['makespan_error']) for r in sel):.2%}")
    from provenance import provenance
    write_json(a.out, dict(bench="jobs_corun", **provenance(), argv=sys.argv[1:],
                           server=a.server, jobs=a.jobs, seeds=a.seeds,
                           iterations=[lo, hi], network_model=a.model or "flow", sets=a.sets,
                           rows=rows))


if __name__ == "__main__":
    main()
