"""Topologies: nodes and directed channels with per-channel bandwidth and latency.

Builders are registered by name in BUILDERS; `build(cfg)` picks one from `topology.kind`.
A builder declares which `topology.*` keys it reads, so a key given for another kind is an
error rather than silently ignored.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pysim.config import ConfigError

NODE_KINDS = ("npu", "mem", "host", "switch")


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

    @property
    def n_nodes(self):
        return len(self.node_names)

    @property
    def n_channels(self):
        return len(self.ch_src)

    def endpoints(self):
        """Indices of nodes that have a NIC (every kind but switch), in node order."""
        return [i for i, k in enumerate(self.node_kinds) if k != "switch"]

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


def ns_to_cycles(ns: float, clock_ghz: float) -> int:
    """A latency in ns as whole cycles of the network clock (rounded up, at least 1)."""
    cycles = ns * clock_ghz
    return max(1, int(math.ceil(cycles - 1e-9)))


def link_params(cfg):
    """(bytes per cycle, latency in cycles) of every link of a regular topology."""
    net, topo = cfg.network, cfg.topology
    if topo.link_gbps is None:
        bpc = float(net.flit_bytes)
    else:
        bpc = topo.link_gbps / net.clock_ghz
    lat = 1 if topo.link_latency_ns is None else ns_to_cycles(topo.link_latency_ns,
                                                             net.clock_ghz)
    return bpc, lat


def _regular(name, dims, wrap, bidirectional, cfg, routing):
    dims = tuple(int(k) for k in dims)
    n = int(np.prod(dims))
    coords = np.array(np.unravel_index(np.arange(n), dims, order="F")).T.reshape(n, len(dims))
    if len(dims) == 1:
        names = [f"n{i}" for i in range(n)]
    else:
        names = ["n" + "_".join(str(int(x)) for x in coords[i]) for i in range(n)]
    t = Topology(name=name, node_names=names, node_kinds=["npu"] * n, dims=dims,
                 coords=coords, wrap=tuple(wrap), bidirectional=bidirectional, routing=routing)
    bpc, lat = link_params(cfg)
    strides = np.cumprod((1,) + dims[:-1])
    for i in range(n):
        for d, k in enumerate(dims):
            if k == 1:
                continue
            x = coords[i, d]
            directions = (+1, -1) if bidirectional else (+1,)
            for s in directions:
                y = x + s
                is_wrap = y < 0 or y >= k
                if is_wrap and not wrap[d]:
                    continue
                y %= k
                j = i + (y - x) * int(strides[d])
                t.add_channel(i, j, bpc, lat, dim=d, direction=s, wrap=is_wrap)
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
    k = cfg.topology.nodes
    bi = cfg.topology.bidirectional
    return _regular(("ring" if bi else "uniring") + str(k), [k], [True], bi, cfg,
                    "dor_dateline")


# name -> (builder, topology.* keys it reads besides kind and the link keys)
BUILDERS = {
    "mesh": (build_mesh, {"dims"}),
    "torus": (build_torus, {"dims"}),
    "ring": (build_ring, {"nodes", "bidirectional"}),
}
_COMMON = {"kind", "link_gbps", "link_latency_ns"}


def build(cfg) -> Topology:
    kind = cfg.topology.kind
    if kind not in BUILDERS:
        raise ConfigError(f"topology.kind = {kind!r}: unknown; known: {', '.join(sorted(BUILDERS))}")
    builder, uses = BUILDERS[kind]
    for path in cfg.explicit:
        section, name = path.split(".", 1)
        if section == "topology" and name not in uses | _COMMON:
            raise ConfigError(f"topology.{name} is not used by topology.kind = {kind!r} "
                              f"(it reads: {', '.join(sorted(uses | _COMMON))})")
    return builder(cfg)
