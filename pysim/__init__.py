"""pysim: a cycle-level simulator of the network joining accelerators, memory nodes and hosts.

Python API::

    import pysim
    cfg = pysim.load("topologies/mesh8x8.toml", {"traffic.injection_rate": 0.2})
    result = pysim.simulate(cfg)
    result.to_dict()
"""
__version__ = "0.1.0"

from pysim.config import Config, ConfigError, from_dict, load  # noqa: E402
from pysim.sim import DeadlockError, SimulationError, simulate  # noqa: E402
from pysim.sweep import sweep, to_pandas  # noqa: E402
from pysim.workload.graph import PysimWarning  # noqa: E402

__all__ = ["Config", "ConfigError", "DeadlockError", "PysimWarning", "SimulationError",
           "from_dict", "load", "simulate", "sweep", "to_pandas", "__version__"]
