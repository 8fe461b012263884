"""The tensors a model keeps for its backward pass, each counted once.

Every layer declares the tensors its backward pass needs (`Layer.saves`, by role: an input,
its output, or a tensor of its own); a model built by `pysim.models.Net` also knows each
layer's input and output tensors (`Layer.in_ids`, `Layer.out_id`: an in-place layer's output
and a view are their input's tensor). A tensor kept by several layers -- a ReLU's output,
kept by the ReLU and by the convolution and the max pooling it feeds -- is one `Stash`:

- `owner`, the first layer that keeps it (forward order): its backward op is the last to need
  it, so the tensor is freed when that layer's backward ops are done;
- `needed`, the last layer that keeps it: its backward op is the first to need it (a swapped
  tensor must be back before it);
- `last_read`, the last layer whose forward pass reads or keeps it (it may leave the device
  once that layer's forward op is done).

`assign(layers)` fills each layer's `stash_elems` / `stash_mask_bytes` with the tensors it
owns, so that summing them over the layers counts every tensor once.
"""
from __future__ import annotations

from typing import NamedTuple

from pysim.models.layers import DTYPE_BYTES


class Stash(NamedTuple):
    """One tensor kept for the backward pass: its elements at the activations' precision
    (`elems`) or its bytes whatever the precision (`fixed_bytes`), per sample."""
    name: str
    elems: int
    fixed_bytes: int
    owner: int
    needed: int
    last_read: int
    keepers: tuple                 # the layers that keep it, in forward order

    def bytes(self, act_bytes):
        return self.elems * act_bytes + self.fixed_bytes


_WHAT = {"u8": " mask", "i64": " indices"}


class _Kept:
    """The distinct tensors the layers keep, as parallel lists indexed by tensor (in the
    order of their owners): the tensor's id (None for a tensor of a layer's own, which no
    other layer keeps), its dtype, the largest elements a keeper declares, the first and
    the last keeper, the keepers between them (only for tensors kept by three layers or
    more), and the name of the layer that wrote it. With `full` False, only what `assign`
    needs: ids, dtypes, elements and first keepers."""

    __slots__ = ("tids", "dtypes", "elems", "first", "last", "middle", "wrote", "reads")

    def __init__(self, layers, full=True):
        index = {}                              # tensor id, or (id, dtype) -> its index
        tids, dtypes, elems, first, last, wrote = [], [], [], [], [], []
        middle = {}
        reads = {}                              # tensor -> the last layer that reads it
        writer = {}                             # tensor -> the last layer that wrote it
        for l, layer in enumerate(layers):
            ins = layer.in_ids
            out = layer.out_id
            if full:
                if ins:
                    for t in ins:
                        reads[t] = l
                if out is not None:
                    writer[out] = layer.name
            for role, n, dt in layer.saves:
                if ins is None or role == "own":
                    ts = (None,)
                elif role == "out":
                    ts = (out,)
                elif role == "in*":
                    ts = ins or (None,)
                else:
                    j = int(role[2:])
                    ts = (ins[j] if j < len(ins) else None,)
                for t in ts:
                    if t is None:
                        i = None
                    else:
                        key = t if dt == "act" else (t, dt)
                        i = index.get(key)
                        if i is None:
                            index[key] = len(tids)
                    if i is None:
                        tids.append(t)
                        dtypes.append(dt)
                        elems.append(n)
                        first.append(l)
                        last.append(l)
                        wrote.append(writer.get(t, "input"))
                    else:
                        if n > elems[i]:
                            elems[i] = n
                        m = last[i]
                        if full and m != l:
                            if m != first[i]:
                                middle.setdefault(i, []).append(m)
                            last[i] = l
        self.tids, self.dtypes, self.elems, self.first, self.last = \
            tids, dtypes, elems, first, last
        self.middle, self.wrote, self.reads = middle, wrote, reads


def stashes(layers):
    """The distinct tensors the layers keep, in the order of their owners."""
    k = _Kept(layers)
    reads, middle, wrote = k.reads, k.middle, k.wrote
    out = []
    for i, (t, dt, n, owner, needed) in enumerate(zip(k.tids, k.dtypes, k.elems, k.first,
                                                       k.last)):
        keepers = (owner,) if owner == needed else \
            (owner, *middle[i], needed) if i in middle else (owner, needed)
        elems, fixed = (n, 0) if dt == "act" else (0, n * DTYPE_BYTES[dt])
        if t is None:
            name, last = f"{layers[owner].name}{_WHAT.get(dt, '')}", needed
        else:
            name = f"{layers[owner].name} input" if wrote[i] == "input" else \
                f"{wrote[i]} output"
            last = max(needed, reads.get(t, needed))
        out.append(Stash(name, elems, fixed, owner, needed, last, keepers))
    span = len(layers) + 1                      # already in the order of owners
    out.sort(key=lambda s: s.owner * span + s.needed)
    return out


def assign(layers):
    """Set every layer's stash_elems and stash_mask_bytes to the tensors it owns (the
    elements and fixed-size bytes of the tensors it is the first to keep)."""
    k = _Kept(layers, full=False)
    for layer in layers:
        layer.stash_elems = 0
        layer.stash_mask_bytes = 0
    for dt, n, owner in zip(k.dtypes, k.elems, k.first):
        if dt == "act":
            layers[owner].stash_elems += n
        else:
            layers[owner].stash_mask_bytes += n * DTYPE_BYTES[dt]
