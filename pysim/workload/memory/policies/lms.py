"""Policy lms: IBM Large Model Support (TFLMS v2's rules, auto-tuned)."""
from __future__ import annotations

from pysim.workload.memory.estimate import estimate
from pysim.workload.memory.expand import _program_order
from pysim.workload.memory.plan import _plan
from pysim.workload.memory.policies._search import _largest
from pysim.workload.memory.registry import KEEP, SWAP, register


def _lms_plan(costs, budget, compress, threshold, ahead, groupby, min_bytes, sync_mode=0):
    order = _program_order(costs)
    pos = {op: i for i, op in enumerate(order)}
    action = []
    for l, c in enumerate(costs):
        if ("B", l, 0) not in pos:            # no backward op: nothing to swap back for
            action.append(KEEP)
            continue
        kept = c.kept(l)
        u = max([t.last_read for t in kept] + [l])
        k = max([t.needed for t in kept] + [l])
        while ("B", k, 0) not in pos:
            k -= 1
        dist = pos[("B", k, 0)] - pos[("F", u)]
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
