"""`pysim jobs`: a stream of training jobs on a shared server under allocation policies.
"""
from __future__ import annotations

import os
import re
import sys

import click

from pysim._io import dump_json
from pysim.cli._common import (OutPath, Ticker, distinct_outputs, eta, finish, keep_json,
                               not_an_input,
                               keep_text, main, overrides, refuse_overwrite, refuse_stdout)
from pysim.config import parse_override
from pysim.errors import ConfigError
from pysim.jobs import run_stream
from pysim.jobs import stream as jst
from pysim.jobs.cache import Cache
from pysim.jobs.servers import load_server
from pysim.sim import SimulationError
from pysim.sweep import WorkerDied


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
@click.option("--json", "json_path", type=OutPath(dir_okay=False), default=None,
              help="Write every policy's statistics and every job's record as JSON (-: "
                   "standard output, the summary then going to stderr).")
@click.option("--write-jobs", "jobs_out", type=OutPath(dir_okay=False), default=None,
              help="Write the stream as a job file (to edit or rerun it; -: standard "
                   "output).")
@click.option("--cache", "cache_path", type=OutPath(dir_okay=False), default=None,
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
    options = (("--jobs", "jobs.count", count), ("--policy", "jobs.policies", policy),
               ("--seed", "simulation.seed", seed), ("--job-file", "jobs.file", job_file))
    try:
        distinct_outputs(("--json", json_path), ("--write-jobs", jobs_out),
                         ("--cache", cache_path))
        refuse_stdout("--cache", cache_path, "a database")
        refuse_overwrite(json_path, force)
        refuse_overwrite(jobs_out, force)
        over = overrides(sets)
        for opt, key, given in options:
            if given is not None and key in over:    # (one would silently win)
                set_as = next(s for s in sets if parse_override(s)[0] == key)
                raise ConfigError(f"{opt} {given} and --set {set_as} both set {key}; give "
                                  f"one")
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
        not_an_input((("--json", json_path), ("--write-jobs", jobs_out)), cfg=srv.cfg)
        stream = jst.stream(srv.cfg)
        cache = Cache(cache_path)
        bar = _Progress(draw=sys.stderr.isatty()) if not quiet else None
        try:
            result = run_stream(srv, None, workers=workers, scheduler=scheduler,
                                cache=cache, progress=bar)
        finally:
            cache.close()
            if bar is not None:
                bar.clear()
    except ConfigError as e:
        msg = str(e)
        for opt, key, given in options:
            # (a value typed as an option is named as typed, not as an override on the file)
            if given is not None and msg.startswith(f"{key} = "):
                msg = re.sub(r" \(given as an override, on [^()]*\)$", f" (given as {opt} "
                             f"{given})", msg)
        raise click.ClickException(f"configuration error: {msg}") from None
    except (SimulationError, WorkerDied) as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo("\ninterrupted: nothing written" + (
            f" (the shapes simulated so far are in {cache_path})" if cache_path else ""),
            err=True)
        sys.exit(130)
    text = jst.jobs_text(stream) if jobs_out else None
    d = result.to_dict() if json_path else None
    finish([(jobs_out, lambda f: f.write(text), lambda: keep_text(text, "jobs", ".toml"),
             "stream"),
            (json_path, lambda f: dump_json(d, f, indent=1), lambda: keep_json(d, "jobs"),
             "result")], result.summary, quiet, force)


class _Progress(Ticker):
    """Jobs finished over all policies, on the terminal (stderr), at most once a second (the
    first and the last count always)."""

    def __init__(self, draw=True):
        super().__init__(draw)
        self.shown = -1.0

    def __call__(self, done, total):
        self.show(lambda t: f"jobs {done} of {total} (over all policies), {t:.0f} s" +
                  eta(done / total if total else None, t),
                  now=done >= total)
