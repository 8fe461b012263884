"""`pysim run`, `pysim topo`, `pysim systems`: one configuration run, described, or the
shipped systems listed.
"""
from __future__ import annotations

import os
import sys

import click

from pysim import systems as S
from pysim._version import __version__
from pysim._io import by_path, dump_json
from pysim.cli._common import (OutPath, Ticker, distinct_outputs, figure_ext, finish,
                               keep_json, main, overrides, refuse_overwrite, refuse_stdout,
                               not_an_input, read_json, to_stdout, write_output)
from pysim.config import from_resolved, load
from pysim.errors import ConfigError
from pysim.network import compile_network, describe
from pysim.plot import check_drawable, draw_topology
from pysim.sim import DeadlockError, SimulationError, simulate
from pysim.topology import describe_systems, system_name
from pysim.workload import WORKLOADS, chakra


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set traffic.injection_rate=0.2 (repeatable).")
@click.option("--json", "json_path", type=OutPath(dir_okay=False), default=None,
              help="Write the full result (with the resolved config) as JSON to this file "
                   "(-: standard output, the summary then going to stderr).")
@click.option("--trace", "trace_path", type=OutPath(dir_okay=False), default=None,
              help="Op graphs: write a Chrome/Perfetto trace of every op (chrome://tracing, "
                   "ui.perfetto.dev; -: standard output).")
@click.option("--export-chakra", "chakra_dir", type=OutPath(file_okay=False), default=None,
              help="Op graphs: write the op graph that ran as a Chakra execution trace, one "
                   "file per rank, in this folder.")
@click.option("--force", is_flag=True, help="Overwrite the --json / --trace files and the "
                                            "--export-chakra folder's trace if they exist.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
def run(config, sets, json_path, trace_path, chakra_dir, force, quiet):
    """Simulate CONFIG (a TOML file, a shipped system's name: pysim systems, or a result's
    JSON file, rerun with its resolved config) and print a summary."""
    try:
        distinct_outputs(("--json", json_path), ("--trace", trace_path),
                         ("--export-chakra", chakra_dir))
        refuse_stdout("--export-chakra", chakra_dir, "a folder of trace files", "folder")
        refuse_overwrite(json_path, force)
        refuse_overwrite(trace_path, force)
        rerun = is_json(config)
        cfg = rerun_config(config, overrides(sets)) if rerun else load(config, overrides(sets))
        not_an_input((("--json", json_path), ("--trace", trace_path)),
                     [("the result file run again", config)] if rerun else (), cfg=cfg)
        for opt, given in (("--trace", trace_path), ("--export-chakra", chakra_dir)):
            if given and not WORKLOADS[cfg.workload.kind].traces:
                with_ops = ", ".join(repr(k) for k, w in sorted(WORKLOADS.items()) if w.traces)
                what = "trace" if opt == "--trace" else "export"
                raise ConfigError(f"{opt}: workload.kind = {cfg.workload.kind!r} has no ops to "
                                  f"{what} (these have: {with_ops})")
        if chakra_dir:
            chakra.check_exportable(cfg)
            chakra.schema()                 # (the protobuf package, before the run)
            try:
                chakra.check_folder(chakra_dir, force)
            except OSError as e:
                raise click.ClickException(f"--export-chakra {chakra_dir}: {e}") from None
        progress = Ticker(draw=sys.stderr.isatty()) if not quiet else None
        try:
            result = simulate(cfg, progress=progress)
        finally:
            if progress is not None:
                progress.clear()
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    except DeadlockError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(3)
    except SimulationError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo("\ninterrupted: nothing written", err=True)
        sys.exit(130)
    except MemoryError as e:
        raise click.ClickException(
            f"out of memory ({type(e).__name__}{': ' + str(e) if str(e) else ''}) while "
            f"building or running {config}: make the system or the workload smaller") from None
    ok = True
    if chakra_dir:
        try:
            graph, topo = result.op_graph
            files = chakra.write(graph, topo, chakra_dir, cfg.network.clock_ghz)
            if not quiet:
                click.echo(f"Chakra trace written to {chakra_dir} ({len(files)} ranks)",
                           err=to_stdout(json_path, trace_path))
        except ConfigError as e:
            click.echo(f"Error: configuration error: {e}", err=True)
            ok = False
        except OSError as e:
            click.echo(f"Error: --export-chakra {chakra_dir}: {e}", err=True)
            ok = False                      # (the --json / --trace files are still written)
    trace = result.trace() if trace_path else None
    d = result.to_dict() if json_path else None
    finish([(json_path, lambda f: dump_json(d, f, indent=1), lambda: keep_json(d, "result"),
             "result"),
            (trace_path, lambda f: dump_json(trace, f), lambda: keep_json(trace, "trace"),
             "trace")], result.summary, quiet, force, ok)


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (repeatable).")
@click.option("--draw", "draw_path", type=OutPath(dir_okay=False), default=None,
              help="Draw the topology to this image (.png, .pdf or .svg).")
@click.option("--json", "json_path", type=OutPath(dir_okay=False), default=None,
              help="Write the description as JSON (-: standard output, the description "
                   "then going to stderr).")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
def topo(config, sets, draw_path, json_path, force):
    """Describe the system of CONFIG (a file or a shipped system's name): nodes, links,
    diameter, hops, bisection, VC classes."""
    try:
        distinct_outputs(("--json", json_path), ("--draw", draw_path))
        refuse_overwrite(draw_path, force)
        refuse_overwrite(json_path, force)
        if draw_path:
            figure_ext(draw_path, "--draw")
        cfg = load(config, overrides(sets))
        not_an_input((("--json", json_path), ("--draw", draw_path)), cfg=cfg)
        network = compile_network(cfg)
        if draw_path:
            try:
                check_drawable(network.topo)
            except ConfigError as e:
                raise click.ClickException(f"--draw {draw_path}: {e}") from None
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    d = describe(network, cfg)
    err = to_stdout(json_path)           # (stdout holds the JSON alone)

    def say(text):
        click.echo(text, err=err)
    say(f"system      {d['name']}")
    for kind, names in d["nodes"].items():
        shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
        say(f"{kind:<11} {len(names):>4}  {shown}")
    say(f"links       {len(d['links'])} node pairs (GB/s per direction; x N = parallel "
        f"links; latency in cycles)")
    for link in d["links"][:40]:
        arrow = "->" if link["directed"] else "<->"
        par = f" x{link['parallel']}" if link["parallel"] > 1 else ""
        if "unlike" in link:                 # the routes use one of them (a warning said so)
            say(f"  {link['a']} {arrow} {link['b']}: unlike parallel links, of which routes "
                f"use one: " + "; ".join(
                    f"{u['gbps']:g} GB/s" + (f" x{u['count']}" if u["count"] > 1 else "")
                    + f", {u['latency_cycles']} cycles"
                    + (f" (routes {', '.join(u['routes'])})" if u["routes"] else
                       " (no route: carries nothing)") for u in link["unlike"]))
            continue
        say(f"  {link['a']} {arrow} {link['b']}: {link['gbps']:g} GB/s{par}, "
            f"{link['latency_cycles']} cycles")
    if len(d["links"]) > 40:
        say(f"  ... and {len(d['links']) - 40} more")
    say(f"diameter    {d['diameter']} hops (router-to-router, between endpoints)")
    say(f"avg hops    {d['avg_hops']:.3f} (ordered pairs of distinct endpoints; "
        f"{d['hops_how']})")
    say(f"bisection   {d['bisection_gbps']:g} GB/s per direction (best balanced cut "
        f"found; exact for meshes and tori, an upper bound otherwise)")
    if d["bisection_routed_gbps"] < d["bisection_gbps"]:
        say(f"            of which routes take {d['bisection_routed_gbps']:g} GB/s: "
            f"{d['bisection_gbps'] - d['bisection_routed_gbps']:g} GB/s across the cut is "
            f"unlike parallel links no route uses, which carry nothing")
    say(f"routing     {d['routing']}: needs {d['vc_classes']} VC class(es), "
        f"{d['vcs']} VCs configured (deadlock-free: "
        f"{'by the routing rule' if d['dependency_edges'] < 0 else 'checked'})")
    say(f"VC classes  {d['vc_scheme']}")
    ok = True
    if json_path:
        out = {**d, "config": {**cfg.resolved(), "_system": system_name(network.topo, cfg)},
               "version": __version__}                # (its provenance, as a run's result)
        ok &= write_output(json_path, lambda f: dump_json(out, f, indent=1), force=force)
    if draw_path:
        if write_output(draw_path, by_path(lambda tmp: draw_topology(network, cfg, tmp,
                                                                      force=True)),
                        force=force):
            say(f"drawn to {draw_path}")
        else:
            ok = False
    if not ok:
        sys.exit(1)


def is_json(path):
    return os.path.splitext(os.fspath(path))[1].lower() == ".json"


def rerun_config(path, over):
    """The resolved config a result's JSON file (pysim run --json) carries, with `over`
    applied on top: that run again."""
    result = read_json(path)
    config = result.get("config") if isinstance(result, dict) else None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a JSON file is read as a result (pysim run --json), whose "
                          f"'config' holds the resolved config to run again; this one has no "
                          f"'config' table (a configuration of your own is a TOML file)")
    if result.get("kind") == "jobs":
        raise ConfigError(f"{path} is a result of a stream of jobs (pysim jobs --json); "
                          f"pysim run runs one configuration again (a pysim run --json "
                          f"result)")
    try:
        return from_resolved(config, strict=True).with_overrides(over)
    except ConfigError as e:
        raise ConfigError(f"{path} (the result's config): {e}") from None


@main.command()
def systems():
    """List the shipped systems, which CONFIG may name: nodes by kind, what each is and where
    its numbers come from."""
    rows = describe_systems()
    w = max(len(r["name"]) for r in rows)
    click.echo(f"{'name':<{w}}  {'NPU':>4} {'mem':>4} {'host':>4} {'sw':>4}  what it is "
               f"[where its numbers come from]")
    for r in rows:
        click.echo(f"{r['name']:<{w}}  {r['npu']:>4} {r['mem']:>4} {r['host']:>4} "
                   f"{r['switch']:>4}  {r['what']} [{r['source']}]")
    click.echo(f"(files in {S.directory()}; pysim topo NAME describes one)")
