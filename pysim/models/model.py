"""A model: an ordered list of layers, and the builder the zoo writes models with."""
from __future__ import annotations

import itertools

from pysim._gc import quiet_gc
from pysim.models import layers as L
from pysim.models import tensors as T
from pysim.models.layers import Layer, ModelError, prod
from pysim.models.precision import optimizer_bytes, precision_bytes

_TENSOR_IDS = itertools.count()


class Model:
    """A network as its layer table, in forward order. Numbers are per sample (one image,
    sequence, sentence pair or record) at the model's input shape; weights are not."""

    def __init__(self, name, layers, *, input_shape=(), source="", default_precision="fp32",
                 given_times=False, parallelism=None, config=None, unsupported=None):
        self.name = name
        self.layers = list(layers)
        self.input_shape = tuple(input_shape)
        self.source = source
        precision_bytes(default_precision)
        self.default_precision = default_precision
        self.given_times = given_times
        self.parallelism = parallelism
        self.config = dict(config or {})        # the builder's parameters, as resolved
        self.unsupported = dict(unsupported or {})  # imports: operator -> count left out
        seen = set()
        params = 0
        flops = 0.0
        for layer in self.layers:
            if layer.name in seen:
                raise ModelError(f"model {name!r}: two layers are named {layer.name!r}")
            seen.add(layer.name)
            params += layer.params
            flops += layer.fwd_flops
        self.params = params
        self.fwd_flops = flops
        # a model whose layers know their tensors counts each kept tensor once
        self._tensors = bool(self.layers) and all(l.out_id is not None for l in self.layers)
        self._stashes = None
        if self._tensors:
            T.assign(self.layers)

    @property
    def stashes(self):
        """The tensors kept for the backward pass (`pysim.models.tensors.Stash`), each once,
        in the order of their owners; None if the layers do not know their tensors."""
        if self._tensors and self._stashes is None:
            self._stashes = T.stashes(self.layers)
        return self._stashes if self._tensors else None

    @property
    def bwd_flops(self):
        return sum(l.bwd_input_flops + l.bwd_weight_flops for l in self.layers)

    def _precision(self, precision):
        return self.default_precision if precision is None else precision

    def activation_bytes(self, precision=None):
        """Bytes per sample kept from the forward pass for the backward pass (every tensor
        kept, once, all at once: no recomputation)."""
        a = precision_bytes(self._precision(precision)).act
        return sum(l.stash_elems * a + l.stash_mask_bytes for l in self.layers)

    def weight_bytes(self, precision=None):
        return self.params * precision_bytes(self._precision(precision)).weight

    def state_bytes(self, precision=None, optimizer="adam"):
        """Bytes of the training state (not per sample): weights, gradients, fp32 master
        weights (mixed precision) and optimizer state."""
        precision = self._precision(precision)
        p = precision_bytes(precision)
        n = self.params
        d = {"weights": n * p.weight, "grads": n * p.grad, "master": n * p.master,
             "optimizer": n * optimizer_bytes(optimizer, precision)}
        d["total"] = sum(d.values())
        return d

    def layer(self, name):
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    @quiet_gc
    def to_dict(self, precision=None, with_layers=False):
        precision = self._precision(precision)
        d = {"name": self.name, "params": self.params, "fwd_flops": self.fwd_flops,
             "bwd_flops": self.bwd_flops, "activation_bytes": self.activation_bytes(precision),
             "layers": len(self.layers), "precision": precision,
             "input_shape": list(self.input_shape), "source": self.source,
             "given_times": self.given_times, "parallelism": self.parallelism,
             "config": self.config}
        if self.unsupported:
            d["unsupported"] = dict(self.unsupported)
        if with_layers:
            d["layer_table"] = [l.to_dict(precision) for l in self.layers]
        return d

    def __repr__(self):
        return (f"Model({self.name!r}, {len(self.layers)} layers, params={self.params:,}, "
                f"fwd_flops={self.fwd_flops:.4g})")


class Act:
    """An activation flowing through a `Net`: its per-sample shape, whether a gradient
    flows back into it (False for the model's input), and the tensor it is (`tid`: a view
    or an in-place layer's output is its input's tensor)."""

    __slots__ = ("shape", "grad", "tid")

    def __init__(self, shape, grad=True, tid=None):
        self.shape = tuple(shape)
        self.grad = grad
        self.tid = next(_TENSOR_IDS) if tid is None else tid

    def __repr__(self):
        return f"Act{self.shape}"


class Net:
    """Builds a layer table: each method appends one layer computed by its kind's function
    from the shape of its input, and returns the output."""

    def __init__(self):
        self.layers = []

    def _add(self, layer, grad=True, inputs=()):
        """Append layer, reading the tensors `inputs`; its output is a new tensor, or its
        input's if the layer runs in place."""
        layer.in_ids = tuple([x.tid for x in inputs])
        out = Act(layer.out_shape, grad, inputs[0].tid if layer.inplace else None)
        layer.out_id = out.tid
        self.layers.append(layer)
        return out

    @staticmethod
    def input(shape):
        return Act(shape, grad=False)

    def conv(self, x, name, out_channels, kernel, stride=1, padding=0, groups=1, bias=True):
        return self._add(L.conv(name, x.shape, out_channels, kernel, stride, padding, groups,
                                bias, input_grad=x.grad), inputs=[x])

    def linear(self, x, name, out_features, bias=True, tp=None, tied=False):
        return self._add(L.linear(name, x.shape, out_features, bias, tp, input_grad=x.grad,
                                  tied=tied), inputs=[x])

    def lstm(self, x, name, hidden, bidirectional=False):
        return self._add(L.lstm(name, x.shape, hidden, bidirectional, input_grad=x.grad),
                         inputs=[x])

    def embedding(self, name, rows, dim, lookups=1, pooled=False, table=None, tp=None):
        return self._add(L.embedding(name, rows, dim, lookups, pooled, table, tp))

    def attention(self, x, name, heads, dropout=False, causal=False):
        s, h3 = x.shape
        if h3 % 3:
            raise ModelError(f"layer {name!r}: input of shape {x.shape}: expected (tokens, "
                             f"3 x hidden), the concatenated Q, K and V")
        return self._add(L.attention(name, s, s, h3 // 3, heads, dropout, causal),
                         inputs=[x])

    def additive_attention(self, q, memory, name):
        if q.shape[1] != memory.shape[1]:
            raise ModelError(f"layer {name!r}: query of shape {q.shape} and memory of shape "
                             f"{memory.shape} differ in width")
        return self._add(L.additive_attention(name, q.shape[0], memory.shape[0], q.shape[1],
                                              input_grad=q.grad or memory.grad),
                         inputs=[q, memory])

    def interaction(self, xs, name):
        dims = {x.shape for x in xs}
        if len(dims) != 1 or len(xs[0].shape) != 1:
            raise ModelError(f"layer {name!r}: the interacting vectors must be of one length, "
                             f"got shapes {sorted(dims)}")
        return self._add(L.interaction(name, len(xs), xs[0].shape[0]), inputs=xs)

    def norm(self, x, name, op="batch", tp=None):
        return self._add(L.norm(name, x.shape, op, tp=tp), inputs=[x])

    def pool(self, x, name, kernel=None, stride=None, padding=0, op="max", ceil_mode=False):
        return self._add(L.pool(name, x.shape, kernel, stride, padding, op, ceil_mode), x.grad,
                         [x])

    def act(self, x, name, op="relu", tp=None, inplace=False):
        return self._add(L.eltwise(name, x.shape, op, tp=tp, inplace=inplace), x.grad, [x])

    def add(self, xs, name, tp=None):
        shapes = {x.shape for x in xs}
        if len(shapes) != 1:
            raise ModelError(f"layer {name!r}: cannot add tensors of shapes {sorted(shapes)}")
        return self._add(L.eltwise(name, xs[0].shape, "add", inputs=len(xs), tp=tp),
                         any(x.grad for x in xs), xs)

    def concat(self, xs, name, axis=0):
        ref = xs[0].shape
        for x in xs:
            if len(x.shape) != len(ref) or any(a != b for i, (a, b) in
                                                enumerate(zip(x.shape, ref)) if i != axis):
                raise ModelError(f"layer {name!r}: cannot concatenate shapes "
                                 f"{[x.shape for x in xs]} along dimension {axis}")
        out = list(ref)
        out[axis] = sum(x.shape[axis] for x in xs)
        return self._add(L.eltwise(name, ref, "concat", inputs=len(xs), out_shape=out),
                         any(x.grad for x in xs), xs)

    def softmax(self, x, name):
        return self._add(L.softmax(name, x.shape), x.grad, [x])

    def loss(self, x, name="loss", op="cross_entropy", tp=None):
        return self._add(L.loss(name, x.shape, op, tp), x.grad, [x])

    @staticmethod
    def flatten(x):
        """A view: no layer, no data moved, the same tensor."""
        return Act((prod(x.shape),), x.grad, x.tid)

    def model(self, name, **kw) -> Model:
        return Model(name, self.layers, **kw)


__all__ = ["Act", "Layer", "Model", "Net"]
