"""The `pysim` command line: parse, build the config, call the API, print.

Machine-readable output is JSON (`--json`); the text summary is for people. One module per
group of commands, each adding its commands to the group `main` (pysim.cli._common):
run.py (run, topo, systems), models.py, sweep.py (sweep, results), jobs.py, plot.py.
"""
from pysim.cli import jobs, models, plot, run, sweep  # noqa: F401  (each adds its commands)
from pysim.cli._common import Ticker, main
from pysim.cli.plot import PLOT_KINDS

__all__ = ["PLOT_KINDS", "Ticker", "main"]
