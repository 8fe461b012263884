"""The mean zero-load latency of a uniform pattern by closed form (theory.mean_zero_load past
theory.PAIRS_EXACT pairs) against the walk of every pair, on small networks of every shape
the closed form covers: meshes, tori and rings with odd and even sides, wrap-around or not,
one way or both, a switch, links longer than a cycle, NICs slower than a flit per cycle (the
tail's term then depends on the destination), with and without the self pairs, with hot
destinations, and a mix of packet sizes. Where the closed form does not apply (links slower
than the NICs), the labelled sample of every source is the walk again."""
import numpy as np
import pytest

from conftest import make_cfg
from pysim import theory, traffic
from pysim.network import compile_network

SIZES, CDF = [1, 4, 9], [0.2, 0.7, 1.0]

SHAPES = [
    {"kind": "mesh", "dims": [4, 4]},
    {"kind": "mesh", "dims": [5, 3]},
    {"kind": "mesh", "dims": [3, 2, 2], "link_latency_ns": 3.0},
    {"kind": "torus", "dims": [4, 4]},
    {"kind": "torus", "dims": [5, 3], "link_latency_ns": 2.0},
    {"kind": "torus", "dims": [3, 4, 2]},
    {"kind": "ring", "size": 8},
    {"kind": "ring", "size": 7},
    {"kind": "ring", "size": 7, "bidirectional": False},
    {"kind": "ring", "size": 6, "bidirectional": False, "link_latency_ns": 4.0},
    {"kind": "switch", "size": 6},
    {"kind": "switch", "size": 7, "link_latency_ns": 5.0},
]
NETWORKS = [
    {},
    {"ejection_gbps": 10.0},                       # 0.3125 flits per cycle out of every NIC
    {"injection_delay": 3, "routing_delay": 2, "vc_alloc_delay": 0},
]
PATTERNS = [{"pattern": "uniform"}, {"pattern": "uniform_noself"},
            {"pattern": "hotspot", "hotspot_nodes": [1, 2], "hotspot_fraction": 0.3},
            {"pattern": "hotspot", "hotspot_nodes": [3, 0, 3], "hotspot_fraction": 0.5}]


def both(topo, network, tr):
    cfg = make_cfg(topology=topo, network=network, traffic=tr)
    net = compile_network(cfg)
    pattern = traffic.pattern(net.topo, cfg)
    walked = theory.mean_zero_load(net, cfg, pattern, SIZES, CDF)
    closed = theory.mean_zero_load(net, cfg, pattern, SIZES, CDF, exact_pairs=0)
    return walked, closed, net, cfg, pattern


@pytest.mark.parametrize("tr", PATTERNS)
@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("topo", SHAPES)
def test_closed_form_is_the_walk_of_every_pair(topo, network, tr):
    walked, closed, *_ = both(topo, network, tr)
    assert walked[1] == "every pair"
    assert closed[1] == "closed form"
    assert closed[0] == pytest.approx(walked[0], rel=1e-12)


@pytest.mark.parametrize("network", [{}, {"ejection_gbps": 10.0}, {"ejection_gbps": 25.0}])
@pytest.mark.parametrize("topo", [s for s in SHAPES if "link_latency_ns" not in s])
def test_closed_form_with_links_slower_than_a_flit_per_cycle(topo, network):
    """Links of 0.625 flits per cycle, NICs of one flit per cycle, or ejections slower than the
    links (0.3125), or faster than the links but slower than a flit per cycle (0.78125)."""
    walked, closed, *_ = both(dict(topo, link_gbps=20.0), network,
                              {"pattern": "uniform_noself"})
    assert closed[1] == "closed form"
    assert closed[0] == pytest.approx(walked[0], rel=1e-12)


@pytest.mark.parametrize("topo,network", [
    ({"kind": "mesh", "dims": [4, 3], "dim_link_gbps": [20.0, 12.5]}, {}),   # two link rates
    ({"kind": "torus", "dims": [4, 4], "link_gbps": 20.0}, {"injection_gbps": 10.0}),
])
def test_without_a_closed_form_every_sampled_source_is_the_walk(topo, network):
    """Links of two rates, or injections slower than the links: the tail's term depends on
    the path, so no closed form; the sample is labelled, and with as many sources as
    endpoints it is every pair."""
    walked, _, net, cfg, pattern = both(topo, network, {"pattern": "uniform"})
    n = len(net.topo.endpoints())
    part = theory.mean_zero_load(net, cfg, pattern, SIZES, CDF, exact_pairs=0, sample=n // 2)
    assert part[1].startswith(f"sampled: {n // 2} sources")
    full = theory.mean_zero_load(net, cfg, pattern, SIZES, CDF, exact_pairs=0, sample=n)
    assert full[0] == pytest.approx(walked[0], rel=1e-12)


def test_link_latencies_that_differ_are_not_averaged_away():
    """A graph whose links differ in latency has no closed form here: it is sampled."""
    cfg = make_cfg(topology={"kind": "graph",
                             "nodes": [{"name": f"n{i}", "kind": "npu"} for i in range(4)],
                             "links": [{"a": "n0", "b": "n1", "latency_cycles": 1},
                                       {"a": "n1", "b": "n2", "latency_cycles": 7},
                                       {"a": "n2", "b": "n3", "latency_cycles": 1}]})
    net = compile_network(cfg)
    pattern = traffic.pattern(net.topo, cfg)
    walked = theory.mean_zero_load(net, cfg, pattern, SIZES, CDF)
    got = theory.mean_zero_load(net, cfg, pattern, SIZES, CDF, exact_pairs=0, sample=4)
    assert got[1].startswith("sampled") and got[0] == pytest.approx(walked[0], rel=1e-12)


def test_a_hot_node_listed_twice_weighs_twice():
    """hotspot_nodes = [3, 0, 3] is drawn as 3 two times in three: its weights are those of a
    pattern whose hot part is 3 with 2/3 and 0 with 1/3, summed to one."""
    cfg = make_cfg(topology={"kind": "ring", "size": 5},
                   traffic={"pattern": "hotspot", "hotspot_nodes": [3, 0, 3],
                            "hotspot_fraction": 0.5})
    net = compile_network(cfg)
    pattern = traffic.pattern(net.topo, cfg)
    weights = sum(float(w.sum()) for _, _, w in theory._pairs(net, pattern))
    assert weights == pytest.approx(1.0, rel=1e-12)
    hot3 = sum(float(w[(s == 3)].sum()) for s, _, w in theory._pairs(net, pattern))
    # packets from node 3: a fifth of the uniform half, and its share of the hot half
    assert hot3 == pytest.approx(0.5 / 5 + 0.5 / 5, rel=1e-12)
    to3 = sum(float(w[(d == 3)].sum()) for _, d, w in theory._pairs(net, pattern))
    assert to3 == pytest.approx(0.5 / 5 + 0.5 * 2 / 3, rel=1e-12)
