"""Op graphs: DAGs of compute, send and delay ops, built here and executed inside csim.

    g = OpGraph()
    a = g.compute("npu0", cycles=1000)
    b = g.send("npu0", "npu1", bytes=1 << 20, after=[a])
    g.compute("npu1", cycles=500, after=[b])
    result = run_graph(cfg, g)            # per-op start and finish, makespan, a trace

Semantics (csim/_dag.pxd): an op starts the cycle its last dependency finishes (ops without
dependencies at cycle 0). A compute op occupies its node's compute unit for `cycles` (one
compute op at a time per node, in the order they become ready); a delay just waits; a send
cuts its message into packets of at most `workload.packet_flits` flits at the source NIC and
finishes when the tail of the last packet is delivered at the destination.

File format (`[workload] kind = "graph"`, `file = "ops.toml"`): an array `[[ops]]` of tables
with `name` (optional, unique), `kind` (compute, send, delay), `node` and `cycles` (compute),
`src`, `dst` and `bytes` (send), `cycles` (delay), and `after` (names of dependencies).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from pysim.config import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KINDS = {"compute": 0, "send": 1, "delay": 2}


class GraphError(ConfigError):
    """An op graph is malformed: unknown node, cycle of dependencies, bad size, ..."""


class OpGraph:
    """A DAG of ops. Nodes are named as in the topology; ops are numbered in order added."""

    def __init__(self):
        self.kind, self.node, self.dst, self.size, self.after, self.names = [], [], [], [], [], []

    def __len__(self):
        return len(self.kind)

    def _add(self, kind, node, dst, size, after, name):
        after = [self._ref(a) for a in (after or [])]
        if name is not None and name in self.names:
            raise GraphError(f"op name {name!r} is used twice")
        self.kind.append(kind)
        self.node.append(node)
        self.dst.append(dst)
        self.size.append(size)
        self.after.append(after)
        self.names.append(name)
        return len(self.kind) - 1

    def _ref(self, a):
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            if not 0 <= a < len(self.kind):
                raise GraphError(f"dependency {a}: no such op (ops are 0..{len(self.kind) - 1})")
            return int(a)
        if isinstance(a, str):
            if a not in self.names:
                raise GraphError(f"dependency {a!r}: no op of that name (an op can only "
                                 f"depend on ops given before it)")
            return self.names.index(a)
        raise GraphError(f"dependency {a!r}: expected an op id or name")

    def compute(self, node, cycles, after=None, name=None):
        return self._add("compute", node, None, _size(cycles, "cycles", name), after, name)

    def send(self, src, dst, bytes, after=None, name=None):
        return self._add("send", src, dst, _size(bytes, "bytes", name), after, name)

    def delay(self, cycles, after=None, name=None):
        return self._add("delay", None, None, _size(cycles, "cycles", name), after, name)

    def label(self, i):
        return self.names[i] if self.names[i] is not None else f"op{i}"


def _size(v, what, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise GraphError(f"op {name or ''}: {what} = {v!r}: expected an integer >= 0")
    return int(v)


def load_graph(path) -> OpGraph:
    """Read an op-graph TOML file ([[ops]])."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise GraphError(f"workload.file: no such file {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise GraphError(f"{path}: not valid TOML: {e}") from None
    ops = raw.get("ops")
    if not isinstance(ops, list) or not ops:
        raise GraphError(f"{path}: expected an array of tables [[ops]]")
    g = OpGraph()
    fields = {"compute": {"node", "cycles"}, "send": {"src", "dst", "bytes"},
              "delay": {"cycles"}}
    for i, op in enumerate(ops):
        where = f"{path}: ops[{i}]"
        kind = op.get("kind")
        if kind not in fields:
            raise GraphError(f"{where}.kind = {kind!r}: expected compute, send or delay")
        extra = set(op) - fields[kind] - {"kind", "name", "after"}
        if extra:
            raise GraphError(f"{where}: unknown field(s) {', '.join(sorted(extra))} for a "
                             f"{kind} op (it takes {', '.join(sorted(fields[kind]))}, name, "
                             f"after)")
        missing = fields[kind] - set(op)
        if missing:
            raise GraphError(f"{where}: a {kind} op needs {', '.join(sorted(missing))}")
        try:
            if kind == "compute":
                g.compute(op["node"], op["cycles"], op.get("after"), op.get("name"))
            elif kind == "send":
                g.send(op["src"], op["dst"], op["bytes"], op.get("after"), op.get("name"))
            else:
                g.delay(op["cycles"], op.get("after"), op.get("name"))
        except GraphError as e:
            raise GraphError(f"{where}: {e}") from None
    return g


def compile_graph(g: OpGraph, topo):
    """Check the graph against the topology and turn it into csim's arrays."""
    index = {name: i for i, name in enumerate(topo.node_names)}

    def node_id(name, i, what):
        if name not in index:
            known = ", ".join(topo.node_names[:8]) + (" ..." if topo.n_nodes > 8 else "")
            raise GraphError(f"op {g.label(i)}: {what} = {name!r}: no node of that name "
                             f"(nodes: {known})")
        n = index[name]
        if topo.node_kinds[n] == "switch":
            raise GraphError(f"op {g.label(i)}: {what} = {name!r} is a switch, which has no "
                             f"compute unit or NIC")
        return n

    n_ops = len(g)
    if n_ops == 0:
        raise GraphError("the op graph is empty")
    node = np.full(n_ops, -1, np.int32)
    dst = np.full(n_ops, -1, np.int32)
    for i in range(n_ops):
        k = g.kind[i]
        if k == "compute":
            node[i] = node_id(g.node[i], i, "node")
        elif k == "send":
            node[i] = node_id(g.node[i], i, "src")
            dst[i] = node_id(g.dst[i], i, "dst")
            if node[i] == dst[i]:
                raise GraphError(f"op {g.label(i)}: a send from {g.node[i]!r} to itself")
    deps = np.array([len(set(a)) for a in g.after], np.int32)
    succ_lists = [[] for _ in range(n_ops)]
    for i, a in enumerate(g.after):
        for d in set(a):
            succ_lists[d].append(i)
    succ_ptr = np.zeros(n_ops + 1, np.int64)
    succ_ptr[1:] = np.cumsum([len(s) for s in succ_lists])
    succ = np.array([x for s in succ_lists for x in sorted(s)], np.int32)
    # dependencies only point backwards (an op names ops given before it), so no cycles
    return dict(kind=np.array([KINDS[k] for k in g.kind], np.int8), node=node, dst=dst,
                size=np.array(g.size, np.int64), deps=deps, succ_ptr=succ_ptr, succ=succ)


@dataclass
class GraphResult:
    """What an op-graph run measured. `to_dict()` is what `pysim run --json` writes."""
    makespan_cycles: int
    ops: list                       # per op: name, kind, node, dst, size, start, finish
    packets: int
    avg_packet_latency: float
    flit_hops: int
    wall_seconds: float
    cycles_per_second: float
    node_names: list
    config: dict = field(default_factory=dict)
    seed: int = 0
    version: str = ""
    build: dict = field(default_factory=dict)
    collective: dict = field(default_factory=dict)   # set for collective workloads

    def to_dict(self):
        d = dict(self.__dict__)
        if d["avg_packet_latency"] != d["avg_packet_latency"]:
            d["avg_packet_latency"] = None
        d.update(d.pop("collective"))        # collective_cycles, algbw_gbps, ... top-level
        return d

    def busy_cycles(self):
        """Per node: cycles its compute unit was busy."""
        busy = {}
        for op in self.ops:
            if op["kind"] == "compute":
                busy[op["node"]] = busy.get(op["node"], 0) + op["finish"] - op["start"]
        return busy

    def trace(self):
        """A Chrome/Perfetto trace: a process per node, a track per resource (compute, send
        from this node), plus one for delays; 1 cycle is shown as 1 microsecond."""
        events = []
        pids = {name: i for i, name in enumerate(self.node_names)}
        delay_pid = len(self.node_names)
        for name, pid in pids.items():
            events.append({"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0,
                           "args": {"name": "compute"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1,
                           "args": {"name": "send"}})
        events.append({"ph": "M", "name": "process_name", "pid": delay_pid,
                       "args": {"name": "delays"}})
        for op in self.ops:
            if op["start"] < 0:
                continue
            pid = pids[op["node"]] if op["node"] is not None else delay_pid
            tid = {"compute": 0, "send": 1, "delay": 0}[op["kind"]]
            args = {"size": op["size"]}
            if op["kind"] == "send":
                args["dst"] = op["dst"]
            events.append({"ph": "X", "name": op["name"], "cat": op["kind"], "pid": pid,
                           "tid": tid, "ts": op["start"], "dur": op["finish"] - op["start"],
                           "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def summary(self):
        busy = self.busy_cycles()
        rows = []
        c = self.collective
        if c:
            rows += [("collective", f"{c['collective']} / {c['algorithm']}, {c['bytes']} bytes "
                                    f"per node, {len(c['participants'])} participants, "
                                    f"{c['chunks']} chunks"),
                     ("ring order", " ".join(c["order"])),
                     ("time", f"{c['collective_cycles']} cycles"),
                     ("bandwidth", f"algbw {c['algbw_gbps']:.2f} GB/s, busbw "
                                   f"{c['busbw_gbps']:.2f} GB/s (nccl-tests conventions)")]
        rows += [("makespan", f"{self.makespan_cycles} cycles"),
                ("ops", f"{len(self.ops)} ({', '.join(f'{k} {v}' for k, v in sorted(self._count().items()))})"),
                ("packets", f"{self.packets}, avg latency "
                            + (f"{self.avg_packet_latency:.1f}" if self.packets else "n/a")
                            + " cycles"),
                ("compute busy", ", ".join(f"{n} {100 * b / max(self.makespan_cycles, 1):.0f}%"
                                           for n, b in sorted(busy.items())[:8]) or "none"),
                ("speed", f"{self.cycles_per_second:,.0f} cycles/s, {self.wall_seconds:.2f} s "
                          f"wall"),
                ("seed / version", f"{self.seed} / pysim {self.version}")]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)

    def _count(self):
        c = {}
        for op in self.ops:
            c[op["kind"]] = c.get(op["kind"], 0) + 1
        return c


def run_graph(cfg, graph=None) -> GraphResult:
    """Run an op graph (given, or read from workload.file) on cfg's network."""
    from csim import _engine
    from pysim import __version__
    from pysim.network import compile_network
    from pysim.sim import _check
    t0 = time.perf_counter()
    if graph is None:
        if cfg.workload.file is None:
            raise ConfigError("workload.kind = 'graph' needs workload.file (an op-graph file)")
        path = cfg.workload.file
        if not os.path.isabs(path):
            path = os.path.join(cfg.base_dir, path)
        graph = load_graph(path)
    network = compile_network(cfg)
    arrays = compile_graph(graph, network.topo)
    eng = _engine.Engine(network.arrays)
    eng.set_graph(arrays["kind"], arrays["node"], arrays["dst"], arrays["size"],
                  arrays["deps"], arrays["succ_ptr"], arrays["succ"],
                  cfg.workload.packet_flits, cfg.network.flit_bytes)
    t_run = time.perf_counter()
    st = eng.run(cfg.workload.max_cycles, stop="all")
    run_s = time.perf_counter() - t_run
    _check(st, network, eng)
    start, finish = eng.op_times()
    if st != "done":
        unfinished = [graph.label(i) for i in np.flatnonzero(finish < 0)[:5]]
        raise ConfigError(f"workload.max_cycles = {cfg.workload.max_cycles}: the graph did not "
                          f"finish (unfinished: {', '.join(unfinished)})")
    names = network.topo.node_names
    ops = []
    for i in range(len(graph)):
        ops.append(dict(name=graph.label(i), kind=graph.kind[i],
                        node=graph.node[i], dst=graph.dst[i], size=graph.size[i],
                        start=int(start[i]), finish=int(finish[i])))
    c = eng.counters()
    cfg_dict = cfg.to_dict()
    cfg_dict["_system"] = network.topo.name
    makespan = int(finish.max())
    return GraphResult(
        makespan_cycles=makespan, ops=ops, packets=int(c["packets_done"]),
        avg_packet_latency=c["sum_lat"] / c["meas_done"] if c["meas_done"] else float("nan"),
        flit_hops=int(c["flit_hops"]), wall_seconds=time.perf_counter() - t0,
        cycles_per_second=c["now"] / run_s if run_s > 0 else float("nan"),
        node_names=list(names), config=cfg_dict, seed=int(cfg.simulation.seed),
        version=__version__, build=dict(_engine.BUILD))
