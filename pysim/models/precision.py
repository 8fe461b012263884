"""Bytes per element at each training precision, and the optimizer's state per parameter.

`mixed` is mixed-precision training as Micikevicius et al. (ICLR 2018, "Mixed Precision
Training") define it: 16-bit activations, weights used in compute and gradients, a 32-bit
master copy of the weights, and 32-bit optimizer state. With Adam that is 2 + 2 + 4 + 8 = 16
bytes per parameter, the figure Rajbhandari et al. (SC 2020, "ZeRO") start from.
"""
from __future__ import annotations

import difflib
from collections import namedtuple

from pysim.errors import ModelError

PrecisionBytes = namedtuple("PrecisionBytes", "act weight grad master")
PrecisionBytes.__doc__ = ("Bytes per element: act (activations), weight (weights used in "
                          "compute), grad (gradients), master (the fp32 master copy kept per "
                          "weight; 0 unless mixed).")

PRECISIONS = {
    "fp32": PrecisionBytes(4, 4, 4, 0),
    "fp16": PrecisionBytes(2, 2, 2, 0),
    "bf16": PrecisionBytes(2, 2, 2, 0),
    "mixed": PrecisionBytes(2, 2, 2, 4),
}
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
    in fp32 for fp32 and mixed training, in 16 bits for pure fp16/bf16 training. (The fp32
    master weights of mixed precision are `precision_bytes(...).master`, not counted here.)"""
    if optimizer not in OPTIMIZER_STATES:
        raise ModelError(f"optimizer {optimizer!r}: unknown{_suggest(optimizer, OPTIMIZER_STATES)}"
                         f"; expected one of {', '.join(OPTIMIZER_STATES)}")
    p = precision_bytes(precision)
    per_state = 4 if precision in ("fp32", "mixed") else p.weight
    return OPTIMIZER_STATES[optimizer] * per_state
