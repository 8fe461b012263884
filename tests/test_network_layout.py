"""The engine's channels are laid out per link and NIC and expanded to their lanes
(pysim.network.compile_network): every array the engine and the reports take equals the
reference that lays out every lane as a row of its own and sorts them at once
(tests/refnetwork.py), on regular topologies, clusters, the shipped systems and random graphs
with parallel links, slow links, several NIC lanes and per-node NICs."""
import os

import numpy as np
import pytest

from conftest import TOPOLOGIES, make_cfg
from pysim import load
from pysim.flow import _unique_rows
from pysim.network import compile_network
from pysim.topology import _gbps_to_bpc, build, link_params
from refnetwork import compile_network_by_lane
from refroutes import CLUSTERS

FIELDS = ("topo_channel", "ch_kind", "ch_src", "ch_dst", "ch_num", "ch_den", "ch_lat",
          "inj_ch", "ej_ch")


def same(cfg):
    topo = build(cfg)
    got = compile_network(cfg, topo)
    want = compile_network_by_lane(cfg, build(cfg))
    for f in FIELDS:
        a, b = getattr(got, f), getattr(want, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f
    assert got.longest_step == want.longest_step
    ga, wa = got.arrays.as_dict(), want.arrays.as_dict()
    assert ga.keys() == wa.keys()
    for k, v in wa.items():
        if isinstance(v, np.ndarray):
            assert ga[k].dtype == v.dtype and np.array_equal(ga[k], v), k
        elif k == "route":
            assert (ga[k] is None) == (v is None), k
        else:
            assert ga[k] == v, k
    return got


REGULAR = [
    {"kind": "mesh", "dims": [4, 3], "link_gbps": 100.0},
    {"kind": "torus", "dims": [4, 4], "link_gbps": 20.0, "dateline": "booksim"},
    {"kind": "torus", "dims": [4, 6, 2], "link_gbps": 70.0, "tie_break": "random"},
    {"kind": "ring", "size": 6, "link_gbps": 250.0, "tie_break": "random"},
    {"kind": "torus", "dims": [3, 5], "link_gbps": 3.0},
]


@pytest.mark.parametrize("topology", REGULAR)
@pytest.mark.parametrize("nic", [None, 48.0, 200.0])
def test_regular(topology, nic):
    net = {} if nic is None else {"injection_gbps": nic, "ejection_gbps": nic / 2}
    got = same(make_cfg(topology=topology, network=net))
    assert (got.arrays.as_dict()["ch_par_n"] > 1).any() or topology["link_gbps"] <= 32


@pytest.mark.parametrize("shape", CLUSTERS)
def test_clusters(shape):
    same(make_cfg(topology={"kind": "cluster", **shape}))


@pytest.mark.parametrize("name", ["dgx1-v100.toml", "hcdla-8.toml", "summit-node.toml",
                                  "ring-of-rings4x4.toml", "selene.toml"])
def test_shipped_systems(name):
    same(load(os.path.join(TOPOLOGIES, name)))


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs(seed):
    """Parallel links (one entry with a count, and several entries naming one pair: alike,
    as routes need them), slow links and fast, NPUs, memory nodes and hosts with NICs of
    their own bandwidth each way on some nodes and of their kind's on others: groups that
    span several links."""
    g = np.random.default_rng(seed)
    n = int(g.integers(3, 9))
    kinds = g.choice(["npu", "npu", "mem", "host"], n - 1)
    kinds[0] = "npu"
    nodes = [{"name": f"v{i}", "kind": str(kinds[i]) if i < n - 1 else "switch"}
             for i in range(n)]
    for x in nodes[:-1]:
        for way in ("injection_gbps", "ejection_gbps"):
            if g.random() < 0.4:
                x[way] = float(g.choice([10.0, 64.0, 150.0]))
    pair = {}

    def link(a, b, count=1):
        gbps, lat = pair.setdefault(frozenset((a, b)), (
            float(g.choice([8.0, 32.0, 100.0, 300.0])),
            float(g.choice([5.0, 40.0])) if g.random() < 0.3 else None))
        e = {"a": f"v{a}", "b": f"v{b}", "gbps": gbps, "count": count}
        if lat is not None:
            e["latency_ns"] = lat
        return e
    links = [link(i, int(g.integers(i))) for i in range(1, n)]
    for _ in range(int(g.integers(0, 2 * n))):
        a, b = g.choice(n, 2, replace=False)
        links.append(link(int(a), int(b), int(g.integers(1, 4))))
    nic = {k: v for k, v in (("mem", {"injection_gbps": 40.0}),
                             ("host", {"ejection_gbps": 300.0})) if k in kinds}
    cfg = make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links, "nic": nic})
    same(cfg)


def test_unique_rows_equals_numpys_unique_of_rows():
    """The flow level's channel kinds: the distinct rows and each row's, as np.unique with
    axis=0 gives them (rows of a few distinct values, and none)."""
    g = np.random.default_rng(3)
    for _ in range(300):
        n, k = int(g.integers(0, 80)), int(g.integers(1, 6))
        keys = g.choice([0.0, 1.5, 3.0, -2.0, 1e9, 7.25], (n, k)).astype(np.float64)
        want, want_of = np.unique(keys, axis=0, return_inverse=True)
        got, got_of = _unique_rows(keys)
        assert np.array_equal(got, want) and np.array_equal(got_of, want_of.reshape(-1))


def regular_by_node(topo, cfg, per_dim=None):
    """A regular topology's channels, node by node in plain Python: per node, per dimension
    of more than one node, + then - (+ alone one way round), a wrap-around link only where
    the dimension wraps."""
    bpc, lat = link_params(cfg)
    strides = np.cumprod((1,) + tuple(topo.dims[:-1]))
    out = []
    for i in range(topo.n_nodes):
        for d, k in enumerate(topo.dims):
            if k == 1:
                continue
            x = int(topo.coords[i, d])
            for s in ((+1, -1) if topo.bidirectional else (+1,)):
                y = x + s
                w = y < 0 or y >= k
                if w and not topo.wrap[d]:
                    continue
                j = i + (y % k - x) * int(strides[d])
                b = bpc if per_dim is None else _gbps_to_bpc(per_dim[d], cfg)
                out.append((i, j, float(b), int(lat), d, s, w))
    return out


@pytest.mark.parametrize("topology", [
    {"kind": "mesh", "dims": [4, 3]}, {"kind": "mesh", "dims": [5, 1, 2]},
    {"kind": "torus", "dims": [4, 4], "link_gbps": 20.0, "link_latency_ns": 7.0},
    {"kind": "torus", "dims": [3, 1, 5], "dim_link_gbps": [10.0, 20.0, 40.0]},
    {"kind": "torus", "dims": [2, 6, 3]}, {"kind": "ring", "size": 7},
    {"kind": "ring", "size": 5, "bidirectional": False}, {"kind": "ring", "size": 2},
])
def test_regular_channels_equal_node_by_node(topology):
    cfg = make_cfg(topology=topology)
    topo = build(cfg)
    got = list(zip(topo.ch_src, topo.ch_dst, topo.ch_bytes_per_cycle, topo.ch_latency_cycles,
                   topo.ch_dim, topo.ch_dir, topo.ch_wrap))
    want = regular_by_node(topo, cfg, topology.get("dim_link_gbps"))
    assert got == want and len(want) > 0
    for col in (topo.ch_src, topo.ch_dst, topo.ch_latency_cycles, topo.ch_dim, topo.ch_dir):
        assert all(type(v) is int for v in col)
    assert all(type(v) is bool for v in topo.ch_wrap)
    if len(topo.dims) > 1:                     # (a node's name: its coordinates)
        assert topo.node_names == ["n" + "_".join(str(int(x)) for x in topo.coords[i])
                                   for i in range(topo.n_nodes)]
