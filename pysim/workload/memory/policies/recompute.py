"""Policy recompute: gradient checkpointing in sqrt(n) segments."""
from __future__ import annotations

import math

import numpy as np

from pysim.errors import ConfigError
from pysim.workload.memory.plan import _plan
from pysim.workload.memory.registry import KEEP, RECOMPUTE, register


def _segments(n, k):
    """Split n layers into k contiguous segments of near-equal length: their first
    indices."""
    k = max(1, min(k, n))
    return [int(x[0]) for x in np.array_split(np.arange(n), k)]


@register("recompute", fields=("segments", "recompute"))
def decide_recompute(costs, budget, params, compress=False):
    """Gradient checkpointing (Chen et al., arXiv 1604.06174, 2016): the layers are cut into
    `segments` (default round(sqrt(layers))) contiguous segments; the first layer of each
    keeps its stash, the others' are dropped after the forward pass and recomputed, the
    whole segment at once, just before the segment's backward pass."""
    n = len(costs)
    if params.get("segments", 0) > n:        # each layer its own segment recomputes nothing
        raise ConfigError(f"workload.memory.segments = {params['segments']}: more segments than "
                          f"the {n} layers an NPU trains; expected at most {n} (fewer "
                          f"segments recompute more)")
    k = params.get("segments", 0) or max(1, round(math.sqrt(n)))
    firsts = set(_segments(n, k))
    action = [KEEP if (l in firsts or not c.stash_bytes or not c.bwd_cycles) else RECOMPUTE
              for l, c in enumerate(costs)]
    return _plan("recompute", costs, budget, compress, action,
                 chosen=dict(segments=min(k, n)))
