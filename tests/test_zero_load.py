"""Zero-load latency, exactly, for every source-destination pair of small networks.

One packet of L flits alone in the network, created at cycle t0 at its source's NIC, has its
tail ejected at t0 + T0 with (README, "Router pipeline"):

    T0 = I                                       the NIC's injection delay (BookSim's
                                                 timing: 1; the flit chosen at t enters the
                                                 channel at t + I)
       + W_nic                                   NIC -> router channel
       + (H + 1) * (R + VA + SA + ST)            every router on the path, H hops
       + sum of the H link latencies
       + W_nic                                   router -> NIC channel
       + max(L - 1, ceil((L - 1) / r) - K * (R + VA))
                                                 the tail's distance behind the head: flits
                                                 leave the slowest channel (r flits/cycle)
                                                 ceil(i / r) cycles after the head; at each of
                                                 the K routers after the last such channel the
                                                 head spends R + VA cycles body flits skip, so
                                                 the tail closes in, to one flit per cycle

H is computed here from coordinates (Manhattan distance on a mesh, the shorter way round on
rings and tori), independently of the routing tables.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from conftest import make_cfg
from pysim import topology
from pysim.network import compile_network
from pysim.sim import run_packets


def hops(kind, dims, bidirectional, a, b):
    ca = np.unravel_index(a, dims, order="F")
    cb = np.unravel_index(b, dims, order="F")
    h = 0
    for x, y, k in zip(ca, cb, dims):
        d = abs(int(x) - int(y))
        if kind == "mesh":
            h += d
        elif bidirectional:
            h += min(d, k - d)
        else:
            h += (int(y) - int(x)) % k
    return h


def all_pairs_alone(cfg, net, length, spacing=400):
    n = net.topo.n_nodes
    pairs = [(s, d) for s in range(n) for d in range(n)]
    times = np.arange(len(pairs)) * spacing
    src = np.array([p[0] for p in pairs])
    dst = np.array([p[1] for p in pairs])
    _, _, deliver, _, hop = run_packets(cfg, times, src, dst, np.full(len(pairs), length),
                                        network=net)
    return pairs, deliver - times, hop


CASES = [
    # (topology, network overrides, packet length)
    ({"kind": "mesh", "dims": [4, 4]}, {}, 1),
    ({"kind": "mesh", "dims": [4, 4]}, {}, 5),
    ({"kind": "mesh", "dims": [2]}, {}, 1),                 # BookSim's tiny case
    ({"kind": "mesh", "dims": [4, 4]}, {"injection_delay": 0}, 3),
    ({"kind": "mesh", "dims": [3, 3]}, {"injection_delay": 3}, 2),
    ({"kind": "mesh", "dims": [3, 2, 2]}, {"routing_delay": 2, "vc_alloc_delay": 0,
                                           "st_delay": 0}, 3),
    ({"kind": "mesh", "dims": [4, 3], "link_latency_ns": 3.0}, {"sw_alloc_delay": 2}, 4),
    ({"kind": "torus", "dims": [4, 4]}, {}, 4),
    ({"kind": "torus", "dims": [5, 3], "link_latency_ns": 2.0}, {"vcs": 4}, 2),
    ({"kind": "ring", "size": 8}, {}, 4),
    ({"kind": "ring", "size": 7, "bidirectional": False}, {}, 3),
    # links slower than one flit per cycle (32-byte flits, 1 GHz)
    ({"kind": "mesh", "dims": [4, 4], "link_gbps": 20.0}, {}, 6),        # 0.625 flits/cycle
    ({"kind": "torus", "dims": [4, 3], "link_gbps": 12.5}, {}, 5),       # 0.390625
    ({"kind": "ring", "size": 6, "link_gbps": 8.0, "link_latency_ns": 4.0}, {}, 4),
]


@pytest.mark.parametrize("topo,network,length", CASES)
def test_zero_load_latency_every_pair(topo, network, length):
    cfg = make_cfg(topology=topo, network=network)
    net = compile_network(cfg)
    n = cfg.network
    per_router = n.routing_delay + n.vc_alloc_delay + n.sw_alloc_delay + n.st_delay
    w = 1 if "link_latency_ns" not in topo else math.ceil(topo["link_latency_ns"])
    r = Fraction(1) if "link_gbps" not in topo else \
        Fraction(topo["link_gbps"]) / n.flit_bytes          # flits per cycle
    kind = topo["kind"]
    dims = topo.get("dims", [topo.get("size")])
    bi = topo.get("bidirectional", True)
    pairs, latency, hop = all_pairs_alone(cfg, net, length)
    for (s, d), got, h_sim in zip(pairs, latency, hop):
        H = hops(kind, dims, bi, s, d)
        # the slowest channels are the links; the last one enters the destination router
        K = 1
        tail = max(length - 1, math.ceil((length - 1) / r) - K * (n.routing_delay +
                                                                     n.vc_alloc_delay)) \
            if H > 0 else length - 1
        expected = n.injection_delay + 1 + (H + 1) * per_router + H * w + 1 + tail
        assert h_sim == H, (s, d)
        assert got == expected, f"pair {s}->{d}: {got} cycles, closed form {expected}"



@pytest.mark.parametrize("topo", [{"kind": "mesh", "dims": [2]}, {"kind": "mesh", "dims": [8, 8]},
                                  {"kind": "ring", "size": 16}, {"kind": "torus", "dims": [4, 4]}])
def test_default_timing_is_booksims(topo):
    """BookSim2 (its IQ router with 1-cycle routing, VC and switch allocation and crossbar,
    1-cycle channels, credit_delay 0) takes 5 R + 2 cycles for a 1-flit packet through R
    routers, 7 to its own node. Its log of a packet from node 0 to node 1 of a 2x1 mesh: created
    and written to the injection channel at t; channel at t+1; router 0 buffers and routes
    it at t+2, VC allocation t+3, switch allocation t+4, crossbar t+5, channel t+6; router 1
    at t+7 .. t+10, ejection channel t+11, the node reads it at t+12. The default pipeline
    gives the same for every pair."""
    cfg = make_cfg(topology=topo)
    net = compile_network(cfg)
    n = net.topo.n_nodes
    eps = np.arange(n)
    pick = eps if n <= 16 else np.random.default_rng(3).choice(eps, 12, replace=False)
    pairs = [(a, b) for a in pick for b in pick]
    times = np.arange(len(pairs)) * 100
    s = np.array([p[0] for p in pairs])
    d = np.array([p[1] for p in pairs])
    _, _, deliver, _, hop = run_packets(cfg, times, s, d, np.ones(len(pairs), int), network=net)
    np.testing.assert_array_equal(deliver - times, 5 * (hop + 1) + 2)

def test_zero_load_one_slow_link_on_the_path():
    """One channel at 0.3 flits/cycle in a 4x4 mesh: pairs whose DOR path crosses it pay its
    serialisation, the others do not."""
    cfg = make_cfg(topology={"kind": "mesh", "dims": [4, 4]}, network={"flit_bytes": 16})
    topo = topology.build(cfg)
    slow = next(c for c in range(topo.n_channels)
                if (topo.ch_src[c], topo.ch_dst[c]) == (5, 6))     # (1,1) -> (2,1), x+
    topo.ch_bytes_per_cycle[slow] = 4.8                              # 0.3 flits/cycle
    net = compile_network(cfg, topo=topo)
    length = 5
    pairs, latency, _ = all_pairs_alone(cfg, net, length)
    crossing = 0
    for (s, d), got in zip(pairs, latency):
        (sx, sy), (dx, dy) = divmod(s, 4)[::-1], divmod(d, 4)[::-1]
        path = []
        x, y = sx, sy
        while x != dx:                          # x first, then y
            nx = x + (1 if dx > x else -1)
            path.append((x + 4 * y, nx + 4 * y))
            x = nx
        while y != dy:
            ny = y + (1 if dy > y else -1)
            path.append((x + 4 * y, x + 4 * ny))
            y = ny
        H = len(path)
        slow_on_path = (5, 6) in path
        crossing += slow_on_path
        if slow_on_path:        # routers after the slow link: from (2,1) to the destination
            K = H - path.index((5, 6))
            tail = max(length - 1, math.ceil((length - 1) / Fraction(3, 10)) - 2 * K)
        else:
            tail = length - 1
        assert got == 1 + 1 + (H + 1) * 4 + H + 1 + tail, (s, d)
    assert crossing > 0


@pytest.mark.parametrize("topo,length", [({"kind": "mesh", "dims": [4, 3], "link_gbps": 20.0}, 6),
                                         ({"kind": "torus", "dims": [4, 4]}, 3)])
def test_reported_zero_load_reference_matches_simulation(topo, length):
    """theory.zero_load_latency (the reference line in summaries and plots) per pair."""
    from pysim import theory
    cfg = make_cfg(topology=topo)
    net = compile_network(cfg)
    pairs, latency, _ = all_pairs_alone(cfg, net, length)
    s = np.array([p[0] for p in pairs])
    d = np.array([p[1] for p in pairs])
    np.testing.assert_array_equal(theory.zero_load_latency(net, cfg, s, d, np.full(s.size, length)),
                                  latency)


@pytest.mark.parametrize("name", ["hcdla-8.toml", "dgx1-v100.toml", "ring-of-rings4x4.toml"])
def test_path_walk_equals_a_hop_by_hop_walk(name):
    """theory.path_arrays (compiled, keeping the paths' common tails per destination) against
    a walk of the routing table one channel at a time, on systems with links of several rates
    and latencies, for every pair in a shuffled order (so destinations alternate and the kept
    tails must be dropped) and grouped by destination."""
    from conftest import TOPOLOGIES
    from pysim import load, theory
    net = compile_network(load(f"{TOPOLOGIES}/{name}"))
    n = net.arrays["n_nodes"]
    rt = net.arrays.table().reshape(n, n)
    rate = [Fraction(int(a), int(b)) for a, b in zip(net.ch_num, net.ch_den)]

    def walk(u, d):
        worst, at, h, lat = int(net.inj_ch[u]), 0, 0, 0
        while u != d:
            c = int(rt[u, d])
            h += 1
            lat += int(net.ch_lat[c])
            if rate[c] <= rate[worst]:
                worst, at = c, h
            u = int(net.ch_dst[c])
        ej = int(net.ej_ch[d])
        if rate[ej] <= rate[worst]:
            return h, lat, rate[ej], 0
        return h, lat, rate[worst], h + 1 - at

    eps = net.topo.endpoints()
    pairs = [(a, b) for b in eps for a in eps]
    want = [walk(a, b) for a, b in pairs]
    order = np.random.default_rng(5).permutation(len(pairs))
    for idx in (np.arange(len(pairs)), order):
        s = np.array([pairs[i][0] for i in idx])
        d = np.array([pairs[i][1] for i in idx])
        h, lat, num, den, after = theory.path_arrays(net, s, d)
        got = [(int(h[k]), int(lat[k]), Fraction(int(num[k]), int(den[k])), int(after[k]))
               for k in range(len(idx))]
        assert got == [want[i] for i in idx]


def test_fast_links_and_nics_become_parallel_channels():
    """A 64 GB/s link with 32-byte flits at 1 GHz is two channels of one flit per cycle; a
    64 GB/s NIC has two injection and two ejection channels. 400 packets of 4 flits then cross
    in about half the time they take at 32 GB/s, and packets keep to one channel each."""
    def finish(gbps):
        # enough VCs that one stream is not limited by VC turnaround
        cfg = make_cfg(topology={"kind": "mesh", "dims": [2], "link_gbps": gbps},
                       network={"injection_gbps": gbps, "ejection_gbps": gbps, "vcs": 4})
        net = compile_network(cfg)
        P = 400
        _, eng, deliver, _, _ = run_packets(cfg, np.zeros(P, int), np.zeros(P, int),
                                            np.ones(P, int), np.full(P, 4), network=net)
        lanes = (net.ch_kind == 0).sum() // 2
        return int(deliver.max()), lanes
    t1, lanes1 = finish(32.0)
    t2, lanes2 = finish(64.0)
    assert (lanes1, lanes2) == (1, 2)
    assert 1600 <= t1 <= 1620            # 1600 flits at one flit per cycle, plus the pipeline
    assert 800 <= t2 <= 820
