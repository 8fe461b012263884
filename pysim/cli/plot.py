"""`pysim plot`: figures from sweep tables, results, traces, configs and job streams.
"""
from __future__ import annotations

import math
import os
import sys

import click

from pysim import plot as P
from pysim._io import by_path
from pysim.cli._common import (OutPath, figure_ext, main, not_an_input, read_json,
                               refuse_overwrite, write_output)
from pysim.config import from_resolved, load, parse_override
from pysim.errors import ConfigError
from pysim.figure_checks import RUNS_OF, check_jobs, check_memory, check_runs
from pysim.network import compile_network
from pysim.sweep import Store, StoreError, is_sqlite


PLOT_KINDS = ("latency-load", "throughput", "collective", "speedup", "breakdown",
              "link-utilisation", "timeline", "topology", "memory", "jobs")


FILE_KINDS = {"link-utilisation": "a run's result (pysim run CONFIG --json r.json)",
              "timeline": "a trace (pysim run CONFIG --trace t.json, for an op graph or a "
                          "collective)",
              "topology": "a config (a TOML file or a shipped system's name)",
              "memory": "a run's result (pysim run CONFIG --json r.json, for a run that "
                        "holds memory)",
              "jobs": "a job stream's result (pysim jobs SERVER --json jobs.json)"}


def _json_kind(obj):
    """'trace' (Chrome/Perfetto trace events), 'result' (what pysim run --json writes), or
    None."""
    if isinstance(obj, list) or (isinstance(obj, dict) and "traceEvents" in obj):
        return "trace"
    if isinstance(obj, dict) and "config" in obj and "links" in obj:
        return "result"
    return None


def _takes(source, kind, obj, expected):
    found = _json_kind(obj)
    if found != expected:
        what = {"trace": "a trace", "result": "a run's result"}.get(found, "neither a run's "
                                                                           "result nor a trace")
        raise click.ClickException(f"{source} is {what}; --kind {kind} takes "
                                   f"{FILE_KINDS[kind]}")


@main.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--kind", type=click.Choice(PLOT_KINDS), required=True,
              help="latency-load, throughput, collective, speedup, breakdown (from a sweep "
                   "DB); "
                   "link-utilisation (a run's --json); timeline (a --trace file); topology "
                   "(a config); memory (a run's --json: occupancy over time); jobs (a pysim "
                   "jobs --json file: execution-time CDFs).")
@click.option("--x", "x", default=None, help="Key on the x axis.")
@click.option("--y", "y", default=None, help="Metric on the y axis.")
@click.option("--series", default=None, help="Key whose values make the series.")
@click.option("--group", default=None, help="speedup: key whose values make the groups.")
@click.option("--baseline", default=None, help="speedup: the series value to compare with.")
@click.option("--title", default=None, help="The figure's title ('' for none; default: the "
                                            "system and what ran).")
@click.option("--xlim", type=float, nargs=2, default=None, metavar="LO HI",
              help="Limits of the x axis.")
@click.option("--ylim", type=float, nargs=2, default=None, metavar="LO HI",
              help="Limits of the y axis (latency-load: points above HI are marked on the "
                   "top edge).")
@click.option("--logy", is_flag=True, help="A logarithmic y axis.")
@click.option("-o", "--out", "out", required=True, type=OutPath(dir_okay=False),
              help="Output file: .png, .pdf or .svg.")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
def plot(source, kind, x, y, series, group, baseline, title, xlim, ylim, logy, out, force):
    """Draw a figure from a sweep database, a run result, a trace or a config."""
    not_an_input([("-o", out)], [("the source", source)])
    refuse_overwrite(out, force)
    figure_ext(out, "-o")
    for opt, lim in (("--xlim", xlim), ("--ylim", ylim)):
        if lim is not None and not (math.isfinite(lim[0]) and math.isfinite(lim[1]) and
                                    lim[0] < lim[1]):
            raise click.ClickException(f"{opt} {lim[0]:g} {lim[1]:g}: expected finite "
                                       f"limits, LO < HI")
    if kind != "topology" and not os.path.isfile(source):     # (a config may be a name)
        raise click.ClickException(f"{source}: no such file")
    try:
        if kind in ("latency-load", "throughput", "collective", "speedup", "breakdown"):
            store = Store(source, readonly=True)
            try:
                rows = store.rows()
            finally:
                store.close()
            if not rows:
                raise click.ClickException(f"{source} holds no results")
            axes = dict(title=title, xlim=xlim, ylim=ylim, logy=logy)
            if kind in RUNS_OF and kind != "breakdown":     # (its x: below)
                check_runs(rows, kind, x or {"latency-load": "traffic.injection_rate",
                                             "throughput": "offered_rate",
                                             "collective": "workload.bytes"}[kind], source)
            if kind == "latency-load":
                P.points(rows, x=x or "traffic.injection_rate", series=series,
                         y=y or "avg_packet_latency")               # (the checks, no drawing)

                def draw(tmp):
                    P.latency_load(rows, tmp, x=x or "traffic.injection_rate", series=series,
                                   y=y or "avg_packet_latency", force=True, **axes)
            elif kind == "throughput":
                P.points(rows, x=x or "offered_rate", series=series, y=y or "accepted_rate")

                def draw(tmp):
                    P.throughput(rows, tmp, x=x or "offered_rate", series=series,
                                 y=y or "accepted_rate", force=True, **axes)
            elif kind == "collective":
                P.points(rows, x=x or "workload.bytes", y=y or "busbw_gbps",
                         series=series or "workload.algorithm")

                def draw(tmp):
                    P.collective(rows, tmp, x=x or "workload.bytes", y=y or "busbw_gbps",
                                 series=series or "workload.algorithm", force=True,
                                 **axes)
            elif kind == "breakdown":
                # (the keys swept over two values or more: a --param of one value, as
                # workload.kind=training, is a setting, not an axis)
                swept = [k for k in rows[0]["params"]
                         if len({repr((r.get("params") or {}).get(k)) for r in rows}) > 1]
                if x is None and not swept:
                    raise click.ClickException("--kind breakdown needs --x (the key whose "
                                               "values make the bars)")
                bx = x or swept[0]
                check_runs(rows, kind, bx, source)
                bs = series if series else (swept[1] if len(swept) > 1 and x is None else None)
                P.check_breakdown(rows, x=bx, series=bs)

                def draw(tmp):
                    P.breakdown(rows, tmp, x=bx, series=bs, title=title, ylim=ylim, force=True)
            else:
                if not (group and series and baseline is not None and y):
                    raise click.ClickException("--kind speedup needs --group, --series, "
                                               "--baseline and --y (the metric)")
                base = parse_override(f"v={baseline}")[1]
                P.check_speedup(rows, group, series, y, base)

                def draw(tmp):
                    P.speedup_bars(rows, tmp, group, series, y, base, title=title, ylim=ylim,
                                   logy=logy, force=True)
        elif os.path.isfile(source) and is_sqlite(source):
            raise click.ClickException(f"{source} is a results database; --kind {kind} "
                                       f"takes {FILE_KINDS[kind]}")
        elif kind == "link-utilisation":
            result = read_json(source)
            _takes(source, kind, result, "result")
            P.check_result(result, source)
            cfg = from_resolved(result["config"])
            network = compile_network(cfg)
            P.check_links(network, result, source)
            P.check_drawable(network.topo)

            def draw(tmp):
                P.link_utilisation(network, cfg, result, tmp, title=title, force=True)
        elif kind == "timeline":
            trace = read_json(source)
            _takes(source, kind, trace, "trace")
            P.check_trace(trace, source)
            P.check_timeline(trace, xlim)

            def draw(tmp):
                P.timeline(trace, tmp, title=title, xlim=xlim, force=True)
        elif kind == "memory":
            result = read_json(source)
            _takes(source, kind, result, "result")
            check_memory(result, source)

            def draw(tmp):
                P.memory(result, tmp, title=title, xlim=xlim, force=True)
        elif kind == "jobs":
            result = read_json(source)
            if not isinstance(result, dict) or result.get("kind") != "jobs":
                raise click.ClickException(f"{source} is not a job stream's result; --kind "
                                           f"jobs takes {FILE_KINDS[kind]}")
            check_jobs(result, source)

            def draw(tmp):
                P.jobs_cdf(result, tmp, title=title, force=True)
        else:
            if source.lower().endswith(".json") and os.path.isfile(source):
                found = {"trace": "a trace", "result": "a run's result"}.get(
                    _json_kind(read_json(source)), "a JSON file")
                raise click.ClickException(f"{source} is {found}; --kind topology takes "
                                           f"{FILE_KINDS[kind]}")
            cfg = load(source)
            network = compile_network(cfg)
            P.check_drawable(network.topo)

            def draw(tmp):
                P.draw_topology(network, cfg, tmp, title=title, force=True)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    except (KeyError, ValueError) as e:
        raise click.ClickException(f"{source}: not usable for --kind {kind}: {e}") from None
    if not write_output(out, by_path(draw), force=force):
        sys.exit(1)
    click.echo(f"written {out}")
