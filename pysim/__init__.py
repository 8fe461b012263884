"""pysim: a cycle-level simulator of the network joining accelerators, memory nodes and hosts.

Python API::

    import pysim
    cfg = pysim.load("mesh8x8", {"traffic.injection_rate": 0.2})   # a file or a shipped name
    result = pysim.simulate(cfg)
    result.to_dict()
    rows = pysim.sweep(cfg, {"traffic.injection_rate": [0.1, 0.2]})
    pysim.plot.latency_load(rows, "fig.png")      # figures: pysim.plot (matplotlib)

`import pysim` loads every component (`pysim.components`), so that configurations are checked
against every declared key; the compiled core loads when a simulation first needs it
(`pysim.engine`), `pysim.plot` (with matplotlib) and `pysim.sweep` (the executors: processes,
SQLite) when they are first used.
"""
import importlib

from pysim import components  # noqa: F401  (every component declares its keys)
from pysim import systems, workload  # noqa: F401
from pysim._version import __version__
from pysim.config import Config, from_dict, load
from pysim.errors import ConfigError, PysimWarning
from pysim.sim import DeadlockError, SimulationError, simulate

__all__ = ["Config", "ConfigError", "DeadlockError", "PysimWarning", "SimulationError",
           "from_dict", "load", "simulate", "sweep", "to_pandas", "__version__", "plot",
           "workload", "systems"]


def __getattr__(name):
    """pysim.plot, pysim.sweep and pysim.to_pandas without importing them (matplotlib, the
    executors) with pysim itself. pysim.sweep is the package, callable: pysim.sweep(base,
    grid, ...) runs pysim.sweep.sweep."""
    if name in ("plot", "sweep"):
        return importlib.import_module(f"pysim.{name}")
    if name == "to_pandas":
        return importlib.import_module("pysim.sweep").to_pandas
    hint = {"run": "; pysim.simulate(cfg) runs a configuration (the command line's pysim run)",
            "topo": "; pysim.network.describe(pysim.network.compile_network(cfg), cfg) "
                    "describes a system (the command line's pysim topo)"}.get(name, "")
    raise AttributeError(f"module 'pysim' has no attribute {name!r}{hint}")
