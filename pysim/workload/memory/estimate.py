"""The planner's performance model: a plan expanded on one NPU's compute unit and one transfer
channel each way, scheduled by csim's op scheduler (the compiled one the runs use, on a
planning machine of one NPU), and its peak from the holds."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from pysim.config import from_dict
from pysim.engine import GraphArrays, new_engine, set_graph
from pysim.network import compile_network
from pysim.topology import build
from pysim.workload.graph import KINDS
from pysim.workload.holds import occupancy
from pysim.workload.memory.expand import Skeleton, _Queues, expand
from pysim.workload.memory.plan import Budget, Plan


def chain(sink, npu, costs, after=()):
    """One micro-batch's iteration on one NPU as a chain of compute ops of the layers'
    cycles -- forward ops in layer order, then each layer's backward ops from the last
    layer down -- on a sink (an Estimate, or a GraphSink for a plain op graph); returns its
    Skeleton."""
    F, B, order = [], [[] for _ in costs], []
    prev = list(after)
    for c in costs:
        f = sink.compute(npu, c.fwd_cycles, prev)
        F.append(f)
        order.append(f)
        prev = [f]
    for l in range(len(costs) - 1, -1, -1):
        for cyc in costs[l].bwd_cycles:
            b = sink.compute(npu, cyc, prev)
            B[l].append(b)
            order.append(b)
            prev = [b]
    return Skeleton(F, B, order)


class Estimate(_Queues):
    """A sink that schedules a plan on three units of one NPU -- its compute unit and one
    transfer channel each way to remote memory -- in csim's op scheduler itself (the
    compiled one the runs use), on a planning machine of one NPU: its compute unit runs the
    layers' cycles, its memory unit stands for the channel out and its engine unit for the
    channel back, each serving its ops one at a time in the order they become ready;
    transfers take bytes / bandwidth + latency cycles. It accounts its holds; `cycles`,
    `peak` (stash, transient and resident bytes) and `fits` (peak within the budget) come
    from it."""

    UNIT = {"c": 0, "o": 1, "i": 2}

    def __init__(self, budget):
        self.budget = budget
        self.res, self.dur, self.deps = [], [], []
        self.holds = []
        self.sizes = {}                  # write op -> bytes
        self._queued = {}

    def _op(self, res, dur, after):
        self.res.append(res)
        self.dur.append(dur)
        self.deps.append(list(after))
        return len(self.res) - 1

    def compute(self, npu, cycles, after, name=None, flops=None, recompute=False,
                nbytes=None, peak=None):
        return self._op("c", int(cycles), after)

    def _transfer(self, nbytes, bpc):
        return min(int(math.ceil(nbytes / bpc)) + self.budget.latency if bpc > 0 else NEVER,
                   NEVER)

    def write(self, npu, nbytes, after, name=None):
        w = self._op("o", self._transfer(nbytes, self.budget.out_bpc), after)
        self.sizes[w] = nbytes
        return w

    def read(self, npu, write, after, name=None, last=True):
        return self._op("i", self._transfer(self.sizes[write], self.budget.in_bpc), after)

    def join(self, ops):
        return self._op(None, 0, ops)

    def depend(self, op, on):
        self.deps[op].append(on)

    def hold(self, npu, nbytes, at, edge, what=None):
        self.holds.append([nbytes, at, edge == "finish", None, True])
        return len(self.holds) - 1

    def free(self, h, at, edge="finish"):
        self.holds[h][3] = at
        self.holds[h][4] = edge == "finish"

    def run(self):
        """Each op's start and finish cycle, from csim's scheduler: the ops as the engine's
        arrays (compute ops on the planning NPU's units, joins as zero delays)."""
        n = len(self.res)
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        network, node = _machine()
        given = np.fromiter(map(len, self.deps), np.int64, n)
        pairs = np.unique(np.repeat(np.arange(n, dtype=np.int64), given) * n +
                          np.fromiter(itertools.chain.from_iterable(self.deps), np.int64,
                                      int(given.sum())))       # (op, dependency), once
        dst, src = np.divmod(pairs, n)
        counts = np.bincount(dst, minlength=n).astype(np.int32)
        order = np.lexsort((dst, src))
        succ_ptr = np.zeros(n + 1, np.int64)
        np.add.at(succ_ptr, src + 1, 1)
        succ_ptr = np.cumsum(succ_ptr)
        is_join = np.fromiter((r is None for r in self.res), bool, n)
        kind = np.where(is_join, KINDS["delay"], KINDS["compute"]).astype(np.int8)
        unit = np.fromiter((self.UNIT.get(r, 0) for r in self.res), np.int8, n)
        ops = GraphArrays(kind=kind, node=np.where(is_join, -1, node).astype(np.int32),
                          dst=np.full(n, -1, np.int32), size=np.array(self.dur, np.int64),
                          deps=counts, succ_ptr=succ_ptr, succ=dst[order].astype(np.int32),
                          unit=unit, packet_flits=1, flit_bytes=32)
        eng = new_engine(network.arrays)
        set_graph(eng, ops, None)
        eng.run(MAX_CYCLES, stop="all")
        start, finish = (np.asarray(x, np.int64) for x in eng.op_times())
        if (finish < 0).any():
            raise RuntimeError("memory plan estimate: ops left unfinished (a cycle of "
                               "dependencies)")
        return start, finish


NEVER = 10 ** 14                      # cycles of a transfer with no bandwidth
MAX_CYCLES = 10 ** 15
_MACHINE = []


def _machine():
    """The planning machine (built once): the compiled network of one NPU and a host, and
    the NPU's index."""
    if not _MACHINE:
        cfg = from_dict({"topology": {"kind": "graph", "nodes": [
            {"name": "npu", "kind": "npu"}, {"name": "host", "kind": "host"}],
            "links": [{"a": "npu", "b": "host"}]}, "workload": {"kind": "graph"}})
        net = compile_network(cfg, build(cfg))
        _MACHINE.append((net, net.topo.node_names.index("npu")))
    return _MACHINE[0]


@dataclass
class Prediction:
    cycles: float
    peak: int                       # HBM bytes, resident included
    fits: bool


def estimate(plan: Plan, costs, budget: Budget) -> Prediction:
    """Predicted iteration time (one micro-batch on one NPU, compute and transfers only) and
    peak HBM of a plan."""
    for arg, v, want in (("plan", plan, Plan), ("budget", budget, Budget)):
        if not isinstance(v, want):
            raise TypeError(f"estimate({arg}): expected a {want.__name__} "
                            f"(pysim.workload.memory.plan), not {type(v).__name__}")
    est = Estimate(budget)
    expand(plan, costs, budget, est, chain(est, None, costs), None)
    est.serialise()
    start, finish = est.run()
    end = int(max(finish)) if len(finish) else 0
    if not est.holds:
        return Prediction(end, budget.resident, budget.resident <= budget.limit)
    nb = np.array([h[0] for h in est.holds], np.int64)
    tt = np.array([finish[h[1]] if h[2] else start[h[1]] for h in est.holds], np.int64)
    tf = np.array([end + 1 if h[3] is None else (finish[h[3]] if h[4] else start[h[3]])
                   for h in est.holds], np.int64)
    tf = np.maximum(tf, tt)
    (_, levels), = occupancy(np.zeros(len(nb), np.int64), nb, tt, tf).values()
    peak = int(levels.max()) + budget.resident
    return Prediction(end, peak, peak <= budget.limit)
