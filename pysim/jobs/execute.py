"""How long a job takes: its training iterations, simulated on the NPUs it got.

A builder appends a job's iterations to an op graph:

    builder(cfg, spec, nodes, graph, prefix, iterations) -> [op id ending each iteration]

`cfg` is the server's config, `spec` the job (`model`, `batch`: the global mini-batch,
`algorithm`: the collective algorithm of its pattern), `nodes` its NPUs' names in rank order
(the ring order of a ring), `prefix` a name prefix for its ops. The builder of record is
`training`: the training-iteration workload (pysim.workload.training) of the model on those
NPUs, data parallel. Another builder can be passed to `pysim.jobs.run_stream`.

`simulate` runs one or more jobs together on a shape's network (pysim.jobs.shape) and returns,
per job, the cycle each iteration ended and the pairs of ranks that sent each other data.
It is what the executors run (pysim.sweep.Executor), in this process or elsewhere.
"""
from __future__ import annotations

import time

from pysim.config import ConfigError


def training(cfg, spec, nodes, graph, prefix, iterations):
    """The training iterations of spec['model'] on `nodes` (data parallel over them, global
    batch spec['batch'], collectives by spec['algorithm'] in the order of `nodes`)."""
    try:
        from pysim.workload import training as tr
    except ImportError:
        raise ConfigError("job execution times come from simulated training iterations "
                          "(workload.kind = 'training'), which this build of pysim lacks") \
            from None
    return tr.job_iterations(cfg, spec["model"], list(nodes), graph=graph, prefix=prefix,
                             iterations=iterations, batch=spec["batch"],
                             algorithm=spec["algorithm"])


def _check_routes(topo, g):
    """Every send of the graph has a route in the shape's network (which keeps the routes of
    the pairs the jobs' patterns join, and no others)."""
    index = {n: i for i, n in enumerate(topo.node_names)}
    seen = set()
    for k, a, b in zip(g.kind, g.node, g.dst):
        if k != "send" or (a, b) in seen:
            continue
        seen.add((a, b))
        u, d, hops = index.get(a), index.get(b), 0
        while u is not None and d is not None and u != d and hops <= topo.n_nodes:
            c = topo.table[u, d]
            u = None if c < 0 else topo.ch_dst[c]
            hops += 1
        if u != d:
            raise ConfigError(f"the job builder sends from {a} to {b}, a pair its pattern does "
                              f"not join (the shape keeps only the routes of the pattern)")


def _zoo():
    from pysim import models
    return set(models.names())


training.known_models = _zoo


def simulate(cfg, topo, members, builder):
    """Run `members` -- (spec, node names in rank order, iterations) each -- together on the
    network `topo` with cfg's router parameters. Returns {"ends": per member the cycle each
    iteration ended, "pairs": per member the (rank, rank) pairs its sends join, "cycles",
    "wall_seconds"}."""
    from pysim.workload.graph import OpGraph, run_graph
    t0 = time.perf_counter()
    g = OpGraph()
    ends, spans = [], []
    for m, (spec, nodes, iters) in enumerate(members):
        lo = len(g)
        e = builder(cfg, spec, list(nodes), g, f"j{m}.", int(iters))
        if len(e) != iters:
            raise ConfigError(f"the job builder gave {len(e)} iteration ends for {iters} "
                              f"iterations")
        ends.append(list(e))
        spans.append((lo, len(g)))
    if topo is not None:
        _check_routes(topo, g)
    res = run_graph(cfg, g, topo=topo)
    out_ends, out_pairs = [], []
    for (lo, hi), e, (spec, nodes, _) in zip(spans, ends, members):
        rank = {n: r for r, n in enumerate(nodes)}
        out_ends.append([int(res.ops[i]["finish"]) for i in e])
        pairs = set()
        for i in range(lo, hi):
            if g.kind[i] == "send" and g.node[i] in rank and g.dst[i] in rank:
                pairs.add((rank[g.node[i]], rank[g.dst[i]]))
        out_pairs.append(sorted(pairs))
    return dict(ends=out_ends, pairs=out_pairs, cycles=int(res.makespan_cycles),
                flit_hops=int(res.flit_hops), wall_seconds=time.perf_counter() - t0)
