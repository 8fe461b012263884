"""The zoo's registry: a model is a function from a few shape parameters to a `Model`,
registered by name with `@register("name")`."""
from __future__ import annotations

import difflib
import inspect

from pysim._gc import quiet_gc
from pysim.models.layers import ModelError
from pysim.models.precision import PRECISIONS

BUILDERS = {}


def register(name):
    """Decorator: add a builder `f(**params) -> Model` to the zoo as `name`. Its keyword
    parameters (with defaults) are what `get(name, **params)` accepts, with `precision`."""
    def deco(f):
        if name in BUILDERS:
            raise ValueError(f"model {name!r} is already registered")
        BUILDERS[name] = f
        return f
    return deco


def names():
    return sorted(BUILDERS)


def parameters(name):
    """The builder's parameters and their defaults."""
    sig = inspect.signature(_builder(name))
    return {p.name: p.default for p in sig.parameters.values()}


def _builder(name):
    try:
        return BUILDERS[name]
    except (KeyError, TypeError):
        known = sorted(BUILDERS)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ModelError(f"unknown model {name!r}{hint}; the zoo has: {', '.join(known)}") \
            from None


@quiet_gc
def get(name, **params):
    """Build the zoo's model `name`; `params` override its defaults (`precision` sets the
    default precision of its byte counts)."""
    f = _builder(name)
    precision = params.pop("precision", None)
    if precision is not None and precision not in PRECISIONS:
        raise ModelError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    accepted = parameters(name)
    for k in params:
        if k not in accepted:
            close = difflib.get_close_matches(k, list(accepted), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ModelError(f"model {name!r}: unknown parameter {k!r}{hint}; it takes "
                             f"{', '.join(accepted) or 'none'} and precision")
    model = f(**params)
    model.config = {**accepted, **params}
    if precision is not None:
        model.default_precision = precision
    return model


def check_int(model, what, v, lo=1, hi=None):
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        expected = f"an integer in {lo} .. {hi:,}" if hi is not None else f"an integer >= {lo}"
        raise ModelError(f"model {model!r}: {what} = {v!r}: expected {expected}")
    return v


MAX_BLOCKS = 20_000     # repeated blocks (transformer or LSTM layers, tables): a table of
                        # ~250,000 layers, about 0.7 GB; beyond it, an error and not a stall


def check_choice(model, what, v, choices):
    if v not in choices:
        raise ModelError(f"model {model!r}: {what} = {v!r}: expected one of "
                         f"{', '.join(map(str, choices))}")
    return v


