"""The boundary between pysim and its compiled core, `csim._engine`.

Every module of pysim reaches the compiled core through `core`, never by importing csim
itself: `core.Engine(...)`, `core.next_hops(...)`. The extension is imported the first time an
attribute of `core` is read, so configurations parse, the configuration reference generates
and `pysim --help` answers without the extension built (or loaded); running anything needs it.
This is the only import of csim in pysim, and the only deferred import of a required module
(tests/test_layers.py allows exactly this one).
"""
from __future__ import annotations


class _Core:
    """`csim._engine`, imported on first use."""

    __slots__ = ()
    _module = None

    def __getattr__(self, name):
        module = _Core._module
        if module is None:
            from csim import _engine as module   # the deferred import (see the docstring)
            _Core._module = module
        return getattr(module, name)

    def __repr__(self):
        return "<csim._engine, loaded on first use>"


core = _Core()
