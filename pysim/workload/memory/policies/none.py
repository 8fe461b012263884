"""Policy none: every kept tensor stays in HBM."""
from __future__ import annotations

from pysim.workload.memory.plan import _plan
from pysim.workload.memory.registry import register


@register("none")
def decide_none(costs, budget, params, compress=False):
    """Everything stays in HBM."""
    return _plan("none", costs, budget, compress)
