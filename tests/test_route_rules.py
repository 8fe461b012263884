"""Routes by rule (csim/_routes.pxd, pysim/routing.py): dimension order from coordinates on
rings, meshes and tori, a cluster's up/down routes as rows shared by the nodes of a kind, and
a tree's (switches, two-level systems) as rows, held to reference tables built pair by pair
from the routings' definitions (refroutes.py) or by the compiled shortest-path search;
the VC classes the rules' theorems give held to the analysis of every route; and a run by
rule identical, packet for packet, to the same run by table at the flit and flow levels."""
import numpy as np
import pytest

import refroutes
from conftest import make_cfg
from pysim import deadlock, routing, topology
from pysim.sim import simulate
from pysim.workload.graph import OpGraph, run_graph

REGULAR = [
    dict(kind="ring", size=2), dict(kind="ring", size=5), dict(kind="ring", size=6),
    dict(kind="ring", size=4, bidirectional=False), dict(kind="ring", size=7,
                                                        bidirectional=False),
    dict(kind="mesh", dims=[3, 4]), dict(kind="mesh", dims=[2, 3, 2]),
    dict(kind="mesh", dims=[5, 1, 3]),
    dict(kind="torus", dims=[4, 4]), dict(kind="torus", dims=[3, 5]),
    dict(kind="torus", dims=[2, 3]), dict(kind="torus", dims=[2, 3, 4]),
    dict(kind="torus", dims=[4, 4, 4]), dict(kind="torus", dims=[6, 1, 2]),
]
CLUSTERS = refroutes.CLUSTERS


def _name(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("kw", REGULAR, ids=_name)
def test_dimension_order_by_rule_is_the_reference_table(kw):
    cfg = make_cfg(topology=kw)
    t = topology.build(cfg)
    r = routing.ROUTINGS[t.routing](t, cfg)
    assert r.rule is not None and r.tab is None
    ref = refroutes.dor_table(t, dateline=t.routing == "dor_dateline")
    assert (r.table == ref).all()
    rr = r.rule.routes()                       # and looked up a pair at a time
    s, d = np.divmod(np.arange(t.n_nodes ** 2), t.n_nodes)
    assert (rr.next(s, d) == ref.reshape(-1)).all()


@pytest.mark.parametrize("kw", CLUSTERS, ids=_name)
def test_cluster_routes_by_rule_are_the_reference_table(kw):
    t = topology.build(make_cfg(topology={"kind": "cluster", **kw}))
    assert t.rule is not None
    assert (t.table == refroutes.cluster_table(t)).all()
    # the rule's channel ranks rise along every route (up, then down): a topological order
    # of the channel-dependency graph
    deps = deadlock.channel_dependencies(t, t.table)
    assert (t.rule.order[deps[:, 0]] < t.rule.order[deps[:, 1]]).all()


def test_a_table_set_on_a_cluster_replaces_its_rule():
    """topo.table = ... on a topology routed by rule: its routes are the table given (a
    GPU's route to a GPU of its own node through its NIC and leaf, say)."""
    cfg = make_cfg(topology={"kind": "cluster", "node": "dgx-a100", "node_count": 2,
                             "fabric": "fat-tree"})
    t = topology.build(cfg)
    table = t.table.copy()
    assert table[0, 1] != table[0, 8]           # gpu0 -> gpu1 by NVSwitch, -> gpu8 by NIC
    table[0, 1] = table[0, 8]                   # (one leaf: it takes gpu1's down link)
    t.table = table
    r = routing.build(t, cfg)
    assert r.rule is None and (r.table == table).all()


def _two_level(n, **kw):
    """Nodes of 4 NPUs on a leaf switch, the leaves on one spine (bench/scale.py's two_level
    at a small size)."""
    nodes = [{"name": f"npu{i}"} for i in range(n)] + \
        [{"name": f"leaf{x}", "kind": "switch"} for x in range(n // 4)] + \
        [{"name": "spine", "kind": "switch"}]
    links = [{"a": f"npu{i}", "b": f"leaf{i // 4}", "latency_ns": 1.0 + i % 3}
             for i in range(n)] + \
        [{"a": f"leaf{x}", "b": "spine", "count": 1 + x % 2} for x in range(n // 4)]
    return dict(kind="graph", nodes=nodes, links=links, **kw)


TREES = [
    dict(kind="switch", size=7), dict(kind="switch", size=5, transit=["switch"]),
    _two_level(16), _two_level(12, route_weight="latency", transit=["switch"]),
    dict(kind="graph", links=[{"a": "a", "b": "s1", "count": 2}, {"a": "s1", "b": "s2"},
                              {"a": "s2", "b": "b"}, {"a": "s2", "b": "h"},
                              {"a": "h", "b": "m"}],
         nodes=[{"name": "a"}, {"name": "s1", "kind": "switch"}, {"name": "b"},
                {"name": "s2", "kind": "switch"}, {"name": "h", "kind": "host"},
                {"name": "m", "kind": "mem"}]),
]


def _tname(kw):
    return kw["kind"] + str(len(kw.get("nodes", ())) or kw.get("size")) + \
        "".join(f"-{k}" for k in kw if k in ("route_weight", "transit"))


@pytest.mark.parametrize("kw", TREES, ids=_tname)
def test_tree_routes_by_rule_are_the_shortest_path_search(kw):
    """On a tree every route is its only path: the rule's equals the compiled shortest-path
    search's table (ties to the lowest channel among parallel links), whatever the weights;
    its channel ranks rise along every route."""
    cfg = make_cfg(topology=kw)
    t = topology.build(cfg)
    r = routing.ROUTINGS[t.routing](t, cfg)
    assert r.rule is not None
    ref = routing.shortest_path_table(t, cfg.topology.route_weight, cfg.topology.transit)
    assert (r.table == ref).all()
    deps = deadlock.channel_dependencies(t, ref)
    assert (r.rule.order[deps[:, 0]] < r.rule.order[deps[:, 1]]).all()


def test_a_tree_whose_inner_node_may_not_pass_traffic_is_routed_by_table():
    kw = TREES[-1]
    cfg = make_cfg(topology={**kw, "transit": ["switch"]})     # (the host h is inside)
    t = topology.build(cfg)
    with pytest.raises(Exception, match="cannot be reached"):
        routing.ROUTINGS[t.routing](t, cfg)


SCHEMES = [dict(dateline=s, tie_break=b) for s in ("booksim", "crossing", "fewest")
           for b in ("parity", "random")]


@pytest.mark.parametrize("kw", REGULAR + [dict(kind="cluster", **c) for c in CLUSTERS] +
                         TREES, ids=lambda kw: _tname(kw) if kw in TREES else _name(kw))
def test_classes_by_theorem_are_those_the_analysis_finds(kw):
    """For every dateline scheme and tie rule: the VC classes, the scheme and whether one
    class suffices, from the rule's theorem, are what following every route finds; where one
    class suffices, the theorem's order rises along every route (no route changes class)."""
    variants = [{}] if kw["kind"] in ("mesh", "cluster", "switch", "graph") else \
        [v for v in SCHEMES if kw.get("bidirectional", True) or v["tie_break"] == "parity"]
    for v in variants:
        cfg = make_cfg(topology={**kw, **v}, network={"vcs": 4})
        t = topology.build(cfg)
        exact = routing.build(t, cfg, exact=True)
        rule = routing.build(t, cfg, exact=False)
        what = (kw, v)
        assert rule.n_classes == exact.n_classes, what
        assert rule.entry_class == exact.entry_class, what
        assert (rule.node_pos is None) == (exact.node_pos is None), what
        assert rule.scheme == exact.scheme + " (deadlock-free by the routing's rule)", what
        assert (rule.ch_group == exact.ch_group).all(), what
        if exact.n_classes == 1 and exact.node_pos is None:
            deps = deadlock.channel_dependencies(t, exact.table, exact.alt_table)
            assert (rule.ch_order[deps[:, 0]] < rule.ch_order[deps[:, 1]]).all(), what
        else:
            assert (rule.ch_order == exact.ch_order).all(), what


def test_too_few_vcs_are_refused_by_theorem_naming_a_cycle():
    cfg = make_cfg(topology={"kind": "torus", "dims": [5, 3]}, network={"vcs": 1})
    t = topology.build(cfg)
    for exact in (True, False):
        with pytest.raises(Exception) as e:
            routing.build(t, cfg, exact=exact)
        assert "network.vcs = 1" in str(e.value) and "cycle" in str(e.value)


def _by_table(monkeypatch):
    """Make routing.build hand compile_network a table (no rule)."""
    build = routing.build

    def table_build(topo, cfg, exact=None):
        r = build(topo, cfg, exact)
        r.tab = r.table
        r.rule = None
        return r
    monkeypatch.setattr(routing, "build", table_build)


def _both(monkeypatch, run):
    a = run()
    with monkeypatch.context() as m:
        _by_table(m)
        b = run()
    return a, b


@pytest.mark.parametrize("topo", [dict(kind="torus", dims=[4, 3]),
                                  dict(kind="mesh", dims=[3, 3]),
                                  dict(kind="ring", size=6, tie_break="random"),
                                  dict(kind="cluster", node="dgx-h100", node_count=5,
                                       fabric="fat-tree", radix=8),
                                  TREES[3]], ids=lambda kw: kw["kind"])
def test_a_run_by_rule_is_the_run_by_table(monkeypatch, topo):
    """Synthetic traffic at the flit level, and an op graph at the flit and flow levels: the
    same results, packet for packet, whether csim looks routes up by rule or in the table."""
    cfg = make_cfg(topology=topo, traffic={"pattern": "uniform", "injection_rate": 0.2},
                   simulation={"warmup_cycles": 200, "measure_cycles": 1000, "seed": 3})

    def synthetic():
        res = simulate(cfg)
        return (res.avg_packet_latency, res.accepted_rate, res.packets_delivered,
                res.avg_hops)
    a, b = _both(monkeypatch, synthetic)
    assert a == b

    t = topology.build(cfg)
    eps = t.endpoints()
    g = OpGraph()
    for i, s in enumerate(eps):
        g.send(t.node_names[s], t.node_names[eps[(i + 1 + i % 3) % len(eps)]], 5000 + 97 * i)
    for model in ("flit", "flow"):
        c = cfg.with_overrides({"network.model": model})
        a, b = _both(monkeypatch, lambda: run_graph(c, g))
        assert a.makespan_cycles == b.makespan_cycles
        assert [(o["start"], o["finish"]) for o in a.ops] == \
            [(o["start"], o["finish"]) for o in b.ops]
        assert (a.packets, a.flit_hops, a.links) == (b.packets, b.flit_hops, b.links)
