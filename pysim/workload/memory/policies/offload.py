"""Policy offload: vDNN's (all, conv, dynamic)."""
from __future__ import annotations

from pysim.workload.memory.estimate import estimate
from pysim.workload.memory.plan import _plan
from pysim.workload.memory.registry import KEEP, SWAP, register


@register("offload", fields=("prefetch_layers", "layers"))
def decide_offload(costs, budget, params, compress=False):
    """vDNN (Rhu et al., MICRO 2016), the runtime MC-DLA builds on: every kept tensor (layers
    = 'all', or those a convolution keeps, 'conv') goes out to remote memory once the last
    forward op that reads it is done, the layer two after waiting for it, and comes back
    when the backward pass of the layer prefetch_layers after its first consumer starts.
    The last layer, whose backward follows at once, keeps its stash. 'dynamic' (vDNN_dyn,
    without its choice of convolution algorithms): nothing offloaded if the predicted peak
    fits the budget, else the convolutions' tensors if that fits, else all."""
    which = params.get("layers", "all")
    if which == "dynamic":
        for w in ("none", "conv", "all"):
            p = decide_offload(costs, budget, {**params, "layers": w}, compress)
            if w == "all" or estimate(p, costs, budget).fits:
                p.chosen = dict(layers=w)
                return p
    action = [SWAP if (which != "none" and c.stash_bytes and c.bwd_cycles and
                       (which == "all" or any(t.conv for t in c.kept(i)))
                       and i != budget.last_keeps(len(costs))) else KEEP
              for i, c in enumerate(costs)]
    return _plan("offload", costs, budget, compress, action, sync=1,
                 ahead=params.get("prefetch_layers", 1), ahead_unit="layers")
