"""Synthetic traffic: the warm-up / measure / drain state machine around csim.

Methodology (as BookSim's): packets created during the measured window
[warmup, warmup + measure) are measured; injection goes on after the window while the
simulator waits, at most `simulation.drain_cycles`, for every measured packet to arrive.
Accepted throughput counts flits ejected during the window. A run is *saturated* when the
measured packets do not all arrive within the drain bound, when more than
`simulation.max_packets` packets are alive at once, or when the flits in the system (queued at
sources or in the network) grew during the window by more than 2% of the flits offered in it
plus two packets per endpoint: below saturation that backlog is stationary.
"""
from __future__ import annotations

import time

import numpy as np

from pysim.engine import core, new_engine
from pysim import theory, traffic
from pysim._version import __version__
from pysim.errors import ConfigError
from pysim.schema import NONNEG, POS, Key, declare
from pysim.network import compile_network, nic_bandwidths
from pysim.stats import Result, percentile_from_hist
from pysim.topology import system_name
from pysim.workload import runtime
from pysim.workload.base import check_status, link_report, register


def flit_only(cfg, what):
    """Refuse network.model = 'flow' for what only the flit level can run."""
    if cfg.network.model != "flit":
        raise ConfigError(f"network.model = {cfg.network.model!r}: {what} runs at the flit "
                          f"level only (its packets are drawn cycle by cycle and measured "
                          f"one by one, which flows do not model); the flow model runs op "
                          f"graphs, collectives and training iterations (workload.kind = "
                          f"'graph', 'collective' or 'training'). Use network.model = 'flit'")


def prepare(cfg, horizon=None):
    """Compile cfg and return (network, engine) with its synthetic traffic set up, generated
    up to cycle `horizon` (None: without end)."""
    flit_only(cfg, "synthetic traffic")
    network = compile_network(cfg)
    topo = network.topo
    inj_bpc, _ = nic_bandwidths(topo, cfg)
    slowest = float(min(inj_bpc[i] for i in topo.endpoints())) / cfg.network.flit_bytes
    eng = new_engine(network.arrays)
    eng.set_synthetic(**traffic.engine_args(topo, cfg, slowest), stop=horizon)
    return network, eng


# What synthetic traffic alone reads: its [traffic] and the measured window (an op graph, a
# collective or training runs to its end); the other kinds refuse them when given.
WINDOW_KEYS = ("simulation.warmup_cycles", "simulation.measure_cycles",
               "simulation.drain_cycles")


@register("synthetic", reads=("traffic.*",) + WINDOW_KEYS)
def run_synthetic(cfg, progress=None):
    """Synthetic traffic ([traffic]): latency, throughput and saturation over a window."""
    t_start = time.perf_counter()
    sim = cfg.simulation
    W, M = sim.warmup_cycles, sim.measure_cycles
    network, eng = prepare(cfg, horizon=W + M + sim.drain_cycles)
    topo = network.topo
    eng.set_window(W, W + M)
    n_ep = len(topo.endpoints())

    tick = None
    if progress is not None:             # (said before the run: how long it will take)
        est = None
        if hasattr(progress, "estimate"):
            est = runtime.synthetic(network, cfg, traffic.pattern(topo, cfg), W + M)
            progress.estimate(est)
        tick = runtime.Meter(progress, eng, est, last=W + M + sim.drain_cycles)
    t_run = time.perf_counter()
    st = eng.run(W, progress=tick)
    check_status(st, network, eng)
    c0 = eng.counters()
    f0 = eng.channel_flits()
    o0 = eng.channel_owed(W, start=True)
    v0 = eng.vc_flits()
    if st != "backlog":
        st = eng.run(W + M, progress=tick)
        check_status(st, network, eng)
    c1 = eng.counters()
    f1 = eng.channel_flits()
    o1 = eng.channel_owed(W + M)
    v1 = eng.vc_flits()
    drained = False
    if st != "backlog":
        st = eng.run(W + M + sim.drain_cycles, stop="measured", progress=tick)
        check_status(st, network, eng)
        drained = st == "done"
    run_seconds = time.perf_counter() - t_run
    c2 = eng.counters()

    created_window = c1["meas_created_flits"]
    backlog0 = c0["flits_created"] - c0["flits_ejected"]
    backlog1 = c1["flits_created"] - c1["flits_ejected"]
    sizes, cdf, mean_len = traffic.packet_sizes(cfg)
    growth_limit = 0.02 * created_window + 2 * mean_len * n_ep
    reason = ""
    if st == "backlog":
        reason = f"more than {sim.max_packets} packets alive"
    elif not drained:
        reason = f"measured packets not delivered within {sim.drain_cycles} drain cycles"
    elif backlog1 - backlog0 > growth_limit:
        reason = (f"backlog grew by {backlog1 - backlog0} flits during the window "
                  f"(> {growth_limit:.0f})")
    saturated = bool(reason)

    hist_lat, hist_net = eng.latency_histograms()
    done = c2["meas_done"]
    nan = float("nan")
    pattern = traffic.pattern(topo, cfg)
    links = link_report(network, cfg, f1 - f0, M, v1 - v0, o0, o1)
    zero_load, zero_load_how = theory.mean_zero_load(network, cfg, pattern, sizes, cdf)
    nz = np.flatnonzero(hist_lat)
    cfg_dict = cfg.resolved()
    cfg_dict["_system"] = system_name(topo, cfg)
    wall = time.perf_counter() - t_start
    cycles = int(c2["now"])
    return Result(
        status="saturated" if saturated else "ok",
        saturated=saturated,
        saturation_reason=reason,
        cycles=cycles, warmup_cycles=W, measure_cycles=M,
        drain_cycles_used=max(0, cycles - W - M),
        endpoints=n_ep,
        packets_measured=int(c2["meas_created"]),
        packets_delivered=int(done),
        avg_packet_latency=c2["sum_lat"] / done if done else nan,
        avg_network_latency=c2["sum_netlat"] / done if done else nan,
        p50_packet_latency=percentile_from_hist(hist_lat, 50),
        p95_packet_latency=percentile_from_hist(hist_lat, 95),
        p99_packet_latency=percentile_from_hist(hist_lat, 99),
        max_packet_latency=float(c2["max_lat"]) if done else nan,
        p99_network_latency=percentile_from_hist(hist_net, 99),
        avg_hops=c2["sum_hops"] / done if done else nan,
        offered_rate=created_window / (n_ep * M),
        accepted_rate=c1["win_ejected_flits"] / (n_ep * M),
        zero_load_latency=zero_load, zero_load_how=zero_load_how,
        wall_seconds=wall, run_seconds=run_seconds,
        cycles_per_second=cycles / run_seconds if run_seconds > 0 else nan,
        flit_hops=int(c2["flit_hops"]), cycles_skipped=int(c2["cycles_skipped"]),
        flit_hops_per_second=c2["flit_hops"] / run_seconds if run_seconds > 0 else nan,
        links=links,
        latency_histogram=[[int(i), int(hist_lat[i])] for i in nz],
        config=cfg_dict, seed=int(cfg.simulation.seed), version=__version__,
        build=dict(core.BUILD),
    )


def run_packets(cfg, times, src, dst, lengths, max_cycles=None, network=None):
    """Inject an explicit packet list (creation cycle, source node, destination node, flits)
    and run until all are delivered. Returns (network, engine, deliver, inject, hops)."""
    flit_only(cfg, "a packet trace")
    network = network or compile_network(cfg)
    eng = new_engine(network.arrays)
    order = np.argsort(np.asarray(times), kind="stable")
    eng.set_trace(np.asarray(times)[order], np.asarray(src)[order], np.asarray(dst)[order],
                  np.asarray(lengths)[order])
    limit = max_cycles if max_cycles is not None else 1 << 60
    st = eng.run(limit, stop="all")
    check_status(st, network, eng)
    deliver, inject, hops = eng.trace_results()
    out_d = np.empty_like(deliver)
    out_i = np.empty_like(inject)
    out_h = np.empty_like(hops)
    out_d[order], out_i[order], out_h[order] = deliver, inject, hops
    return network, eng, out_d, out_i, out_h


# The configuration keys this module reads (pysim.schema).
declare(
    Key("simulation", "warmup_cycles", "int", 2000, "cycles",
        "Cycles simulated before measurement starts.", NONNEG),
    Key("simulation", "measure_cycles", "int", 10000, "cycles",
        "Length of the measured window; packets created in it are measured.", POS),
    Key("simulation", "drain_cycles", "int", 50000, "cycles",
        "Most cycles to wait, after the window, for measured packets; "
        "if they are not all delivered by then the run is saturated.", NONNEG),
)
