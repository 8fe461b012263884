"""Policy karma: KARMA's swap-or-recompute plan chosen by the performance model."""
from __future__ import annotations

import math

from pysim.workload.memory.estimate import estimate
from pysim.workload.memory.plan import _plan
from pysim.workload.memory.policies._search import _largest
from pysim.workload.memory.policies.recompute import decide_recompute
from pysim.workload.memory.registry import KEEP, RECOMPUTE, SWAP, register


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
