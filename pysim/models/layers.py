"""Layer kinds: one function per kind computes a layer's numbers from its shape.

Every number is per sample (one image, one sequence, one sentence pair, one click record)
except the weights. Conventions, the same for every kind:

- FLOPs = 2 x multiply-accumulates for convolutions, linear layers, matrix products, LSTMs and
  attention; bias additions are not counted. Element-wise work is counted at a few FLOPs per
  element (`ELTWISE_FLOPS`, `NORM_FLOPS`, `SOFTMAX_FLOPS`, `LOSS_FLOPS`): small beside the
  matrix products, and never what a layer's roofline time hinges on.
- Backward: the input gradient of a product costs what its forward costs (both operands'
  gradients for a product of two activations: twice); the weight gradient costs the forward
  again. A layer whose input needs no gradient (it reads the model's input) has
  `bwd_input_flops = 0`. Element-wise kinds: the input gradient costs the forward.
- Tensors kept for the backward pass (`saves`): each layer declares what its backward pass
  needs, as PyTorch's autograd saves it: a product keeps its input(s); a normalisation its
  input; ReLU, sigmoid, tanh and softmax their output; GELU its input; max pooling its input
  and the int64 index of each output's maximum; windowed average pooling its input (global
  average pooling, a mean, nothing); additions and concatenations nothing. Dropout keeps a one-byte mask
  per element. A declaration names its tensor by role -- an input ("in0", "in1", "in*" for
  each), the layer's output ("out") or a tensor of its own ("own") -- with its elements and
  dtype ("act": at the activations' precision; "u8", "i64": one and eight bytes whatever
  the precision). In-place layers (`inplace`, CNNs' ReLUs) write their output over their
  input: one tensor. A model built by `pysim.models.Net` knows which layer produced each
  tensor, so a tensor kept by several layers (a ReLU's output, kept by the ReLU and by the
  convolution it feeds) is counted once (`pysim.models.tensors`): `stash_elems` and
  `stash_mask_bytes` are the elements and fixed-size bytes of the tensors a layer is the
  last to need in the backward pass (those freed after its backward ops), `saved_elems`
  and `saved_fixed_bytes` what its backward ops read.
"""
from __future__ import annotations

from pysim.errors import ModelError  # noqa: F401  (re-exported: pysim.models.ModelError)
from pysim.models.precision import precision_bytes, weight_traffic


KINDS = ("conv", "linear", "matmul", "lstm", "embedding", "attention", "norm", "pool",
         "eltwise", "softmax", "interaction", "loss", "given")
TP_SPLITS = ("column", "row", "heads", "replicated", "expert", None)

# FLOPs per output element of element-wise operations (forward)
# ("reduce": per input element; "copy" moves data: a transpose, slice, pad or cast)
ELTWISE_FLOPS = {"relu": 1, "add": 1, "sub": 1, "mul": 1, "div": 1, "gelu": 8, "sigmoid": 4,
                 "tanh": 4, "exp": 4, "erf": 4, "sqrt": 4, "pow": 1, "neg": 1, "clip": 1,
                 "leaky_relu": 1, "max": 1, "min": 1, "where": 1, "reduce": 1, "dropout": 1,
                 "scale": 1, "concat": 0, "copy": 0}
# what an element-wise op keeps for backward: its "input", its "output", "mask" (1 byte per
# element) or nothing
ELTWISE_STASH = {"relu": "output", "add": None, "sub": None, "mul": "input", "div": "input",
                 "gelu": "input", "sigmoid": "output", "tanh": "output", "exp": "output",
                 "erf": "input", "sqrt": "output", "pow": "input", "neg": None,
                 "clip": "input", "leaky_relu": "input", "max": "input", "min": "input",
                 "where": None, "reduce": None, "dropout": "mask", "scale": None,
                 "concat": None, "copy": None}
BINARY = ("add", "sub", "mul", "div", "max", "min")   # n inputs: n - 1 operations
NORM_FLOPS = 7       # per element: sum, sum of squares (2), normalise (2), scale and shift (2)
SOFTMAX_FLOPS = 5    # per element: max, subtract, exp, sum, divide
LOSS_FLOPS = 6       # per logit: a softmax and the log-likelihood terms
DTYPE_BYTES = {"u8": 1, "i64": 8}    # saved tensors whose size ignores the precision


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class Layer:
    """One layer of a model's table; see the module's conventions. Numbers per sample,
    weights not."""

    __slots__ = ("name", "kind", "params", "fwd_flops", "bwd_input_flops", "bwd_weight_flops",
                 "in_elems", "out_elems", "weight_elems", "stash_elems", "stash_mask_bytes",
                 "in_shape", "out_shape", "tp", "table", "given", "op", "saves", "inplace",
                 "saved_elems", "saved_fixed_bytes", "in_ids", "out_id", "heads")

    def __init__(self, name, kind, *, params=0, fwd_flops=0.0, bwd_input_flops=0.0,
                 bwd_weight_flops=0.0, in_elems=0, out_elems=0, weight_elems=None,
                 stash_elems=0, stash_mask_bytes=0, in_shape=(), out_shape=(), tp=None,
                 table=None, given=None, op=None, saves=None, inplace=False, heads=None):
        self.name = name
        self.kind = kind
        self.params = int(params)
        self.fwd_flops = float(fwd_flops)
        self.bwd_input_flops = float(bwd_input_flops)
        self.bwd_weight_flops = float(bwd_weight_flops)
        self.in_elems = int(in_elems)
        self.out_elems = int(out_elems)
        self.weight_elems = int(params if weight_elems is None else weight_elems)
        if saves is None:           # a layer of its own: what it keeps is its own tensors
            saves = ((("own", stash_elems, "act"),) if stash_elems else ()) + \
                ((("own", stash_mask_bytes, "u8"),) if stash_mask_bytes else ())
        act = fixed = 0
        clean = type(saves) is tuple           # kept as given if already normal
        for s in saves:
            r, n, dt = s
            if type(n) is not int or type(s) is not tuple:
                n = int(n)
                clean = False
            if not n:
                clean = False
            elif dt == "act":
                act += n
            elif dt in DTYPE_BYTES:
                fixed += n * DTYPE_BYTES[dt]
            else:
                raise ValueError(f"layer {name!r}: saved dtype {dt!r}")
        self.saves = saves if clean else tuple((r, int(n), dt) for r, n, dt in saves
                                               if int(n))
        self.inplace = bool(inplace)
        self.saved_elems = act
        self.saved_fixed_bytes = fixed
        self.stash_elems = act                   # until a model counts shared tensors once
        self.stash_mask_bytes = fixed
        self.in_ids = None                       # tensor ids, given by Net
        self.out_id = None
        self.in_shape = tuple(in_shape)
        self.out_shape = tuple(out_shape)
        self.tp = tp
        self.table = table
        self.given = given
        self.op = op              # the operation within the kind (relu, max, batch, ...)
        self.heads = heads        # an attention core's heads (tensor parallelism splits them)

    @property
    def bwd_flops(self):
        return self.bwd_input_flops + self.bwd_weight_flops

    def bytes(self, precision="fp32"):
        """Bytes per sample read (activations in), written (activations out) and kept for
        the backward pass (`stash`), and the weights (not per sample) at `precision`: as
        stored (`weights`), and as each phase moves them (`weights_fwd`, `weights_bwd_input`,
        `weights_bwd_weight`: pysim.models.precision.weight_traffic)."""
        p = precision_bytes(precision)
        fwd, bin_, bw = weight_traffic(p, self.kind)
        return {"read": self.in_elems * p.act, "write": self.out_elems * p.act,
                "weights": self.weight_elems * p.weight,
                "weights_fwd": self.weight_elems * fwd,
                "weights_bwd_input": self.weight_elems * bin_,
                "weights_bwd_weight": self.weight_elems * bw,
                "stash": self.stash_elems * p.act + self.stash_mask_bytes,
                "saved": self.saved_elems * p.act + self.saved_fixed_bytes}

    def to_dict(self, precision=None):
        d = {k: getattr(self, k) for k in _SCALARS}
        d["saves"] = self.saves                 # (role, elements, dtype) triples
        d["in_shape"] = list(self.in_shape)
        d["out_shape"] = list(self.out_shape)
        if precision is not None:
            d["bytes"] = self.bytes(precision)
        return d

    def __repr__(self):
        return (f"Layer({self.name!r}, {self.kind}, params={self.params:,}, "
                f"fwd_flops={self.fwd_flops:.4g}, out_shape={self.out_shape})")


_SCALARS = tuple(k for k in Layer.__slots__                  # what to_dict copies as is
                 if k not in ("in_shape", "out_shape", "saves", "in_ids", "out_id"))


def _fail(name, msg):
    raise ModelError(f"layer {name!r}: {msg}")


def _pair(name, what, v):
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v, v)
    if (not isinstance(v, (tuple, list)) or len(v) != 2 or
            not all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        _fail(name, f"{what} = {v!r}: expected an integer or a pair of integers")
    return tuple(v)


def _check_shape(name, shape, ndim=None):
    if ndim is not None and len(shape) != ndim:
        _fail(name, f"input of shape {tuple(shape)}: expected {ndim} dimensions")
    if any((not isinstance(d, int)) or d <= 0 for d in shape):
        _fail(name, f"input of shape {tuple(shape)}: every dimension must be an integer > 0")


def _positive(name, what, v):
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        _fail(name, f"{what} = {v!r}: expected an integer > 0")
    return v


def _pads(name, padding):
    """Padding as an integer, a pair (height, width) or ONNX's four (top, left, bottom,
    right) -> (top, left, bottom, right)."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        p = tuple(padding)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in p):
            _fail(name, f"padding = {padding!r}: expected integers")
    else:
        ph, pw = _pair(name, "padding", padding)
        p = (ph, pw, ph, pw)
    if min(p) < 0:
        _fail(name, f"padding = {padding!r}: expected padding >= 0")
    return p


def _out_size(name, size, k, s, p0, p1, d, ceil_mode, axis):
    span = d * (k - 1) + 1
    if size + p0 + p1 < span:
        _fail(name, f"kernel {k} (dilation {d}) exceeds its input's {axis} of {size} "
                    f"(padding {p0 + p1})")
    n = size + p0 + p1 - span
    out = (-(-n // s) if ceil_mode else n // s) + 1
    if ceil_mode and (out - 1) * s >= size + p0:    # the last window must start in the input
        out -= 1
    return out


# --------------------------------------------------------------------------- products
def conv(name, in_shape, out_channels, kernel, stride=1, padding=0, groups=1, bias=True,
         dilation=1, input_grad=True):
    """2-D convolution over (C, H, W)."""
    _check_shape(name, in_shape, 3)
    c, h, w = in_shape
    _positive(name, "out_channels", out_channels)
    kh, kw = _pair(name, "kernel", kernel)
    sh, sw = _pair(name, "stride", stride)
    pt, pl, pb, pr = _pads(name, padding)
    dh, dw = _pair(name, "dilation", dilation)
    if min(kh, kw, sh, sw, dh, dw) < 1:
        _fail(name, f"kernel {kernel}, stride {stride}, dilation {dilation}: expected "
                    f"integers >= 1")
    _positive(name, "groups", groups)
    if c % groups or out_channels % groups:
        _fail(name, f"groups = {groups} does not divide both the {c} input and the "
                    f"{out_channels} output channels")
    oh = _out_size(name, h, kh, sh, pt, pb, dh, False, "height")
    ow = _out_size(name, w, kw, sw, pl, pr, dw, False, "width")
    out = (out_channels, oh, ow)
    out_elems = out_channels * oh * ow
    macs = out_elems * (c // groups) * kh * kw
    params = out_channels * (c // groups) * kh * kw + (out_channels if bias else 0)
    in_elems = c * h * w
    return Layer(name, "conv", params=params, fwd_flops=2 * macs,
                 bwd_input_flops=2 * macs if input_grad else 0, bwd_weight_flops=2 * macs,
                 in_elems=in_elems, out_elems=out_elems, saves=(("in0", in_elems, "act"),),
                 in_shape=in_shape, out_shape=out, op=f"{kh}x{kw}/{sh}")


def linear(name, in_shape, out_features, bias=True, tp=None, input_grad=True, tied=False):
    """A fully connected layer over the last dimension (the others are positions: tokens,
    time steps). `tied`: its weight matrix is another layer's (counted there, read here all
    the same); its bias is its own."""
    _check_shape(name, in_shape)
    _positive(name, "out_features", out_features)
    i = in_shape[-1]
    rows = prod(in_shape[:-1])
    macs = rows * i * out_features
    b = out_features if bias else 0
    w = i * out_features + b
    in_elems = rows * i
    out = tuple(in_shape[:-1]) + (out_features,)
    return Layer(name, "linear", params=b if tied else w, weight_elems=w, fwd_flops=2 * macs,
                 bwd_input_flops=2 * macs if input_grad else 0, bwd_weight_flops=2 * macs,
                 in_elems=in_elems, out_elems=rows * out_features,
                 saves=(("in0", in_elems, "act"),), in_shape=in_shape, out_shape=out, tp=tp)


def matmul(name, a_shape, b_shape, tp=None):
    """A batched product of two activations, (..., m, k) x (..., k, n): no weights; both
    inputs are kept and both get gradients."""
    _check_shape(name, a_shape)
    _check_shape(name, b_shape)
    if len(a_shape) < 2 or tuple(a_shape[:-2]) != tuple(b_shape[:-2]) or \
            len(a_shape) != len(b_shape) or a_shape[-1] != b_shape[-2]:
        _fail(name, f"shapes {tuple(a_shape)} and {tuple(b_shape)} do not compose "
                    f"(expected (..., m, k) x (..., k, n))")
    batch = prod(a_shape[:-2])
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    macs = batch * m * k * n
    ins = prod(a_shape) + prod(b_shape)
    return Layer(name, "matmul", fwd_flops=2 * macs, bwd_input_flops=4 * macs, in_elems=ins,
                 out_elems=batch * m * n,
                 saves=(("in0", prod(a_shape), "act"), ("in1", prod(b_shape), "act")),
                 in_shape=a_shape,
                 out_shape=tuple(a_shape[:-2]) + (m, n), tp=tp)


def lstm(name, in_shape, hidden, bidirectional=False, bias=True, input_grad=True):
    """An LSTM layer over (T, I): four gates of `hidden` units per direction, one bias per
    gate unit (`bias=2`: two, as cuDNN, PyTorch and ONNX keep them). Keeps, per step and
    direction, its input, the previous hidden state, the cell state, its tanh and the four
    gate activations."""
    _check_shape(name, in_shape, 2)
    _positive(name, "hidden", hidden)
    t, i = in_shape
    dirs = 2 if bidirectional else 1
    macs = dirs * t * 4 * hidden * (i + hidden)
    gates = dirs * t * hidden * 20          # sigmoid x3, tanh x2, and the cell update
    params = dirs * (4 * hidden * (i + hidden) + 4 * hidden * int(bias))
    out = (t, dirs * hidden)
    return Layer(name, "lstm", params=params, fwd_flops=2 * macs + gates,
                 bwd_input_flops=(2 * macs if input_grad else 0) + gates,
                 bwd_weight_flops=2 * macs, in_elems=t * i, out_elems=t * dirs * hidden,
                 saves=(("in0", t * i, "act"), ("own", dirs * t * 7 * hidden, "act")),
                 in_shape=in_shape, out_shape=out,
                 op="bidirectional" if bidirectional else None)


def embedding(name, rows, dim, lookups=1, pooled=False, table=None, tp=None):
    """A table of `rows` x `dim` weights, `lookups` rows read per sample; `pooled` sums them
    into one vector (DLRM's bags), else one output row per lookup (tokens). Reads only the
    rows it looks up; its input (indices) is not an activation."""
    _positive(name, "rows", rows)
    _positive(name, "dim", dim)
    _positive(name, "lookups", lookups)
    adds = (lookups - 1) * dim if pooled else 0
    out = (dim,) if pooled else (lookups, dim)
    return Layer(name, "embedding", params=rows * dim, weight_elems=lookups * dim,
                 fwd_flops=adds, bwd_weight_flops=lookups * dim, in_elems=0,
                 out_elems=prod(out), in_shape=(lookups,), out_shape=out, table=table, tp=tp,
                 op="bag" if pooled else None)


def attention(name, q_len, kv_len, hidden, heads, dropout=False, causal=False, tp="heads"):
    """The core of multi-head scaled dot-product attention: scores Q K^T, scaling, softmax,
    dropout of the probabilities, and their product with V. In: Q (q_len x hidden), K and V
    (kv_len x hidden); out: q_len x hidden. The projections are separate linear layers.
    `causal` masks the upper triangle; the work is counted in full, as kernels do it. Keeps
    Q, K, V, the probabilities, and (with dropout) the dropped probabilities and the mask."""
    for what, v in (("q_len", q_len), ("kv_len", kv_len), ("hidden", hidden),
                    ("heads", heads)):
        _positive(name, what, v)
    if hidden % heads:
        _fail(name, f"hidden size {hidden} is not a multiple of heads = {heads}")
    scores = heads * q_len * kv_len
    macs = 2 * q_len * kv_len * hidden                       # Q K^T and P V
    elt = scores * (1 + SOFTMAX_FLOPS + (1 if dropout else 0) + (1 if causal else 0))
    ins = q_len * hidden + 2 * kv_len * hidden
    stash = ins + scores * (2 if dropout else 1)
    return Layer(name, "attention", fwd_flops=2 * macs + elt, bwd_input_flops=4 * macs + elt,
                 in_elems=ins, out_elems=q_len * hidden,
                 saves=(("in0", ins, "act"), ("own", stash - ins, "act"),
                        ("own", scores if dropout else 0, "u8")),
                 in_shape=(q_len, 3 * hidden) if q_len == kv_len else (q_len, hidden),
                 out_shape=(q_len, hidden), tp=tp, op="causal" if causal else "dot",
                 heads=heads)


def additive_attention(name, q_len, kv_len, hidden, input_grad=True):
    """Additive (Bahdanau) attention of `q_len` queries over `kv_len` memory vectors, all of
    `hidden` units: memory and query projections (no bias), a tanh of their sum, the score
    vector v, a softmax over the memory and the weighted sum of the memory."""
    for what, v in (("q_len", q_len), ("kv_len", kv_len), ("hidden", hidden)):
        _positive(name, what, v)
    proj = kv_len * hidden * hidden + q_len * hidden * hidden
    pair = q_len * kv_len * hidden
    macs_w = proj + pair                      # projections and the v-dot: weight products
    macs = macs_w + pair                      # + the context sum
    elt = pair * 2 + q_len * kv_len * SOFTMAX_FLOPS      # add and tanh; softmax
    params = 2 * hidden * hidden + hidden
    ins = (q_len + kv_len) * hidden
    return Layer(name, "attention", params=params, fwd_flops=2 * macs + elt,
                 bwd_input_flops=(2 * macs + 2 * pair + elt) if input_grad else 0,
                 bwd_weight_flops=2 * macs_w, in_elems=ins, out_elems=q_len * hidden,
                 stash_elems=ins + pair + q_len * kv_len, in_shape=(q_len, hidden),
                 out_shape=(q_len, hidden), op="additive")


def interaction(name, vectors, dim, self_interaction=False):
    """DLRM's dot-product feature interaction: the pairwise dot products of `vectors`
    vectors of `dim` (computed as one product X X^T, as implementations do), the strictly
    lower triangle (with the diagonal if `self_interaction`) concatenated to the first
    vector (the dense features)."""
    _positive(name, "vectors", vectors)
    _positive(name, "dim", dim)
    pairs = vectors * (vectors + 1) // 2 if self_interaction else vectors * (vectors - 1) // 2
    macs = vectors * vectors * dim
    ins = vectors * dim
    return Layer(name, "interaction", fwd_flops=2 * macs, bwd_input_flops=4 * macs,
                 in_elems=ins, out_elems=dim + pairs, stash_elems=ins, in_shape=(vectors, dim),
                 out_shape=(dim + pairs,), op="dot")


# --------------------------------------------------------------------------- element-wise
def norm(name, shape, op="batch", affine=True, tp=None):
    """Batch normalisation (per channel: the first dimension) or layer normalisation (over
    the last dimension); `affine` adds a scale and a shift per channel or feature."""
    _check_shape(name, shape)
    if op not in ("batch", "layer"):
        _fail(name, f"normalisation {op!r}: expected 'batch' or 'layer'")
    n = prod(shape)
    ch = shape[0] if op == "batch" else shape[-1]
    return Layer(name, "norm", params=2 * ch if affine else 0,
                 fwd_flops=NORM_FLOPS * n, bwd_input_flops=NORM_FLOPS * n,
                 bwd_weight_flops=2 * n if affine else 0, in_elems=n, out_elems=n,
                 saves=(("in0", n, "act"),), in_shape=shape, out_shape=shape, tp=tp, op=op)


def pool(name, in_shape, kernel=None, stride=None, padding=0, op="max", ceil_mode=False):
    """Max or average pooling over (C, H, W); `kernel=None` pools globally (to C x 1 x 1)."""
    _check_shape(name, in_shape, 3)
    if op not in ("max", "avg"):
        _fail(name, f"pooling {op!r}: expected 'max' or 'avg'")
    c, h, w = in_shape
    if kernel is None:
        kh, kw, oh, ow = h, w, 1, 1
    else:
        kh, kw = _pair(name, "kernel", kernel)
        sh, sw = _pair(name, "stride", stride if stride is not None else kernel)
        pt, pl, pb, pr = _pads(name, padding)
        if min(kh, kw, sh, sw) < 1:
            _fail(name, f"kernel {kernel}, stride {stride}: expected integers >= 1")
        oh = _out_size(name, h, kh, sh, pt, pb, 1, ceil_mode, "height")
        ow = _out_size(name, w, kw, sw, pl, pr, 1, ceil_mode, "width")
    n_in, n_out = c * h * w, c * oh * ow
    flops = n_out * kh * kw
    return Layer(name, "pool", fwd_flops=flops, bwd_input_flops=flops, in_elems=n_in,
                 out_elems=n_out,
                 saves=(() if kernel is None and op == "avg" else (("in0", n_in, "act"),)) +
                 ((("own", n_out, "i64"),) if op == "max" else ()), in_shape=in_shape,
                 out_shape=(c, oh, ow), op=op if kernel is not None else f"global_{op}")


def eltwise(name, shape, op, inputs=1, tp=None, out_shape=None, inplace=False):
    """An element-wise operation (`ELTWISE_FLOPS`) over `inputs` tensors of `shape`; a concat
    takes its inputs' total and gives `out_shape`, a reduction gives `out_shape`. `inplace`
    writes the output over the (one) input, as torchvision's ReLUs do."""
    _check_shape(name, shape)
    if op not in ELTWISE_FLOPS:
        _fail(name, f"element-wise op {op!r}: expected one of {', '.join(ELTWISE_FLOPS)}")
    n = prod(shape)
    out_shape = tuple(shape) if out_shape is None else tuple(out_shape)
    n_out = prod(out_shape)
    n_in = n * inputs if op != "concat" else n_out
    per = n_in if op == "reduce" else n_out * max(1, inputs - 1 if op in BINARY else 1)
    flops = ELTWISE_FLOPS[op] * per
    keep = ELTWISE_STASH[op]
    if inplace and (inputs != 1 or n_out != n or keep == "input"):
        _fail(name, f"{op} cannot run in place (it keeps its input, or its output is not its "
                    f"input's size)")
    saves = {"input": (("in*", n_in // inputs, "act"),), "output": (("out", n_out, "act"),),
             "mask": (("own", n_out, "u8"),)}.get(keep, ())
    return Layer(name, "eltwise", fwd_flops=flops, bwd_input_flops=flops, in_elems=n_in,
                 out_elems=n_out, saves=saves, in_shape=shape, out_shape=out_shape, tp=tp,
                 op=op, inplace=inplace)


def softmax(name, shape, tp=None):
    _check_shape(name, shape)
    n = prod(shape)
    return Layer(name, "softmax", fwd_flops=SOFTMAX_FLOPS * n, bwd_input_flops=2 * n,
                 in_elems=n, out_elems=n, saves=(("out", n, "act"),), in_shape=shape,
                 out_shape=shape, tp=tp)


def loss(name, shape, op="cross_entropy", tp=None):
    """The training loss over logits of `shape` (cross entropy with its softmax, or binary
    cross entropy with its sigmoid): reads the logits, writes one number per sample, keeps
    the probabilities."""
    _check_shape(name, shape)
    n = prod(shape)
    return Layer(name, "loss", fwd_flops=LOSS_FLOPS * n, bwd_input_flops=2 * n, in_elems=n,
                 out_elems=1, stash_elems=n, in_shape=shape, out_shape=(1,), tp=tp, op=op)


COMM_TYPES = ("ALLREDUCE", "ALLTOALL", "ALLGATHER", "REDUCESCATTER", "NONE")


def given(name, fwd_cycles, ig_cycles, wg_cycles, update_cycles, fwd_comm, ig_comm, wg_comm):
    """A layer whose compute times (cycles) and collectives ((type, bytes)) are given, as
    ASTRA-sim workloads give them; its shape and FLOPs are unknown (zero)."""
    return Layer(name, "given", given={"fwd_cycles": fwd_cycles, "ig_cycles": ig_cycles,
                                       "wg_cycles": wg_cycles, "update_cycles": update_cycles,
                                       "fwd_comm": fwd_comm, "ig_comm": ig_comm,
                                       "wg_comm": wg_comm})
