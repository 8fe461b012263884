"""Tensor parallelism as Megatron-LM lays it out (Shoeybi et al., 2019): how a layer's
inputs, outputs, weights and FLOPs divide over tp NPUs, and the all-reduces its forward and
backward passes need."""
from __future__ import annotations

from pysim.errors import ConfigError

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


# Megatron-LM pads the vocabulary to a multiple of this times tp
# (--make-vocab-size-divisible-by, default 128)
VOCAB_MULTIPLE = 128


def _vocabularies(model):
    """The vocabulary sizes: rows of the row-split (vocabulary-parallel) embeddings."""
    return {l.params // l.out_shape[-1] for l in model.layers
            if l.kind == "embedding" and l.tp == "row" and l.out_shape and l.params}


def _vocabulary_dim(layer, vocab):
    """The vocabulary dimension layer carries, or None."""
    if layer.kind == "embedding" and layer.tp == "row" and layer.out_shape and \
            layer.params // layer.out_shape[-1] in vocab:
        return layer.params // layer.out_shape[-1]
    if layer.kind == "linear" and layer.tp == "column" and layer.out_shape[-1] in vocab:
        return layer.out_shape[-1]
    if layer.kind == "loss" and layer.tp == "column" and layer.in_shape and \
            layer.in_shape[-1] in vocab:
        return layer.in_shape[-1]
    return None


def vocabulary_padding(model, tp):
    """Per layer, the factor its vocabulary-split work grows by when tp does not divide the
    vocabulary: Megatron-LM pads it to a multiple of 128 x tp (pysim pads only where tp
    does not divide it; a vocabulary tp divides is taken as it is)."""
    vocab = _vocabularies(model)
    out = []
    for layer in model.layers:
        v = _vocabulary_dim(layer, vocab) if tp > 1 else None
        if v is None or v % tp == 0:
            out.append(1.0)
        else:
            q = VOCAB_MULTIPLE * tp
            out.append(-(-v // q) * q / v)
    return out


def check_divisible(model, tp):
    """Refuse a tensor-parallel degree that does not divide what Megatron-LM splits: the
    attention heads, a column-split layer's output features, a row-split layer's input
    features (the vocabulary is padded instead, see vocabulary_padding)."""
    if tp == 1:
        return
    # (an attention core's own heads; a model's `heads` parameter where its layers say none)
    heads = {l.heads for l in model.layers if l.heads} or {model.config.get("heads")}
    for h in sorted(h for h in heads if isinstance(h, int)):
        if h % tp:
            raise ConfigError(f"workload.parallel.tp = {tp} does not divide the {h} attention "
                              f"heads of {model.name} (Megatron-LM gives each NPU whole "
                              f"heads): choose a tp that divides {h}")
    vocab = _vocabularies(model)
    for layer in model.layers:
        if _vocabulary_dim(layer, vocab) is not None or layer.tp in (None, "replicated"):
            continue
        what = None
        if layer.kind == "linear" and layer.tp == "column":
            what, n = "output features", layer.out_shape[-1]
        elif layer.kind == "linear" and layer.tp == "row":
            what, n = "input features", layer.in_shape[-1]
        if what and n % tp:
            raise ConfigError(f"workload.parallel.tp = {tp} does not divide the {n} {what} of "
                              f"layer {layer.name!r} of {model.name} (Megatron-LM splits its "
                              f"weight matrix evenly): choose a tp that divides {n}")


def tp_forward(lay, i):
    """The collectives (Megatron-LM) after layer i's forward, (collective, bytes) each: a
    row-split layer's output (partial sums) all-reduced, or reduce-scattered under sequence
    parallelism; a column-split loss's three per-token all-reduces."""
    layer = lay.model.layers[i]
    if lay.tp == 1 or layer.tp in (None, "replicated", "heads"):
        return []
    if layer.tp == "row" and layer.kind in ("linear", "embedding"):
        nbytes = lay.mb * layer.out_elems * lay.pb.act
        return [("reduce_scatter" if lay.seq.scatter_after[i] else "all_reduce", nbytes)]
    if layer.kind == "loss" and layer.tp == "column":
        tokens = max(1, layer.in_elems // max(1, layer.in_shape[-1] if layer.in_shape
                                              else 1))
        return [("all_reduce", lay.mb * tokens * 4)] * LOSS_ALL_REDUCES
    return []


def tp_backward(lay, i):
    """The collective (Megatron-LM) after layer i's input gradient: a column-split linear
    layer's input gradient (its input was read whole by every NPU) all-reduced, or
    reduce-scattered under sequence parallelism (its input was all-gathered)."""
    layer = lay.model.layers[i]
    if lay.tp == 1 or layer.kind != "linear" or layer.tp != "column" or \
            not layer.bwd_input_flops:
        return []
    nbytes = lay.mb * layer.in_elems * lay.pb.act
    return [("reduce_scatter" if lay.seq.gather_before[i] else "all_reduce", nbytes)]


def gather_bytes(lay, i):
    """Sequence parallelism: the bytes of layer i's whole input, all-gathered before it."""
    return lay.mb * lay.model.layers[i].in_elems * lay.pb.act


def scatter_bytes(lay, i):
    """Sequence parallelism: the bytes of layer i's whole output (reduce-scattered after
    its forward, its gradient all-gathered before its backward)."""
    return lay.mb * lay.model.layers[i].out_elems * lay.pb.act


def tied_layers(model):
    """[(output layer, embedding)]: linear layers whose weight matrix is an embedding's
    (tied: the layer counts only its bias), each with the embedding of that shape."""
    out = []
    for i, layer in enumerate(model.layers):
        if layer.kind != "linear" or layer.params >= layer.weight_elems:
            continue
        size = layer.in_shape[-1] * layer.out_shape[-1]
        emb = next((k for k, e in enumerate(model.layers)
                    if e.kind == "embedding" and e.params == size), None)
        if emb is not None:
            out.append((i, emb))
    return out
