"""A reference for pysim.network.compile_network: the engine's channels laid out lane by lane
(every lane of every link and NIC a row of its own, sorted at once), against which the
layout done per link and NIC and expanded to its lanes is checked (tests/test_network_layout.py)."""
import numpy as np

from pysim import routing as routing_mod
from pysim import topology as topology_mod
from pysim.engine import CH_EJECT, CH_INJECT, CH_NET, NetworkArrays, arbiter_inputs
from pysim.errors import ConfigError
from pysim.network import (MAX_FLIT_CYCLES, SCALE, Network, _check_channels, _port_ranks,
                           nic_bandwidths, rate, route_lookup)


def compile_network_by_lane(cfg, topo):
    """compile_network with every engine channel (lane) its own row throughout: the lanes
    sorted at once, their groups and output indices found lane by lane."""
    topo = topo if topo is not None else topology_mod.build(cfg)
    net = cfg.network
    inj_bpc, ej_bpc = nic_bandwidths(topo, cfg)
    nic_lat = 1 if net.nic_latency_ns is None else topology_mod.ns_to_cycles(
        net.nic_latency_ns, net.clock_ghz)
    longest_step = _check_channels(topo, cfg, inj_bpc, ej_bpc, nic_lat)
    route = routing_mod.build(topo, cfg)
    F = net.flit_bytes
    n = topo.n_nodes

    # engine channels (vectorised: a dense graph has millions), first unsorted: every lane of
    # every topology channel, then per endpoint its injection lanes and its ejection lanes
    T = topo.n_channels
    eps = np.asarray(topo.endpoints(), np.int64)
    t_bpc = np.asarray(topo.ch_bytes_per_cycle, float)
    t_lanes = np.maximum(1, np.ceil(t_bpc / F - 1e-9)).astype(np.int64)
    i_lanes = np.maximum(1, np.ceil(inj_bpc[eps] / F - 1e-9)).astype(np.int64)
    e_lanes = np.maximum(1, np.ceil(ej_bpc[eps] / F - 1e-9)).astype(np.int64)
    tc = np.repeat(np.arange(T, dtype=np.int64), t_lanes)
    nic_node = np.repeat(np.stack([eps, eps], 1).reshape(-1),
                         np.stack([i_lanes, e_lanes], 1).reshape(-1))
    nic_kind = np.repeat(np.tile(np.array([CH_INJECT, CH_EJECT], np.int8), eps.size),
                         np.stack([i_lanes, e_lanes], 1).reshape(-1))
    nic_bpc = np.where(nic_kind == CH_INJECT, inj_bpc[nic_node], ej_bpc[nic_node])
    nic_m = np.maximum(1, np.ceil(nic_bpc / F - 1e-9)).astype(np.int64)
    t_src = np.asarray(topo.ch_src, np.int64)
    t_dst = np.asarray(topo.ch_dst, np.int64)
    t_lat = np.asarray(topo.ch_latency_cycles, np.int64)
    kinds = np.concatenate([np.full(tc.size, CH_NET, np.int8), nic_kind])
    src = np.concatenate([t_src[tc], nic_node])
    dst = np.concatenate([t_dst[tc], nic_node])
    bpc = np.concatenate([t_bpc[tc] / t_lanes[tc], nic_bpc / nic_m])
    lat = np.concatenate([t_lat[tc], np.full(nic_node.size, nic_lat, np.int64)])
    topo_channel = np.concatenate([tc, np.full(nic_node.size, -1, np.int64)])
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
    kinds, src, dst, bpc, lat, topo_channel = (a[perm] for a in (kinds, src, dst, bpc, lat,
                                                                 topo_channel))
    C = kinds.size
    src, dst, lat = src.astype(np.int32), dst.astype(np.int32), lat.astype(np.int32)
    # exact integer serialisation credits (see rate)
    dens = np.full(C, F * SCALE, np.int64)
    nums = np.rint(bpc * SCALE).astype(np.int64)
    bad = np.flatnonzero((nums < 1) | (dens > nums * MAX_FLIT_CYCLES))
    if bad.size:
        r = int(bad[0])
        what = (f"link {topo.channel_name(int(topo_channel[r]))} (topology.link_gbps or the "
                f"link's gbps)" if kinds[r] == CH_NET else f"NIC of {topo.node_names[src[r]]} "
                f"(network.injection_gbps / ejection_gbps, [topology.nic] or the node's)")
        rate(float(bpc[r]), F, what)                # raises, naming it
        raise ConfigError(f"{what}: {bpc[r] * net.clock_ghz:g} GB/s takes "
                          f"{int(dens[r] // nums[r]):,} cycles a flit of {F} bytes; expected "
                          f"at most {MAX_FLIT_CYCLES:,} (a packet's latency, which the "
                          f"simulation keeps statistics of cycle by cycle, grows with it)")
    if np.any(nums > dens):
        raise AssertionError("a channel carries at most one flit per cycle")
    # the watchdog's allowance, from the serialisation the engine runs (the integer rate
    # nums / dens, slower than the configured one by up to half a unit of nums)
    if C:
        longest_step = max(longest_step, int(np.max(-(-dens // nums) + 2 * lat.astype(
            np.int64))) + net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay +
            net.st_delay + net.injection_delay)

    # parallel groups: consecutive channels with equal (kind, src, dst, rate, latency)
    same = np.zeros(C, bool)
    if C > 1:
        same[1:] = ((kinds[1:] == kinds[:-1]) & (src[1:] == src[:-1]) & (dst[1:] == dst[:-1])
                    & (nums[1:] == nums[:-1]) & (lat[1:] == lat[:-1]))
    par_base = np.maximum.accumulate(np.where(same, 0, np.arange(C))).astype(np.int32)
    par_n = np.bincount(par_base, minlength=C)[par_base].astype(np.int32)

    # topology channel -> its group's first engine channel (its first lane's group)
    first_of_topo = np.full(max(T, 1), -1, np.int64)
    is_net = topo_channel >= 0
    tcs, first = np.unique(topo_channel[is_net], return_index=True)
    first_of_topo[tcs] = par_base[np.flatnonzero(is_net)[first]]
    inj_ch = np.full(n, -1, np.int32)
    ej_ch = np.full(n, -1, np.int32)
    inj = np.flatnonzero(kinds == CH_INJECT)
    nodes_i, first_i = np.unique(src[inj], return_index=True)
    inj_ch[nodes_i] = inj[first_i]
    inj_n = np.bincount(src[inj], minlength=n).astype(np.int32)
    ej = np.flatnonzero(kinds == CH_EJECT)
    nodes_e, first_e = np.unique(dst[ej], return_index=True)
    ej_ch[nodes_e] = ej[first_e]
    # each channel's index among its router's outputs, in port order (BookSim's on regular
    # topologies: per dimension +, then -, the ejection port last), lanes in id order: the
    # order the switch allocator's input arbiters turn over
    out_rank = _port_ranks(topo, incoming=False)
    rank = np.where(kinds == CH_NET, out_rank[np.maximum(topo_channel, 0)], out_rank[-1])
    owner = np.where(kinds == CH_EJECT, dst, src).astype(np.int64)
    out_idx = np.zeros(C, np.int32)
    outs = np.flatnonzero(kinds != CH_INJECT)
    outs = outs[np.lexsort((outs, rank[outs], owner[outs]))]
    start = np.searchsorted(owner[outs], owner[outs], side="left")
    out_idx[outs] = np.arange(outs.size) - start
    first32 = first_of_topo.astype(np.int32)
    eps = np.asarray(topo.endpoints(), dtype=np.int64)
    # (the routes' lookup is the same for lanes and units: shared, not what is checked)
    rt, rule, used_mask = route_lookup(topo, route, first32, ej_ch, eps, T)

    # VC-class group and order: every member of a parallel group takes those of the topology
    # channel the routes name for the group (the others are interchangeable with it)
    used = np.flatnonzero(used_mask).astype(np.int64)
    rep_of_base = np.full(C, -1, np.int64)
    rep_of_base[first_of_topo[used]] = used          # (several: the last, as a dict would)
    named = rep_of_base[par_base]
    rep = np.where((kinds == CH_NET) & (named >= 0), named, topo_channel)
    # (a network of one node has no topology channel: pad so that the lookups stay in range)
    ch_grp = np.append(np.asarray(route.ch_group, np.int64), -1)
    ch_ord = np.append(np.asarray(route.ch_order, np.int64), 0)
    group = np.where(rep >= 0, ch_grp[np.maximum(rep, 0)], -1)
    order = np.where(rep >= 0, ch_ord[np.maximum(rep, 0)], 0)
    # random ties: per engine channel, the first of the group leaving its router the other way
    ch_rev = None
    if route.ch_rev is not None:
        ch_rev = np.full(C, -1, np.int32)
        for i in np.flatnonzero(kinds == CH_NET):
            other = route.ch_rev[topo_channel[i]]
            if other >= 0:
                ch_rev[i] = first_of_topo[other]
    arrays = NetworkArrays(
        n_nodes=n, vcs=net.vcs, buffer_flits=net.vc_buffer_flits,
        routing_delay=net.routing_delay, vc_alloc_delay=net.vc_alloc_delay,
        sw_alloc_delay=net.sw_alloc_delay, st_delay=net.st_delay,
        injection_delay=net.injection_delay,
        wait_for_tail_credit=net.wait_for_tail_credit, n_classes=route.n_classes,
        watchdog_cycles=cfg.simulation.watchdog_cycles + longest_step, max_packets=cfg.simulation.max_packets,
        ch_src=src, ch_dst=dst, ch_kind=kinds, ch_lat_cycles=lat, ch_num=nums, ch_den=dens,
        ch_group=group.astype(np.int32), ch_order=order.astype(np.int32),
        ch_par_base=par_base, ch_par_n=par_n, ch_out_idx=out_idx, node_pos=route.node_pos,
        entry_class=route.entry_class, tie_k=route.tie_k, ch_rev=ch_rev,
        tie_seed=int(cfg.simulation.seed),
        **arbiter_inputs(net.va_input_arbiter, net.sa_input_arbiter),
        rt=None if rt is None else rt.reshape(-1), route=rule, ep_node=eps.astype(np.int32),
        nic_inj_base=np.maximum(inj_ch, 0).astype(np.int32), nic_inj_n=inj_n,
    )
    return Network(topo=topo, routing=route, arrays=arrays, topo_channel=topo_channel,
                   ch_kind=kinds, ch_src=src, ch_dst=dst, ch_num=nums, ch_den=dens,
                   ch_lat=lat, inj_ch=inj_ch, ej_ch=ej_ch, longest_step=longest_step)
