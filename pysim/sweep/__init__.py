"""Parameter sweeps: a grid of runs, in parallel, stored in SQLite as each point finishes.

A point is one set of overrides of a base config. Its identity is a hash of its resolved
config (every key, defaults included), so re-running a sweep skips the points already done,
and a sweep interrupted (Ctrl-C, or the process killed) loses no finished point: each is
committed on its own, in a database in WAL mode. Points run in local worker processes or on
a Dask distributed cluster; only the submitting process writes the database.

    rows = pysim.sweep("topologies/mesh8x8.toml",
                       {"traffic.injection_rate": [0.05, 0.1, 0.15]}, jobs=2,
                       db="results.sqlite")

grid.py parses and expands the grid, store.py keeps the results, execute.py runs the points.
The package is callable: `pysim.sweep(...)` is `pysim.sweep.sweep(...)`.
"""
import sys
import types

from pysim.sweep import execute, grid, store  # noqa: F401
from pysim.sweep.execute import (SCHEDULER_TIMEOUT_S, Executor, WorkerDied,  # noqa: F401
                                 base_config, config_hash, resolve, run_point, sweep)
from pysim.sweep.grid import MAX_POINTS, expand, parse_param  # noqa: F401
from pysim.sweep.store import (COLUMNS, Store, StoreError, is_sqlite, order_key,  # noqa: F401
                               row_dict, scalar_metrics, sort_rows, tidy, to_pandas)


class _Package(types.ModuleType):
    """pysim.sweep, callable as the function it is named after."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
