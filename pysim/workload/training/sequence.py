"""Sequence parallelism (Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", MLSys 2023): with `workload.parallel.sp = true` and tp > 1, the layers
tensor parallelism leaves replicated (layer normalisations, dropouts, residual additions)
run on 1/tp of the sequence each. The all-reduce after a row-split layer becomes a
reduce-scatter (its output leaves split by sequence), and the input of a column-split layer
is all-gathered first; backward mirrors both (an all-gather of the output gradient before a
row-split layer's backward, a reduce-scatter of a column-split layer's input gradient).
The bytes moved are those of the all-reduce they replace (a ring all-reduce is a
reduce-scatter and an all-gather); the work and the stash of the replicated layers shrink by
tp.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SequencePlan:
    split: list                  # per layer: runs on 1/tp of the sequence
    gather_before: list          # per layer: its input is all-gathered before its forward
    scatter_after: list          # per layer: its output is reduce-scattered after its forward


def _column(layer):
    return layer.tp == "column" and layer.kind == "linear"


def _row(layer):
    return layer.tp == "row" and layer.kind in ("linear", "embedding")


def sequence_plan(model, tp, sp):
    """Walk the layers in forward order, tracking whether the activation flowing between them
    is split by sequence (after a row-split layer's reduce-scatter) or whole."""
    n = len(model.layers)
    plan = SequencePlan([False] * n, [False] * n, [False] * n)
    if not sp or tp == 1:
        return plan
    split = False
    for i, layer in enumerate(model.layers):
        if _column(layer):
            plan.gather_before[i] = split
            split = False
        elif _row(layer):
            plan.scatter_after[i] = True
            split = True
        elif layer.tp in (None, "replicated"):
            plan.split[i] = split
    return plan
