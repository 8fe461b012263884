"""Common checks run for every registered topology builder and every shipped system file: a
builder is tested the moment it is registered, a file the moment it is added.

For each: the routing passes the deadlock check; a random permutation is delivered in full;
flits and credits are conserved mid-run; zero-load latency matches the per-flit recurrence
below for every pair; same seed, same result."""
import math
import os
import tomllib

import numpy as np
import pytest

from conftest import TOPOLOGIES, check_state, make_cfg
from pysim import routing, topology
from pysim.config import load
from pysim.network import CH_NET, compile_network
from pysim.sim import prepare, run_packets, simulate

SMALL = {   # a small instance of every registered builder (keys it reads)
    "mesh": {"dims": [3, 4], "dim_link_gbps": [32.0, 20.0]},
    "torus": {"dims": [5, 3]},
    "ring": {"size": 6, "bidirectional": True},
    "switch": {"size": 5, "link_gbps": 64.0, "link_latency_ns": 3.0},
    "fully_connected": {"size": 5, "link_gbps": 12.5},
    "graph": {"nodes": [{"name": "a", "kind": "npu"}, {"name": "m", "kind": "mem"},
                        {"name": "s", "kind": "switch"}, {"name": "h", "kind": "host",
                                                           "injection_gbps": 16.0}],
              "links": [{"a": "a", "b": "s", "gbps": 40.0}, {"a": "m", "b": "s", "count": 2},
                        {"a": "s", "b": "h", "gbps": 16.0, "latency_ns": 5.0},
                        {"a": "a", "b": "m", "gbps": 8.0}]},
    "cluster": {"node": "dgx-a100", "node_count": 3, "radix": 8, "nvlink_gbps": 64.0,
                "nic_gbps": 16.0},
}


def test_every_builder_has_a_small_case():
    assert set(SMALL) == set(topology.BUILDERS)


def builder_cfg(kind):
    return make_cfg(topology={"kind": kind, **SMALL[kind]},
                    network={"vcs": 2, "vc_buffer_flits": 8},
                    simulation={"warmup_cycles": 200, "measure_cycles": 1500, "seed": 3},
                    traffic={"injection_rate": 0.05})


EVERY_KIND = ["npu", "mem", "host", "switch"]


def file_cfg(name):
    return load(os.path.join(TOPOLOGIES, name),
                {"simulation.warmup_cycles": 200, "simulation.measure_cycles": 1500,
                 "traffic.injection_rate": 0.05})


def _large(name):
    """A shipped cluster of thousands of GPUs runs at the flow level (test_cluster.py checks
    its build); the flit-level checks here take its single nodes."""
    with open(os.path.join(TOPOLOGIES, name), "rb") as f:
        t = tomllib.load(f)["topology"]
    return t.get("kind") == "cluster" and t.get("node_count", 1) > 1


CASES = [pytest.param(lambda k=k: builder_cfg(k), id=f"builder-{k}") for k in sorted(SMALL)] + \
        [pytest.param(lambda f=f: file_cfg(f), id=f"file-{f}")
         for f in sorted(os.listdir(TOPOLOGIES)) if f.endswith(".toml") and not _large(f)]


def zero_load_recurrence(net, cfg, src, dst, length):
    """Tail delivery time of one packet alone in the network, from the model's definition:
    flit i leaves a channel at the first cycle at which (a) it is there: the head R + VA
    cycles after reaching a router, body flits on arrival; (b) the flit before it left at
    least a cycle earlier; (c) the channel has a flit of serialisation credit, credit
    accruing num per cycle and a flit costing den, starting full. It then reaches the next
    router SA + ST + latency later (the NIC's injection channel: injection_delay + latency)."""
    n = cfg.network
    rt = net.arrays.table().reshape(net.topo.n_nodes, -1)
    chans = [int(net.inj_ch[src])]
    node = src
    while True:
        c = int(rt[node, dst])
        chans.append(c)
        if c == int(net.ej_ch[dst]):
            break
        node = int(net.ch_dst[c])
    avail = list(range(length))     # flits ready at the NIC at 0, 1, ... (it makes one a cycle)
    head_extra = 0                  # the NIC does no route or VC allocation
    for j, c in enumerate(chans):
        num, den = int(net.ch_num[c]), int(net.ch_den[c])
        out = []
        acc, last = den, None
        for i, a in enumerate(avail):
            t = a + (head_extra if i == 0 else 0)
            if last is not None:
                t = max(t, last + 1)
                # credit needed: acc + (t - last) * num >= den
                t = max(t, last + math.ceil((den - acc) / num))
                raw = acc + (t - last) * num
                acc = den if raw >= den + num else raw
            acc -= den
            last = t
            out.append(t)
        delay = int(net.ch_lat[c]) + (n.injection_delay if j == 0 else
                                      n.sw_alloc_delay + n.st_delay)
        avail = [t + delay for t in out]
        head_extra = n.routing_delay + n.vc_alloc_delay
    return avail[-1]


@pytest.mark.parametrize("make", CASES)
def test_common_checks(make):
    cfg = make()
    net = compile_network(cfg)
    topo = net.topo
    # deadlock check: the routes' dependency graph over (channel, class) is acyclic
    routing.analyse(topo, net.routing)
    assert net.routing.n_classes <= cfg.network.vcs
    eps = np.array(topo.endpoints())
    rng = np.random.default_rng(5)

    # a random permutation, 6 rounds, all at once: every flit delivered, in order
    P = 6 * eps.size
    src = np.tile(eps, 6)
    dst = np.concatenate([rng.permutation(eps) for _ in range(6)])
    length = rng.integers(1, 9, P)
    _, eng, deliver, _, _ = run_packets(cfg, np.zeros(P, int), src, dst, length, network=net)
    assert (deliver >= 0).all()
    c = eng.counters()
    assert c["flits_ejected"] == length.sum() and c["bad_eject"] == 0

    # conservation and credits mid-run under synthetic load
    net2, eng2 = prepare(cfg.with_overrides({"traffic.injection_rate": 0.3}))
    for until in (50, 333, 1000):
        eng2.run(until)
        check_state(net2, eng2)

    # zero-load latency of every pair (of 400 random pairs on big systems), one at a time
    pairs = [(s, d) for s in eps for d in eps]
    if len(pairs) > 400:
        pairs = [pairs[i] for i in rng.choice(len(pairs), 400, replace=False)]
    L = 5
    times = np.arange(len(pairs)) * 2000
    _, _, deliver, _, _ = run_packets(cfg, times, [p[0] for p in pairs], [p[1] for p in pairs],
                                      np.full(len(pairs), L), network=net)
    for (s, d), got in zip(pairs, deliver - times):
        assert got == zero_load_recurrence(net, cfg, s, d, L), (topo.node_names[s],
                                                                topo.node_names[d])

    # determinism
    a = simulate(cfg).to_dict()
    b = simulate(cfg).to_dict()
    for k in ("latency_histogram", "links", "accepted_rate", "avg_packet_latency"):
        assert a[k] == b[k]


def test_routes_are_shortest_paths_on_graphs():
    """Table routing takes a minimal number of hops (breadth-first distances computed here;
    every node forwarding: the DGX-1's GPUs too)."""
    for name in ("dgx1-v100.toml", "mcdla-8.toml", "hcdla-8.toml"):
        cfg = file_cfg(name).with_overrides({"topology.transit": EVERY_KIND})
        net = compile_network(cfg)
        topo = net.topo
        adj = {i: set() for i in range(topo.n_nodes)}
        for a, b in zip(topo.ch_src, topo.ch_dst):
            adj[a].add(b)
        for s in topo.endpoints():
            dist = {s: 0}
            frontier = [s]
            while frontier:
                nxt = []
                for u in frontier:
                    for v in adj[u]:
                        if v not in dist:
                            dist[v] = dist[u] + 1
                            nxt.append(v)
                frontier = nxt
            for d in topo.endpoints():
                assert len(routing.path(topo, net.routing, s, d)) == dist[d]


def test_parallel_links_share_packets():
    """A double link (count = 2) carries about half of the packets on each channel."""
    cfg = file_cfg("dgx1-v100.toml")
    net = compile_network(cfg)
    names = net.topo.node_names
    g0, g3 = names.index("gpu0"), names.index("gpu3")
    P = 200
    _, eng, deliver, _, _ = run_packets(cfg, np.arange(P), np.full(P, g0), np.full(P, g3),
                                        np.full(P, 4), network=net)
    flits = eng.channel_flits()
    lanes = [c for c in range(len(net.ch_kind))
             if net.ch_kind[c] == CH_NET and (net.ch_src[c], net.ch_dst[c]) == (g0, g3)]
    assert len(lanes) == 2
    assert sorted(flits[lanes].tolist()) == [400, 400]
    assert eng.channel_flits(lanes[::-1]).tolist() == flits[lanes[::-1]].tolist()


def _route(net, a, b):
    t, tab = net.topo, net.routing.table
    u, d = t.node_names.index(a), t.node_names.index(b)
    path = [a]
    while u != d:
        u = t.ch_dst[tab[u, d]]
        path.append(t.node_names[u])
    return path


def _hops_within(t, kinds):
    """Shortest hop counts between every pair of nodes when only nodes of `kinds` forward
    (breadth-first search from each node, by definition)."""
    adj = {}
    for a, b in zip(t.ch_src, t.ch_dst):
        adj.setdefault(a, set()).add(b)
    out = {}
    for s in range(t.n_nodes):
        dist, frontier = {s: 0}, [s]
        while frontier:
            nxt = []
            for u in frontier:
                if u != s and t.node_kinds[u] not in kinds:
                    continue
                for v in adj.get(u, ()):
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        nxt.append(v)
            frontier = nxt
        out[s] = dist
    return out


def test_transit_keeps_routes_off_other_npus():
    """topology.transit = [switch, host] on the DGX-1 (as shipped): a route between GPUs
    without an NVLink goes through PCIe switches and hosts only, and is a shortest such route;
    with every kind forwarding, the same pair routes through another GPU's NVLinks."""
    path = os.path.join(TOPOLOGIES, "dgx1-v100.toml")
    free = compile_network(load(path, {"topology.transit": EVERY_KIND}))
    assert _route(free, "gpu0", "gpu6")[1].startswith("gpu")        # through gpu2 or gpu4
    assert load(path).topology.transit == ["switch", "host"]
    net = compile_network(load(path))
    t = net.topo
    best = _hops_within(t, ("switch", "host"))
    npus = [n for n, k in zip(t.node_names, t.node_kinds) if k == "npu"]
    for a in npus:
        for b in npus:
            if a == b:
                continue
            r = _route(net, a, b)
            assert all(t.node_kinds[t.node_names.index(x)] != "npu" for x in r[1:-1]), r
            assert len(r) - 1 == best[t.node_names.index(a)][t.node_names.index(b)]
    assert _route(net, "gpu0", "gpu6") == ["gpu0", "pcie0", "cpu0", "cpu1", "pcie3", "gpu6"]
    assert _route(net, "gpu0", "gpu3") == ["gpu0", "gpu3"]          # the NVLink itself


def test_transit_refusals():
    path = os.path.join(TOPOLOGIES, "dgx1-v100.toml")
    with pytest.raises(Exception, match="topology.transit"):
        load(path, {"topology.transit": ["gpu"]})
    with pytest.raises(Exception, match="cannot be reached.*topology.transit"):
        compile_network(load(path, {"topology.transit": ["npu"]}))   # PCIe switches forward nothing
    with pytest.raises(Exception, match="topology.transit is not used"):
        topology.build(make_cfg(topology={"kind": "mesh", "dims": [2, 2],
                                          "transit": ["switch"]}))


def test_ctrl_c_stops_the_bisection_search_at_once(monkeypatch):
    """The spectral cut's eigen-decomposition is a LAPACK call that does not look for
    signals (seconds at 2,048 nodes, tens of them on a loaded machine): Ctrl-C must stop
    `pysim topo` at once, not when it returns. A stand-in that takes 2 s and lets no
    interrupt through, as LAPACK does; an interrupt 0.1 s in stops the search within 0.5 s."""
    import signal
    import time
    from pysim import network
    real = network.np.linalg.eigh

    def stubborn(L):
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except KeyboardInterrupt:
                pass
        return real(L)

    monkeypatch.setattr(network.np.linalg, "eigh", stubborn)
    cfg = make_cfg(topology={"kind": "ring", "size": 8})
    topo = topology.build(cfg)

    def interrupt(*_):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGALRM, interrupt)
    t0 = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            network.bisection(topo, cfg)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < 0.5
