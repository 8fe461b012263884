"""The `pysim` console script's entry point, outside the `pysim` package.

Importing `pysim` loads every component (about a second); an interrupt (Ctrl-C) during that
import would otherwise end in Python's own traceback, before any of pysim's handlers exist.
This module imports nothing of pysim until it is called, so the whole command, imports
included, runs under one handler: an interrupt exits 130 with one line, as an interrupt
during a run does. Click runs outside its standalone mode so that an interrupt while it
parses the command line (or in a command without a handler of its own) reaches that handler
too, rather than ending as Click's "Aborted!" with exit status 1.
"""
import sys


def main():
    try:
        import click                          # deferred with pysim: the handler is set first
        from pysim.cli import main as cli
        try:
            code = cli.main(standalone_mode=False)
        except click.exceptions.Abort as e:
            if isinstance(e.__context__, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            sys.stderr.write("Aborted!\n")    # end of input at a prompt
            return 1
        except click.ClickException as e:     # a usage error: Click's own message and status
            e.show()
            return e.exit_code
        return code if isinstance(code, int) else 0
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted: nothing written\n")
        return 130
