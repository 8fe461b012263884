"""Set-up time and peak memory of the largest system of each kind the limits accept (not a
test): topology, routes, deadlock check and engine arrays (compile_network), then the
engine built from them, ready for a flit-level run (its VC state made). Each case runs in a fresh process, so that its peak memory
(ru_maxrss) is its own; prints a table and writes JSON.

    python bench/setup_limits.py [--out bench/results/setup_limits.json] [--only mesh]

Cases: mesh and torus 512x512 and a ring of 262,144 (the node limit of networks routed by
rule), switch of 262,143 NPUs (the same node limit: a star is a tree, routed by rule),
fully_connected of 2,000 (3,998,000 channels: the channel limit and the
routing-work limit), and a graph of 2,000 nodes with every pair linked at a latency of 1 to 9
cycles and routed by latency (the same size, but a weighted search from every node, and
routes whose dependencies need 3 VC classes). Every case has 4 VCs.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

from outputs import FORCE, check

CASES = {
    "mesh": {"kind": "mesh", "dims": [512, 512]},
    "torus": {"kind": "torus", "dims": [512, 512]},
    "ring": {"kind": "ring", "size": 262144},
    "switch": {"kind": "switch", "size": 262143},
    "fully_connected": {"kind": "fully_connected", "size": 2000},
    "graph-latency": "dense-weighted",
}


def topology(name):
    t = CASES[name]
    if t != "dense-weighted":
        return t
    n = 2000
    names = [f"n{i}" for i in range(n)]
    links = [{"a": names[i], "b": names[j], "latency_cycles": 1 + (i * 7 + j * 13) % 9}
             for i in range(n) for j in range(i + 1, n)]
    return {"kind": "graph", "nodes": [{"name": x} for x in names], "links": links,
            "route_weight": "latency"}


def one(name):
    from pysim.config import from_dict
    from pysim.engine import new_engine
    from pysim.network import compile_network
    t0 = time.perf_counter()
    # (the weighted dense graph's routes need 3 VC classes)
    cfg = from_dict({"topology": topology(name), "network": {"vcs": 4}})
    t1 = time.perf_counter()
    net = compile_network(cfg)
    t2 = time.perf_counter()
    eng = new_engine(net.arrays)
    eng.set_trace([], [], [], [])        # (an empty trace: the flit level's VC state made)
    t3 = time.perf_counter()
    return dict(case=name, nodes=net.topo.n_nodes, channels=net.topo.n_channels,
                engine_channels=int(len(net.ch_kind)), config_seconds=t1 - t0,
                compile_seconds=t2 - t1, engine_seconds=t3 - t2, setup_seconds=t3 - t1,
                peak_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "setup_limits.json"))
    ap.add_argument("--only", default=None)
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)   # (a child process)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(one(a.case)))
        return
    check(ap, a.force, [("--out", a.out)])
    from provenance import provenance, write_rows
    started = provenance()
    rows = []
    for name in CASES:
        if a.only and a.only != name:
            continue
        out = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True,
                             text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        rows.append(r)
        print(f"{r['case']:<16} {r['nodes']:>7,} nodes {r['channels']:>9,} channels  set-up "
              f"{r['setup_seconds']:6.1f} s (compile {r['compile_seconds']:.1f}, engine "
              f"{r['engine_seconds']:.1f})  peak {r['peak_gb']:.2f} GB", flush=True)
    write_rows(a.out, "setup_limits", started, rows)


if __name__ == "__main__":
    main()
