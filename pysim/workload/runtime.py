"""How long a run will take, said before it starts, and how far it has got while it runs.

Before an op graph runs, its network work is known from the compiled graph: each send's flits
and the hops of its route (the flit level's cost: the engine moves every flit over every
hop), and the number of sends (the flow level's: one flow each) and ops. The engine's time
at either level is that work at the rates below: processor time of one core of an x86
server, measured over collectives and training runs at both levels (`python
bench/estimate.py` measures them again; a loaded machine takes longer). A run whose estimate
passes LONG_SECONDS says so before it starts, and which level would be faster. While it
runs, the share of that work done (flit-hops, or flows started) gives an ETA.

A training run is estimated twice: before its graph is built, from its op count
(pysim.workload.training.count: the Python work of building, planning, compiling and
reporting each op, and the engine's per op, which is most of a large model's time at the flow
level; `before_build`), and again before it runs, with its network work.

A progress callback (pysim.simulate's `progress(cycle, last)`) may also have
`estimate(est)`, called once with the estimate before the run, and `share(fraction)`, called
with the share of the estimated work done at most once a second.
"""
from __future__ import annotations

import time

import numpy as np

from pysim import theory
from pysim.network import CH_NET

# Wall seconds per unit of work (see the module's doc; bench/estimate.py)
FLIT_HOP_SECONDS = 0.15e-6     # flit level: per flit moved over one hop (0.07 for a lone
                               # collective to 0.18 for training, whose flits trickle out
                               # over many stepped cycles)
FLIT_OP_SECONDS = 2e-6         # flit level: per engine op
FLOW_SEND_SECONDS = 2e-6       # flow level: per flow (its start, end and the re-shares)
FLOW_OP_SECONDS = 1e-6         # flow level: per engine op (0.2-1.1 measured)
BUILD_OP_SECONDS = 15e-6       # per op of the graph: built, its memory accounted, compiled
                               # and reported (17 on a 100,000-layer ONNX chain on 8 NPUs,
                               # 3.2 M ops at the flow level, the build itself 5.2)
LONG_SECONDS = 30.0            # an estimate past this is said before the run
SEND = 1                       # the engine's op kind of a send (pysim.workload.graph.KINDS)


def network_work(network, arrays, flit_bytes):
    """(flit-hops, sends, engine ops) of a compiled graph on `network`."""
    kind = np.asarray(arrays["kind"])
    sends = np.flatnonzero(kind == SEND)
    ops = int(kind.size)
    if sends.size == 0:
        return 0, 0, ops
    src = np.asarray(arrays["node"])[sends].astype(np.int64)
    dst = np.asarray(arrays["dst"])[sends].astype(np.int64)
    flits = -(-np.asarray(arrays["size"])[sends].astype(np.int64) // int(flit_bytes))
    order = np.argsort(dst, kind="stable")          # (path_arrays walks by destination)
    hops = np.empty(sends.size, np.int64)
    hops[order] = theory.path_arrays(network, src[order], dst[order])[0]
    return int((flits * np.maximum(hops, 1)).sum()), int(sends.size), ops


def estimate(network, arrays, cfg):
    """The run's estimate: its work and the wall seconds it would take at each level."""
    flit_hops, sends, ops = network_work(network, arrays, cfg.network.flit_bytes)
    seconds = {"flit": flit_hops * FLIT_HOP_SECONDS + ops * FLIT_OP_SECONDS,
               "flow": sends * FLOW_SEND_SECONDS + ops * FLOW_OP_SECONDS}
    return dict(model=cfg.network.model, seconds=seconds, flit_hops=flit_hops, sends=sends,
                ops=ops)


HOP_SAMPLE = 4096              # pairs whose routes give synthetic traffic's mean hops


def synthetic(network, cfg, pattern, cycles):
    """Synthetic traffic's estimate over `cycles` (the warm-up and the window; the drain
    after it, at most simulation.drain_cycles, is short below saturation): the flits offered,
    traffic.injection_rate per endpoint per cycle, times their mean hops over HOP_SAMPLE
    pairs the pattern draws (seeded), and no more flit-hops a cycle than the network has
    channels."""
    eps = np.asarray(network.topo.endpoints(), np.int64)
    rng = np.random.default_rng(1)
    s = rng.integers(eps.size, size=HOP_SAMPLE)
    d = np.asarray(pattern.perm)[s] if pattern.mode == "perm" else \
        rng.integers(eps.size, size=HOP_SAMPLE)
    order = np.argsort(d, kind="stable")          # (path_arrays walks by destination)
    hops = float(theory.path_arrays(network, eps[s[order]], eps[d[order]])[0].mean())
    per_cycle = min(cfg.traffic.injection_rate * eps.size * hops,
                    float(np.count_nonzero(network.ch_kind == CH_NET)))
    flit_hops = per_cycle * cycles
    return dict(model="flit", stage="synthetic", cycles=int(cycles), flit_hops=flit_hops,
                seconds={"flit": flit_hops * FLIT_HOP_SECONDS, "flow": float("inf")})


def total(estimates, **extra):
    """The estimates of several runs (at one level) as one: their work and seconds added."""
    out = dict(model=estimates[0]["model"], seconds={"flit": 0.0, "flow": 0.0}, flit_hops=0,
               sends=0, ops=0, **extra)
    for e in estimates:
        for k in ("flit_hops", "sends", "ops"):
            out[k] += e[k]
        for k in out["seconds"]:
            out["seconds"][k] += e["seconds"][k]
    return out


def before_build(graph_ops, engine_ops, bytes_, cfg):
    """A training run's estimate before its graph is built, from its op count: the graph's
    ops, the engine ops they expand into and the memory they take. The network's work is
    known only once the graph is built (said then, if long)."""
    build = graph_ops * BUILD_OP_SECONDS
    return dict(model=cfg.network.model, stage="build", graph_ops=int(graph_ops),
                ops=int(engine_ops), bytes=int(bytes_), build_seconds=build,
                seconds={"flit": build + engine_ops * FLIT_OP_SECONDS,
                         "flow": build + engine_ops * FLOW_OP_SECONDS})


def describe(est):
    """One line on the estimate, or None if the run is not long: how long, and at which
    level it would be faster."""
    model = est["model"]
    mine = est["seconds"][model]
    if mine < LONG_SECONDS:
        return None
    if est.get("stage") == "build":
        return (f"estimate: about {duration(est['build_seconds'])} to build the op graph "
                f"({est['graph_ops']:,} ops, {est['ops']:,} in the engine, about "
                f"{est['bytes'] / 1e9:.1f} GB"
                + (f", {est['json_bytes'] / 1e9:.1f} GB with --json" if "json_bytes" in est
                   else "") + f") and at least {duration(mine)} in all"
                + ("" if model == "flow" else
                   " (the flit level's network work is estimated once the graph is built)"))
    if est.get("stage") == "synthetic":
        return (f"estimate: about {duration(mine)} to simulate {est['cycles']:,} cycles "
                f"(simulation.warmup_cycles + measure_cycles) of synthetic traffic, "
                f"{_count(est['flit_hops'])} flit-hops; Ctrl-C stops it")
    other = "flow" if model == "flit" else "flit"
    line = (f"estimate: {'at least' if est.get('least') else 'about'} {duration(mine)} to "
            f"simulate at the {model} level ("
            + (f"{est['simulations']:,} simulations, " if "simulations" in est else "")
            + f"{est['ops']:,} ops"
            + (f", {est['flit_hops']:,} flit-hops" if model == "flit" else
               f", {est['sends']:,} flows") + ")")
    if est["seconds"][other] < mine / 2:
        line += (f"; at the {other} level (network.model = '{other}') about "
                 f"{duration(est['seconds'][other])}")
    return line


def duration(s):
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 2 * YEAR:
        return f"{s / 86400:.0f} days"
    return f"{s / YEAR:,.0f} years"


YEAR = 365.25 * 86400


def _count(x):
    """A count in words a reader takes in: 412,972, or 3.4e+16 past a trillion."""
    return f"{x:,.0f}" if x < 1e12 else f"{x:.2g}"


class Meter:
    """progress(now) for the engine: passes the cycle on to the user's callback and, at most
    once a second, the share of the estimated work done (if it takes `share`)."""

    def __init__(self, progress, eng, est, last=None):
        self.progress, self.eng, self.est, self.last_cycle = progress, eng, est, last
        self.share = getattr(progress, "share", None) if est is not None else None
        self.last = 0.0

    def __call__(self, now):
        self.progress(now, self.last_cycle)
        t = time.perf_counter()
        if self.share is None or t - self.last < 1.0:
            return
        self.last = t
        c = self.eng.counters()
        if self.est["model"] == "flow":
            done = c["flows_started"] / self.est["sends"] if self.est["sends"] else 0.0
        else:
            done = c["flit_hops"] / self.est["flit_hops"] if self.est["flit_hops"] else 0.0
        self.share(min(1.0, done))
