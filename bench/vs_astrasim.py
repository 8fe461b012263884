"""pysim beside ASTRA-sim 1.0 (analytical backend) on the same workloads and platforms (not a
test): ASTRA-sim's microbenchmarks (one collective of several sizes), small workloads of
every kind written here, and ASTRA-sim's shipped workloads (DATA, HYBRID_TRANSFORMER and its
_FWD_IN_BCKWD, HYBRID_DLRM, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED),
on a ring of 8 and 4x4 and 4x4x4 tori; pysim runs the same files by ASTRA-sim's system rules
(pysim.workload.astra). Prints a table (both times, the difference, the mechanism behind it)
and writes JSON with provenance. Each row also runs pysim's ASTRA-sim rules with every
message taking ASTRA-sim's analytical time in place of pysim's network (the column 'rules':
pysim.workload.astra.analytical_message): what remains there is a difference of the rules,
the rest of the difference one of the network models.

    ASTRASIM=/path/to/AnalyticalAstra python bench/vs_astrasim.py [--quick]
        [--platforms ring8,torus4x4,torus4x4x4] [--network flow|flit]
        [--workloads /path/to/astra-sim/inputs/workload] [--out bench/results/vs_astrasim.json]
        [--fastest-router]
    python bench/vs_astrasim.py --logical-rings [--network flow|flit]

ASTRASIM names the binary of ASTRA-sim 1.0's analytical backend. Without it the script says
how to build one and exits. Nothing of ASTRA-sim is shipped here: the script writes ASTRA-sim's
network and system files for each platform from the same parameters as the pysim
configuration, and the microbenchmark and small workload files itself; the shipped workloads
are read from the ASTRA-sim checkout (`--workloads`, default: the `inputs/workload` folder of
the checkout the binary was built in), and left out if absent. --quick: the microbenchmarks
and the small workloads only. --fastest-router: pysim's router stages and NIC injection at
their least (FASTEST_ROUTER), the nearest it comes to the router and NIC latencies of 0 in
ASTRA-sim's network files. --logical-rings needs no ASTRA-sim binary: pysim runs the
hybrid transformer workloads (the small ones, and the shipped ones where `--workloads` or
ASTRASIM's checkout has them) on ring 8 and on a 4 x 2 torus whose links are the logical
rings' hops, beside ASTRA-sim's ring-8 times recorded in docs/astrasim.md.

The rules, both sides: ASTRA-sim's sample system (endpoint-delay 1, 4 chunks per collective,
one chunk at a time per dimension, LIFO, the ring algorithm per dimension, localBWAware);
links of `link-bandwidth` GB/s (ASTRA-sim counts 2^30 bytes per GB: pysim gets the same bytes
per ns) per direction and 1 ns of latency, 2 per NPU and dimension (ASTRA-sim gives a ring
message both directions' bandwidth: pysim halves each message, one half each way,
`workload.algorithm = "bidir_ring"`); NICs that never limit (ASTRA-sim's analytical NPU has
none); pysim's network at the flow level by default. Times are the cycle (1 ns) at which the
last pass and every collective have finished: ASTRA-sim's 'all passes finished at time',
pysim's last op; 2 passes of each workload, 1 of each microbenchmark.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from outputs import FORCE, check  # noqa: E402

import pysim  # noqa: E402
from pysim import models  # noqa: E402
from pysim.topology import build as build_topology  # noqa: E402
from pysim.workload import run_graph  # noqa: E402
from pysim.workload.astra import analytical_message, astra_graph, run_cycles  # noqa: E402
from provenance import provenance, write_json  # noqa: E402

BUILD_HELP = """\
bench/vs_astrasim.py compares pysim with ASTRA-sim 1.0 and needs the binary of its analytical
backend: set ASTRASIM to its path. To build one (any directory outside this repository):
clone ASTRA-sim's public repository (github.com/astra-sim/astra-sim), check out its branch
ASTRA-sim-1.0 (the comparison in docs/astrasim.md used its commit 07d5d19), put its submodule
extern/network_backend/analytical (github.com/astra-sim/astra-network-analytical, commit
d27635b) in place, install CMake (3.15 or later; `pip install cmake` gives one), a C++17
compiler and Boost.Program_options (Debian:
apt-get install cmake g++ libboost-program-options-dev), then in build/astra_analytical:
mkdir build && cd build && cmake .. -DCMAKE_BUILD_TYPE=Release && make -j2 (its test folder
needs googletest: drop the test lines of its top CMakeLists.txt if you have none). The binary
is build/astra_analytical/build/AnalyticalAstra/bin/AnalyticalAstra. Then:

    ASTRASIM=/path/to/AnalyticalAstra python bench/vs_astrasim.py
"""

GIB = 2 ** 30 / 1e9          # ASTRA-sim's GB/s are 2^30 bytes per second

# name -> (units per dimension, link GB/s per dimension (ASTRA-sim's), link latency ns)
PLATFORMS = {
    "ring8": ([8], [32.0], 1.0),
    "torus4x4": ([4, 4], [32.0, 16.0], 1.0),
    "torus4x4x4": ([4, 4, 4], [32.0, 16.0, 16.0], 1.0),
}
SYSTEM = dict(endpoint_delay=1, splits=4, scheduling="LIFO", optimization="localBWAware")
MICRO = [(c, s) for c in ("ALLREDUCE", "REDUCESCATTER", "ALLGATHER", "ALLTOALL")
         for s in (65536, 1048576, 16777216)]
SHIPPED = ("Resnet50_DataParallel", "Transformer_HybridParallel",
           "Transformer_HybridParallel_Fwd_In_Bckwd", "DLRM_HybridParallel",
           "MLP_ModelParallel", "MLP_HybridParallel_Data_Model",
           "MLP_HybridParallel_Model_Data", "sample_per_layer_parallel_HybridCustomized")

# small workloads in ASTRA-sim's format, written here (cycles and bytes of our choosing)
SMALL = {
    "small_data": "DATA\n3\n"
                  "conv1 -1 2000 NONE 0 2500 NONE 0 3000 ALLREDUCE 262144 100\n"
                  "conv2 -1 4000 NONE 0 4000 NONE 0 5000 ALLREDUCE 1048576 100\n"
                  "fc -1 1000 NONE 0 1500 NONE 0 1500 ALLREDUCE 4194304 200\n",
    "small_transformer": "HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n3\n"
                         "embed -1 3000 ALLGATHER 262144 100 NONE 0 100 NONE 0 10\n"
                         "attn -1 20000 NONE 0 15000 ALLREDUCE 524288 15000 ALLREDUCE "
                         "2097152 10\n"
                         "mlp -1 30000 ALLREDUCE 524288 20000 ALLREDUCE 524288 20000 "
                         "ALLREDUCE 4194304 10\n",
    "small_recompute": "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 4 "
                       "checkpoints: 2 0 2 checkpoint_initiates: 2 1 3\n4\n"
                       "l0 -1 3000 ALLREDUCE 131072 3000 ALLREDUCE 131072 3000 ALLREDUCE "
                       "524288 10\n"
                       "l1 -1 6000 NONE 0 6000 ALLREDUCE 262144 6000 ALLREDUCE 1048576 10\n"
                       "l2 -1 4000 ALLREDUCE 262144 4000 ALLREDUCE 262144 4000 ALLREDUCE "
                       "524288 10\n"
                       "l3 -1 5000 ALLGATHER 65536 5000 NONE 0 5000 ALLREDUCE 1048576 10\n",
    "small_model": "MODEL\n3\n"
                   "l0 -1 3000 ALLGATHER 65536 3000 ALLREDUCE 65536 1000 NONE 0 100\n"
                   "l1 -1 6000 ALLGATHER 262144 6000 ALLREDUCE 262144 2000 NONE 0 100\n"
                   "l2 -1 2000 ALLGATHER 131072 2000 ALLREDUCE 131072 1000 NONE 0 100\n",
    "small_data_model": "HYBRID_DATA_MODEL\n3\n"
                        "l0 -1 3000 ALLGATHER 65536 3000 ALLREDUCE 65536 3000 ALLREDUCE "
                        "65536 100\n"
                        "l1 -1 6000 ALLGATHER 262144 6000 ALLREDUCE 262144 6000 ALLREDUCE "
                        "524288 100\n"
                        "l2 -1 2000 ALLGATHER 131072 2000 ALLREDUCE 131072 2000 ALLREDUCE "
                        "262144 100\n",
    "small_model_data": "HYBRID_MODEL_DATA\n2\n"
                        "l0 -1 3000 ALLGATHER 65536 3000 ALLREDUCE 65536 3000 ALLREDUCE "
                        "262144 100\n"
                        "l1 -1 6000 ALLGATHER 262144 6000 ALLREDUCE 262144 6000 ALLREDUCE "
                        "1048576 100\n",
    "small_customized": "HYBRID_CUSTOMIZED\n3\n"
                        "l0 -1 3000 ALLGATHER 65536 3000 REDUCESCATTER 65536 3000 ALLREDUCE "
                        "65536 100 HYBRID_DATA_MODEL\n"
                        "l1 -1 6000 ALLGATHER 262144 6000 REDUCESCATTER 262144 6000 "
                        "ALLREDUCE 524288 100 HYBRID_MODEL_DATA\n"
                        "l2 -1 2000 NONE 0 2000 NONE 0 2000 ALLREDUCE 262144 100 DATA\n",
    "small_inference": "DISTRIBUTED_INFERENCE\n2\n"
                       "l0 -1 3000 ALLREDUCE 131072 0 NONE 0 0 NONE 0 10\n"
                       "l1 -1 5000 ALLGATHER 65536 0 NONE 0 0 NONE 0 10\n",
    "small_dlrm_enhanced": "HYBRID_DLRM_ENHANCED 1\n3\n"
                           "emb -1 300 ALLTOALL 131072 300 ALLTOALL 131072 300 NONE 0 50\n"
                           "bot -1 2000 NONE 0 2000 NONE 0 2000 ALLREDUCE 262144 20\n"
                           "top -1 4000 NONE 0 4000 NONE 0 4000 ALLREDUCE 1048576 20\n",
    "small_dlrm": "HYBRID_DLRM 1\n4\n"
                  "emb -1 300 ALLTOALL 131072 300 ALLTOALL 131072 300 NONE 0 50\n"
                  "bot -1 2000 NONE 0 2000 NONE 0 2000 ALLREDUCE 262144 20\n"
                  "top0 -1 4000 NONE 0 4000 NONE 0 4000 ALLREDUCE 1048576 20\n"
                  "top1 -1 2000 NONE 0 2000 NONE 0 2000 ALLREDUCE 524288 20\n",
}

# the mechanisms behind the differences (docs/astrasim.md)
HOP = ("per message, pysim's zero-load latency (NIC and router pipeline, a packet's "
       "serialisation) where ASTRA-sim's link is latency + bytes/bandwidth, rounded down")
SHARED = ("a logical ring that is not a physical one (the model-parallel group splits the "
          "ring of 8): pysim's messages share links, ASTRA-sim's analytical network has no "
          "congestion")


# pysim's options that depart from ASTRA-sim's rules: (name, workload overrides, what it does)
DEPARTURES = [
    ("one-way ring", {"algorithm": "ring"},
     "each ring message goes one way on one link's bandwidth (ASTRA-sim's analytical ring "
     "gives it the dimension's links both ways)"),
    ("NPU reductions", {"engine": "npu"},
     "reductions on the NPU's cores through HBM (pysim's endpoint model 'npu'): each "
     "reduced message's reduction and its HBM traffic (4 bytes a byte, shared with the "
     "layers' compute) in series with the ring's next step"),
    ("offload reductions", {"engine": "offload"},
     "reductions on pysim's collectives offload engine (its SRAM, ALUs and HBM traffic)"),
    ("no endpoint delay", {"astra_endpoint_delay": 0},
     "messages cost their NPUs nothing"),
]


def mechanism(platform, path):
    """S where a transformer's model-parallel group splits one of the platform's dimensions
    (its logical rings are then not physical ones), L everywhere."""
    with open(path) as f:
        head = f.readline().split()
    if head and head[0].startswith("HYBRID_TRANSFORMER") and len(head) > 2:
        group, size = int(head[2]), 1
        sizes = []
        for k in PLATFORMS[platform][0]:
            size *= k
            sizes.append(size)
        if group > 1 and group not in sizes:
            return SHARED + "; " + HOP
    return HOP


# ------------------------------------------------------------------ ASTRA-sim

def astra_network(platform):
    units, bw, lat = PLATFORMS[platform]
    n = len(units)
    return {"topology-name": "Hierarchical", "topologies-per-dim": ["Ring"] * n,
            "dimension-type": ["N"] * n, "dimensions-count": n, "units-count": units,
            "links-count": [2] * n, "link-latency": [lat] * n, "link-bandwidth": bw,
            "nic-latency": [0] * n, "router-latency": [0] * n, "hbm-latency": [500] * n,
            "hbm-bandwidth": [370] * n, "hbm-scale": [0] * n}


def astra_system(platform):
    n = len(PLATFORMS[platform][0])
    impl = "_".join(["ring"] * n)
    s = SYSTEM
    return (f"scheduling-policy: {s['scheduling']}\nendpoint-delay: {s['endpoint_delay']}\n"
            f"active-chunks-per-dimension: 1\npreferred-dataset-splits: {s['splits']}\n"
            f"boost-mode: 0\nall-reduce-implementation: {impl}\n"
            f"all-gather-implementation: {impl}\nreduce-scatter-implementation: {impl}\n"
            f"all-to-all-implementation: {impl}\n"
            f"collective-optimization: {s['optimization']}\n")


def run_astra(binary, platform, workload, passes, tmp):
    net = os.path.join(tmp, f"{platform}.json")
    sysf = os.path.join(tmp, f"{platform}_sys.txt")
    with open(net, "w") as f:
        json.dump(astra_network(platform), f)
    with open(sysf, "w") as f:
        f.write(astra_system(platform))
    out = os.path.join(tmp, "stats") + os.sep
    os.makedirs(out, exist_ok=True)
    cmd = [binary, f"--network-configuration={net}", f"--system-configuration={sysf}",
           f"--workload-configuration={workload}", f"--path={out}", "--run-name=run",
           f"--num-passes={passes}", "--total-stat-rows=1", "--stat-row=0"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    wall = time.perf_counter() - t
    m = re.findall(r"all passes finished at time: (\d+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"ASTRA-sim failed on {workload} ({platform}):\n"
                           f"{(p.stdout + p.stderr)[-2000:]}")
    return dict(cycles=int(m[-1]), wall_seconds=wall)


# ------------------------------------------------------------------ pysim

# pysim's router and NIC at their fastest: routing, VC allocation and switch traversal in 0
# cycles, switch allocation in 1 (its least), a flit chosen enters the NIC's channel at once;
# the nearest pysim comes to ASTRA-sim's router-latency 0 and nic-latency 0 (--fastest-router)
FASTEST_ROUTER = dict(routing_delay=0, vc_alloc_delay=0, sw_alloc_delay=1, st_delay=0,
                      injection_delay=0)


def pysim_config(platform, workload, passes, network="flow", fastest_router=False):
    units, bw, lat = PLATFORMS[platform]
    nic = {"npu": {"injection_gbps": 16 * max(bw) * GIB, "ejection_gbps": 16 * max(bw) * GIB}}
    if len(units) == 1:
        topo = {"kind": "ring", "size": units[0], "link_gbps": bw[0] * GIB,
                "link_latency_ns": lat, "nic": nic}
    else:
        topo = {"kind": "torus", "dims": units, "dim_link_gbps": [b * GIB for b in bw],
                "link_latency_ns": lat, "nic": nic}
    s = SYSTEM
    net = dict(model=network, **(FASTEST_ROUTER if fastest_router else {}))
    return {"topology": topo, "network": net,
            "workload": {"kind": "training", "model": workload, "iterations": passes,
                         "chunks": s["splits"], "algorithm": "bidir_ring",
                         "astra_endpoint_delay": s["endpoint_delay"],
                         "astra_scheduling": s["scheduling"],
                         "astra_collective_optimization": s["optimization"]}}


def run_pysim(cfg):
    t = time.perf_counter()
    r = pysim.simulate(pysim.from_dict(cfg))
    return dict(cycles=int(run_cycles(r)), wall_seconds=time.perf_counter() - t)


def run_analytical(platform, cfg):
    """pysim's ASTRA-sim rules with each message taking ASTRA-sim's analytical time
    (pysim.workload.astra.analytical_message) in place of pysim's network: what is left of
    a difference is a difference of the rules."""
    t = time.perf_counter()
    units, bw, lat = PLATFORMS[platform]
    c = pysim.from_dict(cfg)
    topo = build_topology(c)
    names = [n for n, k in zip(topo.node_names, topo.node_kinds) if k == "npu"]
    message = analytical_message(names, units, [lat] * len(units),
                                 [b * 2 ** 30 / 1e9 for b in bw])
    g, _ = astra_graph(c, topo, models.load(cfg["workload"]["model"]), message=message)
    r = run_graph(c, g, topo=topo)
    return dict(cycles=int(run_cycles(r)), wall_seconds=time.perf_counter() - t)


# ------------------------------------------------------------------ the comparison

def cases(quick, shipped_dir, tmp):
    """(name, kind, workload file, passes)"""
    out = []
    for ctype, size in MICRO:
        path = os.path.join(tmp, f"micro_{ctype}_{size}.txt")
        with open(path, "w") as f:
            f.write(f"MICRO\n1\nlayer -1 5 NONE 0 5 NONE 0 5 {ctype} {size} 5\n")
        out.append((f"micro {ctype} {size}", "micro", path, 1))
    for name, text in SMALL.items():
        path = os.path.join(tmp, name + ".txt")
        with open(path, "w") as f:
            f.write(text)
        out.append((name, "small", path, 2))
    if not quick and shipped_dir:
        for name in SHIPPED:
            path = os.path.join(shipped_dir, name + ".txt")
            if os.path.exists(path):
                out.append((name, "shipped", path, 2))
    return out


# ASTRA-sim 1.0's times (cycles) of the hybrid transformer workloads on ring 8 (2 passes), from
# the side-by-side run recorded in docs/astrasim.md (its analytical backend, branch
# ASTRA-sim-1.0, 07d5d19): the small ones written here and its shipped ones
ASTRA_RING8 = {"small_transformer": 400_801, "small_recompute": 200_260,
               "Transformer_HybridParallel": 1_153_636_953,
               "Transformer_HybridParallel_Fwd_In_Bckwd": 1_307_380_796}


def logical_rings(network, shipped_dir=None, log=print):
    """ASTRA-sim's analytical network lays a model-parallel group's logical ring over the
    physical ring without sharing links. Check that this is what separates the two on ring 8:
    run pysim (no ASTRA-sim needed) on ring 8 and on a 4 x 2 torus of the same links, in which
    every hop of the logical rings (the group of 4, and the pairs 4 apart) is a link of its
    own, beside ASTRA-sim's recorded ring-8 times; the shipped transformers if `shipped_dir`
    (ASTRA-sim's inputs/workload folder) holds them."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, astra in ASTRA_RING8.items():
            if name in SMALL:
                path = os.path.join(tmp, name + ".txt")
                with open(path, "w") as f:
                    f.write(SMALL[name])
            else:
                path = os.path.join(shipped_dir or "", name + ".txt")
                if not shipped_dir or not os.path.exists(path):
                    continue
            cfg = pysim_config("ring8", path, 2, network)
            ring = run_pysim(cfg)["cycles"]
            topo = cfg["topology"]
            cfg["topology"] = {"kind": "torus", "dims": [4, 2],
                               "dim_link_gbps": [topo["link_gbps"]] * 2,
                               "link_latency_ns": topo["link_latency_ns"], "nic": topo["nic"]}
            own = run_pysim(cfg)["cycles"]
            rows.append(dict(case=name, astra_ring8=astra, pysim_ring8=ring,
                             pysim_own_links=own))
            log(f"{name}: ASTRA-sim ring 8 {astra:,}; pysim ring 8 {ring:,} "
                f"({100 * (ring / astra - 1):+.2f}%), every logical hop a link of its own "
                f"(4 x 2 torus) {own:,} ({100 * (own / astra - 1):+.2f}%)", flush=True)
    return rows


def checkout(binary):
    """The ASTRA-sim checkout a binary was built in (its build/astra_analytical/build/
    AnalyticalAstra/bin/AnalyticalAstra)."""
    for _ in range(6):
        binary = os.path.dirname(binary)
    return binary


def checkout_workloads(binary):
    return os.path.join(checkout(binary), "inputs", "workload")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platforms", default=",".join(PLATFORMS))
    ap.add_argument("--network", default="flow", choices=["flow", "flit"])
    ap.add_argument("--workloads", default=None,
                    help="ASTRA-sim's inputs/workload folder (its shipped workloads)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--departures", action="store_true",
                    help="the DATA workloads with each of pysim's options that depart from "
                         "ASTRA-sim's rules (DEPARTURES)")
    ap.add_argument("--fastest-router", action="store_true",
                    help="pysim's router stages and NIC injection at their least "
                         "(FASTEST_ROUTER), nearest ASTRA-sim's router and NIC latencies of 0")
    ap.add_argument("--logical-rings", action="store_true",
                    help="pysim alone: the small hybrid workloads on ring 8 and with every "
                         "logical hop a link of its own, beside ASTRA-sim's recorded times")
    ap.add_argument("--out", default=None,
                    help="JSON (default bench/results/vs_astrasim.json, with --logical-rings "
                         "bench/results/vs_astrasim_logical_rings.json)")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.out is None:
        a.out = os.path.join(HERE, "results", "vs_astrasim_logical_rings.json"
                             if a.logical_rings else "vs_astrasim.json")
    inputs = [("an ASTRA-sim workload", os.path.join(a.workloads, f))
              for f in (os.listdir(a.workloads) if a.workloads and os.path.isdir(a.workloads)
                        else ())]
    if a.logical_rings:
        check(ap, a.force, [("--out", a.out)], inputs=inputs)
        shipped = a.workloads
        if shipped is None and os.environ.get("ASTRASIM"):
            shipped = checkout_workloads(os.path.abspath(os.environ["ASTRASIM"]))
        rows = logical_rings(a.network, shipped)
        write_json(a.out, dict(benchmark="vs_astrasim logical rings", **provenance(), rows=rows))
        return
    binary = os.environ.get("ASTRASIM")
    if not binary or not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        print(BUILD_HELP, file=sys.stderr)
        sys.exit(2)
    binary = os.path.abspath(binary)
    root = checkout(binary)
    shipped = a.workloads or checkout_workloads(binary)
    plats = [p for p in a.platforms.split(",") if p]
    for p in plats:
        if p not in PLATFORMS:
            sys.exit(f"--platforms: {p!r} unknown; known: {', '.join(PLATFORMS)}")
    check(ap, a.force, [("--out", a.out)], inputs=inputs + [("ASTRA-sim's binary", binary)])
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(a.quick, shipped if os.path.isdir(shipped) else None, tmp)
        if a.only:
            todo = [c for c in todo if a.only in c[0]]
        print(f"{'case':34s} {'platform':11s} {'ASTRA-sim':>14s} {'pysim':>14s} "
              f"{'diff':>8s} {'rules':>8s}", flush=True)
        variants = [("ASTRA-sim's rules", {}, None)]
        if a.departures:
            todo = [c for c in todo if c[0] in ("small_data", "Resnet50_DataParallel")]
            variants += DEPARTURES
        for name, kind, path, passes in todo:
            for plat in plats:
                ast = run_astra(binary, plat, path, passes, tmp)
                ana = run_analytical(plat, pysim_config(plat, path, passes, a.network))
                ana_diff = 100.0 * (ana["cycles"] - ast["cycles"]) / ast["cycles"]
                for vname, over, vwhat in variants:
                    cfg = pysim_config(plat, path, passes, a.network, a.fastest_router)
                    cfg["workload"].update(over)
                    pys = run_pysim(cfg)
                    diff = 100.0 * (pys["cycles"] - ast["cycles"]) / ast["cycles"]
                    row = dict(case=name, kind=kind, platform=plat, passes=passes,
                               astra_cycles=ast["cycles"], pysim_cycles=pys["cycles"],
                               diff_pct=round(diff, 3),
                               analytical_cycles=ana["cycles"] if not over else None,
                               analytical_diff_pct=round(ana_diff, 3) if not over else None,
                               mechanism=vwhat or mechanism(plat, path), pysim_rules=vname,
                               astra_wall_seconds=round(ast["wall_seconds"], 3),
                               pysim_wall_seconds=round(pys["wall_seconds"], 3),
                               analytical_wall_seconds=round(ana["wall_seconds"], 3),
                               workload=(os.path.basename(path) if kind == "shipped"
                                         else open(path).read()),
                               astra_network=astra_network(plat),
                               astra_system=astra_system(plat),
                               pysim_config={k: v for k, v in cfg.items()})
                    row["pysim_config"]["workload"] = dict(cfg["workload"],
                                                           model=os.path.basename(path))
                    rows.append(row)
                    print(f"{name:34s} {plat:11s} {ast['cycles']:14,d} {pys['cycles']:14,d} "
                          f"{diff:+7.2f}% " + (f"{ana_diff:+7.2f}%" if not over else " " * 8)
                          + (f"  ({vname})" if a.departures else ""),
                          flush=True)
    out = dict(provenance=dict(provenance(), astrasim_binary=binary,
                               astrasim_commit=commit, network_model=a.network,
                               fastest_router=a.fastest_router,
                               command=" ".join(sys.argv)),
               system=SYSTEM, platforms=PLATFORMS, rows=rows)
    write_json(a.out, out)


if __name__ == "__main__":
    main()
