"""How long a job takes: its training iterations, simulated on the NPUs it got.

A builder appends a job's iterations to an op graph:

    builder(cfg, spec, nodes, graph, prefix, iterations, topo=None)
        -> [op id ending each iteration]

`cfg` is the server's config, `spec` the job (`model`, `batch`: the global mini-batch,
`algorithm`: the collective algorithm of its pattern), `nodes` its NPUs' names in rank order
(the ring order of a ring), `prefix` a name prefix for its ops, `topo` the network the graph
will run on (a shape's network, or None: the server's). The builder of record is
`training`: the training-iteration workload (pysim.workload.training) of the model on those
NPUs, data parallel. Another builder can be passed to `pysim.jobs.run_stream`.

`simulate` runs one or more jobs together on a shape's network (pysim.jobs.shape) and returns,
per job, the cycle each iteration ended and the pairs of ranks that sent each other data.
It is what the executors run (pysim.sweep.Executor), in this process or elsewhere.
"""
from __future__ import annotations

import time

from pysim.errors import ConfigError
from pysim import models
from pysim.network import compile_network
from pysim.topology import build as build_topology
from pysim.workload import runtime
from pysim.workload.graph import OpGraph, compile_graph, run_graph
from pysim.workload.training import training_graph


def training(cfg, spec, nodes, graph, prefix, iterations, topo=None):
    """The training iterations of spec['model'] on `nodes`: data parallel over them, global
    batch spec['batch'], gradient all-reduces by spec['algorithm'] in the order of `nodes`
    (pysim.workload.training.training_graph, with the server's workload.* settings for the
    rest: precision, engine, bucket_mb, overlap, ...). `topo`: the network the graph runs on
    (a shape's, or None: the server's). The end of an iteration is when all its ops have
    finished."""
    over = {"workload.model": spec["model"], "workload.batch": int(spec["batch"]),
            "workload.algorithm": spec["algorithm"], "workload.iterations": int(iterations),
            "workload.ring_order": list(nodes), "workload.group": list(nodes),
            "workload.parallel": {"dp": len(nodes)}}
    jcfg = cfg.with_overrides(over)
    topo = topo if topo is not None else build_topology(cfg)
    try:
        _, plan = training_graph(jcfg, topo, model=_model(spec["model"]), npus=list(nodes),
                                 graph=graph, prefix=prefix)
    except ConfigError as e:
        err = ConfigError(f"a job of {spec['model']} on {len(nodes)} NPUs with a batch of "
                          f"{spec['batch']} (its batch_per_npu, from the job file or "
                          f"jobs.batch_per_npu, x its NPUs): {e}")
        err.job_kind = (spec["model"], len(nodes), int(spec["batch"]))
        raise err from None
    ends = []
    for first, last in plan.iterations:
        inner = set()
        for i in range(first, last):
            inner.update(d for d in graph.after[i] if d >= first)
        sinks = [i for i in range(first, last) if i not in inner]
        ends.append(graph.delay(0, after=sinks, name=f"{prefix}iteration{len(ends)}.end"))
    return ends


_MODELS = {}


def _model(name):
    if name not in _MODELS:
        _MODELS[name] = models.get(name)
    return _MODELS[name]


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
    return set(models.names())


training.known_models = _zoo


def _graph(cfg, topo, members, builder):
    g = OpGraph()
    ends, spans = [], []
    for m, (spec, nodes, iters) in enumerate(members):
        lo = len(g)
        e = builder(cfg, spec, list(nodes), g, f"j{m}.", int(iters), topo=topo)
        if len(e) != iters:
            raise ConfigError(f"the job builder gave {len(e)} iteration ends for {iters} "
                              f"iterations")
        ends.append(list(e))
        spans.append((lo, len(g)))
    return g, ends, spans


def estimate_shapes(cfg, topo, members, builder):
    """The estimate (pysim.workload.runtime) of what simulate_shapes would run: its graph
    built and compiled, not run."""
    g, _, _ = _graph(cfg, topo, members, builder)
    network = compile_network(cfg, topo)
    arrays, _ = compile_graph(g, network.topo, cfg)
    return runtime.estimate(network, arrays, cfg)


def simulate_shapes(cfg, topo, members, builder):
    """Run `members` -- (spec, node names in rank order, iterations) each -- together on the
    network `topo` with cfg's router parameters. Returns {"ends": per member the cycle each
    iteration ended, "pairs": per member the (rank, rank) pairs its sends join, "cycles",
    "wall_seconds"}."""
    t0 = time.perf_counter()
    g, ends, spans = _graph(cfg, topo, members, builder)
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
