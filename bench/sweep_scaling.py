"""Sweep scaling benchmark (not a test): a 20-point latency-load sweep of the 8x8 mesh with
one local worker, then with two; prints both wall times and their ratio, writes JSON.

    python bench/sweep_scaling.py [--out bench/results/sweep_scaling.json]
"""
import argparse
import os
import tempfile
import time

import outputs

import pysim

MESH = os.path.join(os.path.dirname(__file__), "..", "topologies", "mesh8x8.toml")


def run(jobs, tmp):
    grid = {"traffic.injection_rate": [round(0.01 * i, 2) for i in range(1, 21)]}
    t = time.perf_counter()
    rows = pysim.sweep(MESH, grid, jobs=jobs, db=os.path.join(tmp, f"j{jobs}.sqlite"))
    wall = time.perf_counter() - t
    assert len(rows) == 20 and all(r["status"] != "failed" for r in rows)
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "sweep_scaling.json"))
    ap.add_argument("--force", action="store_true", help=outputs.FORCE)
    a = ap.parse_args()
    outputs.check(ap, a.force, [("--out", a.out)])
    with tempfile.TemporaryDirectory() as tmp:
        one = run(1, tmp)
        two = run(2, tmp)
    ratio = two / one
    print(f"20-point latency-load sweep, mesh8x8: 1 worker {one:.2f} s, 2 workers {two:.2f} s, "
          f"ratio {ratio:.2f}")
    from provenance import provenance
    outputs.write_json(a.out, dict(benchmark="sweep_scaling", **provenance(), one_worker_s=one,
                                   two_workers_s=two, ratio=ratio))


if __name__ == "__main__":
    main()
