"""Clusters of DGX nodes (pysim/cluster.py): the switch counts of NVIDIA's published reference
designs, routes that are shortest and up/down (searched here by breadth-first search, apart
from the builder), one VC class by the channel-dependency check, a message's time across the
fabric against its closed form, and refusals."""
import os
import tomllib
from collections import deque

import numpy as np
import pytest

import refroutes
from conftest import TOPOLOGIES, make_cfg
from pysim import cluster, routing, systems, topology
from pysim.config import ConfigError, load
from pysim.network import compile_network
from pysim.workload.graph import OpGraph, run_graph


def cluster_cfg(**kw):
    return make_cfg(topology={"kind": "cluster", **kw})


# NVIDIA DGX SuperPOD reference architecture (DGX B200 edition, same 8-rail nodes and 64-port
# NDR switches as the DGX H100 one), its table of larger SuperPODs: per count of scalable
# units of 32 nodes, the InfiniBand switches (leaf, spine, core) of the compute fabric.
SUPERPOD_SWITCHES = {2: (16, 8, 0), 4: (32, 16, 0), 8: (64, 32, 0), 16: (128, 128, 64),
                     32: (256, 256, 128), 64: (512, 512, 256)}


@pytest.mark.parametrize("units", sorted(SUPERPOD_SWITCHES))
def test_switch_counts_match_nvidias_superpod_tables(units):
    p = cluster.plan("rail-optimised", 32 * units, 8, 64, 1.0)
    spines = p.spines if p.tiers == 2 else p.pods * p.spines
    cores = p.up * p.cores if p.tiers == 3 else 0
    assert (p.leaves, spines, cores) == SUPERPOD_SWITCHES[units]


def _bfs_hops(t, s, E):
    """Hops from GPU s to every node, never passing through another GPU (a GPU's router
    forwards nothing in the fabric)."""
    adj = [[] for _ in range(t.n_nodes)]
    for a, b in zip(t.ch_src, t.ch_dst):
        adj[a].append(b)
    dist = np.full(t.n_nodes, -1)
    dist[s] = 0
    q = deque([s])
    while q:
        u = q.popleft()
        if u < E and u != s:
            continue
        for v in adj[u]:
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def _tier(t, v):
    name = t.node_names[v]
    for k, tier in (("gpu", 0), ("nvswitch", 1), ("leaf", 1), ("spine", 2), ("core", 3)):
        if name.startswith(k):
            return tier
    raise AssertionError(name)


@pytest.mark.parametrize("kw", refroutes.CLUSTERS)
def test_routes_are_shortest_up_down_and_deadlock_free(kw):
    cfg = cluster_cfg(**kw)
    t = topology.build(cfg)
    r = routing.build(t, cfg)
    assert r.n_classes == 1            # the channel-dependency graph is acyclic
    E = t.cluster["gpus"]
    for s in range(E):
        dist = _bfs_hops(t, s, E)
        for d in range(E):
            if d == s:
                continue
            path = routing.path(t, r, s, d)
            assert len(path) == dist[d]
            tiers = [_tier(t, t.ch_dst[c]) for c in path[:-1]]
            top = int(np.argmax(tiers))           # up, then down: never up after down
            assert tiers[:top + 1] == sorted(tiers[:top + 1])
            assert tiers[top:] == sorted(tiers[top:], reverse=True)
            same_node = s // 8 == d // 8
            assert t.node_names[t.ch_dst[path[0]]].startswith(
                "nvswitch" if same_node else "leaf")


def test_uplinks_spread_over_the_destinations_of_a_leaf():
    """D-mod-k: from any leaf, the routes to the GPUs of another leaf leave by distinct
    uplinks (a non-blocking fabric: up >= down)."""
    cfg = cluster_cfg(node="dgx-h100", node_count=12, fabric="rail-optimised", radix=8)
    t = topology.build(cfg)
    table = t.table
    leaf = np.array([t.node_names.index(f"leaf{i}") for i in range(t.cluster["leaves"])])
    E = t.cluster["gpus"]
    gpu_leaf = np.array([t.ch_dst[table[g, (g + 8) % E]] for g in range(E)])   # its leaf
    for a in leaf[:3]:
        for b in leaf:
            if a == b:
                continue
            dests = np.flatnonzero(gpu_leaf == b)
            ups = [table[a, d] for d in dests]
            assert len(set(ups)) == len(dests)


def test_a_message_takes_its_closed_form_across_the_fabric():
    """At the flow level a message between nodes runs at the NIC's rate, one within a node at
    NVLink's: time = bytes / rate + the path's latency (a flow's zero-load latency is that of
    its last packet, at most a few hundred cycles here)."""
    cfg = cluster_cfg(node="dgx-a100", node_count=2, fabric="rail-optimised")
    cfg = cfg.with_overrides({"network.model": "flow"})
    size = 64 << 20
    for dst, gbps in (("gpu8", 25.0), ("gpu1", 300.0)):
        g = OpGraph()
        g.send("gpu0", dst, size)
        res = run_graph(cfg, g)
        ideal = size / gbps              # ns = cycles at 1 GHz
        assert ideal <= res.makespan_cycles <= ideal + 2000, (dst, res.makespan_cycles, ideal)


def test_presets_and_rates_follow_the_node_type():
    for node, preset, nv, nic in (("dgx-a100", "a100", 300.0, 25.0),
                                  ("dgx-h100", "h100", 450.0, 50.0)):
        cfg = cluster_cfg(node=node, node_count=2)
        t = topology.build(cfg)
        assert t.node_mem[0] == {"preset": preset}
        bw = {t.channel_name(c): b for c, b in enumerate(t.ch_bytes_per_cycle)}
        assert bw["gpu3->nvswitch0"] == nv and bw["gpu3->leaf3"] == nic
    # an explicit preset in [topology.npu] wins over the node type's
    t = topology.build(make_cfg(topology={"kind": "cluster", "node_count": 2,
                                          "npu": {"preset": "v100"}}))
    assert t.node_mem[0] == {}


@pytest.mark.parametrize("kw, words", [
    (dict(node="dgx-b200"), ["topology.node", "dgx-b200", "dgx-a100"]),
    (dict(fabric="torus"), ["topology.fabric", "torus", "rail-optimised"]),
    (dict(node_count=0), ["topology.node_count", ">= 1"]),
    (dict(node_count=100, radix=8), ["topology.node_count = 100", "radix = 8"]),
    (dict(node="dgx-h100", node_count=40000, radix=256),
     ["topology.node_count = 40000", "at most 262,144"]),
    (dict(oversubscription=0.5), ["topology.oversubscription", "1 to 64"]),
    (dict(radix=1), ["topology.radix", "2 to 4096"]),
    (dict(link_gbps=10.0), ["topology.link_gbps", "not used", "nvlink_gbps"]),
    (dict(size=8), ["topology.size", "not used"]),
    (dict(node_count=1, nvls=True), ["topology.nvls = true: topology.node = 'dgx-a100' has "
                                     "no NVLink SHARP", "expected a node whose NVSwitches "
                                     "reduce: dgx-h100"]),
])
def test_bad_cluster_settings_are_refused_naming_the_key(kw, words):
    with pytest.raises(ConfigError) as e:
        topology.build(cluster_cfg(**kw))
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("kw, refused", [
    (dict(node_count=1, oversubscription=2.0), r"topology\.oversubscription = 2\.0 has no "
     r"effect: topology\.node_count = 1, one node's NVSwitch joining its 8 GPUs with no "
     r"fabric; leave it out, or set topology\.node_count above 1"),
    (dict(node_count=1, fabric="fat-tree"), r"topology\.fabric = 'fat-tree' has no effect: "
                                            r"topology\.node_count = 1"),
    (dict(node_count=1, nic_gbps=50.0), r"topology\.nic_gbps = 50\.0 has no effect"),
    (dict(node_count=2, fabric="fat-tree", fabric_gbps=1.0),
     r"topology\.fabric_gbps = 1\.0 has no effect: the 16 GPUs of topology\.node_count = 2 "
     r"take one leaf switch of topology\.radix = 40 ports \(20 to GPUs\), with no switch "
     r"above it"),
])
def test_a_fabric_key_the_clusters_shape_leaves_unread_is_refused(kw, refused):
    """A cluster of one node has no fabric, and one whose GPUs take a single leaf has no
    link above it: their keys would be read by nothing. With the shape that reads them, the
    same key builds (and changes a link)."""
    with pytest.raises(ConfigError, match="^" + refused):
        topology.build(cluster_cfg(**kw))
    topology.build(cluster_cfg(**{**kw, "node_count": 64}))
    # an override that makes the system's own fabric keys idle does not refuse them, nor
    # is a key at its default refused (a script giving the fabric whatever the count)
    topology.build(load("selene", {"topology.node_count": 1}))
    topology.build(cluster_cfg(node_count=1, fabric="rail-optimised", oversubscription=1.0))


def test_the_flow_level_is_not_refused_for_vc_buffers_it_does_not_make():
    """The VC buffers are made by a flit-level run alone: a flow-level network past their
    limit compiles (the 16,384-GPU SuperPOD with its file's 2 VCs of 256 flits was refused
    at the flow level), and the flit level is refused naming the key and the bytes."""
    over = {"topology.node_count": 16, "network.vc_buffer_flits": 1 << 16}
    cfg = load("superpod-h100", {**over, "network.model": "flow"})
    compile_network(cfg, topology.build(cfg))
    cfg = load("superpod-h100", {**over, "network.model": "flit"})
    with pytest.raises(ConfigError, match=r"^network\.vc_buffer_flits = 65536 with network\."
                                          r"vcs = 2 on [\d,]+ channels: [\d.,]+ GiB of "
                                          r"buffers; expected at most 4 GiB"):
        compile_network(cfg, topology.build(cfg))


def test_16k_gpus_are_refused_at_once_past_the_node_limit_not_built():
    """The largest SuperPOD (2,048 nodes) is within the limit; its node count is computed
    before anything is allocated (the build itself is measured in bench/, not here)."""
    p = cluster.plan("rail-optimised", 2048, 8, 64, 1.0)
    n = 2048 * 9 + p.leaves + p.pods * p.spines + p.up * p.cores
    assert n == 19712 <= cluster.MAX_CLUSTER_NODES


@pytest.mark.parametrize("name", [n for n in systems.names()
                                  if tomllib.load(open(os.path.join(TOPOLOGIES, n + ".toml"),
                                                       "rb"))["topology"]["kind"] == "cluster"])
def test_shipped_clusters_build_as_their_files_say(name):
    """Each shipped cluster's comment line '# Switches: ...' states its switches; the built
    topology has them, one VC class suffices, and its network compiles."""
    path = os.path.join(TOPOLOGIES, name + ".toml")
    line = next(x for x in open(path) if x.startswith("# Switches:"))
    said = {w.split()[1]: int(w.split()[0]) for w in line[len("# Switches:"):].split(",")}
    cfg = load(path)
    t = topology.build(cfg)
    got = {k: sum(1 for x in t.node_names if x.startswith(k) and x[len(k):].isdigit())
           for k in ("nvswitch", "leaf", "spine", "core")}
    assert got == said
    if t.n_nodes <= 2000:
        net = compile_network(cfg, t)
        assert net.routing.n_classes == 1


def test_a_cluster_past_the_node_limit_is_refused_before_its_plan_is_built(monkeypatch):
    """10^7 nodes of 8 GPUs: refused naming the key and the count of GPUs and NVSwitches alone,
    before the fabric's plan allocates arrays of every GPU (at 10^7 nodes: seconds of CPU and
    gigabytes)."""
    def no_plan(*a, **kw):
        raise AssertionError("the plan was built")
    monkeypatch.setattr(cluster, "plan", no_plan)
    with pytest.raises(ConfigError, match=r"topology\.node_count = 10000000: 80,000,000 GPUs "
                                          r"and 10,000,000 NVSwitches.*at most 262,144"):
        topology.build(cluster_cfg(node_count=10 ** 7))


@pytest.mark.parametrize("fabric", ["rail-optimised", "fat-tree"])
@pytest.mark.parametrize("radix", [16, 64])
def test_the_refusal_past_three_tiers_states_the_largest_cluster_that_builds(fabric, radix):
    """The refusal's "at most about N GPUs, M nodes" is the boundary itself: M nodes plan
    (three tiers), M + 1 are refused with those numbers (it said 8,192 GPUs for the
    65,536-GPU SuperPOD limit, dividing the GPUs by the GPUs per node)."""
    with pytest.raises(ConfigError) as e:
        cluster.plan(fabric, 10 ** 6, 8, radix, 1.0)
    most = int(str(e.value).split("at most about ")[1].split(" GPUs")[0].replace(",", ""))
    assert f"{most:,} GPUs, {most // 8:,} nodes" in str(e.value)
    assert cluster.plan(fabric, most // 8, 8, radix, 1.0).tiers == 3
    with pytest.raises(ConfigError, match=f"at most about {most:,} GPUs"):
        cluster.plan(fabric, most // 8 + 1, 8, radix, 1.0)
    if radix == 64:
        assert most == 65_536
