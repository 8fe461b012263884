"""Activation recomputation as Megatron-LM defines it (Korthikanti et al., MLSys 2023),
`workload.memory.policy = "recompute"` with `workload.memory.recompute`:

- "full": each transformer layer keeps only its input; before its backward pass its whole
  forward pass runs again (its compute and its tensor-parallel collectives).
- "selective": only the attention core (Q K^T, softmax, dropout, the product with V: the
  `attention` layer) drops what it keeps beyond Q, K and V, and runs its forward again before
  its backward pass.
- "segments" (the default): the memory plan's own recomputation (pysim.workload.memory:
  Chen et al.'s segments).

Transformer layers are the runs of layers named `layer<k>.*` (the zoo's transformer
builders name them so); layers outside them (embeddings, the final normalisation, the head
and the loss) keep their stashes.
"""
from __future__ import annotations

import re

from pysim.errors import ConfigError
from pysim.schema import Key, declare

RECOMPUTE = ("segments", "full", "selective")

declare(Key("workload", "memory.recompute", "str", "segments", "-",
            "recompute: what is recomputed: 'segments' (Chen et al.'s checkpointed segments, "
            "workload.memory.segments), 'full' (Megatron-LM: each transformer layer's forward "
            "re-run before its backward, only its input kept) or 'selective' (Megatron-LM: "
            "the attention core alone).", None, lambda: list(RECOMPUTE)))

_BLOCK = re.compile(r"^(layer\d+)\.")


def recompute_mode(cfg):
    """'full', 'selective', or None (no Megatron-style recomputation)."""
    mem = cfg.workload.memory
    if mem.policy != "recompute":
        return None
    mode = getattr(mem, "recompute", "segments")
    if mode in ("full", "selective") and cfg.is_set("workload.memory.segments"):
        raise ConfigError(f"workload.memory.segments is read by workload.memory.recompute = "
                          f"'segments' only, not {mode!r}")
    return mode if mode in ("full", "selective") else None


def blocks(model):
    """The transformer layers: [(first layer, last layer + 1)] of each run of layers whose
    names share a `layer<k>.` prefix."""
    out, cur, start = [], None, 0
    for i, layer in enumerate(model.layers):
        m = _BLOCK.match(layer.name)
        key = m.group(1) if m else None
        if key != cur:
            if cur is not None:
                out.append((start, i))
            cur, start = key, i
    if cur is not None:
        out.append((start, len(model.layers)))
    return out


def stash_per_sample(model, pb, mode):
    """Per layer, the bytes per sample it keeps for its backward pass under recomputation
    `mode` (None: everything the layer table says), and the transformer layers."""
    stash = [l.stash_elems * pb.act + l.stash_mask_bytes for l in model.layers]
    bl = blocks(model)
    if mode is not None and not any(l.kind == "attention" for a, b in bl
                                    for l in model.layers[a:b]):
        raise ConfigError(f"workload.memory.recompute = {mode!r}: {model.name} has no "
                          f"transformer layer (a run of layers named layer<k>.* with an "
                          f"attention core) for Megatron-LM's recomputation to re-run; use "
                          f"workload.memory.recompute = 'segments' (Chen et al.'s segments, "
                          f"any model)")
    if mode == "full":
        for a, b in bl:
            stash[a] = model.layers[a].in_elems * pb.act
            for i in range(a + 1, b):
                stash[i] = 0
    elif mode == "selective":
        for a, b in bl:
            for i in range(a, b):
                if model.layers[i].kind == "attention":
                    stash[i] = model.layers[i].in_elems * pb.act      # Q, K and V
    return stash, bl
