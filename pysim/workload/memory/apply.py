"""Deciding each NPU's plan and adding its ops and holds to an iteration's op graph."""
from __future__ import annotations

import math  # noqa: F401
from dataclasses import dataclass

import numpy as np

from pysim.errors import ConfigError
from pysim.workload.holds import capacities
from pysim.workload.memory import policies  # noqa: F401  (registers them)
from pysim.workload.memory.expand import _Queues, expand
from pysim.workload.memory.placement import placement, shared, split
from pysim.workload.memory.plan import Budget
from pysim.workload.memory.registry import (POLICIES, check_fields, check_ratio_names,
                                             params_from, parse_policy)


def decide(cfg_or_params, costs, budget):
    """The plan of the configured policy (a Config or a dict of workload.memory fields) for
    one NPU's layers."""
    if not isinstance(budget, Budget):
        raise TypeError(f"decide(budget): expected a Budget (pysim.workload.memory.plan), not "
                        f"{type(budget).__name__}")
    if not isinstance(cfg_or_params, dict) and not hasattr(cfg_or_params, "workload"):
        raise TypeError(f"decide(cfg_or_params): expected a Config or a dict of "
                        f"workload.memory fields, not {type(cfg_or_params).__name__}")
    params = cfg_or_params if isinstance(cfg_or_params, dict) else params_from(cfg_or_params)
    name, compress = parse_policy(params.get("policy", "none"))
    if name != "none" or compress:
        if name in ("offload", "lms", "karma") and not (budget.out_bpc > 0):
            raise ConfigError(f"workload.memory.policy = {params.get('policy')!r}: no remote "
                              f"memory reachable (no memory node or host)")
    return POLICIES[name].decide(costs, budget, params, compress)


class GraphSink(_Queues):
    """The plan's ops in an iteration's op graph: remote writes and reads become mem_write /
    mem_read ops to every target of the NPU's placement (joined by a zero delay), freeing the
    remote space when read back; recomputation becomes a roofline op like the forward op it
    repeats."""

    def __init__(self, g, placements):
        self.g = g
        self.placements = placements     # npu -> Placement (None: no remote memory)
        self.writes = {}                 # join op -> [(target, bytes, mem_write op)]
        self.recomputed_flops = {}
        self._queued = {}

    def compute(self, npu, cycles, after, name=None, flops=None, recompute=False,
                nbytes=None, peak=None):
        if recompute:
            self.recomputed_flops[npu] = self.recomputed_flops.get(npu, 0.0) + (flops or 0)
        if flops or nbytes:                   # a roofline op, like the one it repeats
            return self.g.compute(npu, after=after, flops=flops or 0, bytes=nbytes or 0,
                                  peak_flops=peak, name=name)
        return self.g.compute(npu, int(cycles), after, name=name)

    def write(self, npu, nbytes, after, name=None):
        p = self.placements[npu]
        parts = [(t, b) for (t, _), b in zip(p.targets, split(nbytes, p.targets)) if b]
        ws = [(t, b, self.g.mem_write(npu, t, b, after, name=f"{name} to {t}" if name
                                      else None)) for t, b in parts]
        j = ws[0][2] if len(ws) == 1 else self.g.delay(0, [w for _, _, w in ws])
        self.writes[j] = ws
        return j

    def read(self, npu, write, after, name=None, last=True):
        rs = []
        for t, b, w in self.writes[write]:
            r = self.g.mem_read(npu, t, b, after, name=f"{name} from {t}" if name else None)
            if last:
                self.g.free(self.g.space(w), r)
            rs.append(r)
        return rs[0] if len(rs) == 1 else self.g.delay(0, rs)

    def join(self, ops):
        return self.g.delay(0, ops)

    def depend(self, op, on):
        self.g.depend(op, on)

    def hold(self, npu, nbytes, at, edge, what=None):
        return self.g.hold(npu, nbytes, at, edge, what)

    def free(self, h, at, edge="finish"):
        self.g.free(h, at, edge)


REPEAT = True        # False: every micro-batch's holds added one by one (the tests' reference)


def _slots(sk):
    """A skeleton's ops in a fixed order: its forward ops, then its backward ops."""
    return list(sk.F) + [op for ops in sk.B for op in ops]


class _Recorder:
    """A sink passing one micro-batch's expansion through to the graph's, recording its
    holds; anything else the plan adds (ops, dependencies, transfers) marks it as not
    repeatable as holds alone."""

    def __init__(self, sink):
        self.sink = sink
        self.holds = []          # [npu, bytes, at, at finish?, end (-1: open), end finish?, what]
        self.other = False

    def hold(self, npu, nbytes, at, edge, what=None):
        self.holds.append([npu, nbytes, at, edge == "finish", -1, True, what])
        return self.sink.hold(npu, nbytes, at, edge, what), len(self.holds) - 1

    def free(self, h, at, edge="finish"):
        self.sink.free(h[0], at, edge)
        self.holds[h[1]][4:6] = [at, edge == "finish"]

    def __getattr__(self, name):         # compute, write, read, join, depend, queue
        self.other = True
        return getattr(self.sink, name)

    def repeat(self, g, npu, skeletons, tags):
        """The holds recorded for skeletons[0] added for every later skeleton as columns,
        their ops those of the same places in it; False (nothing added) where the
        expansion did more than hold, or the skeletons or labels differ in shape."""
        if self.other or not self.holds:
            return False
        s0 = _slots(skeletons[0])
        where = {op: k for k, op in enumerate(s0)}
        if len(where) != len(s0) or any(h[0] != npu for h in self.holds):
            return False
        fast = getattr(skeletons, "slots", None)     # (training_work's: all at once)
        if fast is None:
            sk0 = skeletons[0]
            shape = (len(sk0.F), [len(b) for b in sk0.B])
            if any((len(sk.F), [len(b) for b in sk.B]) != shape for sk in skeletons[1:]):
                return False
        tag = tags[0]
        if any(not (isinstance(h[6], str) and h[6].startswith(tag)) for h in self.holds):
            return False
        at = [where.get(h[2]) for h in self.holds]
        end = [where.get(h[4], -1) if h[4] != -1 else -2 for h in self.holds]
        if any(x is None for x in at) or any(x == -1 for x in end):
            return False
        slots = fast[1:] if fast is not None else \
            np.array([_slots(sk) for sk in skeletons[1:]], np.int64)
        k = len(skeletons) - 1
        at = slots[:, at].reshape(-1)
        end = np.array(end, np.int64)
        freed = end >= 0
        e = np.full((k, len(end)), -1, np.int64)
        e[:, freed] = slots[:, end[freed]]
        cols = np.array([[h[1], h[3], h[5]] for h in self.holds], np.int64)
        suffix = [h[6][len(tag):] for h in self.holds]
        g.add_holds(npu, np.tile(cols[:, 0], k), at, np.tile(cols[:, 1], k), e.reshape(-1),
                    np.tile(cols[:, 2], k), [t + x for t in tags[1:] for x in suffix])
        return True


@dataclass
class NpuWork:
    """What a training iteration tells the memory plan about one NPU: its layers' costs (one
    micro-batch), one Skeleton per micro-batch, the bytes resident all run (weights,
    gradients, optimizer state) and its first and last ops."""
    costs: list
    skeletons: list
    resident: int
    first_op: int
    last_op: int
    labels: list = None              # per skeleton, for op names ("it0 mb1")
    layer_ids: list = None           # the model's indices of the layers in costs
    inflight: int = 1                # micro-batches whose stashes are held at once


def budget_for(cfg, topo, npu, resident, placement_=None, inflight=1) -> Budget:
    """One NPU's Budget from the config: its HBM, the policies' budget fraction, its
    bandwidth and latency to its placement's targets, compressor throughputs and ratios."""
    m = cfg.workload.memory
    i = topo.node_names.index(npu)
    clock = cfg.network.clock_ghz
    p = placement_
    return Budget(capacity=capacities(topo, cfg)[i], resident=int(resident),
                  fraction=m.budget_fraction,
                  out_bpc=p.out_bpc if p else 0.0, in_bpc=p.in_bpc if p else 0.0,
                  latency=p.latency if p else 0,
                  compress_bpc=m.compress_gbps / clock, decompress_bpc=m.decompress_gbps / clock,
                  ratio=dict(m.ratio or {}), inflight=inflight, clock_ghz=clock)


@dataclass
class Applied:
    """The plans applied to an iteration: per NPU its Plan, Budget, Placement and the FLOPs
    recomputed."""
    policy: str
    plans: dict
    budgets: dict
    placements: dict
    recomputed_flops: dict

    def report(self):
        """What the result's `memory` says of the plans, per NPU."""
        out = {}
        for npu, p in self.plans.items():
            pl = self.placements.get(npu)
            out[npu] = dict(recomputed_flops=float(self.recomputed_flops.get(npu, 0.0)),
                            layers=p.counts(), chosen=p.chosen,
                            targets=[t for t, _ in pl.targets] if pl else [])
        return out


def apply(cfg, topo, g, work: dict) -> Applied:
    """Decide each NPU's plan (workload.memory) and add its ops and holds to the iteration's
    op graph g. work: {npu name: NpuWork}."""
    check_fields(cfg)
    name, compress = parse_policy(cfg.workload.memory.policy)
    if compress:
        check_ratio_names(cfg.workload.memory.ratio, (c.name for w in work.values()
                                                      for c in w.costs))
    needs_remote = name in ("offload", "lms", "karma")
    placements = shared(topo, {npu: placement(topo, cfg, npu) if needs_remote else None
                               for npu in work})
    sink = GraphSink(g, placements)
    plans, budgets, seen = {}, {}, {}
    ws = int(round(cfg.workload.memory.workspace_mb * 2**20))
    for npu, w in work.items():
        for c in w.costs:                     # convolution algorithms' scratch
            if c.kind == "conv":
                c.workspace = ws
        b = budget_for(cfg, topo, npu, w.resident, placements[npu], w.inflight)
        if w.resident > b.capacity:
            raise ConfigError(
                f"workload.memory.policy = {cfg.workload.memory.policy!r}: the training state "
                f"{npu} keeps in HBM all iteration (weights, gradients, optimizer state), "
                f"{w.resident:,} bytes, is past its capacity of {b.capacity:,} bytes, "
                f"which the policy's plans of the activations cannot help; spread the model "
                f"over more NPUs (workload.parallel tp, pp or zero)"
                + (", or keep the optimizer's state on the host (karma with "
                   "workload.memory.host_update = true)" if "host" in topo.node_kinds and
                   not (name == "karma" and cfg.workload.memory.host_update) else ""))
        key = (repr(w.costs), repr(b))        # replicas with the same layers and budget
        if key not in seen:
            seen[key] = decide(cfg, w.costs, b)
        plan = seen[key]
        plans[npu], budgets[npu] = plan, b
        if w.resident:
            g.free(g.hold(npu, w.resident, w.first_op, "start", f"{npu} resident"),
                   w.last_op, "finish")
        tags = [f"{npu} {label} ".replace("  ", " ") for label in
                (w.labels or [f"mb{k}" if len(w.skeletons) > 1 else ""
                              for k in range(len(w.skeletons))])]
        first = 0
        if len(w.skeletons) > 2 and REPEAT:
            rec = _Recorder(sink)
            expand(plan, w.costs, b, rec, w.skeletons[0], npu, tags[0])
            first = 1
            if rec.repeat(g, npu, w.skeletons, tags):
                continue
        for sk, tag in zip(w.skeletons[first:], tags[first:]):
            expand(plan, w.costs, b, sink, sk, npu, tag)
    sink.serialise()
    return Applied(cfg.workload.memory.policy, plans, budgets, placements,
                   sink.recomputed_flops)
