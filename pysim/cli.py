"""The `pysim` command line: parse, build the config, call the API, print.

Machine-readable output is JSON (`--json`); the text summary is for people.
"""
from __future__ import annotations

import csv
import json
import os
import tempfile
import warnings
import sys
import time

import click

from pysim._version import __version__
from pysim.config import from_resolved, load, parse_override
from pysim.errors import ConfigError, PysimWarning
from pysim.sim import DeadlockError, SimulationError, simulate
from pysim.workload import WORKLOADS, chakra
from pysim import plot as P
from pysim.plot import check_drawable, draw_topology
from pysim.figure_checks import RUNS_OF, check_jobs, check_memory, check_runs
from pysim import systems as S
from pysim._io import OutputError, by_path, check_output, dump_json, read_bounded, write_atomic
from pysim.jobs import run_stream
from pysim.jobs import stream as jst
from pysim.jobs.cache import Cache
from pysim.jobs.servers import load_server
from pysim.models import get as get_model
from pysim.models import names as model_names
from pysim.models.report import format_model, format_zoo, resolve, to_json
from pysim.network import compile_network, describe
from pysim.topology import describe_systems
from pysim.sweep import Store, StoreError, WorkerDied, is_sqlite, parse_param, sort_rows, sweep, tidy


def _overrides(pairs):
    out = {}
    for text in pairs:
        path, value = parse_override(text)
        out[path] = value
    return out


def _refuse_overwrite(path, force):
    """Checked before any work: an output file is not overwritten unless --force, and one
    that could not be written at all (no such directory, a read-only one) stops the command
    at once, not after a long run whose results would then be lost."""
    try:
        check_output(path, force)
    except OutputError as e:
        raise click.ClickException(str(e)) from None


def _write(path, write, keep=None, force=True, **kw):
    """Write an output (whole or not at all); if that fails after the work is done, say so,
    and keep what was computed: `keep()` saves it elsewhere and returns where."""
    try:
        write_atomic(path, write, force=force, **kw)
        return True
    except OutputError as e:
        where = ""
        if keep is not None:
            try:
                where = f"; kept in {keep()}"
            except OSError:
                where = "; it could not be kept elsewhere either"
        click.echo(f"error: {e}{where}", err=True)
        return False


def _keep_text(text, name, suffix):
    """As _keep_json, for text (a job file)."""
    fd, path = tempfile.mkstemp(prefix=f"pysim-{name}-", suffix=suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _keep_json(obj, name):
    """Save a computed result that could not go where asked: a new file in the temporary
    directory. Returns its path."""
    fd, path = tempfile.mkstemp(prefix=f"pysim-{name}-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        dump_json(obj, f, indent=1)
    return path


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pysim")
def main():
    """pysim: cycle-level simulation of accelerator, memory-node and host networks."""
    default = warnings.showwarning

    def show(message, category, *args, **kw):
        if issubclass(category, PysimWarning):
            click.echo(f"warning: {message}", err=True)
        else:
            default(message, category, *args, **kw)
    warnings.showwarning = show


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set traffic.injection_rate=0.2 (repeatable).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write the full result (with the resolved config) as JSON to this file.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Op graphs: write a Chrome/Perfetto trace of every op (chrome://tracing, "
                   "ui.perfetto.dev).")
@click.option("--export-chakra", "chakra_dir", type=click.Path(file_okay=False), default=None,
              help="Op graphs: write the op graph that ran as a Chakra execution trace, one "
                   "file per rank, in this folder.")
@click.option("--force", is_flag=True, help="Overwrite the --json / --trace files if they "
                                            "exist.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
def run(config, sets, json_path, trace_path, chakra_dir, force, quiet):
    """Simulate CONFIG (a TOML file, or a shipped system's name: pysim systems) and print a
    summary."""
    try:
        _refuse_overwrite(json_path, force)
        _refuse_overwrite(trace_path, force)
        cfg = load(config, _overrides(sets))
        for opt, given in (("--trace", trace_path), ("--export-chakra", chakra_dir)):
            if given and not WORKLOADS[cfg.workload.kind].traces:
                with_ops = ", ".join(repr(k) for k, w in sorted(WORKLOADS.items()) if w.traces)
                what = "trace" if opt == "--trace" else "export"
                raise ConfigError(f"{opt}: workload.kind = {cfg.workload.kind!r} has no ops to "
                                  f"{what} (these have: {with_ops})")
        if chakra_dir:
            chakra.schema()                 # (the protobuf package, before the run)
        progress = _Ticker() if not quiet and sys.stderr.isatty() else None
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
        except ConfigError as e:
            raise click.ClickException(f"configuration error: {e}") from None
        except OSError as e:
            raise click.ClickException(f"--export-chakra {chakra_dir}: {e}") from None
        if not quiet:
            click.echo(f"Chakra trace written to {chakra_dir} ({len(files)} ranks)")
    if trace_path:
        trace = result.trace()
        ok &= _write(trace_path, lambda f: dump_json(trace, f), force=force,
                     keep=lambda: _keep_json(trace, "trace"))
    if json_path:
        d = result.to_dict()
        ok &= _write(json_path, lambda f: dump_json(d, f, indent=1),
                     keep=lambda: _keep_json(d, "result"), force=force)
    if not quiet or not ok:
        click.echo(result.summary())
    if not quiet:
        if json_path and ok:
            click.echo(f"result written to {json_path}")
        if trace_path and ok:
            click.echo(f"trace written to {trace_path}")
    if not ok:
        sys.exit(1)


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
    """Describe the system of CONFIG (a file or a shipped system's name): nodes, links,
    diameter, hops, bisection, VC classes."""
    try:
        _refuse_overwrite(draw_path, force)
        _refuse_overwrite(json_path, force)
        if draw_path:
            _figure_ext(draw_path, "--draw")
        cfg = load(config, _overrides(sets))
        network = compile_network(cfg)
        if draw_path:
            try:
                check_drawable(network.topo)
            except ConfigError as e:
                raise click.ClickException(f"--draw {draw_path}: {e}") from None
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
    click.echo(f"VC classes  {d['vc_scheme']}")
    ok = True
    if json_path:
        ok &= _write(json_path, lambda f: dump_json(d, f, indent=1), force=force)
    if draw_path:
        if _write(draw_path, by_path(lambda tmp: draw_topology(network, cfg, tmp)),
                  force=force):
            click.echo(f"drawn to {draw_path}")
        else:
            ok = False
    if not ok:
        sys.exit(1)


@main.command(name="models")
@click.argument("model", required=False)
@click.option("--batch", type=int, default=1, show_default=True,
              help="Samples per batch: FLOPs and activation bytes are shown for the batch.")
@click.option("--precision", type=click.Choice(["fp32", "fp16", "bf16", "mixed"]),
              default=None, help="Bytes per element (default: each model's own).")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A model parameter (repeatable), e.g. -p layers=48 -p image=299; for an "
                   ".onnx file, a symbolic dimension, e.g. -p seq=128.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models_cmd(model, batch, precision, params, as_json):
    """The model zoo, or MODEL's layers (a zoo name, an .onnx file or an ASTRA-sim
    workload)."""
    try:
        if batch < 1:
            raise ConfigError(f"--batch {batch}: expected an integer >= 1")
        kw = {}
        for text in params:
            key, eq, _ = text.partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"--param {text!r}: expected KEY=VALUE, e.g. layers=48")
            kw[key.strip()] = parse_override(text)[1]
        if model is None:
            if kw:
                raise ConfigError("--param needs a MODEL")
            ms = [get_model(n) for n in model_names()]
        else:
            ms = [resolve(model, **kw)]
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(to_json(ms, precision, batch, with_layers=model is not None),
                              indent=1))
    elif model is None:
        click.echo(format_zoo(ms, precision, batch))
    else:
        click.echo(format_model(ms[0], precision, batch))


SUMMARY_METRICS = ("offered_rate", "accepted_rate", "avg_packet_latency", "p99_packet_latency",
                   "avg_hops", "saturated", "collective_cycles", "algbw_gbps", "busbw_gbps",
                   "makespan_cycles", "iteration_cycles", "samples_per_second",
                   "exposed_comm_cycles", "cycles_per_second")   # (those a row has are shown)


def _format(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _print_table(rows, columns):
    widths = [max(len(c), *(len(_format(r.get(c, ""))) for r in rows)) for c in columns]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        click.echo("  ".join(_format(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


@main.command(name="sweep")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--param", "params", multiple=True, metavar="KEY=V1,V2|START:STOP:STEP",
              help="A swept key: a list of values, or a range with STOP included "
                   "(repeatable; the grid is their cross product).")
@click.option("--zip", "zipped", is_flag=True, help="Pair the --param lists instead of "
                                                    "crossing them.")
@click.option("--db", default="results.sqlite", show_default=True,
              type=click.Path(dir_okay=False),
              help="SQLite file the results go to; points already in it are skipped.")
@click.option("--workers", "-j", "jobs", type=int, default=None,
              help="Local worker processes (default and most: the number of cores).")
@click.option("--jobs", "jobs_alias", type=int, default=None, hidden=True)
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Run the points on this Dask distributed scheduler instead.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or table.")
def sweep_cmd(config, params, zipped, db, jobs, jobs_alias, scheduler, quiet):
    """Run CONFIG over a grid of parameters, in parallel, resumably."""
    try:
        grid = {}
        for p in params:
            key, values = parse_param(p)
            if key in grid:
                raise ConfigError(f"--param {key} is given twice; give all its values in one "
                                  f"--param ({key}=V1,V2,...)")
            grid[key] = values
        jobs = jobs if jobs is not None else jobs_alias     # (--jobs: the older spelling)
        if jobs is not None and jobs < 1:
            raise ConfigError(f"--workers {jobs}: expected at least 1")
        rows = sweep(config, grid, jobs=jobs, db=db, zipped=zipped, scheduler=scheduler,
                     progress=not quiet)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: finished points are in {db}; run the same command to "
                   f"resume", err=True)
        sys.exit(130)
    if not quiet:
        t = tidy(rows)
        _print_table(t, list(grid) + ["status"] + [m for m in SUMMARY_METRICS
                                                  if any(m in r for r in t)])
        click.echo(f"{len(rows)} points in {db}")
    if any(r["status"] == "failed" for r in rows):
        for r in rows:
            if r["status"] == "failed":
                click.echo(f"failed {r['params']}: {r['error']}", err=True)
        sys.exit(1)


@main.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
              help="Export the tidy table (one row per point, one column per swept key and "
                   "per scalar metric).")
@click.option("--force", is_flag=True, help="Overwrite the CSV file if it exists.")
def results(db, csv_path, force):
    """Print or export the results stored in DB."""
    _refuse_overwrite(csv_path, force)
    try:
        store = Store(db, readonly=True)
        try:
            rows = store.rows()
        finally:
            store.close()
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    if not rows:
        raise click.ClickException(f"{db} holds no results")
    swept = sorted({k for r in rows for k in r["params"]})
    t = tidy(sort_rows(rows, swept))
    if csv_path:
        cols = swept + ["status", "error"] + sorted({k for r in t for k in r} - set(swept) -
                                                   {"status", "error"})
        def write(f):
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in t:
                w.writerow({k: r.get(k) for k in cols})
        if not _write(csv_path, write, force=force):
            sys.exit(1)
        click.echo(f"{len(t)} rows written to {csv_path}")
        return
    _print_table(t, swept + ["status"] + [m for m in SUMMARY_METRICS if any(m in r for r in t)])


@main.command(name="jobs")
@click.argument("server")
@click.option("--jobs", "count", type=int, default=None,
              help="Jobs in the generated stream (jobs.count).")
@click.option("--policy", "policy", default=None, metavar="P1,P2,...",
              help="Allocation policies to compare (jobs.policies), e.g. "
                   "baseline,topo_aware,greedy,preserve.")
@click.option("--seed", type=int, default=None, help="Seed of the stream (simulation.seed).")
@click.option("--job-file", "job_file", type=click.Path(dir_okay=False), default=None,
              help="Run the jobs of this file ([[jobs]] tables) instead of a generated "
                   "stream (jobs.file).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set jobs.corun=apart (repeatable).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write every policy's statistics and every job's record as JSON.")
@click.option("--write-jobs", "jobs_out", type=click.Path(dir_okay=False), default=None,
              help="Write the stream as a job file (to edit or rerun it).")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False), default=None,
              help="SQLite file of simulated shapes, reused by later runs.")
@click.option("--workers", "-j", type=int, default=1, show_default=True,
              help="Local worker processes for the simulations (at most the number of "
                   "cores).")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Run the simulations on this Dask distributed scheduler instead.")
@click.option("--force", is_flag=True, help="Overwrite the --json / --write-jobs files.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
def jobs_cmd(server, count, policy, seed, job_file, sets, json_path, jobs_out, cache_path,
             workers, scheduler, force, quiet):
    """Run a stream of training jobs on SERVER (a preset: dgx1-v100, dgx1-p100, summit-node,
    gpu16-torus4x4, gpu16-cubemesh; or a shipped system or a TOML file) under each allocation
    policy, and compare their execution and queueing times."""
    try:
        _refuse_overwrite(json_path, force)
        _refuse_overwrite(jobs_out, force)
        over = _overrides(sets)
        if count is not None:
            over["jobs.count"] = count
        if policy is not None:
            over["jobs.policies"] = [p.strip() for p in policy.split(",") if p.strip()]
        if seed is not None:
            over["simulation.seed"] = seed
        if job_file is not None:
            over["jobs.file"] = job_file
        if isinstance(over.get("jobs.file"), str):      # typed here: relative to here
            over["jobs.file"] = os.path.abspath(over["jobs.file"])
        if workers < 1:
            raise ConfigError(f"--workers {workers}: expected at least 1")
        srv = load_server(server, over)
        stream = jst.stream(srv.cfg)
        cache = Cache(cache_path)
        bar = _Progress() if not quiet and sys.stderr.isatty() else None
        try:
            result = run_stream(srv, stream, workers=workers, scheduler=scheduler,
                                cache=cache, progress=bar)
        finally:
            cache.close()
            if bar is not None:
                bar.clear()
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    except (SimulationError, WorkerDied) as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo("\ninterrupted: nothing written" + (
            f" (the shapes simulated so far are in {cache_path})" if cache_path else ""),
            err=True)
        sys.exit(130)
    ok = True
    if jobs_out:
        text = jst.jobs_text(stream)
        ok &= _write(jobs_out, lambda f: f.write(text), force=force,
                     keep=lambda: _keep_text(text, "jobs", ".toml"))
    if json_path:
        d = result.to_dict()
        ok &= _write(json_path, lambda f: dump_json(d, f, indent=1),
                     keep=lambda: _keep_json(d, "jobs"), force=force)
    if not quiet or not ok:
        click.echo(result.summary())
    if not quiet:
        if jobs_out and ok:
            click.echo(f"stream written to {jobs_out}")
        if json_path and ok:
            click.echo(f"result written to {json_path}")
    if not ok:
        sys.exit(1)


class _Progress:
    """Jobs finished over all policies, on the terminal (stderr), at most once a second."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.shown = -1.0
        self.width = 0

    def __call__(self, done, total):
        t = time.perf_counter() - self.t0
        if t - self.shown < 1.0 and done < total:
            return
        self.shown = t
        text = f"jobs {done} of {total} (over all policies), {t:.0f} s"
        sys.stderr.write("\r" + text.ljust(self.width))
        sys.stderr.flush()
        self.width = len(text)

    def clear(self):
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


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


PLOT_KINDS = ("latency-load", "throughput", "collective", "speedup", "breakdown",
              "link-utilisation", "timeline", "topology", "memory", "jobs")


class _Ticker:
    """A progress line on the terminal (stderr), redrawn at most once a second."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.shown = 0.0
        self.width = 0

    def __call__(self, now, last):
        t = time.perf_counter() - self.t0
        if t - self.shown < 1.0:
            return
        self.shown = t
        text = f"cycle {now:,}" + (f" of at most {last:,}" if last else "") + f", {t:.0f} s"
        sys.stderr.write("\r" + text.ljust(self.width))
        sys.stderr.flush()
        self.width = len(text)

    def clear(self):
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


FILE_KINDS = {"link-utilisation": "a run's result (pysim run CONFIG --json r.json)",
              "timeline": "a trace (pysim run CONFIG --trace t.json, for an op graph or a "
                          "collective)",
              "topology": "a config",
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
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Output file: .png, .pdf or .svg.")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
def plot(source, kind, x, y, series, group, baseline, title, xlim, ylim, logy, out, force):
    """Draw a figure from a sweep database, a run result, a trace or a config."""
    _refuse_overwrite(out, force)
    _figure_ext(out, "-o")
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
            if kind in RUNS_OF:
                check_runs(rows, kind, x or {"latency-load": "traffic.injection_rate",
                                             "throughput": "offered_rate",
                                             "collective": "workload.bytes"}[kind], source)
            if kind == "latency-load":
                P.check_rows(rows, x=x or "traffic.injection_rate", series=series,
                             y=y or "avg_packet_latency")

                def draw(tmp):
                    P.latency_load(rows, tmp, x=x or "traffic.injection_rate", series=series,
                                   y=y or "avg_packet_latency", **axes)
            elif kind == "throughput":
                P.check_rows(rows, x=x or "offered_rate", series=series,
                             y=y or "accepted_rate")

                def draw(tmp):
                    P.throughput(rows, tmp, x=x or "offered_rate", series=series,
                                 y=y or "accepted_rate", **axes)
            elif kind == "collective":
                P.check_rows(rows, x=x or "workload.bytes", y=y or "busbw_gbps",
                             series=series or "workload.algorithm")

                def draw(tmp):
                    P.collective(rows, tmp, x=x or "workload.bytes", y=y or "busbw_gbps",
                                 series=series or "workload.algorithm", **axes)
            elif kind == "breakdown":
                swept = [k for k in rows[0]["params"]]
                if x is None and not swept:
                    raise click.ClickException("--kind breakdown needs --x (the key whose "
                                               "values make the bars)")
                bx = x or swept[0]
                bs = series if series else (swept[1] if len(swept) > 1 and x is None else None)
                P.check_breakdown(rows, x=bx, series=bs)

                def draw(tmp):
                    P.breakdown(rows, tmp, x=bx, series=bs, title=title, ylim=ylim)
            else:
                if not (group and series and baseline is not None and y):
                    raise click.ClickException("--kind speedup needs --group, --series, "
                                               "--baseline and --y (the metric)")
                base = parse_override(f"v={baseline}")[1]
                P.check_speedup(rows, group, series, y, base)

                def draw(tmp):
                    P.speedup_bars(rows, tmp, group, series, y, base, title=title, ylim=ylim,
                                   logy=logy)
        elif os.path.isfile(source) and is_sqlite(source):
            raise click.ClickException(f"{source} is a results database; --kind {kind} "
                                       f"takes {FILE_KINDS[kind]}")
        elif kind == "link-utilisation":
            result = _read_json(source)
            _takes(source, kind, result, "result")
            P.check_result(result, source)
            cfg = from_resolved(result["config"])
            network = compile_network(cfg)
            P.check_links(network, result, source)
            P.check_drawable(network.topo)

            def draw(tmp):
                P.link_utilisation(network, cfg, result, tmp, title=title)
        elif kind == "timeline":
            trace = _read_json(source)
            _takes(source, kind, trace, "trace")
            P.check_trace(trace, source)
            P.check_timeline(trace, xlim)

            def draw(tmp):
                P.timeline(trace, tmp, title=title, xlim=xlim)
        elif kind == "memory":
            result = _read_json(source)
            _takes(source, kind, result, "result")
            check_memory(result, source)

            def draw(tmp):
                P.memory(result, tmp, title=title, xlim=xlim)
        elif kind == "jobs":
            result = _read_json(source)
            if not isinstance(result, dict) or result.get("kind") != "jobs":
                raise click.ClickException(f"{source} is not a job stream's result; --kind "
                                           f"jobs takes {FILE_KINDS[kind]}")
            check_jobs(result, source)

            def draw(tmp):
                P.jobs_cdf(result, tmp, title=title)
        else:
            cfg = load(source)
            network = compile_network(cfg)
            P.check_drawable(network.topo)

            def draw(tmp):
                P.draw_topology(network, cfg, tmp, title=title)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    except ConfigError as e:
        raise click.ClickException(f"configuration error: {e}") from None
    except (KeyError, ValueError) as e:
        raise click.ClickException(f"{source}: not usable for --kind {kind}: {e}") from None
    if not _write(out, by_path(draw), force=force):
        sys.exit(1)
    click.echo(f"written {out}")


def _figure_ext(path, option):
    if os.path.splitext(path)[1].lower() not in (".png", ".pdf", ".svg"):
        raise click.ClickException(f"{option} {path}: expected a .png, .pdf or .svg file")


def _read_json(path):
    """A JSON file the user names for a figure (bounded, strict: NaN and Infinity are not
    JSON)."""

    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    try:
        return json.loads(read_bounded(path).decode("utf-8"), parse_constant=refuse)
    except UnicodeDecodeError:
        raise click.ClickException(f"{path}: not a JSON file (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise click.ClickException(f"{path}: not a JSON file: {e}") from None
    except RecursionError:
        raise click.ClickException(f"{path}: nests too deeply") from None
    except OSError as e:
        raise click.ClickException(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise click.ClickException(f"{path}: {e}") from None


if __name__ == "__main__":  # pragma: no cover
    main()
