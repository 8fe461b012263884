"""Bytes per element at each training precision, and the optimizer's state per parameter.

`mixed` is mixed-precision training as Micikevicius et al. (ICLR 2018, "Mixed Precision
Training") define it: 16-bit activations, weights used in compute and gradients, a 32-bit
master copy of the weights, and 32-bit optimizer state. With Adam that is 2 + 2 + 4 + 8 = 16
bytes per parameter, the figure Rajbhandari et al. (SC 2020, "ZeRO") start from.

`amp` is automatic mixed precision as PyTorch runs it (`torch.autocast` with
`torch.cuda.amp.GradScaler`, and DistributedDataParallel; the PyTorch documentation's
"Automatic Mixed Precision package - torch.amp" and its CUDA AMP examples): the model keeps
its weights, their gradients and the optimizer state in fp32 (4 bytes each, no separate
master copy: the stored weights are the fp32 ones) and data-parallel replicas all-reduce
4-byte gradients; autocast runs the products (convolutions, linear layers, matrix products,
cuDNN's recurrent layers) in 16 bits on the tensor cores, so activations are 2 bytes and the
compute runs at the 16-bit rate. Micikevicius et al. keep the same fp32 weights as a master
copy beside 16-bit ones; AMP keeps only the fp32 weights and casts them as they are used.
What that cast costs in HBM traffic (`weight_traffic`), per weight of a cast layer:

- forward: autocast reads the fp32 weight (4) and writes its 16-bit copy (2), which the
  kernel reads (2): 8 bytes. The copy is cached for the rest of the forward pass and kept by
  autograd for the backward pass, so it is made once per forward pass.
- input gradient: the kernel reads the kept 16-bit copy: 2 bytes.
- weight gradient: the kernel writes a 16-bit gradient (2), and autograd's backward of the
  cast reads it (2) and writes the fp32 gradient (4): 8 bytes.

Layers autocast does not cast (embedding lookups, normalisations) read and write their fp32
weights and gradients directly. Activations are taken to be 2 bytes throughout (the ops
autocast runs in fp32, such as softmax and layer norm, are not singled out), and DDP's copy
of each gradient into its bucket (its default, gradient_as_bucket_view = False) is not
counted, under any precision.
"""
from __future__ import annotations

import difflib
from collections import namedtuple

from pysim.errors import ModelError

PrecisionBytes = namedtuple("PrecisionBytes", "act weight grad master cast")
PrecisionBytes.__doc__ = ("Bytes per element: act (activations), weight (weights as stored "
                          "and, unless cast, used in compute), grad (gradients, as "
                          "all-reduced), master (the fp32 master copy kept per weight; 0 "
                          "unless mixed), cast (the copy of a weight the compute reads when "
                          "autocast casts it per use; 0 when it reads the stored weight).")

PRECISIONS = {
    "fp32": PrecisionBytes(4, 4, 4, 0, 0),
    "fp16": PrecisionBytes(2, 2, 2, 0, 0),
    "bf16": PrecisionBytes(2, 2, 2, 0, 0),
    "mixed": PrecisionBytes(2, 2, 2, 4, 0),
    "amp": PrecisionBytes(2, 4, 4, 0, 2),
}
# the layer kinds whose weights autocast casts to 16 bits per use (its CUDA float16 list:
# convolutions, linear layers, matrix products, cuDNN's recurrent layers)
CAST_KINDS = frozenset(("conv", "linear", "matmul", "lstm"))
# precisions whose optimizer state is fp32
FP32_STATE = ("fp32", "mixed", "amp")
# optimizer state: values kept per parameter (SGD: the momentum; Adam: first and second moments)
OPTIMIZER_STATES = {"sgd": 1, "adam": 2}
# FLOPs per parameter of an optimizer step (SGD with momentum: momentum and weight updates;
# Adam: both moments, the bias corrections, the square root and the update). The step is
# memory-bound: its time is its bytes over the HBM bandwidth.
OPTIMIZER_FLOPS = {"sgd": 4, "adam": 12}


def _suggest(name, options):
    close = difflib.get_close_matches(str(name), list(options), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def precision_bytes(precision) -> PrecisionBytes:
    try:
        return PRECISIONS[precision]
    except (KeyError, TypeError):
        raise ModelError(f"precision {precision!r}: unknown{_suggest(precision, PRECISIONS)}; "
                         f"expected one of {', '.join(PRECISIONS)}") from None


def optimizer_bytes(optimizer, precision) -> int:
    """Bytes of optimizer state per parameter: SGD keeps a momentum, Adam two moments, each
    in fp32 for fp32, mixed and amp training, in 16 bits for pure fp16/bf16 training. (The
    fp32 master weights of mixed precision are `precision_bytes(...).master`, not counted
    here.)"""
    if optimizer not in OPTIMIZER_STATES:
        raise ModelError(f"optimizer {optimizer!r}: unknown{_suggest(optimizer, OPTIMIZER_STATES)}"
                         f"; expected one of {', '.join(OPTIMIZER_STATES)}")
    p = precision_bytes(precision)
    per_state = 4 if precision in FP32_STATE else p.weight
    return OPTIMIZER_STATES[optimizer] * per_state


def weight_traffic(pb, kind):
    """HBM bytes per weight element a layer of `kind` moves for its weights in each phase:
    (forward, input gradient, weight gradient). Without a cast the forward and the input
    gradient read the weight and the weight gradient writes the gradient. With one (`amp`,
    a kind in CAST_KINDS): the forward casts (reads the stored weight, writes the copy) and
    reads the copy, the input gradient reads the copy, and the weight gradient writes a
    16-bit gradient that the cast's backward reads and writes as the stored gradient."""
    if pb.cast and kind in CAST_KINDS:
        return pb.weight + 2 * pb.cast, pb.cast, 2 * pb.cast + pb.grad
    return pb.weight, pb.weight, pb.grad
