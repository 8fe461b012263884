"""The `pysim` console script's entry point, outside the `pysim` package.

Importing `pysim` loads every component (about a second); an interrupt (Ctrl-C) during that
import would otherwise end in Python's own traceback, before any of pysim's handlers exist.
This module imports nothing of pysim until it is called, so the whole command, imports
included, runs under one handler: an interrupt exits 130 with one line, as an interrupt
during a run does.
"""
import sys


def main():
    try:
        from pysim.cli import main as cli    # deferred: the interrupt handler is set first
        return cli()
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted: nothing written\n")
        return 130
