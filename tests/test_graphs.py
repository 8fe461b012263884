"""Arbitrary graphs: random connected graphs never deadlock with the VCs the check asks for,
fewer VCs are refused rather than run, csim matches the reference model on them, and bad
graphs are answered with clear errors."""
import json
import os
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refmodel
from conftest import TOPOLOGIES, make_cfg
from pysim import __version__
from pysim.cli import main
from pysim.config import from_dict, load
from pysim.errors import ConfigError, PysimWarning
from pysim.network import compile_network, describe
from pysim.sim import run_packets
from pysim.workload import OpGraph, run_graph


@st.composite
def connected_graphs(draw):
    """A random connected graph: a random spanning tree plus extra links, some parallel,
    some switches (never leaves, so every switch forwards), mixed bandwidths/latencies."""
    n = draw(st.integers(3, 9))
    kinds = ["npu"] * n
    for i in range(n):
        kinds[i] = draw(st.sampled_from(["npu", "npu", "mem", "host", "switch"]))
    if all(k == "switch" for k in kinds):
        kinds[0] = "npu"
    links = []
    for v in range(1, n):
        links.append((draw(st.integers(0, v - 1)), v))
    for _ in range(draw(st.integers(0, 2 * n))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if a != b:
            links.append((a, b))
    degree = np.zeros(n, int)
    for a, b in links:
        degree[a] += 1
        degree[b] += 1
    for i in range(n):                      # a switch needs two links to be useful
        if kinds[i] == "switch" and degree[i] < 2:
            kinds[i] = "npu"
    nodes = [{"name": f"v{i}", "kind": kinds[i]} for i in range(n)]
    ls = [{"a": f"v{a}", "b": f"v{b}",
           "gbps": draw(st.sampled_from([8.0, 16.0, 32.0, 48.0])),
           "latency_ns": float(draw(st.integers(1, 4))),
           "count": draw(st.sampled_from([1, 1, 1, 2]))} for a, b in links]
    return nodes, ls


def graph_cfg(nodes, links, vcs=8, **network):
    return make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links},
                    network={"vcs": vcs, "vc_buffer_flits": 2, "flit_bytes": 16, **network},
                    simulation={"watchdog_cycles": 3000})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(connected_graphs(), st.integers(0, 2 ** 31 - 1))
def test_random_graphs_never_deadlock_with_the_vcs_the_check_asks_for(graph, seed):
    nodes, links = graph
    need = compile_network(graph_cfg(nodes, links)).routing.n_classes
    cfg = graph_cfg(nodes, links, vcs=need)       # exactly as many VCs as classes
    net = compile_network(cfg)
    eps = np.array(net.topo.endpoints())
    rng = np.random.default_rng(seed)
    P = 40 * eps.size                              # all-to-all storm, tiny buffers
    src = rng.choice(eps, P)
    dst = rng.choice(eps, P)
    length = rng.integers(1, 12, P)
    _, eng, deliver, _, _ = run_packets(cfg, rng.integers(0, 50, P), src, dst, length,
                                        network=net)
    assert (deliver >= 0).all()
    assert eng.counters()["bad_class"] == 0
    if need > 1:                                   # one VC fewer is refused, not run
        with pytest.raises(ConfigError, match=f"needs {need} VC classes"):
            compile_network(graph_cfg(nodes, links, vcs=need - 1))


@settings(max_examples=15, deadline=None)
@given(connected_graphs(), st.integers(0, 2 ** 31 - 1))
def test_csim_matches_reference_model_on_random_graphs(graph, seed):
    nodes, links = graph
    need = compile_network(graph_cfg(nodes, links)).routing.n_classes
    cfg = graph_cfg(nodes, links, vcs=need + (seed % 2), wait_for_tail_credit=bool(seed % 3),
                    injection_gbps=32.0)
    net = compile_network(cfg)
    eps = np.array(net.topo.endpoints())
    rng = np.random.default_rng(seed)
    P = 60
    t = np.sort(rng.integers(0, 60, P))
    s, d, L = rng.choice(eps, P), rng.choice(eps, P), rng.integers(1, 6, P)
    _, _, deliver, _, _ = run_packets(cfg, t, s, d, L, network=net)
    ref = refmodel.simulate(net.arrays, list(zip(t.tolist(), s.tolist(), d.tolist(),
                                                 L.tolist())))
    np.testing.assert_array_equal(deliver, np.array(ref))


@pytest.mark.parametrize("name", ["torus4x4.toml", "dgx1-v100.toml", "ring-of-rings4x4.toml",
                                  "switch8.toml"])
def test_channel_dependencies_are_every_consecutive_pair_of_the_routes(name, monkeypatch):
    """Both ways deadlock.channel_dependencies has (compiled marks, and np.unique where the
    marks would be too many) give the pairs of the definition, enumerated here one table
    entry at a time, in (c1, c2) order."""
    from conftest import TOPOLOGIES
    from pysim import deadlock, load, routing, topology
    cfg = load(os.path.join(TOPOLOGIES, name))
    topo = topology.build(cfg)
    table = routing.ROUTINGS[topo.routing](topo, cfg).table
    want = sorted({(int(table[u, d]), int(table[topo.ch_dst[table[u, d]], d]))
                   for u in range(topo.n_nodes) for d in range(topo.n_nodes)
                   if table[u, d] >= 0 and topo.ch_dst[table[u, d]] != d})
    assert [tuple(x) for x in deadlock.channel_dependencies(topo, table).tolist()] == want
    monkeypatch.setattr(deadlock, "MARKS_MAX", 0)
    assert [tuple(x) for x in deadlock.channel_dependencies(topo, table).tolist()] == want


def test_a_ring_graph_needs_two_classes_and_one_vc_is_refused_naming_a_cycle():
    n = 7
    nodes = [{"name": f"v{i}"} for i in range(n)]
    links = [{"a": f"v{i}", "b": f"v{(i + 1) % n}"} for i in range(n)]
    assert compile_network(graph_cfg(nodes, links)).routing.n_classes == 2
    with pytest.raises(ConfigError) as e:
        compile_network(graph_cfg(nodes, links, vcs=1))
    msg = str(e.value)
    assert "needs 2 VC classes" in msg and "cycle" in msg and "v0->v1" in msg.replace(" ", "")


@pytest.mark.parametrize("nodes,links,fragment", [
    ([{"name": "a"}, {"name": "b"}, {"name": "c"}], [{"a": "a", "b": "b"}],
     "node 'c' is a node with no links"),
    ([{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}],
     [{"a": "a", "b": "b"}, {"a": "c", "b": "d"}], "not connected"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "x"}],
     "topology.links[0].b = 'x': no node of that name"),
    ([{"name": "a"}, {"name": "a"}], [{"a": "a", "b": "a"}],
     "topology.nodes[1].name = 'a': duplicate node name"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "gbps": 0}],
     "topology.links[0].gbps = 0: expected a finite number > 0"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "gbps": -25.0}],
     "topology.links[0].gbps = -25.0: expected a finite number > 0"),
    ([{"name": "a"}, {"name": "b"}, {"name": "s", "kind": "switch"}], [{"a": "a", "b": "b"}],
     "node 's' is a switch with no links"),
    ([{"name": "a", "kind": "gpu"}, {"name": "b"}], [{"a": "a", "b": "b"}],
     "topology.nodes[0].kind = 'gpu': expected one of npu, mem, host, switch"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "bw": 3}],
     "topology.links[0].bw: unknown field"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "a"}], "a link from 'a' to itself"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "count": 0}],
     "topology.links[0].count = 0"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "directed": True}],
     "cannot be reached"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "gbps": 8.0, "bytes_per_cycle": 8}],
     "give gbps or bytes_per_cycle, not both"),
    ([{"name": "a"}, {"name": "b"}], [{"a": "a", "b": "b", "latency_cycles": 0}],
     "topology.links[0].latency_cycles = 0"),
])

def test_bad_graphs_give_clear_errors(nodes, links, fragment):
    with pytest.raises(ConfigError) as e:
        compile_network(make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links}))
    assert fragment in str(e.value)


def test_links_in_bytes_per_cycle_and_cycles_equal_gbps_and_ns():
    nodes = [{"name": "a"}, {"name": "b"}]
    a = compile_network(make_cfg(topology={"kind": "graph", "nodes": nodes, "links": [
        {"a": "a", "b": "b", "gbps": 40.0, "latency_ns": 6.0}]}, network={"clock_ghz": 2.0}))
    b = compile_network(make_cfg(topology={"kind": "graph", "nodes": nodes, "links": [
        {"a": "a", "b": "b", "bytes_per_cycle": 20.0, "latency_cycles": 12}]},
        network={"clock_ghz": 2.0}))
    for k in ("ch_num", "ch_den", "ch_lat_cycles"):
        np.testing.assert_array_equal(a.arrays[k], b.arrays[k])


def test_topology_file_is_resolved_relative_to_the_config(tmp_path, monkeypatch):
    sub = tmp_path / "configs"
    sub.mkdir()
    (sub / "my.toml").write_text('[topology]\nfile = "../systems/two.toml"\nlink_gbps = 8.0\n')
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "two.toml").write_text(
        '[topology]\nkind = "graph"\nlink_gbps = 16.0\n'
        '[[topology.nodes]]\nname = "x"\n[[topology.nodes]]\nname = "y"\n'
        '[[topology.links]]\na = "x"\nb = "y"\n')
    monkeypatch.chdir(os.path.dirname(TOPOLOGIES))     # not where the files are
    cfg = load(sub / "my.toml")
    assert cfg.topology.kind == "graph" and cfg.topology.link_gbps == 8.0  # own key wins
    net = compile_network(cfg)
    assert net.topo.name == "two" and net.topo.node_names == ["x", "y"]
    with pytest.raises(ConfigError, match="no such file"):
        load(sub / "my.toml", {"topology.file": "missing.toml"})


def test_topo_reports_known_bisections_and_draws(tmp_path):
    """Bisection per direction: 8x8 mesh of 32 GB/s links, 8 links cut: 256 GB/s; DGX-1
    V100 between its sockets: NVLinks 0-4 and 1-5 (double), 2-6 and 3-7 (single) = 150 GB/s,
    plus the 19.2 GB/s socket link; MC-DLA: a ring cut twice, 3 x 25 GB/s each: 150 GB/s.
    Diameters: the DGX-1's GPUs forward no traffic, so a pair without an NVLink on different
    sockets goes GPU, PCIe switch, CPU, CPU, PCIe switch, GPU: 5 hops."""
    for name, gbps, diameter in (("mesh8x8.toml", 256.0, 14), ("dgx1-v100.toml", 169.2, 5),
                                 ("mcdla-8.toml", 150.0, 8)):
        cfg = load(os.path.join(TOPOLOGIES, name))
        d = describe(compile_network(cfg), cfg)
        assert d["bisection_gbps"] == pytest.approx(gbps)
        assert d["diameter"] == diameter
    png = tmp_path / "dgx.png"
    out = tmp_path / "dgx.json"
    res = CliRunner().invoke(main, ["topo", os.path.join(TOPOLOGIES, "dgx1-v100.toml"),
                                    "--draw", str(png), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "npu" in res.output and "gpu0 <-> gpu3: 50 GB/s x2" in res.output
    assert "needs 1 VC class" in res.output   # (routes off the GPUs: an acyclic CDG)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
    d = json.loads(out.read_text())
    assert d["nodes"]["npu"] == [f"gpu{i}" for i in range(8)] and len(d["nodes"]["switch"]) == 4
    # provenance, as a run's --json has it: the resolved config and the version
    assert d["config"]["network"]["vcs"] == load(os.path.join(TOPOLOGIES, "dgx1-v100.toml")) \
        .network.vcs and d["config"]["_system"] == "dgx1-v100" and d["version"] == __version__
    for ext in ("svg", "pdf"):
        res = CliRunner().invoke(main, ["topo", os.path.join(TOPOLOGIES, "mcdla-8.toml"),
                                        "--draw", str(tmp_path / f"m.{ext}")])
        assert res.exit_code == 0 and (tmp_path / f"m.{ext}").stat().st_size > 1000


TREE = {"kind": "graph",
        "nodes": [{"name": f"n{i}"} for i in range(6)] +
                 [{"name": "s0", "kind": "switch"}, {"name": "s1", "kind": "switch"}],
        "links": [{"a": "s0", "b": "s1"}, {"a": "n0", "b": "s0"}, {"a": "n1", "b": "s0"},
                  {"a": "n2", "b": "s1"}, {"a": "n3", "b": "n2"}, {"a": "n4", "b": "n3"},
                  {"a": "n5", "b": "s1"}]}


@pytest.mark.parametrize("topology", [
    {"kind": "mesh", "dims": [3, 4]}, {"kind": "mesh", "dims": [2, 3, 5]},
    {"kind": "torus", "dims": [4, 3, 2]}, {"kind": "torus", "dims": [5, 6]},
    {"kind": "ring", "size": 5}, {"kind": "ring", "size": 6, "bidirectional": False},
    {"kind": "switch", "size": 7}, TREE])
def test_hop_closed_forms_equal_the_walk_of_every_pair(topology):
    """pysim topo's diameter and average hops from closed forms (dimension order: the
    distances per dimension; a tree: 2 s (E - s) hops per link) equal the walk of every
    ordered pair of endpoints along the routes."""
    from pysim.network import hop_stats
    net = compile_network(make_cfg(topology=topology))
    walk = hop_stats(net)
    closed = hop_stats(net, exact_pairs=0)
    assert walk["how"] == "every pair" and closed["how"] == "closed form"
    assert closed["diameter"] == walk["diameter"]
    assert closed["avg_hops"] == pytest.approx(walk["avg_hops"], rel=1e-12)


def test_hop_closed_forms_by_hand_and_a_sample_says_so():
    """A ring of 6 one way round: distances 1..5 from every node, 3 on average, 5 at most;
    a 3x4 mesh: sum over pairs of |dx| + |dy| = 16 x 8 + 9 x 20 = 308 over 132 ordered
    pairs. A cluster's routes have no closed form: from every source as a sample they equal
    the walk; from 5 sources the average is the sample's and the result says so."""
    from pysim.network import hop_stats
    import refroutes
    ring = compile_network(make_cfg(topology={"kind": "ring", "size": 6,
                                              "bidirectional": False}))
    for exact in (1 << 24, 0):
        r = hop_stats(ring, exact_pairs=exact)
        assert (r["diameter"], r["avg_hops"]) == (5, 3.0)
    mesh = hop_stats(compile_network(make_cfg(topology={"kind": "mesh", "dims": [3, 4]})),
                     exact_pairs=0)
    assert (mesh["diameter"], mesh["avg_hops"]) == (5, pytest.approx(308 / 132))
    net = compile_network(make_cfg(topology={"kind": "cluster", **refroutes.CLUSTERS[1]}))
    walk = hop_stats(net)
    full = hop_stats(net, sample=10 ** 6, exact_pairs=0)
    assert full["how"].startswith("sampled: 48 sources")
    assert (full["diameter"], full["avg_hops"]) == (walk["diameter"],
                                                    pytest.approx(walk["avg_hops"]))
    few = hop_stats(net, sample=5, exact_pairs=0)
    assert few["how"].startswith("sampled: 5 sources") and "lower bound" in few["how"]
    assert 2 <= few["avg_hops"] <= few["diameter"] <= walk["diameter"]


def _two_node_graph(*links):
    return from_dict({"topology": {"kind": "graph", "nodes": [
        {"name": "a", "kind": "npu"}, {"name": "b", "kind": "npu"}],
        "links": [{"a": a, "b": b, **kw} for a, b, kw in links]},
        "network": {"injection_gbps": 100.0, "ejection_gbps": 100.0}})


def test_entries_naming_one_pair_are_parallel_links_and_unlike_ones_are_warned_of():
    """Two entries between a and b are parallel links: alike, a 1 MiB send uses both, so
    it takes bytes / (2 x 10 GB/s) (plus a packet's way); unlike (10 and 20 GB/s), routes
    take one of them and the other carries nothing while `pysim topo` counts 30 GB/s, which
    a warning says, naming both entries."""
    cfg = _two_node_graph(("a", "b", {"gbps": 10.0}), ("b", "a", {"gbps": 10.0}))
    g = OpGraph()
    g.send("a", "b", 1 << 20)
    span = run_graph(cfg, g).to_dict()["makespan_cycles"]
    assert (1 << 20) / 20.0 <= span <= (1 << 20) / 20.0 + 100
    for second in ({"gbps": 20.0}, {"gbps": 10.0, "latency_ns": 5.0}):
        with pytest.warns(PysimWarning, match=r"topology\.links\[1\]: a link b -> a of .*"
                                              r"beside topology\.links\[0\]'s of 10 GB/s"):
            compile_network(_two_node_graph(("a", "b", {"gbps": 10.0}), ("b", "a", second)))
    # other directions, directed links, are other channels: not parallel
    compile_network(_two_node_graph(("a", "b", {"gbps": 10.0, "directed": True}),
                                    ("b", "a", {"gbps": 20.0, "directed": True})))


def test_unlike_parallel_links_are_described_one_by_one_not_summed():
    """`pysim topo` (network.describe) shows a pair of unlike parallel links as its links,
    each with its bandwidth, latency and count, saying the routes use one: their sum (30
    GB/s) is bandwidth no route has. Alike parallel links stay one line of their sum."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PysimWarning)
        cfg = _two_node_graph(("a", "b", {"gbps": 10.0}), ("b", "a", {"gbps": 20.0}),
                              ("a", "b", {"gbps": 20.0}))
        (link,) = describe(compile_network(cfg), cfg)["links"]
    assert sorted((u["gbps"], u["latency_cycles"], u["count"]) for u in link["unlike"]) == \
        [(10.0, link["latency_cycles"], 1), (20.0, link["latency_cycles"], 2)]
    cfg = _two_node_graph(("a", "b", {"gbps": 10.0}), ("b", "a", {"gbps": 10.0}))
    (link,) = describe(compile_network(cfg), cfg)["links"]
    assert "unlike" not in link and link["gbps"] == 20.0 and link["parallel"] == 2



def test_pysim_topo_lists_unlike_parallel_links_one_by_one(tmp_path):
    (tmp_path / "par.toml").write_text(
        '[topology]\nkind = "graph"\nnodes = [{name = "a"}, {name = "b"}]\n'
        'links = [{a = "a", b = "b", gbps = 10.0}, {a = "a", b = "b", gbps = 20.0}]\n')
    r = CliRunner().invoke(main, ["topo", str(tmp_path / "par.toml")])
    assert r.exit_code == 0, r.output
    assert "a <-> b: unlike parallel links, of which routes use one: 10 GB/s, 1 cycles " \
        "(routes a->b, b->a); 20 GB/s, 1 cycles (no route: carries nothing)" in r.output
    assert "30 GB/s" not in r.output.split("bisection")[0]


def test_the_bisection_says_what_of_it_the_routes_take(tmp_path):
    """The bisection is the links' capacity across the cut (10 + 20 GB/s between a and b);
    the routes take the 10 GB/s link alone (of equal cost, the first entry), so 20 GB/s of
    it carries nothing: the summary and the JSON say both."""
    (tmp_path / "par.toml").write_text(
        '[topology]\nkind = "graph"\nnodes = [{name = "a"}, {name = "b"}]\n'
        'links = [{a = "a", b = "b", gbps = 10.0}, {a = "a", b = "b", gbps = 20.0}]\n')
    r = CliRunner().invoke(main, ["topo", str(tmp_path / "par.toml"), "--json",
                                  str(tmp_path / "t.json")])
    assert r.exit_code == 0, r.output
    assert "bisection   30 GB/s per direction" in r.output
    assert "of which routes take 10 GB/s: 20 GB/s across the cut is unlike parallel links " \
        "no route uses, which carry nothing" in r.output
    d = json.loads((tmp_path / "t.json").read_text())
    assert (d["bisection_gbps"], d["bisection_routed_gbps"]) == (30.0, 10.0)
    assert (d["links"][0]["gbps"], d["links"][0]["routed_gbps"]) == (30.0, 10.0)
    # alike links: the routes take them all, and no line says otherwise
    (tmp_path / "alike.toml").write_text(
        '[topology]\nkind = "graph"\nnodes = [{name = "a"}, {name = "b"}]\n'
        'links = [{a = "a", b = "b", gbps = 10.0, count = 2}]\n')
    r = CliRunner().invoke(main, ["topo", str(tmp_path / "alike.toml")])
    assert "bisection   20 GB/s" in r.output and "routes take" not in r.output


def test_the_routed_bisection_takes_off_each_way_its_own_idle_links(tmp_path):
    """a - b by 10 GB/s both ways and a one-way 20 GB/s a -> b: the routes from a take one of
    the two, so the cut carries 10 GB/s routed each way (b -> a never had the 20 GB/s link to
    lose): the routed bisection is the bisection, 10 GB/s, not 10 - 20."""
    (tmp_path / "dir.toml").write_text(
        '[topology]\nkind = "graph"\nnodes = [{name = "a"}, {name = "b"}]\n'
        'links = [{a = "a", b = "b", gbps = 10.0}, '
        '{a = "a", b = "b", gbps = 20.0, directed = true}]\n')
    r = CliRunner().invoke(main, ["topo", str(tmp_path / "dir.toml"), "--json",
                                  str(tmp_path / "t.json")])
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "t.json").read_text())
    assert (d["bisection_gbps"], d["bisection_routed_gbps"]) == (10.0, 10.0)
    assert "of which routes take" not in r.output


def _unlike(tree, **over):
    """a - b by two unlike links (10 GB/s with 2 cycles, then 20 GB/s with 4 cycles),
    b - c; a - c too unless `tree`."""
    links = [{"a": "a", "b": "b", "gbps": 10.0, "latency_cycles": 2},
             {"a": "a", "b": "b", "gbps": 20.0, "latency_cycles": 4},
             {"a": "b", "b": "c", "gbps": 20.0}] + ([] if tree else [{"a": "a", "b": "c"}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PysimWarning)
        return from_dict({"topology": {"kind": "graph", "links": links, **over,
                                       "nodes": [{"name": x} for x in "abc"]},
                          "network": {"injection_gbps": 100.0, "ejection_gbps": 100.0,
                                      "vc_buffer_flits": 32}})


@pytest.mark.parametrize("tree", [True, False])
@pytest.mark.parametrize("weight,gbps", [("hops", 10.0), ("latency", 10.0),
                                         ("bandwidth", 20.0)])
def test_routes_take_the_unlike_parallel_link_cheapest_by_route_weight(tree, weight, gbps):
    """Of unlike parallel links the routes take the cheapest by topology.route_weight (of
    equal cost the first entry), on a tree (routed by rule) as on any graph (by table): a
    1 MiB send from a to b takes bytes / its bandwidth (plus its latency and a packet's
    way), and `pysim topo` (describe) names the link it takes, each way."""
    cfg = _unlike(tree, route_weight=weight)
    g = OpGraph()
    g.send("a", "b", 1 << 20)
    span = run_graph(cfg, g).to_dict()["makespan_cycles"]
    assert (1 << 20) / gbps <= span <= (1 << 20) / gbps + 100, (span, gbps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PysimWarning)
        link = [l for l in describe(compile_network(cfg), cfg)["links"]
                if (l["a"], l["b"]) == ("a", "b")][0]
    assert {u["gbps"]: u["routes"] for u in link["unlike"]} == \
        {gbps: ["a->b", "b->a"], 30.0 - gbps: []}


def test_the_warning_of_unlike_parallel_links_says_which_routes_take():
    cfg = _unlike(True, route_weight="bandwidth")
    with pytest.warns(PysimWarning, match=r"routes take the cheapest by topology.route_weight "
                                          r"= 'bandwidth' \(of equal cost the first entry\) "
                                          r"and the other carries nothing; pysim topo names it"):
        compile_network(cfg)


def test_a_graph_past_max_cycles_names_what_runs_and_what_waits():
    """A compute op of 5,000 cycles under workload.max_cycles = 1,000: refused naming the
    limit, the op running since cycle 0 and the op after it, not started."""
    cfg = make_cfg(topology={"kind": "ring", "size": 2}, workload={"max_cycles": 1000})
    g = OpGraph()
    a = g.compute("n0", 5000, name="long")
    g.compute("n0", 10, after=[a], name="next")
    with pytest.raises(ConfigError, match=r"workload\.max_cycles = 1,000: the graph did not "
                                          r"finish by then \(unfinished: long \(running since "
                                          r"cycle 0\), next \(not started\)\)"):
        run_graph(cfg, g)
