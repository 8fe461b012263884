"""Speed of the model zoo (not a test): time to build each zoo model's layer table and to
format it as `pysim models NAME` prints it, for every zoo model and for transformers of
100, 1,000 and 10,000 layers. Prints a table and writes JSON.

    python bench/models.py [--out bench/results/models.json] [--repeat 5]

Each case is timed --repeat times in one process, cases interleaved round by round so that
load from other work on the machine hits all of them alike; the median is reported. Peak
memory is the process's, after all cases.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

from outputs import FORCE, check, write_json


def cases():
    from pysim import models
    out = [(n, {}) for n in models.names()]
    out += [(f"transformer-{n}", {"layers": n, "hidden": 1024, "heads": 16, "seq": 1024})
            for n in (100, 1000, 10000)]
    return out


def run_case(name, params):
    from pysim import models
    from pysim.models.report import format_model
    t0 = time.perf_counter()
    m = models.get(name.split("-")[0], **params)
    t1 = time.perf_counter()
    text = format_model(m)
    t2 = time.perf_counter()
    json.dumps(m.to_dict(with_layers=True))
    t3 = time.perf_counter()
    return len(m.layers), len(text), t1 - t0, t2 - t1, t3 - t2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "models.json"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--force", action="store_true", help=FORCE)
    args = ap.parse_args()
    check(ap, args.force, [("--out", args.out)])
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    t = time.perf_counter()
    import pysim.models  # noqa: F401
    import_s = time.perf_counter() - t
    runs = {name: [] for name, _ in cases()}
    for _ in range(args.repeat):
        for name, params in cases():
            runs[name].append(run_case(name, params))
    rows = []
    print(f"{'case':18s} {'layers':>7s} {'build s':>9s} {'table s':>9s} {'json s':>9s} "
          f"{'us/layer':>9s}")
    for name, rs in runs.items():
        build = statistics.median(r[2] for r in rs)
        table = statistics.median(r[3] for r in rs)
        js = statistics.median(r[4] for r in rs)
        n = rs[0][0]
        rows.append(dict(case=name, layers=n, build_seconds=build, table_seconds=table,
                         json_seconds=js, build_us_per_layer=1e6 * build / n,
                         builds=[r[2] for r in rs]))
        print(f"{name:18s} {n:7d} {build:9.4f} {table:9.4f} {js:9.4f} {1e6 * build / n:9.1f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"import pysim.models: {import_s:.3f} s; peak memory {peak:.0f} MB")
    write_json(args.out, dict(benchmark="models", python=platform.python_version(),
                              machine=platform.machine(), repeat=args.repeat,
                              import_seconds=import_s, peak_memory_mb=peak, cases=rows))


if __name__ == "__main__":
    main()
