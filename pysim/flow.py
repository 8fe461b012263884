"""The flow-level network model (`network.model = "flow"`): what csim's flow engine
(csim/_flow.pxd) needs beyond the compiled network, built once per op graph, vectorised.

Each send is one flow along the route the flit level takes (the same routing table, parallel
channel groups, NIC injection and ejection channels). Flows share every channel group and NIC
max-min fairly, and each message also pays the zero-load latency of its last packet, from the
closed form of pysim.theory, so that a message alone takes what it takes at the flit level:
that form is the one the flit level's tests hold it to, and whatever changes the router's
timing changes both.

Besides the channel groups, one more constraint of the flit level binds some pairs: a NIC
sends no more packets at once to one destination than the first link towards it has
channels, each on one of its injection channels, so the messages of one (source,
destination) pair share at most (first link's channels) x (one injection channel's rate).
Where that is below both the NIC's and the first link's capacity, the pair gets a resource
of its own.
"""
from __future__ import annotations

import numpy as np

from pysim import theory

MODELS = ("flit", "flow")
SEND = 1                       # csim's op kind of a send (pysim.workload.graph.KINDS)


def message_shape(size, packet_flits, flit_bytes):
    """Per message of `size` bytes cut into packets of at most packet_flits flits: the flits
    of its last packet, and its flits in all."""
    size = np.asarray(size, np.int64)
    bpp = int(packet_flits) * int(flit_bytes)
    rest = size % bpp
    last = np.where(rest == 0, packet_flits, -(-rest // flit_bytes))
    flits = (size // bpp) * packet_flits + -(-rest // flit_bytes)
    return last, flits


def nic_caps(network, cfg, src, dst):
    """Per (source, destination) pair (src[i] -> dst[i], node ids): the index of its cap
    resource, numbered from the engine's channel count on (-1 where the cap does not bind),
    and each cap resource's bytes per cycle and packets at once."""
    arr = network.arrays
    n = int(arr["n_nodes"])
    F = cfg.network.flit_bytes
    inj = network.inj_ch[src]
    lanes_inj = np.asarray(arr["nic_inj_n"])[src]
    lane = network.ch_num[inj] / network.ch_den[inj] * F
    first = np.asarray(arr["rt"]).reshape(-1)[src * n + dst]
    par = np.asarray(arr["ch_par_n"])[first]
    first_cap = par * network.ch_num[first] / network.ch_den[first] * F
    cap = par * lane
    binds = (lanes_inj > 1) & (cap < np.minimum(lanes_inj * lane, first_cap) * (1 - 1e-9))
    ids = np.full(src.size, -1, np.int32)
    ids[binds] = len(network.ch_kind) + np.arange(int(binds.sum()))
    return ids, cap[binds].astype(np.float64), par[binds].astype(np.int32)


WHOLE_MAX = 1 << 36      # flits: T0 of longer messages is extended exactly, in Python ints


def _zero_load(network, cfg, src, dst, length):
    """theory.zero_load_latency per (src[i], dst[i], length[i]), computed once per distinct
    triple, in destination order (the path walk shares each destination's routes). Lengths
    past WHOLE_MAX flits (messages of terabytes: int64 would overflow) add their extra flits'
    spacing at the path's slowest rate exactly."""
    big = length > WHOLE_MAX
    capped = np.minimum(length, WHOLE_MAX)
    order = np.lexsort((capped, src, dst))             # by destination, then source, length
    d, s_, c = dst[order], src[order], capped[order]
    new = np.ones(order.size, bool)
    new[1:] = (d[1:] != d[:-1]) | (s_[1:] != s_[:-1]) | (c[1:] != c[:-1])
    first = np.flatnonzero(new)
    t0u = np.asarray(theory.zero_load_latency(network, cfg, s_[first], d[first], c[first]),
                     np.int64)
    t0 = np.empty(order.size, np.int64)
    t0[order] = t0u[np.cumsum(new) - 1]
    if big.any():
        _, _, num, den, _ = theory.path_arrays(network, src[big], dst[big])
        extra = [-(-(int(x) - WHOLE_MAX) * int(d) // int(u))
                 for x, u, d in zip(length[big], num, den)]
        t0 = t0.astype(object)
        t0[big] += np.array(extra, dtype=object)
    return t0


def flow_arrays(network, cfg, arrays):
    """For csim's Engine.set_graph(flow=...): per op of the compiled graph `arrays`
    (pysim.workload.graph.compile_graph), for sends, the zero-load latency (theory's closed
    form) of a packet as long as its last, of a full packet and of one as long as the whole
    message, and its (source, destination) pair; per pair its ends and cap resource; the caps'
    capacities and channels."""
    kind, size = arrays["kind"], arrays["size"]
    n_ops = kind.size
    lat = {k: np.zeros(n_ops, np.int64) for k in ("latency", "latency_full", "latency_whole")}
    pair = np.full(n_ops, -1, np.int32)
    sends = np.flatnonzero((kind == SEND) & (size > 0))
    P, F = cfg.workload.packet_flits, cfg.network.flit_bytes
    n = int(network.arrays["n_nodes"])
    src = arrays["node"][sends].astype(np.int64)
    dst = arrays["dst"][sends].astype(np.int64)
    last, flits = message_shape(size[sends], P, F)
    for key, length in (("latency", last), ("latency_full", np.full(sends.size, P)),
                        ("latency_whole", flits)):
        if sends.size:
            t0 = _zero_load(network, cfg, src, dst, np.asarray(length, np.int64))
            lat[key][sends] = np.minimum(t0, np.iinfo(np.int64).max // 4).astype(np.int64)
    pairs, inv = np.unique(src * n + dst, return_inverse=True)
    pair[sends] = inv.reshape(-1)
    psrc, pdst = pairs // n, pairs % n
    pcap, cap_bytes, cap_lanes = nic_caps(network, cfg, psrc, pdst)
    return dict(**lat, pair=pair, pair_src=psrc.astype(np.int32),
                pair_dst=pdst.astype(np.int32), pair_cap=pcap, cap_bytes=cap_bytes,
                cap_lanes=cap_lanes)
