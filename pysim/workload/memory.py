"""Memory plans for training iterations: what each NPU keeps in its HBM, offloads to remote
memory, recomputes or compresses, and the ops and memory holds that follow.

A policy (`workload.memory.policy`, registered below) looks at one NPU's layers -- the bytes
each layer's forward pass keeps for its backward pass (its stash), the cycles of its forward
and backward ops -- and at the NPU's memory budget and its bandwidth to remote memory, and
returns a `Plan`: per layer `keep`, `swap` (out to remote memory after the forward op, back
before the backward ops) or `recompute` (dropped after the forward pass, its forward op run
again before its backward ops), with a compression ratio per layer when `compression` is
joined to the policy (COMET). `expand` turns a plan into ops, dependencies and holds on a
*sink*: the iteration's op graph (`GraphSink`, the real run) or `Estimate`, a small
two-resource scheduler that predicts a plan's time and peak memory in a few milliseconds,
which the planning policies (lms's auto-tuning, karma) use to choose. Both see the same
expansion, so what a policy predicts is what the graph runs.

Lifetimes on an NPU (per micro-batch; bytes of the NPU's share of the layer):
- resident: weights, gradients, optimizer state -- from the NPU's first op to its last;
- a layer's stash: from its forward op's start to its last backward op's finish (keep);
  swapped: until its swap-out is done (vDNN: the layer two after waits for it; LMS: freed
  when the swap-out and the next layer's forward are done), and again from its swap-in's
  start; recomputed: until the next layer's forward is done, and again from its
  recomputation's start; compressed: the full stash until its compressor op is done, the
  compressed bytes until its decompressor op, the full stash again from then;
- transients: a forward op's output while it runs, a backward op's input gradient while the
  layer's backward ops run.
On a memory node or host, an offloaded stash takes its bytes from its write's start to its
read's finish. Offloaded pages go to the NPU's nearest memory nodes in proportion to the
bandwidth of its links to them (MC-DLA's bandwidth-aware placement), or to its nearest
host's DRAM.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import NONNEG, Key, declare, raising
from pysim.schema import suggest as _suggest
from pysim.models import optimizer_bytes, precision_bytes
from pysim.models.precision import OPTIMIZER_FLOPS
from pysim.network import nic_bandwidths
from pysim.workload.graph import (capacities, compute_params, memory_params, occupancy,
                                  quiet_gc)

KEEP, SWAP, RECOMPUTE = "keep", "swap", "recompute"

LAYER_KINDS = ("conv", "linear", "matmul", "lstm", "embedding", "attention", "norm", "pool",
               "eltwise", "softmax", "interaction", "loss", "given")
# COMET: feature maps kept for the backward pass, compressed by error-bounded SZ; kinds not
# in the table are not compressed (an assumed ratio: configure workload.memory.ratio)
DEFAULT_RATIO = {"conv": 15.0, "norm": 15.0, "eltwise": 15.0, "pool": 15.0}

# ---------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Policy:
    name: str
    decide: object                  # decide(costs, budget, params) -> Plan
    fields: tuple                   # workload.memory.* keys it reads
    doc: str


POLICIES: dict[str, Policy] = {}
COMMON_FIELDS = ("policy", "target", "budget_fraction")
COMPRESSION_FIELDS = ("ratio", "compress_gbps", "decompress_gbps")


def register(name, fields=()):
    """Register `decide(costs, budget, params) -> Plan` as memory policy `name`, reading the
    workload.memory fields listed."""
    def deco(fn):
        if name in POLICIES:
            raise ValueError(f"memory policy {name!r} is registered twice")
        POLICIES[name] = Policy(name, fn, tuple(fields),
                                (fn.__doc__ or "").strip().split("\n")[0])
        return fn
    return deco


def policy_names():
    return sorted(POLICIES) + ["compression"]


def parse_policy(text):
    """'offload', 'compression', 'lms+compression' -> (policy name, compress?); an unknown
    name is a ConfigError listing the known ones."""
    if not isinstance(text, str):
        raise ConfigError(f"workload.memory.policy = {text!r}: expected a string")
    parts = [p.strip() for p in text.split("+")]
    compress = "compression" in parts
    rest = [p for p in parts if p != "compression"]
    for p in rest:
        if p not in POLICIES:
            raise ConfigError(f"workload.memory.policy = {text!r}: unknown policy {p!r}"
                              f"{_suggest(p, policy_names())}; known: "
                              f"{', '.join(policy_names())} (compression joins another with "
                              f"'+', e.g. 'offload+compression')")
    if len(rest) > 1 or parts.count("compression") > 1:
        raise ConfigError(f"workload.memory.policy = {text!r}: one policy, optionally joined "
                          f"with compression ('offload+compression')")
    return (rest[0] if rest else "none"), compress


def check_ratios(table):
    """workload.memory.ratio: {layer kind: ratio >= 1}."""
    for k, v in table.items():
        if k not in LAYER_KINDS:
            raise ConfigError(f"workload.memory.ratio.{k}: unknown layer kind"
                              f"{_suggest(k, LAYER_KINDS)}; expected one of "
                              f"{', '.join(LAYER_KINDS)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v < math.inf:
            raise ConfigError(f"workload.memory.ratio.{k} = {v!r}: expected a number >= 1")


def check_fields(cfg):
    """The workload.memory keys given must be read by the chosen policy (a key of another
    policy is an error naming which policies read it)."""
    name, compress = parse_policy(cfg.workload.memory.policy)
    reads = set(COMMON_FIELDS) | set(POLICIES[name].fields)
    if compress:
        reads |= set(COMPRESSION_FIELDS)
    for path in sorted(cfg.explicit):
        if path.startswith("workload.memory."):
            f = path.split(".", 2)[2]
            if f not in reads:
                users = [p.name for p in POLICIES.values() if f in p.fields]
                if f in COMPRESSION_FIELDS:
                    users.append("compression")
                raise ConfigError(f"{path} is not read by workload.memory.policy = "
                                  f"{cfg.workload.memory.policy!r} (it is read by "
                                  f"{', '.join(users)})")


def params_from(cfg):
    """The workload.memory table as a dict of its fields."""
    m = cfg.workload.memory
    return {f: getattr(m, f) for f in m._values}


# ---------------------------------------------------------------------- inputs, plans


@dataclass
class LayerCost:
    """One layer on one NPU for one micro-batch."""
    name: str
    kind: str
    stash_bytes: int                 # kept from the forward pass for the backward pass
    fwd_cycles: int
    bwd_cycles: tuple                # each backward op of the layer, in program order
    fwd_flops: float = 0.0           # the forward op's roofline, repeated by a recompute
    fwd_bytes: int = 0
    fwd_peak: float = None           # its FLOP/s (None: the NPU's default)
    out_bytes: int = 0               # the forward op's output (transient)
    grad_bytes: int = 0              # the input gradient its backward ops produce (transient)


@dataclass
class Budget:
    """One NPU's memory and its way to remote memory."""
    capacity: int                    # HBM bytes
    resident: int = 0                # weights, gradients, optimizer state
    fraction: float = 0.9            # of the capacity a planning policy fills
    out_bpc: float = 0.0             # bytes per cycle to remote memory (0: none reachable)
    in_bpc: float = 0.0              # and back
    latency: int = 0                 # cycles added to every transfer
    compress_bpc: float = math.inf
    decompress_bpc: float = math.inf
    ratio: dict = field(default_factory=dict)   # compression ratio per layer kind
    inflight: int = 1                # micro-batches whose stashes are held at once (a
                                     # pipeline stage: all of them under GPipe)

    @property
    def limit(self):
        """Bytes of HBM a planning policy may fill with one micro-batch (its share when
        several are in flight: what the resident state leaves, divided among them)."""
        total = int(self.capacity * self.fraction)
        return self.resident + (total - self.resident) // max(1, self.inflight)

    def last_keeps(self, n):
        """The index of the layer whose backward op follows its forward op at once (its stash
        is kept), or None when micro-batches interleave."""
        return n - 1 if self.inflight <= 1 else None


@dataclass
class Plan:
    policy: str
    action: list                     # per layer: keep, swap, recompute
    ratio: list                      # per layer: compression ratio of its stash (None: not
                                     # compressed)
    sync: int = 0                    # swap-out of layer l waited for by: 0 nothing (its HBM
                                     # freed when it and layer l+1's forward are done), 1 the
                                     # forward of layer l+2 (vDNN), 2 that of layer l+1
    ahead: int = 1                   # prefetch distance
    ahead_unit: str = "layers"       # 'layers': backward of the layer `ahead` after starts;
                                     # 'ops': `ahead` ops before the first consumer
    groupby: int = 1                 # consumers within this many ops share one swap-in
    chosen: dict = field(default_factory=dict)   # parameters the policy chose

    def counts(self):
        return {a: self.action.count(a) for a in (KEEP, SWAP, RECOMPUTE)}


def _plan(policy, costs, budget, compress, action=None, **kw):
    n = len(costs)
    action = list(action) if action is not None else [KEEP] * n
    ratio = [None] * n
    if compress:
        table = {**DEFAULT_RATIO, **(budget.ratio or {})}
        ratio = [float(table[c.kind]) if a != RECOMPUTE and c.kind in table else None
                 for c, a in zip(costs, action)]
    return Plan(policy, action, ratio, **kw)


# ---------------------------------------------------------------------- policies


@register("none")
def decide_none(costs, budget, params, compress=False):
    """Everything stays in HBM."""
    return _plan("none", costs, budget, compress)


@register("offload", fields=("prefetch_layers", "layers"))
def decide_offload(costs, budget, params, compress=False):
    """vDNN (Rhu et al., MICRO 2016), the runtime MC-DLA builds on: every stash (layers =
    'all', or of convolutions only, 'conv') goes out to remote memory after its forward op,
    the layer two after waiting for it, and comes back when the backward pass of the layer
    prefetch_layers after it starts. The last layer, whose backward follows at once, keeps
    its stash."""
    conv_only = params.get("layers", "all") == "conv"
    action = [SWAP if (c.stash_bytes and c.bwd_cycles and (not conv_only or c.kind == "conv")
                       and i != budget.last_keeps(len(costs))) else KEEP
              for i, c in enumerate(costs)]
    return _plan("offload", costs, budget, compress, action, sync=1,
                 ahead=params.get("prefetch_layers", 1), ahead_unit="layers")


def _lms_plan(costs, budget, compress, threshold, ahead, groupby, min_bytes, sync_mode=0):
    order = _program_order(costs)
    pos = {op: i for i, op in enumerate(order)}
    action = []
    for l, c in enumerate(costs):
        if ("B", l, 0) not in pos:            # no backward op: nothing to swap back for
            action.append(KEEP)
            continue
        dist = pos[("B", l, 0)] - pos[("F", l)]
        action.append(SWAP if c.stash_bytes >= max(min_bytes, 1) and dist > threshold
                      else KEEP)
    return _plan("lms", costs, budget, compress, action, sync=2 if sync_mode & 1 else 0,
                 ahead=0 if sync_mode & 2 else ahead, ahead_unit="ops", groupby=groupby,
                 chosen=dict(swapout_threshold=threshold, swapin_ahead=ahead,
                             swapin_groupby=groupby, sync_mode=sync_mode))


@register("lms", fields=("swapout_threshold", "swapin_ahead", "swapin_groupby", "min_bytes",
                         "sync_mode"))
def decide_lms(costs, budget, params, compress=False):
    """IBM Large Model Support (TFLMS v2, with PyTorch LMS's size threshold): a stash whose
    consumer is more than swapout_threshold ops after its producer, and of at least
    min_bytes, is swapped out to remote memory as soon as it is produced and swapped in
    swapin_ahead ops before its first consumer; consumers within swapin_groupby ops share one
    swap-in. sync_mode as TFLMS's: 0 asynchronous copies (a stash's HBM is freed once its
    swap-out is done), 1 the next op waits for each swap-out, 2 each swap-in waits until its
    consumer is next (no prefetch), 3 both. A parameter left at -1 is chosen as TFLMS's
    auto-tuning does, with this model's predicted peak in place of TFLMS's simulator: no
    swapping if everything fits; else the largest threshold that fits (raising sync_mode
    from 0 until one does), then the largest ahead, then the largest groupby that fit."""
    th = params.get("swapout_threshold", -1)
    ah = params.get("swapin_ahead", -1)
    gr = params.get("swapin_groupby", -1)
    sm = params.get("sync_mode", -1)
    mb = params.get("min_bytes", 1 << 20)
    n = len(_program_order(costs))
    auto = [k for k in ("swapout_threshold", "swapin_ahead", "swapin_groupby", "sync_mode")
            if params.get(k, -1) < 0]

    def fits(t, a, g, s):
        return estimate(_lms_plan(costs, budget, compress, t, a, g, mb, s), costs,
                        budget).fits

    s0 = 0 if sm < 0 else sm
    if th < 0 and ah < 0 and gr < 0 and fits(n, 1, 0, s0):
        th = n                                # LMS is not needed: nothing is swapped
    if th < 0:
        a0, g0 = (1 if ah < 0 else ah), (0 if gr < 0 else gr)
        while True:
            found = _largest(lambda t: fits(t, a0, g0, s0), 1, n)
            if found is not None or sm >= 0 or s0 == 3:
                break
            s0 += 1                           # TFLMS: synchronise copies, then try again
        th = found if found is not None else 0   # swap all it may; the run will say
    sm = s0
    if ah < 0:
        ah = _largest(lambda a: fits(th, a, 0 if gr < 0 else gr, sm), 1, n) or 1
    if gr < 0:
        gr = n if fits(th, ah, n, sm) else (_largest(lambda g: fits(th, ah, g, sm), 0, n) or 0)
    plan = _lms_plan(costs, budget, compress, th, ah, gr, mb, sm)
    plan.chosen["auto"] = auto
    return plan


def _largest(ok, lo, hi):
    """The largest x in [lo, hi] with ok(x), by binary search (ok assumed monotone, true
    below some point); None if not even ok(lo)."""
    if not ok(lo):
        return None
    while lo < hi:
        m = (lo + hi + 1) // 2
        if ok(m):
            lo = m
        else:
            hi = m - 1
    return lo


def _segments(n, k):
    """Split n layers into k contiguous segments of near-equal length: their first
    indices."""
    k = max(1, min(k, n))
    return [int(x[0]) for x in np.array_split(np.arange(n), k)]


@register("recompute", fields=("segments",))
def decide_recompute(costs, budget, params, compress=False):
    """Gradient checkpointing (Chen et al., arXiv 1604.06174, 2016): the layers are cut into
    `segments` (default round(sqrt(layers))) contiguous segments; the first layer of each
    keeps its stash, the others' are dropped after the forward pass and recomputed, the
    whole segment at once, just before the segment's backward pass."""
    n = len(costs)
    k = params.get("segments", 0) or max(1, round(math.sqrt(n)))
    firsts = set(_segments(n, k))
    action = [KEEP if (l in firsts or not c.stash_bytes or not c.bwd_cycles) else RECOMPUTE
              for l, c in enumerate(costs)]
    return _plan("recompute", costs, budget, compress, action,
                 chosen=dict(segments=min(k, n)))


@register("karma", fields=("min_bytes", "host_update"))
def decide_karma(costs, budget, params, compress=False):
    """KARMA (Wahib et al., SC20): per layer, swap its stash when the transfer fits within
    the compute it overlaps (the next layer's forward going out, its backward coming back),
    else recompute it when its forward costs less than the transfer's exposed part, else
    swap; stashes under min_bytes stay. Recomputed runs are cut into blocks of at most
    `block` layers by a swapped checkpoint, stashes are prefetched a block ahead, and the
    stashes of the last layers are kept while they fit. Its performance model (`estimate`)
    picks the block, whether a swap-out holds up the forward pass, and the fastest of this
    plan, swapping everything and recomputing everything, among those that fit the
    budget."""
    n = len(costs)
    mb = params.get("min_bytes", 1 << 20)
    none = _plan("karma", costs, budget, compress)
    e = estimate(none, costs, budget)
    if e.fits:
        none.chosen = dict(choice="everything kept", predicted_cycles=e.cycles)
        return none
    bw = min(budget.out_bpc, budget.in_bpc)
    rule = []
    for l, c in enumerate(costs):
        if c.stash_bytes < max(mb, 1) or l == budget.last_keeps(n) or not c.bwd_cycles:
            rule.append(KEEP)
            continue
        t = c.stash_bytes / bw + budget.latency if bw > 0 else math.inf
        nxt = costs[min(l + 1, n - 1)]
        out_win, in_win = nxt.fwd_cycles, sum(nxt.bwd_cycles)
        exposed = max(0.0, t - out_win) + max(0.0, t - in_win)
        rule.append(SWAP if exposed == 0 else RECOMPUTE if c.fwd_cycles < exposed else SWAP)
    swap_all = [SWAP if c.stash_bytes and c.bwd_cycles and l != budget.last_keeps(n) else KEEP
                for l, c in enumerate(costs)]
    rec_all = decide_recompute(costs, budget, {}, compress).action
    best = None

    def consider(label, action, sync, k):
        nonlocal best
        p = _plan("karma", costs, budget, compress, action, sync=sync, ahead=k,
                  ahead_unit="layers")
        p = _keep_last(p, costs, budget, compress)
        e = estimate(p, costs, budget)
        if e.fits and (best is None or e.cycles < best[0]):
            best = (e.cycles, label, p, k, sync)

    consider("recompute all", rec_all, 0, 0)
    for k in (1, 2, 4, 8):
        if k > 1 and k >= n:
            break
        for sync in (0, 1):
            consider("per-layer rule", _cut_runs(rule, k), sync, k)
            consider("swap all", swap_all, sync, k)
    if best is None:
        p = _plan("karma", costs, budget, compress, swap_all, sync=1, ahead=1,
                  ahead_unit="layers")
        p.chosen = dict(choice="nothing fits: swap all")
        return p
    cycles, label, plan, k, sync = best
    plan.chosen = dict(choice=label, block_layers=k, sync=sync, predicted_cycles=cycles,
                       **{f"{a}_layers": v for a, v in plan.counts().items()})
    return plan


def _cut_runs(action, k):
    """Runs of recomputed layers longer than k get a swapped checkpoint every k + 1 layers
    (counted from the run's end: the backward pass meets them from there)."""
    a = list(action)
    l = len(a) - 1
    while l >= 0:
        if a[l] != RECOMPUTE:
            l -= 1
            continue
        m = l
        while m >= 0 and a[m] == RECOMPUTE:
            m -= 1
        for j in range(l - k, m, -(k + 1)):      # run is m+1 .. l
            a[j] = SWAP
        l = m
    return a


def _keep_last(plan, costs, budget, compress):
    """Keep the stashes of the last layers (the first the backward pass needs) in HBM, as
    many as still fit."""
    n = len(costs)
    moved = [l for l in range(n) if plan.action[l] != KEEP]
    if not moved:
        return plan

    def keep(m):
        a = list(plan.action)
        for l in moved[len(moved) - m:]:
            a[l] = KEEP
        return _plan(plan.policy, costs, budget, compress, a, sync=plan.sync,
                     ahead=plan.ahead, ahead_unit=plan.ahead_unit, groupby=plan.groupby)

    m = _largest(lambda m: estimate(keep(m), costs, budget).fits, 0, len(moved))
    return keep(m or 0)


def decide(cfg_or_params, costs, budget):
    """The plan of the configured policy (a Config or a dict of workload.memory fields) for
    one NPU's layers."""
    params = cfg_or_params if isinstance(cfg_or_params, dict) else params_from(cfg_or_params)
    name, compress = parse_policy(params.get("policy", "none"))
    if name != "none" or compress:
        if name in ("offload", "lms", "karma") and not (budget.out_bpc > 0):
            raise ConfigError(f"workload.memory.policy = {params.get('policy')!r}: no remote "
                              f"memory reachable (no memory node or host)")
    return POLICIES[name].decide(costs, budget, params, compress)


# ---------------------------------------------------------------------- expansion


def _program_order(costs):
    """One micro-batch on one NPU: forward ops in layer order, then each layer's backward
    ops from the last layer down."""
    order = [("F", l) for l in range(len(costs))]
    for l in range(len(costs) - 1, -1, -1):
        order += [("B", l, j) for j in range(len(costs[l].bwd_cycles))]
    return order


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


def expand(plan: Plan, costs, budget: Budget, sink, sk: Skeleton, npu, tag=""):
    """Add a plan's ops, dependencies and holds for one micro-batch on one NPU to `sink`."""
    n = len(costs)
    F, B = sk.F, sk.B
    for l, c in enumerate(costs):
        if c.out_bytes:
            sink.free(sink.hold(npu, c.out_bytes, F[l], "start", f"{tag}{c.name} output"),
                      F[l], "finish")
        if c.grad_bytes and B[l]:
            sink.free(sink.hold(npu, c.grad_bytes, B[l][0], "start",
                                f"{tag}{c.name} input gradient"), B[l][-1], "finish")
    rec_prev = {}                     # a run of recomputed layers: the previous one's op
    for l in range(n):
        c = costs[l]
        S, act, r = c.stash_bytes, plan.action[l], plan.ratio[l]
        if not S or not B[l]:
            continue
        first, last = B[l][0], B[l][-1]
        nxt = F[l + 1] if l + 1 < n else None
        what = f"{tag}{c.name} stash"
        if act == RECOMPUTE:
            h = sink.hold(npu, S, F[l], "start", what)
            sink.free(h, nxt if nxt is not None else F[l], "finish")
            if l - 1 in rec_prev and plan.action[l - 1] == RECOMPUTE:
                after = [rec_prev[l - 1]]
            else:                     # the run's first: before the run's first consumer
                m = l
                while m + 1 < n and plan.action[m + 1] == RECOMPUTE and B[m + 1]:
                    m += 1
                after = [sk.before(B[m][0])]
            R = sink.compute(npu, c.fwd_cycles, after, f"{tag}recompute {c.name}",
                             flops=c.fwd_flops, recompute=True, nbytes=c.fwd_bytes,
                             peak=c.fwd_peak)
            rec_prev[l] = R
            h = sink.hold(npu, S, R, "start", what + " (recomputed)")
            sink.free(h, last, "finish")
            for b in B[l]:
                sink.depend(b, R)
            continue
        Sc = max(1, int(math.ceil(S / r))) if r else S
        ready = F[l]                         # the op after which the stash is final
        h = sink.hold(npu, S, F[l], "start", what)
        if r:
            C = sink.compute(npu, _cycles(S, budget.compress_bpc), [F[l]],
                             f"{tag}compress {c.name}")
            if nxt is not None:
                sink.depend(nxt, C)        # the compressor runs right after the layer
            sink.free(h, C, "finish")
            h = sink.hold(npu, Sc, C, "start", what + " (compressed)")
            ready = C
        if act == KEEP:
            if r:
                D = sink.compute(npu, _cycles(S, budget.decompress_bpc),
                                 [sk.before(first), ready], f"{tag}decompress {c.name}")
                sink.free(h, D, "finish")
                full = sink.hold(npu, S, D, "start", what + " (decompressed)")
                sink.depend(first, D)
                sink.free(full, last, "finish")
            else:
                sink.free(h, last, "finish")
            continue
        # swap: out after the stash is final, back before its consumers
        W = sink.write(npu, Sc, [ready], f"{tag}swap-out {c.name}")
        sink.queue(npu, "out", (sk.pos[F[l]], 0), W)
        if plan.sync:
            sink.free(h, W, "finish")
            waiter = l + (2 if plan.sync == 1 else 1)
            if waiter < n:
                sink.depend(F[waiter], W)
        else:
            J = sink.join([W] + ([nxt] if nxt is not None else []))
            sink.free(h, J, "finish")
        if plan.ahead_unit == "layers":        # the layer `ahead` after l (or the
            m = min(l + plan.ahead, n - 1)     # nearest below it) with backward ops
            while not B[m]:
                m -= 1
            trig = sk.before(B[m][0])
            groups = [list(B[l])]
        else:
            trig = None
            groups = _group(B[l], sk, plan.groupby)
        for gi, grp in enumerate(groups):
            t = trig if trig is not None else sk.before(grp[0], plan.ahead + 1)
            if sk.pos[t] < sk.pos[F[l]]:
                t = F[l]
            label = f"{tag}swap-in {c.name}" + (f" ({gi + 1})" if len(groups) > 1 else "")
            R = sink.read(npu, W, [t, W], label, last=gi == len(groups) - 1)
            sink.queue(npu, "in", (sk.pos[grp[0]], sk.pos[t]), R)
            hin = sink.hold(npu, Sc, R, "start", what + " (swapped in)")
            dep = R
            if r:
                D = sink.compute(npu, _cycles(S, budget.decompress_bpc), [R],
                                 f"{tag}decompress {c.name}")
                sink.free(hin, D, "finish")
                hin = sink.hold(npu, S, D, "start", what + " (decompressed)")
                dep = D
            for b in grp:
                sink.depend(b, dep)
            sink.free(hin, grp[-1], "finish")


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


def _cycles(nbytes, bpc):
    return 0 if bpc == math.inf or not nbytes else int(math.ceil(nbytes / bpc - 1e-9))


# ---------------------------------------------------------------------- the estimate


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


# ---------------------------------------------------------------------- placement


@dataclass
class Placement:
    """Where one NPU's offloaded bytes go: targets (node names) with the fraction of every
    stash each takes, and the bandwidth (bytes/cycle) and latency (cycles) to them."""
    npu: str
    targets: list                    # [(node name, fraction)]
    out_bpc: float
    in_bpc: float
    latency: int
    kind: str                        # 'mem' or 'host'


def _widest_nearest(topo, src, kinds):
    """Nodes of `kinds` at the fewest hops from src, each with the widest bottleneck
    bandwidth (bytes/cycle, parallel channels summed) and the smallest latency over those
    shortest paths; hops through nodes of any kind."""
    pair_bw, pair_lat = {}, {}
    adj = {}
    for c in range(topo.n_channels):
        a, b = topo.ch_src[c], topo.ch_dst[c]
        pair_bw[(a, b)] = pair_bw.get((a, b), 0.0) + topo.ch_bytes_per_cycle[c]
        pair_lat[(a, b)] = topo.ch_latency_cycles[c]
        adj.setdefault(a, set()).add(b)
    dist = {src: 0}
    bw = {src: math.inf}
    lat = {src: 0}
    frontier = [src]
    found = []
    while frontier and not found:
        nxt = {}
        for u in frontier:
            for v in sorted(adj.get(u, ())):
                if v in dist and dist[v] <= dist[u]:
                    continue
                w = min(bw[u], pair_bw[(u, v)])
                if v not in nxt or w > nxt[v][0]:
                    nxt[v] = (w, lat[u] + pair_lat[(u, v)])
        for v, (w, lt) in nxt.items():
            dist[v] = dist[frontier[0]] + 1
            bw[v], lat[v] = w, lt
        found = [v for v in sorted(nxt) if topo.node_kinds[v] in kinds]
        # a path continues through switches and NPUs, not through the kind looked for
        frontier = [v for v in sorted(nxt) if topo.node_kinds[v] not in kinds]
    return [(v, bw[v], lat[v]) for v in found]


def placement(topo, cfg, npu, target=None) -> Placement:
    """Where npu's offloaded stashes go (workload.memory.target): 'mem' -- its nearest
    memory nodes, each a share of every stash in proportion to the bandwidth towards it
    (MC-DLA's bandwidth-aware page placement); 'host' -- its nearest host's DRAM (the
    widest if several are as near); 'auto' -- mem if the system has memory nodes, else
    host. A system with none reachable is a ConfigError."""
    target = target or cfg.workload.memory.target
    kinds = set(topo.node_kinds)
    if target == "auto":
        target = "mem" if "mem" in kinds else "host"
    i = topo.node_names.index(npu)
    near = _widest_nearest(topo, i, (target,))
    if not near:
        what = "memory node" if target == "mem" else "host"
        raise ConfigError(f"workload.memory.policy = {cfg.workload.memory.policy!r}: no remote "
                          f"memory reachable from {npu} (no {what} in {topo.name}; "
                          f"workload.memory.target = {cfg.workload.memory.target!r})")
    if target == "host":
        near = [max(near, key=lambda x: (x[1], -x[0]))]
    inj, ej = nic_bandwidths(topo, cfg)
    mem = memory_params(topo, cfg)
    roof = compute_params(topo, cfg)
    out = []
    for v, w, lt in near:
        store = mem[v][0] if target == "mem" else roof[v][1]
        acc_lat = mem[v][1] if target == "mem" else 0
        out.append((v, min(w, store, ej[v]), min(w, store, inj[v]), lt + acc_lat))
    total = sum(o[1] for o in out)
    targets = [(topo.node_names[v], wo / total) for v, wo, _, _ in out]
    return Placement(npu, targets, min(inj[i], total), min(ej[i], sum(o[2] for o in out)),
                     max(o[3] for o in out), target)


def split(nbytes, targets):
    """Bytes per target in proportion to their fractions (whole bytes; the remainder to the
    largest share)."""
    parts = [int(nbytes * f) for _, f in targets]
    k = max(range(len(targets)), key=lambda j: targets[j][1])
    parts[k] += nbytes - sum(parts)
    return parts


# ---------------------------------------------------------------------- the op graph


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
                  ratio=dict(m.ratio or {}), inflight=inflight)


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
    needs_remote = name in ("offload", "lms", "karma")
    placements = {npu: placement(topo, cfg, npu) if needs_remote else None for npu in work}
    sink = GraphSink(g, placements)
    plans, budgets, seen = {}, {}, {}
    for npu, w in work.items():
        b = budget_for(cfg, topo, npu, w.resident, placements[npu], w.inflight)
        key = (repr(w.costs), repr(b))        # replicas with the same layers and budget
        if key not in seen:
            seen[key] = decide(cfg, w.costs, b)
        plan = seen[key]
        plans[npu], budgets[npu] = plan, b
        if w.resident:
            g.free(g.hold(npu, w.resident, w.first_op, "start", f"{npu} resident"),
                   w.last_op, "finish")
        for k, sk in enumerate(w.skeletons):
            label = w.labels[k] if w.labels else (f"mb{k}" if len(w.skeletons) > 1 else "")
            expand(plan, w.costs, b, sink, sk, npu, f"{npu} {label} ".replace("  ", " "))
    sink.serialise()
    return Applied(cfg.workload.memory.policy, plans, budgets, placements,
                   sink.recomputed_flops)


def layer_costs(model, spec, precision, batch, clock_ghz=1.0):
    """One LayerCost per layer of `model` for `batch` samples on an NPU whose roofline is
    `spec` (pysim.models.presets.NpuSpec): the stash (layer.bytes(precision)['stash'] per
    sample), the forward op's cycles and FLOPs, the backward ops' cycles (input gradient,
    then weight gradient; those with work), the forward's output and the input gradient as
    transients."""
    out = []
    hz = clock_ghz * 1e9
    for layer in model.layers:
        b = layer.bytes(precision)
        fwd = spec.layer_seconds(layer, precision, batch, "fwd")
        bwd = [spec.layer_seconds(layer, precision, batch, ph)
               for ph, fl in (("bwd_input", layer.bwd_input_flops),
                              ("bwd_weight", layer.bwd_weight_flops)) if fl]
        out.append(LayerCost(layer.name, layer.kind, int(b["stash"] * batch),
                             max(1, int(math.ceil(fwd * hz))),
                             tuple(max(1, int(math.ceil(t * hz))) for t in bwd),
                             fwd_flops=layer.fwd_flops * batch,
                             fwd_bytes=int(batch * (b["read"] + b["write"]) + b["weights"]),
                             fwd_peak=spec.peak_flops(precision) * spec.efficiency(layer.kind),
                             out_bytes=int(b["write"] * batch),
                             grad_bytes=int(b["read"] * batch)))
    return out


def resident_bytes(model, precision, optimizer="sgd"):
    """Weights (and their fp32 master copy in mixed precision), gradients and optimizer
    state of `model`: held for the whole run."""
    p = precision_bytes(precision)
    return int(model.params * (p.weight + p.grad + p.master + optimizer_bytes(optimizer,
                                                                             precision)))


# ---------------------------------------------------------------------- training iterations


def _op_cycles(g, op, cparams, clock, node_index):
    """An op's time alone: a roofline op's max(flops / its peak, bytes / HBM bandwidth), a
    cycles op's cycles."""
    if g.work[op] is None:
        return int(g.size[op])
    flops, nbytes, peak = g.work[op]
    fpc, bpc = cparams[node_index[g.node[op]]]
    if peak is not None:
        fpc = peak / (clock * 1e9)
    c = int(math.ceil(flops / fpc - 1e-9)) if flops else 0
    h = int(math.ceil(nbytes / bpc - 1e-9)) if nbytes else 0
    return max(c, h, 1)


def training_work(cfg, topo, g, plan):
    """{npu: NpuWork} of a training iteration built by pysim.workload.training: per NPU the
    layers it runs (its stage; a split embedding table on its owner), their costs from the
    graph's ops, a Skeleton per iteration and micro-batch, its resident training state
    (weights, gradients, master weights, optimizer state of its share of its layers) and its
    first and last ops (a zero delay after its last optimizer steps and backward op)."""
    lay = plan.layout
    cparams = compute_params(topo, cfg)
    clock = cfg.network.clock_ghz
    index = {n: i for i, n in enumerate(topo.node_names)}
    pb = lay.pb
    per_param = pb.weight + pb.grad + pb.master + optimizer_bytes(lay.optimizer, lay.precision)
    by_npu = {}
    for (it, i, n, j), lo in plan.layer_ops.items():
        by_npu.setdefault(n, {}).setdefault((it, j), {})[i] = lo
    work = {}
    last_it = len(plan.iterations) - 1
    steps = {}                           # per NPU: its optimizer steps of the last iteration
    for (it, _, npu), op in plan.optimizer.items():
        if it == last_it:
            steps.setdefault(npu, []).append(op)
    for n in plan.npus:
        runs = by_npu.get(n, {})
        if not runs:
            continue
        layers = sorted({i for ops in runs.values() for i in ops})
        first_run = runs[min(runs)]
        costs = []
        for i in layers:
            layer = lay.model.layers[i]
            lo = first_run[i]
            fi, fo, _, _ = lay.splits[i]
            samples = lay.gmb if lay.split_table[i] else lay.mb
            bwd = [b for b in (lo.bwd_input, lo.bwd_weight) if b is not None]
            bwd.sort()
            flops, nbytes, peak = g.work[lo.fwd]
            costs.append(LayerCost(
                layer.name, layer.kind, int(lo.stash_bytes),
                _op_cycles(g, lo.fwd, cparams, clock, index),
                tuple(_op_cycles(g, b, cparams, clock, index) for b in bwd),
                fwd_flops=flops, fwd_bytes=int(nbytes), fwd_peak=peak,
                out_bytes=int(math.ceil(samples * layer.out_elems * pb.act / fo)),
                grad_bytes=int(math.ceil(samples * layer.in_elems * pb.act / fi))
                if lo.bwd_input is not None else 0))
        order = sorted(op for ops in runs.values() for lo in ops.values()
                       for op in (lo.fwd, lo.bwd_input, lo.bwd_weight) if op is not None)
        pos = {op: k for k, op in enumerate(order)}
        skeletons = []
        for key in sorted(runs):
            ops = runs[key]
            skeletons.append(Skeleton(
                [ops[i].fwd for i in layers],
                [sorted(b for b in (ops[i].bwd_input, ops[i].bwd_weight) if b is not None)
                 for i in layers], order, pos))
        resident = 0.0
        for i in layers:
            layer = lay.model.layers[i]
            if lay.split_table[i]:
                resident += layer.params * pb.weight
            else:
                resident += layer.params / lay.splits[i][2] * per_param
        ends = steps.get(n, []) + [order[-1]]
        last = g.delay(0, after=sorted(set(ends)))
        s_ = plan.coords[n][2]
        inflight = plan.micro_batches if plan.schedule == "gpipe" else \
            min(plan.micro_batches, plan.pp - s_)
        work[n] = NpuWork(costs, skeletons, int(math.ceil(resident)), order[0], last,
                          [f"it{it} mb{j}" for it, j in sorted(runs)], layers,
                          max(1, inflight))
    return work


@quiet_gc
def apply_training(cfg, topo, g, plan):
    """Add the configured memory plan (workload.memory) to a training iteration's graph: every
    NPU's stashes, transients and resident state held in its HBM, and the plan's transfers,
    recomputations and compressions. Returns the Applied plans."""
    work = training_work(cfg, topo, g, plan)
    name, _ = parse_policy(cfg.workload.memory.policy)
    if name == "karma" and cfg.workload.memory.host_update:
        host_update(cfg, topo, g, plan, work)
    return apply(cfg, topo, g, work)


def host_update(cfg, topo, g, plan, work):
    """KARMA's multi-node scheme: each layer's optimizer step runs on the NPU's nearest host
    instead of the NPU. Once the layer's gradient is reduced (when the NPU's own step would
    have run; that op is emptied), the gradient goes to the host, the host's roofline runs
    the step over the fp32 master weights and optimizer state it keeps in its DRAM, and the
    updated weights come back before the layer's next forward op (and before the NPU's last
    op). The NPU keeps only weights and gradients resident."""
    lay = plan.layout
    pb = lay.pb
    opt_b = optimizer_bytes(lay.optimizer, lay.precision)
    hosts = {}
    for (it, i, n), op in sorted(plan.optimizer.items()):
        if n not in work:
            continue
        if n not in hosts:
            hosts[n] = placement(topo, cfg, n, "host").targets[0][0]
        host = hosts[n]
        layer = lay.model.layers[i]
        params = layer.params / lay.splits[i][2]
        if lay.split_table[i] or not params:
            continue
        flops, nbytes, peak = g.work[op]
        g.work[op] = (0.0, 0, peak)                  # the step moves to the host
        up = g.send(n, host, int(math.ceil(params * pb.grad)), after=[op],
                    name=f"it{it} {layer.name} gradient to {host} {n}")
        step = g.compute(host, after=[up], flops=params * OPTIMIZER_FLOPS[lay.optimizer],
                         bytes=int(math.ceil(nbytes)),
                         name=f"it{it} {layer.name} optimizer on {host} for {n}")
        down = g.send(host, n, int(math.ceil(params * pb.weight)), after=[step],
                      name=f"it{it} {layer.name} weights from {host} {n}")
        nxt = plan.layer_ops.get((it + 1, i, n, 0))
        g.depend(nxt.fwd if nxt is not None else work[n].last_op, down)
    for n, w in work.items():
        if n not in hosts:
            continue
        on_host = sum(lay.model.layers[i].params / lay.splits[i][2] * (pb.master + opt_b)
                      for i in w.layer_ids if not lay.split_table[i])
        w.resident = max(0, w.resident - int(on_host))
        g.free(g.hold(hosts[n], int(math.ceil(on_host)), w.first_op, "start",
                      f"{n} master weights and optimizer state"), w.last_op, "finish")


def training_memory_report(result, applied):
    """Add to a run's `memory` what the plans did: per NPU its recomputed FLOPs, and the
    plans (`plans`: per NPU the layers kept, swapped and recomputed, the parameters chosen,
    where its offloaded bytes went)."""
    if not result.memory:
        return
    rep = applied.report()
    for npu, v in rep.items():
        d = result.memory["devices"].get(npu)
        if d is not None:
            d["recomputed_flops"] = v["recomputed_flops"]
    result.memory["policy"] = applied.policy
    result.memory["plans"] = rep


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "memory.policy", "str", "none", "-",
        "Training: the memory plan: none, offload (vDNN-style), lms, recompute, karma, "
        "compression (COMET), or a policy joined with compression ('offload+compression').",
        raising(parse_policy, "a memory policy")),
    Key("workload", "memory.target", "str", "auto", "-",
        "Where offloaded bytes go: 'mem' (the NPU's nearest memory nodes, in proportion to "
        "their links' bandwidth), 'host' (its host's DRAM) or 'auto' (mem if the system has "
        "memory nodes, else host).", None, lambda: ["auto", "mem", "host"]),
    Key("workload", "memory.budget_fraction", "float", 0.9, "-",
        "Share of each NPU's HBM the planning policies (lms, karma) aim to fill; "
        "the rest is left for what is not modelled (TFLMS's auto-tuning uses 0.9).",
        (lambda x: 0 < x <= 1, "a number in (0, 1]")),
    Key("workload", "memory.prefetch_layers", "int", 1, "layers",
        "offload: a stash is prefetched when the backward pass of the layer this many layers "
        "after it starts.", NONNEG),
    Key("workload", "memory.layers", "str", "all", "-",
        "offload: the stashes offloaded: 'all' layers' or 'conv' layers' only (vDNN's two "
        "policies).", None, lambda: ["all", "conv"]),
    Key("workload", "memory.swapout_threshold", "int", -1, "ops",
        "lms: a stash is swapped out when more than this many ops separate its producer from "
        "its consumer in the iteration's order (-1: the largest that fits, found as TFLMS's "
        "auto-tuning does).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.swapin_ahead", "int", -1, "ops",
        "lms: a stash is swapped in this many ops before its consumer (-1: the largest that "
        "fits).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.swapin_groupby", "int", -1, "ops",
        "lms: consumers of a stash within this many ops of each other share one swap-in (-1: "
        "the largest that fits).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.sync_mode", "int", -1, "-",
        "lms: 0 asynchronous swaps, 1 the next op waits for each swap-out, 2 swap-ins wait "
        "until their consumer is next, 3 both (-1: the lowest that fits, as TFLMS's "
        "auto-tuning).", (lambda x: -1 <= x <= 3, "an integer in -1 .. 3")),
    Key("workload", "memory.min_bytes", "int", 1048576, "bytes",
        "lms, karma: stashes smaller than this are never swapped (PyTorch LMS's default "
        "size threshold, 1 MiB).", NONNEG),
    Key("workload", "memory.segments", "int", 0, "-",
        "recompute: segments whose first layer's stash is kept (0: round(sqrt(layers)), as "
        "Chen et al. 2016).", NONNEG),
    Key("workload", "memory.host_update", "bool", False, "-",
        "karma: the optimizer step runs on the host (gradients sent to it, weights back), its "
        "state in host DRAM (KARMA's multi-node scheme).", None),
    Key("workload", "memory.ratio", "table", None, "-",
        "compression: compression ratio of a stash per layer kind, e.g. {conv = 10.0} "
        "(default: 15 for conv, norm, eltwise and pool, whose stashes are feature maps; "
        "kinds not given are not compressed).",
        raising(check_ratios, "a table of layer kinds")),
    Key("workload", "memory.compress_gbps", "float", 100.0, "GB/s",
        "compression: compressor throughput on the NPU's compute unit (inf: free).",
        (lambda x: x > 0, "a number > 0 (inf: free)"),
        allow_inf=True),
    Key("workload", "memory.decompress_gbps", "float", 200.0, "GB/s",
        "compression: decompressor throughput on the NPU's compute unit (inf: free).",
        (lambda x: x > 0, "a number > 0 (inf: free)"),
        allow_inf=True),
)
