"""Compile a topology, its routing and the router parameters into the engine's flat arrays.

Channels handed to csim: the topology's channels (router to router), one injection channel
(NIC -> router) and one ejection channel (router -> NIC) per endpoint, numbered so that the
channels entering each router are contiguous (`Network.topo_channel` maps back).
Bandwidths become exact integer serialisation credits: a channel earns `num` per cycle and a
flit costs `den = flit_bytes * 2**20`, so rates are exact to 2**-20 bytes/cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysim import routing as routing_mod
from pysim import topology as topology_mod
from pysim.config import ConfigError

CH_NET, CH_INJECT, CH_EJECT = 0, 1, 2
SCALE = 1 << 20


@dataclass
class Network:
    topo: topology_mod.Topology
    routing: routing_mod.Routing
    arrays: dict            # what csim.Engine takes
    topo_channel: np.ndarray  # engine channel -> topology channel id (-1: NIC channels)
    ch_kind: np.ndarray     # per engine channel
    ch_src: np.ndarray      # node ids (upstream router, or the NIC's node for injection)
    ch_dst: np.ndarray
    ch_num: np.ndarray
    ch_den: np.ndarray
    ch_lat: np.ndarray
    inj_ch: np.ndarray      # per node: its injection channel, -1 for switches
    ej_ch: np.ndarray

    @property
    def n_net_channels(self):
        return self.topo.n_channels

    def flits_per_cycle(self, c):
        return self.ch_num[c] / self.ch_den[c]

    def channel_label(self, c):
        names = self.topo.node_names
        kind = self.ch_kind[c]
        if kind == CH_NET:
            return f"{names[self.ch_src[c]]}->{names[self.ch_dst[c]]}"
        if kind == CH_INJECT:
            return f"nic:{names[self.ch_src[c]]}->{names[self.ch_dst[c]]}"
        return f"{names[self.ch_src[c]]}->nic:{names[self.ch_dst[c]]}"


def rate(bytes_per_cycle: float, flit_bytes: int, what: str):
    """(num, den) integer serialisation credits for a bandwidth in bytes/cycle."""
    den = flit_bytes * SCALE
    num = int(round(bytes_per_cycle * SCALE))
    if num < 1:
        raise ConfigError(f"{what}: {bytes_per_cycle:g} bytes/cycle is too small to simulate")
    if num > den:
        raise ConfigError(
            f"{what}: {bytes_per_cycle:g} bytes/cycle is more than one {flit_bytes}-byte flit "
            f"per cycle; a channel moves at most one flit per cycle, so raise "
            f"network.flit_bytes or network.clock_ghz (or lower the bandwidth)")
    return num, den


def compile_network(cfg, topo=None) -> Network:
    topo = topo if topo is not None else topology_mod.build(cfg)
    route = routing_mod.build(topo, cfg)
    net = cfg.network
    F = net.flit_bytes
    n = topo.n_nodes
    C0 = topo.n_channels

    kinds = [CH_NET] * C0
    src = list(topo.ch_src)
    dst = list(topo.ch_dst)
    nums, dens = [], []
    for c in range(C0):
        a, b = rate(topo.ch_bytes_per_cycle[c], F, f"link {topo.channel_name(c)} "
                    f"(topology.link_gbps)")
        nums.append(a)
        dens.append(b)
    lat = list(topo.ch_latency_cycles)
    group = list(route.ch_group)
    order = list(route.ch_order)

    inj_bpc = F if net.injection_gbps is None else net.injection_gbps / net.clock_ghz
    ej_bpc = F if net.ejection_gbps is None else net.ejection_gbps / net.clock_ghz
    nic_lat = 1 if net.nic_latency_ns is None else topology_mod.ns_to_cycles(
        net.nic_latency_ns, net.clock_ghz)
    inj_num, inj_den = rate(inj_bpc, F, "network.injection_gbps")
    ej_num, ej_den = rate(ej_bpc, F, "network.ejection_gbps")

    inj_ch = np.full(n, -1, dtype=np.int32)
    ej_ch = np.full(n, -1, dtype=np.int32)
    for node in topo.endpoints():
        inj_ch[node] = len(kinds)
        kinds.append(CH_INJECT); src.append(node); dst.append(node)
        nums.append(inj_num); dens.append(inj_den); lat.append(nic_lat)
        group.append(-1); order.append(0)
        ej_ch[node] = len(kinds)
        kinds.append(CH_EJECT); src.append(node); dst.append(node)
        nums.append(ej_num); dens.append(ej_den); lat.append(nic_lat)
        group.append(-1); order.append(0)

    rt = route.table.astype(np.int32).copy()
    eps = topo.endpoints()
    rt[eps, eps] = ej_ch[eps]
    if np.any(np.diag(rt)[[i for i in range(n) if topo.node_kinds[i] == "switch"]] >= 0):
        raise AssertionError("switch nodes cannot be destinations")

    # Renumber channels so that those entering one router are contiguous (the engine's VC
    # state and buffers are indexed by channel: a router's inputs then share cache lines).
    kinds_a = np.array(kinds)
    dst_a = np.array(dst)
    src_a = np.array(src)
    key_router = np.where(kinds_a == CH_EJECT, src_a, dst_a)
    perm = np.lexsort((src_a, kinds_a == CH_EJECT, key_router))   # new -> old
    new_of = np.empty_like(perm)
    new_of[perm] = np.arange(perm.size)
    rt = np.where(rt >= 0, new_of[np.maximum(rt, 0)], -1).astype(np.int32)
    inj_ch = np.where(inj_ch >= 0, new_of[np.maximum(inj_ch, 0)], -1).astype(np.int32)
    ej_ch = np.where(ej_ch >= 0, new_of[np.maximum(ej_ch, 0)], -1).astype(np.int32)
    kinds, src, dst = kinds_a[perm], src_a[perm], dst_a[perm]
    nums, dens = np.array(nums)[perm], np.array(dens)[perm]
    lat, group, order = np.array(lat)[perm], np.array(group)[perm], np.array(order)[perm]
    topo_channel = perm.copy()
    topo_channel[kinds != CH_NET] = -1

    arrays = dict(
        n_nodes=n, vcs=net.vcs, buffer_flits=net.vc_buffer_flits,
        routing_delay=net.routing_delay, vc_alloc_delay=net.vc_alloc_delay,
        sw_alloc_delay=net.sw_alloc_delay, st_delay=net.st_delay,
        wait_for_tail_credit=net.wait_for_tail_credit, n_classes=route.n_classes,
        watchdog_cycles=cfg.simulation.watchdog_cycles, max_packets=cfg.simulation.max_packets,
        ch_src=np.array(src, np.int32), ch_dst=np.array(dst, np.int32),
        ch_kind=np.array(kinds, np.int8), ch_lat_cycles=np.array(lat, np.int32),
        ch_num=np.array(nums, np.int64), ch_den=np.array(dens, np.int64),
        ch_group=np.array(group, np.int32), ch_order=np.array(order, np.int32),
        rt=rt.reshape(-1), ep_node=np.array(eps, np.int32), nic_inj_ch=inj_ch,
    )
    return Network(topo=topo, routing=route, arrays=arrays, topo_channel=topo_channel,
                   ch_kind=arrays["ch_kind"],
                   ch_src=arrays["ch_src"], ch_dst=arrays["ch_dst"], ch_num=arrays["ch_num"],
                   ch_den=arrays["ch_den"], ch_lat=arrays["ch_lat_cycles"], inj_ch=inj_ch,
                   ej_ch=ej_ch)
