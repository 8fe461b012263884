"""The flow-level network (network.model = "flow") against the flit level: speed and agreement
(a benchmark, not a test). Writes JSON.

    python bench/flow.py speed [--repeat 3] [--flit] [--out bench/results/flow_speed.json]
    python bench/flow.py agreement [--bytes 1048576,16777216] [--vcs 4] [--systems ring8,...]
                                   [--out bench/results/flow_agreement.json]
    python bench/flow.py table bench/results/flow_agreement.json     (as Markdown)
    python bench/flow.py iterations [--out bench/results/flow_iterations.json]

speed: each case in a fresh process (its peak memory its own), --repeat times, the median
kept. Cases:
  large       the 256 MB ring all-reduce on 8 NPUs of bench/collectives.py --large
  mesh32      a ring all-reduce of 64 MB over all 1,024 nodes of a 32x32 mesh, one chunk
              (3.1 M ops)
  offload     an iteration-shaped op graph on mcdla-8: 16 layers on 8 NPUs, each layer's
              forward compute writes its activations to a memory node and the backward pass
              reads them back before its compute, whose gradients (64 MB a layer) are
              all-reduced over a ring (2 GB offloaded per NPU in 64 KB pieces; --flit runs it at
              1/16 of the bytes at both levels)
  pieces      the offload case with 1 MB memory pieces instead of 64 KB
--flit adds the flit level where it is affordable (large: ~8 s a run; offload at 1/16 scale),
run alternately with the flow level so that the machine's load hits both alike.
Reported: wall seconds (everything: building the graph, compiling, simulating), engine
seconds, ops, flows, rate recomputations and the flows they covered, simulated cycles,
peak memory.

iterations: training iterations and the collectives they are made of, at both levels: the
flow level's time over the flit level's, and the speed ratio (the flit level's CPU seconds over
the flow level's, for the whole run and for the engine alone). Cases:
  hd64        the DGX-1's 64 MiB halving-doubling all-reduce as shipped (4 chunks), and with
              one chunk (hd64-1)
  resnet50    one data-parallel ResNet-50 iteration, batch 256, on the DGX-1 (ring
              all-reduces of its gradient buckets beside the backward pass)
  offload     the offload case at 1/16 of its bytes (mcdla-8)
  large       the 256 MB ring all-reduce on 8 NPUs
  turns       the DGX-1's gpu2 sends 4 messages of 4 MiB to gpu0 (one NVLink) and 4 of 2 MiB
              to gpu3 (two), all at once: the finish of each message at both levels (the
              NIC's order, see docs/flow.md)
  fanout      the DGX-1's gpu0 sends 4 MiB to gpu1, gpu2 (one NVLink each) and gpu4 (two) at
              once: the finish of each (a NIC driving several links, see docs/flow.md)

agreement: every shipped system x every collective and algorithm it accepts, at each size,
both levels; the flow level's time over the flit level's. The big meshes run over one row.
--vcs 0 leaves each system's VCs as shipped.
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
TOPO = os.path.join(HERE, "..", "topologies")
sys.path.insert(0, HERE)

COMBOS = ([("all_reduce", a) for a in ("ring", "bidir_ring", "direct", "halving_doubling",
                                       "tree", "hierarchical")] +
          [(c, a) for c in ("reduce_scatter", "all_gather")
           for a in ("ring", "bidir_ring", "direct", "halving_doubling")] +
          [("all_to_all", "direct")] +
          [(c, a) for c in ("broadcast", "reduce") for a in ("ring", "direct")])


def offload_graph(layers=16, scale=1):
    """An iteration-shaped op graph on mcdla-8 (see the module docstring): per NPU, per layer,
    2 GB / layers / scale of activations written after the forward compute and read back
    before the backward one; per layer 64 MB / scale of gradients all-reduced over a ring of
    the NPUs after their backward computes."""
    from pysim.workload import OpGraph
    npus = [f"npu{i}" for i in range(8)]
    mems = [f"mem{i}" for i in range(8)]
    act = (2 << 30) // layers // scale
    grad = (64 << 20) // scale
    g = OpGraph()
    last, writes = {}, {}
    for l in range(layers):
        for i, n in enumerate(npus):
            c = g.compute(n, flops=4e11, bytes=act, after=[last[n]] if n in last else None)
            writes[l, n] = g.mem_write(n, mems[(i + l) % 8], act, after=[c])
            last[n] = c
    for l in reversed(range(layers)):
        done = {}
        for i, n in enumerate(npus):
            r = g.mem_read(n, mems[(i + l) % 8], act, after=[last[n], writes[l, n]])
            last[n] = done[n] = g.compute(n, flops=8e11, bytes=act, after=[r])
        have = dict(done)                       # ring all-reduce, one chunk: 2(p - 1) steps
        for step in range(2 * (len(npus) - 1)):
            nxt = {}
            for i, n in enumerate(npus):
                m = npus[(i + 1) % len(npus)]
                nxt[m] = g.send(n, m, grad // len(npus), after=[have[n]])
            have = nxt
        for n in npus:
            last[n] = g.delay(0, after=[last[n], have[n]])
    return g


def case_config(name, model, scale=1):
    import pysim
    from collectives import large_config
    if name == "large":
        return large_config().with_overrides({"network.model": model})
    if name == "mesh32":
        return pysim.load(os.path.join(TOPO, "mesh32x32.toml"), {
            "workload.kind": "collective", "workload.bytes": 64 << 20, "network.vcs": 4,
            "workload.chunks": 1,
            "network.model": model})
    piece = (1 << 20) if name == "pieces" else 65536
    return pysim.load(os.path.join(TOPO, "mcdla-8.toml"), {
        "workload.kind": "graph", "network.vcs": 4, "network.model": model,
        "workload.mem_piece_bytes": piece, "workload.slice_cycles": 100000})


def one(name, model, scale):
    import pysim
    from pysim.workload import run_graph
    cfg = case_config(name, model)
    t = time.perf_counter()
    if name in ("offload", "pieces"):
        g = offload_graph(scale=scale)
        built = time.perf_counter() - t
        r = run_graph(cfg, g)
    else:
        built = None
        r = pysim.simulate(cfg)
    wall = time.perf_counter() - t
    d = r.to_dict()
    engine = d["makespan_cycles"] / d["cycles_per_second"] if d["cycles_per_second"] else 0.0
    return dict(case=name, model=model, scale=scale, wall_seconds=wall,
                graph_build_seconds=built, engine_seconds=engine,
                makespan_cycles=d["makespan_cycles"], ops=len(d["ops"]),
                packets=d["packets"], flit_hops=d["flit_hops"], **d["flow"],
                peak_memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)


def speed(a):
    plan = [("large", "flow", 1), ("mesh32", "flow", 1), ("offload", "flow", 1),
            ("pieces", "flow", 1)]
    if a.flit:
        plan += [("large", "flit", 1), ("offload", "flow", 16), ("offload", "flit", 16)]
    rows = {}
    for _ in range(max(1, a.repeat)):              # rounds: each case once per round
        for name, model, scale in plan:
            out = subprocess.run([sys.executable, __file__, "child", name, model, str(scale)],
                                 capture_output=True, text=True, check=True)
            rows.setdefault((name, model, scale), []).append(
                json.loads(out.stdout.strip().splitlines()[-1]))
    result = []
    for (name, model, scale), runs in rows.items():
        runs.sort(key=lambda x: x["wall_seconds"])
        row = dict(runs[len(runs) // 2], wall_seconds_runs=[x["wall_seconds"] for x in runs])
        result.append(row)
        print(f"{name:>8} {model} 1/{scale:<3}: {row['wall_seconds']:8.3f} s wall "
              f"(engine {row['engine_seconds']:.3f} s), {row['ops']:>9,} ops, "
              f"{row.get('flows_started', 0):>9,} flows, {row['makespan_cycles']:>12,} cycles, "
              f"{row['peak_memory_mb']:.0f} MB")
    return dict(benchmark="flow speed", rows=result)


def agreement(a):
    import pysim
    from pysim.errors import ConfigError
    sizes = [int(x) for x in a.bytes.split(",")]
    names = sorted(f[:-5] for f in os.listdir(TOPO) if f.endswith(".toml"))
    if a.systems:
        names = a.systems.split(",")
    rows = []
    for name in names:
        for nbytes in sizes:
            for coll, alg in COMBOS:
                over = {"workload.kind": "collective", "workload.collective": coll,
                        "workload.algorithm": alg, "workload.bytes": nbytes}
                if a.vcs:
                    over["network.vcs"] = a.vcs
                if name in ("mesh16x16", "mesh32x32"):
                    over["workload.group"] = [f"n{x}_0" for x in range(int(name[4:6]))]
                try:
                    cfg = pysim.load(os.path.join(TOPO, name + ".toml"), over)
                    t = time.perf_counter()
                    flit = pysim.simulate(cfg)
                    t_flit = time.perf_counter() - t
                except ConfigError:
                    continue                  # the algorithm does not apply here
                t = time.perf_counter()
                flow = pysim.simulate(cfg.with_overrides({"network.model": "flow"}))
                t_flow = time.perf_counter() - t
                ratio = flow.makespan_cycles / flit.makespan_cycles
                rows.append(dict(system=name, collective=coll, algorithm=alg, bytes=nbytes,
                                 vcs=a.vcs, flit_cycles=flit.makespan_cycles,
                                 flow_cycles=flow.makespan_cycles, ratio=ratio,
                                 flit_wall_seconds=t_flit, flow_wall_seconds=t_flow))
                print(f"{name:>17} {coll:>14} {alg:>16} {nbytes:>9}: flit "
                      f"{flit.makespan_cycles:>10} flow {flow.makespan_cycles:>10} "
                      f"{100 * (ratio - 1):+7.2f}%  ({t_flit:.2f} s / {t_flow:.3f} s)",
                      flush=True)
    return dict(benchmark="flow agreement", rows=rows)


def iteration_case(name, model):
    """(config, graph or None) of an iterations case."""
    import pysim
    if name.startswith("hd64"):
        return pysim.load(os.path.join(TOPO, "dgx1-v100.toml"), {
            "workload.kind": "collective", "workload.algorithm": "halving_doubling",
            "workload.bytes": 64 << 20, "network.model": model,
            "workload.chunks": 1 if name == "hd64-1" else 4}), None
    if name == "resnet50":
        return pysim.load(os.path.join(TOPO, "dgx1-v100.toml"), {
            "workload.kind": "training", "workload.model": "resnet50", "workload.batch": 256,
            "workload.iterations": 1, "network.model": model}), None
    if name == "offload":
        return case_config("offload", model), offload_graph(scale=16)
    if name == "turns":
        from pysim.workload import OpGraph
        g = OpGraph()
        for i in range(8):
            g.send("gpu2", "gpu0" if i < 4 else "gpu3", 4 << 20 if i < 4 else 2 << 20,
                   after=[g.delay(1 + 22 * i)])
        return pysim.load(os.path.join(TOPO, "dgx1-v100.toml"), {
            "workload.kind": "graph", "network.model": model}), g
    if name == "fanout":
        from pysim.workload import OpGraph
        g = OpGraph()
        for d in ("gpu1", "gpu2", "gpu4"):
            g.send("gpu0", d, 4 << 20)
        return pysim.load(os.path.join(TOPO, "dgx1-v100.toml"), {
            "workload.kind": "graph", "network.model": model}), g
    return case_config(name, model), None


def one_iteration(name, model):
    import pysim
    from pysim.workload import run_graph
    t = time.process_time()
    cfg, g = iteration_case(name, model)
    r = run_graph(cfg, g) if g is not None else pysim.simulate(cfg)
    cpu = time.process_time() - t
    p = getattr(r, "profile", None) or {}
    sends = [op["finish"] for op in r.ops if op["kind"] == "send"] if name in ("turns", "fanout") else None
    return dict(case=name, model=model, makespan_cycles=r.makespan_cycles, cpu_seconds=cpu,
                send_finish=sends,
                engine_cpu_seconds=p.get("cpu", {}).get("engine"),
                solver_seconds=p.get("solver_seconds"))


def iterations(a):
    rows = []
    for name in a.cases.split(","):
        got = {}
        for model in ("flow", "flit"):
            out = subprocess.run([sys.executable, __file__, "child-iteration", name, model],
                                 capture_output=True, text=True, check=True)
            got[model] = json.loads(out.stdout.strip().splitlines()[-1])
        fl, ft = got["flow"], got["flit"]
        row = dict(case=name, flit=ft, flow=fl,
                   error=fl["makespan_cycles"] / ft["makespan_cycles"] - 1,
                   speed_ratio=ft["cpu_seconds"] / max(fl["cpu_seconds"], 1e-9),
                   engine_speed_ratio=(ft["engine_cpu_seconds"] or 0) /
                   max(fl["engine_cpu_seconds"] or 0, 1e-6))
        rows.append(row)
        print(f"{name:>9}: flit {ft['makespan_cycles']:>12,} cycles ({ft['cpu_seconds']:.2f} s) "
              f"flow {fl['makespan_cycles']:>12,} ({fl['cpu_seconds']:.3f} s): "
              f"{100 * row['error']:+.2f}%, speed x{row['speed_ratio']:.0f} "
              f"(engine x{row['engine_speed_ratio']:.0f})", flush=True)
        if ft.get("send_finish"):
            print(f"{'':>11}finish of each message: flit {ft['send_finish']}, "
                  f"flow {fl['send_finish']}", flush=True)
    return dict(benchmark="flow iterations", rows=rows)


SHORT = {"ring-of-rings4x4": "rings4x4", "fully-connected8": "fc8", "dgx1-v100": "dgx1",
         "torus4x4x4": "torus4^3"}


def table(path):
    """The agreement JSON as a Markdown table: a row per collective and algorithm, a column
    per system, the flow level's time over the flit level's as a percentage difference."""
    with open(path) as f:
        rows = json.load(f)["rows"]
    systems = sorted({r["system"] for r in rows})
    cells = {(r["collective"], r["algorithm"], r["system"]): r["ratio"] for r in rows}
    lines = ["| collective / algorithm | " + " | ".join(SHORT.get(s, s) for s in systems) +
             " |", "|---|" + "---:|" * len(systems)]
    for coll, alg in COMBOS:
        if not any((coll, alg, s) in cells for s in systems):
            continue
        vals = [cells.get((coll, alg, s)) for s in systems]
        lines.append(f"| {coll} / {alg} | " + " | ".join(
            "" if v is None else f"{100 * (v - 1):+.1f}" for v in vals) + " |")
    return "\n".join(lines)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        print(json.dumps(one(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "child-iteration":
        print(json.dumps(one_iteration(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "table":
        print(table(sys.argv[2]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["speed", "agreement", "iterations"])
    ap.add_argument("--cases", default="hd64,hd64-1,resnet50,offload,large")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--flit", action="store_true")
    ap.add_argument("--bytes", default="1048576")
    ap.add_argument("--vcs", type=int, default=4)
    ap.add_argument("--systems", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    path = a.out or os.path.join(HERE, "results", f"flow_{a.what}.json")
    check(ap, a.force, [("--out", path)])
    out = {"speed": speed, "agreement": agreement, "iterations": iterations}[a.what](a)
    from provenance import provenance
    out.update(**provenance(), argv=sys.argv[1:])
    write_json(path, out)


if __name__ == "__main__":
    main()
