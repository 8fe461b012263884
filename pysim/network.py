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
from dataclasses import dataclass

import numpy as np

from pysim import routing as routing_mod
from pysim import topology as topology_mod
from pysim.config import MAX_DELAY_CYCLES, ConfigError

CH_NET, CH_INJECT, CH_EJECT = 0, 1, 2
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
    return max(1, math.ceil(bytes_per_cycle / flit_bytes - 1e-9))


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
    inj = np.zeros(topo.n_nodes)
    ej = np.zeros(topo.n_nodes)
    for i in topo.endpoints():
        a = topo.node_injection_gbps[i] if topo.node_injection_gbps else None
        b = topo.node_ejection_gbps[i] if topo.node_ejection_gbps else None
        a = a if a is not None else net.injection_gbps
        b = b if b is not None else net.ejection_gbps
        inj[i] = net.flit_bytes if a is None else a / net.clock_ghz
        ej[i] = net.flit_bytes if b is None else b / net.clock_ghz
    return inj, ej


MAX_LANES = 1024      # parallel channels (flits per cycle) of one link or NIC
MAX_BUFFER_BYTES = 4 << 30   # all VC buffers together


def _check_channels(topo, cfg, inj_bpc, ej_bpc, nic_lat):
    """Refuse, before building them, links and NICs of more than MAX_LANES flits per cycle or
    of a latency past MAX_DELAY_CYCLES, and a watchdog shorter than the longest step a flit
    legitimately takes with nothing else moving (it would report deadlock where there is none)."""
    F, clock = cfg.network.flit_bytes, cfg.network.clock_ghz
    ends = [(c, topo.ch_bytes_per_cycle[c], topo.ch_latency_cycles[c])
            for c in range(topo.n_channels)]
    for node in topo.endpoints():
        ends += [((node, "injection"), inj_bpc[node], nic_lat),
                 ((node, "ejection"), ej_bpc[node], nic_lat)]
    longest = 0
    for end, bpc, lat in ends:
        if lanes(bpc, F) <= MAX_LANES and lat <= MAX_DELAY_CYCLES:
            longest = max(longest, lat)
            continue
        if isinstance(end, tuple):
            what = f"NIC of {topo.node_names[end[0]]} ({end[1]})"
            lat_key = "network.nic_latency_ns"
        else:
            what = f"link {topo.channel_name(end)}"
            lat_key = "topology.link_latency_ns or the link's latency"
        if lanes(bpc, F) > MAX_LANES:
            raise ConfigError(f"{what}: {bpc * clock:g} GB/s is {lanes(bpc, F):,} flits per "
                              f"cycle of {F} bytes; expected at most {MAX_LANES:,} (raise "
                              f"network.flit_bytes, or lower the bandwidth)")
        raise ConfigError(f"{what}: latency {lat:,} cycles; expected at most "
                          f"{MAX_DELAY_CYCLES:,} ({lat_key})")
    net = cfg.network
    longest = max(longest + net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay +
                  net.st_delay, nic_lat + net.injection_delay)
    if cfg.simulation.watchdog_cycles <= longest:
        raise ConfigError(f"simulation.watchdog_cycles = {cfg.simulation.watchdog_cycles}: "
                          f"expected more than {longest} cycles, the longest a flit takes "
                          f"through one router and link with nothing else moving")


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


def compile_network(cfg, topo=None) -> Network:
    topo = topo if topo is not None else topology_mod.build(cfg)
    net = cfg.network
    inj_bpc, ej_bpc = nic_bandwidths(topo, cfg)
    nic_lat = 1 if net.nic_latency_ns is None else topology_mod.ns_to_cycles(
        net.nic_latency_ns, net.clock_ghz)
    _check_channels(topo, cfg, inj_bpc, ej_bpc, nic_lat)
    route = routing_mod.build(topo, cfg)
    F = net.flit_bytes
    n = topo.n_nodes

    # engine channels, unsorted: (router key, kind, src, dst, bpc, lat, topo id, group key)
    rows = []
    for c in range(topo.n_channels):
        bpc = topo.ch_bytes_per_cycle[c]
        m = lanes(bpc, F)
        for _ in range(m):
            rows.append((topo.ch_dst[c], CH_NET, topo.ch_src[c], topo.ch_dst[c], bpc / m,
                         topo.ch_latency_cycles[c], c))
    for node in topo.endpoints():
        m = lanes(inj_bpc[node], F)
        for _ in range(m):
            rows.append((node, CH_INJECT, node, node, inj_bpc[node] / m, nic_lat, -1))
        m = lanes(ej_bpc[node], F)
        for _ in range(m):
            rows.append((node, CH_EJECT, node, node, ej_bpc[node] / m, nic_lat, -1))
    # channels entering a router contiguous (ejection channels after, by source router);
    # within that, by port (on meshes, rings and tori BookSim's order: per dimension the
    # channel from the + neighbour, then from the - neighbour, the NIC last; the allocators'
    # round-robin pointers turn in this order), upstream node and kind, then bandwidth and
    # latency: groups adjacent
    in_rank = _port_ranks(topo, incoming=True)
    key = [(r, k == CH_EJECT, in_rank[tc] if k == CH_NET else (-1 if k == CH_EJECT else
                                                                in_rank[-1]), s, k, bpc, lat)
           for (r, k, s, d, bpc, lat, tc) in rows]
    perm = sorted(range(len(rows)), key=lambda i: (key[i], i))
    rows = [rows[i] for i in perm]
    C = len(rows)
    kinds = np.array([r[1] for r in rows], np.int8)
    src = np.array([r[2] for r in rows], np.int32)
    dst = np.array([r[3] for r in rows], np.int32)
    lat = np.array([r[5] for r in rows], np.int32)
    topo_channel = np.array([r[6] for r in rows], np.int64)
    nums = np.zeros(C, np.int64)
    dens = np.zeros(C, np.int64)
    for i, r in enumerate(rows):
        what = (f"link {topo.channel_name(r[6])}" if r[1] == CH_NET else
                f"NIC of {topo.node_names[r[2]]}")
        nums[i], dens[i] = rate(r[4], F, what)

    # parallel groups: consecutive channels with equal (kind, src, dst, rate, latency)
    par_base = np.arange(C, dtype=np.int32)
    for i in range(1, C):
        if (kinds[i], src[i], dst[i], nums[i], lat[i]) == \
                (kinds[i - 1], src[i - 1], dst[i - 1], nums[i - 1], lat[i - 1]):
            par_base[i] = par_base[i - 1]
    par_n = np.bincount(par_base, minlength=C)[par_base].astype(np.int32)

    # topology channel -> its group's first engine channel
    first_of_topo = np.full(max(topo.n_channels, 1), -1, np.int64)
    for i in range(C - 1, -1, -1):
        if topo_channel[i] >= 0:
            first_of_topo[topo_channel[i]] = par_base[i]
    inj_ch = np.full(n, -1, np.int32)
    ej_ch = np.full(n, -1, np.int32)
    inj_n = np.zeros(n, np.int32)
    for i in range(C - 1, -1, -1):
        if kinds[i] == CH_INJECT:
            inj_ch[src[i]] = i
            inj_n[src[i]] += 1
        elif kinds[i] == CH_EJECT:
            ej_ch[dst[i]] = i
    # each channel's index among its router's outputs, in port order (BookSim's on regular
    # topologies: per dimension +, then -, the ejection port last), lanes in id order: the
    # order the switch allocator's input arbiters turn over
    out_rank = _port_ranks(topo, incoming=False)
    rank = np.array([out_rank[tc] if k == CH_NET else out_rank[-1] for k, tc in
                     zip(kinds, topo_channel)], np.int64)
    owner = np.where(kinds == CH_EJECT, dst, src)
    out_idx = np.zeros(C, np.int32)
    outs = np.flatnonzero(kinds != CH_INJECT)
    outs = outs[np.lexsort((outs, rank[outs], owner[outs]))]
    start = np.searchsorted(owner[outs], owner[outs], side="left")
    out_idx[outs] = np.arange(outs.size) - start
    table = route.table
    # (in int32 throughout: the table has an entry per pair of nodes, 1 GiB at 16,384 nodes)
    rt = first_of_topo.astype(np.int32)[table]        # (-1 entries take the last; reset)
    rt[table < 0] = -1
    eps = np.asarray(topo.endpoints(), dtype=np.int64)
    rt[eps, eps] = ej_ch[eps]

    # VC-class group and order: every member of a parallel group takes those of the topology
    # channel the routes name for the group (the others are interchangeable with it)
    rep = topo_channel.copy()
    used = np.unique(table[table >= 0])
    rep_of_base = {int(first_of_topo[tc]): int(tc) for tc in used}
    for i in range(C):
        if kinds[i] == CH_NET:
            rep[i] = rep_of_base.get(int(par_base[i]), topo_channel[i])
    group = np.where(rep >= 0, route.ch_group[np.maximum(rep, 0)], -1)
    order = np.where(rep >= 0, route.ch_order[np.maximum(rep, 0)], 0)
    # random ties: per engine channel, the first of the group leaving its router the other way
    ch_rev = None
    if route.ch_rev is not None:
        ch_rev = np.full(C, -1, np.int32)
        for i in np.flatnonzero(kinds == CH_NET):
            other = route.ch_rev[topo_channel[i]]
            if other >= 0:
                ch_rev[i] = first_of_topo[other]
    buffer_bytes = C * net.vcs * net.vc_buffer_flits * 8      # csim keeps 8 bytes a slot
    if buffer_bytes > MAX_BUFFER_BYTES:
        raise ConfigError(f"network.vc_buffer_flits = {net.vc_buffer_flits} with network.vcs "
                          f"= {net.vcs} on {C:,} channels: {buffer_bytes / 2 ** 30:,.1f} GiB "
                          f"of buffers; expected at most {MAX_BUFFER_BYTES / 2 ** 30:.0f} GiB")
    arrays = dict(
        n_nodes=n, vcs=net.vcs, buffer_flits=net.vc_buffer_flits,
        routing_delay=net.routing_delay, vc_alloc_delay=net.vc_alloc_delay,
        sw_alloc_delay=net.sw_alloc_delay, st_delay=net.st_delay,
        injection_delay=net.injection_delay, wait_for_tail_credit=net.wait_for_tail_credit, n_classes=route.n_classes,
        watchdog_cycles=cfg.simulation.watchdog_cycles, max_packets=cfg.simulation.max_packets,
        ch_src=src, ch_dst=dst, ch_kind=kinds, ch_lat_cycles=lat, ch_num=nums, ch_den=dens,
        ch_group=group.astype(np.int32), ch_order=order.astype(np.int32),
        ch_par_base=par_base, ch_par_n=par_n, ch_out_idx=out_idx, node_pos=route.node_pos,
        entry_class=route.entry_class, tie_k=route.tie_k, ch_rev=ch_rev,
        tie_seed=int(cfg.simulation.seed),
        va_own_index=net.va_input_arbiter == "own_index",
        sa_by_vc=net.sa_input_arbiter == "vcs",
        rt=rt.reshape(-1), ep_node=eps.astype(np.int32),
        nic_inj_base=np.maximum(inj_ch, 0).astype(np.int32), nic_inj_n=inj_n,
    )
    return Network(topo=topo, routing=route, arrays=arrays, topo_channel=topo_channel,
                   ch_kind=kinds, ch_src=src, ch_dst=dst, ch_num=nums, ch_den=dens,
                   ch_lat=lat, inj_ch=inj_ch, ej_ch=ej_ch)


# ------------------------------------------------------------------ describing a system

def _undirected_bandwidth(topo, cfg):
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


def bisection(topo, cfg):
    """Bandwidth (GB/s, one direction) across the best balanced cut found, and the cut.

    Balanced: each side holds half of the endpoints (switches go where they fall). Exact
    minimum bisection is NP-hard in general; this tries the halving cuts of every dimension
    of a regular topology and a spectral cut (Fiedler vector of the bandwidth-weighted
    Laplacian), so the value is an upper bound, and exact for meshes and tori."""
    n = topo.n_nodes
    _, directed = _undirected_bandwidth(topo, cfg)
    eps = np.asarray(topo.endpoints())
    cuts = []
    if topo.coords is not None:
        for d, k in enumerate(topo.dims):
            if k > 1:
                cuts.append(topo.coords[:, d] < k // 2)
    W = np.zeros((n, n))
    for (a, b), g in directed.items():
        W[a, b] += g
        W[b, a] += g
    L = np.diag(W.sum(axis=1)) - W
    if n >= 2:
        _, vecs = np.linalg.eigh(L)
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
        a2b = sum(g for (a, b), g in directed.items() if side[a] and not side[b])
        b2a = sum(g for (a, b), g in directed.items() if side[b] and not side[a])
        bw = min(a2b, b2a)
        if bw < best:
            best, best_cut = bw, side
    return best, best_cut


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


def describe(network, cfg):
    """A dict describing the compiled system: nodes by kind, links, diameter, average hops,
    bisection bandwidth, VC classes."""
    from pysim import theory
    topo = network.topo
    pairs, _ = _undirected_bandwidth(topo, cfg)
    eps = np.asarray(topo.endpoints())
    d, s = np.meshgrid(eps, eps, indexing="ij")     # grouped by destination (path_arrays)
    mask = s != d
    hops = theory.path_arrays(network, s[mask], d[mask])[0] if mask.any() else np.zeros(1)
    kinds = {}
    for name, kind in zip(topo.node_names, topo.node_kinds):
        kinds.setdefault(kind, []).append(name)
    links = []
    for (a, b), g in sorted(pairs.items()):
        fwd = [c for c in range(topo.n_channels) if (topo.ch_src[c], topo.ch_dst[c]) == (a, b)]
        back = [c for c in range(topo.n_channels) if (topo.ch_src[c], topo.ch_dst[c]) == (b, a)]
        lat = topo.ch_latency_cycles[(fwd or back)[0]]
        links.append(dict(a=topo.node_names[a], b=topo.node_names[b], gbps=g,
                          parallel=max(len(fwd), len(back)), latency_cycles=int(lat),
                          directed=not (fwd and back)))
    bis, _ = bisection(topo, cfg)
    return dict(name=topo.name, nodes=kinds, links=links, n_endpoints=int(eps.size),
                diameter=int(hops.max()) if hops.size else 0,
                avg_hops=float(hops.mean()) if hops.size else 0.0,
                bisection_gbps=bis, routing=network.routing.name,
                vc_scheme=network.routing.scheme,
                vc_classes=int(network.routing.n_classes), vcs=int(cfg.network.vcs),
                dependency_edges=int(network.routing.cdg_edges),
                engine_channels=int(len(network.ch_kind)))
