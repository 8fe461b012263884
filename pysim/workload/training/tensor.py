"""Tensor parallelism as Megatron-LM lays it out (Shoeybi et al., 2019): how a layer's
inputs, outputs, weights and FLOPs divide over tp NPUs, and the all-reduces its forward and
backward passes need."""
from __future__ import annotations

# Megatron's vocabulary-parallel cross entropy all-reduces, per token, the logits' maximum,
# the target's logit and the sum of exponentials: three all-reduces of one fp32 per token.
LOSS_ALL_REDUCES = 3


def tp_split(layer, tp):
    """How tensor parallelism divides a layer over tp NPUs: (input, output, weights, FLOPs)
    divisors. Linear layers as Megatron-LM splits them: column (output features split, the
    input read whole), row (input features split, the output whole: partial sums); an
    embedding split by rows (row) or columns; attention by heads; element-wise work on a
    split tensor split with it; replicated or unsplittable layers run whole on every NPU."""
    if tp == 1 or layer.tp in (None, "replicated"):
        return 1, 1, 1, 1
    if layer.kind == "linear":
        return (1, tp, tp, tp) if layer.tp == "column" else (tp, 1, tp, tp)
    if layer.kind == "embedding":
        return (1, 1, tp, tp) if layer.tp == "row" else (1, tp, tp, tp)
    if layer.tp == "row":
        return tp, 1, tp, tp
    return tp, tp, tp, tp


def tp_forward(lay, i):
    """The all-reduces (Megatron-LM) after layer i's forward, (label, bytes) each: a row-
    split layer's output (partial sums); a column-split loss's three per-token
    reductions."""
    layer = lay.model.layers[i]
    if lay.tp == 1 or layer.tp in (None, "replicated", "heads"):
        return []
    if layer.tp == "row" and layer.kind in ("linear", "embedding"):
        return [("row", lay.mb * layer.out_elems * lay.pb.act)]
    if layer.kind == "loss" and layer.tp == "column":
        tokens = max(1, layer.in_elems // max(1, layer.in_shape[-1] if layer.in_shape
                                              else 1))
        return [("loss", lay.mb * tokens * 4)] * LOSS_ALL_REDUCES
    return []


def tp_backward(lay, i):
    """The all-reduce (Megatron-LM) after layer i's input gradient: a column-split linear
    layer's input gradient (its input was read whole by every NPU)."""
    layer = lay.model.layers[i]
    if lay.tp == 1 or layer.kind != "linear" or layer.tp != "column" or \
            not layer.bwd_input_flops:
        return 0
    return lay.mb * layer.in_elems * lay.pb.act
