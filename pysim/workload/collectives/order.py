"""Who takes part in a collective and in which order: the participants, and the ring through
direct links (a Hamiltonian cycle of a mesh or torus, or a search over a small group)."""
from __future__ import annotations

import numpy as np

from pysim.errors import ConfigError

RING_ALGORITHMS = ("ring", "bidir_ring")
HIERARCHICAL = ("hierarchical", "bidir_hierarchical")   # dimension by dimension


def participants(cfg, topo):
    names = topo.node_names
    group = cfg.workload.group
    if group is None:
        npus = [n for n, k in zip(names, topo.node_kinds) if k == "npu"]
        group = npus or [n for n, k in zip(names, topo.node_kinds) if k == "host"]
    index = {n: i for i, n in enumerate(names)}
    for n in group:
        if n not in index:
            raise ConfigError(f"workload.group: {n!r} is not a node of {topo.name}")
        kind = topo.node_kinds[index[n]]
        if kind in ("switch", "mem"):
            raise ConfigError(f"workload.group: {n!r} is a {'memory node' if kind == 'mem' else kind}"
                              f"; a collective runs among NPUs and hosts (nodes that compute)")
    _at_least_two(group)
    return list(group)


def _at_least_two(group):
    if len(group) < 2:
        raise ConfigError(f"workload.group = {list(group)}: a collective needs at least 2 "
                          f"participants (by default every NPU takes part, or every host "
                          f"if there is no NPU)")


def _snake(dims):
    """Every point of a grid of sizes `dims`, consecutive ones one step apart in one
    coordinate (a reflected mixed-radix Gray code, first coordinate fastest)."""
    if not dims:
        return [()]
    rest = _snake(dims[1:])
    out = []
    for j, r in enumerate(rest):
        xs = range(dims[0]) if j % 2 == 0 else range(dims[0] - 1, -1, -1)
        out.extend((x,) + r for x in xs)
    return out


def grid_cycle(topo):
    """A Hamiltonian cycle of a mesh or torus through neighbour links, as node indices, or
    None: pick a dimension a of size >= 2 whose complement has an even number of points; the
    'rows' are those points in snake order; go out along each row at coordinate a = 1 .. k-1
    (alternating direction) and come back along a = 0. (A torus needs no wrap link for it;
    the bottleneck of any Hamiltonian cycle of a grid is its narrowest dimension anyway.)"""
    if topo.coords is None or not topo.dims:
        return None
    dims = list(topo.dims)
    for a in range(len(dims)):
        others = dims[:a] + dims[a + 1:]
        if dims[a] < 2 or int(np.prod(others)) % 2:
            continue
        rows = _snake(others)
        if len(rows) < 2:
            continue
        pos = {tuple(int(x) for x in c): i for i, c in enumerate(topo.coords)}

        def node(x, row):
            return pos[tuple(row[:a]) + (x,) + tuple(row[a:])]
        path = []
        for j, row in enumerate(rows):
            xs = range(1, dims[a]) if j % 2 == 0 else range(dims[a] - 1, 0, -1)
            path.extend(node(x, row) for x in xs)
        path.extend(node(0, row) for row in reversed(rows))
        return path
    return None


def ring_order(cfg, topo, group):
    """The ring the collective uses: workload.ring_order, else a Hamiltonian cycle through
    direct links (up to 16 participants: found by search, widest bottleneck first, then lowest
    names; more: on a mesh or torus where every node takes part, grid_cycle), else the
    group's order."""
    if cfg.workload.ring_order is not None:
        order = list(cfg.workload.ring_order)
        if sorted(order) != sorted(group):
            raise ConfigError(f"workload.ring_order = {order}: expected the participants "
                              f"{group} in some order")
        return order
    idx = topo.node_index()
    ids = [idx[n] for n in group]
    # the bandwidth between members (the channels joining two of them, in channel order)
    member = np.zeros(topo.n_nodes, bool)
    member[ids] = True
    src, dst = topo.channel_ends()
    bw = {}
    for c in np.flatnonzero(member[src] & member[dst]).tolist():
        key = (topo.ch_src[c], topo.ch_dst[c])
        bw[key] = bw.get(key, 0.0) + topo.ch_bytes_per_cycle[c]
    p = len(ids)
    if p > 16:
        cycle = grid_cycle(topo) if sorted(ids) == list(range(topo.n_nodes)) else None
        if cycle is not None and all(bw.get((a, b), 0.0) > 0
                                     for a, b in zip(cycle, cycle[1:] + cycle[:1])):
            return [topo.node_names[i] for i in cycle]
        return list(group)
    best = [None, -1.0]

    def extend(path, used, bottleneck, budget):
        if budget[0] <= 0:
            return
        budget[0] -= 1
        if len(path) == p:
            back = bw.get((path[-1], path[0]), 0.0)
            if back > 0 and min(bottleneck, back) > best[1]:
                best[0], best[1] = list(path), min(bottleneck, back)
            return
        cands = [v for v in ids if v not in used and bw.get((path[-1], v), 0.0) > 0]
        cands.sort(key=lambda v: (-bw[(path[-1], v)], v))
        for v in cands:
            b = min(bottleneck, bw[(path[-1], v)])
            if b <= best[1]:
                continue
            used.add(v)
            path.append(v)
            extend(path, used, b, budget)
            path.pop()
            used.discard(v)

    extend([ids[0]], {ids[0]}, float("inf"), [200000])
    if best[0] is None:
        return list(group)
    return [topo.node_names[i] for i in best[0]]
