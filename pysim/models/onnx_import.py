"""ONNX import: a model exported from any framework becomes a layer table.

The `onnx` package (`pip install 'pysim[onnx]'`) reads the file and infers every tensor's
shape; one handler per operator (as fvcore counts FLOPs) maps a node to the layer kind whose
function computes its numbers from those shapes, so an imported network and the zoo's
definition of the same network agree. Weights are the graph's initializers: each counts once,
in the first layer that uses it (tied weights stay tied). A MatMul followed by the Add of a
bias (PyTorch's export of a linear layer on 3-D input) becomes one linear layer.

Shapes: a symbolic dimension first in an input, named N or with "batch" in its name is the
batch, taken as 1 (with static shapes, the first input's first dimension is the batch); other
symbolic dimensions are given by name (`load("m.onnx", seq=128)`).
Numbers are per sample. Operators that only reshape or describe shapes (Reshape, Flatten,
Squeeze, Unsqueeze, Identity, Shape, Cast, ...) make no layer; operators that move data
(Transpose, Slice, Pad, Split, Expand, ...) are `eltwise` copies. An operator without a
handler is reported by name in `Model.unsupported` (with its count) and in the table as an
`eltwise` layer of zero FLOPs (its bytes still counted): its FLOPs are left out, never
silently.
"""
from __future__ import annotations

import os

from pysim._io import MAX_MODEL_BYTES, InputError, read_input
from pysim.models import layers as L
from pysim.models.layers import Layer, ModelError, prod
from pysim.models.model import Model

MAX_DIM = 1 << 40           # a dimension given by name (ONNX holds int64; FLOPs must stay finite)
MAX_NODES = 100_000         # operators (as ASTRA-sim workloads' layers: pysim.models.astra): about
                            # 3 s and 0.3 GB to import at the limit

UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Gelu": "gelu", "Erf": "erf",
         "Exp": "exp", "Sqrt": "sqrt", "Neg": "neg", "Clip": "clip",
         "LeakyRelu": "leaky_relu", "Reciprocal": "div", "Dropout": "dropout"}
BINARY_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow",
              "Max": "max", "Min": "min", "Sum": "add", "Where": "where"}
VIEWS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast", "CastLike"}
SHAPE_OPS = {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "NonZero"}
COPIES = {"Transpose", "Slice", "Pad", "Expand", "Tile", "Split", "Resize", "Upsample",
          "DepthToSpace", "SpaceToDepth"}
REDUCES = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
           "ReduceSumSquare", "ReduceL2"}


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class _Graph:
    """Shapes, constants, gradients and weights of a graph while its nodes are read."""

    def __init__(self, path, graph, shapes, batch):
        self.path = path
        self.shapes = shapes
        self.batch = batch
        self.inits = {t.name: tuple(t.dims) for t in graph.initializer}
        self.const = set(self.inits)
        self.grad = set()
        self.counted = set()
        self.source = {}          # a constant derived from initializers -> their names
        self.node = None
        self.where = ""

    def shape(self, name):
        s = self.shapes.get(name)
        if s is None or any(d is None or d <= 0 for d in s):
            raise ModelError(f"{self.path}: {self.where}: the shape of {name!r} is unknown "
                             f"after shape inference (give its symbolic dimensions by name, "
                             f"or export the model with static shapes)")
        return s

    def per_sample(self, name, axis=0):
        """(shape without the batch dimension, 1), or (the whole shape, batch) when the
        tensor has no batch dimension there (its numbers are then shared by the batch)."""
        s = self.shape(name)
        if len(s) > axis and s[axis] == self.batch:
            return s[:axis] + s[axis + 1:], 1
        return s, self.batch

    def weight_shape(self, name, ndim):
        """The shape of a constant operand of `ndim` dimensions (an initializer, or a tensor
        computed from initializers only, such as a transposed weight), else None."""
        if name not in self.const:
            return None
        s = self.inits.get(name) or self.shapes.get(name)
        return s if s is not None and len(s) == ndim and all(s) else None

    def origins(self, name):
        return {name} if name in self.inits else self.source.get(name, set())

    def weights(self, names):
        """Parameters in the initializers these tensors come from, not counted yet (each
        counts once: tied weights stay tied)."""
        n = 0
        for x in names:
            for w in self.origins(x) if x else ():
                if w not in self.counted:
                    self.counted.add(w)
                    n += prod(self.inits[w])
        return n


def _scaled(layer, div):
    if div != 1:
        for k in ("fwd_flops", "bwd_input_flops", "bwd_weight_flops"):
            setattr(layer, k, getattr(layer, k) / div)
        for k in ("in_elems", "out_elems", "stash_elems", "stash_mask_bytes", "saved_elems",
                  "saved_fixed_bytes"):
            setattr(layer, k, -(-getattr(layer, k) // div))
        layer.saves = tuple((r, -(-n // div), dt) for r, n, dt in layer.saves)
    return layer


def _pads2d(g, a, in_hw, k, s, d):
    """ONNX pads (top, left, bottom, right), with auto_pad resolved."""
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-in_hw[i] // s[i])
            total = max((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_hw[i], 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + 2] = (small, big) if auto == "SAME_UPPER" else (big, small)
        return tuple(pads)
    if auto == "VALID":
        return (0, 0, 0, 0)
    return tuple(a.get("pads", (0, 0, 0, 0)))


def _check_out(g, layer, out_name):
    want, _ = g.per_sample(out_name)
    if tuple(want) != tuple(layer.out_shape) and prod(want) != prod(layer.out_shape):
        raise ModelError(f"{g.path}: {g.where}: computed output shape {layer.out_shape} "
                         f"differs from the shape ONNX infers, {want}")
    layer.out_shape = want
    return layer


def _conv(g, node, name, a):
    x, w = node.input[0], node.input[1]
    xs, div = g.per_sample(x)
    ws = g.weight_shape(w, 4)
    if len(xs) != 3 or ws is None:
        return None                     # not a 2-D convolution with constant weights
    m, _, kh, kw = ws
    s = tuple(a.get("strides", (1, 1)))
    d = tuple(a.get("dilations", (1, 1)))
    pads = _pads2d(g, a, xs[1:], (kh, kw), s, d)
    bias = len(node.input) > 2 and bool(node.input[2])
    layer = L.conv(name, xs, m, (kh, kw), s, pads, a.get("group", 1), bias, d,
                   input_grad=x in g.grad)
    layer.params = g.weights(node.input[1:])
    return _scaled(_check_out(g, layer, node.output[0]), div)


def _linear(g, name, x, w_shape, w_names, bias, out, trans=False):
    xs, div = g.per_sample(x)
    k, n = (w_shape[1], w_shape[0]) if trans else (w_shape[0], w_shape[1])
    if xs[-1] != k:
        raise ModelError(f"{g.path}: {g.where}: input of shape {xs} and weights of shape "
                         f"{w_shape} do not compose")
    layer = L.linear(name, xs, n, bias, input_grad=x in g.grad)
    layer.params = g.weights(w_names)
    return _scaled(_check_out(g, layer, out), div)


def _matmul_acts(g, name, a_name, b_name, out):
    a, b = list(g.shape(a_name)), list(g.shape(b_name))
    if len(a) == 1:
        a = [1] + a
    if len(b) == 1:
        b = b + [1]
    lead_a, lead_b = a[:-2], b[:-2]
    n = max(len(lead_a), len(lead_b))
    lead_a = [1] * (n - len(lead_a)) + lead_a
    lead_b = [1] * (n - len(lead_b)) + lead_b
    lead = [max(x, y) for x, y in zip(lead_a, lead_b)]
    layer = L.matmul(name, tuple(lead + a[-2:]), tuple(lead + b[-2:]))
    layer.params = g.weights([a_name, b_name])
    layer.out_shape, _ = g.per_sample(out)
    return _scaled(layer, g.batch)


def _is_lookup(g, node):
    """A Gather of rows of a constant 2-D table: an embedding (its indices may be constant,
    as positions are)."""
    return (node.op_type == "Gather" and g.weight_shape(node.input[0], 2) is not None and
            _attrs(node).get("axis", 0) == 0)


def _handle(g, node, name, fused_bias):
    op, a = node.op_type, _attrs(node)
    ins = [i for i in node.input if i]
    out = node.output[0]
    acts = [i for i in ins if i not in g.const]
    if op == "Conv":
        return _conv(g, node, name, a)
    if op == "Gemm":
        x, w = ins[0], ins[1]
        ws = g.weight_shape(w, 2)
        if ws is not None and x not in g.const and not a.get("transA", 0):
            bias = len(ins) > 2
            return _linear(g, name, x, ws, ins[1:], bias, out, a.get("transB", 0))
        return _matmul_acts(g, name, ins[0], ins[1], out)
    if op == "MatMul":
        x, w = ins
        ws = g.weight_shape(w, 2)
        if ws is not None and x not in g.const:
            b = fused_bias.get(node.name or id(node))
            o = b[1] if b else out
            return _linear(g, name, x, ws, [w] + ([b[0]] if b else []), bool(b), o)
        return _matmul_acts(g, name, x, w, out)
    if op in ("BatchNormalization", "LayerNormalization"):
        xs, div = g.per_sample(ins[0])
        layer = L.norm(name, xs, "batch" if op[0] == "B" else "layer")
        layer.params = g.weights(ins[1:3])        # scale and shift; not running statistics
        return _scaled(layer, div)
    if op in ("MaxPool", "AveragePool"):
        xs, div = g.per_sample(ins[0])
        if len(xs) != 3:
            return None
        k = tuple(a["kernel_shape"])
        s = tuple(a.get("strides", (1, 1)))
        pads = _pads2d(g, a, xs[1:], k, s, (1, 1))
        layer = L.pool(name, xs, k, s, pads, "max" if op == "MaxPool" else "avg",
                       bool(a.get("ceil_mode", 0)))
        return _scaled(_check_out(g, layer, out), div)
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        xs, div = g.per_sample(ins[0])
        if len(xs) != 3:
            return None
        return _scaled(L.pool(name, xs, op="avg" if "Average" in op else "max"), div)
    if op in ("Softmax", "LogSoftmax"):
        xs, div = g.per_sample(out)
        return _scaled(L.softmax(name, xs), div)
    if op == "LSTM":
        x = ins[0]
        xs, div = g.per_sample(x, axis=1)          # X is (steps, batch, input)
        h = a["hidden_size"]
        direction = a.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        biases = 2 if len(node.input) > 3 and node.input[3] else 0
        layer = L.lstm(name, xs, h, direction == "bidirectional", biases,
                       input_grad=x in g.grad)
        layer.params = g.weights(node.input[1:4])
        return _scaled(layer, div)
    if _is_lookup(g, node):
        rows, dim = g.weight_shape(ins[0], 2)
        idx, div = g.per_sample(ins[1])
        layer = L.embedding(name, rows, dim, lookups=max(1, prod(idx)))
        layer.params = g.weights([ins[0]])
        layer.out_shape, _ = g.per_sample(out)
        return _scaled(layer, div)
    if not (op in UNARY or op in BINARY_OPS or op in REDUCES or op in COPIES or
            op in ("Concat", "Gather")):
        return None
    outs, div = g.per_sample(out)
    if op in UNARY:
        return _scaled(L.eltwise(name, outs, UNARY[op]), div)
    if op in BINARY_OPS:
        layer = L.eltwise(name, outs, BINARY_OPS[op] if len(acts) > 1 else
                          ("scale" if op != "Where" else "where"), inputs=max(1, len(acts)))
        # a constant operand that is a vector (one dimension > 1) is a learned bias or
        # scale; scalars and larger constants (masks) are buffers of the export
        layer.params = g.weights([i for i in ins if i in g.const and
                                  sum(d > 1 for d in g.shapes.get(i) or ()) == 1])
        if layer.params:
            layer.weight_elems = layer.params
            layer.bwd_weight_flops = layer.fwd_flops
        return _scaled(layer, div)
    if op == "Concat":
        shapes = [g.per_sample(i)[0] for i in ins]
        return _scaled(L.eltwise(name, shapes[0], "concat", inputs=len(ins), out_shape=outs),
                       div)
    if op in REDUCES:
        xs, _ = g.per_sample(ins[0])
        return _scaled(L.eltwise(name, xs, "reduce", out_shape=outs), div)
    if op in COPIES or op == "Gather":
        xs, _ = g.per_sample(ins[0])
        layer = L.eltwise(name, xs, "copy", out_shape=xs)
        layer.out_shape = outs
        return _scaled(layer, div)
    return None


def load_onnx(path, **dims):
    """Read an ONNX model into a Model; `dims` gives symbolic dimensions by name."""
    try:
        import onnx
        from onnx import shape_inference
    except ImportError:
        raise ModelError(f"{path}: reading .onnx files needs the onnx package: "
                         f"pip install 'pysim[onnx]'") from None
    try:
        data = read_input(path, MAX_MODEL_BYTES, "model's .onnx file")
    except InputError as e:
        raise ModelError(str(e)) from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:       # a protobuf DecodeError, depending on the file
        raise ModelError(f"{path}: not a valid ONNX model ({type(e).__name__}: {e})") from None
    graph = model.graph
    if not len(graph.node):
        raise ModelError(f"{path}: the graph has no operators (no layers to train)")
    if len(graph.node) > MAX_NODES:      # (refused before shape inference, the costly part)
        raise ModelError(f"{path}: {len(graph.node):,} operators: at most {MAX_NODES:,} (each "
                         f"becomes a layer, and each layer ops in every plan built from it)")
    inits = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if not inputs:
        raise ModelError(f"{path}: the graph has no input")
    for k, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_DIM:
            raise ModelError(f"{path}: dimension {k} = {v!r}: expected an integer from 1 to "
                             f"{MAX_DIM:,}")
    symbols, used, batch = set(), set(), None
    for inp in inputs:
        for i, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if d.HasField("dim_value"):
                raise ModelError(f"{path}: input {inp.name!r} has size {d.dim_value} on axis "
                                 f"{i}; expected sizes >= 1")
            sym = d.dim_param
            symbols.add(sym)
            if sym in dims:
                d.dim_value = dims[sym]
                used.add(sym)
            elif i == 0 or sym == "N" or "batch" in sym.lower():
                d.dim_value = batch = 1       # the batch: numbers are per sample
            else:
                raise ModelError(f"{path}: input {inp.name!r} has the symbolic dimension "
                                 f"{sym or '?'!r} (axis {i}); give its size, e.g. "
                                 f"{sym or 'name'}=128")
    unknown = set(dims) - used
    if unknown:
        raise ModelError(f"{path}: no input has the symbolic dimension(s) "
                         f"{', '.join(sorted(unknown))}; its symbolic dimensions are "
                         f"{', '.join(sorted(s for s in symbols if s)) or 'none'}")
    try:
        model = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as e:
        raise ModelError(f"{path}: ONNX shape inference failed: {e}") from None
    graph = model.graph

    def shape_of(vi):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            return None
        return tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)

    shapes = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        shapes[vi.name] = shape_of(vi)
    for t in graph.initializer:
        shapes[t.name] = tuple(t.dims)
    if batch is None:                     # static shapes: the first input's first dimension
        first = shapes[inputs[0].name]
        batch = first[0] if first else 1
    g = _Graph(path, graph, shapes, batch)

    consumers = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    # MatMul + Add(bias initializer of the output width) -> one linear layer
    fused_bias, fused = {}, set()
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in g.inits:
            continue
        users = consumers.get(node.output[0], [])
        if len(users) != 1 or users[0].op_type != "Add":
            continue
        add = users[0]
        other = [i for i in add.input if i != node.output[0]]
        w = g.inits[node.input[1]]
        if len(other) == 1 and other[0] in g.inits and len(w) == 2 and \
                prod(g.inits[other[0]]) == w[1]:
            fused_bias[node.name or id(node)] = (other[0], add.output[0])
            fused.add(id(add))

    layers, names, unsupported = [], set(), {}
    alias = {}                                # tensor name -> the tensor it is a view of
    graph_inputs = {i.name for i in inputs}
    for idx, node in enumerate(graph.node):
        op = node.op_type
        name = node.name or f"{op}_{idx}"
        if name in names:
            k = 2
            while f"{name}#{k}" in names:
                k += 1
            name = f"{name}#{k}"
        g.where = f"node {name!r} ({op}, node {idx})"
        ins = [i for i in node.input if i]
        if id(node) in fused:
            continue
        if op in SHAPE_OPS or not ins or (all(i in g.const for i in ins) and
                                          not _is_lookup(g, node)):
            g.const.update(node.output)     # folded at export or load: no work per sample
            src = set().union(*(g.origins(i) for i in ins)) if ins else set()
            for o in node.output:
                g.source[o] = src
            continue
        if op in VIEWS:
            if any(i in g.grad for i in ins):
                g.grad.update(node.output)
            for o in node.output:             # a view is its input's tensor
                alias[o] = alias.get(ins[0], ins[0])
            continue
        try:
            layer = _handle(g, node, name, fused_bias)
        except ModelError as e:
            msg = str(e)
            if msg.startswith(f"layer {name!r}: "):
                msg = f"{path}: {g.where}: {msg[len(f'layer {name!r}: '):]}"
            raise ModelError(msg) from None
        if layer is None:
            qualified = f"{node.domain}::{op}" if node.domain not in ("", "ai.onnx") else op
            unsupported[qualified] = unsupported.get(qualified, 0) + 1
            known = g.shapes.get(node.output[0])
            if known is None or not all(known):
                raise ModelError(f"{path}: {g.where}: operator {qualified} is not supported "
                                 f"and ONNX infers no shape for its output "
                                 f"{node.output[0]!r}, so the layers after it cannot be "
                                 f"computed (export it as standard ONNX operators)")
            outs, div = g.per_sample(node.output[0])
            n_in = sum(prod(g.per_sample(i)[0]) for i in ins if i not in g.const)
            layer = _scaled(Layer(name, "eltwise", in_elems=n_in, out_elems=prod(outs),
                                  params=g.weights(ins), weight_elems=0, out_shape=outs,
                                  op=f"unsupported {qualified}"), div)
        names.add(name)
        # the tensors it reads and writes (views resolved); an element-wise layer keeping its
        # output whose input nobody else reads runs in place, as frameworks run ReLUs
        acts = [alias.get(i, i) for i in ins if i not in g.const and i not in g.inits]
        out = node.output[0]
        if op == "MatMul" and fused_bias.get(node.name or id(node)):
            out = fused_bias[node.name or id(node)][1]
        if layer.kind == "eltwise" and len(acts) == 1 and \
                [r for r, _, _ in layer.saves] == ["out"] and \
                len(consumers.get(ins[0], [])) == 1 and acts[0] not in graph_inputs:
            layer.inplace = True
            alias[out] = acts[0]
        layer.in_ids = tuple(acts)
        layer.out_id = alias.get(out, out)
        layers.append(layer)
        if layer.params or any(i in g.grad for i in ins):
            g.grad.update(o for o in node.output if o)
        if layer.params or any(i in g.grad for i in ins):
            b = fused_bias.get(node.name or id(node)) if op == "MatMul" else None
            if b:
                g.grad.add(b[1])          # the fused Add's output is the layer's
    input_shape, _ = g.per_sample(inputs[0].name)
    producer = " ".join(x for x in (model.producer_name, model.producer_version) if x)
    return Model(os.path.splitext(os.path.basename(path))[0], layers,
                 input_shape=input_shape,
                 source=f"ONNX model {os.path.basename(path)}" +
                        (f" (exported by {producer})" if producer else ""),
                 config=dict(dims), unsupported=unsupported)
