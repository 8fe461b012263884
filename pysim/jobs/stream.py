"""Job streams: the training jobs a shared server runs, generated or read from a job file.

A job asks for `npus` NPUs to train `model` for `iterations` iterations, data parallel, with a
global batch of `batch_per_npu` x npus samples; its NPUs communicate in a `pattern` (ring:
ring all-reduce; clique: direct all-reduce; tree: double binary tree). It arrives at
`arrival_s`. `sensitive` says whether it counts as bandwidth-sensitive (for the preserve
policy).

The generator follows the public job generator of MAPA (Ranganath et al., SC 2021): every
job's NPU count, model and pattern drawn uniformly (2 to 5 NPUs; AlexNet, Inception-v3,
ResNet-50, VGG16 sensitive, GoogLeNet and CaffeNet not; rings), and a length drawn uniformly
(MAPA draws service times of 5 to 24 units; here 500 to 2,400 iterations). Arrivals: all at
time 0 ('batch', as MAPA's simulator runs its streams) or sorted uniform over a window
('uniform', as its generator draws them).

A job file is TOML:

    [[jobs]]
    model = "resnet50"
    npus = 4
    iterations = 1000
    arrival_s = 0.0          # optional (0)
    pattern = "ring"         # optional (ring)
    sensitive = true         # optional (default: jobs.sensitivity decides)
    batch_per_npu = 32       # optional (jobs.batch_per_npu)
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass

import numpy as np

from pysim.config import read_toml
from pysim.errors import ConfigError
from pysim.schema import POS, Key, cross_check, declare, reads, short
import difflib

PATTERNS = ("ring", "clique", "tree")
# the collective algorithm of each pattern (pysim.workload.collectives)
ALGORITHM = {"ring": "ring", "clique": "direct", "tree": "tree"}
MAX_JOBS = 1_000_000
MAX_ARRIVAL_S = 1e9        # ~32 years: past it, a job's seconds lose their fraction
MAX_COUNT = 10 ** 12       # a job's NPUs, iterations, samples per NPU

declare(
    Key("jobs", "sensitivity", "str", "derived", "-",
        "Where a job's bandwidth sensitivity (the preserve policy's input) comes from: "
        "'derived' (its iteration time on its worst placement over its best, simulated; see "
        "jobs.sensitivity_threshold) or 'published' (every model sensitive but those of "
        "jobs.insensitive, MAPA's labels); a job file's own `sensitive` wins.",
        None, lambda: ["derived", "published"]),
    Key("jobs", "sensitivity_threshold", "float", 0.1, "-",
        "Derived sensitivity: a job is bandwidth-sensitive when its iteration on its worst "
        "placement takes at least this fraction longer than on its best.",
        (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e9,
         "a number >= 0")),
)


@dataclass(frozen=True)
class Job:
    id: int
    model: str
    npus: int
    iterations: int
    arrival_s: float = 0.0
    pattern: str = "ring"
    sensitive: bool | None = True      # None: derived when the stream runs
    batch_per_npu: int = 32

    @property
    def algorithm(self):
        return ALGORITHM[self.pattern]

    @property
    def batch(self):
        """The global mini-batch: samples per iteration over all its NPUs."""
        return self.batch_per_npu * self.npus

    def to_dict(self):
        return asdict(self)


def generate(cfg) -> list:
    """A stream drawn from [jobs] (count, min/max_npus, models, patterns, min/max_iterations,
    arrivals, window_s) with the seed simulation.seed."""
    j = cfg.jobs
    n = j.count
    if n > MAX_JOBS:
        raise ConfigError(f"jobs.count = {n}: at most {MAX_JOBS:,} jobs")
    if j.arrivals == "uniform" and j.window_s is None:
        raise ConfigError("jobs.arrivals = 'uniform' needs jobs.window_s (the arrival window "
                          "in seconds)")
    if j.arrivals == "uniform" and not j.window_s <= MAX_ARRIVAL_S:
        raise ConfigError(f"jobs.window_s = {j.window_s!r}: expected at most "
                          f"{MAX_ARRIVAL_S:g} seconds")
    rng = np.random.default_rng(cfg.simulation.seed)
    npus = rng.integers(j.min_npus, j.max_npus + 1, size=n)
    if j.arrivals == "uniform":
        arrivals = np.sort(rng.uniform(0.0, j.window_s, size=n))
    else:
        arrivals = np.zeros(n)
    iters = rng.integers(j.min_iterations, j.max_iterations + 1, size=n)
    patterns = rng.integers(0, len(j.patterns), size=n)
    models = rng.integers(0, len(j.models), size=n)
    insensitive = set(j.insensitive)
    derived = j.sensitivity == "derived"
    # (the draws as Python numbers: indexing numpy arrays costs microseconds a job)
    names = [j.models[m] for m in models.tolist()]
    return [Job(id=i, model=m, npus=k, iterations=it, arrival_s=a,
                pattern=j.patterns[p], sensitive=None if derived else m not in insensitive,
                batch_per_npu=j.batch_per_npu)
            for i, (m, k, it, a, p) in enumerate(zip(names, npus.tolist(), iters.tolist(),
                                                     arrivals.tolist(), patterns.tolist()))]


FIELDS = ("model", "npus", "iterations", "arrival_s", "pattern", "sensitive", "batch_per_npu")


def load_jobs(path, cfg) -> list:
    """Read a job file ([[jobs]] tables); defaults from cfg's [jobs]."""
    raw = read_toml(path, "jobs.file")
    entries = raw.get("jobs")
    extra = set(raw) - {"jobs"}
    if extra:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(sorted(extra))}; a job file "
                          f"holds [[jobs]] tables only")
    if not entries:
        raise ConfigError(f"{path}: no jobs; expected at least one [[jobs]] table")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: expected an array of tables [[jobs]]")
    insensitive = set(cfg.jobs.insensitive)
    derived = cfg.jobs.sensitivity == "derived"
    jobs = []
    for i, e in enumerate(entries):
        where = f"{path}: jobs[{i}]"
        unknown = set(e) - set(FIELDS)
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} "
                              f"(a job takes {', '.join(FIELDS)})")
        for k in ("model", "npus", "iterations"):
            if k not in e:
                raise ConfigError(f"{where}: missing {k}")
        model = e["model"]
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{where}.model = {model!r}: expected a model name")
        jobs.append(Job(id=i, model=model,
                        npus=_count(where, "npus", e["npus"]),
                        iterations=_count(where, "iterations", e["iterations"]),
                        arrival_s=_time(where, e.get("arrival_s", 0.0)),
                        pattern=_pattern(where, e.get("pattern", "ring")),
                        sensitive=_bool(where, e["sensitive"]) if "sensitive" in e else
                        None if derived else model not in insensitive,
                        batch_per_npu=_count(where, "batch_per_npu",
                                             e.get("batch_per_npu", cfg.jobs.batch_per_npu))))
    return sorted(jobs, key=lambda job: (job.arrival_s, job.id))


def _count(where, key, v):
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
        raise ConfigError(f"{where}.{key} = {v!r}: expected an integer from 1 to "
                          f"{MAX_COUNT:,}")
    return v


def _time(where, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_ARRIVAL_S:
        raise ConfigError(f"{where}.arrival_s = {v!r}: expected a number of seconds from 0 "
                          f"to {MAX_ARRIVAL_S:g}")
    return float(v)


def _pattern(where, v):
    if v not in PATTERNS:
        raise ConfigError(f"{where}.pattern = {v!r}: expected one of {', '.join(PATTERNS)}")
    return v


def _bool(where, v):
    if not isinstance(v, bool):
        raise ConfigError(f"{where}.sensitive = {v!r}: expected true or false")
    return v


def jobs_text(jobs):
    """A stream as the text of a job file (what load_jobs reads)."""
    lines = []
    for job in jobs:
        lines += ["[[jobs]]", f"model = {json.dumps(job.model)}", f"npus = {job.npus}",
                  f"iterations = {job.iterations}", f"arrival_s = {job.arrival_s!r}",
                  f'pattern = "{job.pattern}"'] + \
            ([] if job.sensitive is None else [f"sensitive = {str(job.sensitive).lower()}"]) + \
            [f"batch_per_npu = {job.batch_per_npu}", ""]
    return "\n".join(lines)


def write_jobs(jobs, path):
    """Write a stream as a job file."""
    with open(path, "w") as f:
        f.write(jobs_text(jobs))


def stream_path(cfg):
    """jobs.file resolved against the config's folder, or None for a generated stream."""
    path = cfg.jobs.file
    if path is not None and not os.path.isabs(path):
        path = os.path.join(cfg.base_dir, path)
    return path


def stream(cfg) -> list:
    """The stream cfg describes: jobs.file if set (relative to the config), else generated."""
    path = stream_path(cfg)
    return load_jobs(path, cfg) if path is not None else generate(cfg)


def check(jobs, server, models=None, source=None):
    """Refuse a stream the server cannot run: empty, a job larger than the server, or a model
    the zoo does not know (`models`: the known names, when known). `source`: the job file
    the jobs came from, named in the error."""
    if not jobs:
        raise ConfigError("the job stream is empty (jobs.count = 0 or an empty job file)")
    where = f"{source}: " if source is not None else ""
    for job in jobs:
        if job.npus > server.size:
            raise ConfigError(f"{where}job {job.id} ({job.model}) asks for {job.npus} NPUs; "
                              f"the server {server.name} has {server.size}")
        if models is not None and job.model not in models:
            close = difflib.get_close_matches(job.model, models, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}job {job.id}: model {job.model!r} is unknown{hint}; "
                              f"known: {', '.join(sorted(models))}")
    if models is not None:      # (after the jobs' own models: a job's error first)
        for name in server.cfg.jobs.insensitive:
            if name not in models:
                close = difflib.get_close_matches(name, models, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ConfigError(f"jobs.insensitive: model {name!r} is unknown{hint}; known: "
                                  f"{', '.join(sorted(models))}")


# The configuration keys this module reads (pysim.schema).
declare(
    Key("jobs", "count", "int", 100, "jobs",
        "Job streams (pysim jobs): how many jobs a generated stream has.", POS),
    Key("jobs", "min_npus", "int", 2, "NPUs",
        "Generated stream: fewest NPUs a job asks for (drawn uniformly up to max_npus).", POS),
    Key("jobs", "max_npus", "int", 5, "NPUs",
        "Generated stream: most NPUs a job asks for.", POS),
    Key("jobs", "models", "strs", ["alexnet", "inception_v3", "resnet50", "vgg16",
                                   "googlenet", "caffenet"], "-",
        "Generated stream: the models jobs train, drawn uniformly.",
        (lambda xs: len(xs) > 0, "a non-empty list of model names")),
    Key("jobs", "insensitive", "strs", ["googlenet", "caffenet"], "-",
        "jobs.sensitivity = 'published': models whose jobs count as bandwidth-insensitive "
        "(MAPA's labels; the preserve policy gives them the "
        "allocation that keeps the most NVLink bandwidth free); the others are sensitive.",
        None),
    Key("jobs", "patterns", "strs", ["ring"], "-",
        "Generated stream: communication patterns drawn uniformly: ring (ring all-reduce), "
        "clique (direct all-reduce), tree (double binary tree).",
        (lambda xs: len(xs) > 0 and all(x in ("ring", "clique", "tree") for x in xs),
         "a non-empty list of ring, clique, tree")),
    Key("jobs", "min_iterations", "int", 500, "iterations",
        "Generated stream: fewest training iterations of a job (drawn uniformly up to "
        "max_iterations).", POS),
    Key("jobs", "max_iterations", "int", 2400, "iterations",
        "Generated stream: most training iterations of a job.", POS),
    Key("jobs", "arrivals", "str", "batch", "-",
        "Generated stream: 'batch': every job arrives at time 0; 'uniform': arrival times "
        "drawn uniformly over jobs.window_s, in order.", None,
        lambda: ["batch", "uniform"]),
    Key("jobs", "window_s", "float", None, "s",
        "Generated stream with uniform arrivals: the window the arrivals fall in.", POS),
    Key("jobs", "batch_per_npu", "int", 32, "samples",
        "Samples per NPU per iteration: a job on k NPUs trains a global batch of k times "
        "this, data parallel (a job file may set its own).", POS),
    Key("jobs", "file", "str", None, "path",
        "A job file ([[jobs]] tables) to run instead of a generated stream.", None),
)


# The keys that draw a generated stream (`generate`): a job file gives its jobs instead.
GENERATED = ("count", "min_npus", "max_npus", "models", "patterns", "min_iterations",
             "max_iterations", "arrivals", "window_s")
# so a file's generated stream gives way to a job file or other arrivals given over it
# (pysim.schema.drop_unread); given beside them, _check_what_is_read refuses them
reads("jobs.file", None, tuple(f"jobs.{k}" for k in GENERATED))
reads("jobs.file", "*", ())
reads("jobs.arrivals", "uniform", ("jobs.window_s",))
reads("jobs.arrivals", "batch", ())


@cross_check
def _check_what_is_read(cfg):
    """A generated stream's keys given beside jobs.file, and an arrival window without
    uniform arrivals, have no effect: refused, naming the key."""
    j = cfg.jobs
    if j.file is not None:
        for name in GENERATED:
            if cfg.is_set(f"jobs.{name}"):
                raise ConfigError(f"jobs.{name} = {short(getattr(j, name))} is read by a "
                                  f"generated stream only: jobs.file = {j.file!r} gives the "
                                  f"jobs (leave the key out)")
    elif cfg.is_set("jobs.window_s") and j.arrivals != "uniform":
        raise ConfigError(f"jobs.window_s = {j.window_s!r} is read only with jobs.arrivals = "
                          f"'uniform' (it is {j.arrivals!r}: every job at time 0)")


@cross_check
def _check_ranges(cfg):
    j = cfg.jobs
    for lo, hi in (("min_npus", "max_npus"), ("min_iterations", "max_iterations")):
        if getattr(j, lo) > getattr(j, hi):
            raise ConfigError(f"jobs.{lo} = {getattr(j, lo)} > jobs.{hi} = {getattr(j, hi)}: "
                              f"expected {lo} <= {hi}")
