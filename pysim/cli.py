"""The `pysim` command line: parse, build the config, call the API, print.

Machine-readable output is JSON (`--json`); the text summary is for people.
"""
from __future__ import annotations

import json
import os
import sys

import click

from pysim import __version__
from pysim.config import ConfigError, load, parse_override
from pysim.sim import DeadlockError, SimulationError, simulate


def _overrides(pairs):
    out = {}
    for text in pairs:
        path, value = parse_override(text)
        out[path] = value
    return out


def _refuse_overwrite(path, force):
    if path and os.path.exists(path) and not force:
        raise click.ClickException(f"{path} exists; pass --force to overwrite it")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pysim")
def main():
    """pysim: cycle-level simulation of accelerator, memory-node and host networks."""


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set traffic.injection_rate=0.2 (repeatable).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write the full result (with the resolved config) as JSON to this file.")
@click.option("--force", is_flag=True, help="Overwrite the --json file if it exists.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
def run(config, sets, json_path, force, quiet):
    """Simulate CONFIG (a TOML file) and print a summary."""
    try:
        _refuse_overwrite(json_path, force)
        cfg = load(config, _overrides(sets))
        result = simulate(cfg)
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    except DeadlockError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(3)
    except SimulationError as e:
        raise click.ClickException(str(e)) from None
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result.to_dict(), f, indent=1)
    if not quiet:
        click.echo(result.summary())
        if json_path:
            click.echo(f"result written to {json_path}")


if __name__ == "__main__":  # pragma: no cover
    main()
