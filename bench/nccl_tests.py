"""nccl-tests' all-reduce bus bandwidth on one DGX A100 and one DGX H100, against published
measurements across message sizes (tests/data/nccl_tests_allreduce.json: each system's source
is in the file).

pysim runs `workload.algorithm = "nccl"` (NCCL's choice of algorithm and protocol per size,
pysim/workload/nccl.py) at the flow level on the shipped dgx-a100 and dgx-h100 (with
NVLink SHARP, topology.nvls = true: the published H100-class figures use it), and reports per
size the published and simulated bus bandwidth, their ratio, the algorithm and protocol
picked, and per system the geometric mean of |error| and the largest. Prints a Markdown
table; --json writes the rows with provenance.

    python bench/nccl_tests.py [--systems dgx-a100,dgx-h100] [--json FILE]
"""
import argparse
import json
import math
import os
import sys
import time

import pysim

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "nccl_tests_allreduce.json")
SETTINGS = {"dgx-a100": {}, "dgx-h100": {"topology.nvls": True}}


def run(system, nbytes, algorithm="auto", protocol="auto"):
    cfg = pysim.load(system, {"workload.kind": "collective", "workload.collective": "all_reduce",
                              "workload.algorithm": "nccl", "workload.bytes": int(nbytes),
                              "workload.nccl_algorithm": algorithm,
                              "workload.nccl_protocol": protocol,
                              "network.model": "flow", **SETTINGS[system]})
    t = time.perf_counter()
    d = pysim.simulate(cfg).to_dict()
    return dict(busbw_gbps=d["busbw_gbps"], time_us=d["collective_cycles"] /
                cfg.network.clock_ghz / 1e3, algorithm=d["nccl_algorithm"],
                protocol=d["nccl_protocol"], wall_s=round(time.perf_counter() - t, 3))


def compare(system, data):
    rows = []
    for nbytes, pub in zip(data["bytes"], data["busbw_gbps"]):
        r = run(system, nbytes)
        rows.append(dict(system=system, bytes=nbytes, published_busbw_gbps=pub,
                         simulated_busbw_gbps=round(r["busbw_gbps"], 3),
                         error=round(r["busbw_gbps"] / pub - 1, 4), **{k: r[k] for k in
                         ("algorithm", "protocol", "time_us", "wall_s")}))
    return rows


def summary(rows):
    err = [abs(math.log(1 + r["error"])) for r in rows]
    return dict(geomean_abs_error=math.exp(sum(err) / len(err)) - 1,
                max_abs_error=max(abs(r["error"]) for r in rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", default="dgx-a100,dgx-h100")
    ap.add_argument("--json")
    a = ap.parse_args()
    with open(DATA) as f:
        data = json.load(f)
    out = {}
    for system in a.systems.split(","):
        rows = compare(system, data["systems"][system])
        s = summary(rows)
        out[system] = dict(rows=rows, **s, source=data["systems"][system]["source"])
        print(f"\n{system}: geomean |error| {s['geomean_abs_error']:.1%}, max "
              f"{s['max_abs_error']:.1%}\n")
        print("| bytes | published busbw GB/s | pysim busbw GB/s | error | NCCL's pick |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['bytes']:,} | {r['published_busbw_gbps']:.2f} | "
                  f"{r['simulated_busbw_gbps']:.2f} | {r['error']:+.1%} | "
                  f"{r['algorithm']} / {r['protocol']} |")
    if a.json:
        sys.path.insert(0, HERE)
        from provenance import provenance
        with open(a.json, "w") as f:
            json.dump({"systems": out, "provenance": provenance()}, f, indent=1)


if __name__ == "__main__":
    main()
