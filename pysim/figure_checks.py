"""What each kind of figure can draw, checked before drawing: a figure from data it cannot
draw is refused with the reason, never drawn meaningless and never a traceback.

- latency-load, throughput: synthetic-traffic runs (workload.kind = 'synthetic');
  collective: collective runs; each with its x key varying over the points.
- jobs: a `pysim jobs --json` result: policies, each with jobs of positive, finite times, the
  reference policy among them, and the same jobs under every policy.
- memory: a run's --json result whose memory occupancy is per device a list of
  (cycle, bytes) pairs.
"""
from __future__ import annotations

import math

from pysim.errors import ConfigError

RUNS_OF = {"latency-load": ("synthetic", "synthetic-traffic runs", "collective, breakdown "
                            "or speedup"),
           "throughput": ("synthetic", "synthetic-traffic runs", "collective, breakdown or "
                          "speedup"),
           "collective": ("collective", "collective runs", "latency-load, throughput, "
                          "breakdown or speedup"),
           "breakdown": ("training", "training runs (their iteration's time by part)",
                         "latency-load, throughput, collective or speedup")}


def _kind_of(row):
    cfg = ((row.get("result") or {}).get("config") or {})
    return (cfg.get("workload") or {}).get("kind", "synthetic")


def check_runs(rows, kind, x, source):
    """Refuse a sweep figure of `kind` over points of another workload kind, or whose x key
    (a configuration key) takes one value at most."""
    want, what, others = RUNS_OF[kind]
    ok = [r for r in rows if r.get("status") != "failed"]
    kinds = sorted({str(_kind_of(r)) for r in ok})
    if ok and want not in kinds:
        raise ConfigError(f"{source}: --kind {kind} draws {what}; its points are "
                          f"{', '.join(kinds)} runs (try --kind {others})")
    if "." in x:                          # a configuration key, not a metric
        swept = {repr(r["params"][x]) for r in ok if x in (r.get("params") or {})}
        if len(swept) < 2 and len(ok) > 1:
            keys = sorted({k for r in ok for k in (r.get("params") or {})})
            raise ConfigError(f"{source}: --kind {kind} draws {x} on the x axis, which the "
                              f"sweep does not vary; its swept keys are "
                              f"{', '.join(keys) or 'none'} (give one as --x)")


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_jobs(result, source):
    """A job stream's result, as far as the jobs figure reads it."""
    if not isinstance(result, dict) or result.get("kind") != "jobs":
        raise ConfigError(f"{source} is not a job stream's result (pysim jobs --json)")
    pols, jobs = result.get("policies"), result.get("jobs")
    if not isinstance(pols, dict) or not pols:
        raise ConfigError(f"{source}: 'policies' = {str(pols)[:60]}: expected the policies "
                          f"compared (an object with one entry or more)")
    if not isinstance(jobs, list) or not jobs:
        raise ConfigError(f"{source}: 'jobs' holds no job record")
    ref = result.get("reference", next(iter(pols)))
    if ref not in pols:
        raise ConfigError(f"{source}: 'reference' = {ref!r} is none of the policies "
                          f"({', '.join(map(str, pols))})")
    ids = {}
    for i, r in enumerate(jobs):
        if not isinstance(r, dict) or r.get("policy") not in pols or \
                isinstance(r.get("id"), bool) or not isinstance(r.get("id"), int):
            raise ConfigError(f"{source}: jobs[{i}]: expected a job record with an integer "
                              f"'id' and a 'policy' among {', '.join(map(str, pols))}")
        if not _num(r.get("exec_s")) or r["exec_s"] <= 0:
            raise ConfigError(f"{source}: jobs[{i}].exec_s = {r.get('exec_s')!r}: expected a "
                              f"positive number of seconds")
        ids.setdefault(r["policy"], set()).add(r["id"])
    for p in pols:
        if not ids.get(p):
            raise ConfigError(f"{source}: policy {p!r} has no job record")
        if ids[p] != ids[ref]:
            raise ConfigError(f"{source}: policy {p!r} ran other jobs than the reference "
                              f"{ref!r}; a speed-up compares the same jobs")


def check_memory(result, source):
    """A run's result, as far as the memory figure reads it."""
    mem = result.get("memory") if isinstance(result, dict) else None
    tl = mem.get("timeline") if isinstance(mem, dict) else None
    if not isinstance(tl, dict) or not tl:
        raise ConfigError(f"{source}: the result has no memory occupancy (run a training "
                          f"iteration or an op graph that holds memory, and write it with "
                          f"--json)")
    for d, pts in tl.items():
        if not isinstance(pts, list) or not all(
                isinstance(p, (list, tuple)) and len(p) == 2 and _num(p[0]) and _num(p[1])
                for p in pts):
            raise ConfigError(f"{source}: memory.timeline[{d!r}]: expected a list of "
                              f"[cycle, bytes] pairs of numbers")
    devices = mem.get("devices", {})
    if not isinstance(devices, dict) or not all(isinstance(v, dict)
                                                for v in devices.values()):
        raise ConfigError(f"{source}: memory.devices: expected an object of devices")
    if result.get("makespan_cycles") is not None and not _num(result["makespan_cycles"]):
        raise ConfigError(f"{source}: makespan_cycles = {result['makespan_cycles']!r}: "
                          f"expected a number")
    clock = ((result.get("config") or {}).get("network") or {}).get("clock_ghz")
    if clock is not None and not (_num(clock) and clock > 0):
        raise ConfigError(f"{source}: config.network.clock_ghz = {clock!r}: expected a "
                          f"number > 0")
