"""How good the run-time estimate is (not a test): collectives and training runs at both
levels, each with the engine's processor time beside what pysim.workload.runtime estimated
before the run (its rates times the run's flit-hops, flows and ops), and the rates a least-
squares fit of these runs gives. Prints a table and writes JSON with provenance.

    python bench/estimate.py [--out bench/results/estimate.json] [--quick]
"""
import argparse
import json
import os
import sys

from outputs import FORCE, check, write_json

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    ("ring8", {"workload.kind": "collective", "workload.bytes": 4 << 20}),
    ("ring8", {"workload.kind": "collective", "workload.bytes": 32 << 20}),
    ("torus4x4", {"workload.kind": "collective", "workload.bytes": 8 << 20,
                  "workload.collective": "all_to_all", "workload.algorithm": "direct"}),
    ("dgx1-v100", {"workload.kind": "training", "workload.model": "resnet50",
                   "workload.batch": 64, "workload.iterations": 1}),
    ("mcdla-8", {"workload.kind": "training", "workload.model": "alexnet",
                 "workload.batch": 64, "workload.iterations": 1}),
    ("gpu16-cubemesh", {"workload.kind": "training", "workload.model": "transformer",
                        "workload.model_params": {"layers": 2, "hidden": 512, "heads": 8,
                                                  "seq": 128},
                        "workload.batch": 32, "workload.parallel": {"tp": 2, "pp": 2},
                        "workload.iterations": 1}),
]


class Keep:
    """A progress callback that keeps the estimate."""
    est = None

    def __call__(self, now, last):
        pass

    def estimate(self, est):
        self.est = est


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "estimate.json"))
    ap.add_argument("--quick", action="store_true", help="the three collectives only")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args(argv)
    check(ap, a.force, [("--out", a.out)])
    import numpy as np
    import pysim
    sys.path.insert(0, HERE)
    from provenance import provenance
    started = provenance()
    rows = []
    for system, over in CASES[:3] if a.quick else CASES:
        for model in ("flit", "flow"):
            keep = Keep()
            r = pysim.simulate(pysim.load(system, {**over, "network.model": model}), keep)
            row = dict(system=system, workload=over, model=model,
                       engine_cpu_s=r.profile["cpu"]["engine"],
                       estimate_s=keep.est["seconds"][model], flit_hops=keep.est["flit_hops"],
                       sends=keep.est["sends"], ops=keep.est["ops"],
                       event_cycles=r.profile["event_cycles"])
            rows.append(row)
            what = over.get("workload.model", over.get("workload.collective", "all_reduce"))
            print(f"{system:<15} {what:<12} {model}  engine {row['engine_cpu_s']:8.3f} s  estimated "
                  f"{row['estimate_s']:8.3f} s", flush=True)
    fit = {}
    for model, cols in (("flit", ("flit_hops", "ops")), ("flow", ("sends", "ops"))):
        sel = [r for r in rows if r["model"] == model]
        A = np.array([[r[c] for c in cols] for r in sel], float)
        y = np.array([r["engine_cpu_s"] for r in sel])
        fit[model] = dict(zip(cols, np.linalg.lstsq(A, y, rcond=None)[0].tolist()))
    print("least-squares seconds per unit:", json.dumps(fit))
    write_json(a.out, dict(benchmark="estimate", **started, rows=rows, fit=fit))


if __name__ == "__main__":
    main()
