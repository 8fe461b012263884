"""`python -m pysim`: the command line, as the `pysim` script runs it."""
from pysim.cli import main

main(prog_name="pysim")
