"""The event loop of one policy over one stream: a FIFO queue with head-of-line blocking, and
running jobs that progress at the speed their simulations give.

Events are arrivals and completions. At each, arrived jobs join the queue's tail; then the job
at the head starts if the policy finds it an allocation among the free NPUs, and the next one
may start in turn; the first that cannot start blocks those behind it (as in MAPA's simulator).

A job's work is its time alone on its allocation: the first simulated iteration plus (n - 1)
steady-state iterations (the last simulated minus the first, over their count). Running jobs
whose routes share a link (in the same direction) form a group; a group of two or more is
simulated together (each job a few iterations, so that all run for about `corun_iterations`
iterations of the slowest), and each job's slowdown is its steady-state iteration there over
its iteration alone. Between events every job advances at 1 / slowdown of its work per
second. (The approximation: contention is taken as steady between events -- iterations'
phases and partly-done iterations are averaged over; bench/jobs_corun.py measures its error
against one simulation of a whole stream.)

The loop is a generator: it yields `Need`s (simulations it waits for) and receives their
results, so that the driver can run the needs of several policies at once on an executor and
share their results by key.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import POS, Key, declare
from pysim.jobs.policies import pattern_edges
from pysim.jobs.shape import Shape, canonical_ranks, shape

MAX_CORUN_ITERATIONS = 64   # iterations of one job in a simulation of jobs running together


@dataclass
class Need:
    """A simulation a loop waits for: `key` names its result (see pysim.jobs.shape)."""
    key: str
    kind: str              # "alone" or "together"
    topo: object           # the shape's network
    members: list          # (spec, node names in rank order, iterations) per job


@dataclass
class _Run:
    job: object
    nodes: list            # NPU indices in rank order
    start: float
    work: float            # seconds alone
    remaining: float       # seconds alone still to do
    first: float           # cycles of the first iteration alone
    steady: float          # cycles of a steady-state iteration alone
    links: frozenset       # directed links its sends use
    label: tuple
    score: float
    predicted: float
    key: str
    after: list = field(default_factory=list)   # the jobs whose end let it start
    pairs: list = field(default_factory=list)   # the rank pairs its pattern joins
    slow: float = 1.0
    busy: float = 0.0      # seconds spent slowed down (slowdown > 1)


def spec_of(job):
    return dict(model=job.model, batch=job.batch, algorithm=job.algorithm)


def label_of(spec):
    return tuple(sorted(spec.items()))


def policy_loop(server, jobs, name, policy, cands_for, settings, ended_one=None):
    """Run `jobs` under `policy` (a function of pysim.jobs.policies); yields Needs, returns
    one record per job. settings: salt (the server's config hash), sim_iterations, corun
    ('together' or 'apart'), corun_iterations. ended_one(): called as each job ends."""
    clock = server.cfg.network.clock_ghz * 1e9           # cycles per second
    settings = dict(settings, policy=name)
    W = settings["sim_iterations"]
    free = np.ones(server.size, bool)
    arrivals = deque(sorted(jobs, key=lambda j: (j.arrival_s, j.id)))
    queue = deque()
    running = {}
    records = []
    now = 0.0
    ended = []                 # the jobs whose end is the current event
    together = {}              # ids of jobs running together -> their slowdowns
    while arrivals or queue or running:
        while arrivals and arrivals[0].arrival_s <= now:
            queue.append(arrivals.popleft())
        while queue:                                     # FIFO, head-of-line blocking
            job = queue[0]
            if job.npus > int(free.sum()):
                break
            cands = cands_for(job.npus, job.pattern)
            i = policy(server, job, cands, free.copy())
            if i is None:
                break
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise ConfigError(f"policy {name!r} returned {i!r} for job {job.id}: expected "
                                  f"the index of a placement (an integer) or None")
            i = int(i)
            if not 0 <= i < len(cands) or not cands.feasible(free)[i]:
                raise ConfigError(f"policy {name!r} chose placement {i} for job {job.id}, "
                                  f"which is not among the free NPUs' placements")
            pairs = pattern_edges(job.pattern, job.npus)[1]
            nodes = canonical_ranks(server, [int(x) for x in cands.nodes[i]], job.pattern,
                                    pairs)
            spec = spec_of(job)
            iters = min(W, job.iterations)
            sh = _shape(server, [nodes], [label_of(spec)], (settings["salt"], "alone", iters),
                        settings, [pairs])
            res = yield Need(sh.key, "alone", sh.topo, [(spec, sh.names[0], iters)])
            e = res["ends"][0]
            first = float(e[0])
            steady = float(e[-1] - e[0]) / (len(e) - 1) if len(e) > 1 else first
            work = (first + (job.iterations - 1) * steady) / clock
            links = frozenset(h for a, b in res["pairs"][0]
                              for h in server.route(nodes[a], nodes[b]))
            queue.popleft()
            free[nodes] = False
            running[job.id] = _Run(job, nodes, now, work, work, first, steady, links,
                                   label_of(spec), float(cands.score[i]),
                                   float(cands.predicted[i]), sh.key, after=list(ended),
                                   pairs=pairs)
        if not running:
            if arrivals:
                now = max(now, arrivals[0].arrival_s)
                ended = []
                continue
            job = queue[0]
            raise ConfigError(f"policy {name!r} finds no allocation for job {job.id} "
                              f"({job.npus} NPUs, {job.pattern}) on the idle server")
        # speeds: jobs whose routes share a link run together
        for r in running.values():
            r.slow = 1.0
        if settings["corun"] == "together":
            for group in _groups(list(running.values())):
                if len(group) > 1:
                    ids = tuple(r.job.id for r in group)
                    if ids not in together:          # (a group's jobs keep their places)
                        together[ids] = yield from _together(server, group, settings)
                    for r, s in zip(group, together[ids]):
                        r.slow = s
        t_done = min(now + r.remaining * r.slow for r in running.values())
        t_next = min(t_done, arrivals[0].arrival_s if arrivals else math.inf)
        dt = t_next - now
        ending = [r for r in running.values()
                  if now + r.remaining * r.slow <= t_next + 1e-12 * max(1.0, t_next)]
        for r in running.values():
            r.remaining -= dt / r.slow
            if r.slow > 1.0:
                r.busy += dt
        now = t_next
        ended = sorted(r.job.id for r in ending)
        for r in sorted(ending, key=lambda r: r.job.id):
            del running[r.job.id]
            free[r.nodes] = True
            records.append(_record(server, r, now, name))
            if ended_one is not None:
                ended_one()
    return sorted(records, key=lambda d: d["id"])


def _record(server, r, end, policy):
    j = r.job
    return dict(id=j.id, policy=policy, model=j.model, npus=[server.names[x] for x in r.nodes],
                pattern=j.pattern, sensitive=j.sensitive, iterations=j.iterations,
                batch=j.batch, arrival_s=j.arrival_s, start_s=r.start, end_s=end,
                exec_s=end - r.start, queue_s=r.start - j.arrival_s, alone_s=r.work,
                slowdown=(end - r.start) / r.work if r.work > 0 else 1.0,
                contended_s=r.busy, iteration_alone_s=r.steady /
                (server.cfg.network.clock_ghz * 1e9),
                score_gbps=r.score, predicted_gbps=r.predicted, shape=r.key[:12],
                started_by=r.after)


def _shape(server, members, labels, salt, settings, pairs):
    """The shape to simulate, or with settings['fresh'] the allocation itself on the whole
    server under a key of its own (no result is ever shared: for checking the cache)."""
    if not settings.get("fresh"):
        return shape(server, members, labels, salt, pairs)
    settings["fresh_count"] = settings.get("fresh_count", 0) + 1
    return Shape(key=f"fresh:{settings['fresh_count']}:{settings['policy']}", topo=None,
                 order=list(range(len(members))),
                 names=[[server.names[x] for x in m] for m in members])


def _groups(runs):
    """Runs whose link sets meet, transitively (union-find), each in start order."""
    parent = list(range(len(runs)))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a
    owner = {}
    for i, r in enumerate(runs):
        for h in r.links:
            if h in owner:
                parent[find(i)] = find(owner[h])
            else:
                owner[h] = i
    out = {}
    for i, r in enumerate(runs):
        out.setdefault(find(i), []).append(r)
    return [sorted(g, key=lambda r: (r.start, r.job.id)) for g in out.values()]


def _together(server, group, settings):
    """Slowdown of each run of `group` when they run together (see the module docstring)."""
    span = settings["corun_iterations"]
    slowest = max(r.steady for r in group)
    iters = [int(min(MAX_CORUN_ITERATIONS, max(2, math.ceil(span * slowest / r.steady))))
             for r in group]
    sh = _shape(server, [r.nodes for r in group],
                [(r.label, n) for r, n in zip(group, iters)],
                (settings["salt"], "together"), settings, [r.pairs for r in group])
    members = [(dict(group[i].label), sh.names[p], iters[i]) for p, i in enumerate(sh.order)]
    res = yield Need(sh.key, "together", sh.topo, members)
    ends = [np.asarray(e, float) for e in res["ends"]]
    t_end = min(e[-1] for e in ends)
    slow = [1.0] * len(group)
    for p, i in enumerate(sh.order):
        e, r = ends[p], group[i]
        b = int(np.searchsorted(e, t_end, side="right"))      # iterations ended by t_end
        if b >= 2:
            slow[i] = float((e[b - 1] - e[0]) / (b - 1)) / r.steady
        else:
            slow[i] = float(e[0]) / r.first
    return slow


# The configuration keys this module reads (pysim.schema).
declare(
    Key("jobs", "sim_iterations", "int", 4, "iterations",
        "Training iterations simulated per allocation shape: a job's time alone is its first "
        "iteration plus (n - 1) times the mean of the others.", POS),
    Key("jobs", "corun", "str", "together", "-",
        "'together': running jobs whose routes share a link are simulated together and slow "
        "each other down; 'apart': every job runs at its speed alone.", None,
        lambda: ["together", "apart"]),
    Key("jobs", "corun_iterations", "int", 3, "iterations",
        "A simulation of jobs running together spans this many iterations of the slowest.",
        POS),
)
