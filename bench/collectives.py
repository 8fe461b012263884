"""Collective benchmark (not a test): collective time against message size for ring,
bidirectional ring and halving-doubling all-reduce on several systems, written as JSON with
wall times; and, with --large, a 256 MB ring all-reduce on 8 NPUs over 50 GB/s links with
32-byte flits (9.4 M simulated cycles), the case that measures the engine on long streams.

    python bench/collectives.py [--max-bytes 16777216] [--large] [--repeat 3]
                                [--model flit|flow|both] [--out ...]

--model: the network model of every run (both: the sweep at each level, and the large case's
runs alternating between them, so that the machine's load hits both alike).
"""
import argparse
import os
import time

from outputs import FORCE, check, write_json

import pysim

HERE = os.path.dirname(os.path.abspath(__file__))
TOPO = os.path.join(HERE, "..", "topologies")
# 4 VCs of 16 flits let one stream fill a link (VCs are reused once a tail has left, the
# default)
STREAM = {"network.vcs": 4, "network.vc_buffer_flits": 16}
SYSTEMS = {  # config, overrides
    "ring8": ("ring8.toml", {**STREAM, "network.injection_gbps": 64.0,
                             "network.ejection_gbps": 64.0}),
    "switch8": ("switch8.toml", {}),
    "dgx1-v100": ("dgx1-v100.toml", {}),
    "torus4x4x4": ("torus4x4x4.toml", {}),
}


def large_config(nbytes=256 << 20):
    """The large case: ring all-reduce of nbytes on 8 NPUs over 50 GB/s links, 32-byte flits
    (NICs at 100 GB/s, STREAM's VCs)."""
    return pysim.load(os.path.join(TOPO, "ring8.toml"), {
        **STREAM, "topology.link_gbps": 50.0, "network.injection_gbps": 100.0,
        "network.ejection_gbps": 100.0, "workload.kind": "collective", "workload.bytes": nbytes,
        "workload.packet_flits": 16})


def one(system, algorithm, nbytes, model="flit"):
    path, over = SYSTEMS[system]
    cfg = pysim.load(os.path.join(TOPO, path), {
        **over, "workload.kind": "collective", "workload.collective": "all_reduce",
        "workload.algorithm": algorithm, "workload.bytes": nbytes,
        "workload.packet_flits": 16, "network.model": model})
    t = time.perf_counter()
    r = pysim.simulate(cfg).to_dict()
    return dict(system=system, algorithm=algorithm, bytes=nbytes, model=model,
                collective_cycles=r["collective_cycles"], algbw_gbps=r["algbw_gbps"],
                busbw_gbps=r["busbw_gbps"], wall_seconds=time.perf_counter() - t,
                simulated_cycles_per_second=r["cycles_per_second"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bytes", type=int, default=16 << 20)
    ap.add_argument("--large", action="store_true",
                    help="also run the 256 MB ring all-reduce on 8 NPUs over 50 GB/s links")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of the large case (the median wall time is reported)")
    ap.add_argument("--model", choices=["flit", "flow", "both"], default="flit")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "collectives.json"))
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    check(ap, a.force, [("--out", a.out)])
    models = ["flit", "flow"] if a.model == "both" else [a.model]
    rows = []
    for system in SYSTEMS:
        for algorithm in ("ring", "bidir_ring", "halving_doubling"):
            size = 1024
            while size <= a.max_bytes:
                try:
                    for model in models:
                        row = one(system, algorithm, size, model)
                        rows.append(row)
                        print(f"{system:>11} {algorithm:>16} {size:>10} B {model}: "
                              f"{row['collective_cycles']:>10} cycles  busbw "
                              f"{row['busbw_gbps']:7.2f} GB/s  {row['wall_seconds']:6.2f} s "
                              f"wall")
                except pysim.ConfigError as e:
                    print(f"{system:>11} {algorithm:>16}: skipped ({e})")
                    break
                size *= 4
    large = None
    if a.large:
        walls = {m: [] for m in models}
        res = {}
        for _ in range(max(1, a.repeat)):
            for model in models:                  # alternating: load hits both alike
                cfg = large_config().with_overrides({"network.model": model})
                t = time.perf_counter()
                res[model] = pysim.simulate(cfg).to_dict()
                walls[model].append(time.perf_counter() - t)
        large = []
        for model in models:
            r, w = res[model], walls[model]
            wall = sorted(w)[len(w) // 2]
            large.append(dict(case="256 MB ring all-reduce, 8 NPUs, 50 GB/s links, 32-byte "
                                   "flits", model=model,
                              collective_cycles=r["collective_cycles"],
                              busbw_gbps=r["busbw_gbps"], wall_seconds=wall,
                              wall_seconds_runs=w))
            print(f"large ({model}): {large[-1]['case']}: {wall:.3f} s wall, median of "
                  f"{', '.join(f'{x:.3f}' for x in w)}, {r['collective_cycles']} cycles, "
                  f"busbw {r['busbw_gbps']:.2f} GB/s")
    from provenance import provenance
    write_json(a.out, dict(benchmark="collectives", **provenance(), rows=rows, large=large))


if __name__ == "__main__":
    main()
