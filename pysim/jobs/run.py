"""Running a stream under several policies: the policies' event loops side by side, their
simulations on an executor (this process, local workers, or a Dask cluster), shared by key.
"""
from __future__ import annotations

import hashlib
import json
import time

from pysim._version import __version__
from pysim.errors import ConfigError
from pysim.jobs import execute, policies as pol, stream as st
from pysim.jobs.cache import Cache
from pysim.jobs.loop import policy_loop
from pysim.jobs.policies import Candidates
from pysim.jobs.results import StreamResult, summarise
from pysim.jobs.servers import Server
from pysim.jobs.sensitivity import derive, least_work
from pysim.sweep import Executor


def config_salt(cfg):
    """What every simulation of a stream depends on besides its shape: the server's config
    (the [jobs] keys that change simulations included, the others not)."""
    d = cfg.to_dict()
    jobs = d.pop("jobs")
    d["_sim"] = {k: jobs[k] for k in ("sim_iterations",)}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def run_stream(server, jobs=None, builder=None, workers=1, scheduler=None, cache=None,
               progress=None, fresh=False) -> StreamResult:
    """Run a stream (jobs, or the one server.cfg's [jobs] describes) under every policy of
    jobs.policies. builder: how a job's iterations are built (default: training, see
    pysim.jobs.execute). workers / scheduler: where the simulations run (pysim.sweep.Executor).
    cache: a pysim.jobs.cache.Cache (its SQLite file reused across runs) or None.
    progress(done, total): called as jobs finish, over all policies; at the flit level, its
    `estimate(est)` (if it has one) is called first with a lower bound of the stream's
    simulation work (pysim.jobs.sensitivity.least_work). fresh: simulate every
    job (and every group of jobs running together) on its own allocation on the whole server,
    sharing nothing -- slow; it checks what the shapes and the cache give. A job that cannot
    be built (a model that does not fit its NPUs) is refused naming the jobs of its kind."""
    source = None                     # the job file the jobs come from, named in errors
    if jobs is None and isinstance(server, Server):
        source = st.stream_path(server.cfg)
        jobs = st.stream(server.cfg)
    jobs = list(jobs) if jobs is not None else None
    try:
        return _run_stream(server, jobs, builder, workers, scheduler, cache, progress, fresh,
                           source)
    except ConfigError as e:
        kind = getattr(e, "job_kind", None)
        if kind is None or jobs is None:
            raise
        ids = [j.id for j in jobs if (j.model, j.npus, j.batch) == kind]
        if not ids:
            raise
        more = f" and {len(ids) - 5:,} more" if len(ids) > 5 else ""
        raise ConfigError(f"job{'s' if len(ids) > 1 else ''} "
                          f"{', '.join(str(i) for i in ids[:5])}{more}: {e}") from None


def _run_stream(server, jobs, builder, workers, scheduler, cache, progress, fresh,
                source=None):
    if scheduler is None and (isinstance(workers, bool) or not isinstance(workers, int)
                              or workers < 1):
        raise ConfigError(f"workers = {workers!r}: expected a number of worker processes "
                          f">= 1")
    if not isinstance(server, Server):
        raise TypeError(f"run_stream(server): expected a Server (pysim.jobs.load_server), not "
                        f"{type(server).__name__}")
    t0 = time.perf_counter()
    cfg = server.cfg
    jobs = list(jobs)                    # (run_stream read a stream of None from cfg)
    builder = builder or execute.training
    known = getattr(builder, "known_models", None)       # the models a builder can build
    st.check(jobs, server, known() if known is not None else None, source)
    names = list(cfg.jobs.policies)
    fns = {n: pol.get(n) for n in names}
    cache = cache if cache is not None else Cache()
    settings = dict(salt=config_salt(cfg), sim_iterations=cfg.jobs.sim_iterations,
                    corun=cfg.jobs.corun, corun_iterations=cfg.jobs.corun_iterations,
                    fresh=fresh)
    cands = {}
    stats = dict(simulations=0, sim_wall_seconds=0.0, sim_cycles=0, flit_hops=0, together=0,
                 for_sensitivity=0, network_model=cfg.network.model)

    def simulated(value, sensitivity=False):
        stats["simulations"] += 1
        stats["for_sensitivity"] += sensitivity
        stats["sim_wall_seconds"] += value["wall_seconds"]
        stats["sim_cycles"] += value["cycles"]
        stats["flit_hops"] += value.get("flit_hops", 0)

    def cands_for(k, pattern):
        if (k, pattern) not in cands:
            cands[(k, pattern)] = Candidates(server, k, pattern)
        return cands[(k, pattern)]

    # The labels are derived (simulated) only for a policy that reads them (policies.LABELLED);
    # without one, a job's `sensitive` stays what the stream or its file said (None: unknown).
    labels = any(n in pol.LABELLED for n in names)
    say = getattr(progress, "estimate", None)
    if say is not None and cfg.network.model == "flit" and not fresh:
        est = least_work(server, jobs, builder, cands_for, settings, labels)
        if est is not None:
            say(est)
    sens_rows = []
    if labels:
        jobs, sens_rows = derive(server, jobs, builder, cache, cands_for, settings,
                                 lambda value: simulated(value, sensitivity=True))
    stats["sensitivity"] = sens_rows
    ended = [0]
    total = len(jobs) * len(names)

    def ended_one():
        ended[0] += 1
        if progress is not None:
            progress(ended[0], total)

    loops = {n: policy_loop(server, jobs, n, fns[n], cands_for, settings, ended_one)
             for n in names}
    records = {}
    waiting = {}          # key -> [(policy, need)]
    inflight = {}         # handle -> key

    def step(name, value):
        """Resume loop `name` with `value` until it needs a simulation not yet known."""
        gen = loops[name]
        try:
            need = next(gen) if value is None else gen.send(value)
            while True:
                hit = cache.get(need.key)
                if hit is None:
                    break
                need = gen.send(hit)
        except StopIteration as stop:
            records[name] = stop.value
            return
        if need.key not in waiting:
            waiting[need.key] = []
            inflight[ex.submit(execute.simulate_shapes, cfg, need.topo, need.members, builder)] = \
                need.key
            stats["together"] += need.kind == "together"
        waiting[need.key].append(name)

    with Executor(jobs=workers, scheduler=scheduler) as ex:
        for n in names:
            step(n, None)
        while inflight:
            done, _ = ex.wait(set(inflight))
            for h in sorted(done, key=lambda h: inflight[h]):
                key = inflight.pop(h)
                value = ex.result(h)
                simulated(value)
                cache.put(key, value)
                for n in waiting.pop(key):
                    step(n, value)
    stats.update(cache_hits=cache.hits, wall_seconds=time.perf_counter() - t0)
    return StreamResult(server=server.name, policies=summarise(records, names),
                        jobs=[r for n in names for r in records[n]], stream=[
                            j.to_dict() for j in jobs], stats=stats, config=cfg.resolved(),
                        seed=int(cfg.simulation.seed), version=__version__)
