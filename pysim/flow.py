"""The flow-level network model (`network.model = "flow"`): what csim's flow engine
(csim/_flow.pxd) needs beyond the compiled network, built once per op graph, vectorised.

Each send is one flow along the route the flit level takes (the same routing table, parallel
channel groups, NIC injection and ejection channels). Flows share every channel group and NIC
max-min fairly, and each message also pays the zero-load latency of its last packet, from the
closed form of pysim.theory, so that a message alone takes what it takes at the flit level:
that form is the one the flit level's tests hold it to, and whatever changes the router's
timing changes both.

Besides the channel groups, two more constraints of the flit level are resources:
- a NIC sends no more packets at once to one destination than the first link towards it has
  channels, each on one of its injection channels, so the messages of one (source,
  destination) pair share at most (first link's channels) x (one injection channel's rate).
  Where that is below both the NIC's and the first link's capacity, the pair gets a resource
  of its own;
- where a VC class has a single VC (as many classes as VCs: rings and tori with 2 VCs), a
  packet cannot take a channel until the one before it in its class has left it and the VC
  has been allocated again: its packets cross the channel one after another with a gap, at
  a rate below the channel's. That rate is measured once per kind of channel at the flit
  level itself (a stream of full packets over it with one VC, the same router, fed by the
  NIC of the node at its upstream end, or by a router if that is a switch), so it follows
  whatever the router's timing is, and each (channel group, class) pair is a resource of
  that rate (times its channels).
"""
from __future__ import annotations

import functools

import numpy as np

from pysim.engine import OP_SEND, FlowArrays, GraphArrays, new_engine, set_graph
from pysim import theory
from pysim.errors import ConfigError
from pysim.network import CH_NET, compile_network, nic_bandwidths
from pysim.schema import Key, declare, reads as declare_reads
from pysim.config import from_dict

MODELS = ("flit", "flow")
SEND = OP_SEND


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
    F = cfg.network.flit_bytes
    inj = network.inj_ch[src]
    lanes_inj = np.asarray(arr["nic_inj_n"])[src]
    lane = network.ch_num[inj] / network.ch_den[inj] * F
    first = arr.routes().next(src, dst)
    par = np.asarray(arr["ch_par_n"])[first]
    first_cap = par * network.ch_num[first] / network.ch_den[first] * F
    cap = par * lane
    binds = (lanes_inj > 1) & (cap < np.minimum(lanes_inj * lane, first_cap) * (1 - 1e-9))
    ids = np.full(src.size, -1, np.int32)
    ids[binds] = len(network.ch_kind) + np.arange(int(binds.sum()))
    return ids, cap[binds].astype(np.float64), par[binds].astype(np.int32)


STREAM_PACKETS = 24       # packets of the calibration streams (the period: their difference)
CALIBRATION_CYCLES = 1 << 27    # the most cycles the calibration may simulate


@functools.lru_cache(maxsize=512)
def stream_period(num, den, lat_cycles, flit_bytes, packet_flits, buffer_flits, delays,
                  wait_for_tail_credit, nic_latency_ns, clock_ghz, injection_gbps):
    """Cycles per packet of a stream of full packets over a channel of num / den flits per
    cycle and lat_cycles latency whose class has one VC, at the flit level, with the given
    router (delays: routing, VC allocation, switch allocation, switch traversal): a message of
    K and one of 2K packets, their times' difference over K. The channel's upstream end
    matters: a NIC of injection_gbps feeds it (one hop), or, if None, a router (the second
    hop of a line of three). vcs = 1.

    What it costs is bounded whatever the packets and the channel: within a long packet the
    flits stream at a steady rate, so the period is affine in the packet's flits beyond a few
    buffers and round trips, and is measured at two such lengths and extended; on a channel
    whose flit takes longer than a credit's round trip, the gap between packets (the VC's
    round trip) no longer depends on the channel's rate, so it is measured on a faster
    channel whose flit still outlasts the round trip, and the slow channel's flits added."""
    args = (lat_cycles, flit_bytes)
    rest = (buffer_flits, delays, wait_for_tail_credit, nic_latency_ns, clock_ghz,
            injection_gbps)
    loop = 2 * int(lat_cycles) + sum(int(d) for d in delays) + 4     # a credit's round trip
    slow = 4 * loop                                    # a flit time past any round trip
    inj_fpc = None if injection_gbps is None else injection_gbps / clock_ghz / flit_bytes
    if den > slow * num and (inj_fpc is None or inj_fpc * slow >= 1):
        fast = stream_period(1, slow, *args, packet_flits, *rest)
        return fast + packet_flits * (den / num - slow)
    longer = _past_long(lambda P: stream_period(num, den, *args, P, *rest), packet_flits,
                        buffer_flits, loop)
    if longer is not None:
        return longer
    return _stream_period(num, den, lat_cycles, flit_bytes, packet_flits, buffer_flits, delays,
                          wait_for_tail_credit, nic_latency_ns, clock_ghz, injection_gbps)


def _past_long(period_of, packet_flits, buffer_flits, loop):
    """None for packets of at most 4 x long flits, long = 256 + 8 (buffer_flits + loop) (loop:
    a credit's round trip, cycles); for longer ones, period_of(packet_flits) extended from its
    values at long and 2 long flits: past a few buffers and round trips a long packet's flits
    stream at a steady rate, so the period is affine in the packet's flits."""
    long_ = 256 + 8 * (int(buffer_flits) + loop)
    if packet_flits <= 4 * long_:
        return None
    p1, p2 = period_of(long_), period_of(2 * long_)
    return p1 + (p2 - p1) * (packet_flits - long_) / long_


def _measured_period(topology, network, flit_bytes, packet_flits, too_long):
    """Cycles per packet at the flit level of a message of full packets from node 0 to the
    last node of a small graph topology (`network`: the [network] table but for flit_bytes):
    a message of K and one of 2K packets, their times' difference over K. too_long: what a
    ConfigError says when a message takes more than CALIBRATION_CYCLES, {} standing for
    that."""
    cfg = from_dict({"topology": {"kind": "graph", **topology},
                     "network": {"flit_bytes": flit_bytes, **network},
                     "workload": {"kind": "graph", "packet_flits": packet_flits}})
    net = compile_network(cfg)
    last = len(topology["nodes"]) - 1
    t = []
    for k in (STREAM_PACKETS, 2 * STREAM_PACKETS):    # one send op, x0 -> the last node
        eng = new_engine(net.arrays)
        set_graph(eng, GraphArrays(kind=[SEND], node=[0], dst=[last],
                                   size=[k * packet_flits * flit_bytes], deps=[0],
                                   succ_ptr=[0, 0], succ=np.zeros(0, np.int32),
                                   packet_flits=packet_flits, flit_bytes=flit_bytes))
        if eng.run(CALIBRATION_CYCLES, stop="all") != "done":
            raise ConfigError(too_long.format(
                f"takes more than {CALIBRATION_CYCLES:,} cycles to measure"))
        t.append(int(eng.op_times()[1][0]))
    return (t[1] - t[0]) / STREAM_PACKETS


def _router(clock_ghz, vcs, buffer_flits, delays, wait_for_tail_credit, nic_latency_ns):
    """The [network] table of a calibration (pysim.config keys) for the given router."""
    rd, va, sa, st = delays
    return {"clock_ghz": clock_ghz, "vcs": vcs, "vc_buffer_flits": buffer_flits,
            "routing_delay": rd, "vc_alloc_delay": va, "sw_alloc_delay": sa, "st_delay": st,
            "wait_for_tail_credit": wait_for_tail_credit,
            **({} if nic_latency_ns is None else {"nic_latency_ns": nic_latency_ns})}


def _stream_period(num, den, lat_cycles, flit_bytes, packet_flits, buffer_flits, delays,
                   wait_for_tail_credit, nic_latency_ns, clock_ghz, injection_gbps):
    """stream_period measured at the flit level, as its docstring says."""
    bpc = num / den * flit_bytes
    hops = 1 if injection_gbps is not None else 2
    nodes = [{"name": f"x{i}", "kind": "npu"} for i in range(hops + 1)]
    if injection_gbps is not None:
        nodes[0]["injection_gbps"] = injection_gbps
    return _measured_period(
        {"nodes": nodes,
         "links": [{"a": f"x{i}", "b": f"x{i + 1}", "bytes_per_cycle": bpc,
                    "latency_cycles": int(lat_cycles)} for i in range(hops)]},
        _router(clock_ghz, 1, buffer_flits, delays, wait_for_tail_credit, nic_latency_ns),
        flit_bytes, packet_flits,
        f"the flow level measures how a stream of packets crosses each kind of channel at the "
        f"flit level; a channel of {bpc:g} bytes per cycle and {lat_cycles} cycles of latency "
        f"with packets of workload.packet_flits = {packet_flits} and network.vc_buffer_flits "
        f"= {buffer_flits} {{}} (give the link a lower latency, or fewer flits a packet)")


@functools.lru_cache(maxsize=512)
def injection_period(inj_bpc, lane_bpc, lanes, flit_bytes, packet_flits, buffer_flits, vcs,
                     delays, wait_for_tail_credit, nic_latency_ns, clock_ghz):
    """Cycles per packet of a NIC channel of inj_bpc bytes per cycle sending a long message
    of full packets over a link of `lanes` channels of lane_bpc bytes per cycle each, at the
    flit level, with the given router (vcs VCs of buffer_flits; delays: routing, VC
    allocation, switch allocation, switch traversal): a message of K and one of 2K packets,
    their times' difference over K. The channel carries one packet at a time; where a packet
    is longer than the router's VC buffer, the buffer fills and the channel waits for
    credits, which come back as the router forwards the packet onto its lane, slower than
    the channel, while the packet before it still leaves the same input port from another VC
    (an input forwards a flit a cycle in all): so the channel sends a packet per more than P
    cycles however many lanes the link has. The link has a latency of one cycle: what its
    own credits' round trip costs (buffers that hold less than a round trip over a long
    link) is the link's, not the NIC's, and the flow level does not model it. Past a few
    buffers and round trips a long packet's flits stream at a steady rate, so the period is
    affine in the packet's flits: long packets are measured at two such lengths and
    extended (what it costs is bounded whatever the packets)."""
    rest = (buffer_flits, vcs, delays, wait_for_tail_credit, nic_latency_ns, clock_ghz)
    longer = _past_long(lambda P: injection_period(inj_bpc, lane_bpc, lanes, flit_bytes, P,
                                                   *rest),
                        packet_flits, buffer_flits, sum(int(d) for d in delays) + 4)
    if longer is not None:
        return longer
    C = clock_ghz
    return _measured_period(
        {"nodes": [{"name": "x0", "kind": "npu", "injection_gbps": inj_bpc * C},
                   {"name": "x1", "kind": "npu", "ejection_gbps": lanes * lane_bpc * C}],
         "links": [{"a": "x0", "b": "x1", "bytes_per_cycle": lane_bpc, "latency_cycles": 1,
                    "count": int(lanes)}]},
        _router(clock_ghz, vcs, buffer_flits, delays, wait_for_tail_credit, nic_latency_ns),
        flit_bytes, packet_flits,
        f"the flow level measures how a NIC channel of {inj_bpc:g} bytes per cycle feeds a "
        f"link of {lanes} channels of {lane_bpc:g} at the flit level; with "
        f"workload.packet_flits = {packet_flits} and network.vc_buffer_flits = "
        f"{buffer_flits} it {{}}")


def nic_injection_bytes(network, cfg):
    """Per node, the bytes per cycle its NIC's injection channels carry in all where packets
    longer than a VC buffer hold them below their rate (injection_period), else 0 (their
    rate). A NIC's channel feeds its router, which forwards each packet onto a lane of one of
    its links; the channel is held where each such link is two lanes or more, each slower
    than the channel, and the stream measured at the flit level is slower than the channel:
    to the fastest of its links' streams (measured once per kind of NIC channel and link:
    rates and lanes). A link of one lane slower than the channel holds it to that lane's
    rate, the bottleneck of what crosses it anyway: such links count in the fastest only
    where a link of several lanes holds the channel too. None where no NIC is held (nothing
    to change)."""
    net = cfg.network
    P, F = cfg.workload.packet_flits, net.flit_bytes
    n = len(network.inj_ch)
    if P <= net.vc_buffer_flits or n == 0:
        return None
    arr = network.arrays
    C = len(network.ch_kind)
    par = np.asarray(arr["ch_par_n"])
    base = np.asarray(arr["ch_par_base"])
    m = np.asarray(arr["nic_inj_n"])
    groups = np.flatnonzero((network.ch_kind == CH_NET) & (base == np.arange(C)))
    u = network.ch_src[groups].astype(np.int64)
    inj = network.inj_ch[u]
    has = inj >= 0
    groups, u, inj = groups[has], u[has], inj[has]
    chan = network.ch_num[inj] / network.ch_den[inj] * F        # a NIC channel's bytes
    lane = network.ch_num[groups] / network.ch_den[groups] * F
    rate = chan.copy()                          # per (node, link): its stream's bytes
    below = lane < chan * (1 - 1e-9)
    one = below & (par[groups] < 2)             # the link's one lane binds, not the NIC
    rate[one] = -np.inf
    slow = (par[groups] >= 2) & below
    if slow.any():
        keys = np.stack([network.ch_num[inj], network.ch_den[inj], network.ch_num[groups],
                         network.ch_den[groups], par[groups]], axis=1).astype(np.int64)[slow]
        kinds, kind_of = _unique_rows(keys)
        got = np.zeros(len(kinds))
        for i, (cn, cd, ln, ld, k) in enumerate(kinds.tolist()):
            period = injection_period(cn / cd * F, ln / ld * F, int(k), F, P,
                                      net.vc_buffer_flits, net.vcs,
                                      (net.routing_delay, net.vc_alloc_delay,
                                       net.sw_alloc_delay, net.st_delay),
                                      net.wait_for_tail_credit, net.nic_latency_ns,
                                      net.clock_ghz)
            got[i] = P * F / period
        rate[slow] = np.minimum(rate[slow], got[kind_of.reshape(-1)])
    held = np.full(n, -np.inf)
    np.maximum.at(held, u, rate)                # the fastest of a node's links
    nodes = np.flatnonzero(np.isfinite(held))
    np.maximum.at(held, u[one], lane[one])      # (no slower than its links of one lane)
    per = network.ch_num[network.inj_ch[nodes]] / network.ch_den[network.inj_ch[nodes]] * F
    below = held[nodes] < per * (1 - 1e-9)
    if not below.any():
        return None
    out = np.zeros(n)
    out[nodes[below]] = held[nodes[below]] * m[nodes[below]]
    return out


def _unique_rows(keys):
    """np.unique(keys, axis=0, return_inverse=True) of a (rows, columns) array of few
    distinct values per column, by one code per row (each column's rank among its own
    distinct values, in mixed radix): the same rows in the same order, without sorting
    rows of bytes (a torus of 65,536 NPUs has 393,216 channel groups)."""
    codes = np.zeros(len(keys), np.int64)
    radix = 1
    for col in keys.T:
        vals, rank = np.unique(col, return_inverse=True)
        radix *= max(len(vals), 1)
        if radix >= 1 << 62:
            kinds, kind_of = np.unique(keys, axis=0, return_inverse=True)
            return kinds, kind_of.reshape(-1)
        codes = codes * len(vals) + rank.reshape(-1)
    _, first, kind_of = np.unique(codes, return_index=True, return_inverse=True)
    return keys[first], kind_of.reshape(-1)


def vc_class_resources(network, cfg, first_id):
    """Resources of (channel group, VC class) where the class has one VC and a stream of
    packets through the group's channels is slower than they are: the table csim reads
    ([group's first channel * n_classes + class] -> resource id, -1 elsewhere) and the
    resources' bytes per cycle and channels, numbered from first_id. None where every class
    has two VCs or more."""
    arr = network.arrays
    V, K = int(arr["vcs"]), int(arr["n_classes"])
    bounds = np.arange(K + 1) * V // K                     # as csim's class_lo / class_hi
    single = np.flatnonzero(np.diff(bounds) == 1)
    if single.size == 0:
        return None, np.zeros(0), np.zeros(0, np.int32)
    net = cfg.network
    C = len(network.ch_kind)
    base = np.asarray(arr["ch_par_base"])
    par = np.asarray(arr["ch_par_n"])
    groups = np.flatnonzero((network.ch_kind == CH_NET) & (base == np.arange(C)))
    inj_bpc, _ = nic_bandwidths(network.topo, cfg)
    # each kind of channel (rate, latency, what feeds it) measured once
    up = network.ch_src[groups].astype(np.int64)          # fed by its node's NIC, or a switch
    fed = network.inj_ch[up] >= 0
    inj = np.where(fed, inj_bpc[up] * net.clock_ghz, 0.0)
    keys = np.stack([network.ch_num[groups].astype(np.float64),
                     network.ch_den[groups].astype(np.float64),
                     network.ch_lat[groups].astype(np.float64), fed.astype(np.float64), inj],
                    axis=1)
    kinds, kind_of = _unique_rows(keys)
    rates, slow = np.zeros(len(kinds)), np.zeros(len(kinds), bool)
    for i, c in enumerate(groups[np.unique(kind_of.reshape(-1), return_index=True)[1]]):
        num, den, lat = int(network.ch_num[c]), int(network.ch_den[c]), int(network.ch_lat[c])
        u = int(network.ch_src[c])
        feed = float(inj_bpc[u] * net.clock_ghz) if network.inj_ch[u] >= 0 else None
        period = stream_period(num, den, lat, net.flit_bytes, cfg.workload.packet_flits,
                               net.vc_buffer_flits, (net.routing_delay, net.vc_alloc_delay,
                                                     net.sw_alloc_delay, net.st_delay),
                               net.wait_for_tail_credit, net.nic_latency_ns, net.clock_ghz,
                               feed)
        rates[i] = cfg.workload.packet_flits / period * net.flit_bytes      # bytes per cycle
        slow[i] = rates[i] < num / den * net.flit_bytes * (1 - 1e-9)   # (else a stream
                                                                         # fills the channel)
    kind_of = kind_of.reshape(-1)
    c = groups[slow[kind_of]]                        # ascending: ids in (group, class) order
    table = np.full(C * K, -1, np.int32)
    cells = (c[:, None] * K + single[None, :]).reshape(-1)
    table[cells] = first_id + np.arange(cells.size, dtype=np.int32)
    caps = np.repeat(rates[kind_of[slow[kind_of]]] * par[c], single.size).astype(np.float64)
    lanes = np.repeat(par[c], single.size).astype(np.int32)
    if not caps.size:
        return None, np.zeros(0), np.zeros(0, np.int32)
    return table, caps, lanes


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
    message, and its (source, destination) pair; per pair its ends and cap resource; the
    resources of VC classes of one VC; the extra resources' capacities and channels."""
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
    vc_base = len(network.ch_kind) + cap_bytes.size
    vc_res, vc_bytes, vc_lanes = vc_class_resources(network, cfg, vc_base) if sends.size \
        else (None, np.zeros(0), np.zeros(0, np.int32))
    return FlowArrays(**lat, pair=pair, pair_src=psrc.astype(np.int32),
                      pair_dst=pdst.astype(np.int32), pair_cap=pcap,
                      cap_bytes=np.concatenate([cap_bytes, vc_bytes]),
                      cap_lanes=np.concatenate([cap_lanes, vc_lanes]).astype(np.int32),
                      vc_res=vc_res, vc_res_base=vc_base,
                      nic_inj_bytes=nic_injection_bytes(network, cfg) if sends.size else None)


# The configuration keys this module reads (pysim.schema).
declare(
    Key("network", "model", "str", "flit", "-",
        "Network fidelity of op graphs and collectives: 'flit' (routers, VCs, credits, cycle "
        "by cycle) or 'flow' (each message a flow on the same route, links and NICs shared "
        "max-min fairly, plus its zero-load latency; see docs/flow.md). Synthetic traffic is "
        "flit-level only; job streams (pysim jobs) run at the flow level unless it is set. "
        "At 'flow', the flit level's own keys (network.va_input_arbiter, sa_input_arbiter, "
        "nic_injection, simulation.watchdog_cycles, max_packets) are refused when typed.",
        None, lambda: ["flit", "flow"]),
)
# What only the flit level reads (its allocators, its NICs' injection channels, its watchdog
# and packet limit): typed at the flow level, they are refused
# (pysim.workload.base.check_model_reads). The rest of [network] is read by both: the flow
# level measures the router's timing and buffers on a stream of packets (stream_period).
FLIT_ONLY = ("network.va_input_arbiter", "network.sa_input_arbiter", "network.nic_injection",
             "simulation.watchdog_cycles", "simulation.max_packets")
declare_reads("network.model", "flit", ("network.model",) + FLIT_ONLY)
declare_reads("network.model", "flow", ("network.model",))
