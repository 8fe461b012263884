"""The per-link report is columns (pysim.stats.LinkTable) whose rows, made when asked for,
equal a row-by-row reference built from the network's channels one at a time; what reads
the report by columns (the summary's link line, the slow-path note) agrees with the same
reading done over the rows."""
import json
import pickle

import numpy as np
import pytest

from conftest import make_cfg
from pysim.network import CH_NET, compile_network
from pysim.sim import simulate
from pysim.stats import LinkTable
from pysim.topology import build
from pysim.workload import graph as graph_mod, notes
from pysim.workload.base import link_report


def reference(network, cfg, flits, cycles, vc_flits=None, owed_start=None, owed_end=None):
    """The report channel by channel, in plain Python."""
    names = network.topo.node_names
    out = []
    for c in range(len(network.ch_kind)):
        if network.ch_kind[c] != CH_NET:
            continue
        r = float(network.ch_num[c]) / float(network.ch_den[c])
        busy = float(flits[c]) / r
        if owed_start is not None:
            busy += float(owed_start[c])
        if owed_end is not None:
            busy -= float(owed_end[c])
        busy = max(busy, 0.0)
        row = dict(src=names[network.ch_src[c]], dst=names[network.ch_dst[c]],
                   lane=int(c - network.arrays["ch_par_base"][c]),
                   bandwidth_gbps=r * cfg.network.flit_bytes * cfg.network.clock_ghz,
                   latency_cycles=int(network.ch_lat[c]), flits=int(flits[c]),
                   utilisation=busy / cycles if cycles > 0 else 0.0)
        if vc_flits is not None:
            row["vc_flits"] = [int(x) for x in vc_flits[c]]
        out.append(row)
    return out


SYSTEMS = [
    {"kind": "ring", "size": 5, "link_gbps": 100.0},             # parallel lanes
    {"kind": "torus", "dims": [3, 4], "link_gbps": 20.0},       # slower than a flit a cycle
    {"kind": "cluster", "node": "dgx-h100", "node_count": 2, "fabric": "rail-optimised",
     "radix": 64},
]


@pytest.mark.parametrize("topology", SYSTEMS)
@pytest.mark.parametrize("cycles", [0, 1, 997])
def test_rows_equal_the_channel_by_channel_reference(topology, cycles, rng):
    cfg = make_cfg(topology=topology, network={"vcs": 3})
    net = compile_network(cfg, build(cfg))
    C = net.ch_kind.size
    g = np.random.default_rng(7)
    flits = g.integers(0, 5000, C)
    vc = g.integers(0, 900, (C, 3))
    start, end = g.random(C) * 3, g.random(C) * 40
    for args in [(None, None, None), (vc, None, None), (None, start, end), (vc, start, end)]:
        table = link_report(net, cfg, flits, cycles, *args)
        ref = reference(net, cfg, flits, cycles, *args)
        assert isinstance(table, LinkTable) and len(table) == len(ref) > 0
        assert list(table) == ref
        for row in list(table)[:50]:        # the types JSON writes: ints stay ints
            assert all(type(row[k]) is int for k in ("lane", "latency_cycles", "flits"))
        assert table == ref and ref == table and table != ref[:-1]
        k = len(ref) // 2
        assert table[k] == ref[k] and table[-1] == ref[-1] and table[1:7] == ref[1:7]
        assert table[::3] == ref[::3]
        with pytest.raises(IndexError):
            table[len(ref)]
        assert pickle.loads(pickle.dumps(table)) == ref


def test_a_mutated_column_is_seen():
    """The comparison can fail: one flit more on one lane breaks it."""
    cfg = make_cfg(topology=SYSTEMS[0])
    net = compile_network(cfg, build(cfg))
    flits = np.arange(net.ch_kind.size)
    table = link_report(net, cfg, flits, 100)
    table.column("flits")[3] += 1
    assert list(table) != reference(net, cfg, flits, 100)


@pytest.mark.parametrize("model", ["flit", "flow"])
def test_a_run_writes_the_rows_and_reads_its_columns_as_the_rows_say(model):
    cfg = make_cfg(topology={"kind": "ring", "size": 4, "link_gbps": 50.0},
                   network={"model": model},
                   workload={"kind": "collective", "collective": "all_reduce",
                             "algorithm": "ring", "bytes": 1 << 16})
    res = simulate(cfg)
    rows = list(res.links)
    d = res.to_dict()
    assert d["links"] == rows and json.loads(json.dumps(d))["links"] == rows
    # the summary's link line, read over the rows
    used = [l for l in rows if l["flits"]]
    top = max(used, key=lambda l: l["utilisation"])
    mean = sum(l["utilisation"] for l in used) / len(used)
    assert res._link_line() == (f"max {top['utilisation']:.3f} ({top['src']}->{top['dst']}), "
                                f"mean {mean:.3f} over the {len(used)} of {len(rows)} "
                                f"channels used (whole run)")


def test_synthetic_traffic_reports_its_links_as_rows():
    cfg = make_cfg(topology={"kind": "mesh", "dims": [3, 3]},
                   traffic={"injection_rate": 0.05},
                   simulation={"warmup_cycles": 50, "measure_cycles": 300})
    res = simulate(cfg)
    d = res.to_dict()
    assert d["links"] == list(res.links) and len(d["links"]) == 24
    assert max(l["utilisation"] for l in d["links"]) > 0
    assert f"{max(l['utilisation'] for l in d['links']):.3f}" in res.summary()


def test_slow_group_path_reads_the_columns_as_the_rows_say():
    """The busiest link of a DGX-1-like graph's training run with a host detour: the note
    names the first busiest row, and compares it with the widest link at an NPU (rows)."""
    topo = {"kind": "graph", "transit": ["switch"],
            "nodes": [{"name": "g0", "kind": "npu"}, {"name": "g1", "kind": "npu"},
                      {"name": "s", "kind": "switch"}],
            "links": [{"a": "g0", "b": "g1", "gbps": 100.0},
                      {"a": "g0", "b": "s", "gbps": 16.0}, {"a": "g1", "b": "s", "gbps": 16.0}]}
    cfg = make_cfg(topology=topo)
    net = compile_network(cfg, build(cfg))
    C = net.ch_kind.size
    kinds = dict(zip(net.topo.node_names, net.topo.node_kinds))
    for seed in range(6):
        flits = np.random.default_rng(seed).integers(0, 3000, C)
        flits[np.flatnonzero(net.ch_kind == CH_NET)[:1]] = 0
        table = link_report(net, cfg, flits, 20_000)
        rows = list(table)
        top = max(rows, key=lambda l: l["utilisation"])
        widest = max(l["bandwidth_gbps"] for l in rows
                     if "npu" in (kinds[l["src"]], kinds[l["dst"]]))
        slow = ({kinds[top["src"]], kinds[top["dst"]]} & {"switch", "host"} and
                top["utilisation"] >= 0.05 and top["bandwidth_gbps"] < widest)
        note = notes.slow_group_path(table, cfg, net.topo)
        assert (note is not None) == bool(slow)
        if note:
            assert f"{top['src']}->{top['dst']}" in note


def alike_flits(net, seed):
    """Flits alike over each link's lanes (as the flow level sends them), random per link and
    NIC: per unit and per lane."""
    g = np.random.default_rng(seed)
    unit = g.integers(0, 5000, net.unit_lanes.size)
    return unit, np.repeat(unit, net.unit_lanes)


@pytest.mark.parametrize("topology", SYSTEMS)
@pytest.mark.parametrize("cycles", [0, 997])
def test_a_run_per_link_gives_the_rows_of_every_lane(topology, cycles):
    """The flow level's report keeps a run per link; its rows, columns and slices are the
    channel-by-channel reference's, lane numbers counting up within each link."""
    cfg = make_cfg(topology=topology, network={"vcs": 3})
    net = compile_network(cfg, build(cfg))
    unit, flits = alike_flits(net, 3)
    table = link_report(net, cfg, None, cycles, unit_flits=unit)
    ref = reference(net, cfg, flits, cycles)
    links = net.ch_kind[net.unit_first] == CH_NET
    assert table.runs is not None and table.runs.tolist() == net.unit_lanes[links].tolist()
    assert len(table) == len(ref) and list(table) == ref and table == ref
    k = len(ref) // 2
    assert table[k] == ref[k] and table[-1] == ref[-1] and table[3:11] == ref[3:11]
    assert table[::5] == ref[::5] and pickle.loads(pickle.dumps(table)) == ref
    for key in LinkTable.KEYS:
        col = table.column(key)
        want = [r[key] for r in ref] if key not in ("src", "dst") else \
            [net.topo.node_names.index(r[key]) for r in ref]
        assert col.tolist() == want, key
    cols, rows, first = table.by_run()
    assert rows.sum() == len(ref) and first[0] == 0
    assert [ref[i]["lane"] for i in first] == cols["lane"].tolist()
    # (the per-lane form of the same flits: one run per row)
    _, rows1, first1 = link_report(net, cfg, flits, cycles).by_run()
    assert (rows1 == 1).all() and first1.tolist() == list(range(len(ref)))
    with pytest.raises(ValueError):
        link_report(net, cfg, None, cycles, np.zeros((flits.size, 3)), unit_flits=unit)


def test_a_link_changed_changes_its_lanes_rows_alone():
    """One flit more on one link of four lanes: exactly its four rows change, as the
    reference built from the lanes' flits says."""
    cfg = make_cfg(topology=SYSTEMS[0])
    net = compile_network(cfg, build(cfg))
    unit, _ = alike_flits(net, 4)
    before = list(link_report(net, cfg, None, 100, unit_flits=unit))
    k = int(np.flatnonzero((net.ch_kind[net.unit_first] == CH_NET) & (net.unit_lanes == 4))[2])
    unit[k] += 1
    after = list(link_report(net, cfg, None, 100, unit_flits=unit))
    assert after == reference(net, cfg, np.repeat(unit, net.unit_lanes), 100)
    assert sum(a != b for a, b in zip(before, after)) == 4


def test_a_flow_run_reports_a_run_per_link(monkeypatch):
    """A flow run's rows are the reference built from its engine's flits lane by lane, and
    the engine's flits read at the links' first lanes are those lanes' flits."""
    kept = {}
    set_graph = graph_mod.set_graph

    def keep(eng, *a, **k):
        kept["eng"] = eng
        return set_graph(eng, *a, **k)
    monkeypatch.setattr(graph_mod, "set_graph", keep)
    cfg = make_cfg(topology=SYSTEMS[2], network={"model": "flow"},
                   workload={"kind": "collective", "collective": "all_reduce",
                             "algorithm": "ring", "bytes": 1 << 20})
    res = simulate(cfg)
    net = compile_network(cfg, build(cfg))
    eng = kept["eng"]
    flits = eng.channel_flits()
    assert eng.channel_flits(net.unit_first).tolist() == flits[net.unit_first].tolist()
    for bad in ([len(flits)], [-1]):
        with pytest.raises(ValueError, match="out of range"):
            eng.channel_flits(bad)
    assert res.links.runs is not None and len(res.links.runs) < len(res.links)
    rows = list(res.links)
    assert rows == reference(net, cfg, flits, res.makespan_cycles)
    assert res.to_dict()["links"] == rows and sum(l["flits"] for l in rows) > 0


@pytest.mark.parametrize("topology", SYSTEMS)
def test_the_nic_note_from_flits_per_link_is_the_lanes(topology):
    """notes.nic_limit given the flow level's flits per link and NIC (unit_flits) names the
    NIC, its share and its links as the per-lane form of the same flits does; the parallel
    lanes' systems (ring of 100 GB/s links, the cluster) name a busy NIC."""
    cfg = make_cfg(topology=topology)
    net = compile_network(cfg, build(cfg))
    named = 0
    for seed in range(3):
        unit, flits = alike_flits(net, seed)
        note = notes.nic_limit(net, cfg, None, 6000, unit_flits=unit)
        assert note == notes.nic_limit(net, cfg, flits, 6000)
        named += note is not None
    assert named == (0 if topology["kind"] == "torus" else 3)
