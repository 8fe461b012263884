"""Running a configuration: the warm-up / measure / drain state machine around csim.

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

import os
import time

import numpy as np

from csim import _engine
from pysim import __version__, theory, traffic
from pysim.config import Config, from_dict, load
from pysim.network import CH_NET, compile_network, nic_bandwidths
from pysim.stats import Result, percentile_from_hist


class SimulationError(RuntimeError):
    """The engine stopped on something other than the end of the run."""


class DeadlockError(SimulationError):
    """Flits were buffered and none moved for simulation.watchdog_cycles (beyond the longest
    step a flit legitimately takes)."""

    def __init__(self, message, report):
        super().__init__(message + "\n" + report)
        self.report = report


def deadlock_report(network, engine, limit=24) -> str:
    """Which routers and VCs hold flits, and what each is waiting for."""
    snap = engine.snapshot()
    V = snap["vcs"]
    names = network.topo.node_names
    lines = []
    states = {0: "idle", 1: "waiting for a VC", 2: "waiting for the switch/credits"}
    held = np.flatnonzero(snap["ivc_cnt"] > 0)
    for ivc in held[:limit]:
        c, v = divmod(int(ivc), V)
        router = names[network.ch_dst[c]]
        oc = int(snap["ivc_out_ch"][ivc])
        st = int(snap["ivc_state"][ivc])
        front = ivc * snap["buffer_flits"] + snap["ivc_head"][ivc]
        line = (f"  router {router}: input {network.channel_label(c)} VC {v} holds "
                f"{snap['ivc_cnt'][ivc]} flit(s), {states.get(st, st)}")
        if st == 2 and oc >= 0:
            ovc = oc * V + int(snap["ivc_out_vc"][ivc])
            line += (f" -> output {network.channel_label(oc)} VC {snap['ivc_out_vc'][ivc]} "
                     f"(credits {snap['ovc_credits'][ovc]})")
        elif oc >= 0:
            line += f" -> wants output {network.channel_label(oc)}"
        line += f"; front flit of packet {snap['buf_pkt'][front]}"
        lines.append(line)
    if held.size > limit:
        lines.append(f"  ... and {held.size - limit} more VCs holding flits")
    return "\n".join(lines)


def _check(status, network, engine):
    if status in ("until", "done", "backlog"):
        return
    if status == "deadlock":
        c = engine.counters()
        raise DeadlockError(
            f"deadlock: {c['flits_buffered']} flits buffered and none moved between cycle "
            f"{c['last_progress']} and {c['deadlock_cycle']} (simulation.watchdog_cycles, "
            f"plus {network.longest_step} cycles: the longest a flit takes through the slowest "
            f"link or NIC and a router)", deadlock_report(network, engine))
    if status == "nomem":
        raise SimulationError("the engine ran out of memory")
    c = engine.counters()
    raise SimulationError(f"engine invariant broken ({status}): buffer overflows "
                          f"{c['buf_overflow']}, misdelivered flits {c['bad_eject']}, "
                          f"non-head flits at an idle VC {c['bad_front']}, packets beyond "
                          f"the last VC class {c['bad_class']}")


def link_report(network, cfg, flits, cycles):
    """Per router-to-router channel (each lane of a parallel link its own row): its ends,
    bandwidth, latency, the flits it carried (`flits`, per channel) and its utilisation over
    `cycles` cycles (carried / what its bandwidth allows)."""
    names = network.topo.node_names
    out = []
    for c in np.flatnonzero(network.ch_kind == CH_NET):
        r = network.ch_num[c] / network.ch_den[c]        # flits per cycle
        out.append(dict(src=names[network.ch_src[c]], dst=names[network.ch_dst[c]],
                        lane=int(c - network.arrays["ch_par_base"][c]),
                        bandwidth_gbps=float(r * cfg.network.flit_bytes * cfg.network.clock_ghz),
                        latency_cycles=int(network.ch_lat[c]), flits=int(flits[c]),
                        utilization=float(flits[c] / (cycles * r)) if cycles > 0 else 0.0))
    return out


def prepare(cfg, horizon=None):
    """Compile cfg and return (network, engine) with its synthetic traffic set up, generated
    up to cycle `horizon` (None: without end)."""
    network = compile_network(cfg)
    topo = network.topo
    inj_bpc, _ = nic_bandwidths(topo, cfg)
    slowest = float(min(inj_bpc[i] for i in topo.endpoints())) / cfg.network.flit_bytes
    eng = _engine.Engine(network.arrays)
    eng.set_synthetic(**traffic.engine_args(topo, cfg, slowest), stop=horizon)
    return network, eng


def simulate(cfg, progress=None):
    """Run one configuration -- a Config, a TOML file's path, or a dict shaped like one --:
    synthetic traffic (a Result), an op graph or a collective (workload.kind).

    progress(cycle, last): called about ten times a second during the run with the cycle
    reached and the last cycle the run can take (None for op graphs and collectives, which
    end when their ops do)."""
    if isinstance(cfg, (str, os.PathLike)):
        cfg = load(cfg)
    elif isinstance(cfg, dict):
        cfg = from_dict(cfg)
    elif not isinstance(cfg, Config):
        raise TypeError(f"simulate() takes a Config, a path to a TOML file or a dict, not "
                        f"{type(cfg).__name__}")
    if cfg.workload.kind == "graph":
        from pysim.workload import run_graph
        return run_graph(cfg, progress=progress)
    if cfg.workload.kind == "collective":
        from pysim.workload.collectives import run_collective
        return run_collective(cfg, progress=progress)
    t_start = time.perf_counter()
    sim = cfg.simulation
    W, M = sim.warmup_cycles, sim.measure_cycles
    network, eng = prepare(cfg, horizon=W + M + sim.drain_cycles)
    topo = network.topo
    eng.set_window(W, W + M)
    n_ep = len(topo.endpoints())

    tick = None if progress is None else (lambda now: progress(now, W + M + sim.drain_cycles))
    t_run = time.perf_counter()
    st = eng.run(W, progress=tick)
    _check(st, network, eng)
    c0 = eng.counters()
    f0 = eng.channel_flits()
    if st != "backlog":
        st = eng.run(W + M, progress=tick)
        _check(st, network, eng)
    c1 = eng.counters()
    f1 = eng.channel_flits()
    drained = False
    if st != "backlog":
        st = eng.run(W + M + sim.drain_cycles, stop="measured", progress=tick)
        _check(st, network, eng)
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
    links = link_report(network, cfg, f1 - f0, M)
    nz = np.flatnonzero(hist_lat)
    cfg_dict = cfg.to_dict()
    cfg_dict["_system"] = topo.name
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
        zero_load_latency=theory.mean_zero_load(network, cfg, pattern, sizes, cdf),
        wall_seconds=wall, run_seconds=run_seconds,
        cycles_per_second=cycles / run_seconds if run_seconds > 0 else nan,
        flit_hops=int(c2["flit_hops"]), cycles_skipped=int(c2["cycles_skipped"]),
        flit_hops_per_second=c2["flit_hops"] / run_seconds if run_seconds > 0 else nan,
        links=links,
        latency_histogram=[[int(i), int(hist_lat[i])] for i in nz],
        config=cfg_dict, seed=int(cfg.simulation.seed), version=__version__,
        build=dict(_engine.BUILD),
    )


def run_packets(cfg, times, src, dst, lengths, max_cycles=None, network=None):
    """Inject an explicit packet list (creation cycle, source node, destination node, flits)
    and run until all are delivered. Returns (network, engine, deliver, inject, hops)."""
    network = network or compile_network(cfg)
    eng = _engine.Engine(network.arrays)
    order = np.argsort(np.asarray(times), kind="stable")
    eng.set_trace(np.asarray(times)[order], np.asarray(src)[order], np.asarray(dst)[order],
                  np.asarray(lengths)[order])
    limit = max_cycles if max_cycles is not None else 1 << 60
    st = eng.run(limit, stop="all")
    _check(st, network, eng)
    deliver, inject, hops = eng.trace_results()
    out_d = np.empty_like(deliver)
    out_i = np.empty_like(inject)
    out_h = np.empty_like(hops)
    out_d[order], out_i[order], out_h[order] = deliver, inject, hops
    return network, eng, out_d, out_i, out_h
