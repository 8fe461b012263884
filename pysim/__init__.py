"""pysim: a cycle-level simulator of the network joining accelerators, memory nodes and hosts.

Python API::

    import pysim
    cfg = pysim.load("mesh8x8", {"traffic.injection_rate": 0.2})   # a file or a shipped name
    result = pysim.simulate(cfg)
    result.to_dict()
    rows = pysim.sweep(cfg, {"traffic.injection_rate": [0.1, 0.2]})
    pysim.plot.latency_load(rows, "fig.png")      # figures: pysim.plot (matplotlib)

Modules loaded on first use: `pysim.plot` (figures), `pysim.workload` (op graphs and
collectives), `pysim.systems` (the shipped systems).
"""
__version__ = "0.1.0"

import importlib  # noqa: E402

from pysim.config import Config, ConfigError, PysimWarning, from_dict, load  # noqa: E402
from pysim.sim import DeadlockError, SimulationError, simulate  # noqa: E402
from pysim.sweep import sweep, to_pandas  # noqa: E402

__all__ = ["Config", "ConfigError", "DeadlockError", "PysimWarning", "SimulationError",
           "from_dict", "load", "simulate", "sweep", "to_pandas", "__version__", "plot",
           "workload", "systems"]

_LAZY = ("plot", "workload", "systems")


def __getattr__(name):
    """pysim.plot, pysim.workload and pysim.systems without importing them (and matplotlib)
    with pysim itself."""
    if name in _LAZY:
        return importlib.import_module(f"pysim.{name}")
    raise AttributeError(f"module 'pysim' has no attribute {name!r}")
