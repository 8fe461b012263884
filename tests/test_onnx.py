"""ONNX import: small graphs built here in code (no download), compared with the zoo's
definitions of the same networks."""
import numpy as np
import pytest

from pysim import models
from pysim.models import ModelError
from pysim.models import layers as L

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


class G:
    """A graph under construction. Weights carry their shape only (`data=False`: an ONNX
    TensorProto with dims and no values, which shape inference and the import accept),
    so a 25-million-parameter network builds in milliseconds."""

    def __init__(self, data=False):
        self.nodes, self.inits, self.n, self.data = [], [], 0, data

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def weight(self, shape, value=None):
        n = self.name("w")
        if value is not None:
            self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        elif self.data:
            self.inits.append(numpy_helper.from_array(np.zeros(shape, np.float32), n))
        else:
            self.inits.append(TensorProto(name=n, data_type=TensorProto.FLOAT, dims=shape))
        return n

    def op(self, op, inputs, name=None, outputs=1, **attrs):
        name = name or self.name(op)
        outs = [f"{name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def save(self, path, inputs, output, opset=20):
        ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, "g", ins, [out], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pysim-tests")
        onnx.save(m, str(path))
        return str(path)

    # layers
    def conv(self, x, cin, cout, k, s=1, p=0, bias=False, name=None):
        ins = [x, self.weight([cout, cin, k, k])] + ([self.weight([cout])] if bias else [])
        return self.op("Conv", ins, name, kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)

    def bn(self, x, c):
        return self.op("BatchNormalization", [x] + [self.weight([c]) for _ in range(4)])


def onnx_resnet50(g, x):
    """ResNet-50 v1.5 written out node by node, as PyTorch exports it."""
    def cbr(x, cin, cout, k, s=1, p=0, relu=True):
        x = g.bn(g.conv(x, cin, cout, k, s, p), cout)
        return g.op("Relu", [x]) if relu else x
    x = cbr(x, 3, 64, 7, 2, 3)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (n, w) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for b in range(n):
            s = 2 if b == 0 and stage else 1
            y = cbr(x, cin, w, 1)
            y = cbr(y, w, w, 3, s, 1)
            y = cbr(y, w, 4 * w, 1, relu=False)
            short = cbr(x, cin, 4 * w, 1, s, relu=False) if b == 0 else x
            x = g.op("Relu", [g.op("Add", [y, short])])
            cin = 4 * w
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    return g.op("Gemm", [x, g.weight([1000, 2048]), g.weight([1000])], transB=1)


def test_resnet50_from_onnx_matches_the_zoo(tmp_path):
    g = G()
    out = onnx_resnet50(g, "image")
    path = g.save(tmp_path / "resnet50.onnx", [("image", TensorProto.FLOAT,
                                                 ["N", 3, 224, 224])], out)
    m = models.load(path)
    zoo = models.get("resnet50")
    loss = zoo.layers[-1]
    assert loss.kind == "loss"                   # the export has no loss
    assert m.params == zoo.params == 25_557_032
    assert m.fwd_flops == pytest.approx(zoo.fwd_flops - loss.fwd_flops, rel=1e-12)
    assert m.bwd_flops == pytest.approx(zoo.bwd_flops - loss.bwd_flops, rel=1e-12)
    assert m.activation_bytes() == zoo.activation_bytes() - loss.bytes()["stash"]
    # layer by layer: same kinds and output shapes, in the same order
    assert [(l.kind, l.out_shape) for l in m.layers] == \
        [(l.kind, l.out_shape) for l in zoo.layers[:-1]]
    assert not m.unsupported and m.input_shape == (3, 224, 224)
    assert m.layers[0].bwd_input_flops == 0       # the image needs no gradient
    assert "pysim-tests" in m.source


def onnx_gpt(g, ids, layers, h, heads, s, vocab):
    """A GPT-style decoder as PyTorch exports one: MatMul + Add for linear layers, attention
    decomposed into reshapes, transposes, two MatMuls, a scale, a causal mask and a
    softmax; the LM head uses the transposed token embedding (tied)."""
    d = h // heads
    wte = g.weight([vocab, h])
    x = g.op("Gather", [wte, ids])
    pos = g.weight([s], np.arange(s, dtype=np.int64))
    x = g.op("Add", [x, g.op("Gather", [g.weight([s, h]), pos])])
    shape_heads = g.weight([4], np.array([1, s, heads, d], np.int64))
    shape_back = g.weight([3], np.array([1, s, h], np.int64))
    mask = g.weight([s, s], np.triu(np.full((s, s), -1e4, np.float32), 1))
    scale = g.weight([], np.array(np.sqrt(d), np.float32))

    def linear(x, i, o):
        return g.op("Add", [g.op("MatMul", [x, g.weight([i, o])]), g.weight([o])])

    def ln(x):
        return g.op("LayerNormalization", [x, g.weight([h]), g.weight([h])], axis=-1)

    for _ in range(layers):
        y = linear(ln(x), h, 3 * h)
        q, k, v = g.op("Split", [y, g.weight([3], np.array([h] * 3, np.int64))], axis=2,
                       outputs=3)
        q, k, v = (g.op("Transpose", [g.op("Reshape", [t, shape_heads])], perm=[0, 2, 1, 3])
                   for t in (q, k, v))
        kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
        att = g.op("Div", [g.op("MatMul", [q, kt]), scale])
        att = g.op("Softmax", [g.op("Add", [att, mask])], axis=-1)
        y = g.op("MatMul", [att, v])
        y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), shape_back])
        x = g.op("Add", [linear(y, h, h), x])
        y = g.op("Gelu", [linear(ln(x), h, 4 * h)])
        x = g.op("Add", [linear(y, 4 * h, h), x])
    x = ln(x)
    return g.op("MatMul", [x, g.op("Transpose", [wte], perm=[1, 0])])


def test_gpt_from_onnx_matches_the_zoo(tmp_path):
    layers, h, heads, s, vocab = 2, 64, 4, 16, 100
    g = G(data=True)
    out = onnx_gpt(g, "ids", layers, h, heads, s, vocab)
    path = g.save(tmp_path / "gpt.onnx", [("ids", TensorProto.INT64, ["batch", s])], out)
    m = models.load(path)
    zoo = models.get("transformer", layers=layers, hidden=h, heads=heads, seq=s, vocab=vocab,
                     dropout=0)
    assert m.params == zoo.params            # the head is tied: the embedding counts once
    loss = zoo.layers[-1]
    assert m.fwd_flops == pytest.approx(zoo.fwd_flops - loss.fwd_flops, rel=1e-12)
    kinds = lambda model: sorted(l.kind for l in model.layers if l.kind in  # noqa: E731
                                 ("linear", "embedding", "norm", "softmax"))
    assert kinds(m) == kinds(zoo) + ["softmax"] * layers      # the zoo's is inside attention
    lin = [l for l in m.layers if l.kind == "linear"]
    assert [l.out_shape for l in lin[:4]] == [(s, 3 * h), (s, h), (s, 4 * h), (s, h)]
    assert lin[-1].params == 0 and lin[-1].weight_elems == h * vocab
    assert not m.unsupported


def test_symbolic_dimensions(tmp_path):
    g = G()
    y = g.op("MatMul", ["x", g.weight([8, 4])])
    path = g.save(tmp_path / "m.onnx", [("x", TensorProto.FLOAT, ["batch", "seq", 8])], y)
    with pytest.raises(ModelError, match="symbolic dimension 'seq'.*seq=128"):
        models.load(path)
    m = models.load(path, seq=10)
    assert m.layers[0].out_shape == (10, 4) and m.fwd_flops == 2 * 10 * 8 * 4
    assert m.input_shape == (10, 8)
    with pytest.raises(ModelError, match="no input has the symbolic dimension.*sq"):
        models.load(path, seq=10, sq=3)


def test_a_fixed_batch_is_divided_out(tmp_path):
    g = G()
    y = g.op("Relu", [g.conv("x", 3, 8, 3, p=1, bias=True)])
    path = g.save(tmp_path / "b.onnx", [("x", TensorProto.FLOAT, [4, 3, 10, 10])], y)
    m = models.load(path)
    ref = L.conv("c", (3, 10, 10), 8, 3, padding=1)
    assert m.layers[0].fwd_flops == ref.fwd_flops and m.params == ref.params
    assert m.layers[1].out_shape == (8, 10, 10)


def test_lstm(tmp_path):
    t, i, h = 7, 16, 32
    g = G()
    y = g.op("LSTM", ["x", g.weight([2, 4 * h, i]), g.weight([2, 4 * h, h]),
                      g.weight([2, 8 * h])], hidden_size=h, direction="bidirectional")
    path = g.save(tmp_path / "l.onnx", [("x", TensorProto.FLOAT, [t, "batch", i])], y)
    m = models.load(path)
    ref = L.lstm("r", (t, i), h, bidirectional=True, bias=2)
    assert m.params == ref.params == 2 * (4 * h * (i + h) + 8 * h)
    assert m.fwd_flops == ref.fwd_flops


def test_unsupported_operators_are_reported_by_name(tmp_path):
    g = G()
    y = g.op("Relu", ["x"])
    y = g.op("Einsum", [y, g.weight([8, 8])], equation="bi,ij->bj")
    y = g.op("Einsum", [y, g.weight([8, 8])], equation="bi,ij->bj")
    y = g.op("Hardmax", [y])
    path = g.save(tmp_path / "u.onnx", [("x", TensorProto.FLOAT, ["N", 8])], y)
    m = models.load(path)
    assert m.unsupported == {"Einsum": 2, "Hardmax": 1}
    assert m.params == 2 * 64                   # their weights still count
    assert m.fwd_flops == 8                     # only the ReLU's: theirs are left out
    bad = [l for l in m.layers if l.op and l.op.startswith("unsupported")]
    assert [l.op for l in bad] == ["unsupported Einsum"] * 2 + ["unsupported Hardmax"]
    assert all(l.out_elems == 8 for l in bad)   # their bytes are counted
    assert m.to_dict()["unsupported"] == {"Einsum": 2, "Hardmax": 1}


def test_bad_files_and_shapes(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x08\x07garbage that is not protobuf \xff\xff\xff")
    with pytest.raises(ModelError, match="junk.onnx: not a valid ONNX model"):
        models.load(str(p))
    with pytest.raises(ModelError, match="no such file"):
        models.load(str(tmp_path / "missing.onnx"))
    # a kernel larger than its input: the error names the node
    g = G()
    y = g.conv("x", 3, 8, 7, name="conv_big")
    path = g.save(tmp_path / "k.onnx", [("x", TensorProto.FLOAT, ["N", 3, 5, 5])], y)
    with pytest.raises(ModelError, match="node 'conv_big'.*kernel 7.*exceeds.*5"):
        models.load(path)
    # shapes that do not compose: ONNX's shape inference names the node
    g = G()
    y = g.op("MatMul", ["x", g.weight([9, 4])], name="mm_bad")
    path = g.save(tmp_path / "c.onnx", [("x", TensorProto.FLOAT, ["N", 8])], y)
    with pytest.raises(ModelError, match="mm_bad"):
        models.load(path)


def test_a_custom_operator_without_shapes_is_named(tmp_path):
    g = G()
    g.nodes.append(helper.make_node("Foo", ["x"], ["y"], name="foo1", domain="com.example"))
    z = g.op("Relu", ["y"])
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])]
    graph = helper.make_graph(g.nodes, "g", ins,
                              [helper.make_tensor_value_info(z, TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.example", 1)])
    onnx.save(m, str(tmp_path / "c.onnx"))
    with pytest.raises(ModelError, match="node 'foo1'.*com.example::Foo is not supported.*"
                                         "infers no shape"):
        models.load(str(tmp_path / "c.onnx"))
