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

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from csim import _engine
from pysim import __version__
from pysim.config import MAX_INT, ConfigError, read_toml
from pysim.network import compile_network
from pysim.topology import ns_to_cycles
from pysim.workload.base import check_status, link_report, register

MAX_OPS = 10_000_000       # ops in one graph (built in Python: ~3 s and ~200 MB a million)

KINDS = {"compute": 0, "send": 1, "delay": 2}   # csim's primitive ops


class GraphError(ConfigError):
    """An op graph is malformed: unknown node, cycle of dependencies, bad size, ..."""


class OpGraph:
    """A DAG of ops. Nodes are named as in the topology; ops are numbered in order added."""

    def __init__(self):
        self.kind, self.node, self.dst, self.size, self.after, self.names = [], [], [], [], [], []
        self._by_name = {}
        self.work = []                  # compute ops given as (flops, bytes): the roofline

    def __len__(self):
        return len(self.kind)

    def _add(self, kind, node, dst, size, after, name):
        if isinstance(after, (str, int, np.integer)) and not isinstance(after, bool):
            after = [after]                   # one dependency, given bare
        if after is not None and not isinstance(after, (list, tuple)):
            raise GraphError(f"after = {after!r}: expected a list of op names or ids")
        if name is not None and not isinstance(name, str):
            raise GraphError(f"name = {name!r}: expected a string")
        after = [self._ref(a) for a in (after or [])]
        if name is not None and name in self._by_name:
            raise GraphError(f"op name {name!r} is used twice")
        if len(self.kind) >= MAX_OPS:
            raise GraphError(f"the op graph passes {MAX_OPS:,} ops (a collective makes ops per "
                             f"participant, step and chunk: fewer workload.chunks make fewer)")
        if name is not None:
            self._by_name[name] = len(self.kind)
        self.kind.append(kind)
        self.node.append(node)
        self.dst.append(dst)
        self.size.append(size)
        self.after.append(after)
        self.names.append(name)
        self.work.append(None)
        return len(self.kind) - 1

    def _ref(self, a):
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            if not 0 <= a < len(self.kind):
                raise GraphError(f"dependency {a}: no such op (an op can only depend on ops "
                                 f"given before it" +
                                 (f": 0..{len(self.kind) - 1})" if self.kind else ")"))
            return int(a)
        if isinstance(a, str):
            if a not in self._by_name:
                raise GraphError(f"dependency {a!r}: no op of that name (an op can only "
                                 f"depend on ops given before it)")
            return self._by_name[a]
        raise GraphError(f"dependency {a!r}: expected an op id or name")

    def compute(self, node, cycles=None, after=None, name=None, flops=None, bytes=None):
        """A compute op: `cycles` on the node's compute unit, or `flops` and/or `bytes` (of
        memory traffic) timed by the node's roofline: max(flops / peak, bytes / bandwidth)."""
        what = f"op {name!r}" if name else f"op {len(self.kind)}"
        if cycles is None and flops is None and bytes is None:
            raise GraphError(f"{what}: a compute op needs cycles, or flops and/or bytes (a "
                             f"roofline)")
        if cycles is not None and (flops is not None or bytes is not None):
            raise GraphError(f"{what}: a compute op takes cycles, or flops and/or bytes (a "
                             f"roofline), not both")
        if cycles is not None:
            return self._add("compute", node, None, _size(cycles, "cycles", name), after, name)
        i = self._add("compute", node, None, -1, after, name)
        self.work[i] = (_size(flops or 0, "flops", name, real=True),
                        _size(bytes or 0, "bytes", name))
        return i

    def send(self, src, dst, bytes, after=None, name=None):
        return self._add("send", src, dst, _size(bytes, "bytes", name), after, name)

    def delay(self, cycles, after=None, name=None):
        return self._add("delay", None, None, _size(cycles, "cycles", name), after, name)

    def memory(self, node, bytes, after=None, name=None):
        """Memory traffic of `bytes` at an NPU's HBM (a host's DRAM): it holds the node's
        memory unit for bytes / bandwidth cycles, in turn with other memory traffic there
        (the memory parts of roofline compute ops among them)."""
        return self._add("memory", node, None, _size(bytes, "bytes", name), after, name)

    def reduce(self, node, bytes, engine="npu", after=None, name=None):
        """Reduce `bytes` of received data into local data at an NPU: on its own cores
        (engine 'npu': 4 bytes of HBM traffic per byte, and the compute unit for bytes /
        reduce_gbps) or on its collectives offload engine ('offload')."""
        if engine not in ("npu", "offload"):
            raise GraphError(f"op {name or len(self.kind)}: engine = {engine!r}: expected "
                             f"'npu' or 'offload'")
        return self._add("reduce_" + engine, node, None, _size(bytes, "bytes", name), after,
                         name)

    def engine(self, node, bytes, after=None, name=None):
        """A reduction of `bytes` on the node's collectives offload engine (its own unit, at
        [topology.npu] offload_gbps)."""
        return self._add("engine", node, None, _size(bytes, "bytes", name), after, name)

    def mem_write(self, npu, mem, bytes, after=None, name=None):
        """npu writes `bytes` into memory node `mem`: the data crosses the network and the
        node's memory controller stores it as it arrives (see compile_graph)."""
        return self._add("mem_write", npu, mem, _size(bytes, "bytes", name), after, name)

    def mem_read(self, npu, mem, bytes, after=None, name=None):
        """npu reads `bytes` from memory node `mem`: a request, the controller's access, the
        data back as it is read."""
        return self._add("mem_read", npu, mem, _size(bytes, "bytes", name), after, name)

    def label(self, i):
        return self.names[i] if self.names[i] is not None else f"op{i}"


def _size(v, what, name, real=False):
    """A count (cycles, bytes) >= 0: an integer, or a float with an integer value as TOML
    writes 1e6; with real, any finite number >= 0 (FLOPs)."""
    where = f"op {name!r}: " if name else ""
    ok = (not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating))
          and math.isfinite(v) and v >= 0 and (real or float(v).is_integer()))
    if not ok:
        raise GraphError(f"{where}{what} = {v!r}: expected {'a number' if real else 'an integer'}"
                         f" >= 0")
    if not real and v > MAX_INT:
        raise GraphError(f"{where}{what} = {v!r}: expected at most {MAX_INT:,}")
    return float(v) if real else int(v)


def load_graph(path) -> OpGraph:
    """Read an op-graph TOML file ([[ops]])."""
    raw = read_toml(path, "workload.file", GraphError)
    ops = raw.get("ops")
    if ops == []:
        raise GraphError(f"{path}: no ops; expected at least one [[ops]] table")
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise GraphError(f"{path}: expected an array of tables [[ops]]")
    g = OpGraph()
    fields = {"compute": {"node"}, "send": {"src", "dst", "bytes"},
              "delay": {"cycles"}, "reduce": {"node", "bytes"},
              "mem_write": {"npu", "mem", "bytes"},
              "mem_read": {"npu", "mem", "bytes"}}
    optional = {"compute": {"cycles", "flops", "bytes"}, "reduce": {"engine"}}
    for i, op in enumerate(ops):
        where = f"{path}: ops[{i}]"
        kind = op.get("kind")
        if kind not in fields:
            raise GraphError(f"{where}.kind = {kind!r}: expected compute, send, delay, "
                             f"reduce, mem_write or mem_read")
        takes = fields[kind] | optional.get(kind, set()) | {"name", "after"}
        extra = set(op) - takes - {"kind"}
        if extra:
            raise GraphError(f"{where}: unknown field(s) {', '.join(sorted(extra))} for a "
                             f"{kind} op (it takes {', '.join(sorted(takes))})")
        missing = fields[kind] - set(op)
        if missing:
            raise GraphError(f"{where}: a {kind} op needs {', '.join(sorted(missing))}")
        try:
            if kind == "compute":
                g.compute(op["node"], op.get("cycles"), op.get("after"), op.get("name"),
                          flops=op.get("flops"), bytes=op.get("bytes"))
            elif kind == "send":
                g.send(op["src"], op["dst"], op["bytes"], op.get("after"), op.get("name"))
            elif kind == "reduce":
                g.reduce(op["node"], op["bytes"], op.get("engine", "npu"), op.get("after"),
                         op.get("name"))
            elif kind == "mem_write":
                g.mem_write(op["npu"], op["mem"], op["bytes"], op.get("after"), op.get("name"))
            elif kind == "mem_read":
                g.mem_read(op["npu"], op["mem"], op["bytes"], op.get("after"), op.get("name"))
            else:
                g.delay(op["cycles"], op.get("after"), op.get("name"))
        except GraphError as e:
            raise GraphError(f"{where}: {e}") from None
    return g


REQUEST_BYTES = 64          # a memory read request


def compile_graph(g: OpGraph, topo, cfg=None):
    """Check the graph against the topology and turn it into csim's arrays.

    Memory ops become primitive ops on the memory node's controller (its compute unit, one
    access at a time, in order), in pieces of workload.mem_piece_bytes so that transfer and
    access overlap: a write of b bytes is, per piece, a send npu -> mem then an access of
    piece / bandwidth cycles (the first also pays the access latency); a read is a request
    send npu -> mem, then per piece an access and a send mem -> npu. A memory op starts with
    its first piece and finishes with its last. Memory nodes cannot run compute ops; writing
    more than a node's capacity (writes add up; nothing is freed) is an error naming it.
    Returns the arrays and, per op of `g`, its (first, last) primitive op."""
    index = {name: i for i, name in enumerate(topo.node_names)}

    def node_id(name, i, what, kinds=None):
        if name not in index:
            known = ", ".join(topo.node_names[:8]) + (" ..." if topo.n_nodes > 8 else "")
            raise GraphError(f"op {g.label(i)}: {what} = {name!r}: no node of that name "
                             f"(nodes: {known})")
        n = index[name]
        kind = topo.node_kinds[n]
        if kind == "switch":
            raise GraphError(f"op {g.label(i)}: {what} = {name!r} is a switch, which has no "
                             f"compute unit or NIC")
        if kinds and kind not in kinds:
            raise GraphError(f"op {g.label(i)}: {what} = {name!r} is a {kind} node; expected "
                             f"{' or '.join(kinds)}")
        return n

    if len(g) == 0:
        raise GraphError("the op graph is empty")
    mem = memory_params(topo, cfg)
    piece = cfg.workload.mem_piece_bytes if cfg is not None else 65536
    kind, node, dst, size, after, unit = [], [], [], [], [], []
    slice_cycles = cfg.workload.slice_cycles if cfg is not None else 1000
    span = []                           # per op of g: (first primitive, last primitive)
    isolated = {}                       # roofline ops: their time alone
    stored = {}

    def prim(k, n, d, s, deps, u=0):
        kind.append(KINDS[k])
        unit.append(u)
        node.append(n)
        dst.append(d)
        size.append(int(s))
        after.append(sorted(set(deps)))
        return len(kind) - 1

    for i in range(len(g)):
        k = g.kind[i]
        deps = [span[d][1] for d in g.after[i]]
        if k == "compute" and g.work[i] is None:
            n = node_id(g.node[i], i, "node", ("npu", "host"))
            p = prim("compute", n, -1, g.size[i], deps)
            span.append((p, p))
        elif k == "compute":
            # roofline: slices of at most slice_cycles, each a compute part on the compute
            # unit beside a memory part on the memory unit; the next slice waits for both
            n = node_id(g.node[i], i, "node", ("npu", "host"))
            flops_pc, bytes_pc = compute_params(topo, cfg)[n]
            C = _ceil(g.work[i][0], flops_pc)
            H = _ceil(g.work[i][1], bytes_pc)
            isolated[i] = max(C, H)
            S = max(1, -(-max(C, H) // slice_cycles))
            if S > MAX_SLICES:
                raise GraphError(f"op {g.label(i)}: {max(C, H):,} cycles on "
                                 f"{g.node[i]!r} is {S:,} slices of workload.slice_cycles = "
                                 f"{slice_cycles}; expected at most {MAX_SLICES:,} (raise "
                                 f"workload.slice_cycles)")
            first, prev = None, deps
            for s_ in range(S):
                c = (s_ + 1) * C // S - s_ * C // S
                h = (s_ + 1) * H // S - s_ * H // S
                parts = []
                if c or not h:
                    parts.append(prim("compute", n, -1, c, prev, 0))
                if h:
                    parts.append(prim("compute", n, -1, h, prev, 1))
                first = parts[0] if first is None else first
                if len(parts) == 2:
                    prev = [prim("delay", -1, -1, 0, parts)]     # joins the two parts
                else:
                    prev = parts
            span.append((first, prev[0]))
        elif k == "reduce_npu":
            n = node_id(g.node[i], i, "node", ("npu",))
            _, bytes_pc = compute_params(topo, cfg)[n]
            mem_ = prim("compute", n, -1, _ceil(4 * g.size[i], bytes_pc), deps, 1)
            red = prim("compute", n, -1, _ceil(g.size[i], engine_params(topo, cfg)[n][2]),
                       deps, 0)
            p = prim("delay", -1, -1, 0, [mem_, red])
            span.append((mem_, p))
        elif k == "reduce_offload":
            n = node_id(g.node[i], i, "node", ("npu",))
            p = prim("compute", n, -1, _ceil(g.size[i], engine_params(topo, cfg)[n][0]), deps,
                     2)
            span.append((p, p))
        elif k in ("memory", "engine"):
            n = node_id(g.node[i], i, "node", ("npu",) if k == "engine" else ("npu", "host"))
            flops_pc, bytes_pc = compute_params(topo, cfg)[n]
            rate = bytes_pc if k == "memory" else engine_params(topo, cfg)[n][0]
            p = prim("compute", n, -1, _ceil(g.size[i], rate), deps, 1 if k == "memory" else 2)
            span.append((p, p))
        elif k == "delay":
            p = prim("delay", -1, -1, g.size[i], deps)
            span.append((p, p))
        elif k == "send":
            a, b = node_id(g.node[i], i, "src"), node_id(g.dst[i], i, "dst")
            if a == b:
                raise GraphError(f"op {g.label(i)}: a send from {g.node[i]!r} to itself")
            p = prim("send", a, b, g.size[i], deps)
            span.append((p, p))
        else:
            a = node_id(g.node[i], i, "npu", ("npu", "host"))
            m = node_id(g.dst[i], i, "mem", ("mem",))
            bpc, lat, cap = mem[m]
            total = g.size[i]
            pieces = [min(piece, total - o) for o in range(0, total, piece)] or [0]
            if k == "mem_write":
                stored[m] = stored.get(m, 0) + total
                if stored[m] > cap:
                    raise GraphError(f"op {g.label(i)}: writing {total} bytes to "
                                     f"{topo.node_names[m]} passes its capacity of {cap} "
                                     f"bytes ({stored[m]} written in all)")
                first = last = snd = None
                for j, b in enumerate(pieces):       # pieces leave in order, one after another
                    snd = prim("send", a, m, b, deps if snd is None else [snd])
                    acc = prim("compute", m, -1, (lat if j == 0 else 0) + _ceil(b, bpc),
                               [snd] + ([last] if last is not None else []))
                    first = snd if first is None else first
                    last = acc
                span.append((first, last))
            else:
                req = prim("send", a, m, REQUEST_BYTES, deps)
                last_acc = None
                last = None
                for j, b in enumerate(pieces):
                    acc = prim("compute", m, -1, (lat if j == 0 else 0) + _ceil(b, bpc),
                               [req] + ([last_acc] if last_acc is not None else []))
                    last = prim("send", m, a, b, [acc]) if b else acc
                    last_acc = acc
                span.append((req, last))
    n_ops = len(kind)
    succ_lists = [[] for _ in range(n_ops)]
    for i, a in enumerate(after):
        for d in a:
            succ_lists[d].append(i)
    succ_ptr = np.zeros(n_ops + 1, np.int64)
    succ_ptr[1:] = np.cumsum([len(s) for s in succ_lists])
    succ = np.array([x for s in succ_lists for x in sorted(s)], np.int32)
    # dependencies only point backwards (an op names ops given before it), so no cycles
    arrays = dict(kind=np.array(kind, np.int8), unit=np.array(unit, np.int8),
                  node=np.array(node, np.int32),
                  dst=np.array(dst, np.int32), size=np.array(size, np.int64),
                  deps=np.array([len(a) for a in after], np.int32), succ_ptr=succ_ptr,
                  succ=succ)
    arrays["isolated"] = isolated
    return arrays, span


MAX_SLICES = 1_000_000     # a roofline op's slices: ops of the engine's graph, built here


def _ceil(b, bpc):
    return int(math.ceil(b / bpc - 1e-9)) if b else 0


def compute_params(topo, cfg):
    """Per NPU or host: (FLOPs per cycle, memory bytes per cycle) of its roofline, from
    [topology.npu] (tflops, hbm_gbps) and [topology.host] (tflops, dram_gbps), or the node's
    own values."""
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    out = {}
    for i, k in enumerate(topo.node_kinds):
        if k not in ("npu", "host"):
            continue
        d = ((cfg.topology.npu if k == "npu" else cfg.topology.host) or {}) if cfg else {}
        own = topo.node_mem[i] if topo.node_mem else {}
        mem_key = "hbm_gbps" if k == "npu" else "dram_gbps"
        tflops = own.get("tflops", d.get("tflops", 100.0 if k == "npu" else 2.0))
        gbps = own.get(mem_key, d.get(mem_key, 900.0 if k == "npu" else 100.0))
        out[i] = (tflops * 1e3 / clock, gbps / clock)
    return out


def engine_params(topo, cfg):
    """Per NPU: (offload-engine reduction bytes per cycle, its SRAM bytes, the NPU cores'
    reduction bytes per cycle), from [topology.npu] offload_gbps (default 256),
    offload_sram_mb (8) and reduce_gbps (450), or the node's own."""
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    d = (cfg.topology.npu or {}) if cfg is not None else {}
    out = {}
    for i, k in enumerate(topo.node_kinds):
        if k == "npu":
            own = topo.node_mem[i] if topo.node_mem else {}
            out[i] = (own.get("offload_gbps", d.get("offload_gbps", 256.0)) / clock,
                      int(own.get("offload_sram_mb", d.get("offload_sram_mb", 8.0)) * 2 ** 20),
                      own.get("reduce_gbps", d.get("reduce_gbps", 450.0)) / clock)
    return out


def memory_params(topo, cfg):
    """Per memory node: (bytes per cycle, access latency in cycles, capacity in bytes)."""
    out = {}
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    d = (cfg.topology.mem or {}) if cfg is not None else {}
    for i, k in enumerate(topo.node_kinds):
        if k != "mem":
            continue
        own = topo.node_mem[i] if topo.node_mem else {}
        gbps = own.get("mem_gbps", d.get("gbps", 100.0))
        lat = own.get("mem_latency_ns", d.get("latency_ns", 50.0))
        cap = own.get("capacity_gb", d.get("capacity_gb", 128.0))
        out[i] = (gbps / clock, ns_to_cycles(lat, clock), int(cap * 1e9))
    return out


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
    cycles_skipped: int
    node_names: list
    config: dict = field(default_factory=dict)
    seed: int = 0
    version: str = ""
    build: dict = field(default_factory=dict)
    collective: dict = field(default_factory=dict)   # set for collective workloads
    links: list = field(default_factory=list)        # per channel, over the makespan

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
        """A Chrome/Perfetto trace: a process per node, a track per resource (compute;
        network: its sends and its memory-node reads and writes; memory; collectives engine),
        plus one for delays; a memory-node read or write shows on the memory node's memory
        track too. The format's `ts` and `dur` are microseconds (cycles / clock_ghz / 1000);
        each event keeps its cycles in `args` (`start_cycle`, `cycles`). `otherData` names the
        system and the clock."""
        us_per_cycle = 1e-3 / float((self.config.get("network") or {}).get("clock_ghz") or 1.0)
        events = []
        pids = {name: i for i, name in enumerate(self.node_names)}
        delay_pid = len(self.node_names)
        for name, pid in pids.items():
            events.append({"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0,
                           "args": {"name": "compute"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1,
                           "args": {"name": "network"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 2,
                           "args": {"name": "memory"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 3,
                           "args": {"name": "collectives engine"}})
        events.append({"ph": "M", "name": "process_name", "pid": delay_pid,
                       "args": {"name": "delays"}})
        for op in self.ops:
            if op["start"] < 0:
                continue
            pid = pids[op["node"]] if op["node"] is not None else delay_pid
            tid = {"compute": 0, "send": 1, "delay": 0, "memory": 2, "engine": 3,
                   "mem_write": 1, "mem_read": 1, "reduce_npu": 0,
                   "reduce_offload": 3}[op["kind"]]
            args = {"start_cycle": op["start"], "cycles": op["finish"] - op["start"]}
            args.update({"size": op["size"]} if op["size"] >= 0 else
                        {"flops": op["flops"], "bytes": op["bytes"]})
            if op["kind"] == "send":
                args["dst"] = op["dst"]
            event = {"ph": "X", "name": op["name"], "cat": op["kind"], "pid": pid, "tid": tid,
                     "ts": op["start"] * us_per_cycle,
                     "dur": (op["finish"] - op["start"]) * us_per_cycle, "args": args}
            events.append(event)
            if op["kind"] in ("mem_write", "mem_read") and op["dst"] in pids:
                events.append({**event, "pid": pids[op["dst"]], "tid": 2,
                               "name": f"{op['name']} ({op['node']})",
                               "args": {**args, "npu": op["node"]}})
        system = (self.config or {}).get("_system")
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"system": system, "clock_ghz": 1e-3 / us_per_cycle,
                              "version": self.version}}

    def summary(self):
        busy = self.busy_cycles()
        rows = []
        c = self.collective
        if c:
            rgbps = (self.config.get("workload") or {}).get("reduce_gbps")
            where = (f"reductions on the {'NPU' if c['engine'] == 'npu' else 'offload engine'}"
                     if c["engine"] else f"reductions at {rgbps:g} GB/s" if rgbps
                     else "reductions take no time")
            rows += [("collective", f"{c['collective']} / {c['algorithm']}, {c['bytes']} bytes "
                                    f"per node, {len(c['participants'])} participants, "
                                    f"{c['chunks']} chunks, {where}"),
                     ("ring order", " ".join(c["order"])),
                     ("time", f"{c['collective_cycles']} cycles"),
                     ("bandwidth", f"algbw {c['algbw_gbps']:.2f} GB/s, busbw "
                                   f"{c['busbw_gbps']:.2f} GB/s (nccl-tests conventions)")]
            per = c.get("per_npu") or {}
            if per and c.get("engine"):
                ratio = sum(v["hbm_bytes"] for v in per.values()) / max(
                    1, sum(v["network_bytes"] for v in per.values()))
                rows.append(("HBM per network byte", f"{ratio:.2f} (all NPUs)"))
                for n, v in list(per.items())[:8]:
                    rows.append((f"  {n}",
                                 f"HBM {v['hbm_bytes']} B, "
                                 f"{v['hbm_bytes_per_network_byte']:.2f} per network byte, "
                                 f"{v['network_gbps']:.1f} GB/s sent, compute slowed "
                                 f"{v['compute_slowdown_cycles']} cycles"))
        rows += [("makespan", f"{self.makespan_cycles} cycles"),
                ("ops", f"{len(self.ops)} (" + ", ".join(
                    f"{k} {v}" for k, v in sorted(self._count().items())) + ")"),
                ("packets", f"{self.packets}, avg latency "
                            + (f"{self.avg_packet_latency:.1f}" if self.packets else "n/a")
                            + " cycles"),
                ("compute busy", ", ".join(f"{n} {100 * b / max(self.makespan_cycles, 1):.0f}%"
                                           for n, b in sorted(busy.items())[:8]) or "none"),
                ("link utilisation", self._link_line()),
                ("speed", f"{self.cycles_per_second:,.0f} cycles/s, {self.wall_seconds:.2f} s "
                          f"wall"),
                ("seed / version", f"{self.seed} / pysim {self.version}")]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)

    def _link_line(self):
        used = [l for l in self.links if l["flits"]]
        if not used:
            return "no router-to-router link used"
        top = max(used, key=lambda l: l["utilization"])
        mean = sum(l["utilization"] for l in used) / len(used)
        return (f"max {top['utilization']:.3f} ({top['src']}->{top['dst']}), mean {mean:.3f} "
                f"over the {len(used)} of {len(self.links)} channels used (whole run)")

    def _count(self):
        c = {}
        for op in self.ops:
            c[op["kind"]] = c.get(op["kind"], 0) + 1
        return c


@register("graph", traces=True)
def run_graph(cfg, graph=None, progress=None) -> GraphResult:
    """Run an op graph (given, or read from workload.file) on cfg's network; progress(cycle,
    None) is called about ten times a second (see pysim.simulate)."""
    t0 = time.perf_counter()
    if graph is None:
        if cfg.workload.file is None:
            raise ConfigError("workload.kind = 'graph' needs workload.file (an op-graph file)")
        path = cfg.workload.file
        if not os.path.isabs(path):
            path = os.path.join(cfg.base_dir, path)
        graph = load_graph(path)
    network = compile_network(cfg)
    arrays, span = compile_graph(graph, network.topo, cfg)
    eng = _engine.Engine(network.arrays)
    eng.set_graph(arrays["kind"], arrays["node"], arrays["dst"], arrays["size"],
                  arrays["deps"], arrays["succ_ptr"], arrays["succ"],
                  cfg.workload.packet_flits, cfg.network.flit_bytes, arrays["unit"])
    t_run = time.perf_counter()
    st = eng.run(cfg.workload.max_cycles, stop="all",
                 progress=None if progress is None else (lambda now: progress(now, None)))
    run_s = time.perf_counter() - t_run
    check_status(st, network, eng)
    pstart, pfinish = eng.op_times()
    start = np.array([pstart[a] for a, _ in span], np.int64)
    finish = np.array([pfinish[b] for _, b in span], np.int64)
    if st != "done":
        unfinished = [graph.label(i) for i in np.flatnonzero(finish < 0)[:5]]
        raise ConfigError(f"workload.max_cycles = {cfg.workload.max_cycles}: the graph did not "
                          f"finish (unfinished: {', '.join(unfinished)})")
    names = network.topo.node_names
    ops = []
    for i in range(len(graph)):
        op = dict(name=graph.label(i), kind=graph.kind[i], node=graph.node[i],
                  dst=graph.dst[i], size=graph.size[i], start=int(start[i]),
                  finish=int(finish[i]))
        if graph.work[i] is not None:
            op["flops"], op["bytes"] = graph.work[i]
            op["isolated_cycles"] = int(arrays["isolated"][i])
        ops.append(op)
    c = eng.counters()
    cfg_dict = cfg.to_dict()
    cfg_dict["_system"] = network.topo.name
    makespan = int(finish.max())
    links = link_report(network, cfg, eng.channel_flits(), makespan, eng.vc_flits())
    return GraphResult(
        makespan_cycles=makespan, ops=ops, packets=int(c["packets_done"]),
        avg_packet_latency=c["sum_lat"] / c["meas_done"] if c["meas_done"] else float("nan"),
        flit_hops=int(c["flit_hops"]), cycles_skipped=int(c["cycles_skipped"]),
        wall_seconds=time.perf_counter() - t0,
        cycles_per_second=c["now"] / run_s if run_s > 0 else float("nan"),
        node_names=list(names), config=cfg_dict, seed=int(cfg.simulation.seed),
        version=__version__, build=dict(_engine.BUILD), links=links)
