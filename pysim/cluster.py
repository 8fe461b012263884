"""Clusters of DGX-like nodes joined by an InfiniBand fabric (`topology.kind = "cluster"`).

A node (`topology.node`, one of NODE_TYPES) is an NVSwitch island: its GPUs each link to one
switch node that stands for the node's NVSwitch chips (a non-blocking crossbar at each GPU's
NVLink bandwidth), and each GPU has its own InfiniBand NIC, linked to a leaf switch of the
fabric. The fabric (`topology.fabric`) is a folded Clos of switches of `topology.radix` ports:

- "fat-tree": GPU NICs fill the leaves in order (node by node);
- "rail-optimised": a scalable unit (SU) of as many nodes as a leaf has down ports has one leaf
  per rail, and GPU r of every node of the SU links to rail r's leaf (NVIDIA's DGX SuperPOD).

A leaf gives `radix / (1 + oversubscription)` ports to the tier above and the rest to GPUs.
Up to `radix` leaves hang from one tier of spines (two tiers); beyond, pods of radix/2 leaves
each have their own spines, joined by core switches (three tiers, non-blocking above the
leaves). Where a tier has fewer switches below than it has ports, a switch pair gets parallel
links (as NVIDIA's reference designs cable them), so a tier has as few switches as its ports
allow.

Routes are computed here, not searched: inside a node through its NVSwitch, across nodes up
to the lowest common tier and down (up/down routing of a fat-tree, deadlock-free: no route
turns up after going down), with the upward port chosen from the destination ("D-mod-k", as
InfiniBand subnet managers' fat-tree routing does: routes to the GPUs of one leaf spread over
its uplinks). The table is built with array operations per block of rows; the builder never
loops over GPUs in Python.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import KEY_MAP, MAX_DELAY_CYCLES, POS, Key, declare, short
from pysim.routing import Rule
from pysim.topology import (BUILDERS, MAX_RULE_NODES, Topology, _apply_nic_defaults, at_clock,
                            cycles_text, kind_came, ns_to_cycles)

# Routes are by rule (no table of every pair): a cluster has at most as many nodes as any network
# routed by rule (65,536 GPUs make 78,848 nodes with their NVSwitches and three tiers of
# switches).
MAX_CLUSTER_NODES = MAX_RULE_NODES


@dataclass(frozen=True)
class NodeType:
    """A server: `gpus` GPUs of `preset`, NVLink bandwidth per GPU per direction through the
    node's NVSwitches, one InfiniBand NIC per GPU, the fabric's switches' radix and the
    latencies assumed."""
    gpus: int
    preset: str
    nvlink_gbps: float        # GB/s per GPU per direction
    nic_gbps: float           # GB/s per NIC per direction
    radix: int                # ports of the fabric's switches
    nvlink_latency_ns: float
    ib_latency_ns: float      # per link of the fabric (cable and switch)
    source: str
    nvls: str = ""            # its NVSwitches' NVLink SHARP (in-switch reduction), or ""
    no_nvls: str = ""         # why it has none (nvls "")


NODE_TYPES = {
    "dgx-a100": NodeType(
        gpus=8, preset="a100", nvlink_gbps=300.0, nic_gbps=25.0, radix=40,
        nvlink_latency_ns=100.0, ib_latency_ns=150.0,
        source="NVIDIA DGX A100 datasheet and user guide (2020-2021): 8 A100 SXM4 80 GB, six "
               "NVSwitches, 600 GB/s NVLink 3 per GPU (12 links of 25 GB/s each way: 300 "
               "GB/s per direction), eight single-port ConnectX-6 HDR InfiniBand NICs of "
               "200 Gb/s (25 GB/s per direction), one per GPU; fabric of QM8700-class HDR "
               "switches of 40 ports (NVIDIA Quantum HDR QM8700 datasheet). Latencies "
               "assumed: 100 ns per NVLink hop, 150 ns per InfiniBand link and switch",
        no_nvls="its second-generation NVSwitches do not reduce: NVLink SHARP came with the "
                "third generation, in the DGX H100 (NVIDIA Hopper architecture whitepaper, "
                "2022)"),
    "dgx-h100": NodeType(
        gpus=8, preset="h100", nvlink_gbps=450.0, nic_gbps=50.0, radix=64,
        nvlink_latency_ns=100.0, ib_latency_ns=150.0,
        source="NVIDIA DGX H100 datasheet (2023): 8 H100 SXM5 80 GB, four NVSwitches, 900 "
               "GB/s NVLink 4 per GPU (18 links of 25 GB/s each way: 450 GB/s per "
               "direction), eight ConnectX-7 NDR InfiniBand ports of 400 Gb/s (50 GB/s per "
               "direction), one per GPU; fabric of QM9700-class NDR switches of 64 ports "
               "(NVIDIA Quantum-2 QM9700 datasheet). Latencies assumed as for dgx-a100",
        nvls="third-generation NVSwitches with NVLink SHARP"),
}

FABRICS = ("fat-tree", "rail-optimised")


declare(
    Key("topology", "node", "str", "dgx-a100", "-",
        "Cluster: the kind of node (server), one of " + ", ".join(NODE_TYPES) + ".",
        None, lambda: list(NODE_TYPES)),
    Key("topology", "node_count", "int", 4, "nodes",
        "Cluster: how many nodes (servers of topology.node).",
        (lambda x: x >= 1, "an integer >= 1")),
    Key("topology", "fabric", "str", "rail-optimised", "-",
        "Cluster: how GPU NICs meet the leaf switches: 'fat-tree' (node by node) or "
        "'rail-optimised' (GPU r of every node of a scalable unit on rail r's leaf).",
        None, lambda: list(FABRICS)),
    Key("topology", "radix", "int", None, "ports",
        "Cluster: ports per fabric switch (default: the node type's, 40 for HDR, 64 for NDR).",
        (lambda x: 2 <= x <= 4096, "an integer from 2 to 4096")),
    Key("topology", "oversubscription", "float", 1.0, "-",
        "Cluster: a leaf's ports to GPUs per port to the tier above (1: non-blocking).",
        (lambda x: 1.0 <= x <= 64.0, "a number from 1 to 64")),
    Key("topology", "nvlink_gbps", "float", None, "GB/s",
        "Cluster: NVLink bandwidth per GPU per direction to its node's NVSwitch (default: "
        "the node type's).", POS),
    Key("topology", "nic_gbps", "float", None, "GB/s",
        "Cluster: each GPU's InfiniBand NIC per direction (default: the node type's).",
        POS),
    Key("topology", "fabric_gbps", "float", None, "GB/s",
        "Cluster: each link between fabric switches, per direction (default: nic_gbps).",
        POS),
    Key("topology", "nvlink_latency_ns", "float", None, "ns",
        "Cluster: latency of a GPU-NVSwitch link (default: the node type's).",
        POS),
    Key("topology", "nvls", "bool", False, "-",
        "Cluster of one node whose NVSwitches reduce (dgx-h100; not dgx-a100's): its "
        "NVSwitch reduces and multicasts (NVLink SHARP, for workload.nccl_algorithm = "
        "'nvls'): adds the switch's engine as node nvls0.", None),
    Key("topology", "fabric_latency_ns", "float", None, "ns",
        "Cluster: latency of each InfiniBand link, switch included (default: the node "
        "type's).", POS),
)

KEYS_READ = {"node", "node_count", "fabric", "radix", "oversubscription", "nvlink_gbps",
             "nic_gbps", "fabric_gbps", "nvlink_latency_ns", "fabric_latency_ns", "nvls"}


@dataclass
class Plan:
    """The shape of a fabric: per GPU its leaf and its port on it; the tiers' sizes."""
    tiers: int                # 0 (one node, no fabric), 1 (one leaf), 2 (leaf, spine) or 3 (leaf, spine, core)
    down: int                 # a leaf's ports to GPUs
    up: int                   # a leaf's ports to the tier above
    leaves: int
    leaf: np.ndarray          # per GPU
    pos: np.ndarray           # per GPU, its port on its leaf
    spines: int = 0           # two tiers: spines; three: spines per pod (= up)
    m1: int = 1               # links per (leaf, spine) pair
    pods: int = 1
    pod_leaves: int = 0       # three tiers: leaves per pod
    spine_up: int = 0         # three tiers: a spine's ports to the cores
    cores: int = 0            # three tiers: cores per spine index (a group)
    m2: int = 1               # links per (spine, core) pair


def _divisor_at_least(n, lo):
    """The smallest divisor of n that is >= lo (n itself at most)."""
    for d in range(max(1, lo), n + 1):
        if n % d == 0:
            return d
    return n


def plan(fabric, node_count, gpus, radix, over):
    """The fabric's shape for node_count nodes of `gpus` GPUs (ConfigError if it cannot be
    built from switches of `radix` ports in three tiers)."""
    up = max(1, int(round(radix / (1.0 + over))))
    down = radix - up
    if down < 1:
        raise ConfigError(f"topology.radix = {radix}: a leaf needs at least one port to GPUs "
                          f"and one to the tier above")
    E = node_count * gpus
    g = np.arange(E, dtype=np.int64)
    if node_count == 1:        # one node: its NVSwitch alone, no fabric
        return Plan(tiers=0, down=down, up=up, leaves=0, leaf=np.zeros(E, np.int64),
                    pos=g)
    if fabric == "fat-tree":
        leaf, pos = g // down, g % down
        leaves = -(-E // down)
    else:                      # rail-optimised: a scalable unit of `down` nodes
        node, rail = g // gpus, g % gpus
        leaf, pos = (node // down) * gpus + rail, node % down
        leaves = int(leaf.max()) + 1
    p = Plan(tiers=1, down=down, up=up, leaves=leaves, leaf=leaf, pos=pos)
    if leaves == 1:
        return p
    if leaves <= radix:
        p.tiers = 2
        p.spines = _divisor_at_least(up, -(-up * leaves // radix))
        p.m1 = up // p.spines
        return p
    p.tiers = 3
    p.pod_leaves = radix // 2
    if fabric == "rail-optimised" and p.pod_leaves >= gpus:
        p.pod_leaves -= p.pod_leaves % gpus         # whole scalable units in a pod
    p.pods = -(-leaves // p.pod_leaves)
    most = radix * p.pod_leaves * down       # GPUs: radix pods of pod_leaves leaves of `down`
    if p.pods > radix:
        raise ConfigError(
            f"topology.node_count = {node_count}: {E:,} GPUs need {p.pods} pods of "
            f"{p.pod_leaves} leaves, and a core switch of topology.radix = {radix} ports "
            f"joins at most {radix}; three tiers of these switches take at most about "
            + (f"{most:,} GPUs, {most // gpus:,} nodes" if most >= gpus else
               f"{most:,} GPUs, not one node of {gpus}") + " (a larger radix or fewer nodes)")
    p.spines = up                        # per pod: one link from each leaf to each spine
    p.spine_up = radix - p.pod_leaves    # (a spine's other ports go to the cores)
    p.cores = _divisor_at_least(p.spine_up, -(-p.spine_up * p.pods // radix))
    p.m2 = p.spine_up // p.cores
    return p


def _param(cfg, name, default):
    v = getattr(cfg.topology, name)
    return default if v is None else v


def _latency(cfg, what, name, default):
    """A cluster's link latency in cycles, refused past MAX_DELAY_CYCLES naming its key (or
    the node type's default) and the clock: the links are int64 arrays, built before the
    network's own check could name them."""
    ns = _param(cfg, name, default)
    cycles = ns_to_cycles(ns, cfg.network.clock_ghz)
    if cycles > MAX_DELAY_CYCLES:
        given = f" = {ns:g}" if getattr(cfg.topology, name) is not None else \
            f", {cfg.topology.node}'s {ns:g} ns,"
        raise ConfigError(f"{what}: latency {cycles_text(cycles)}; expected at most "
                          f"{MAX_DELAY_CYCLES:,} (topology.{name}{given}{at_clock(cfg)})")
    return cycles


# a cluster's keys that only a fabric reads: of one node (no fabric), and of one leaf switch
# (no link between fabric switches)
_FABRIC_KEYS = ("fabric", "radix", "oversubscription", "nic_gbps", "fabric_gbps",
                "fabric_latency_ns")
_ABOVE_LEAF_KEYS = ("oversubscription", "fabric_gbps")


def _refuse_unused_fabric(cfg, p, N, G, radix):
    """Refuse a fabric key the config gives, other than at its default, that the cluster's
    shape leaves unread, naming it, its value and why: a key typed, or one a file holds beside the shape it gave (not one a
    system named by topology.file brings, nor a file's once an override changed the shape:
    `selene --set topology.node_count=1`)."""
    if p.tiers == 0:
        keys, why = _FABRIC_KEYS, (f"topology.node_count = 1, one node's NVSwitch joining its "
                                   f"{G} GPUs with no fabric; leave it out, or set "
                                   f"topology.node_count above 1")
    elif p.tiers == 1:
        keys, why = _ABOVE_LEAF_KEYS, (f"the {N * G} GPUs of topology.node_count = {N} take "
                                       f"one leaf switch of topology.radix = {radix} ports "
                                       f"({p.down} to GPUs), with no switch above it; leave it "
                                       f"out")
    else:
        return
    reshaped = any(f"topology.{k}" in cfg.typed for k in ("node", "node_count", "fabric",
                                                           "radix", "oversubscription"))
    for name in keys:
        path = f"topology.{name}"
        if path in cfg.explicit and path not in cfg.origin and \
                (path in cfg.typed or not reshaped) and \
                getattr(cfg.topology, name) != KEY_MAP[path].default:
            raise ConfigError(f"{path} = {short(getattr(cfg.topology, name))} has no effect: "
                              f"{why}")


def build_cluster(cfg):
    tp = cfg.topology
    for name in ("link_gbps", "link_latency_ns"):
        if f"topology.{name}" in cfg.explicit:
            raise ConfigError(f"topology.{name} is not used by topology.kind = 'cluster'"
                              f"{kind_came(cfg, f'topology.{name}')} (its links are set by "
                              f"topology.nvlink_gbps, nic_gbps, fabric_gbps and their "
                              f"latencies)")
    if tp.node not in NODE_TYPES:
        raise ConfigError(f"topology.node = {tp.node!r}: unknown; known: "
                          f"{', '.join(NODE_TYPES)}")
    if tp.fabric not in FABRICS:
        raise ConfigError(f"topology.fabric = {tp.fabric!r}: expected one of "
                          f"{', '.join(FABRICS)}")
    nt = NODE_TYPES[tp.node]
    N, G = int(tp.node_count), nt.gpus
    radix = int(_param(cfg, "radix", nt.radix))
    if N * (G + 1) > MAX_CLUSTER_NODES:      # (before the plan's arrays of every GPU)
        raise ConfigError(f"topology.node_count = {N}: {N * G:,} GPUs and {N:,} NVSwitches, "
                          f"before any fabric switch; at most {MAX_CLUSTER_NODES:,} nodes "
                          f"are supported")
    p = plan(tp.fabric, N, G, radix, float(tp.oversubscription))
    _refuse_unused_fabric(cfg, p, N, G, radix)
    E = N * G
    n_spine = p.spines if p.tiers == 2 else p.pods * p.spines if p.tiers == 3 else 0
    n_core = p.up * p.cores if p.tiers == 3 else 0
    n_sw = p.leaves + n_spine + n_core
    n = E + N + n_sw
    if n > MAX_CLUSTER_NODES:
        raise ConfigError(f"topology.node_count = {N}: {n:,} nodes ({E:,} GPUs, {N:,} "
                          f"NVSwitches, {n_sw:,} fabric switches); at most "
                          f"{MAX_CLUSTER_NODES:,} are supported")
    clock = cfg.network.clock_ghz
    nv_bpc = _param(cfg, "nvlink_gbps", nt.nvlink_gbps) / clock
    nic_bpc = _param(cfg, "nic_gbps", nt.nic_gbps) / clock
    fab_bpc = _param(cfg, "fabric_gbps", _param(cfg, "nic_gbps", nt.nic_gbps)) / clock
    nv_lat = _latency(cfg, "the NVLinks (GPU-NVSwitch)", "nvlink_latency_ns",
                      nt.nvlink_latency_ns)
    ib_lat = _latency(cfg, "the InfiniBand links", "fabric_latency_ns", nt.ib_latency_ns)

    # node ids: GPUs, NVSwitches, leaves, spines, cores
    o_nvs = E
    o_leaf = E + N
    o_spine = o_leaf + p.leaves
    o_core = o_spine + n_spine
    assert o_core + n_core == n
    g = np.arange(E, dtype=np.int64)
    node_of = g // G
    # channels, in blocks (a link's two directions side by side: 2k out/up, 2k + 1 back)
    src, dst, bpc, lat, rank = [], [], [], [], []

    def block(a, b, rate, latency, tier):
        """Links a[i] - b[i], a's end `tier` steps up from the GPUs: channel 2i up, 2i + 1
        down. Ranks (a topological order of every route's channels, up then down): up from
        tier t, t; down to it, 5 - t."""
        s = np.empty(2 * a.size, np.int64)
        d = np.empty(2 * a.size, np.int64)
        s[0::2], s[1::2], d[0::2], d[1::2] = a, b, b, a
        src.append(s)
        dst.append(d)
        bpc.append(np.full(s.size, rate))
        lat.append(np.full(s.size, latency, np.int64))
        rank.append(np.tile(np.array([tier, 5 - tier], np.int32), a.size))
        return sum(x.size for x in src) - s.size            # the block's first channel

    c_nv = block(g, o_nvs + node_of, nv_bpc, nv_lat, 0)      # GPU g: c_nv + 2g, back + 1
    c_nic = block(g, o_leaf + p.leaf, nic_bpc, ib_lat, 0) if p.tiers else None
    c_up = c_top = None
    if p.tiers == 2:                    # leaf l, uplink j (to spine j // m1): c_up + 2(l up + j)
        l, j = np.divmod(np.arange(p.leaves * p.up, dtype=np.int64), p.up)
        c_up = block(o_leaf + l, o_spine + j // p.m1, fab_bpc, ib_lat, 1)
    elif p.tiers == 3:                  # leaf l, uplink j -> its pod's spine j
        l, j = np.divmod(np.arange(p.leaves * p.up, dtype=np.int64), p.up)
        c_up = block(o_leaf + l, o_spine + (l // p.pod_leaves) * p.spines + j, fab_bpc,
                     ib_lat, 1)
        # spine s = pod * up + a, its port k -> core a * cores + k // m2
        s, k = np.divmod(np.arange(n_spine * p.spine_up, dtype=np.int64), p.spine_up)
        c_top = block(o_spine + s, o_core + (s % p.spines) * p.cores + k // p.m2, fab_bpc,
                      ib_lat, 2)
    n_nvls = 0
    if tp.nvls:
        if not nt.nvls:
            raise ConfigError(f"topology.nvls = true: topology.node = {tp.node!r} has no NVLink "
                              f"SHARP ({nt.no_nvls}); expected a node whose NVSwitches reduce: "
                              f"{', '.join(k for k, v in NODE_TYPES.items() if v.nvls)}")
        if N != 1:
            raise ConfigError(f"topology.nvls = true: NVLink SHARP is modelled within one node "
                              f"(topology.node_count = 1), not {N}")
        n_nvls = 1                         # the switch's engine: a link as wide as its ports
        block(np.array([n]), np.array([o_nvs]), G * nv_bpc, nv_lat, 0)
    ch_src = np.concatenate(src)
    names = ([f"gpu{i}" for i in range(E)] + [f"nvswitch{i}" for i in range(N)] +
             [f"leaf{i}" for i in range(p.leaves)] + [f"spine{i}" for i in range(n_spine)] +
             [f"core{i}" for i in range(n_core)] + ["nvls0"] * n_nvls)
    kinds = ["npu"] * E + ["switch"] * (n - E) + ["host"] * n_nvls
    own = {} if (tp.npu or {}).get("preset") else {"preset": nt.preset}
    t = Topology(name=f"{tp.node}-x{N}-{tp.fabric}", node_names=names, node_kinds=kinds,
                 routing="given", node_mem=[own] * E + [{}] * (n - E + n_nvls))
    t.ch_src = ch_src.tolist()
    t.ch_dst = np.concatenate(dst).tolist()
    t.ch_bytes_per_cycle = np.concatenate(bpc).tolist()
    t.ch_latency_cycles = np.concatenate(lat).tolist()
    C = ch_src.size
    t.ch_dim = [-1] * C
    t.ch_dir = [0] * C
    t.ch_wrap = [False] * C
    # a GPU's NIC into its own router carries what its NVLinks and its InfiniBand NIC can
    # carry together, rounded up to whole flits per cycle so that each of its lanes is as fast
    # as a link's (unless [topology.nic.npu] says otherwise)
    F = cfg.network.flit_bytes
    both = math.ceil((nv_bpc + (nic_bpc if p.tiers else 0.0)) / F - 1e-9) * F * clock
    _apply_nic_defaults(t, cfg, [{"injection_gbps": both, "ejection_gbps": both}] * E +
                        [{}] * (n - E) + [{"injection_gbps": G * nv_bpc * clock,
                                           "ejection_gbps": G * nv_bpc * clock}] * n_nvls)
    if (tp.nic or {}).get("npu"):
        _apply_nic_defaults(t, cfg)
    t.rule = Rule(_routes(p, n, E, G, o_nvs, o_leaf, o_spine, o_core, c_nv, c_nic, c_up,
                          c_top, C - 2 if n_nvls else None), np.concatenate(rank))
    t.cluster = dict(node=tp.node, nodes=N, gpus=E, fabric=tp.fabric, tiers=p.tiers,
                     radix=radix, leaves=p.leaves, spines=n_spine, cores=n_core,
                     down=p.down, up=p.up, gpus_per_node=G, nvls=bool(n_nvls),
                     nvlink_gbps=nv_bpc * clock, nic_gbps=nic_bpc * clock, clock_ghz=clock,
                     preset=nt.preset)
    return t


def _routes(p, n, E, G, o_nvs, o_leaf, o_spine, o_core, c_nv, c_nic, c_up, c_top, c_e):
    """The routes as rows (csim's RT_ROWS; pysim.routing.Rule): [u, d], the channel node u
    takes towards GPU d (-1 towards a switch and where no route passes: an NVSwitch towards
    another node's GPUs), is a row shared by the nodes of a kind plus the node's offset,
    except for the few entries of its own part of the cluster (its node, its leaf, its pod).
    With an NVLink SHARP engine (c_e: its link's first channel), that engine is node n."""
    n_all = n + (c_e is not None)
    d = np.arange(E, dtype=np.int64)
    node_d = d // G
    leaf_d, pos_d = p.leaf, p.pos
    rows, off = [], np.zeros(n_all, np.int64)
    cls = np.zeros(n_all, np.int64)
    exc = []                                  # (node, destination, channel) arrays

    def row(values):
        v = np.full(n_all, -1, np.int64)
        v[:E] = values
        rows.append(v)
        return len(rows) - 1

    def kind(lo, hi, values, offset):
        cls[lo:hi] = row(values)
        off[lo:hi] = offset(np.arange(lo, hi, dtype=np.int64))

    # a GPU: through its NIC (GPU g: channel c_nic + 2g, back + 1), but to its own node's
    # GPUs through the NVSwitch (c_nv + 2g, back + 1)
    kind(0, E, 0 if p.tiers else -1, lambda u: (c_nic if p.tiers else 0) + 2 * u)
    mate = (node_d * G)[:, None] + np.arange(G)[None, :]
    u = np.repeat(d, G)
    other = mate.reshape(-1) != u
    exc.append((u[other], mate.reshape(-1)[other], c_nv + 2 * u[other]))
    # an NVSwitch: down to its node's GPUs (nowhere else)
    kind(o_nvs, o_leaf, -1, lambda u: 0 * u)
    exc.append((o_nvs + node_d, d, c_nv + 2 * d + 1))
    if c_e is not None:                        # the engine: to and from every GPU
        exc.append((d, np.full(E, n), c_nv + 2 * d))
        exc.append((np.array([o_nvs]), np.array([n]), np.array([c_e + 1])))
        kind(n, n + 1, c_e, lambda u: 0 * u)
    down_d = c_nic + 2 * d + 1 if p.tiers else None     # leaf(d) -> d
    if p.tiers == 1:
        kind(o_leaf, o_leaf + 1, down_d, lambda u: 0 * u)
    elif p.tiers >= 2:
        # a leaf: up by the uplink the destination's port picks, but down to its own GPUs
        j = (pos_d % p.spines) * p.m1 if p.tiers == 2 else pos_d % p.up
        kind(o_leaf, o_leaf + p.leaves, 2 * j, lambda u: c_up + 2 * (u - o_leaf) * p.up)
        exc.append((o_leaf + leaf_d, d, down_d))
    if p.tiers == 2:                                    # a spine: down to leaf(d)
        kind(o_spine, o_spine + p.spines, c_up + 2 * leaf_d * p.up + 1,
             lambda u: 2 * (u - o_spine) * p.m1)
    elif p.tiers == 3:
        # a spine (pod, a): up to the core of its group that the destination's leaf picks,
        # but down to the leaves of its own pod
        pod_d = leaf_d // p.pod_leaves
        grp_d = (leaf_d % p.pod_leaves) % p.cores
        kind(o_spine, o_core, 2 * grp_d * p.m2, lambda u: c_top + 2 * (u - o_spine) * p.spine_up)
        a = np.arange(p.spines, dtype=np.int64)
        here = pod_d[:, None] * p.spines + a[None, :]            # per GPU, its pod's spines
        exc.append((o_spine + here.reshape(-1), np.repeat(d, p.spines),
                    (c_up + 2 * (leaf_d[:, None] * p.up + a[None, :]) + 1).reshape(-1)))
        # a core (a, c): down to spine a of the destination's pod
        kind(o_core, n, c_top + 2 * pod_d * p.spines * p.spine_up + 1,
             lambda u: 2 * (((u - o_core) // p.cores) * p.spine_up +
                            ((u - o_core) % p.cores) * p.m2))
    eu = np.concatenate([np.asarray(x[0], np.int64) for x in exc])
    ed = np.concatenate([np.asarray(x[1], np.int64) for x in exc])
    ec = np.concatenate([np.asarray(x[2], np.int64) for x in exc])
    order = np.lexsort((ed, eu))
    ptr = np.zeros(n_all + 1, np.int64)
    np.cumsum(np.bincount(eu, minlength=n_all), out=ptr[1:])
    return dict(kind="rows", n=n_all, cls=cls, off=off, vec=np.concatenate(rows),
                exc_ptr=ptr, exc_d=ed[order], exc_c=ec[order])


BUILDERS["cluster"] = (build_cluster, KEYS_READ)
