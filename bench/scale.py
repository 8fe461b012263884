"""Scale benchmark (not a test): one training iteration at the flow level on 1,024 to 16,384
NPUs -- GPT-3 175B (tp 8, pp 16, the rest data parallel), a Llama-70B-like model (tp 8,
pp 8) and data-parallel ResNet-50 -- on a cluster of DGX H100 nodes on a rail-optimised
fat-tree, on a 3-D torus of the same size, or on a two-level switched system (DGX-like nodes
of 8 NPUs on a leaf switch, 150 GB/s per NPU, the leaves on one spine at 400 GB/s). By
default ring collectives are streams (workload.collective_form), one data-parallel
replica's passes are built for all (workload.parallel.replicas = 'one') and one
tensor-parallel rank's ops for its group (workload.parallel.tp_ranks = 'one'); --form steps
--replicas all --tp-ranks all builds every op. Per case: wall and CPU time, peak memory,
graph and engine ops, flows, events and their rate, the time in the max-min solver, where
the time went (building, the memory plan, compiling, the engine, results) and the CPU of
everything before the engine over the engine's, or the refusal and how long it took. Each
case runs in a fresh process under a time and an address-space limit; a case past either
is reported as such. Writes JSON with provenance.

    python bench/scale.py [--sizes 1024,4096,16384] [--models gpt3,llama70b,resnet50]
        [--systems cluster,torus,two_level] [--micro-batches 4] [--interleave 1]
        [--form streams|steps] [--replicas one|all] [--tp-ranks one|all] [--timeout 900]
        [--mem-gb 12] [--out bench/results/scale.json]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from outputs import FORCE, check, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TORUS = {1024: [16, 8, 8], 4096: [16, 16, 16], 16384: [32, 32, 16], 256: [8, 8, 4],
         128: [8, 4, 4], 65536: [64, 32, 32]}
MODELS = {
    # GPT-3 175B (Brown et al. 2020): 96 layers, hidden 12288, 96 heads, sequence 2048
    "gpt3": dict(model="transformer", params=dict(layers=96, hidden=12288, heads=96,
                                                  seq=2048), tp=8, pp=16),
    # Llama-2-70B-like (Touvron et al. 2023): 80 layers, hidden 8192, 64 heads, sequence 4096,
    # FFN 28672, vocabulary 32000 -- as a GPT-style block (two FFN matrices, full attention)
    "llama70b": dict(model="transformer", params=dict(layers=80, hidden=8192, heads=64,
                                                      seq=4096, ffn=28672, vocab=32000),
                     tp=8, pp=8),
    "resnet50": dict(model="resnet50", params=None, tp=1, pp=1),
}


def two_level_toml(n):
    """DGX-like nodes of 8 NPUs (H100, 141 GB) on a leaf switch at 150 GB/s, 20 ns; each
    leaf to one spine at 400 GB/s, 200 ns; routed by table."""
    out = ['[simulation]\nseed = 1\n',
           '[network]\nflit_bytes = 32\nclock_ghz = 1.0\nvcs = 2\nvc_buffer_flits = 128\n'
           'wait_for_tail_credit = false\n',
           '[topology]\nkind = "graph"\nlink_latency_ns = 20.0\ntransit = ["switch"]\n',
           '[topology.npu]\npreset = "h100"\nhbm_gb = 141\n',
           '[topology.nic.npu]\ninjection_gbps = 150.0\nejection_gbps = 150.0\n']
    out += [f'[[topology.nodes]]\nname = "npu{i}"\nkind = "npu"\n' for i in range(n)]
    out += [f'[[topology.nodes]]\nname = "leaf{x}"\nkind = "switch"\n' for x in range(n // 8)]
    out.append('[[topology.nodes]]\nname = "spine"\nkind = "switch"\n')
    out += [f'[[topology.links]]\na = "npu{i}"\nb = "leaf{i // 8}"\ngbps = 150.0\n'
            f'latency_ns = 20.0\n' for i in range(n)]
    out += [f'[[topology.links]]\na = "leaf{x}"\nb = "spine"\ngbps = 400.0\n'
            f'latency_ns = 200.0\n' for x in range(n // 8)]
    return "\n".join(out)


def case_config(case, tmp):
    """(config file, overrides) of a case."""
    n, spec = case["npus"], MODELS[case["model"]]
    ov = {"workload.kind": "training", "workload.model": spec["model"],
          "workload.iterations": 1, "network.model": "flow", "workload.chunks": 1,
          "workload.collective_form": case.get("form", "steps")}
    if spec["params"]:
        ov["workload.model_params"] = spec["params"]
    streams = case.get("form") == "streams"
    if case["model"] == "resnet50":
        # (as streams a ring makes p ops per chunk; step by step halving-doubling's p log p
        # are fewer than the ring's p (p - 1))
        ov.update({"workload.batch": 32 * n, "workload.precision": "fp32",
                   "workload.algorithm": "ring" if streams else "halving_doubling",
                   "workload.parallel": {"replicas": case.get("replicas", "all")}})
    else:
        m = case["micro_batches"]
        ov.update({"workload.precision": "mixed", "workload.optimizer": "adam",
                   "workload.parallel": {"tp": spec["tp"], "pp": spec["pp"],
                                         "micro_batches": m,
                                         "interleave": case.get("interleave", 1),
                                         "replicas": case.get("replicas", "all"),
                                         "tp_ranks": case.get("tp_ranks", "all")},
                   "workload.batch": n // (spec["tp"] * spec["pp"]) * m,
                   "workload.bucket_mb": 1024.0})
    if case["system"] == "cluster":
        path = os.path.join(tmp, "cluster.toml")
        with open(path, "w") as f:
            f.write('[topology]\nkind = "cluster"\nnode = "dgx-h100"\n'
                    'fabric = "rail-optimised"\nradix = 64\n'
                    '[network]\nflit_bytes = 32\nvcs = 2\nvc_buffer_flits = 32\n'
                    'wait_for_tail_credit = false\n')
        ov["topology.node_count"] = n // 8
    elif case["system"] == "two_level":
        path = os.path.join(tmp, f"two_level{n}.toml")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(two_level_toml(n))
    else:
        path = os.path.join(tmp, "torus.toml")
        with open(path, "w") as f:
            f.write('[topology]\nkind = "torus"\nlink_gbps = 100.0\nlink_latency_ns = 20.0\n'
                    '[topology.npu]\npreset = "h100"\nhbm_gb = 141\n'
                    '[network]\nflit_bytes = 32\nvcs = 2\nvc_buffer_flits = 32\n')
        ov["topology.dims"] = TORUS[n]
    return path, ov


def one(case, tmp):
    """Run one case in this process; print a JSON line."""
    import pysim
    from pysim.errors import ConfigError
    from pysim.topology import build as build_topology
    from pysim.workload.graph import run_graph
    from pysim.workload.memory import apply_training, training_memory_report
    from pysim.workload.training import training_graph, training_report
    out = dict(case)
    t0 = time.perf_counter()
    phases = {}
    try:
        path, ov = case_config(case, tmp)
        cfg = pysim.load(path, ov)
        t = time.process_time()
        topo = build_topology(cfg)
        phases["topology"] = time.process_time() - t
        t = time.process_time()
        graph, plan = training_graph(cfg, topo)
        phases["build"] = time.process_time() - t
        t = time.process_time()
        applied = apply_training(cfg, topo, graph, plan)
        phases["memory_plan"] = time.process_time() - t
        out["graph_ops"] = len(graph)
        res = run_graph(cfg, graph, topo=topo)
        p = res.profile
        phases.update({k: v for k, v in p["cpu"].items() if k != "load"})
        t = time.process_time()
        training_memory_report(res, applied)
        rep = training_report(graph, plan, res, cfg)
        phases["report"] = time.process_time() - t
        before = sum(v for k, v in phases.items() if k not in ("engine", "results", "report"))
        out.update(ok=True, engine_ops=p["engine_ops"], flows=res.flow.get("flows_started"),
                   setup_over_engine=before / max(p["cpu"]["engine"], 1e-9),
                   rate_recomputations=res.flow.get("rate_recomputations"),
                   events=p["events"], solver_seconds=p["solver_seconds"],
                   events_per_second=p["events"] / max(p["cpu"]["engine"], 1e-9),
                   iteration_seconds=rep["iteration_seconds"])
    except (ConfigError, MemoryError) as e:
        out.update(ok=False, refused=f"{type(e).__name__}: {e}")
    out["wall_seconds"] = time.perf_counter() - t0
    out["phases"] = {k: round(v, 3) for k, v in phases.items()}
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_seconds"] = ru.ru_utime + ru.ru_stime
    out["peak_gb"] = ru.ru_maxrss / 1e6          # (kB on Linux)
    print(json.dumps(out), flush=True)


def run_case(case, timeout, mem_gb, tmp):
    """The case in a fresh process under the limits: its JSON, or what stopped it."""
    limit = int(mem_gb * 2 ** 30)

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--one", json.dumps(case),
                             "--tmp", tmp], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=limits)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        status = None
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        status = f"stopped by the time limit ({timeout} s)"
    wall = time.perf_counter() - t0
    line = next((x for x in stdout.splitlines()[::-1] if x.startswith("{")), None)
    r = json.loads(line) if line else dict(case, ok=False)
    if status:
        r["refused"] = status
    elif line is None:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        r["refused"] = (f"stopped by the memory limit ({mem_gb:g} GB)" if "MemoryError" in
                        stderr else f"failed: {tail[0][:200]}")
    r["process_wall_seconds"] = wall
    return r


def row(r):
    ph = r.get("phases", {})
    where = ", ".join(f"{k} {v:.1f}" for k, v in ph.items() if v >= 0.05)
    if not r.get("ok"):
        wall = r.get("wall_seconds", r["process_wall_seconds"])
        return (f"| {r['model']} | {r['system']} | {r['npus']:,} | {wall:.1f} s | "
                f"{r.get('peak_gb', float('nan')):.2f} | {r.get('graph_ops', '-')} | - | - | - "
                f"| {r.get('refused', '')[:240]} | - |")
    return (f"| {r['model']} | {r['system']} | {r['npus']:,} | {r['wall_seconds']:.1f} s "
            f"({r['cpu_seconds']:.0f} CPU) | {r['peak_gb']:.2f} | {r['graph_ops']:,} / "
            f"{r['engine_ops']:,} | {r['flows']:,} | {r['events']:,} ({r['events_per_second']:,.0f}/s; "
            f"solver {r['solver_seconds']:.1f} s) | "
            f"{r['iteration_seconds']:.3f} s | {where} | {r['setup_over_engine']:.1f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,4096,16384",
                    help="NPU counts, comma-separated (up to 65536 on the cluster)")
    ap.add_argument("--models", default="gpt3,llama70b,resnet50",
                    help="of gpt3, llama70b, resnet50, comma-separated")
    ap.add_argument("--systems", default="cluster,torus",
                    help="of cluster, torus, two_level, comma-separated")
    ap.add_argument("--micro-batches", type=int, default=4,
                    help="micro-batches of one sample per iteration (GPT-3, Llama-like)")
    ap.add_argument("--form", default="streams", choices=["steps", "streams"],
                    help="workload.collective_form of every case")
    ap.add_argument("--replicas", default="one", choices=["one", "all"],
                    help="workload.parallel.replicas of every case")
    ap.add_argument("--tp-ranks", default="one", choices=["one", "all"],
                    help="workload.parallel.tp_ranks of the tensor-parallel cases")
    ap.add_argument("--interleave", type=int, default=1,
                    help="workload.parallel.interleave of GPT-3 and the Llama-like model "
                         "(micro-batches a multiple of pp)")
    ap.add_argument("--timeout", type=float, default=900,
                    help="wall seconds a case may take before it is stopped and reported")
    ap.add_argument("--mem-gb", type=float, default=12,
                    help="address-space limit of each case's process, GiB")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "scale.json"),
                    help="JSON file of every case with provenance")
    ap.add_argument("--one", help=argparse.SUPPRESS)     # (one case, in its own process)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.one:
        return one(json.loads(a.one), a.tmp)
    check(ap, a.force, [("--out", a.out)])
    from provenance import provenance
    prov = provenance()
    rows = []
    print("| model | system | NPUs | wall | peak GB | graph / engine ops | flows | "
          "events (per CPU s; in the solver) | iteration | where the CPU time went (s) | "
          "before the engine / engine |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            for system in a.systems.split(","):
                for n in [int(x) for x in a.sizes.split(",")]:
                    case = dict(model=model, system=system, npus=n,
                                micro_batches=a.micro_batches, form=a.form,
                                replicas=a.replicas, tp_ranks=a.tp_ranks,
                                interleave=a.interleave)
                    r = run_case(case, a.timeout, a.mem_gb, tmp)
                    rows.append(r)
                    print(row(r), flush=True)
                    write_json(a.out, dict(provenance=prov, args=vars(a), cases=rows),
                               quiet=True)             # (after each case: a long sweep)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
