"""What a memory plan is made of and made from: the layers' costs and kept tensors on one NPU,
its memory budget, and the plan (an action and a compression ratio per layer)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pysim.workload.memory.registry import DEFAULT_RATIO, KEEP, RECOMPUTE, SWAP  # noqa: F401


@dataclass(frozen=True)
class Kept:
    """A tensor kept for the backward pass, on one NPU for one micro-batch, owned by the
    layer whose LayerCost holds it (the first to keep it: its backward ops are the last to
    need it). Indices are positions in the NPU's list of layer costs."""
    nbytes: int
    last_read: int                   # the last layer whose forward op reads it
    needed: int                      # the layer whose backward ops need it first
    keepers: tuple = ()              # every layer that keeps it (none given: the owner)
    name: str = "stash"
    conv: bool = False               # a convolution keeps it (vDNN's 'conv' policy)


@dataclass
class LayerCost:
    """One layer on one NPU for one micro-batch."""
    name: str
    kind: str
    stash_bytes: int                 # the tensors it owns, kept for the backward pass
    fwd_cycles: int
    bwd_cycles: tuple                # each backward op of the layer, in program order
    fwd_flops: float = 0.0           # the forward op's roofline, repeated by a recompute
    fwd_bytes: int = 0
    fwd_peak: float = None           # its FLOP/s (None: the NPU's default)
    out_bytes: int = 0               # the forward op's output (transient; 0 in place)
    grad_bytes: int = 0              # the input gradient its backward ops produce (transient)
    tensors: tuple = ()              # Kept, its stash_bytes in all (none given: one tensor
                                     # of stash_bytes, read and needed by this layer alone)
    workspace: int = 0               # held by each of its ops while it runs

    def kept(self, l):
        """The tensors this layer (at position l) owns."""
        if self.tensors:
            return self.tensors
        return (Kept(self.stash_bytes, l, l, (l,), conv=self.kind == "conv"),) \
            if self.stash_bytes else ()


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
    clock_ghz: float = 1.0           # cycles per ns (a compressor's roofline in FLOP/s)

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
        ratio = [None if a == RECOMPUTE else
                 float(table[c.name]) if c.name in table else
                 float(table[c.kind]) if c.kind in table else None
                 for c, a in zip(costs, action)]
    return Plan(policy, action, ratio, **kw)
