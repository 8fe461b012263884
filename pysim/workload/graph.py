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

import array
import bisect
import itertools
import math
import operator
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from pysim._gc import quiet_gc
from pysim.engine import GraphArrays, core, new_engine, set_graph
from pysim._version import __version__
from pysim.errors import ConfigError, GraphError
from pysim.flow import flow_arrays
from pysim.network import compile_network
from pysim.schema import KEY_MAP, MAX_INT, NONNEG, PACKET, POS, Key, declare, finite_float
from pysim.schema import short as _short
from pysim.topology import system_name
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



OP_CODES, ROOFLINE, KIND_OF = _compile.OP_CODES, _compile.ROOFLINE, _compile.KIND_OF


class _Lazy:
    """The place of a name made when read (_Names)."""
    __slots__ = ()

    def __reduce__(self):
        return "_LAZY"

    def __repr__(self):
        return "_LAZY"


_LAZY = _Lazy()


class _Names(list):
    """Per op its name (None: none): a list, whose ops added in bulk from a template
    (`OpGraph._add_lazy_names`) hold a mark and have their names made when read: the
    template's (head, tail) of that place joined by the run's text."""

    def __init__(self, *a):
        super().__init__(*a)
        self.runs_lo = []               # per run its first op, ascending
        self.runs = []                  # per run (its places' (head, tail) or None, text)

    def _made(self, i):
        k = bisect.bisect_right(self.runs_lo, i) - 1
        parts, text = self.runs[k]
        head, tail = parts[i - self.runs_lo[k]]
        return head + text + tail

    def __getitem__(self, i):
        v = list.__getitem__(self, i)
        if type(i) is slice:
            if _LAZY in v:
                lo = range(len(self))[i]
                return [self._made(lo[k]) if x is _LAZY else x for k, x in enumerate(v)]
            return v
        if v is _LAZY:
            return self._made(i if i >= 0 else i + len(self))
        return v

    def __iter__(self):
        for i, v in enumerate(list.__iter__(self)):
            yield self._made(i) if v is _LAZY else v

    def pop(self, i=-1):
        v = self[i]
        list.pop(self, i)
        while self.runs_lo and self.runs_lo[-1] >= len(self):
            self.runs_lo.pop()
            self.runs.pop()
        return v

    def lazy(self, marks, parts, text):
        """Add the names of len(marks) ops: None where marks holds None, else
        parts[k][0] + text + parts[k][1]."""
        self.runs_lo.append(len(self))
        self.runs.append((parts, text))
        self.extend(marks)


class OpGraph:
    """A DAG of ops. Nodes are named as in the topology; ops are numbered in order added.

    Stored as columns (typed arrays, not a Python object per op): per op its kind's code
    (pysim.workload.compile.OP_CODES; ROOFLINE for a compute op of flops and bytes), its node
    and destination as ids into a table of the names used (-1: none), its size, and its
    dependencies as one flat array with per-op offsets (CSR); a roofline op's work (flops,
    bytes, peak FLOP/s) in columns of their own; names only for the ops given one. `arrays()`
    gives the columns as numpy arrays; `kind`, `node`, `dst`, `size`, `after`, `names` and
    `work` read them op by op, as sequences."""

    def __init__(self):
        self._code = array.array("b")
        self._node = array.array("i")
        self._dst = array.array("i")
        self._size = array.array("q")
        self._dep = array.array("q")        # the dependencies of every op, in op order
        self._ptr = array.array("q", [0])   # op i's: _dep[_ptr[i]:_ptr[i + 1]]
        self._over = {}                     # op -> its dependencies, set after it was added
        self._nodes = []                    # node names by id
        self._node_id = {}
        self._wop = array.array("q")        # roofline ops (in op order) and their work
        self._wflops = array.array("d")
        self._wbytes = array.array("q")
        self._wpeak = array.array("d")      # (NaN: the node's own peak)
        self._names = _Names()              # per op its name (None: none)
        self._by_name = {}
        self._unindexed = []                # [lo, hi) op ranges whose names are not in _by_name
        self._defer = False                 # (while a builder vouches for its names' novelty)
        # memory held (hold/free), per hold: its device (an id, as the ops' nodes), bytes,
        # the op and edge taking it (1: finish), the op and edge freeing it (-1: never), what
        self._hdev = array.array("i")
        self._hbytes = array.array("q")
        self._hat = array.array("q")
        self._hat_fin = array.array("b")
        self._hend = array.array("q")
        self._hend_fin = array.array("b")
        self._hwhat = []
        self._space = {}                # mem_write op -> the hold of its bytes at the target
        self._forward = False           # depend() added a dependency on a later op
        self.latencies = []             # (delay op, src, dst, steps): see step_latency
        self._version = 0               # changed with dependencies set after their op
        self._cached = None             # arrays() and what it was made from
        self._streamable = []           # [lo, hi) op ranges whose steps may stream

    def __len__(self):
        return len(self._code)

    # ------------------------------------------------------------------ the columns
    kind = property(lambda self: _Kinds(self), doc="per op its kind (a name)")
    node = property(lambda self: _Nodes(self, "_node"), doc="per op its node (None: none)")
    dst = property(lambda self: _Nodes(self, "_dst"), doc="per op a send's destination")
    size = property(lambda self: _Stored(self, "_size"),
                    doc="per op its size (cycles or bytes)")
    after = property(lambda self: _After(self), doc="per op its dependencies (op ids)")
    names = property(lambda self: _Stored(self, "_names"), doc="per op its name (None: none)")
    work = property(lambda self: _Work(self),
                    doc="per op (flops, bytes, peak FLOP/s or None): a roofline compute op; "
                        "None for the others")

    @property
    def node_names(self):
        """The node names the ops use, by the ids `arrays()` gives."""
        return list(self._nodes)

    def arrays(self):
        """The ops' columns as numpy arrays (read-only copies): code (int8, OP_CODES; ROOFLINE for a
        roofline compute op), node and dst (int32 ids into node_names, -1 for none), size
        (int64), dep_ptr (int64, one more than the ops) and dep (int64: op i's dependencies
        are dep[dep_ptr[i]:dep_ptr[i + 1]])."""
        key = (len(self._code), len(self._dep), self._version)
        if self._cached is not None and self._cached[0] == key:
            return dict(self._cached[1])
        ptr, dep = _np(self._ptr, np.int64), _np(self._dep, np.int64)
        if self._over:
            ptr, dep = _merge_over(ptr, dep, self._over)
        out = dict(code=_np(self._code, np.int8), node=_np(self._node, np.int32),
                   dst=_np(self._dst, np.int32), size=_np(self._size, np.int64), dep_ptr=ptr,
                   dep=dep)
        for a in out.values():
            a.flags.writeable = False        # (shared by the calls until the graph changes)
        self._cached = (key, out)
        return dict(out)

    def ops_of(self, *kinds):
        """The ids of the ops of the given kinds (names), ascending (a numpy array)."""
        code = np.frombuffer(self._code, np.int8) if len(self._code) else np.zeros(0, np.int8)
        return np.flatnonzero(np.isin(code, [OP_CODES[k] for k in kinds]))

    def roofline(self):
        """The roofline compute ops and their work as numpy arrays: (ops, flops, bytes, peak
        FLOP/s, NaN where the node's own)."""
        return (_np(self._wop, np.int64), _np(self._wflops, np.float64),
                _np(self._wbytes, np.int64), _np(self._wpeak, np.float64))

    def _nid(self, x):
        """The id of node name x in the table (-1: None)."""
        if x is None:
            return -1
        try:
            i = self._node_id.get(x)
        except TypeError:                 # unhashable: kept as given, for the checks to name
            self._nodes.append(x)
            return len(self._nodes) - 1
        if i is None:
            i = self._node_id[x] = len(self._nodes)
            self._nodes.append(x)
        return i

    def _deps(self, i):
        """Op i's dependencies (a new list that refuses changes in place: see _Deps)."""
        over = self._over.get(i)
        if over is not None:
            return _Deps(i, over)
        return _Deps(i, self._dep[self._ptr[i]:self._ptr[i + 1]].tolist())

    def _add(self, kind, node, dst, size, after, name, code=None):
        n = len(self._code)
        ok = type(after) is list              # the common case: op ids, checked at once
        if ok:
            for a in after:
                if type(a) is not int or not 0 <= a < n:
                    ok = False
                    break
        if not ok:
            if isinstance(after, (str, int, np.integer)) and not isinstance(after, bool):
                after = [after]               # one dependency, given bare
            if after is not None and not isinstance(after, (list, tuple)):
                raise GraphError(f"after = {after!r}: expected a list of op names or ids")
            after = [self._ref(a) for a in (after or [])]
        if name is not None and not isinstance(name, str):
            raise GraphError(f"name = {name!r}: expected a string")
        if name is not None and self._unindexed and not self._defer:
            self._index_names()
        if name is not None and name in self._by_name:
            raise GraphError(f"op name {name!r} is used twice")
        if n >= MAX_OPS:
            raise GraphError(f"the op graph passes {MAX_OPS:,} ops (a collective makes ops per "
                             f"participant, step and chunk: fewer workload.chunks make fewer)")
        if name is not None:
            self._by_name[name] = n
        self._names.append(name)
        self._code.append(OP_CODES[kind] if code is None else code)
        try:
            i = -1 if node is None else self._node_id[node]
        except (KeyError, TypeError):
            i = self._nid(node)
        self._node.append(i)
        self._dst.append(-1 if dst is None else self._nid(dst))
        self._size.append(size)
        if after:
            self._dep.extend(after)
        self._ptr.append(len(self._dep))
        return n

    def _pop(self):
        """Take the last op out again (an op whose checks failed after it was added)."""
        n = len(self._code) - 1
        self._version += 1
        for col in (self._code, self._node, self._dst, self._size, self._ptr):
            col.pop()
        del self._dep[self._ptr[-1]:]
        self._over.pop(n, None)
        name = self._names.pop()
        if name is not None:
            del self._by_name[name]

    def add_ops(self, kind, node, dst, size, after, checked=False):
        """Append ops in bulk (the fast path of builders that make many at once): per op its
        kind (a name of OpGraph's kinds, as `_add` records them: compute with cycles, send,
        delay, memory, engine, reduce_npu, reduce_offload), node, dst (None but for sends),
        size (an int >= 0: cycles or bytes) and dependencies (a list of op ids below the op's
        own). Checked as arrays: sizes and dependencies, the op limit (`checked`: ops made
        from ones checked so already, a collective's part instanced again: the limit
        alone). Returns the first op's id."""
        n0, k = len(self._code), len(kind)
        if not checked and not (len(node) == len(dst) == len(size) == len(after) == k):
            raise GraphError("add_ops: the columns differ in length")
        if n0 + k > MAX_OPS:
            raise GraphError(f"the op graph passes {MAX_OPS:,} ops (a collective makes ops per "
                             f"participant, step and chunk: fewer workload.chunks make fewer)")
        if k == 0:
            return n0
        lens = [len(a) for a in after]
        flat = list(itertools.chain.from_iterable(after))
        if not checked:
            bad = next((x for x in kind if x not in _BULK_KINDS), None)
            if bad is not None:
                raise GraphError(f"add_ops: kind = {bad!r}: expected one of "
                                 f"{', '.join(sorted(_BULK_KINDS))}")
            sz = np.fromiter(size, np.int64, k) if k > 64 else None
            if sz is None:
                for i, x in enumerate(size):
                    try:
                        ok = 0 <= int(x) <= MAX_INT and int(x) == x
                    except (TypeError, ValueError, OverflowError):
                        ok = False
                    if not ok:
                        raise GraphError(f"op {n0 + i}: size = {size[i]}: expected an integer "
                                         f"in 0..{MAX_INT:,}")
                size = [int(x) for x in size]
            else:
                if sz.min() < 0 or sz.max() > MAX_INT:
                    i = int(np.flatnonzero((sz < 0) | (sz > MAX_INT))[0])
                    raise GraphError(f"op {n0 + i}: size = {size[i]}: expected an integer in "
                                     f"0..{MAX_INT:,}")
                size = sz
            own = np.repeat(np.arange(n0, n0 + k, dtype=np.int64), lens)
            try:
                fl = np.asarray(flat, np.int64) if flat else np.zeros(0, np.int64)
            except (TypeError, ValueError, OverflowError):
                x = next(x for x in flat if not isinstance(x, (int, np.integer)))
                raise GraphError(f"dependency {x!r}: expected an op id") from None
            if fl.size and ((fl < 0) | (fl >= own)).any():
                j = int(np.flatnonzero((fl < 0) | (fl >= own))[0])
                raise GraphError(f"dependency {int(fl[j])} of op {int(own[j])}: no such op "
                                 f"(an op can only depend on ops given before it)")
        self._add_columns([OP_CODES[x] for x in kind], [self._nid(x) for x in node],
                          [-1 if x is None else self._nid(x) for x in dst], size, flat, lens)
        return n0

    def _add_columns(self, code, node, dst, size, dep, lens):
        """Append ops given as columns of ids (checked already but for the op limit): codes,
        node ids, dst ids, sizes, their dependencies flat and how many each op has."""
        if len(self._code) + len(code) > MAX_OPS:
            raise GraphError(f"the op graph passes {MAX_OPS:,} ops (a collective makes ops per "
                             f"participant, step and chunk: fewer workload.chunks make fewer)")
        self._code.extend(code)
        self._names.extend(itertools.repeat(None, len(code)))
        self._node.extend(node)
        self._dst.extend(dst)
        if isinstance(size, np.ndarray):
            self._size.frombytes(size.astype(np.int64).tobytes())
        else:
            self._size.extend(size)
        self._dep.extend(dep)
        ptr = self._ptr
        ptr.pop()
        ptr.extend(itertools.accumulate(lens, initial=len(self._dep) - len(dep)))

    def _add_names(self, lo, names, at):
        """Names of ops added in bulk (ops lo.. already added, their `names`, None where
        none; `at`: the places of those given, with their names in that order). Indexed at
        once where the graph may hold them already; else (while a builder that made them
        unique vouches for it, `_defer`) when a name is first looked up or a named op added."""
        self._names.extend(names)
        if self._defer:
            self._unindexed_range(lo, lo + len(names))
            return
        by_name = self._by_name
        size0 = len(by_name)
        named = [names[i] for i in at]
        by_name.update(zip(named, (lo + i for i in at)))
        if len(by_name) != size0 + len(named):
            dup = next(nm for i, nm in zip(at, named) if by_name[nm] != lo + i)
            raise GraphError(f"op name {dup!r} is used twice")

    def _add_lazy_names(self, lo, marks, parts, text, at):
        """Names of ops added in bulk (ops lo.. already added) from a template: per op
        `parts` (head, tail) or None (no name), `marks` the same with _LAZY for each pair,
        `at` the places of the pairs; op k's name is head + text + tail, made when read
        (while a builder vouches for the names' novelty, `_defer`; else at once)."""
        if not self._defer:
            self._add_names(lo, [None if p is None else p[0] + text + p[1] for p in parts],
                            at)
            return
        self._names.lazy(marks, parts, text)
        self._unindexed_range(lo, lo + len(marks))

    def _unindexed_range(self, lo, hi):
        """Ops lo..hi-1's names left to _index_names (joined to the range before)."""
        r = self._unindexed
        if r and r[-1][1] == lo:
            r[-1] = (r[-1][0], hi)
        else:
            r.append((lo, hi))

    def _index_names(self):
        """Index the names of the op ranges added unindexed (_add_names); a name used twice
        is refused."""
        by_name, names = self._by_name, self._names
        for lo, hi in self._unindexed:
            for i in range(lo, hi):
                nm = names[i]
                if nm is not None:
                    if nm in by_name:
                        raise GraphError(f"op name {nm!r} is used twice")
                    by_name[nm] = i
        self._unindexed = []

    def _what(self, name):
        return f"op {name!r}" if name else f"op {len(self._code)}"

    def _ref(self, a):
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            if not 0 <= a < len(self._code):
                raise GraphError(f"dependency {a}: no such op (an op can only depend on ops "
                                 f"given before it" +
                                 (f": 0..{len(self._code) - 1})" if self._code else ")"))
            return int(a)
        if isinstance(a, str):
            if a not in self._by_name and self._unindexed:
                self._index_names()
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
        if cycles is None and type(flops) is float and type(bytes) is int and \
                0.0 <= flops <= 1.7e308 and 0 <= bytes <= MAX_INT and \
                (peak_flops is None or (type(peak_flops) is float and
                                        0.0 < peak_flops <= 1.7e308)):
            i = self._add("compute", node, None, -1, after, name, ROOFLINE)   # (the common
            self._wop.append(i)                                               # roofline op)
            self._wflops.append(flops)
            self._wbytes.append(bytes)
            self._wpeak.append(math.nan if peak_flops is None else peak_flops)
            return i
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
        i = self._add("compute", node, None, -1, after, name, ROOFLINE)
        try:
            f, b = _size(flops or 0, "flops", name, real=True), _size(bytes or 0, "bytes", name)
        except GraphError:
            self._pop()
            raise
        self._wop.append(i)
        self._wflops.append(f)
        self._wbytes.append(b)
        self._wpeak.append(math.nan if peak_flops is None else float(peak_flops))
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
            raise GraphError(f"op {name or len(self._code)}: engine = {engine!r}: expected "
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
        self._space[i] = self.hold(mem, self._size[i], i, "start", what=f"op {self.label(i)}")
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
        ptr, over = self._ptr, self._over
        for i in range(first, len(self._code) if last is None else last):
            if (not over[i] if i in over else ptr[i] == ptr[i + 1]) and i != op:
                over[i] = [op]
                self._version += 1

    # ------------------------------------------------------------------ memory space
    def hold(self, device, bytes, at, edge="start", what=None):
        """`bytes` of `device`'s memory (an NPU's HBM, a memory node's or a host's DRAM) are
        taken when op `at` starts (edge 'start') or finishes ('finish'), until `free`d (held
        to the end of the run otherwise). Returns the hold's id. Holds are bookkeeping: they
        change no op's timing; after the run the occupancy of every device is computed from
        its holds and the ops' times, and a device over its capacity is an error."""
        h = len(self._hbytes)
        nbytes = _size(bytes, "bytes", what)
        if not (type(at) is int and 0 <= at < len(self._code)):
            at = self._ref(at)
        fin = _edge(edge)
        try:
            d = self._node_id[device]
        except (KeyError, TypeError):
            d = self._nid(device)
        self._hdev.append(d)
        self._hbytes.append(nbytes)
        self._hat.append(at)
        self._hat_fin.append(fin)
        self._hend.append(-1)
        self._hend_fin.append(1)
        self._hwhat.append(what)
        return h

    def free(self, h, at, edge="finish"):
        """Release hold `h` when op `at` finishes (edge 'finish') or starts ('start')."""
        if not isinstance(h, (int, np.integer)) or not 0 <= h < len(self._hbytes):
            raise GraphError(f"free({h!r}): no such hold")
        if self._hend[h] >= 0:
            raise GraphError(f"hold {h} ({self._hwhat[h] or 'unnamed'}) is freed twice")
        if not (type(at) is int and 0 <= at < len(self._code)):
            at = self._ref(at)
        self._hend_fin[h] = _edge(edge)
        self._hend[h] = at

    def add_holds(self, device, nbytes, at, at_finish, end, end_finish, what):
        """Holds in bulk, as columns (the fast path of a memory plan repeating one
        micro-batch's holds): at `device` (one node name), per hold its bytes, the op taking
        it and whether at its finish, the op freeing it (-1: never) and whether at its
        finish, and its label. Checked as arrays. Returns the first hold's id."""
        h0, k = len(self._hbytes), len(what)
        cols = [np.asarray(x, np.int64).reshape(-1) for x in (nbytes, at, at_finish, end,
                                                               end_finish)]
        if any(len(c) != k for c in cols):
            raise GraphError("add_holds: the columns differ in length")
        nb, a, af, e, ef = cols
        n = len(self._code)
        if k and (nb.min() < 0 or nb.max() > MAX_INT):
            i = int(np.flatnonzero((nb < 0) | (nb > MAX_INT))[0])
            raise GraphError(f"{what[i] or f'hold {h0 + i}'}: bytes = {int(nb[i])}: expected "
                             f"an integer in 0..{MAX_INT:,}")
        bad = np.flatnonzero((a < 0) | (a >= n) | (e < -1) | (e >= n))
        if len(bad):
            i = int(bad[0])
            raise GraphError(f"{what[i] or f'hold {h0 + i}'}: op {int(a[i])} or {int(e[i])}: "
                             f"no such op")
        d = self._nid(device)
        self._hdev.extend(itertools.repeat(d, k))
        self._hbytes.frombytes(nb.tobytes())
        self._hat.frombytes(a.tobytes())
        self._hat_fin.frombytes((af != 0).astype(np.int8).tobytes())
        self._hend.frombytes(e.tobytes())
        self._hend_fin.frombytes((ef != 0).astype(np.int8).tobytes())
        self._hwhat.extend(what)
        return h0

    holds = property(lambda self: _Holds(self),
                     doc="per hold [device, bytes, (op, edge), (op, edge) freeing it or None, "
                         "what] (edge True: the op's finish)")

    def hold_arrays(self):
        """The holds' columns as numpy arrays: dev (int32 ids into node_names), bytes, at
        (the op taking it), at_finish (bool: at its finish), end (the op freeing it, -1:
        never), end_finish; and `what`, the list of their labels."""
        return dict(dev=_np(self._hdev, np.int32), bytes=_np(self._hbytes, np.int64),
                    at=_np(self._hat, np.int64),
                    at_finish=_np(self._hat_fin, np.int8).astype(bool),
                    end=_np(self._hend, np.int64),
                    end_finish=_np(self._hend_fin, np.int8).astype(bool), what=self._hwhat)

    def space(self, op):
        """The hold of the bytes a mem_write op stores at its target."""
        i = self._ref(op)
        if i not in self._space:
            raise GraphError(f"op {self.label(i)}: a {KIND_OF[self._code[i]]} op holds no space; "
                             f"expected a mem_write")
        return self._space[i]

    def allow_streams(self, lo, hi):
        """Ops lo..hi-1 (a collective's, as its builder made them) may run as streams: an op
        of a step takes the data of the op it depends on as it comes (a send as its bytes
        are read, a reduction or write as the message arrives: pysim.workload.compile's
        stream_sources). Every other op starts when its last dependency finishes."""
        lo, hi = int(lo), int(hi)
        if not 0 <= lo <= hi <= len(self._code):
            raise GraphError(f"allow_streams({lo}, {hi}): expected 0 <= lo <= hi <= "
                             f"{len(self._code)} (the graph's ops)")
        r = self._streamable
        if r and r[-1][1] == lo:
            r[-1] = (r[-1][0], hi)
        elif hi > lo:
            r.append((lo, hi))

    def stream_mask(self):
        """Per op, whether it lies in a range given to allow_streams (a bool array)."""
        n = len(self._code)
        if not self._streamable:
            return np.zeros(n, bool)
        r = np.asarray(self._streamable, np.int64).reshape(-1, 2)
        edge = np.zeros(n + 1, np.int64)
        np.add.at(edge, r[:, 0], 1)
        np.add.at(edge, r[:, 1], -1)
        return np.cumsum(edge[:n]) > 0

    def depend(self, op, on):
        """Make op `op` wait for op `on` as well (either may have been added after the
        other; a cycle of dependencies is refused when the graph is compiled)."""
        op, on = self._ref(op), self._ref(on)
        if op == on:
            raise GraphError(f"op {self.label(op)} cannot depend on itself")
        deps = self._deps(op)
        if on not in deps:
            self._over[op] = deps + [on]
            self._version += 1
            self._forward |= on > op

    def label(self, i):
        name = self._names[i]
        return name if name is not None else f"op{i}"



_BULK_KINDS = frozenset(OP_CODES) - {"mem_write", "mem_read"}


def _np(a, dtype):
    """A numpy copy of an array.array column (empty arrays alike)."""
    return np.frombuffer(a, dtype).copy() if len(a) else np.zeros(0, dtype)


def _merge_over(ptr, dep, over):
    """The CSR dependencies with the ops of `over` (op -> its list) given their own."""
    n = len(ptr) - 1
    lens = np.diff(ptr)
    ids = np.fromiter(over, np.int64, len(over))
    keep = np.ones(n, bool)
    keep[ids] = False
    owner = np.repeat(np.arange(n, dtype=np.int64), lens)
    mask = keep[owner]
    o_lens = np.fromiter((len(v) for v in over.values()), np.int64, len(over))
    o_dep = np.fromiter(itertools.chain.from_iterable(over.values()), np.int64,
                        int(o_lens.sum()))
    owner = np.concatenate([owner[mask], np.repeat(ids, o_lens)])
    dep = np.concatenate([dep[mask], o_dep])
    order = np.argsort(owner, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(owner, minlength=n))
    return ptr, dep[order]


class _Column(Sequence):
    """One column of an OpGraph, read op by op (a view: it follows the graph)."""
    __slots__ = ("g",)
    __hash__ = None

    def __init__(self, g):
        self.g = g

    def __len__(self):
        return len(self.g._code)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._at(k) for k in range(*i.indices(len(self.g._code)))]
        return self._at(self._index(i))

    def _index(self, i):
        """Op index i (negative: from the end) checked against the ops."""
        n = len(self.g._code)
        i = operator.index(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("op index out of range")
        return i

    def __iter__(self):
        return map(self._at, range(len(self.g._code)))

    def __eq__(self, other):
        if isinstance(other, (_Column, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self):
        return repr(list(self))


class _Kinds(_Column):
    __slots__ = ()

    def _at(self, i):
        return KIND_OF[self.g._code[i]]

    def __iter__(self):
        return map(KIND_OF.__getitem__, self.g._code)

    def __contains__(self, kind):
        code = OP_CODES.get(kind) if isinstance(kind, str) else None
        if code is None:
            return False
        return code in self.g._code or (code == 0 and ROOFLINE in self.g._code)


class _Nodes(_Column):
    __slots__ = ("col",)

    def __init__(self, g, col):
        self.g, self.col = g, col

    def _at(self, i):
        j = getattr(self.g, self.col)[i]
        return None if j < 0 else self.g._nodes[j]

    def __iter__(self):
        names = self.g._nodes + [None]          # (id -1: the last)
        return map(names.__getitem__, getattr(self.g, self.col))


class _Stored(_Column):
    """A column read as the graph stores it (its sizes, its names)."""
    __slots__ = ("col",)

    def __init__(self, g, col):
        self.g, self.col = g, col

    def _at(self, i):
        return getattr(self.g, self.col)[i]

    def __iter__(self):
        return iter(getattr(self.g, self.col))


class _Deps(list):
    """An op's dependencies as read from its graph: a copy, so a change made to it in place
    would change nothing in the graph. Such changes are refused, naming what does change them
    (the copy made by list(...) or + is a plain list)."""
    __slots__ = ("op",)

    def __init__(self, op, deps):
        super().__init__(deps)
        self.op = op

    def _refuse(self, *args, **kwargs):
        raise GraphError(f"op {self.op}'s dependencies as read (graph.after[{self.op}]) are a "
                         f"copy: add one with graph.depend(...) or give them all with "
                         f"graph.after[{self.op}] = [...]")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


class _After(_Column):
    """Per op its dependencies (a new list each time: assign to change them)."""
    __slots__ = ()

    def _at(self, i):
        return self.g._deps(i)

    def __setitem__(self, i, deps):
        g = self.g
        i = self._index(i)
        deps = [g._ref(d) for d in deps]
        g._over[i] = deps
        g._version += 1
        g._forward |= any(d > i for d in deps)


class _Holds(Sequence):
    """An OpGraph's holds, read one by one (lists made when asked for)."""
    __slots__ = ("g",)

    def __init__(self, g):
        self.g = g

    def __len__(self):
        return len(self.g._hbytes)

    def __getitem__(self, h):
        g = self.g
        if isinstance(h, slice):
            return [self[k] for k in range(*h.indices(len(self)))]
        h = operator.index(h)
        if h < 0:
            h += len(self)
        if not 0 <= h < len(self):
            raise IndexError("hold index out of range")
        d = g._hdev[h]
        end = g._hend[h]
        return [None if d < 0 else g._nodes[d], g._hbytes[h], (g._hat[h], bool(g._hat_fin[h])),
                None if end < 0 else (end, bool(g._hend_fin[h])), g._hwhat[h]]


class _Work(_Column):
    __slots__ = ()

    def _at(self, i):
        g = self.g
        if g._code[i] != ROOFLINE:
            return None
        k = bisect.bisect_left(g._wop, i)
        peak = g._wpeak[k]
        return (g._wflops[k], g._wbytes[k], None if math.isnan(peak) else peak)

    def __setitem__(self, i, work):
        """A roofline op's work changed: (flops, bytes, peak FLOP/s or None)."""
        g = self.g
        i = self._index(i)
        if g._code[i] != ROOFLINE:
            raise GraphError(f"op {g.label(i)}: not a compute op of flops and bytes: its "
                             f"work cannot be set")
        flops, nbytes, peak = work
        k = bisect.bisect_left(g._wop, i)
        g._wflops[k] = float(flops)
        g._wbytes[k] = int(nbytes)
        g._wpeak[k] = math.nan if peak is None else float(peak)


def _edge(edge):
    if edge == "start":
        return False
    if edge == "finish":
        return True
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
    if len(g.ops_of("mem_write", "mem_read")):
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
    compiled arrays: steps x the zero-load latency of a one-flit message on the route; and
    the tail of each send that streams its data (csim/_dag.pxd): the zero-load latency of
    its last packet."""
    _compile.send_tails(network, cfg, arrays)
    if not graph.latencies:
        return
    index = {n: i for i, n in enumerate(network.topo.node_names)}
    ops, src, dst, steps = zip(*graph.latencies)   # (a stream op each: 262,144 at 65,536 NPUs)
    try:
        s = np.fromiter(map(index.__getitem__, src), np.int64, len(src))
        d = np.fromiter(map(index.__getitem__, dst), np.int64, len(dst))
    except KeyError:
        what, bad = next((w, x) for w, names in (("src", src), ("dst", dst)) for x in names
                         if x not in index)
        raise GraphError(f"step latency: {what} = {bad!r}: no node of that name") from None
    t0 = _compile.zero_load(network, cfg, s, d, np.ones(len(s), np.int64))
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
                                                "comm_hbm", "stream_src", "tail")},
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
    if st == "backlog":                  # (the flit level's limit on packets alive)
        raise ConfigError(f"simulation.max_packets = {cfg.simulation.max_packets:,}: the op "
                          f"graph had more packets alive at once (queued at their NICs or in "
                          f"flight) and was stopped; expected a limit above what the graph "
                          f"holds at once (the default is "
                          f"{KEY_MAP['simulation.max_packets'].default:,})")
    if st != "done":
        left = np.flatnonzero(finish < 0)
        unfinished = [graph.label(i) + (f" (running since cycle {int(start[i]):,})"
                                         if start[i] >= 0 else " (not started)")
                      for i in left[:5]]
        more = f" and {left.size - 5:,} more" if left.size > 5 else ""
        raise ConfigError(f"workload.max_cycles = {cfg.workload.max_cycles:,}: the graph did "
                          f"not finish by then (unfinished: {', '.join(unfinished)}{more}); "
                          f"expected a limit past the graph's end: a larger "
                          f"workload.max_cycles lets it run on")
    usage = memory_usage(graph, start, finish, network.topo, cfg, check=check_memory)
    names = network.topo.node_names
    ops = OpTable(graph, start, finish, arrays["isolated"])
    c = eng.counters()
    cfg_dict = cfg.resolved()
    cfg_dict["_system"] = system_name(network.topo, cfg)
    makespan = int(finish.max())
    # (the flow level owes no serialisation past the end: its bytes never run ahead of a
    # link's rate, and a channel's owed time there is 0; its lanes of a link carry the
    # link's flits evenly, read once per link and NIC)
    if model == "flow":
        unit_flits = eng.channel_flits(network.unit_first)
        links = link_report(network, cfg, None, makespan, unit_flits=unit_flits)
        nic = notes.nic_limit(network, cfg, None, makespan, unit_flits=unit_flits)
    else:
        flits = eng.channel_flits()
        links = link_report(network, cfg, flits, makespan, eng.vc_flits(),
                            owed_end=eng.channel_owed(makespan))
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
                       solver_fallbacks=int(c["solver_fallbacks"]),
                       solver_rounds=int(c["solver_rounds"]),
                       solver_work=int(c["solver_work"]),
                       solver_full_work=int(c["solver_full_work"]),
                       pairs_changed=int(c["pairs_changed"]))
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
