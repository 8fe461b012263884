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


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (repeatable).")
@click.option("--draw", "draw_path", type=click.Path(dir_okay=False), default=None,
              help="Draw the topology to this image (.png, .pdf or .svg).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write the description as JSON.")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
def topo(config, sets, draw_path, json_path, force):
    """Describe the system of CONFIG: nodes, links, diameter, hops, bisection, VC classes."""
    from pysim.network import compile_network, describe
    try:
        _refuse_overwrite(draw_path, force)
        _refuse_overwrite(json_path, force)
        cfg = load(config, _overrides(sets))
        network = compile_network(cfg)
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    d = describe(network, cfg)
    click.echo(f"system      {d['name']}")
    for kind, names in d["nodes"].items():
        shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
        click.echo(f"{kind:<11} {len(names):>4}  {shown}")
    click.echo(f"links       {len(d['links'])} node pairs (GB/s per direction; x N = parallel "
               f"links; latency in cycles)")
    for link in d["links"][:40]:
        arrow = "->" if link["directed"] else "<->"
        par = f" x{link['parallel']}" if link["parallel"] > 1 else ""
        click.echo(f"  {link['a']} {arrow} {link['b']}: {link['gbps']:g} GB/s{par}, "
                   f"{link['latency_cycles']} cycles")
    if len(d["links"]) > 40:
        click.echo(f"  ... and {len(d['links']) - 40} more")
    click.echo(f"diameter    {d['diameter']} hops (router-to-router, between endpoints)")
    click.echo(f"avg hops    {d['avg_hops']:.3f} (all ordered pairs of distinct endpoints)")
    click.echo(f"bisection   {d['bisection_gbps']:g} GB/s per direction (best balanced cut "
               f"found; exact for meshes and tori, an upper bound otherwise)")
    click.echo(f"routing     {d['routing']}: needs {d['vc_classes']} VC class(es), "
               f"{d['vcs']} VCs configured (deadlock-free: checked)")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(d, f, indent=1)
    if draw_path:
        from pysim.plot import draw_topology
        draw_topology(network, cfg, draw_path)
        click.echo(f"drawn to {draw_path}")


if __name__ == "__main__":  # pragma: no cover
    main()
