"""The boundary between pysim and its compiled core, `csim._engine`.

Every module of pysim reaches the compiled core through this module, never by importing csim
itself. `core` is `csim._engine`, imported the first time one of its attributes is read, so
configurations parse, the configuration reference generates and `pysim --help` answers without
the extension built; running anything needs it. This is the only import of csim in pysim, and
the only deferred import of a required module (tests/test_layers.py allows exactly this one).

What crosses the boundary is typed: one class per engine input, each a set of named numpy
arrays (and a few scalars) with a documented dtype and shape, converted and checked once, when
it is made:

- `NetworkArrays`: the compiled network (channels, routes, router and NIC parameters), made by
  `pysim.network.compile_network`; `new_engine(arrays)` builds a `core.Engine` from it.
- `GraphArrays`: an op graph as the op scheduler takes it (kinds, nodes, sizes, dependency
  counts, successors as CSR), made by `pysim.workload.graph.compile_graph`.
- `FlowArrays`: what the flow-level network needs of an op graph (per send its zero-load
  latencies and its (source, destination) pair; per pair and extra resource their capacities),
  made by `pysim.flow.flow_arrays`.

`set_graph(engine, graph, flow)` hands the last two to an engine. A new engine input is a new
`Field` in its class's FIELDS (with its dtype, shape and one line of doc), and, where it must
hold, a line in its `check`. Shapes are tuples of sizes named by `sizes()`: an int, or a name
such as "C" (channels), or "*" (any length). tests/test_lowlevel.py drives csim with inputs
made by hand.

Also here: the allocators' input arbiters by name (`VC_ARBITERS`, `SW_ARBITERS`), the one
table from a name to the engine's variant.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from csim.limits import SW_ARBITERS as SA_CODES, VC_ARBITERS as VA_CODES
from csim.limits import (MAX_PACKET_FLITS, MAX_VCS, N_UNITS, OP_ACQUIRE, OP_COMPUTE,  # noqa: F401
                         OP_DELAY, OP_HOLD, OP_RELEASE, OP_ROOF, OP_ROOF_MEM, OP_SEND, OP_UNHOLD)


class _Core:
    """`csim._engine`, imported on first use."""

    __slots__ = ()
    _module = None

    def __getattr__(self, name):
        module = _Core._module
        if module is None:
            from csim import _engine as module   # the deferred import (see the docstring)
            _Core._module = module
        return getattr(module, name)

    def __repr__(self):
        return "<csim._engine, loaded on first use>"


core = _Core()

# channel kinds, op kinds and units: the values of csim/_types.pxd's enums
CH_NET, CH_INJECT, CH_EJECT = 0, 1, 2


class EngineInputError(ValueError):
    """An input handed to the compiled core has a wrong dtype, shape or content. pysim checks
    every configuration before it builds these, so this names a bug, or an input made by
    hand; the message names the input and what was expected."""


@dataclass(frozen=True)
class Field:
    """One engine input: a numpy array of `dtype` and `shape` (sizes named by the class's
    sizes()), or a scalar (dtype int, bool or float, shape ())."""
    name: str
    dtype: object
    shape: tuple
    doc: str
    optional: bool = False


class Inputs(Mapping):
    """Named engine inputs, converted to their dtypes (C-contiguous; no copy where they are
    already) and checked against their shapes and invariants once, when made. Read as a
    mapping: `arrays["rt"]`."""

    FIELDS: tuple = ()

    def __init__(self, **values):
        fields = {f.name: f for f in self.FIELDS}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise EngineInputError(f"{type(self).__name__}: unknown input(s) "
                                   f"{', '.join(unknown)}; expected {', '.join(fields)}")
        v = {}
        for f in self.FIELDS:
            x = values.get(f.name)
            if x is None:
                if not f.optional:
                    raise EngineInputError(f"{type(self).__name__}.{f.name}: missing ({f.doc})")
                v[f.name] = None
            elif f.dtype is object:
                v[f.name] = x
            elif f.shape == ():
                v[f.name] = self._scalar(f, x)
            else:
                v[f.name] = self._array(f, x)
        self._v = v
        sizes = self.sizes()
        for f in self.FIELDS:
            x = v[f.name]
            if x is None or f.shape == ():
                continue
            want = tuple(s if s == "*" else (s if isinstance(s, int) else sizes[s])
                         for s in f.shape)
            if x.ndim != len(want) or any(w != "*" and w != g for w, g in zip(want, x.shape)):
                raise EngineInputError(
                    f"{type(self).__name__}.{f.name}: shape {x.shape}, expected "
                    f"({', '.join(str(s) for s in f.shape)}) = {want} ({f.doc})")
        self.check()

    def _scalar(self, f, x):
        try:
            if f.dtype is bool:
                return bool(x)
            if f.dtype is int:
                if isinstance(x, (float, np.floating)) and x != int(x):
                    raise ValueError
                return int(x)
            return float(x)
        except (TypeError, ValueError, OverflowError):
            raise EngineInputError(f"{type(self).__name__}.{f.name} = {x!r}: expected "
                                   f"{f.dtype.__name__} ({f.doc})") from None

    def _array(self, f, x):
        dtype = np.dtype(f.dtype)
        a = np.asarray(x)
        if a.size and not np.can_cast(a.dtype, dtype, "same_kind"):
            raise EngineInputError(f"{type(self).__name__}.{f.name}: dtype {a.dtype}, expected "
                                   f"{dtype} ({f.doc})")
        if a.size and dtype.kind in "iu" and a.dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo, hi = a.min(), a.max()
            if lo < info.min or hi > info.max:
                raise EngineInputError(f"{type(self).__name__}.{f.name}: values {lo} .. {hi} "
                                       f"do not fit {dtype} ({f.doc})")
        return np.ascontiguousarray(a, dtype=dtype)

    def sizes(self) -> dict:
        """The named sizes of the shapes."""
        return {}

    def check(self):
        """Invariants beyond dtypes and shapes; raise EngineInputError."""

    def fail(self, name, what):
        raise EngineInputError(f"{type(self).__name__}.{name}: {what}")

    def as_dict(self) -> dict:
        """The inputs as the plain dict csim's Engine methods take."""
        return dict(self._v)

    def __getitem__(self, name):
        return self._v[name]

    def __iter__(self):
        return iter(self._v)

    def __len__(self):
        return len(self._v)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(self._v)})"


def _in_range(a, lo, hi):
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) < hi)


def _rule_top(kind, a):
    """The highest channel a csim RouteRule's arrays (RouteRule.arrays()) can give, before
    its tmap (-1: none): a table's entries; dimension order's channels; rows': each node's
    offset plus the highest entry of its row, and the exceptions."""
    if kind == "table":
        return int(a["tab"].max(initial=-1))
    if kind == "dor":
        return int(a["chan"].max(initial=-1))
    vec, cls = a["vec"], a["cls"]
    n = cls.size
    rows = vec[:(int(cls.max(initial=-1)) + 1) * n].reshape(-1, n) if n else vec[:0]
    top = rows.max(axis=1, initial=-1)[cls] if n else np.zeros(0, np.int64)
    top = np.where(top >= 0, top.astype(np.int64) + a["off"], -1)
    return max(int(top.max(initial=-1)), int(a["exc_c"].max(initial=-1)) if n else -1)


class NetworkArrays(Inputs):
    """The compiled network, as csim's Engine takes it. Sizes: n nodes, C channels (router to
    router, NIC to router, router to NIC; each lane of a parallel link its own channel, the
    lanes of a group consecutive), E endpoints, G groups of VC classes with node positions."""

    FIELDS = (
        Field("n_nodes", int, (), "nodes (routers), each with a NIC if an endpoint"),
        Field("vcs", int, (), "virtual channels per input port, 1 .. MAX_VCS"),
        Field("buffer_flits", int, (), "buffer depth of each VC"),
        Field("routing_delay", int, (), "cycles: head arrival to first VC allocation"),
        Field("vc_alloc_delay", int, (), "cycles: VC grant to first switch allocation"),
        Field("sw_alloc_delay", int, (), "cycles: switch grant to traversal (>= 1)"),
        Field("st_delay", int, (), "cycles: switch traversal"),
        Field("injection_delay", int, (), "cycles: a NIC's choice of a flit to its entering "
              "the injection channel"),
        Field("wait_for_tail_credit", bool, (), "an output VC is reallocated only after the "
              "tail's credit returns"),
        Field("n_classes", int, (), "VC classes, 1 .. vcs (the VCs split evenly)"),
        Field("watchdog_cycles", int, (), "cycles with flits buffered and none moving that "
              "are reported as deadlock"),
        Field("max_packets", int, (), "packets alive at once beyond which a run stops"),
        Field("ch_src", np.int32, ("C",), "per channel: its source node"),
        Field("ch_dst", np.int32, ("C",), "per channel: its destination node"),
        Field("ch_kind", np.int8, ("C",), "per channel: CH_NET, CH_INJECT or CH_EJECT"),
        Field("ch_lat_cycles", np.int32, ("C",), "per channel: latency, cycles"),
        Field("ch_num", np.int64, ("C",), "per channel: flit credit earned per cycle"),
        Field("ch_den", np.int64, ("C",), "per channel: credit a flit costs (rate = num/den "
              "flits per cycle, at most 1)"),
        Field("ch_group", np.int32, ("C",), "per channel: its VC-class group (-1: none)"),
        Field("ch_order", np.int32, ("C",), "per channel: its order within its group"),
        Field("ch_par_base", np.int32, ("C",), "per channel: the first lane of its parallel "
              "group"),
        Field("ch_par_n", np.int32, ("C",), "per channel: lanes in its parallel group"),
        Field("ch_out_idx", np.int32, ("C",), "per channel: its index among its router's "
              "outputs (the switch allocator's round-robin order)"),
        Field("node_pos", np.int32, ("n", "*"), "per node: its position in each group with "
              "positions (rings, tori); None for none", optional=True),
        Field("entry_class", bool, (), "VC classes chosen where a packet enters a "
              "dimension (BookSim's datelines)"),
        Field("tie_k", np.int32, ("*",), "per group with positions: its ring's size, for "
              "random ties at distance k/2; None for fixed routes", optional=True),
        Field("ch_rev", np.int32, ("C",), "random ties: per channel, the first of the group "
              "leaving its router the other way (-1: none)", optional=True),
        Field("tie_seed", int, (), "seed of the random ties"),
        Field("va_arbiter", int, (), "VC allocation's input arbiter, a code of "
              "csim.limits.VC_ARBITERS (VC_ARBITERS here picks it by name)"),
        Field("sa_arbiter", int, (), "switch allocation's input arbiter, a code of "
              "csim.limits.SW_ARBITERS (SW_ARBITERS here picks it by name)"),
        Field("rt", np.int32, ("n*n",), "per (node, destination): the output channel (the "
              "first lane of a group), -1 for none; at an endpoint's own row, its ejection; "
              "None where `route` gives them", optional=True),
        Field("route", object, (), "None, or the routes by rule (a csim RouteRule of n "
              "nodes whose channels are these, as rt's)", optional=True),
        Field("ep_node", np.int32, ("E",), "per endpoint: its node"),
        Field("nic_inj_base", np.int32, ("n",), "per node: its first injection channel"),
        Field("nic_inj_n", np.int32, ("n",), "per node: its injection channels (consecutive)"),
    )

    def table(self):
        """rt, or the table of the rule's routes (n x n: for small networks)."""
        if self["rt"] is not None:
            return self["rt"]
        return self["route"].rows(0, self["n_nodes"]).reshape(-1)

    def routes(self):
        """The routes as a csim RouteRule (the rule, or the table rt as one)."""
        if self["route"] is not None:
            return self["route"]
        if getattr(self, "_rt_rule", None) is None:
            self._rt_rule = core.RouteRule({"kind": "table", "n": self["n_nodes"],
                                            "tab": self["rt"]})
        return self._rt_rule

    def sizes(self):
        n = self["n_nodes"]
        return {"n": n, "C": self["ch_src"].size, "n*n": n * n, "E": self["ep_node"].size}

    def check(self):
        n, C, V = self["n_nodes"], self["ch_src"].size, self["vcs"]
        if n < 1:
            self.fail("n_nodes", f"{n}: expected >= 1")
        if not 1 <= V <= MAX_VCS:
            self.fail("vcs", f"{V}: expected 1 .. {MAX_VCS}")
        if not 1 <= self["n_classes"] <= V:
            self.fail("n_classes", f"{self['n_classes']}: expected 1 .. vcs = {V}")
        if self["buffer_flits"] < 1:
            self.fail("buffer_flits", f"{self['buffer_flits']}: expected >= 1")
        for k in ("routing_delay", "vc_alloc_delay", "st_delay", "injection_delay"):
            if self[k] < 0:
                self.fail(k, f"{self[k]}: expected >= 0")
        if self["sw_alloc_delay"] < 1:
            self.fail("sw_alloc_delay", f"{self['sw_alloc_delay']}: expected >= 1")
        for k in ("ch_src", "ch_dst", "ep_node"):
            if not _in_range(self[k], 0, n):
                self.fail(k, f"a node outside 0 .. {n - 1}")
        kind = self["ch_kind"]
        if not _in_range(kind, 0, 3):
            self.fail("ch_kind", "expected CH_NET (0), CH_INJECT (1) or CH_EJECT (2)")
        if (self["ch_lat_cycles"] < 0).any():
            self.fail("ch_lat_cycles", "a negative latency")
        num, den = self["ch_num"], self["ch_den"]
        if (num < 1).any() or (den < num).any():
            self.fail("ch_num", "expected 1 <= ch_num <= ch_den (at most a flit per cycle)")
        base = self["ch_par_base"]
        if not _in_range(base, 0, C) or (base > np.arange(C, dtype=base.dtype)).any() or \
                (C and (base[base] != base).any()):
            self.fail("ch_par_base", "expected each channel's first lane, at or before it")
        if not _in_range(self["ch_out_idx"], 0, C):
            self.fail("ch_out_idx", "expected an index >= 0 per channel")
        if (self["rt"] is None) == (self["route"] is None):
            self.fail("rt", "expected a table (rt) or a rule (route), one of the two")
        if self["rt"] is not None and not _in_range(self["rt"], -1, C):
            self.fail("rt", f"a channel outside -1 .. {C - 1}")
        rule = self["route"]
        if rule is not None:
            if not isinstance(rule, core.RouteRule) or rule.n != n:
                self.fail("route", f"expected a csim RouteRule of {n} nodes")
            a = rule.arrays()
            if not _in_range(a.get("tmap", np.zeros(0, np.int32)), -1, C) or \
                    not _in_range(a.get("diag", np.zeros(0, np.int32)), -1, C):
                self.fail("route", f"a channel outside -1 .. {C - 1}")
            top = _rule_top(rule.kind, a)        # (the rule's own channels, before tmap)
            lim = a["tmap"].size if "tmap" in a else C
            if top >= lim:
                self.fail("route", f"the rule gives channel {top}, outside -1 .. {lim - 1}" +
                          (" (the entries of its tmap)" if "tmap" in a else ""))
        if not _in_range(self["nic_inj_base"], 0, max(C, 1)):
            self.fail("nic_inj_base", f"a channel outside 0 .. {C - 1}")
        pos = self["node_pos"]
        if self["entry_class"] and (pos is None or pos.shape[1] == 0):
            self.fail("entry_class", "entry classes need node positions (node_pos)")
        if self["tie_k"] is not None:
            if pos is None or self["tie_k"].size != pos.shape[1]:
                self.fail("tie_k", "expected one entry per column of node_pos")
            if self["ch_rev"] is None:
                self.fail("ch_rev", "random ties (tie_k) need ch_rev")


class GraphArrays(Inputs):
    """An op graph as csim's op scheduler takes it (csim/_dag.pxd). Sizes: N ops, S successor
    entries. An op starts when its `deps` predecessors have finished and its unit is free."""

    FIELDS = (
        Field("kind", np.int8, ("N",), "per op: OP_COMPUTE, OP_SEND, OP_DELAY, OP_ROOF, "
              "OP_ROOF_MEM, OP_ACQUIRE, OP_RELEASE, OP_HOLD (a collective takes `size` of its "
              "node's compute units), OP_UNHOLD (and gives them back)"),
        Field("node", np.int32, ("N",), "per op: its node (a send's source; a delay's is "
              "not read)"),
        Field("dst", np.int32, ("N",), "per op: a send's destination node (else any)"),
        Field("size", np.int64, ("N",), "per op: cycles, or a send's bytes"),
        Field("deps", np.int32, ("N",), "per op: its number of predecessors"),
        Field("succ_ptr", np.int64, ("N+1",), "CSR: op i's successors are "
              "succ[succ_ptr[i]:succ_ptr[i + 1]]"),
        Field("succ", np.int32, ("S",), "CSR: successor op ids"),
        Field("unit", np.int8, ("N",), "per op: the unit of its node it occupies (0 compute, "
              "1 memory, 2 collectives engine, 3 a gate, 4 held compute units, 5 "
              "communication's memory for what it sends, 6 memory transfers', 7 "
              "communication's memory for what it receives, 8 and 9 the second lanes of 5 "
              "and 7, queued with them); None: all 0", optional=True),
        Field("packet_flits", int, (), "a send is cut into packets of at most this many "
              "flits"),
        Field("flit_bytes", int, (), "bytes per flit"),
        Field("sms", np.int32, ("M",), "per node: its compute units (0: not modelled; an "
              "NPU-run collective holds some of them while active, see "
              "pysim.workload.endpoint); None: all 0", optional=True),
        Field("comm_hbm", np.float64, ("M",), "per node: communication's memory budget as a "
              "fraction of its memory bandwidth, in (0, 1]; None: all 1", optional=True),
        Field("share", np.float64, ("N",), "per op: what a memory transfer's op (unit 6) can "
              "use of its node's memory bandwidth, in (0, 1]; None: all 1", optional=True),
        Field("nic_fifo", bool, (), "a NIC sends its messages to one destination in order, "
              "first in first out (network.nic_order = 'fifo'); None: True", optional=True),
        Field("stream_src", np.int32, ("N",), "per op: the op whose data it takes as it comes "
              "(a stream, csim/_dag.pxd: counted in deps, done for starting when that op "
              "starts, not among its successors), or -1; None: no op streams", optional=True),
        Field("tail", np.int64, ("N",), "per streaming op: its work after its source "
              "finishes (a unit op's cycles at full rate, a send's cycles); None: 0",
              optional=True),
        Field("nic_per_link", bool, (), "a NIC of several injection channels gives each to "
              "one output link at a time (network.nic_injection = 'per_link'); None: False",
              optional=True),
    )

    def sizes(self):
        n = self["kind"].size
        ptr = self["succ_ptr"]
        per_node = self["sms"] if self["sms"] is not None else self["comm_hbm"]
        return {"N": n, "N+1": n + 1, "S": int(ptr[-1]) if ptr.size else 0,
                "M": per_node.size if per_node is not None else 0}

    def check(self, n_nodes=None):
        N = self["kind"].size
        if not 1 <= self["packet_flits"] <= MAX_PACKET_FLITS:
            self.fail("packet_flits", f"{self['packet_flits']}: expected 1 .. "
                                      f"{MAX_PACKET_FLITS}")
        if self["flit_bytes"] < 1:
            self.fail("flit_bytes", f"{self['flit_bytes']}: expected >= 1")
        if not _in_range(self["kind"], 0, OP_UNHOLD + 1):
            self.fail("kind", f"an op kind outside 0 .. {OP_UNHOLD}")
        if (self["size"] < 0).any():
            self.fail("size", "a negative size")
        ptr, succ = self["succ_ptr"], self["succ"]
        if ptr[0] != 0 or (np.diff(ptr) < 0).any():
            self.fail("succ_ptr", "expected to start at 0 and never decrease")
        if not _in_range(succ, 0, N):
            self.fail("succ", f"an op outside 0 .. {N - 1}")
        # deps: each op's count of predecessors; a roofline op's memory part (OP_ROOF_MEM,
        # the op after its OP_ROOF) has none and deps 1: its roofline op starts it
        preds, deps, kind = np.bincount(succ, minlength=N), self["deps"], self["kind"]
        src = self["stream_src"]
        if src is not None:
            if not _in_range(src, -1, N) or (src == np.arange(N)).any():
                self.fail("stream_src", f"an op outside -1 .. {N - 1}, or an op's own id")
            on = np.flatnonzero(src >= 0)
            ends = np.concatenate([on, src[on]])
            if not np.isin(kind[ends], (OP_COMPUTE, OP_SEND)).all():
                self.fail("stream_src", "a stream between ops other than OP_COMPUTE and "
                                        "OP_SEND")
            preds = preds + (src >= 0)          # (a stream counts in deps, not in succ)
        if self["tail"] is not None and (self["tail"] < 0).any():
            self.fail("tail", "a negative tail")
        mem = kind == OP_ROOF_MEM
        if not np.array_equal(preds[~mem], deps[~mem]):
            self.fail("deps", "expected each op's count of predecessors (in succ)")
        at = np.flatnonzero(mem)
        if at.size and ((deps[at] != 1).any() or (preds[at] != 0).any() or (at == 0).any()
                        or (kind[at - 1] != OP_ROOF).any()):
            self.fail("deps", "an OP_ROOF_MEM op follows its OP_ROOF, with deps 1 and no "
                              "predecessor")
        if self["unit"] is not None and not _in_range(self["unit"], 0, N_UNITS):
            self.fail("unit", f"a unit outside 0 .. {N_UNITS - 1}")
        sms, hbm = self["sms"], self["comm_hbm"]
        if sms is not None and (sms < 0).any():
            self.fail("sms", "a negative count of compute units")
        if hbm is not None and ((hbm <= 0) | (hbm > 1)).any():
            self.fail("comm_hbm", "expected fractions in (0, 1]")
        share = self["share"]
        if share is not None and not ((share > 0) & (share <= 1)).all():
            self.fail("share", "expected fractions in (0, 1]")
        if sms is not None and hbm is not None and sms.size != hbm.size:
            self.fail("comm_hbm", "expected one entry per node, as sms")
        if n_nodes is not None:
            for name in ("sms", "comm_hbm"):
                if self[name] is not None and self[name].size != n_nodes:
                    self.fail(name, f"{self[name].size} entries, expected one per node "
                                    f"({n_nodes})")
            kind = self["kind"]
            if not _in_range(self["node"][kind != OP_DELAY], 0, n_nodes) or \
                    not _in_range(self["dst"][kind == OP_SEND], 0, n_nodes):
                self.fail("node", f"a node outside 0 .. {n_nodes - 1} (a delay op's is "
                                  f"not read)")


class FlowArrays(Inputs):
    """What the flow-level network needs of an op graph (csim/_flow.pxd). Sizes: N ops, P
    (source, destination) pairs, R resources beyond the channels (the pairs' NIC caps, then
    the VC classes of one VC), numbered from the channel count on."""

    FIELDS = (
        Field("latency", np.int64, ("N",), "per op: a send's zero-load latency of its last "
              "packet, cycles"),
        Field("latency_full", np.int64, ("N",), "per op: of a full packet"),
        Field("latency_whole", np.int64, ("N",), "per op: of one packet as long as the "
              "message"),
        Field("pair", np.int32, ("N",), "per op: a send's pair (else -1)"),
        Field("pair_src", np.int32, ("P",), "per pair: its source node"),
        Field("pair_dst", np.int32, ("P",), "per pair: its destination node"),
        Field("pair_cap", np.int32, ("P",), "per pair: its cap resource (-1: none)"),
        Field("cap_bytes", np.float64, ("R",), "per extra resource: bytes per cycle, > 0"),
        Field("cap_lanes", np.int32, ("R",), "per extra resource: packets at once, >= 1"),
        Field("vc_res", np.int32, ("*",), "[channel * n_classes + class]: the resource of a "
              "class of one VC on a group's first channel, or -1", optional=True),
        Field("vc_res_base", int, (), "the first VC-class resource", optional=True),
        Field("nic_inj_bytes", np.float64, ("*",), "per node: its NIC's injection channels' "
              "bytes per cycle in all where packets hold them below their rate (0: their "
              "rate)", optional=True),
    )

    def sizes(self):
        return {"N": self["latency"].size, "P": self["pair_src"].size,
                "R": self["cap_bytes"].size}

    def check(self):
        if not (self["cap_bytes"] > 0).all() or (self["cap_lanes"] < 1).any():
            self.fail("cap_bytes", "expected cap_bytes > 0 and cap_lanes >= 1 per resource")
        if not _in_range(self["pair"], -1, self["pair_src"].size):
            self.fail("pair", "a pair out of range")

    def as_dict(self):
        return {k: v for k, v in self._v.items() if v is not None}


def new_engine(network: NetworkArrays):
    """A csim Engine for a compiled network."""
    if not isinstance(network, NetworkArrays):
        raise TypeError(f"new_engine takes NetworkArrays, not {type(network).__name__}")
    return core.Engine(network.as_dict())


def set_graph(engine, graph: GraphArrays, flow: FlowArrays | None = None):
    """Hand an op graph (and, for the flow-level network, its flow inputs) to an engine."""
    if not isinstance(graph, GraphArrays):
        raise TypeError(f"set_graph takes GraphArrays, not {type(graph).__name__}")
    if flow is not None and not isinstance(flow, FlowArrays):
        raise TypeError(f"set_graph's flow is FlowArrays or None, not {type(flow).__name__}")
    g = graph
    engine.set_graph(g["kind"], g["node"], g["dst"], g["size"], g["deps"], g["succ_ptr"],
                     g["succ"], g["packet_flits"], g["flit_bytes"], g["unit"],
                     flow=None if flow is None else flow.as_dict(), sms=g["sms"],
                     comm_hbm=g["comm_hbm"], share=g["share"],
                     nic_fifo=1 if g["nic_fifo"] is None else int(g["nic_fifo"]),
                     stream_src=g["stream_src"], tail=g["tail"],
                     nic_per_link=int(bool(g["nic_per_link"])))


# ------------------------------------------------------------------ allocators by name

@dataclass(frozen=True)
class Arbiter:
    """An allocator's input arbiter: its name, what it does, and the engine inputs that pick
    it."""
    name: str
    doc: str
    inputs: dict


VC_ARBITERS = {a.name: a for a in (
    Arbiter("round_robin", "BookSim's separable input-first allocator: a waiting head asks "
            "for the first free output VC of its class at or after its input VC's round-robin "
            "pointer, which moves past each VC it is granted",
            {"va_arbiter": VA_CODES["round_robin"]}),
    Arbiter("own_index", "a head asks first for the output VC at its input VC's own index, "
            "so heads in different input VCs ask for different output VCs first (fewer "
            "conflicts)", {"va_arbiter": VA_CODES["own_index"]}),
)}

SW_ARBITERS = {a.name: a for a in (
    Arbiter("outputs", "BookSim's separable input-first allocator: per output asked for, the "
            "ready VC nearest after the port's VC pointer, and among those outputs the one "
            "nearest after its output pointer", {"sa_arbiter": SA_CODES["outputs"]}),
    Arbiter("vcs", "the ready VC nearest after the port's VC pointer",
            {"sa_arbiter": SA_CODES["vcs"]}),
)}


def arbiter_inputs(va: str, sa: str) -> dict:
    """The engine inputs that pick VC allocation's arbiter `va` and switch allocation's `sa`
    (names checked with the configuration)."""
    return {**VC_ARBITERS[va].inputs, **SW_ARBITERS[sa].inputs}
