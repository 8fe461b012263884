"""Sweep scaling benchmark (not a test): a 20-point latency-load sweep of the 8x8 mesh with
one local worker, then with two; prints both wall times and their ratio, writes JSON.

    python bench/sweep_scaling.py [--out bench/results/sweep_scaling.json]
"""
import argparse
import json
import os
import tempfile
import time

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
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = run(1, tmp)
        two = run(2, tmp)
    ratio = two / one
    print(f"20-point latency-load sweep, mesh8x8: 1 worker {one:.2f} s, 2 workers {two:.2f} s, "
          f"ratio {ratio:.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        from provenance import provenance
        json.dump(dict(benchmark="sweep_scaling", **provenance(), one_worker_s=one,
                       two_workers_s=two, ratio=ratio), f, indent=1)


if __name__ == "__main__":
    main()
