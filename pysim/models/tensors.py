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

from dataclasses import dataclass

from pysim.models.layers import DTYPE_BYTES


@dataclass(frozen=True)
class Stash:
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


def _saved(layer, l):
    """(tensor id, elems, dtype) per declaration of layer l; a tensor of its own is
    (l, k)."""
    out = []
    ins = layer.in_ids or ()
    for k, (role, n, dt) in enumerate(layer.saves):
        if role == "own" or layer.in_ids is None:
            out.append((("own", l, k), n, dt))
        elif role == "out":
            out.append((layer.out_id, n, dt))
        elif role == "in*":
            out += [(t, n, dt) for t in ins] or [(("own", l, k), n, dt)]
        else:
            j = int(role[2:])
            out.append((ins[j] if j < len(ins) else ("own", l, k), n, dt))
    return out


def stashes(layers):
    """The distinct tensors the layers keep, in the order of their owners."""
    found = {}
    reads = {}
    writer = {}                                 # tensor -> the last layer that wrote it
    for l, layer in enumerate(layers):
        for t in layer.in_ids or ():
            reads[t] = l
        if layer.out_id is not None:
            writer[layer.out_id] = layer.name
        for t, n, dt in _saved(layer, l):
            key = (t, dt)
            if key not in found:
                found[key] = [n, dt, [l], writer.get(t, "input")]
            else:
                f = found[key]
                f[0] = max(f[0], n)
                if f[2][-1] != l:
                    f[2].append(l)
    out = []
    for (t, dt), (n, _, keepers, wrote) in found.items():
        owner, needed = keepers[0], keepers[-1]
        last = needed if isinstance(t, tuple) else max(needed, reads.get(t, needed))
        elems, fixed = (n, 0) if dt == "act" else (0, n * DTYPE_BYTES[dt])
        what = {"u8": " mask", "i64": " indices"}.get(dt, "")
        name = (f"{layers[owner].name}{what}" if isinstance(t, tuple) else
                f"{layers[owner].name} input" if wrote == "input" else f"{wrote} output")
        out.append(Stash(name, elems, fixed, owner, needed, last, tuple(keepers)))
    out.sort(key=lambda s: (s.owner, s.needed))
    return out


def assign(layers):
    """Set every layer's stash_elems and stash_mask_bytes to the tensors it owns; return the
    Stash list."""
    found = stashes(layers)
    for layer in layers:
        layer.stash_elems = 0
        layer.stash_mask_bytes = 0
    for s in found:
        layers[s.owner].stash_elems += s.elems
        layers[s.owner].stash_mask_bytes += s.fixed_bytes
    return found
