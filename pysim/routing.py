"""Routing functions: per (node, destination) output channel tables, and VC classes.

Registered by name in ROUTINGS. Each returns a `Routing`: `table[node, dst]` is the topology
channel a packet at `node` bound for `dst` takes next (-1 when node == dst: eject), and
`n_classes`, the number of VC classes the engine must split each port's VCs into.

VC classes in the engine: a packet starts each dimension in class 0 and moves to class 1 when
it crosses a dateline (wrap-around) channel; `dor_dateline` needs 2 classes, `dor` 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysim.config import ConfigError


@dataclass
class Routing:
    name: str
    table: np.ndarray      # (n_nodes, n_nodes) int32 topology channel ids, -1 on the diagonal
    n_classes: int


def _channel_index(topo):
    """chan[node, dim, 0 for +1 / 1 for -1] -> channel id, or -1."""
    nd = len(topo.dims)
    chan = np.full((topo.n_nodes, max(nd, 1), 2), -1, dtype=np.int64)
    for c in range(topo.n_channels):
        d = topo.ch_dim[c]
        if d >= 0:
            chan[topo.ch_src[c], d, 0 if topo.ch_dir[c] > 0 else 1] = c
    return chan


def _dimension_order(topo, ring_dims):
    """Dimension-order routing (lowest dimension first) on a regular topology.

    In a dimension with wrap-around links the shorter way round is taken; at distance exactly
    k/2 (k even) the packet goes in the + direction when its coordinate in that dimension is
    even at the router where it enters the dimension, and - when odd, which splits the ties
    evenly between the two directions. A unidirectional ring always goes +.
    """
    n = topo.n_nodes
    coords = topo.coords
    dims = np.array(topo.dims)
    chan = _channel_index(topo)
    table = np.full((n, n), -1, dtype=np.int32)
    rows = np.arange(n)
    for src in range(n):                        # one row at a time: memory stays O(n * dims)
        cur = coords[src]
        diff = coords - cur                     # (n, nd): destination minus current
        moving = diff != 0
        has = moving.any(axis=1)
        first = np.argmax(moving, axis=1)       # first differing dimension
        delta = diff[rows, first]
        k = dims[first]
        direction = np.sign(delta)
        if ring_dims:
            off = np.mod(delta, k)
            wrap = np.array(topo.wrap)[first]
            plus = np.where(off * 2 < k, True,
                            np.where(off * 2 > k, False, (cur[first] % 2) == 0))
            if not topo.bidirectional:
                plus = np.ones_like(plus)
            direction = np.where(wrap, np.where(plus, 1, -1), direction)
        idx = np.where(direction > 0, 0, 1)
        ch = chan[src, first, idx]
        table[src] = np.where(has, ch, -1)
        if np.any(has & (ch < 0)):
            raise ConfigError(f"routing: no channel from {topo.node_names[src]} in "
                              "dimension order (the topology lacks a link)")
    return table


def route_dor(topo, cfg):
    if topo.coords is None:
        raise ConfigError("network routing 'dor' needs a regular (mesh) topology")
    return Routing("dor", _dimension_order(topo, ring_dims=False), 1)


def route_dor_dateline(topo, cfg):
    if topo.coords is None:
        raise ConfigError("routing 'dor_dateline' needs a regular (ring or torus) topology")
    vcs = cfg.network.vcs
    if vcs < 2 or vcs % 2:
        raise ConfigError(f"network.vcs = {vcs}: dimension-order routing on a "
                          f"{topo.name} uses dateline VC classes (2 classes), so it needs an "
                          f"even number of VCs >= 2")
    return Routing("dor_dateline", _dimension_order(topo, ring_dims=True), 2)


ROUTINGS = {
    "dor": route_dor,
    "dor_dateline": route_dor_dateline,
}


def build(topo, cfg) -> Routing:
    name = topo.routing
    if name not in ROUTINGS:
        raise ConfigError(f"routing {name!r}: unknown; known: {', '.join(sorted(ROUTINGS))}")
    return ROUTINGS[name](topo, cfg)


def path(topo, routing, src, dst):
    """The list of topology channels a packet from src to dst traverses."""
    out = []
    node = src
    while node != dst:
        c = int(routing.table[node, dst])
        if c < 0 or len(out) > topo.n_nodes * 2:
            raise ConfigError(f"routing: no route from {topo.node_names[src]} to "
                              f"{topo.node_names[dst]}")
        out.append(c)
        node = topo.ch_dst[c]
    return out
