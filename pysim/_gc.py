"""`quiet_gc`: a function run with Python's cyclic garbage collector paused."""
from __future__ import annotations

import functools
import gc


def quiet_gc(fn):
    """fn with Python's cyclic garbage collector paused while it runs: building a model's
    layer table or an op graph, and compiling or printing them, makes millions of small
    containers and no cycles, and each of the collector's passes would walk them all again
    (a fifth of a large run's time)."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return paused
