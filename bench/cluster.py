"""Building clusters (topology.kind = "cluster"): wall and CPU time of each phase -- the
topology with its routes (pysim/cluster.py: rows per kind of node, by rule), the routing
check (routing.build: VC classes, from the up/down rule past 2,048 nodes), the compiled
network (network.compile_network) -- and the peak memory, for DGX H100 SuperPOD-like
rail-optimised fabrics of 1 to 256 scalable units (128 to 65,536 GPUs). One size per process
(peak memory is per process).

    python bench/cluster.py [--nodes 128,512,2048,8192] [--node dgx-h100] [--json FILE]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

from outputs import FORCE, check, write_json

HERE = os.path.dirname(os.path.abspath(__file__))


def one(nodes, node, fabric):
    import pysim
    from pysim import routing, topology
    from pysim.network import compile_network
    cfg = pysim.from_dict({"topology": {"kind": "cluster", "node": node, "node_count": nodes,
                                        "fabric": fabric}, "network": {"model": "flow"}})
    out = dict(node=node, nodes=nodes, fabric=fabric)
    for phase, fn in (("topology", lambda: topology.build(cfg)),):
        w, c = time.perf_counter(), time.process_time()
        t = fn()
        out[f"{phase}_wall_s"] = round(time.perf_counter() - w, 3)
        out[f"{phase}_cpu_s"] = round(time.process_time() - c, 3)
    out.update(gpus=t.cluster["gpus"], network_nodes=t.n_nodes, channels=t.n_channels,
               leaves=t.cluster["leaves"], spines=t.cluster["spines"], cores=t.cluster["cores"])
    w, c = time.perf_counter(), time.process_time()
    r = routing.build(t, cfg)
    out.update(routing_wall_s=round(time.perf_counter() - w, 3),
               routing_cpu_s=round(time.process_time() - c, 3), vc_classes=r.n_classes)
    w, c = time.perf_counter(), time.process_time()
    compile_network(cfg, t)              # (routes checked again inside)
    out.update(compile_wall_s=round(time.perf_counter() - w, 3),
               compile_cpu_s=round(time.process_time() - c, 3),
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="128,512,2048,8192")
    ap.add_argument("--node", default="dgx-h100")
    ap.add_argument("--fabric", default="rail-optimised")
    ap.add_argument("--json")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.node, a.fabric)))
        return
    check(ap, a.force, [("--json", a.json)])
    sys.path.insert(0, HERE)
    from provenance import provenance
    rows = []
    print(f"{'nodes':>6} {'GPUs':>6} {'net nodes':>9} {'topology s':>10} {'routing s':>9} "
          f"{'compile s':>9} {'peak MB':>8}   (CPU s)")
    for n in map(int, a.nodes.split(",")):
        res = subprocess.run([sys.executable, __file__, "--one", str(n), "--node", a.node,
                              "--fabric", a.fabric], capture_output=True, text=True)
        if res.returncode:
            print(res.stderr)
            continue
        r = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(f"{r['nodes']:>6} {r['gpus']:>6} {r['network_nodes']:>9} "
              f"{r['topology_cpu_s']:>10.2f} {r['routing_cpu_s']:>9.2f} "
              f"{r['compile_cpu_s']:>9.2f} {r['peak_rss_mb']:>8}")
    if a.json:
        write_json(a.json, {"rows": rows, "provenance": provenance()})


if __name__ == "__main__":
    main()
