"""`pysim sweep` and `pysim results`: parameter grids run into a results database, and the
database read back.
"""
from __future__ import annotations

import csv
import sys

import click

from pysim.cli._common import (STDOUT, OutPath, main, print_table, refuse_overwrite, refuse_stdout,
                               not_an_input, write_output)
from pysim.errors import ConfigError
from pysim.sweep import Store, StoreError, parse_param, sort_rows, sweep, tidy


SUMMARY_METRICS = ("offered_rate", "accepted_rate", "avg_packet_latency", "p99_packet_latency",
                   "avg_hops", "saturated", "collective_cycles", "algbw_gbps", "busbw_gbps",
                   "makespan_cycles", "iteration_cycles", "samples_per_second",
                   "exposed_comm_cycles", "cycles_per_second")   # (those a row has are shown)


@main.command(name="sweep")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--param", "params", multiple=True, metavar="KEY=V1,V2|START:STOP:STEP",
              help="A swept key: a list of values, or a range with STOP included "
                   "(repeatable; the grid is their cross product).")
@click.option("--zip", "zipped", is_flag=True, help="Pair the --param lists instead of "
                                                    "crossing them.")
@click.option("--db", default="results.sqlite", show_default=True,
              type=OutPath(dir_okay=False),
              help="SQLite file the results go to; points already in it are skipped.")
@click.option("--workers", "-j", "jobs", type=int, default=None,
              help="Local worker processes (default and most: the number of cores).")
@click.option("--jobs", "jobs_alias", type=int, default=None, hidden=True)
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Run the points on this Dask distributed scheduler instead.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or table.")
def sweep_cmd(config, params, zipped, db, jobs, jobs_alias, scheduler, quiet):
    """Run CONFIG over a grid of parameters, in parallel, resumably."""
    refuse_stdout("--db", db, "a database")
    try:
        grid = {}
        for p in params:
            key, values = parse_param(p)
            if key in grid:
                raise ConfigError(f"--param {key} is given twice; give all its values in one "
                                  f"--param ({key}=V1,V2,...)")
            grid[key] = values
        opt = "--workers" if jobs is not None else "--jobs"
        jobs = jobs if jobs is not None else jobs_alias     # (--jobs: the older spelling)
        if jobs is not None and jobs < 1:
            raise ConfigError(f"{opt} {jobs}: expected at least 1 (local worker processes)")
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
        print_table(t, list(grid) + ["status"] + [m for m in SUMMARY_METRICS
                                                  if any(m in r for r in t)])
        click.echo(f"{len(rows)} points in {db}")
    if any(r["status"] == "failed" for r in rows):
        for r in rows:
            if r["status"] == "failed":
                click.echo(f"failed {r['params']}: {r['error']}", err=True)
        sys.exit(1)


@main.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.option("--csv", "csv_path", type=OutPath(dir_okay=False), default=None,
              help="Export the tidy table (one row per point, one column per swept key and "
                   "per scalar metric; -: standard output).")
@click.option("--force", is_flag=True, help="Overwrite the CSV file if it exists.")
def results(db, csv_path, force):
    """Print or export the results stored in DB."""
    not_an_input([("--csv", csv_path)], [("the results database", db)])
    refuse_overwrite(csv_path, force)
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
        cols = swept + ["system", "status", "error"] + sorted(
            {k for r in t for k in r} - set(swept) - {"system", "status", "error"})
        def write(f):
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in t:
                w.writerow({k: r.get(k) for k in cols})
        if not write_output(csv_path, write, force=force):
            sys.exit(1)
        if csv_path != STDOUT:
            click.echo(f"{len(t)} rows written to {csv_path}")
        return
    print_table(t, swept + ["system", "status"] + [m for m in SUMMARY_METRICS
                                                   if any(m in r for r in t)])
