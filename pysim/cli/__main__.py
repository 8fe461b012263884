"""`python -m pysim.cli`: the command line, as the `pysim` script runs it."""
from pysim.cli import main

main()
