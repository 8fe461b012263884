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

The file format of op graphs is read by `pysim.workload.graph_file`.

Memory space: `hold(device, bytes, at=op)` takes bytes of a device's memory when an op
starts (or finishes) and `free(h, at=op)` gives them back when another finishes (or starts);
a mem_write holds its bytes at its target. After the run, `memory_usage` turns the holds and
the ops' times into each device's occupancy over time and its peak, and refuses a device
over its capacity.
"""
from __future__ import annotations

import itertools
import math
import os
import sys
import time

import numpy as np

from pysim._gc import quiet_gc
from pysim.engine import GraphArrays, core, new_engine, set_graph
from pysim._version import __version__
from pysim.errors import ConfigError, GraphError
from pysim.flow import flow_arrays
from pysim.network import compile_network
from pysim import theory
from pysim.schema import MAX_INT, NONNEG, PACKET, POS, Key, declare, finite_float
from pysim.schema import short as _short
from pysim.workload import compile as _compile
from pysim.workload import transfer
from pysim.workload.compile import topological_order  # noqa: F401  (callers' name)
from pysim.workload.params import compute_params, engine_params, memory_params  # noqa: F401
from pysim.workload import notes, runtime
from pysim.workload.base import OP_GRAPH_KEYS, check_status, link_report, register
from pysim.workload.graph_file import read_ops
from pysim.workload.holds import check_each_fits, memory_report, memory_usage
from pysim.workload.result import GraphResult, OpTable

MAX_OPS = 10_000_000       # ops in one graph (built in Python: ~3 s and ~200 MB a million)

KINDS = {"compute": 0, "send": 1, "delay": 2, "roofline": 3, "roofline_mem": 4,
         "acquire": 5, "release": 6, "take_units": 7, "free_units": 8}  # csim's primitive ops
GATE_UNIT = 3
HELD_UNIT = 4            # the compute units held by NPU-run collectives (csim/_dag.pxd)
COMM_MEM_UNIT = 5        # communication's share of a node's memory



class OpGraph:
    """A DAG of ops. Nodes are named as in the topology; ops are numbered in order added."""

    def __init__(self):
        self.kind, self.node, self.dst, self.size, self.after, self.names = [], [], [], [], [], []
        self._by_name = {}
        self.work = []                  # compute ops given as (flops, bytes): the roofline
        self.holds = []                 # memory held: [device, bytes, (op, edge), end, what]
        self._space = {}                # mem_write op -> the hold of its bytes at the target
        self._forward = False           # depend() added a dependency on a later op
        self.latencies = []             # (delay op, src, dst, steps): see step_latency

    def __len__(self):
        return len(self.kind)

    def _add(self, kind, node, dst, size, after, name):
        n = len(self.kind)
        if type(after) is list and all(type(a) is int and 0 <= a < n for a in after):
            after = list(after)               # the common case: op ids, checked at once
        else:
            if isinstance(after, (str, int, np.integer)) and not isinstance(after, bool):
                after = [after]               # one dependency, given bare
            if after is not None and not isinstance(after, (list, tuple)):
                raise GraphError(f"after = {after!r}: expected a list of op names or ids")
            after = [self._ref(a) for a in (after or [])]
        if name is not None and not isinstance(name, str):
            raise GraphError(f"name = {name!r}: expected a string")
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

    def add_ops(self, kind, node, dst, size, after, checked=False):
        """Append ops in bulk (the fast path of builders that make many at once): per op its
        kind (a name of OpGraph's kinds, as `_add` records them: compute with cycles, send,
        delay, memory, engine, reduce_npu, reduce_offload), node, dst (None but for sends),
        size (an int >= 0: cycles or bytes) and dependencies (a list of op ids below the op's
        own). Checked as arrays: sizes and dependencies, the op limit (`checked`: ops made
        from ones checked so already, a collective's part instanced again: the limit
        alone). Returns the first op's id."""
        n0, k = len(self.kind), len(kind)
        if checked and n0 + k <= MAX_OPS:
            self.kind.extend(kind)
            self.node.extend(node)
            self.dst.extend(dst)
            self.size.extend(size)
            self.after.extend(after)
            self.names.extend(itertools.repeat(None, k))
            self.work.extend(itertools.repeat(None, k))
            return n0
        if not (len(node) == len(dst) == len(size) == len(after) == k):
            raise GraphError("add_ops: the columns differ in length")
        if n0 + k > MAX_OPS:
            raise GraphError(f"the op graph passes {MAX_OPS:,} ops (a collective makes ops per "
                             f"participant, step and chunk: fewer workload.chunks make fewer)")
        if k == 0:
            return n0
        sizes = None
        if k <= 64:                       # (few: checked in Python, quicker than arrays)
            try:
                sizes = [int(x) for x in size]
            except (TypeError, ValueError, OverflowError):
                pass                      # (the arrays' checks name it)
        if sizes is not None:
            for i, x in enumerate(sizes):
                if not 0 <= x <= MAX_INT or x != size[i]:
                    raise GraphError(f"op {n0 + i}: size = {size[i]}: expected an integer in "
                                     f"0..{MAX_INT:,}")
                for d in after[i]:
                    if not 0 <= d < n0 + i:
                        raise GraphError(f"dependency {int(d)} of op {n0 + i}: no such op (an "
                                         f"op can only depend on ops given before it)")
            self.kind.extend(kind)
            self.node.extend(node)
            self.dst.extend(dst)
            self.size.extend(sizes)
            self.after.extend(after)
            self.names.extend(itertools.repeat(None, k))
            self.work.extend(itertools.repeat(None, k))
            return n0
        sz = np.fromiter(size, np.int64, k)
        if sz.min() < 0 or sz.max() > MAX_INT:
            i = int(np.flatnonzero((sz < 0) | (sz > MAX_INT))[0])
            raise GraphError(f"op {n0 + i}: size = {size[i]}: expected an integer in 0.."
                             f"{MAX_INT:,}")
        lens = np.fromiter(map(len, after), np.int64, k)
        flat = np.fromiter(itertools.chain.from_iterable(after), np.int64, int(lens.sum()))
        own = np.repeat(np.arange(n0, n0 + k, dtype=np.int64), lens)
        if flat.size and ((flat < 0) | (flat >= own)).any():
            j = int(np.flatnonzero((flat < 0) | (flat >= own))[0])
            raise GraphError(f"dependency {int(flat[j])} of op {int(own[j])}: no such op (an "
                             f"op can only depend on ops given before it)")
        self.kind.extend(kind)
        self.node.extend(node)
        self.dst.extend(dst)
        self.size.extend(sz.tolist())
        self.after.extend(after)
        self.names.extend(itertools.repeat(None, k))
        self.work.extend(itertools.repeat(None, k))
        return n0

    def _what(self, name):
        return f"op {name!r}" if name else f"op {len(self.kind)}"

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

    def compute(self, node, cycles=None, after=None, name=None, flops=None, bytes=None,
                peak_flops=None):
        """A compute op: `cycles` on the node's compute unit, or `flops` and/or `bytes` (of
        memory traffic) timed by the node's roofline: max(flops / peak, bytes / bandwidth).
        `peak_flops` (FLOP/s) is the rate this op's FLOPs run at -- an NPU's peak at the
        op's precision times its kernel's efficiency --; by default the node's own peak
        ([topology.npu] tflops, or its preset's fp32 peak)."""
        if cycles is None and flops is None and bytes is None:
            raise GraphError(f"{self._what(name)}: a compute op needs cycles, or flops and/or "
                             f"bytes (a roofline)")
        if cycles is not None and (flops is not None or bytes is not None):
            raise GraphError(f"{self._what(name)}: a compute op takes cycles, or flops and/or "
                             f"bytes (a roofline), not both")
        if cycles is not None:
            return self._add("compute", node, None, _size(cycles, "cycles", name), after, name)
        if peak_flops is not None and not (isinstance(peak_flops, (int, float)) and
                                           math.isfinite(peak_flops) and peak_flops > 0):
            raise GraphError(f"{self._what(name)}: peak_flops = {peak_flops!r}: expected a "
                             f"number > 0")
        i = self._add("compute", node, None, -1, after, name)
        self.work[i] = (_size(flops or 0, "flops", name, real=True),
                        _size(bytes or 0, "bytes", name),
                        None if peak_flops is None else float(peak_flops))
        return i

    def send(self, src, dst, bytes, after=None, name=None):
        return self._add("send", src, dst, _size(bytes, "bytes", name), after, name)

    def delay(self, cycles, after=None, name=None):
        return self._add("delay", None, None, _size(cycles, "cycles", name), after, name)

    def step_latency(self, src, dst, steps, after=None, name=None):
        """A delay of `steps` times the zero-load latency of a one-flit message from src to
        dst (node names), resolved when the graph runs on a network (run_graph): the latency
        of the steps a stream of a collective stands for (build(form='streams'))."""
        op = self._add("delay", None, None, 0, after, name)
        self.latencies.append((op, src, dst, _size(steps, "steps", name)))
        return op

    def memory(self, node, bytes, after=None, name=None):
        """Communication's memory traffic of `bytes` at an NPU's HBM (a host's DRAM): bytes /
        bandwidth cycles on the node's communication memory unit, one op at a time, sharing
        the memory in proportion with compute's traffic (the memory parts of roofline
        compute ops) and capped at communication's budget (pysim.workload.endpoint)."""
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

    def acquire(self, node, priority=0, after=None, name=None):
        """Take the node's gate: a queue that orders work no single op spans (one holder at
        a time; waiting acquires take it highest `priority` first, the first to wait among
        equals). Finishes when taken; the gate stays taken until a release op."""
        return self._add("acquire", node, None, _size(priority, "priority", name), after,
                         name)

    def release(self, node, after=None, name=None):
        """Free the node's gate (taken by an acquire op)."""
        return self._add("release", node, None, 0, after, name)

    def take_units(self, node, units, after=None, name=None):
        """A collective takes `units` of an NPU's compute units (see
        pysim.workload.endpoint); its compute runs on the rest until free_units."""
        return self._add("take_units", node, None, _size(units, "units", name), after, name)

    def free_units(self, node, units, after=None, name=None):
        """Give back `units` compute units taken by take_units."""
        return self._add("free_units", node, None, _size(units, "units", name), after, name)

    def engine(self, node, bytes, after=None, name=None):
        """A reduction of `bytes` on the node's collectives offload engine (its own unit, at
        [topology.npu] offload_gbps)."""
        return self._add("engine", node, None, _size(bytes, "bytes", name), after, name)

    def mem_write(self, npu, mem, bytes, after=None, name=None):
        """npu writes `bytes` into `mem`, a memory node or a host's DRAM: read from npu's own
        memory, across the network, stored by the target's memory as it arrives (see
        compile_graph). The bytes take space at `mem` from the write's start until freed:
        `free(g.space(op), at=...)` (held to the end of the run otherwise)."""
        i = self._add("mem_write", npu, mem, _size(bytes, "bytes", name), after, name)
        self._space[i] = self.hold(mem, self.size[i], i, "start", what=f"op {self.label(i)}")
        return i

    def mem_read(self, npu, mem, bytes, after=None, name=None):
        """npu reads `bytes` from `mem` (a memory node or a host): a request, the target's
        access, the data back as it is read, written into npu's own memory."""
        return self._add("mem_read", npu, mem, _size(bytes, "bytes", name), after, name)

    def start_after(self, op, first, last=None):
        """Make the ops first..last-1 (default: to the end) that depend on nothing wait for
        `op`: a sub-graph built on its own (a collective, a job's iterations) starts after
        it."""
        op = self._ref(op)
        for i in range(first, len(self.kind) if last is None else last):
            if not self.after[i] and i != op:
                self.after[i] = [op]

    # ------------------------------------------------------------------ memory space
    def hold(self, device, bytes, at, edge="start", what=None):
        """`bytes` of `device`'s memory (an NPU's HBM, a memory node's or a host's DRAM) are
        taken when op `at` starts (edge 'start') or finishes ('finish'), until `free`d (held
        to the end of the run otherwise). Returns the hold's id. Holds are bookkeeping: they
        change no op's timing; after the run the occupancy of every device is computed from
        its holds and the ops' times, and a device over its capacity is an error."""
        h = len(self.holds)
        self.holds.append([device, _size(bytes, "bytes", what), (self._ref(at),
                          _edge(edge)), None, what])
        return h

    def free(self, h, at, edge="finish"):
        """Release hold `h` when op `at` finishes (edge 'finish') or starts ('start')."""
        if not isinstance(h, (int, np.integer)) or not 0 <= h < len(self.holds):
            raise GraphError(f"free({h!r}): no such hold")
        if self.holds[h][3] is not None:
            raise GraphError(f"hold {h} ({self.holds[h][4] or 'unnamed'}) is freed twice")
        self.holds[h][3] = (self._ref(at), _edge(edge))

    def space(self, op):
        """The hold of the bytes a mem_write op stores at its target."""
        i = self._ref(op)
        if i not in self._space:
            raise GraphError(f"op {self.label(i)}: a {self.kind[i]} op holds no space; "
                             f"expected a mem_write")
        return self._space[i]

    def depend(self, op, on):
        """Make op `op` wait for op `on` as well (either may have been added after the
        other; a cycle of dependencies is refused when the graph is compiled)."""
        op, on = self._ref(op), self._ref(on)
        if op == on:
            raise GraphError(f"op {self.label(op)} cannot depend on itself")
        if on not in self.after[op]:
            self.after[op].append(on)
            self._forward |= on > op

    def label(self, i):
        return self.names[i] if self.names[i] is not None else f"op{i}"


def _edge(edge):
    if edge not in ("start", "finish"):
        raise GraphError(f"edge = {edge!r}: expected 'start' or 'finish'")
    return edge == "finish"


def _size(v, what, name, real=False):
    """A count (cycles, bytes) >= 0: an integer, or a float with an integer value as TOML
    writes 1e6; with real, any finite number >= 0 (FLOPs)."""
    if type(v) is int and 0 <= v <= MAX_INT:          # the common cases
        return float(v) if real else v
    if real and type(v) is float and 0.0 <= v <= 1.7e308:
        return v
    where = f"op {name!r}: " if name else ""
    if isinstance(v, (np.integer, np.floating)):
        v = v.item()
    f = finite_float(v)                 # (None: inf, NaN, or an integer no float holds)
    ok = f is not None and f >= 0 and (real or f.is_integer())
    if f is None and isinstance(v, int) and not isinstance(v, bool) and v > 0 and not real:
        raise GraphError(f"{where}{what} = {_short(v)}: expected at most {MAX_INT:,}")
    if not ok:
        raise GraphError(f"{where}{what} = {_short(v)}: expected "
                         f"{'a finite number' if real else 'an integer'} >= 0")
    if not real and v > MAX_INT:
        shown = repr(v) if len(repr(v)) <= 24 else f"{float(v):.4g}"
        raise GraphError(f"{where}{what} = {shown}: expected at most {MAX_INT:,}")
    return float(v) if real else int(v)


def load_graph(path) -> OpGraph:
    """Read an op-graph TOML file ([[ops]]; `pysim.workload.graph_file`)."""
    return read_ops(path, OpGraph())


def _node_checker(g, topo, index):
    """node_id(name, op, what, kinds): the node's index, or a GraphError naming the op."""
    def node_id(name, i, what, kinds=None):
        if not isinstance(name, str):
            raise GraphError(f"op {g.label(i)}: {what} = {name!r}: expected a node name (a "
                             f"string)")
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
    return node_id


def compile_graph(g: OpGraph, topo, cfg=None):
    """Check the graph against the topology and turn it into csim's arrays.

    Memory ops move in pieces of workload.mem_piece_bytes so that reading, transfer and
    storing overlap. A write of b bytes from an NPU (or host) to a memory node (or a host's
    DRAM) is, per piece, a read of the piece from the source's own memory (its memory unit,
    at its HBM or DRAM bandwidth), a send to the target, and the target's access of piece /
    bandwidth cycles (a memory node's controller, its one unit, also paying the access
    latency on the first piece; a host's memory unit); a read is a request send, then per
    piece the target's access, a send back and the write into the reader's memory. Pieces
    go in order. A memory op starts with its first piece and finishes with its last. Memory
    nodes cannot run compute ops. Holds (`OpGraph.hold`) that are never freed and add up to
    more than a device's capacity are an error naming it (the exact check, from the ops'
    times, follows the run: `memory_usage`).
    Array work (pysim.workload.compile), but for a graph with memory ops (mem_write,
    mem_read: at the flit level in pieces, at the flow level one flow each), expanded op by
    op (pysim.workload.transfer).
    Returns the arrays and `span`, an (ops x 2) array: per op of `g`, its first and last
    primitive op."""
    if any(k in ("mem_write", "mem_read") for k in g.kind):
        return _compile_by_op(g, topo, cfg)
    return _compile.compile_arrays(g, topo, cfg, sys.modules[__name__])


REQUEST_BYTES = 64          # a memory read request


def _compile_by_op(g: OpGraph, topo, cfg=None):
    """compile_graph op by op (pysim.workload.compile.compile_by_op): the expansion of
    graphs with memory ops, and the reference the array compile is held to."""
    return _compile.compile_by_op(g, topo, cfg, sys.modules[__name__])


MAX_SLICES = 100_000_000   # a roofline op's slices (run in csim: a few heap operations each)


def _ceil(b, bpc, rate=None):
    """Cycles to move or compute b (bytes, FLOPs) at bpc per cycle; more than MAX_INT (a
    rate of 1e-300 GB/s) is refused, naming the rate (`rate`, where the caller knows it)."""
    if not b:
        return 0
    cycles = b / bpc - 1e-9
    if not cycles <= MAX_INT:
        rate = rate or ("a node's rate ([topology.npu], [topology.host], [topology.mem], or "
                        "its own tflops, hbm_gbps, dram_gbps, reduce_gbps, offload_gbps, "
                        "mem_gbps) or workload.reduce_gbps")
        raise GraphError(f"{b:,} at {bpc:g} per cycle takes more than {MAX_INT:,} cycles: "
                         f"{rate} is too small")
    return int(math.ceil(cycles))



def resolve_latencies(graph, network, cfg, arrays, span):
    """Set the cycles of the graph's step-latency delays (OpGraph.step_latency) in the
    compiled arrays: steps x the zero-load latency of a one-flit message on the route."""
    if not graph.latencies:
        return
    index = {n: i for i, n in enumerate(network.topo.node_names)}
    ops, src, dst, steps = zip(*graph.latencies)
    for what, names in (("src", src), ("dst", dst)):
        bad = next((x for x in names if x not in index), None)
        if bad is not None:
            raise GraphError(f"step latency: {what} = {bad!r}: no node of that name")
    s = np.fromiter((index[x] for x in src), np.int64, len(src))
    d = np.fromiter((index[x] for x in dst), np.int64, len(dst))
    t0 = np.asarray(theory.zero_load_latency(network, cfg, s, d, np.ones(len(s), np.int64)),
                    np.int64)
    prim = np.asarray(span, np.int64)[np.asarray(ops, np.int64), 0]
    arrays["size"][prim] = np.asarray(steps, np.int64) * np.where(s == d, 0, t0)


@register("graph", traces=True, reads=("workload.file",) + OP_GRAPH_KEYS)
@quiet_gc
def run_graph(cfg, graph=None, progress=None, check_memory=True, topo=None) -> GraphResult:
    """Run an op graph (given, or read from workload.file) on cfg's network (or on `topo`, a
    topology built already, with cfg's router parameters); progress(cycle, None) is called
    about ten times a second (see pysim.simulate). With check_memory, a device whose memory
    held at once passes its capacity is an error (else it is reported)."""
    t0 = time.perf_counter()
    t0_cpu = time.process_time()
    if graph is not None and not isinstance(graph, OpGraph):
        raise TypeError(f"run_graph(graph): expected an OpGraph or None (workload.file), not "
                        f"{type(graph).__name__}")
    if graph is None:
        if cfg.workload.file is None:
            raise ConfigError("workload.kind = 'graph' needs workload.file (an op-graph file)")
        path = cfg.workload.file
        if not os.path.isabs(path):
            path = os.path.join(cfg.base_dir, path)
        graph = load_graph(path)
    t_load = time.perf_counter()
    t_load_cpu = time.process_time()
    network = compile_network(cfg, topo)
    t_net = time.perf_counter()
    t_net_cpu = time.process_time()
    arrays, span = compile_graph(graph, network.topo, cfg)
    if check_memory:
        check_each_fits(graph, network.topo, cfg)
    resolve_latencies(graph, network, cfg, arrays, span)
    t_compile = time.perf_counter()
    t_compile_cpu = time.process_time()
    model = cfg.network.model          # how sends are carried; everything else is the same
    ops = GraphArrays(**{k: arrays[k] for k in ("kind", "node", "dst", "size", "deps",
                                                "succ_ptr", "succ", "unit", "sms",
                                                "comm_hbm")},
                      share=(transfer.shares(network, cfg, arrays, arrays["memory_bpc"])
                             if "memory_bpc" in arrays else None),
                      packet_flits=cfg.workload.packet_flits, flit_bytes=cfg.network.flit_bytes,
                      nic_fifo=cfg.network.nic_order == "fifo",
                      nic_per_link=cfg.network.nic_injection == "per_link")
    ops.check(n_nodes=network.arrays["n_nodes"])
    eng = new_engine(network.arrays)
    set_graph(eng, ops, flow_arrays(network, cfg, arrays) if model == "flow" else None)
    meter = None
    if progress is not None:             # (said before the run: how long it will take)
        est = runtime.estimate(network, arrays, cfg) if hasattr(progress, "estimate") else None
        if est is not None:
            progress.estimate(est)
        meter = runtime.Meter(progress, eng, est)
    t_run = time.perf_counter()
    t_run_cpu = time.process_time()
    st = eng.run(cfg.workload.max_cycles, stop="all", progress=meter)
    run_s = time.perf_counter() - t_run
    run_cpu = time.process_time() - t_run_cpu
    check_status(st, network, eng)
    pstart, pfinish = eng.op_times()
    span = np.asarray(span, np.int64)
    start = pstart[span[:, 0]].astype(np.int64)
    finish = pfinish[span[:, 1]].astype(np.int64)
    if st != "done":
        unfinished = [graph.label(i) for i in np.flatnonzero(finish < 0)[:5]]
        raise ConfigError(f"workload.max_cycles = {cfg.workload.max_cycles}: the graph did not "
                          f"finish (unfinished: {', '.join(unfinished)})")
    usage = memory_usage(graph, start, finish, network.topo, cfg, check=check_memory)
    names = network.topo.node_names
    ops = OpTable(graph, start, finish, arrays["isolated"])
    c = eng.counters()
    cfg_dict = cfg.to_dict()
    cfg_dict["_system"] = network.topo.name
    makespan = int(finish.max())
    flits = eng.channel_flits()
    links = link_report(network, cfg, flits, makespan,
                        eng.vc_flits() if model != "flow" else None)
    nic = notes.nic_limit(network, cfg, flits, makespan)
    flow = {k: int(c[k]) for k in ("flows_started", "rate_recomputations",
                                    "pairs_recomputed")} if model == "flow" else {}
    memory = memory_report(graph, usage, network.topo, cfg)
    t_end = time.perf_counter()
    t_end_cpu = time.process_time()
    profile = dict(load_seconds=t_load - t0, network_seconds=t_net - t_load,
                   compile_seconds=t_compile - t_net, engine_setup_seconds=t_run - t_compile,
                   engine_seconds=run_s, results_seconds=t_end - t_run - run_s,
                   graph_ops=len(graph), engine_ops=int(arrays["kind"].size),
                   event_cycles=int(c["now"] - c["cycles_skipped"]),
                   cpu=dict(load=t_load_cpu - t0_cpu, network=t_net_cpu - t_load_cpu,
                            compile=t_compile_cpu - t_net_cpu,
                            engine_setup=t_run_cpu - t_compile_cpu, engine=run_cpu,
                            results=t_end_cpu - t_run_cpu - run_cpu))
    if model == "flow":                  # the flow level's events and its solver's share
        profile.update(events=int(c["flow_events"]), solver_seconds=float(c["solver_seconds"]),
                       solver_fallbacks=int(c["solver_fallbacks"]))
    return GraphResult(
        makespan_cycles=makespan, ops=ops, packets=int(c["packets_done"]),
        avg_packet_latency=c["sum_lat"] / c["meas_done"] if c["meas_done"] else float("nan"),
        flit_hops=int(c["flit_hops"]), cycles_skipped=int(c["cycles_skipped"]),
        wall_seconds=time.perf_counter() - t0,
        cycles_per_second=c["now"] / run_s if run_s > 0 else float("nan"),
        node_names=list(names), config=cfg_dict, seed=int(cfg.simulation.seed),
        version=__version__, build=dict(core.BUILD), links=links, network_model=model,
        flow=flow, memory=memory, profile=profile, op_graph=(graph, network.topo),
        notes=[nic] if nic else [])


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "file", "str", None, "path",
        "Op-graph file (TOML, [[ops]]).", None),
    Key("workload", "packet_flits", "int", 16, "flits",
        "Op graphs: messages are cut into packets of at most this many flits.", PACKET),
    Key("workload", "slice_cycles", "int", 0, "cycles",
        "0 (the default): a roofline compute op runs whole, its compute and memory parts "
        "progressing together (the compute part no faster than its data comes); > 0: in "
        "slices of at most this many cycles, the next slice after both parts of the last, "
        "other ops of the node taking its units between slices.", NONNEG),
    Key("workload", "mem_piece_bytes", "int", 65536, "bytes",
        "Op graphs at the flit level: memory reads and writes move in pieces of this size, so "
        "that transfer and access overlap (at the flow level a transfer is one flow).", POS),
    Key("workload", "max_cycles", "int", 1000000000000, "cycles",
        "Op graphs: give up (an error) if the graph has not finished by then.", POS),
)
