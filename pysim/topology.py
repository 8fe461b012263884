"""Topologies: nodes and directed channels with per-channel bandwidth and latency.

Builders are registered by name in BUILDERS; `build(cfg)` picks one from `topology.kind`.
A builder declares which `topology.*` keys it reads, so a key given for another kind is an
error rather than silently ignored.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from pysim import systems
from pysim.config import load
from pysim.errors import ConfigError, PysimWarning
from pysim.models.presets import check_efficiency, check_preset
from pysim.schema import (POS, Key, all_positive, check_fields, declare, fields_check,
                          positive_number, raising, suggest)

NIC_FIELDS = ("injection_gbps", "ejection_gbps")
NPU_FIELDS = ("tflops", "tflops_fp32", "tflops_fp16", "tflops_bf16", "hbm_gbps", "hbm_gb",
              "reduce_gbps", "offload_gbps", "offload_sram_mb", "offload_pieces", "sms")


def check_npu_table(table):
    """[topology.npu]: numeric fields > 0, a preset's name, an efficiency table."""
    numeric = {k: v for k, v in table.items() if k not in ("preset", "efficiency")}
    check_fields("topology.npu", numeric, NPU_FIELDS + ("preset", "efficiency"))
    if "preset" in table:
        check_preset("topology.npu.preset", table["preset"])
    if "efficiency" in table:
        check_efficiency("topology.npu.efficiency", table["efficiency"])

NODE_KINDS = ("npu", "mem", "host", "switch")

# Routes by table hold an entry per pair of nodes (16,384 nodes: a 1 GiB table); routes by rule
# (dimension order on meshes, rings and tori; a cluster's up/down: pysim.routing) hold none,
# and what bounds their networks is what each node and channel costs.
MAX_NODES = 16384
MAX_RULE_NODES = 262144
MAX_CHANNELS = 4_000_000
MAX_ROUTE_WORK = 8_000_000_000   # endpoints x channels of a graph routed by tables (the
                                 # shortest-path search: about 20 s at this size)


def check_size(setting, nodes, channels, by_rule=False):
    """Refuse a network of fewer than two nodes or one too large to build, before anything is
    allocated; `setting` names what set its size ("topology.size = 9", say); by_rule: its
    routes are by rule (no table of every pair)."""
    if nodes < 2:
        raise ConfigError(f"{setting}: a network of {nodes} node; expected at least 2")
    if by_rule and nodes > MAX_RULE_NODES:
        raise ConfigError(f"{setting}: {nodes:,} nodes; at most {MAX_RULE_NODES:,} are "
                          f"supported")
    if not by_rule and nodes > MAX_NODES:
        raise ConfigError(f"{setting}: {nodes:,} nodes; at most {MAX_NODES:,} are supported "
                          f"(the routing table holds an entry per pair of nodes)")
    if channels > MAX_CHANNELS:
        raise ConfigError(f"{setting}: {channels:,} channels; at most {MAX_CHANNELS:,} are "
                          f"supported")


@dataclass
class Topology:
    """Nodes (each a router; non-switch nodes also have a NIC) and directed channels."""
    name: str
    node_names: list
    node_kinds: list
    dims: tuple = ()                 # sizes per dimension, for regular topologies
    coords: np.ndarray | None = None  # (n_nodes, n_dims) coordinates, regular topologies
    wrap: tuple = ()                 # per dimension: has wrap-around links
    bidirectional: bool = True
    routing: str = "dor"             # default routing function for this topology
    ch_src: list = field(default_factory=list)
    ch_dst: list = field(default_factory=list)
    ch_bytes_per_cycle: list = field(default_factory=list)
    ch_latency_cycles: list = field(default_factory=list)
    ch_dim: list = field(default_factory=list)   # dimension the channel moves in (-1: none)
    ch_dir: list = field(default_factory=list)   # +1 / -1 along its dimension (0: none)
    ch_wrap: list = field(default_factory=list)  # True for wrap-around (dateline) channels
    node_injection_gbps: list = field(default_factory=list)  # per node override, or None
    node_ejection_gbps: list = field(default_factory=list)
    node_mem: list = field(default_factory=list)   # per node: memory / roofline overrides
    tab: np.ndarray | None = None    # routing "given": the routes, fixed by whoever built it
    rule: object = None              # ... or as a rule (pysim.routing.Rule; `table` makes
                                     # the table from it)

    @property
    def table(self):
        """Routing "given": table[u, d], the channel u takes towards d (made from the rule
        where the routes are by rule), or None."""
        if self.tab is None and self.rule is not None:
            self.tab = self.rule.table()
        return self.tab

    @table.setter
    def table(self, value):
        """The routes given as a table: they replace a rule the topology had."""
        self.tab = value
        self.rule = None

    @property
    def n_nodes(self):
        return len(self.node_names)

    @property
    def n_channels(self):
        return len(self.ch_src)

    def endpoints(self):
        """Indices of nodes that have a NIC (every kind but switch), in node order."""
        return [i for i, k in enumerate(self.node_kinds) if k != "switch"]

    def node_index(self):
        """{node name: node id}, made once per list of names (a run asks for it per
        collective group; a cluster has 78,848 nodes)."""
        names = self.node_names
        got = self.__dict__.get("_index")
        if got is None or got[0] is not names or got[1] != len(names):
            got = self.__dict__["_index"] = (names, len(names),
                                             {x: i for i, x in enumerate(names)})
        return got[2]

    def channel_ends(self):
        """(ch_src, ch_dst) as int64 arrays, made once per list of channels."""
        got = self.__dict__.get("_ends")
        if got is None or got[0] is not self.ch_src or got[1] != len(self.ch_src) or \
                got[2] is not self.ch_dst:
            got = self.__dict__["_ends"] = (self.ch_src, len(self.ch_src), self.ch_dst,
                                            np.asarray(self.ch_src, np.int64),
                                            np.asarray(self.ch_dst, np.int64))
        return got[3], got[4]

    def node_groups(self, kind):
        """The nodes of `kind` in groups that share their own table (`node_mem`: the same
        object, or none at all), each group a list of node indices in node order, the groups
        in the order of their first node: whatever a node's own table and the configuration
        decide is the same across a group, worked out once for its first node."""
        own = self.node_mem
        idx = [i for i, k in enumerate(self.node_kinds) if k == kind]
        if not idx or not own:
            return [idx] if idx else []
        tables = [own[i] for i in idx]
        first = tables[0]
        if all(t is first for t in tables):             # (a cluster's NPUs: one table)
            return [idx]
        # (by array: a graph's nodes each have a table of their own)
        key = np.fromiter(map(id, tables), np.uint64, len(tables))
        _, at, inv = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(inv.reshape(-1), kind="stable")
        cuts = np.cumsum(np.bincount(inv.reshape(-1), minlength=at.size))[:-1]
        groups = np.split(np.asarray(idx, np.int64)[order], cuts)
        return [groups[g].tolist() for g in np.argsort(at, kind="stable")]

    def add_channel(self, a, b, bytes_per_cycle, latency_cycles, dim=-1, direction=0,
                    wrap=False):
        self.ch_src.append(a)
        self.ch_dst.append(b)
        self.ch_bytes_per_cycle.append(float(bytes_per_cycle))
        self.ch_latency_cycles.append(int(latency_cycles))
        self.ch_dim.append(dim)
        self.ch_dir.append(direction)
        self.ch_wrap.append(bool(wrap))
        return len(self.ch_src) - 1

    def channel_name(self, c):
        return f"{self.node_names[self.ch_src[c]]}->{self.node_names[self.ch_dst[c]]}"


PAST_FLOAT = 2 ** 1024      # ns_to_cycles of a product no float holds


def ns_to_cycles(ns: float, clock_ghz: float) -> int:
    """A latency in ns as whole cycles of the network clock (rounded up, at least 1)."""
    cycles = ns * clock_ghz
    if not math.isfinite(cycles):   # (1e308 ns at 10 GHz): past every limit, which then
        return PAST_FLOAT           # refuses it naming the key
    return max(1, int(math.ceil(cycles - 1e-9)))


def cycles_text(cycles: int) -> str:
    """A latency in cycles as a refusal names it: '2,000,000 cycles', '2e+301 cycles' (past
    20 digits), or 'past any float (in cycles)' (ns_to_cycles' PAST_FLOAT)."""
    if cycles >= PAST_FLOAT:
        return "past any float (in cycles)"
    digits = str(cycles)
    try:
        return f"{cycles:,} cycles" if len(digits) <= 20 else f"{float(cycles):.3g} cycles"
    except OverflowError:                 # (an integer past any float, typed as one)
        return f"{digits[0]}.{digits[1:3]}e+{len(digits) - 1} cycles"


def at_clock(cfg) -> str:
    """' at network.clock_ghz = 10', what turns a latency in ns into cycles, for a refusal
    naming a key in ns ('' at the default 1 GHz, where ns are cycles)."""
    clock = cfg.network.clock_ghz
    return "" if clock == 1 else f" at network.clock_ghz = {clock:g}"


def _gbps_to_bpc(gbps, cfg):
    return gbps / cfg.network.clock_ghz


def link_params(cfg):
    """(bytes per cycle, latency in cycles) of the links of a generated topology."""
    net, topo = cfg.network, cfg.topology
    bpc = float(net.flit_bytes) if topo.link_gbps is None else _gbps_to_bpc(topo.link_gbps, cfg)
    lat = 1 if topo.link_latency_ns is None else ns_to_cycles(topo.link_latency_ns,
                                                             net.clock_ghz)
    return bpc, lat


def _apply_nic_defaults(t, cfg, per_node=None):
    defaults = cfg.topology.nic or {}          # (checked with the config: schema.fields_check)
    per_node = per_node or [{} for _ in t.node_names]
    t.node_injection_gbps = []
    t.node_ejection_gbps = []
    for kind, own in zip(t.node_kinds, per_node):
        d = defaults.get(kind, {})
        t.node_injection_gbps.append(own.get("injection_gbps", d.get("injection_gbps")))
        t.node_ejection_gbps.append(own.get("ejection_gbps", d.get("ejection_gbps")))


def _regular(name, dims, wrap, bidirectional, cfg, routing, key="topology.dims"):
    dims = tuple(int(k) for k in dims)
    n = math.prod(dims)
    check_size(f"{key} = {list(dims) if key == 'topology.dims' else dims[0]}", n,
               n * 2 * len(dims), by_rule=True)
    coords = np.array(np.unravel_index(np.arange(n), dims, order="F")).T.reshape(n, len(dims))
    if len(dims) == 1:
        names = [f"n{i}" for i in range(n)]
    else:
        form = "n" + "_".join(["%d"] * len(dims))
        names = [form % tuple(c) for c in coords.tolist()]
    t = Topology(name=name, node_names=names, node_kinds=["npu"] * n, dims=dims,
                 coords=coords, wrap=tuple(wrap), bidirectional=bidirectional, routing=routing)
    bpc, lat = link_params(cfg)
    per_dim = cfg.topology.dim_link_gbps
    if per_dim is not None and len(per_dim) != len(dims):
        raise ConfigError(f"topology.dim_link_gbps = {per_dim}: expected {len(dims)} values, "
                          f"one per dimension of {list(dims)}")
    strides = np.cumprod((1,) + dims[:-1])
    # the channels node by node, per node by dimension, + before - (columns: a 64x32x32
    # torus has 393,216)
    ways = (+1, -1) if bidirectional else (+1,)
    D, S = len(dims), len(ways)
    node = np.arange(n, dtype=np.int64)
    src = np.repeat(node, D * S).reshape(n, D, S)
    dst = np.zeros((n, D, S), np.int64)
    is_wrap = np.zeros((n, D, S), bool)
    ok = np.zeros((n, D, S), bool)
    for d, k in enumerate(dims):
        x = coords[:, d].astype(np.int64)
        for m, s in enumerate(ways):
            y = x + s
            is_wrap[:, d, m] = (y < 0) | (y >= k)
            ok[:, d, m] = (k > 1) & (~is_wrap[:, d, m] | bool(wrap[d]))
            dst[:, d, m] = node + (y % k - x) * int(strides[d])
    b = np.array([bpc if per_dim is None else _gbps_to_bpc(per_dim[d], cfg)
                  for d in range(D)], np.float64)
    dim = np.broadcast_to(np.arange(D)[None, :, None], (n, D, S))
    way = np.broadcast_to(np.array(ways)[None, None, :], (n, D, S))
    t.ch_src, t.ch_dst = src[ok].tolist(), dst[ok].tolist()
    t.ch_bytes_per_cycle = b[dim[ok]].tolist()
    t.ch_latency_cycles = [int(lat)] * int(ok.sum())
    t.ch_dim, t.ch_dir, t.ch_wrap = dim[ok].tolist(), way[ok].tolist(), is_wrap[ok].tolist()
    _apply_nic_defaults(t, cfg)
    return t


def build_mesh(cfg):
    dims = cfg.topology.dims
    return _regular("mesh" + "x".join(map(str, dims)), dims, [False] * len(dims), True, cfg,
                    "dor")


def build_torus(cfg):
    dims = cfg.topology.dims
    return _regular("torus" + "x".join(map(str, dims)), dims, [True] * len(dims), True, cfg,
                    "dor_dateline")


def build_ring(cfg):
    k = cfg.topology.size
    bi = cfg.topology.bidirectional
    return _regular(("ring" if bi else "uniring") + str(k), [k], [True], bi, cfg,
                    "dor_dateline", key="topology.size")


def tree_links(n, src, dst, directed=False):
    """Do the links of a graph of n nodes (channel ends src, dst) form a tree, each pair of
    neighbours joined both ways? (Then its shortest paths are its only paths, whatever the
    weights.)"""
    if directed or n < 2:
        return False
    a, b = np.minimum(src, dst), np.maximum(src, dst)
    pairs = np.unique(a * np.int64(n) + b)
    fwd = np.unique(np.asarray(src, np.int64) * n + np.asarray(dst, np.int64))
    return pairs.size == n - 1 and fwd.size == 2 * (n - 1)


def _link_tree(nodes, links):
    """Do [(a, b, bpc, lat, count, directed)] links form a tree over the nodes (routed by rule:
    pysim.routing)?"""
    if not links or any(x[5] for x in links):
        return False
    index = {x[0]: i for i, x in enumerate(nodes)}
    a = np.array([index[x[0]] for x in links], np.int64)
    b = np.array([index[x[1]] for x in links], np.int64)
    return tree_links(len(nodes), np.concatenate([a, b]), np.concatenate([b, a]))


def _graph(name, nodes, links, cfg, setting):
    """nodes: [(name, kind, {nic overrides})]; links: [(a, b, bpc, lat, count, directed)];
    `setting` names what set the size, for the refusal of one too large to route."""
    ends = sum(1 for x in nodes if x[1] != "switch")
    channels = sum(x[4] * (1 if x[5] else 2) for x in links)
    if ends * channels > MAX_ROUTE_WORK and not _link_tree(nodes, links):
        raise ConfigError(f"{setting}: {ends:,} endpoints x {channels:,} channels = "
                          f"{ends * channels:,}; a graph's routing tables search every channel "
                          f"once per endpoint, and at most {MAX_ROUTE_WORK:,} are supported "
                          f"(a fully connected graph of 2,000 nodes)")
    t = Topology(name=name, node_names=[x[0] for x in nodes],
                 node_kinds=[x[1] for x in nodes], routing="table",
                 node_mem=[{k: v for k, v in x[2].items() if k in OWN_FIELDS} for x in nodes])
    index = {x[0]: i for i, x in enumerate(nodes)}
    # per link, `count` times: a -> b, then b -> a unless directed (vectorised: a dense graph
    # has millions of channels)
    if links:
        a = np.array([index[x[0]] for x in links], np.int64)
        b = np.array([index[x[1]] for x in links], np.int64)
        bpc = np.array([x[2] for x in links], float)
        lat = np.array([x[3] for x in links], object)
        per = np.array([1 if x[5] else 2 for x in links], np.int64)
        count = np.array([x[4] for x in links], np.int64)
        link = np.repeat(np.arange(len(links)), per * count)
        start = np.repeat(np.cumsum(per * count) - per * count, per * count)
        back = (np.arange(link.size) - start) % per[link] == 1
        t.ch_src = np.where(back, b[link], a[link]).tolist()
        t.ch_dst = np.where(back, a[link], b[link]).tolist()
        t.ch_bytes_per_cycle = bpc[link].tolist()
        t.ch_latency_cycles = [int(x) for x in lat[link]]
        t.ch_dim = [-1] * link.size
        t.ch_dir = [0] * link.size
        t.ch_wrap = [False] * link.size
    _apply_nic_defaults(t, cfg, [x[2] for x in nodes])
    _check_graph(t)
    return t


def _check_graph(t):
    if not t.endpoints():
        raise ConfigError("topology: the graph has no node with a NIC (all are switches)")
    src = np.asarray(t.ch_src, np.int64)
    dst = np.asarray(t.ch_dst, np.int64)
    touched = np.zeros(t.n_nodes, bool)
    touched[src] = touched[dst] = True
    for i in np.flatnonzero(~touched)[:1]:
        what = "a switch" if t.node_kinds[i] == "switch" else "a node"
        raise ConfigError(f"topology: node {t.node_names[i]!r} is {what} with no links")
    # connectivity, ignoring direction (direction is checked by the routing): a breadth-
    # first search a level at a time over the neighbour lists
    ends = np.concatenate([src, dst])
    other = np.concatenate([dst, src])
    order = np.argsort(ends, kind="stable")
    nbr = other[order]
    ptr = np.zeros(t.n_nodes + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=t.n_nodes), out=ptr[1:])
    seen = np.zeros(t.n_nodes, bool)
    seen[0] = True
    frontier = np.array([0], np.int64)
    while frontier.size:
        lo, hi = ptr[frontier], ptr[frontier + 1]
        idx = np.repeat(hi - np.cumsum(hi - lo), hi - lo) + np.arange(int((hi - lo).sum()))
        nxt = np.unique(nbr[idx])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
    if not seen.all():
        lost = [t.node_names[i] for i in np.flatnonzero(~seen)]
        raise ConfigError(f"topology: the graph is not connected: {', '.join(lost[:6])}"
                          f"{' ...' if len(lost) > 6 else ''} cannot be reached from "
                          f"{t.node_names[0]!r}")


def build_switch(cfg):
    """`size` NPUs, each linked to one central switch (an NVSwitch-like star)."""
    k = cfg.topology.size
    check_size(f"topology.size = {k}", k + 1, 2 * k, by_rule=True)   # (a tree's routes)
    bpc, lat = link_params(cfg)
    nodes = [(f"npu{i}", "npu", {}) for i in range(k)] + [("sw0", "switch", {})]
    links = [(f"npu{i}", "sw0", bpc, lat, 1, False) for i in range(k)]
    return _graph(f"switch{k}", nodes, links, cfg, f"topology.size = {k}")


def build_fully_connected(cfg):
    """`size` NPUs with a direct link between every pair."""
    k = cfg.topology.size
    check_size(f"topology.size = {k}", k, k * (k - 1))
    bpc, lat = link_params(cfg)
    nodes = [(f"npu{i}", "npu", {}) for i in range(k)]
    links = [(f"npu{i}", f"npu{j}", bpc, lat, 1, False) for i in range(k)
             for j in range(i + 1, k)]
    return _graph(f"fully-connected{k}", nodes, links, cfg, f"topology.size = {k}")


MEM_FIELDS = ("mem_gbps", "mem_latency_ns", "capacity_gb")
CPU_FIELDS = ("tflops", "tflops_fp32", "tflops_fp16", "tflops_bf16", "hbm_gbps", "hbm_gb",
              "dram_gbps", "dram_gb", "reduce_gbps", "offload_gbps", "offload_sram_mb",
              "offload_pieces")
NODE_FIELDS = ("name", "kind", "preset") + NIC_FIELDS + MEM_FIELDS + CPU_FIELDS
OWN_FIELDS = MEM_FIELDS + CPU_FIELDS + ("preset",)      # kept per node in Topology.node_mem
LINK_FIELDS = ("a", "b", "gbps", "bytes_per_cycle", "latency_ns", "latency_cycles", "count",
               "directed")


def _check_fields(where, entry, allowed):
    for k in entry:
        if k not in allowed:
            raise ConfigError(f"{where}.{k}: unknown field{suggest(k, allowed)}; expected "
                              f"{', '.join(allowed)}")


def _same_as_parallel(pair, i, e, bpc, lat, directed, cfg):
    """Entries naming one pair (one direction) are parallel links, used together only if
    alike: routes name a group of parallel channels of one bandwidth and latency, so of
    unlike ones the routes take one (the cheapest by topology.route_weight, of equal cost
    the first entry; pysim.network.describe reads which from the routes) and the other
    carries nothing. Said in a warning naming both entries."""
    for ends in [(e["a"], e["b"])] + ([] if directed else [(e["b"], e["a"])]):
        j, b0, l0 = pair.setdefault(ends, (i, bpc, lat))
        if (b0, l0) != (bpc, lat):
            c = cfg.network.clock_ghz
            warnings.warn(
                f"topology.links[{i}]: a link {ends[0]} -> {ends[1]} of {bpc * c:g} GB/s and "
                f"{lat} cycles beside topology.links[{j}]'s of {b0 * c:g} GB/s and {l0} "
                f"cycles: a pair's links are used together only when alike, so routes take "
                f"the cheapest by topology.route_weight = {cfg.topology.route_weight!r} (of "
                f"equal cost the first entry) and the other carries nothing; pysim topo "
                f"names it (give one entry with count, or the same gbps and latency)",
                PysimWarning, stacklevel=2)
            return


def build_graph(cfg):
    """An explicit graph: [[topology.nodes]] and [[topology.links]]."""
    tp = cfg.topology
    if not tp.nodes:
        raise ConfigError("topology.kind = 'graph' needs [[topology.nodes]] entries "
                          "(name, kind)")
    if not tp.links:
        raise ConfigError("topology.kind = 'graph' needs [[topology.links]] entries (a, b)")
    nodes, names = [], set()
    for i, e in enumerate(tp.nodes):
        where = f"topology.nodes[{i}]"
        _check_fields(where, e, NODE_FIELDS)
        name = e.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.name = {name!r}: expected a non-empty string")
        if name in names:
            raise ConfigError(f"{where}.name = {name!r}: duplicate node name")
        names.add(name)
        kind = e.get("kind", "npu")
        if kind not in NODE_KINDS:
            raise ConfigError(f"{where}.kind = {kind!r}: expected one of "
                              f"{', '.join(NODE_KINDS)}")
        nic = {k: positive_number(f"{where}.{k}", e[k]) for k in NIC_FIELDS if k in e}
        if nic and kind == "switch":
            raise ConfigError(f"{where}: a switch has no NIC, so no {', '.join(nic)}")
        memp = {k: positive_number(f"{where}.{k}", e[k]) for k in MEM_FIELDS if k in e}
        if memp and kind != "mem":
            raise ConfigError(f"{where}: {', '.join(memp)}: only for memory nodes "
                              f"(kind = 'mem'), and this node's kind is {kind!r}")
        cpu = {k: positive_number(f"{where}.{k}", e[k]) for k in CPU_FIELDS if k in e}
        allowed = {"npu": {"tflops", "tflops_fp32", "tflops_fp16", "tflops_bf16", "hbm_gbps",
                           "hbm_gb", "reduce_gbps", "offload_gbps", "offload_sram_mb",
                           "offload_pieces"},
                   "host": {"tflops", "dram_gbps", "dram_gb"}}.get(kind, ())
        if set(cpu) - set(allowed):
            raise ConfigError(f"{where}: {', '.join(sorted(set(cpu) - set(allowed)))}: not "
                              f"for a node of kind {kind!r} (it takes "
                              f"{', '.join(sorted(allowed)) or 'none of these'})")
        if "preset" in e:
            if kind != "npu":
                raise ConfigError(f"{where}.preset: only for NPUs (kind = 'npu'), and this "
                                  f"node's kind is {kind!r}")
            cpu["preset"] = check_preset(f"{where}.preset", e["preset"])
        nodes.append((name, kind, {**nic, **memp, **cpu}))
    bpc0, lat0 = link_params(cfg)
    links, pair = [], {}
    for i, e in enumerate(tp.links):
        where = f"topology.links[{i}]"
        _check_fields(where, e, LINK_FIELDS)
        for end in ("a", "b"):
            if end not in e:
                raise ConfigError(f"{where}: missing {end} (a node name)")
            if not isinstance(e[end], str):
                raise ConfigError(f"{where}.{end} = {e[end]!r}: expected a node name (a "
                                  f"string)")
            if e[end] not in names:
                raise ConfigError(f"{where}.{end} = {e[end]!r}: no node of that name")
        if e["a"] == e["b"]:
            raise ConfigError(f"{where}: a link from {e['a']!r} to itself")
        if "gbps" in e and "bytes_per_cycle" in e:
            raise ConfigError(f"{where}: give gbps or bytes_per_cycle, not both")
        if "latency_ns" in e and "latency_cycles" in e:
            raise ConfigError(f"{where}: give latency_ns or latency_cycles, not both")
        bpc = bpc0
        if "gbps" in e:
            bpc = _gbps_to_bpc(positive_number(f"{where}.gbps", e["gbps"]), cfg)
        elif "bytes_per_cycle" in e:
            bpc = positive_number(f"{where}.bytes_per_cycle", e["bytes_per_cycle"])
        lat = lat0
        if "latency_ns" in e:
            lat = ns_to_cycles(positive_number(f"{where}.latency_ns", e["latency_ns"]),
                               cfg.network.clock_ghz)
        elif "latency_cycles" in e:
            lat = e["latency_cycles"]
            if isinstance(lat, bool) or not isinstance(lat, int) or lat < 1:
                raise ConfigError(f"{where}.latency_cycles = {lat!r}: expected an integer >= 1")
        count = e.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"{where}.count = {count!r}: expected an integer >= 1")
        directed = e.get("directed", False)
        if not isinstance(directed, bool):
            raise ConfigError(f"{where}.directed = {directed!r}: expected true or false")
        links.append((e["a"], e["b"], bpc, lat, count, directed))
        _same_as_parallel(pair, i, e, bpc, lat, directed, cfg)
    check_size(f"topology.nodes ({len(nodes)} entries)", len(nodes), 0,
               by_rule=len(nodes) > MAX_NODES and _link_tree(nodes, links))
    check_size(f"topology.links ({len(links)} entries, with their counts)", 2,
               sum(x[4] * (1 if x[5] else 2) for x in links))
    named = tp.file or cfg.source
    name = os.path.splitext(os.path.basename(named))[0] if named else "graph"
    return _graph(name, nodes, links, cfg, f"topology.nodes ({len(nodes)} entries) and "
                                           f"topology.links")


# name -> (builder, topology.* keys it reads besides the common ones)
BUILDERS = {
    "mesh": (build_mesh, {"dims", "dim_link_gbps"}),
    "torus": (build_torus, {"dims", "dim_link_gbps", "dateline", "tie_break"}),
    "ring": (build_ring, {"size", "bidirectional", "dateline", "tie_break"}),
    "switch": (build_switch, {"size", "route_weight", "transit"}),
    "fully_connected": (build_fully_connected, {"size", "route_weight", "transit"}),
    "graph": (build_graph, {"nodes", "links", "route_weight", "transit"}),
}
_COMMON = {"kind", "link_gbps", "link_latency_ns", "file", "nic", "mem", "npu", "host"}


def build(cfg) -> Topology:
    kind = cfg.topology.kind
    if kind not in BUILDERS:
        raise ConfigError(f"topology.kind = {kind!r}: unknown; known: "
                          f"{', '.join(sorted(BUILDERS))}")
    builder, uses = BUILDERS[kind]
    for path in sorted(cfg.explicit):         # (sorted: the same key named every run)
        section, name = path.split(".", 1)
        if section == "topology" and name not in uses | _COMMON:
            raise ConfigError(f"topology.{name} is not used by topology.kind = {kind!r}"
                              f"{kind_came(cfg, path)} (it reads: "
                              f"{', '.join(sorted(uses | _COMMON))})")
    topo = builder(cfg)
    _check_kind_defaults(topo, cfg)
    return topo


def kind_came(cfg, path):
    """' (where `path` and topology.kind were given)' for a key topology.kind does not read,
    naming the files (a system's topology.file, the config, an override); '' if neither was
    given in a file."""
    said = [f"{p} {w}" for p in (path, "topology.kind") for w in [cfg.where(p)] if w]
    return f" ({'; '.join(said)})" if said else ""


def _check_kind_defaults(topo, cfg):
    """A table of defaults for a kind of node the system does not have would be silently
    unused: refuse it, naming it."""
    have = set(topo.node_kinds)
    tables = [("topology.mem", "mem", "memory node"), ("topology.npu", "npu", "NPU"),
              ("topology.host", "host", "host")]
    tables += [(f"topology.nic.{k}", k, f"{k} node") for k in (cfg.topology.nic or {})]
    for path, kind, what in tables:
        section, _, rest = path.partition(".")
        table = cfg.topology.nic.get(kind) if rest.startswith("nic.") else \
            getattr(cfg.topology, rest)
        if table and kind not in have:
            raise ConfigError(f"{path}: {topo.name} has no {what} (kind = {kind!r}), so these "
                              f"defaults would not be used; its nodes are "
                              f"{', '.join(sorted(have))}")



def system_name(topo, cfg):
    """The system's name as results carry it (`_system`, the `system` of a summary and of
    `pysim results`): the topology's, and where the config is a file of the user's own whose
    name is not the topology's, that file's too ('mesh8x8 (a.toml)'), so that results of two
    files on one topology are told apart."""
    src = getattr(cfg, "source", None)
    if not src or systems.path_of(os.path.basename(src)) == os.path.abspath(src):
        return topo.name                       # (from Python, or a shipped system)
    base = os.path.basename(src)
    return topo.name if os.path.splitext(base)[0] == topo.name else f"{topo.name} ({base})"


def describe_system(name):
    """A shipped system in one dict: name, what, source, and its nodes counted by kind."""
    path = systems.path_of(name)
    if path is None:
        systems.resolve(name)                  # raises, listing the shipped ones
    what, source = systems.header(path)
    topo = build(load(path))
    count = {k: 0 for k in ("npu", "mem", "host", "switch")}
    for k in topo.node_kinds:
        count[k] += 1
    return dict(name=name, what=what, source=source, **count)


def describe_systems():
    """describe_system of every shipped system."""
    return [describe_system(n) for n in systems.names()]

# The configuration keys this module reads (pysim.schema).
declare(
    Key("topology", "kind", "str", "mesh", "-", "Registered topology builder.", None,
        lambda: sorted(BUILDERS)),
    Key("topology", "dims", "ints", [8, 8], "nodes", "Nodes per dimension (mesh, torus).",
        (all_positive, "a non-empty list of integers > 0")),
    Key("topology", "size", "int", 8, "nodes",
        "Number of nodes (ring, switch, fully_connected).", (lambda x: x >= 2, "an integer >= 2")),
    Key("topology", "bidirectional", "bool", True, "-",
        "Ring: links in both directions (else one direction only).", None),
    Key("topology", "dim_link_gbps", "floats", None, "GB/s",
        "Mesh, torus: bandwidth of the links of each dimension (overrides link_gbps).",
        (all_positive, "a list of numbers > 0, one per dimension")),
    Key("topology", "file", "str", None, "path",
        "Take the [topology] table of this TOML file, or of a shipped system named bare "
        "('dgx1-v100'); keys given here as well override the file's.", None),
    Key("topology", "nodes", "tables", None, "-",
        "Graph: [[topology.nodes]] with name, kind (npu, mem, host, switch), and optional "
        "injection_gbps, ejection_gbps.", None),
    Key("topology", "links", "tables", None, "-",
        "Graph: [[topology.links]] with a, b (node names), and optional gbps or "
        "bytes_per_cycle, latency_ns or latency_cycles (default link_gbps, link_latency_ns), "
        "count (parallel links, default 1), directed (a to b only, default false). Entries "
        "naming the same pair are parallel links too, used together only when alike (gbps, "
        "latency; unlike ones are warned of).",
        None),
    Key("topology", "nic", "table", None, "-",
        "Per node kind NIC defaults, e.g. [topology.nic.mem] injection_gbps = 100.",
        fields_check("topology.nic", NIC_FIELDS, kinds=("npu", "mem", "host"))),
    Key("topology", "mem", "table", None, "-",
        "Memory-node defaults: [topology.mem] gbps (default 100), latency_ns (50), "
        "capacity_gb (128); graph nodes may override with mem_gbps, mem_latency_ns, "
        "capacity_gb.", fields_check("topology.mem", ("gbps", "latency_ns", "capacity_gb"))),
    Key("topology", "npu", "table", None, "-",
        "NPU: [topology.npu] preset (an accelerator's datasheet figures: v100, a100, h100, "
        "tpu_v3; see docs/models.md), tflops (peak at every precision; default 100), "
        "tflops_fp32, tflops_fp16, tflops_bf16 (peak at one precision; mixed takes the 16-bit "
        "one), hbm_gbps (900), hbm_gb (32: a collective's data must fit), reduce_gbps "
        "(reduction rate of the NPU's own cores, 450), offload_gbps (its collectives "
        "engine's, 256), offload_sram_mb (8), offload_pieces (16: the engine streams its SRAM in "
        "pieces of offload_sram_mb / this), efficiency (a table: fraction of peak per "
        "layer kind, e.g. {conv = 0.6}), sms (compute units: v100 80, a100 108, h100 132, "
        "tpu_v3 2, else 0: not modelled; see workload.comm_sms); fields given override the "
        "preset's; graph nodes may "
        "override (and name their own preset).", raising(check_npu_table)),
    Key("topology", "host", "table", None, "-",
        "Host: [topology.host] tflops (default 2), dram_gbps (100), dram_gb (its memory, "
        "256); graph nodes may override.",
        fields_check("topology.host", ("tflops", "dram_gbps", "dram_gb"))),
    Key("topology", "link_gbps", "float", None, "GB/s",
        "Bandwidth of every link, per direction (decimal GB/s); default one flit per cycle.",
        POS),
    Key("topology", "link_latency_ns", "float", None, "ns",
        "Latency of every link; default one cycle.", POS),
)
