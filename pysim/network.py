"""Compile a topology, its routing and the router parameters into the engine's flat arrays.

Engine channels: every topology channel (one direction of a link), one or more injection
channels (NIC -> router) and ejection channels (router -> NIC) per endpoint. A channel moves
at most one flit per cycle, so a link faster than that (say 50 GB/s with 32-byte flits at
1 GHz) becomes ceil(bandwidth / (flit_bytes x clock)) parallel channels sharing its bandwidth,
and a NIC faster than that gets as many injection (ejection) channels. Channels with the same
ends, bandwidth and latency form a parallel group: the route table names the group and the
engine spreads packets over its members by creation order (a packet keeps one member).

Bandwidths become exact integer serialisation credits: a channel earns `num` per cycle and a
flit costs `den = flit_bytes * 2**20`, so rates are exact to 2**-20 bytes/cycle. Channels are
numbered so that those entering one router are contiguous, and a group's members adjacent.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from pysim import routing as routing_mod
from pysim import topology as topology_mod
from pysim.engine import (CH_EJECT, CH_INJECT, CH_NET, SW_ARBITERS, VC_ARBITERS,  # noqa: F401
                          NetworkArrays, arbiter_inputs, core)
from pysim.errors import ConfigError
from pysim.schema import (DELAY, DELAY1, MAX_DELAY_CYCLES, MAX_FLIT_BYTES, NONNEG, POS, VCS,
                          Key, declare)
from pysim import theory

SCALE = 1 << 20


@dataclass
class Network:
    topo: topology_mod.Topology
    routing: routing_mod.Routing
    arrays: dict              # what csim.Engine takes
    topo_channel: np.ndarray  # engine channel -> topology channel id (-1: NIC channels)
    ch_kind: np.ndarray       # per engine channel
    ch_src: np.ndarray        # node ids (upstream router, or the NIC's node for injection)
    ch_dst: np.ndarray
    ch_num: np.ndarray
    ch_den: np.ndarray
    ch_lat: np.ndarray
    inj_ch: np.ndarray        # per node: its first injection channel, -1 for switches
    ej_ch: np.ndarray         # per node: its first ejection channel, -1 for switches
    longest_step: int = 0     # cycles the watchdog waits beyond simulation.watchdog_cycles
    # per link and NIC (a unit: a topology channel, or one way of an endpoint's NIC), in
    # channel order: its first lane's engine channel and its lanes (None: not laid out so)
    unit_first: np.ndarray | None = None
    unit_lanes: np.ndarray | None = None

    def channel_label(self, c):
        names = self.topo.node_names
        kind = self.ch_kind[c]
        if kind == CH_NET:
            return f"{names[self.ch_src[c]]}->{names[self.ch_dst[c]]}"
        if kind == CH_INJECT:
            return f"nic:{names[self.ch_src[c]]}->{names[self.ch_dst[c]]}"
        return f"{names[self.ch_src[c]]}->nic:{names[self.ch_dst[c]]}"


def lanes(bytes_per_cycle: float, flit_bytes: int) -> int:
    """Parallel channels needed to carry a bandwidth at one flit per cycle each."""
    n = bytes_per_cycle / flit_bytes
    if not math.isfinite(n):        # (1e308 GB/s at a slow clock): past the limit
        return 2 ** 1024
    return max(1, math.ceil(n - 1e-9))


def rate(bytes_per_cycle: float, flit_bytes: int, what: str):
    """(num, den) integer serialisation credits for at most one flit per cycle."""
    den = flit_bytes * SCALE
    num = int(round(bytes_per_cycle * SCALE))
    if num < 1:
        raise ConfigError(f"{what}: {bytes_per_cycle:g} bytes/cycle is too small to simulate")
    if num > den:
        raise AssertionError("a channel carries at most one flit per cycle")
    return num, den


def nic_bandwidths(topo, cfg):
    """(injection, ejection) bytes per cycle of every node's NIC (0 for switches): the
    node's own value, else its kind's default, else network.injection_gbps /
    ejection_gbps, else one flit per cycle."""
    net = cfg.network
    eps = np.asarray(topo.endpoints(), np.int64)
    out = []
    for own, default in ((topo.node_injection_gbps, net.injection_gbps),
                         (topo.node_ejection_gbps, net.ejection_gbps)):
        bpc = np.zeros(topo.n_nodes)
        # (per endpoint: its own value, else the default; columns, not a loop per node)
        given = np.zeros(topo.n_nodes, bool)
        gbps = np.zeros(topo.n_nodes)
        if own:
            given = np.fromiter((x is not None for x in own), bool, topo.n_nodes)
            gbps = np.fromiter((0.0 if x is None else x for x in own), np.float64,
                               topo.n_nodes)
        bpc[eps] = net.flit_bytes if default is None else default / net.clock_ghz
        mine = eps[given[eps]]
        bpc[mine] = gbps[mine] / net.clock_ghz
        out.append(bpc)
    return out[0], out[1]


MAX_LANES = 1024      # parallel channels (flits per cycle) of one link or NIC
MAX_FLIT_CYCLES = 1 << 22   # cycles one flit may take on a channel (1e-5 GB/s at 32 bytes)
MAX_BUFFER_BYTES = 4 << 30   # all VC buffers together
MAX_CHANNELS = 2 ** 31 - 1   # the engine's channel ids are 32-bit


def check_network(topo, cfg):
    """Refuse at once, before any op graph or route is built, a network past a limit: its
    links and NICs and its VC buffers (_check_channels; its size was checked as the
    topology was built: pysim.topology.check_size)."""
    net = cfg.network
    inj_bpc, ej_bpc = nic_bandwidths(topo, cfg)
    nic_lat = 1 if net.nic_latency_ns is None else topology_mod.ns_to_cycles(
        net.nic_latency_ns, net.clock_ghz)
    return _check_channels(topo, cfg, inj_bpc, ej_bpc, nic_lat)


def _link_key(topo, cfg, c, value, latency=False):
    """The key and value that gave topology channel `c` its bandwidth (`value` bytes per
    cycle) or, with `latency`, its latency (`value` cycles), where one does
    ('topology.dim_link_gbps[1] = 1e+300', 'topology.links[0].gbps = 1e+300', a cluster's
    'topology.nvlink_gbps = ...'), else None: a refusal names what the user wrote."""
    tp, clock = cfg.topology, cfg.network.clock_ghz

    def same(v, unit):                     # unit: "gbps", "bpc", "ns" or "cycles"
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        if latency:
            x = v * clock if unit == "ns" else v
            if not math.isfinite(x):       # (ns_to_cycles: past any float)
                return unit == "ns" and value >= topology_mod.PAST_FLOAT
            return (math.ceil(x - 1e-9) if unit == "ns" else x) == value
        return math.isclose(v / clock if unit == "gbps" else v, value, rel_tol=1e-9)
    fields = (("latency_ns", "ns"), ("latency_cycles", "cycles")) if latency else \
        (("gbps", "gbps"), ("bytes_per_cycle", "bpc"))
    dims = None if latency else getattr(tp, "dim_link_gbps", None)
    d = topo.ch_dim[c] if c < len(topo.ch_dim) else -1
    if dims and 0 <= d < len(dims) and same(dims[d], "gbps"):
        return f"topology.dim_link_gbps[{d}] = {dims[d]:g}"
    ends = {topo.node_names[topo.ch_src[c]], topo.node_names[topo.ch_dst[c]]}
    for j, e in enumerate(getattr(tp, "links", None) or []):
        if isinstance(e, dict) and {e.get("a"), e.get("b")} == ends:
            for field, unit in fields:
                if same(e.get(field), unit):
                    return f"topology.links[{j}].{field} = {e[field]:g}" + \
                        (topology_mod.at_clock(cfg) if unit == "ns" else "")
    names = ("link_latency_ns", "nvlink_latency_ns", "fabric_latency_ns") if latency else \
        ("link_gbps", "nvlink_gbps", "nic_gbps", "fabric_gbps")
    for name in names:
        if same(getattr(tp, name, None), "ns" if latency else "gbps"):
            return f"topology.{name} = {getattr(tp, name):g}" + \
                (topology_mod.at_clock(cfg) if latency else "")
    return None


def _check_channels(topo, cfg, inj_bpc, ej_bpc, nic_lat):
    """Refuse, before building them, links and NICs of more than MAX_LANES flits per cycle or
    of a latency past MAX_DELAY_CYCLES, and (at the flit level) VC buffers of more than
    MAX_BUFFER_BYTES in all.
    Returns the longest step a flit legitimately takes
    with nothing else moving: the slowest channel's gap between two flits (its
    serialisation) and its latency, a credit's way back, and one router's pipeline. The
    watchdog waits that long beyond simulation.watchdog_cycles, so a slow link or NIC is slow,
    not deadlocked. (Vectorised: a dense graph has millions of channels.)"""
    F, clock = cfg.network.flit_bytes, cfg.network.clock_ghz
    eps = np.asarray(topo.endpoints(), np.int64)
    bpc = np.concatenate([np.asarray(topo.ch_bytes_per_cycle, float), inj_bpc[eps],
                          ej_bpc[eps]])
    try:
        link_lat = np.asarray(topo.ch_latency_cycles, float)
    except OverflowError:        # a latency past any float: past the limit all the same
        link_lat = np.array([min(x, 1e300) for x in topo.ch_latency_cycles], float)
    lat = np.concatenate([link_lat, np.full(2 * eps.size, float(min(nic_lat, 10 ** 300)))])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        n_lanes = np.maximum(1, np.ceil(bpc / F - 1e-9))
    bad = np.flatnonzero(~(n_lanes <= MAX_LANES) | ~(lat <= MAX_DELAY_CYCLES))
    if bad.size:
        i = int(bad[0])
        C = topo.n_channels
        if i >= C:
            node = int(eps[(i - C) % eps.size])
            end = "injection" if i - C < eps.size else "ejection"
            what = f"NIC of {topo.node_names[node]} ({end})"
            given = cfg.network.nic_latency_ns
            lat_key = "network.nic_latency_ns" + ("" if given is None else f" = {given:g}") + \
                topology_mod.at_clock(cfg)
            b, L = (inj_bpc if end == "injection" else ej_bpc)[node], nic_lat
            bw_key, given = f"network.{end}_gbps", getattr(cfg.network, f"{end}_gbps")
            elsewhere = f"or the node's {end}_gbps"
        else:
            what = f"link {topo.channel_name(i)}"
            lat_key = "topology.link_latency_ns or the link's latency" + \
                topology_mod.at_clock(cfg)
            b, L = topo.ch_bytes_per_cycle[i], topo.ch_latency_cycles[i]
            bw_key, given = "topology.link_gbps", getattr(cfg.topology, "link_gbps", None)
            elsewhere = "or the link's own gbps"
        if lanes(b, F) > MAX_LANES:
            gbps = b * clock
            key = (f"{bw_key} = {given:g}" if isinstance(given, (int, float)) and
                   math.isclose(given, gbps, rel_tol=1e-9) else
                   (_link_key(topo, cfg, i, b) if i < topo.n_channels else None)
                   or f"{bw_key} {elsewhere}")
            n = b / F
            count = f"{lanes(b, F):,}" if n < 1e9 else f"{n:.3g}"
            raise ConfigError(f"{what}: {gbps:g} GB/s is {count} flits per cycle of {F} "
                              f"bytes; expected at most {MAX_LANES:,} ({key}: raise "
                              f"network.flit_bytes, or lower the bandwidth)")
        lat_key = (_link_key(topo, cfg, i, L, latency=True) if i < topo.n_channels
                   else None) or lat_key
        raise ConfigError(f"{what}: latency {topology_mod.cycles_text(L)}; expected at most "
                          f"{MAX_DELAY_CYCLES:,} ({lat_key})")
    net = cfg.network
    C = int(n_lanes.sum())                  # the engine's channels: a lane each
    if C > MAX_CHANNELS:
        raise ConfigError(f"{topo.n_channels:,} links and NICs make {C:,} channels (a lane "
                          f"per flit a cycle of each); expected at most {MAX_CHANNELS:,}, "
                          f"what the engine numbers (fewer nodes, or a larger "
                          f"network.flit_bytes, make fewer)")
    buffer_bytes = C * net.vcs * net.vc_buffer_flits * 8      # csim keeps 8 bytes a slot
    # (the VC buffers are made when a flit-level run first needs them: the flow level has none)
    if buffer_bytes > MAX_BUFFER_BYTES and net.model == "flit":
        raise ConfigError(f"network.vc_buffer_flits = {net.vc_buffer_flits} with network.vcs "
                          f"= {net.vcs} on {C:,} channels: {buffer_bytes / 2 ** 30:,.1f} GiB "
                          f"of buffers; expected at most {MAX_BUFFER_BYTES / 2 ** 30:.0f} GiB "
                          f"(fewer or shallower VCs make less)")
    # a lane of bpc / lanes bytes per cycle waits up to ceil(F / that) cycles between flits
    with np.errstate(divide="ignore", over="ignore"):
        gap = np.ceil(F * n_lanes / np.maximum(bpc, 1e-300))
    step = float(np.max(np.minimum(gap, 2.0 ** 62) + 2 * lat)) if bpc.size else 0.0
    return int(step) + net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay + \
        net.st_delay + net.injection_delay


def _port_ranks(topo, incoming):
    """Per topology channel, its port's rank at the router it enters (incoming) or leaves, and
    last, the NIC's port. On regular topologies BookSim's numbering of a router's ports: in
    dimension d, 2d for the + direction and 2d + 1 for the - (an input port is named after
    the neighbour it comes from: 2d from the + neighbour, which travels -), the NIC's 2n;
    elsewhere every rank is 0 (the upstream or downstream node orders the ports)."""
    ranks = np.zeros(topo.n_channels + 1, np.int64)
    if topo.coords is None:
        return ranks
    dim = np.asarray(topo.ch_dim, np.int64)
    plus = np.asarray(topo.ch_dir, np.int64) > 0
    ranks[:-1] = 2 * dim + (plus if incoming else ~plus)
    ranks[-1] = 2 * len(topo.dims)
    return ranks


def route_lookup(topo, route, first32, ej_ch, eps, T):
    """(table, rule, used): the engine's routes from the topology's -- by rule (a csim
    RouteRule mapping each topology channel to its group's first engine channel `first32`
    and an endpoint's own entry to its ejection channel) or as a table of engine channels per
    pair of nodes -- and which topology channels (of T) the routes name."""
    n = len(ej_ch)
    rt = rule = None
    if route.rule is not None:
        # routes by rule: csim looks each hop up from the rule, mapping its topology channel
        # to the group's first engine channel, and an endpoint's own entry to its ejection
        diag = np.full(n, -1, np.int32)
        diag[eps] = ej_ch[eps]
        rule = core.RouteRule(dict(route.rule.spec, tmap=first32, diag=diag))
        if route.tab is not None:                   # (made already: the classes' analysis)
            used_mask = np.zeros(max(T, 1), bool)
            used_mask[route.tab[route.tab >= 0]] = True
        elif route.name in ("dor", "dor_dateline"):
            used_mask = routing_mod._dor_used(topo, route)
        else:        # (up/down: parallel channels of a group share their class and order)
            used_mask = np.ones(max(T, 1), bool)
    else:
        table = route.table
        # (in int32 throughout: the table has an entry per pair of nodes, 1 GiB at 16,384
        # nodes; a few rows at a time: temporaries stay small beside the table itself)
        rt = np.empty((n, n), np.int32)
        used_mask = np.zeros(max(T, 1), bool)
        step = max(1, (1 << 22) // max(n, 1))
        for lo in range(0, n, step):
            rows = table[lo:lo + step]
            ok = rows >= 0
            np.copyto(rt[lo:lo + step], np.where(ok, first32[np.maximum(rows, 0)], -1))
            used_mask[rows[ok]] = True
        rt[eps, eps] = ej_ch[eps]
    return rt, rule, used_mask


def compile_network(cfg, topo=None) -> Network:
    topo = topo if topo is not None else topology_mod.build(cfg)
    net = cfg.network
    inj_bpc, ej_bpc = nic_bandwidths(topo, cfg)
    nic_lat = 1 if net.nic_latency_ns is None else topology_mod.ns_to_cycles(
        net.nic_latency_ns, net.clock_ghz)
    longest_step = _check_channels(topo, cfg, inj_bpc, ej_bpc, nic_lat)
    route = routing_mod.build(topo, cfg)
    F = net.flit_bytes
    n = topo.n_nodes

    # engine channels. A link's or NIC's lanes are alike but for their ids, so the layout is
    # worked out per unit -- every topology channel, then per endpoint its injection and its
    # ejection (a cluster of 65,536 GPUs: 0.66 M units, 4.85 M lanes) -- and each unit's
    # values repeated over its lanes, which stay adjacent and in order: as if every lane
    # were a row sorted at once, the ties kept in this order (tests/refnetwork.py)
    T = topo.n_channels
    eps = np.asarray(topo.endpoints(), np.int64)
    t_bpc = np.asarray(topo.ch_bytes_per_cycle, float)
    t_lanes = np.maximum(1, np.ceil(t_bpc / F - 1e-9)).astype(np.int64)
    u_nic = np.stack([eps, eps], 1).reshape(-1)
    u_nic_kind = np.tile(np.array([CH_INJECT, CH_EJECT], np.int8), eps.size)
    nic_bpc = np.where(u_nic_kind == CH_INJECT, inj_bpc[u_nic], ej_bpc[u_nic])
    nic_m = np.maximum(1, np.ceil(nic_bpc / F - 1e-9)).astype(np.int64)
    t_src, t_dst = topo.channel_ends()
    t_lat = np.asarray(topo.ch_latency_cycles, np.int64)
    kinds = np.concatenate([np.full(T, CH_NET, np.int8), u_nic_kind])
    src = np.concatenate([t_src, u_nic])
    dst = np.concatenate([t_dst, u_nic])
    bpc = np.concatenate([t_bpc / t_lanes, nic_bpc / nic_m])
    lat = np.concatenate([t_lat, np.full(u_nic.size, nic_lat, np.int64)])
    topo_channel = np.concatenate([np.arange(T, dtype=np.int64), np.full(u_nic.size, -1,
                                                                          np.int64)])
    L = np.concatenate([t_lanes, nic_m])
    # channels entering a router contiguous (ejection channels after, by source router);
    # within that, by port (on meshes, rings and tori BookSim's order: per dimension the
    # channel from the + neighbour, then from the - neighbour, the NIC last; the allocators'
    # round-robin pointers turn in this order), upstream node and kind, then bandwidth and
    # latency: groups adjacent
    in_rank = _port_ranks(topo, incoming=True)
    port = np.where(kinds == CH_NET, in_rank[np.maximum(topo_channel, 0)],
                    np.where(kinds == CH_EJECT, -1, in_rank[-1]))
    perm = np.lexsort((np.arange(kinds.size), lat, bpc, kinds, src, port, kinds == CH_EJECT,
                       dst))
    kinds, src, dst, bpc, lat, topo_channel, L = (a[perm] for a in (
        kinds, src, dst, bpc, lat, topo_channel, L))
    U = kinds.size
    starts = np.cumsum(L) - L                 # (per unit: its first lane's id)
    C = int(L.sum())
    src, dst, lat = src.astype(np.int32), dst.astype(np.int32), lat.astype(np.int32)
    # exact integer serialisation credits (see rate)
    dens = np.full(U, F * SCALE, np.int64)
    nums = np.rint(bpc * SCALE).astype(np.int64)
    bad = np.flatnonzero((nums < 1) | (dens > nums * MAX_FLIT_CYCLES))
    if bad.size:
        r = int(bad[0])
        gbps = bpc[r] * L[r] * net.clock_ghz           # (the link's or NIC's, all lanes)
        if kinds[r] == CH_NET:
            t = int(topo_channel[r])
            what = f"link {topo.channel_name(t)}"
            key = _link_key(topo, cfg, t, t_bpc[t]) or "topology.link_gbps or the link's gbps"
        else:
            end = "injection" if kinds[r] == CH_INJECT else "ejection"
            what = f"NIC of {topo.node_names[src[r]]} ({end})"
            given = getattr(net, f"{end}_gbps")
            key = (f"network.{end}_gbps = {given:g}" if given is not None and
                   math.isclose(given, gbps, rel_tol=1e-9) else
                   f"network.{end}_gbps, [topology.nic] or the node's {end}_gbps")
        cycles = f"{int(dens[r] // nums[r]):,}" if nums[r] >= 1 else f"{F / bpc[r]:.3g}"
        raise ConfigError(f"{what}: {gbps:g} GB/s takes {cycles} cycles a flit of {F} bytes; "
                          f"expected at most {MAX_FLIT_CYCLES:,} (a packet's latency, which "
                          f"the simulation keeps statistics of cycle by cycle, grows with "
                          f"it) ({key})")
    if np.any(nums > dens):
        raise AssertionError("a channel carries at most one flit per cycle")
    # the watchdog's allowance, from the serialisation the engine runs (the integer rate
    # nums / dens, slower than the configured one by up to half a unit of nums)
    if C:
        longest_step = max(longest_step, int(np.max(-(-dens // nums) + 2 * lat.astype(
            np.int64))) + net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay +
            net.st_delay + net.injection_delay)

    # parallel groups: consecutive channels with equal (kind, src, dst, rate, latency) -- a
    # unit's lanes, and the units next to it that match it
    same = np.zeros(U, bool)
    if U > 1:
        same[1:] = ((kinds[1:] == kinds[:-1]) & (src[1:] == src[:-1]) & (dst[1:] == dst[:-1])
                    & (nums[1:] == nums[:-1]) & (lat[1:] == lat[:-1]))
    u_base = np.maximum.accumulate(np.where(same, 0, starts))   # (per unit: its group's)
    gid = np.cumsum(~same) - 1
    u_par_n = np.bincount(gid, weights=L)[gid].astype(np.int32) if U else gid

    # topology channel -> its group's first engine channel (its lanes: one unit)
    first_of_topo = np.full(max(T, 1), -1, np.int64)
    is_net = topo_channel >= 0
    first_of_topo[topo_channel[is_net]] = u_base[is_net]
    inj_ch = np.full(n, -1, np.int32)
    ej_ch = np.full(n, -1, np.int32)
    inj = np.flatnonzero(kinds == CH_INJECT)        # (a unit per endpoint and way)
    inj_ch[src[inj]] = starts[inj]
    inj_n = np.zeros(n, np.int32)
    inj_n[src[inj]] = L[inj]
    ej = np.flatnonzero(kinds == CH_EJECT)
    ej_ch[dst[ej]] = starts[ej]
    # each channel's index among its router's outputs, in port order (BookSim's on regular
    # topologies: per dimension +, then -, the ejection port last), lanes in id order: the
    # order the switch allocator's input arbiters turn over
    out_rank = _port_ranks(topo, incoming=False)
    rank = np.where(kinds == CH_NET, out_rank[np.maximum(topo_channel, 0)], out_rank[-1])
    owner = np.where(kinds == CH_EJECT, dst, src).astype(np.int64)
    outs = np.flatnonzero(kinds != CH_INJECT)
    outs = outs[np.lexsort((starts[outs], rank[outs], owner[outs]))]
    before = np.cumsum(L[outs]) - L[outs]           # (lanes before it in that order)
    new_owner = np.ones(outs.size, bool)
    new_owner[1:] = owner[outs][1:] != owner[outs][:-1]
    first_at = np.maximum.accumulate(np.where(new_owner, before, 0))
    u_out = np.zeros(U, np.int64)                    # (per unit: its first lane's index)
    u_out[outs] = before - first_at
    first32 = first_of_topo.astype(np.int32)
    eps = np.asarray(topo.endpoints(), dtype=np.int64)
    rt, rule, used_mask = route_lookup(topo, route, first32, ej_ch, eps, T)

    # VC-class group and order: every member of a parallel group takes those of the topology
    # channel the routes name for the group (the others are interchangeable with it)
    used = np.flatnonzero(used_mask).astype(np.int64)
    gid_of_topo = np.full(max(T, 1), -1, np.int64)
    gid_of_topo[topo_channel[is_net]] = gid[is_net]
    rep_of_group = np.full(max(U, 1), -1, np.int64)
    rep_of_group[gid_of_topo[used]] = used          # (several: the last, as a dict would)
    named = rep_of_group[gid]
    rep = np.where((kinds == CH_NET) & (named >= 0), named, topo_channel)
    # (a network of one node has no topology channel: pad so that the lookups stay in range)
    ch_grp = np.append(np.asarray(route.ch_group, np.int64), -1)
    ch_ord = np.append(np.asarray(route.ch_order, np.int64), 0)
    group = np.where(rep >= 0, ch_grp[np.maximum(rep, 0)], -1)
    order = np.where(rep >= 0, ch_ord[np.maximum(rep, 0)], 0)
    # random ties: per engine channel, the first of the group leaving its router the other way
    u_rev = None
    if route.ch_rev is not None:
        other = np.full(U, -1, np.int64)
        other[is_net] = np.asarray(route.ch_rev, np.int64)[topo_channel[is_net]]
        u_rev = np.where(other >= 0, first_of_topo[np.maximum(other, 0)], -1)
        del other
    # (the units' working columns go before their lanes' are made: 0.16 GB of them on a
    # cluster of 65,536 GPUs)
    del (t_bpc, t_lanes, u_nic, u_nic_kind, nic_bpc, nic_m, t_src, t_dst, t_lat, bpc,
         in_rank, port, perm, same, gid, first_of_topo, is_net, inj, ej, out_rank, rank,
         owner, outs, before, new_owner, first_at, used_mask, used, gid_of_topo,
         rep_of_group, named, rep, ch_grp, ch_ord, bad)
    u_out = (u_out - starts).astype(np.int32)

    # every unit's values over its lanes
    def lanes_of(a, dtype):
        return np.repeat(np.asarray(a, dtype), L)
    # (in int32, in place: the engine's channel ids are int32)
    out_idx = lanes_of(u_out, np.int32)
    del u_out
    out_idx += np.arange(C, dtype=np.int32)
    kinds = lanes_of(kinds, np.int8)
    out_idx[kinds == CH_INJECT] = 0                 # (an injection channel is no output)
    src, dst, lat = lanes_of(src, np.int32), lanes_of(dst, np.int32), lanes_of(lat, np.int32)
    nums, dens = lanes_of(nums, np.int64), lanes_of(dens, np.int64)
    topo_channel = lanes_of(topo_channel, np.int64)
    group, order = lanes_of(group, np.int32), lanes_of(order, np.int32)
    par_base, par_n = lanes_of(u_base, np.int32), lanes_of(u_par_n, np.int32)
    ch_rev = None if u_rev is None else lanes_of(u_rev, np.int32)
    arrays = NetworkArrays(
        n_nodes=n, vcs=net.vcs, buffer_flits=net.vc_buffer_flits,
        routing_delay=net.routing_delay, vc_alloc_delay=net.vc_alloc_delay,
        sw_alloc_delay=net.sw_alloc_delay, st_delay=net.st_delay,
        injection_delay=net.injection_delay,
        wait_for_tail_credit=net.wait_for_tail_credit, n_classes=route.n_classes,
        watchdog_cycles=cfg.simulation.watchdog_cycles + longest_step, max_packets=cfg.simulation.max_packets,
        ch_src=src, ch_dst=dst, ch_kind=kinds, ch_lat_cycles=lat, ch_num=nums, ch_den=dens,
        ch_group=group, ch_order=order,
        ch_par_base=par_base, ch_par_n=par_n, ch_out_idx=out_idx, node_pos=route.node_pos,
        entry_class=route.entry_class, tie_k=route.tie_k, ch_rev=ch_rev,
        tie_seed=int(cfg.simulation.seed),
        **arbiter_inputs(net.va_input_arbiter, net.sa_input_arbiter),
        rt=None if rt is None else rt.reshape(-1), route=rule, ep_node=eps.astype(np.int32),
        nic_inj_base=np.maximum(inj_ch, 0).astype(np.int32), nic_inj_n=inj_n,
    )
    return Network(topo=topo, routing=route, arrays=arrays, topo_channel=topo_channel,
                   ch_kind=kinds, ch_src=src, ch_dst=dst, ch_num=nums, ch_den=dens,
                   ch_lat=lat, inj_ch=inj_ch, ej_ch=ej_ch, longest_step=longest_step,
                   unit_first=starts, unit_lanes=L)


# ------------------------------------------------------------------ describing a system

def undirected_bandwidth(topo, cfg):
    """{(a, b): GB/s per direction summed over parallel links} for a < b, and the directed
    sums {(a, b): GB/s}."""
    directed = {}
    for c in range(topo.n_channels):
        key = (topo.ch_src[c], topo.ch_dst[c])
        directed[key] = directed.get(key, 0.0) + topo.ch_bytes_per_cycle[c] * cfg.network.clock_ghz
    pairs = {}
    for (a, b), g in directed.items():
        k = (min(a, b), max(a, b))
        pairs[k] = max(pairs.get(k, 0.0), g)
    return pairs, directed


def interruptible(fn, *args):
    """fn(*args) run in a thread and waited for in slices of 0.05 s, so that Ctrl-C stops the
    caller at once (KeyboardInterrupt), where a LAPACK call that does not look for signals
    would hold it for its whole length (a dense eigen-decomposition of 2,048 nodes: seconds,
    tens of them on a loaded machine). The abandoned thread ends with the process."""
    box = {}

    def run():
        try:
            box["out"] = fn(*args)
        except BaseException as e:           # (re-raised in the caller)
            box["err"] = e
    worker = threading.Thread(target=run, daemon=True, name="pysim-interruptible")
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
    if "err" in box:
        raise box["err"]
    return box["out"]


def bisection(topo, cfg):
    """Bandwidth (GB/s, one direction) across the best balanced cut found, and the cut.

    Balanced: each side holds half of the endpoints (switches go where they fall). Exact
    minimum bisection is NP-hard in general; this tries the halving cuts of every dimension
    of a regular topology and a spectral cut (Fiedler vector of the bandwidth-weighted
    Laplacian; on graphs of more than SPECTRAL_MAX_NODES, the first half of the endpoints in
    breadth-first order instead), so the value is an upper bound, and exact for meshes and
    tori."""
    n = topo.n_nodes
    _, directed = undirected_bandwidth(topo, cfg)
    eps = np.asarray(topo.endpoints())
    cuts = []
    if topo.coords is not None:
        for d, k in enumerate(topo.dims):
            if k > 1:
                cuts.append(topo.coords[:, d] < k // 2)
    if n > SPECTRAL_MAX_NODES and not cuts:
        # too large for a dense eigen-decomposition (O(n^3): hours at 16,384 nodes): the
        # first half of the endpoints in breadth-first order from the first node
        side = np.zeros(n, bool)
        side[eps[_bfs_order(topo, eps)[: eps.size // 2]]] = True
        cuts.append(side)
    W = np.zeros((n, n)) if 2 <= n <= SPECTRAL_MAX_NODES else None
    for (a, b), g in (directed.items() if W is not None else ()):
        W[a, b] += g
        W[b, a] += g
    if W is not None:
        L = np.diag(W.sum(axis=1)) - W
        _, vecs = interruptible(np.linalg.eigh, L)
        fiedler = vecs[:, 1]
        order = np.argsort(fiedler[eps], kind="stable")
        side = np.zeros(n, bool)
        side[eps[order[: eps.size // 2]]] = True
        sw = [i for i in range(n) if topo.node_kinds[i] == "switch"]
        med = np.median(fiedler[eps]) if eps.size else 0.0
        for i in sw:
            side[i] = fiedler[i] < med
        cuts.append(side)
    if 2 <= n <= 64 and cuts:                  # refine the spectral cut by greedy swaps
        cuts.append(_refine_cut(cuts[-1].copy(), directed, topo))
    best, best_cut = float("inf"), None
    for side in cuts:
        if side[eps].sum() != eps.size // 2:
            continue
        bw = _cut_bw(side, directed)
        if bw < best:
            best, best_cut = bw, side
    return best, best_cut


SPECTRAL_MAX_NODES = 2048     # the spectral cut's dense eigen-decomposition: a few seconds


def _bfs_order(topo, eps):
    """Endpoint indices (into eps) in breadth-first order from node 0, links either way."""
    adj = {}
    for a, b in zip(topo.ch_src, topo.ch_dst):
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    seen, order, queue = {0}, [], [0]
    for u in queue:
        order.append(u)
        for v in adj.get(u, ()):
            if v not in seen:
                seen.add(v)
                queue.append(v)
    pos = {int(e): i for i, e in enumerate(eps)}
    return np.array([pos[u] for u in order if u in pos], np.int64)


def _cut_bw(side, directed):
    a2b = sum(g for (a, b), g in directed.items() if side[a] and not side[b])
    b2a = sum(g for (a, b), g in directed.items() if side[b] and not side[a])
    return min(a2b, b2a)


def _refine_cut(side, directed, topo):
    """Swap endpoint pairs across the cut (and move switches) while the cut shrinks."""
    eps = topo.endpoints()
    sw = [i for i in range(topo.n_nodes) if topo.node_kinds[i] == "switch"]
    cur = _cut_bw(side, directed)
    improved = True
    while improved:
        improved = False
        for i in sw:
            side[i] = not side[i]
            v = _cut_bw(side, directed)
            if v < cur - 1e-9:
                cur, improved = v, True
            else:
                side[i] = not side[i]
        for i in eps:
            for j in eps:
                if side[i] and not side[j]:
                    side[i], side[j] = False, True
                    v = _cut_bw(side, directed)
                    if v < cur - 1e-9:
                        cur, improved = v, True
                    else:
                        side[i], side[j] = True, False
    return side


# Hops between endpoints (pysim topo): every ordered pair is walked up to this many pairs
# (about 10 s at a load of 1); beyond, closed forms where the routes have them (dimension order
# on meshes, rings and tori; a tree's only paths), else the routes from a sample of sources
# to every destination, said so.
HOP_PAIRS_EXACT = theory.PAIRS_EXACT
HOP_SAMPLE_SOURCES = theory.SAMPLE_SOURCES


def _walk_hops(network, srcs, dests):
    """(longest, sum, pairs) of the hops from each of `srcs` to each of `dests`, a node to
    itself left out (grouped by destination for path_arrays, a few destinations at a time)."""
    diameter, hop_sum, n_pairs = 0, 0, 0
    step = max(1, (1 << 22) // max(srcs.size, 1))
    for lo in range(0, dests.size, step):
        d, s = np.meshgrid(dests[lo:lo + step], srcs, indexing="ij")
        mask = s != d
        if mask.any():
            h = theory.path_arrays(network, s[mask], d[mask])[0]
            diameter = max(diameter, int(h.max()))
            hop_sum += int(h.sum())
            n_pairs += h.size
    return diameter, hop_sum, n_pairs


def hop_stats(network, sample=HOP_SAMPLE_SOURCES, exact_pairs=HOP_PAIRS_EXACT, seed=1):
    """The diameter (router-to-router hops, the longest route between endpoints), the
    average hops over ordered pairs of distinct endpoints, and how they were found: 'every
    pair' (walked), 'closed form' (dimension order; a tree), or 'sampled' (the routes from
    `sample` endpoints drawn at random, seeded, to every endpoint: the average is the
    sample's, the diameter the longest route found, a lower bound)."""
    topo, routing = network.topo, network.routing
    eps = np.asarray(topo.endpoints(), np.int64)
    E = eps.size
    pairs = E * (E - 1)
    if pairs == 0:
        return dict(diameter=0, avg_hops=0.0, how="every pair")
    if pairs <= exact_pairs:
        diameter, total, n = _walk_hops(network, eps, eps)
        return dict(diameter=diameter, avg_hops=total / n, how="every pair")
    closed = theory.closed_hops(topo, routing)
    if closed is not None:
        return dict(diameter=closed[0], avg_hops=closed[1] / pairs, how="closed form")
    rng = np.random.default_rng(seed)
    src = np.sort(rng.choice(eps, size=min(sample, E), replace=False))
    diameter, total, n = _walk_hops(network, src, eps)
    return dict(diameter=diameter, avg_hops=total / n, how=f"sampled: {src.size} sources "
                f"drawn at random (seed {seed}) to every endpoint; the diameter is the "
                f"longest route found (a lower bound)")


def _unlike_used(network, eps, a, b):
    """{(bytes per cycle, latency): ['a->b', 'b->a']}: which of the unlike parallel links
    between nodes a and b the routes take, each way, read from the routes themselves (the
    channels a node's routes to every endpoint leave it by)."""
    topo = network.topo
    out = {}
    for u, v in ((a, b), (b, a)):
        nxt = network.routing.next(np.full(eps.size, u, np.int64), eps)
        for c in sorted({int(c) for c in nxt[nxt >= 0]}):
            if topo.ch_dst[c] == v:
                key = (float(topo.ch_bytes_per_cycle[c]), int(topo.ch_latency_cycles[c]))
                out.setdefault(key, []).append(f"{topo.node_names[u]}->{topo.node_names[v]}")
    return out


def describe(network, cfg):
    """A dict describing the compiled system: nodes by kind, links, diameter, average hops
    (hop_stats), bisection bandwidth, VC classes."""
    topo = network.topo
    pairs, directed = undirected_bandwidth(topo, cfg)
    eps = np.asarray(topo.endpoints())
    hops = hop_stats(network)
    kinds = {}
    for name, kind in zip(topo.node_names, topo.node_kinds):
        kinds.setdefault(kind, []).append(name)
    by_pair = {}                                   # (src, dst) -> its channels, in one pass
    for c, key in enumerate(zip(topo.ch_src, topo.ch_dst)):
        by_pair.setdefault(key, []).append(c)
    links = []
    taken = dict(directed)         # per direction between two nodes: GB/s some route takes
    for (a, b), g in sorted(pairs.items()):
        fwd, back = by_pair.get((a, b), []), by_pair.get((b, a), [])
        lat = topo.ch_latency_cycles[(fwd or back)[0]]
        link = dict(a=topo.node_names[a], b=topo.node_names[b], gbps=g,
                    parallel=max(len(fwd), len(back)), latency_cycles=int(lat),
                    directed=not (fwd and back))
        kinds_of = {}                              # unlike parallel links: routes use one
        for c in fwd or back:
            key = (float(topo.ch_bytes_per_cycle[c]), int(topo.ch_latency_cycles[c]))
            kinds_of[key] = kinds_of.get(key, 0) + 1
        if len(kinds_of) > 1:
            used = _unlike_used(network, eps, a, b)
            link["unlike"] = [dict(gbps=bpc * cfg.network.clock_ghz, latency_cycles=l,
                                   count=k, routes=used.get((bpc, l), []))
                              for (bpc, l), k in kinds_of.items()]
            link["routed_gbps"] = sum(u["gbps"] * u["count"] for u in link["unlike"]
                                      if u["routes"])
            for (u, v), chans in (((a, b), fwd), ((b, a), back)):     # (each way's own)
                way = f"{topo.node_names[u]}->{topo.node_names[v]}"
                for c in chans:
                    key = (float(topo.ch_bytes_per_cycle[c]), int(topo.ch_latency_cycles[c]))
                    if way not in used.get(key, ()):
                        taken[(u, v)] -= topo.ch_bytes_per_cycle[c] * cfg.network.clock_ghz
        links.append(link)
    bis, cut = bisection(topo, cfg)
    # the cut's capacity on links some route takes (bis itself where the routes take all)
    routed = _cut_bw(cut, taken) if cut is not None else bis
    return dict(name=topo.name, nodes=kinds, links=links, n_endpoints=int(eps.size),
                diameter=hops["diameter"], avg_hops=hops["avg_hops"], hops_how=hops["how"],
                bisection_gbps=bis, bisection_routed_gbps=routed,
                routing=network.routing.name,
                vc_scheme=network.routing.scheme,
                vc_classes=int(network.routing.n_classes), vcs=int(cfg.network.vcs),
                dependency_edges=int(network.routing.cdg_edges),
                engine_channels=int(len(network.ch_kind)))


# The configuration keys this module reads (pysim.schema).
declare(
    Key("simulation", "seed", "int", 1, "-", "Seed of the traffic generator's PRNG.",
        NONNEG, int_limit=2 ** 64 - 1),
    Key("simulation", "watchdog_cycles", "int", 20000, "cycles",
        "Flits buffered and none moving for this long, beyond the longest a flit takes "
        "through the slowest link or NIC (serialisation and latency) and a router, is "
        "reported as deadlock.", POS),
    Key("simulation", "max_packets", "int", 4000000, "packets",
        "Most packets alive at once (queued at sources or in flight); beyond it the run "
        "stops as saturated.", POS),
    Key("network", "flit_bytes", "int", 32, "bytes", "Bytes per flit.",
        (lambda x: 1 <= x <= MAX_FLIT_BYTES, f"an integer in 1 .. {MAX_FLIT_BYTES:,}")),
    Key("network", "clock_ghz", "float", 1.0, "GHz", "Network clock; 1 cycle = 1/clock_ghz ns.",
        POS),
    Key("network", "vcs", "int", 2, "-", "Virtual channels per input port.",
        VCS),
    Key("network", "vc_buffer_flits", "int", 8, "flits", "Buffer depth of each virtual channel.",
        POS),
    Key("network", "routing_delay", "int", 1, "cycles",
        "Route computation: head arrival to first VC allocation.", DELAY),
    Key("network", "vc_alloc_delay", "int", 1, "cycles",
        "VC allocation grant to first switch allocation.", DELAY),
    Key("network", "sw_alloc_delay", "int", 1, "cycles",
        "Switch allocation grant to switch traversal (also delays the credit).", DELAY1),
    Key("network", "st_delay", "int", 1, "cycles",
        "Switch traversal: crossbar to the output link.", DELAY),
    Key("network", "injection_delay", "int", 1, "cycles",
        "NIC: cycles from choosing a flit to send (a free VC with a credit) to its entering "
        "the NIC-router channel, like a router's switch traversal; 1 is BookSim's timing, 0 "
        "puts the flit on the channel the cycle it is chosen.", DELAY),
    Key("network", "wait_for_tail_credit", "bool", False, "-",
        "true: an output VC is reallocated only after the credit of the previous packet's "
        "tail returns, so a VC buffer holds one packet at a time; false (BookSim's default): "
        "as soon as the tail has left.", None),
    Key("network", "va_input_arbiter", "str", "round_robin", "-",
        "VC allocation's input arbiter: " + "; ".join(f"'{a.name}' ({a.doc})"
                                                       for a in VC_ARBITERS.values()) + ".",
        None, lambda: sorted(VC_ARBITERS)),
    Key("network", "sa_input_arbiter", "str", "outputs", "-",
        "Switch allocation's input arbiter (what an input port's round-robin arbiter turns "
        "over): " + "; ".join(f"'{a.name}' ({a.doc})" for a in SW_ARBITERS.values()) + ".",
        None, lambda: sorted(SW_ARBITERS)),
    Key("network", "injection_gbps", "float", None, "GB/s",
        "NIC injection bandwidth; default one flit per cycle.", POS),
    Key("network", "ejection_gbps", "float", None, "GB/s",
        "NIC ejection bandwidth; default one flit per cycle.", POS),
    Key("network", "nic_order", "str", "fifo", "-",
        "How a NIC orders the messages of an op graph it holds: 'fifo' (those to one "
        "destination one after another, first in first out, as one queue per destination; "
        "destinations take turns, packet by packet) or 'interleaved' (every message takes its "
        "turn, packet by packet; at the flow level a pair's messages share its rate).", None,
        lambda: ["fifo", "interleaved"]),
    Key("network", "nic_injection", "str", "per_link", "-",
        "How a NIC of several injection channels feeds its router an op graph's packets, at "
        "the flit level: 'per_link' (each channel carries packets for one output link at a "
        "time, while the router's buffers hold any of them, like a DMA engine per link: a "
        "packet never waits in an injection buffer behind one for another link) or 'shared' "
        "(each channel takes the next packet in turn, whatever its link; a packet for a busy "
        "link holds up those behind it in its VC's buffer). A NIC of one channel, a router of "
        "one VC, synthetic traffic and traces always share (BookSim's source queue).", None,
        lambda: ["per_link", "shared"]),
    Key("network", "nic_latency_ns", "float", None, "ns",
        "Latency of the NIC-router channel, each way; default one cycle.", POS),
)
