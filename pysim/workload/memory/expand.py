"""A plan's ops, dependencies and holds for one micro-batch on one NPU, on a sink: the iteration's
op graph (GraphSink) or the planner's estimate (Estimate): both see the same expansion."""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from pysim.errors import ConfigError
from pysim.schema import MAX_INT
from pysim.workload.memory.plan import Budget, Plan
from pysim.workload.memory.registry import KEEP, RECOMPUTE


def _program_order(costs):
    """One micro-batch on one NPU: forward ops in layer order, then each layer's backward
    ops from the last layer down."""
    order = [("F", l) for l in range(len(costs))]
    for l in range(len(costs) - 1, -1, -1):
        order += [("B", l, j) for j in range(len(costs[l].bwd_cycles))]
    return order


class Positions:
    """The place of each op in a program order (ascending op ids), found by bisection (no
    table of them made): positions[op], KeyError for an op not in it."""
    __slots__ = ("order",)

    def __init__(self, order):
        self.order = order

    def __getitem__(self, op):
        k = bisect.bisect_left(self.order, op)
        if k == len(self.order) or self.order[k] != op:
            raise KeyError(op)
        return k


@dataclass
class Skeleton:
    """One micro-batch's ops on one NPU, as its training iteration built them: F[l] the
    forward op of layer l, B[l] its backward ops in program order, and the NPU's program
    order (every compute op of the iteration on that NPU, all micro-batches) to find the op
    before another."""
    F: list
    B: list
    order: list
    pos: dict = None

    def __post_init__(self):
        if self.pos is None:
            self.pos = {op: i for i, op in enumerate(self.order)}

    def before(self, op, k=1):
        """The op k places before op in program order (the first op at most)."""
        return self.order[max(0, self.pos[op] - k)]


def _backward_of(B, m):
    """Layer m's backward ops, or those of the nearest layer below it that has some."""
    while m > 0 and not B[m]:
        m -= 1
    return B[m]


def expand(plan: Plan, costs, budget: Budget, sink, sk: Skeleton, npu, tag=""):
    """Add a plan's ops, dependencies and holds for one micro-batch on one NPU to `sink`.
    A layer's action applies to every tensor it owns (`LayerCost.kept`): a tensor is held
    from its owner's forward op, may leave once the last forward op reading it is done, must
    be back before the backward ops of the first layer that needs it, and is freed when its
    owner's backward ops are done."""
    n = len(costs)
    F, B = sk.F, sk.B
    for l, c in enumerate(costs):
        if c.out_bytes:
            sink.free(sink.hold(npu, c.out_bytes, F[l], "start", f"{tag}{c.name} output"),
                      F[l], "finish")
        if c.grad_bytes and B[l]:
            sink.free(sink.hold(npu, c.grad_bytes, B[l][0], "start",
                                f"{tag}{c.name} input gradient"), B[l][-1], "finish")
        for op in ([F[l]] + list(B[l])) if c.workspace else ():
            sink.free(sink.hold(npu, c.workspace, op, "start", f"{tag}{c.name} workspace"),
                      op, "finish")
    rec_prev = {}                     # a run of recomputed layers: the previous one's op
    for l in range(n):
        c = costs[l]
        act = plan.action[l]
        kept = [t for t in c.kept(l) if t.nbytes]
        if not kept or not B[l]:
            continue
        last = B[l][-1]
        if act == RECOMPUTE:
            u = max(max(t.last_read for t in kept), l)
            drop = F[u + 1] if u + 1 < n else F[u]
            hs = [sink.hold(npu, t.nbytes, F[l], "start", f"{tag}{t.name} kept by {c.name}")
                  for t in kept]
            for h in hs:
                sink.free(h, drop, "finish")
            if l - 1 in rec_prev and plan.action[l - 1] == RECOMPUTE:
                after = [rec_prev[l - 1]]
            else:                     # the run's first: before the run's first consumer
                m = l
                while m + 1 < n and plan.action[m + 1] == RECOMPUTE and B[m + 1]:
                    m += 1
                m = max([m] + [t.needed for j in range(l, m + 1)
                               for t in costs[j].kept(j)])
                after = [sk.before(_backward_of(B, min(m, n - 1))[0])]
            R = sink.compute(npu, c.fwd_cycles, after, f"{tag}recompute {c.name}",
                             flops=c.fwd_flops, recompute=True, nbytes=c.fwd_bytes,
                             peak=c.fwd_peak)
            rec_prev[l] = R
            for t in kept:
                h = sink.hold(npu, t.nbytes, R, "start",
                              f"{tag}{t.name} kept by {c.name} (recomputed)")
                sink.free(h, last, "finish")
                for j in set(t.keepers or (l,)) | {t.needed}:
                    for b in _backward_of(B, j):
                        sink.depend(b, R)
            continue
        for t in kept:
            _expand_tensor(plan, costs, budget, sink, sk, npu, tag, l, t)


def _expand_tensor(plan, costs, budget, sink, sk, npu, tag, l, t):
    """One kept tensor of layer l, kept (perhaps compressed) or swapped."""
    n = len(costs)
    F, B = sk.F, sk.B
    c = costs[l]
    S, act, r = t.nbytes, plan.action[l], plan.ratio[l]
    u = max(t.last_read, l)
    k = max(t.needed, l)
    last = B[l][-1]
    consumers = sorted({b for j in set(t.keepers or (l,)) | {k} for b in _backward_of(B, j)},
                       key=lambda op: sk.pos[op])
    first = consumers[0]
    nxt = F[u + 1] if u + 1 < n else None
    tn = c.name if t.name == "stash" else t.name
    what = f"{tag}{tn} kept by {c.name}" if t.name != "stash" else f"{tag}{c.name} stash"
    Sc = max(1, int(math.ceil(S / r))) if r else S
    ready = F[u]                         # the op after which the tensor may leave
    h = sink.hold(npu, S, F[l], "start", what)
    if r:
        C = _codec(sink, npu, S, Sc, budget.compress_bpc, budget, [F[u]],
                   f"{tag}compress {tn}", COMPRESS)
        if nxt is not None:
            sink.depend(nxt, C)        # the compressor runs right after its last reader
        sink.free(h, C, "finish")
        h = sink.hold(npu, Sc, C, "start", what + " (compressed)")
        ready = C
    if act == KEEP:
        if r:
            D = _codec(sink, npu, S, Sc, budget.decompress_bpc, budget,
                       [sk.before(first), ready], f"{tag}decompress {tn}", DECOMPRESS)
            sink.free(h, D, "finish")
            full = sink.hold(npu, S, D, "start", what + " (decompressed)")
            sink.depend(first, D)
            sink.free(full, last, "finish")
        else:
            sink.free(h, last, "finish")
        return
    # swap: out once its last forward reader is done, back before its first consumer
    W = sink.write(npu, Sc, [ready], f"{tag}swap-out {tn}")
    sink.queue(npu, "out", (sk.pos[F[u]], 0), W)
    if plan.sync:
        sink.free(h, W, "finish")
        waiter = u + (2 if plan.sync == 1 else 1)
        if waiter < n:
            sink.depend(F[waiter], W)
    else:
        J = sink.join([W] + ([nxt] if nxt is not None else []))
        sink.free(h, J, "finish")
    if plan.ahead_unit == "layers":        # the layer `ahead` after its first consumer
        trig = sk.before(_backward_of(B, min(k + plan.ahead, n - 1))[0])
        groups = [consumers]
    else:
        trig = None
        groups = _group(consumers, sk, plan.groupby)
    for gi, grp in enumerate(groups):
        tr = trig if trig is not None else sk.before(grp[0], plan.ahead + 1)
        if sk.pos[tr] < sk.pos[F[u]]:
            tr = F[u]
        label = f"{tag}swap-in {tn}" + (f" ({gi + 1})" if len(groups) > 1 else "")
        R = sink.read(npu, W, [tr, W], label, last=gi == len(groups) - 1)
        sink.queue(npu, "in", (sk.pos[grp[0]], sk.pos[tr]), R)
        hin = sink.hold(npu, Sc, R, "start", what + " (swapped in)")
        dep = R
        if r:
            D = _codec(sink, npu, S, Sc, budget.decompress_bpc, budget, [R],
                       f"{tag}decompress {tn}", DECOMPRESS)
            sink.free(hin, D, "finish")
            hin = sink.hold(npu, S, D, "start", what + " (decompressed)")
            dep = D
        for b in grp:
            sink.depend(b, dep)
        sink.free(hin, grp[-1] if gi < len(groups) - 1 else last, "finish")


class _Queues:
    """An NPU's transfers each way go one after another, in the order the iteration needs
    them (as a GPU's copy engine runs one stream's copies): writes by their stash's forward
    op, reads by their first consumer. `queue` records a transfer, `serialise` chains them."""

    def queue(self, npu, way, key, op):
        self._queued.setdefault((npu, way), []).append((key, op))

    def serialise(self):
        for ops in self._queued.values():
            ops.sort()
            for (_, a), (_, b) in zip(ops, ops[1:]):
                self.depend(b, a)
        self._queued = {}


def _group(ops, sk, groupby):
    """Consumers in program order, grouped when within groupby ops of the previous."""
    groups = [[ops[0]]]
    for op in ops[1:]:
        if sk.pos[op] - sk.pos[groups[-1][-1]] <= groupby:
            groups[-1].append(op)
        else:
            groups.append([op])
    return groups


def _codec(sink, npu, S, Sc, bpc, budget, after, name, key):
    """A compressor or decompressor (COMET) as a roofline op of the NPU: it reads the full
    tensor and writes the compressed one (or the reverse), S + Sc bytes of HBM, and works
    through S bytes at its throughput (bpc bytes per cycle, counted as its 'FLOPs')."""
    rate = bpc * budget.clock_ghz * 1e9
    fast = bpc == math.inf
    return sink.compute(npu, _cycles(S, bpc, key), after, name, flops=0.0 if fast else float(S),
                        nbytes=S + Sc, peak=None if fast else rate)


COMPRESS, DECOMPRESS = "workload.memory.compress_gbps", "workload.memory.decompress_gbps"


def _cycles(nbytes, bpc, key):
    """Cycles of a codec working through nbytes at bpc bytes per cycle, refused past MAX_INT
    (as pysim.workload.graph._ceil, but naming the key that sets the rate)."""
    if bpc == math.inf or not nbytes:
        return 0
    c = nbytes / bpc - 1e-9
    if not c <= MAX_INT:                  # (a rate near 0: c may be infinite)
        raise ConfigError(f"{key}: {nbytes:,} bytes at {bpc:.4g} bytes per cycle take "
                          f"{c:.4g} cycles, more than the {MAX_INT:,} an op may take "
                          f"(raise {key})")
    return int(math.ceil(c))
