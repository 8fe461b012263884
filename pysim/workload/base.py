"""What every workload kind shares: the registry of kinds that `pysim.simulate` dispatches to,
and the engine's status check, deadlock report and link report.

A workload kind is one module under pysim/workload/ with a runner registered here:

    @register("graph", traces=True, reads=("workload.file",) + OP_GRAPH_KEYS)
    def run_graph(cfg, progress=None): ...

The runner takes a resolved Config and an optional progress(cycle, last) callback and returns
a result with to_dict() and summary() (and trace() when `traces`). `reads` names the workload
keys the kind reads (a path ending '.*': a whole sub-table); a key another kind reads, given
to a kind that does not, is refused before the run (`check_reads`), naming the kinds that
would read it. This module sits below every kind and imports none of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable

import numpy as np

from pysim.network import CH_NET
from pysim.errors import ConfigError
from pysim.schema import Key, declare, readers, reads as declare_reads, short, unread
from pysim.stats import LinkTable


@dataclass(frozen=True)
class WorkloadKind:
    name: str
    run: Callable
    traces: bool          # its result has trace(): a Chrome/Perfetto trace of its ops
    doc: str
    reads: tuple = ()     # the workload keys it reads


WORKLOADS: dict[str, WorkloadKind] = {}

# Keys every op-graph kind reads (how ops become engine work), and those every kind that
# builds collectives reads: kinds compose their `reads` from these.
OP_GRAPH_KEYS = ("workload.packet_flits", "workload.slice_cycles", "workload.mem_piece_bytes",
            "workload.max_cycles", "workload.comm_sms", "workload.comm_hbm_gbps",
            "workload.engine")
COLLECTIVE_KEYS = ("workload.algorithm", "workload.chunks", "workload.chunks_in_flight",
               "workload.all_to_all_peers",
               "workload.group", "workload.ring_order", "workload.reduce_gbps",
               "workload.comm_streams", "workload.nccl_algorithm", "workload.nccl_protocol",
               "workload.nccl_channels", "workload.nccl_tuning", "workload.collective_form")


def register(name, traces=False, reads=()):
    """Register `fn(cfg, progress=None) -> result` as the runner of workload.kind = name,
    reading the workload keys `reads` (paths; 'workload.memory.*' for a sub-table)."""
    def deco(fn):
        if name in WORKLOADS:
            raise ValueError(f"workload kind {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        WORKLOADS[name] = WorkloadKind(name, fn, traces, doc, tuple(reads))
        declare_reads("workload.kind", name, ("workload.kind",) + tuple(reads))
        return fn
    return deco


def check_reads(cfg):
    """Refuse a workload key given (cfg.explicit) that the chosen workload.kind does not read
    while another kind does, naming the kinds that would read it; and a [jobs] key typed
    (cfg.typed: an override, not a file's, which may describe a server for pysim jobs too),
    which only a job stream reads."""
    for path in sorted(p for p in cfg.typed if p.startswith("jobs.")):
        raise ConfigError(f"{path} = {short(cfg.get(path))} is read by a stream of training "
                          f"jobs (pysim jobs, pysim.jobs.run_stream), not by a single run "
                          f"(pysim run, pysim.simulate); leave it out, or run pysim jobs")
    kind = cfg.workload.kind
    for path in unread("workload.kind", kind, sorted(cfg.explicit)):
        users = readers("workload.kind", path)
        how = "" if cfg.is_set("workload.kind") else " (the default)"
        raise ConfigError(f"{path} = {short(cfg.get(path))} is not read by workload.kind = "
                          f"{kind!r}{how}: it is read by workload.kind = "
                          f"{' or '.join(repr(u) for u in users)}; set that, or leave the key "
                          f"out")
    if kind != "synthetic":            # (which refuses the flow level itself)
        check_model_reads(cfg)
    if cfg.topology.kind == "cluster" and cfg.topology.nvls and \
            (kind not in ("collective", "training") or cfg.workload.algorithm != "nccl"):
        # (the switch's engine, node nvls0, reduces for NCCL's NVLS alone: elsewhere it is
        # idle, or an endpoint of synthetic traffic, which no NVSwitch is)
        raise ConfigError(f"topology.nvls = true adds the NVSwitch's reduction engine (node "
                          f"nvls0), which workload.algorithm = 'nccl' alone runs (NVLS) in a "
                          f"collective or training run; with workload.kind = {kind!r}" +
                          (f" and workload.algorithm = {cfg.workload.algorithm!r}"
                           if kind in ("collective", "training") else "") +
                          " it would " + ("take it for an endpoint of the traffic"
                                          if kind == "synthetic" else "leave it idle") +
                          "; leave topology.nvls out")


def check_model_reads(cfg, model=None, how=None):
    """Refuse a key typed (cfg.typed) that the chosen network.model does not read while the
    other does (a flit-level router's or watchdog's key at the flow level). Keys a file holds
    are left alone: a system's file serves both levels (pysim jobs runs at the flow level
    unless network.model is set). `model`: the level it will run at (default: its own),
    `how` follows the model's name (' (the default)')."""
    model = cfg.network.model if model is None else model
    for path in unread("network.model", model, sorted(cfg.typed)):
        if how is None:
            how = "" if cfg.is_set("network.model") else " (the default)"
        raise ConfigError(f"{path} = {short(cfg.get(path))} is not read by network.model = "
                          f"{model!r}{how}: it is read by network.model = "
                          f"{' or '.join(repr(u) for u in readers('network.model', path))}; "
                          f"set that, or leave the key out")


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


def check_status(status, network, engine):
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


def link_report(network, cfg, flits, cycles, vc_flits=None, owed_start=None, owed_end=None,
                unit_flits=None):
    """Per router-to-router channel (each lane of a parallel link its own row), a LinkTable
    (pysim.stats: rows made when asked for, the columns arrays): its ends,
    bandwidth, latency, the flits it carried (`flits`, per channel: those sent in the window)
    and its utilisation: the fraction of the window's `cycles` cycles it spent serialising
    flits. A flit holds a link of r flits per cycle for 1 / r cycles from its send, so a
    slow link's last flit may still be on the wire when the window closes (its head travels
    ahead of its serialisation): `owed_end` (per channel, cycles; the engine's
    channel_owed at the window's end) is taken off, and `owed_start` (channel_owed(start=True)
    at the window's start: serialisation of flits sent before it) added; a link able to send
    again just as the window opens gives there the sub-cycle part of its next flit's
    serialisation that began before it, taken off (under a cycle too little, never more than
    the window, if that flit is not sent at once). With `vc_flits` ((channels, vcs),
    the engine's count of flits entering each VC buffer at the channel's far end), those per
    VC. With `unit_flits` instead of `flits` (the flow level, whose lanes of a link carry its
    flits evenly: per link and NIC of network.unit_first, the flits of each of its lanes),
    the table keeps a run per link (LinkTable's `runs`): the same rows, without columns per
    lane."""
    names = network.topo.node_names
    runs = None
    if unit_flits is not None:
        if vc_flits is not None or owed_start is not None or owed_end is not None:
            raise ValueError("link_report: unit_flits is the flow level's, without vc_flits "
                             "or owed serialisation")
        u = np.flatnonzero(network.ch_kind[network.unit_first] == CH_NET)
        c, runs = network.unit_first[u], network.unit_lanes[u]
        f = np.asarray(unit_flits)[u]
    else:
        c = np.flatnonzero(network.ch_kind == CH_NET)
        f = np.asarray(flits)[c]
    r = np.asarray(network.ch_num)[c].astype(np.float64) / \
        np.asarray(network.ch_den)[c].astype(np.float64)          # (flits per cycle)
    with np.errstate(divide="ignore", invalid="ignore"):
        busy = f / r
        if owed_start is not None:
            busy = busy + np.asarray(owed_start)[c].astype(np.float64)
        if owed_end is not None:
            busy = busy - np.asarray(owed_end)[c].astype(np.float64)
        busy = np.maximum(busy, 0.0)        # (no flit in the window after a start's sliver)
        util = (busy / cycles) if cycles > 0 else np.zeros(c.size)
    return LinkTable(names, np.asarray(network.ch_src)[c], np.asarray(network.ch_dst)[c],
                     (c - np.asarray(network.arrays["ch_par_base"])[c]).astype(np.int64),
                     r * cfg.network.flit_bytes * cfg.network.clock_ghz,
                     np.asarray(network.ch_lat)[c].astype(np.int64), f.astype(np.int64),
                     np.asarray(util, np.float64),
                     None if vc_flits is None else np.asarray(vc_flits)[c].astype(np.int64),
                     runs=runs)


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "kind", "str", "synthetic", "-",
        "What runs: 'synthetic' traffic ([traffic]), an op 'graph' (workload.file), a "
        "'collective' or 'training' iterations (the registered workload kinds).", None,
        lambda: sorted(WORKLOADS)),
)


def last_of(fn):
    """fn(topo, cfg), remembered for the last (topo, cfg) it was asked for (the same
    objects): callers ask once per node of a run, and each answer walks every node. The
    answer is read-only."""
    last = [None, None, None]

    def cached(topo, cfg):
        if last[0] is not topo or last[1] is not cfg:
            last[:] = [topo, cfg, MappingProxyType(fn(topo, cfg))]
        return last[2]
    cached.__doc__ = fn.__doc__
    cached.__name__ = fn.__name__
    return cached

