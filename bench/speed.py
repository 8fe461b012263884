"""Speed and scale benchmark (not a test): uniform traffic, 4-flit packets, 0.1 flits/node/cycle
on 8x8, 16x16 and 32x32 meshes. Prints wall seconds, simulated cycles/s, flit-hops/s and peak
memory per case, and writes JSON.

    python bench/speed.py [--out bench/results/speed.json] [--cycles 20000] [--only 16x16]
                          [--repeat 3]

Each case runs in a fresh process so that its peak memory (ru_maxrss) is its own, --repeat
times (wall time on this shared VM varies by up to a third): the row reported is the run with
the median engine time, and every run's cycles/s is kept in the JSON.
The JSON also records the date, the commit, the CPU and the load average at the start
(bench/provenance.py): on a shared machine, wall times depend on what else runs.
"""
import argparse
import json
import os
import resource
import time

from outputs import FORCE, check

CASES = {"8x8": [8, 8], "16x16": [16, 16], "32x32": [32, 32]}


def mesh_config(dims, cycles, rate):
    """The benchmark's case: uniform traffic of 4-flit packets on a mesh, default router."""
    from pysim.config import from_dict
    return from_dict({
        "simulation": {"seed": 1, "warmup_cycles": 0, "measure_cycles": cycles,
                       "drain_cycles": 10000},
        "topology": {"kind": "mesh", "dims": list(dims)},
        "traffic": {"pattern": "uniform", "injection_rate": rate, "packet_flits": 4},
    })


def one(name, cycles, rate):
    import pysim
    cfg = mesh_config(CASES[name], cycles, rate)
    t = time.perf_counter()
    r = pysim.simulate(cfg)
    wall = time.perf_counter() - t
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return dict(case=f"mesh{name}", nodes=CASES[name][0] * CASES[name][1], injection_rate=rate,
                packet_flits=4, cycles=r.cycles, wall_seconds=wall,
                engine_seconds=r.run_seconds, cycles_per_second=r.cycles_per_second,
                flit_hops=r.flit_hops, flit_hops_per_second=r.flit_hops_per_second,
                cycles_skipped=r.cycles_skipped, peak_memory_mb=rss_kb / 1024.0,
                avg_packet_latency=r.avg_packet_latency, accepted_rate=r.accepted_rate,
                saturated=r.saturated)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "speed.json"))
    ap.add_argument("--cycles", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=0.1)
    ap.add_argument("--only", choices=sorted(CASES), default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(one(a.child, a.cycles, a.rate)))
        return
    check(ap, a.force, [("--out", a.out)])
    from provenance import child, provenance, write_rows
    started = provenance()                 # the load average as the runs begin
    rows = []
    for name in ([a.only] if a.only else list(CASES)):
        runs = [child(__file__, "--child", name, "--cycles", str(a.cycles), "--rate",
                      str(a.rate)) for _ in range(max(1, a.repeat))]
        runs.sort(key=lambda x: x["engine_seconds"])
        row = dict(runs[len(runs) // 2],
                   cycles_per_second_runs=[x["cycles_per_second"] for x in runs])
        rows.append(row)
        print(f"{row['case']:>10}: {row['wall_seconds']:7.2f} s wall  "
              f"{row['cycles_per_second']:>12,.0f} cycles/s  "
              f"{row['flit_hops_per_second'] / 1e6:7.1f} M flit-hops/s  "
              f"peak {row['peak_memory_mb']:6.1f} MB  skipped {row['cycles_skipped']} cycles  "
              f"latency {row['avg_packet_latency']:.1f}")
    write_rows(a.out, "speed", started, rows)


if __name__ == "__main__":
    main()
