"""Running a configuration: `simulate` resolves it and hands it to the runner of its
workload.kind (pysim/workload/: synthetic traffic, op graphs, collectives, ...)."""
from __future__ import annotations

import os

from pysim.config import Config, from_dict, load
from pysim.workload import WORKLOADS
from pysim.workload.base import DeadlockError, SimulationError, check_reads
from pysim.workload.synthetic import prepare, run_packets

__all__ = ["simulate", "DeadlockError", "SimulationError", "prepare", "run_packets"]


def simulate(cfg, progress=None):
    """Run one configuration -- a Config, a TOML file's path, or a dict shaped like one --:
    synthetic traffic (a Result), an op graph or a collective (a GraphResult), by
    workload.kind.

    progress(cycle, last): called about ten times a second during the run with the cycle
    reached and the last cycle the run can take (None for op graphs and collectives, which
    end when their ops do)."""
    if isinstance(cfg, (str, os.PathLike)):
        cfg = load(cfg)
    elif isinstance(cfg, dict):
        cfg = from_dict(cfg)
    elif not isinstance(cfg, Config):
        raise TypeError(f"simulate() takes a Config, a path to a TOML file or a dict, not "
                        f"{type(cfg).__name__}")
    check_reads(cfg)
    if progress is not None and not callable(progress):
        raise TypeError(f"simulate(progress=...) takes a function f(cycle, last), not "
                        f"{type(progress).__name__}")
    return WORKLOADS[cfg.workload.kind].run(cfg, progress=progress)
