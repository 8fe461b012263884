"""The planner's performance model: a plan expanded on one NPU's compute unit and one transfer
channel each way, scheduled as csim's units serve their ops, and its peak from the holds."""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from pysim.workload.graph import occupancy
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
    """A sink that schedules a plan on three resources of one NPU -- its compute unit and
    one transfer channel each way to remote memory -- each serving its ops one at a time in
    the order they become ready, as csim's units do, and accounts its holds. Its forward and
    backward ops are made from the layer costs; transfers take bytes / bandwidth + latency.
    `cycles`, `peak` (stash, transient and resident bytes) and `fits` (peak within the
    budget) come from it."""

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
        return int(math.ceil(nbytes / bpc)) + self.budget.latency if bpc > 0 else 10 ** 18

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
        n = len(self.res)
        succ = [[] for _ in range(n)]
        indeg = [0] * n
        for i, ds in enumerate(self.deps):
            for d in set(ds):
                succ[d].append(i)
                indeg[i] += 1
        start = [0] * n
        finish = [0] * n
        events, queues, busy = [], {"c": [], "o": [], "i": []}, {"c": False, "o": False,
                                                                 "i": False}

        def ready(op, t):
            if self.res[op] is None:
                start[op] = t
                heapq.heappush(events, (t + self.dur[op], op))
            else:
                heapq.heappush(queues[self.res[op]], (t, op))

        def dispatch(t):
            for r, q in queues.items():
                if not busy[r] and q:
                    _, op = heapq.heappop(q)
                    busy[r] = True
                    start[op] = t
                    heapq.heappush(events, (t + self.dur[op], op))

        for i in range(n):
            if indeg[i] == 0:
                ready(i, 0)
        dispatch(0)
        done = 0
        while events:
            t, op = heapq.heappop(events)
            finish[op] = t
            done += 1
            if self.res[op] is not None:
                busy[self.res[op]] = False
            for s in succ[op]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    ready(s, t)
            dispatch(t)
        if done < n:
            raise RuntimeError("memory plan estimate: a cycle of dependencies")
        return start, finish


@dataclass
class Prediction:
    cycles: float
    peak: int                       # HBM bytes, resident included
    fits: bool


def estimate(plan: Plan, costs, budget: Budget) -> Prediction:
    """Predicted iteration time (one micro-batch on one NPU, compute and transfers only) and
    peak HBM of a plan."""
    est = Estimate(budget)
    expand(plan, costs, budget, est, chain(est, None, costs), None)
    est.serialise()
    start, finish = est.run()
    end = max(finish) if finish else 0
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
