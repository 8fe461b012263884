"""Deadlock freedom of a routing (`pysim.routing.Routing`): the channel-dependency graph
(CDG) of its routes, over channels alone (`channel_dependencies`) and over (channel, VC
class) (`analyse`, which counts the classes the routes need), and `check`, which refuses a
configuration whose routes need more classes than there are VCs, naming a cycle of the
one-class CDG. The VC classes a route takes are described in `pysim.routing`."""
from __future__ import annotations

import numpy as np

from pysim.engine import core
from pysim.errors import ConfigError


def _walk(topo, routing, group, order, chunk=1 << 18):
    """Follow every endpoint-to-endpoint route with its VC class, vectorised over up to
    `chunk` routes at a time. Yields arrays (prev channel, prev class, channel, class) of
    consecutive channels of the routes (the first channel of a route with prev channel -1).
    Where ties are random, a route entering a ring dimension at distance k/2 is followed both
    ways."""
    table = routing.table
    node_pos = routing.node_pos
    tie_k = routing.tie_k
    eps = np.asarray(topo.endpoints())
    n = eps.size
    rows = max(1, chunk // max(n, 1))
    for lo in range(0, n, rows):
        s, d = np.meshgrid(eps[lo:lo + rows], eps, indexing="ij")
        s, d = s.ravel(), d.ravel()
        keep = s != d
        dst = d[keep]
        cur = s[keep].copy()
        grp = np.full(dst.size, -1, np.int64)
        last = np.full(dst.size, -1, np.int64)
        cls = np.zeros(dst.size, np.int64)
        prev = np.full(dst.size, -1, np.int64)
        for _ in range(topo.n_nodes + 1):
            act = np.flatnonzero(cur != dst)
            if act.size == 0:
                break
            c = table[cur[act], dst[act]].astype(np.int64)
            if np.any(c < 0):
                raise ConfigError("routing: a route ends before its destination")
            if tie_k is not None:        # ties entering a ring dimension: a copy goes the
                g = np.maximum(group[c], 0)     # other way
                k = tie_k[g]
                off = np.mod(node_pos[dst[act], g] - node_pos[cur[act], g], np.maximum(k, 1))
                tie = (grp[act] != group[c]) & (k > 0) & (off * 2 == k)
                if tie.any():
                    twin = act[tie]
                    base = cur.size
                    dst, cur, grp, last, cls, prev = (np.concatenate([a, a[twin]]) for a in
                                                      (dst, cur, grp, last, cls, prev))
                    act = np.concatenate([act, base + np.arange(twin.size)])
                    c = np.concatenate([c, routing.ch_rev[c[tie]].astype(np.int64)])
            same = grp[act] == group[c]
            entry = 0
            if routing.entry_class:
                g = np.maximum(group[c], 0)
                entry = (node_pos[cur[act], g] > node_pos[dst[act], g]).astype(np.int64)
            new_cls = np.where(same, cls[act] + (order[c] < last[act]), entry)
            yield prev[act], cls[act], c, new_cls
            prev[act], cls[act], grp[act], last[act] = c, new_cls, group[c], order[c]
            cur[act] = np.asarray(topo.ch_dst)[c]
        else:
            raise ConfigError("routing: the routing tables loop")


MARKS_MAX = 1 << 27     # bytes of marks channel_dependencies may use (else np.unique)


MAX_DEPENDENCIES = 1 << 26   # edges of the one-class channel-dependency graph (a switch of
                             # 8,192 NPUs has 67,100,672: about 4 GB and a minute to check)


def _check_dependencies(topo, n):
    if n > MAX_DEPENDENCIES:
        raise ConfigError(f"topology: the routes of {topo.name} ({topo.n_nodes:,} nodes, "
                          f"{topo.n_channels:,} channels) make a channel-dependency graph of "
                          f"more than {MAX_DEPENDENCIES:,} edges, the most the deadlock check "
                          f"takes (a switch of 8,192 NPUs has 67,100,672)")


def _marks_layout(topo):
    """Where the mark of each possible dependency (c1, then c2 out of the node c1 enters) is:
    first[c1] + lo[c2]. Returns (out-channels grouped by node, their offsets per node, lo,
    first)."""
    ch_dst = np.asarray(topo.ch_dst, np.int64)
    C = np.int64(topo.n_channels)
    src = np.asarray(topo.ch_src, np.int64)
    by_src = np.lexsort((np.arange(C), src))                # out-channels, grouped by node
    out_ptr = np.zeros(topo.n_nodes + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=topo.n_nodes), out=out_ptr[1:])
    lo = np.empty(C, np.int64)
    lo[by_src] = np.arange(C) - out_ptr[src[by_src]]
    width = out_ptr[ch_dst + 1] - out_ptr[ch_dst]           # marks per c1
    first = np.zeros(C + 1, np.int64)
    np.cumsum(width, out=first[1:])
    return by_src, out_ptr, lo, first


def channel_dependencies(topo, table, alt=None):
    """Unique (c1, c2) pairs, as an (m, 2) array: a packet holding channel c1 waits for c2.

    Routes are destination-based, so the pairs are, for every destination d and every node u
    with a route to d, (table[u, d], table[v, d]) where v is where the first channel leads
    (counting switches no route passes through errs on the safe side). With `alt` (random
    ties: a second table that differs where a packet entering a dimension may go either way),
    a route may take either table's channel at every node: the pairs of all four mixes."""
    tables = [np.ascontiguousarray(t, np.int32).reshape(-1)
              for t in ([table] if alt is None else [table, alt])]
    ch_dst = np.asarray(topo.ch_dst, np.int64)
    C = np.int64(topo.n_channels)
    # compiled: one mark per possible pair (a channel, then one out of the node it enters),
    # where that table is small enough; in order of (c1, c2) as np.unique gives them
    by_src, out_ptr, lo, first = _marks_layout(topo)
    if first[-1] <= MARKS_MAX:
        seen = np.zeros(max(int(first[-1]), 1), np.uint8)
        for t1 in tables:
            for t2 in tables:
                core.mark_dependencies(t1, topo.n_nodes, np.asarray(topo.ch_dst, np.int32),
                                       first, lo, seen, t2)
        _check_dependencies(topo, int(np.count_nonzero(seen)))
        idx = np.flatnonzero(seen)
        c1 = np.searchsorted(first, idx, side="right") - 1
        c2 = by_src[out_ptr[ch_dst[c1]] + idx - first[c1]]
        return np.stack([c1, c2], axis=1).astype(np.int64)
    keys, total = [], 0
    n = topo.n_nodes
    for d in range(n):
        for t1 in tables:
            for t2 in tables:
                c1 = t1[d::n].astype(np.int64)       # column d: every node's channel to d
                c1 = c1[c1 >= 0]
                v = ch_dst[c1]
                c1 = c1[v != d]
                c2 = t2[ch_dst[c1] * n + d].astype(np.int64)
                keys.append(np.unique(c1 * C + c2))
                total += keys[-1].size
        if total > MAX_DEPENDENCIES:              # (an upper bound of the unique count)
            _check_dependencies(topo, np.unique(np.concatenate(keys)).size)
            keys = [np.unique(np.concatenate(keys))]
            total = keys[0].size
    k = np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    return np.stack([k // C, k % C], axis=1)


def csr(n_vertices, edges):
    """Successor lists of a directed graph given as an (m, 2) array of edges, in increasing
    order of (source, target)."""
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    a, b = e[:, 0], e[:, 1]
    if np.all((a[1:] > a[:-1]) | ((a[1:] == a[:-1]) & (b[1:] >= b[:-1]))):
        adj = np.ascontiguousarray(b)          # (already in order, as the dependencies are)
    else:
        adj = np.ascontiguousarray(b[np.lexsort((b, a))])
    ptr = np.zeros(n_vertices + 1, np.int64)
    np.cumsum(np.bincount(e[:, 0], minlength=n_vertices), out=ptr[1:])
    return ptr, adj


def _find_cycle(n_vertices, edges):
    """A cycle (list of vertices) in a directed graph, or None (compiled depth-first
    search)."""
    return core.dfs_order(n_vertices, *csr(n_vertices, edges))[1]


def _first_hop_top(topo, routing):
    """The highest class a route's first hop takes: with entry classes, 1 if some endpoint
    lies above a destination in the group its route to it enters first, else 0."""
    eps = np.asarray(topo.endpoints(), np.int64)
    group = np.asarray(routing.ch_group, np.int64)
    pos = routing.node_pos
    rows = max(1, (1 << 20) // max(eps.size, 1))
    for lo in range(0, eps.size, rows):
        s = eps[lo:lo + rows]
        c = routing.table[np.ix_(s, eps)].astype(np.int64)
        g = group[np.maximum(c, 0)]
        up = (c >= 0) & (pos[s[:, None], g] > pos[eps[None, :], g])
        if up.any():
            return 1
    return 0


def analyse(topo, routing):
    """Follow all routes with their classes: set routing.n_classes and check that the CDG over
    (channel, class) is acyclic (raises ConfigError naming a cycle if not). Compiled
    (mark_class_dependencies) where its marks fit in MARKS_MAX bytes; else the vectorised
    walk of every route (_walk)."""
    group = np.asarray(routing.ch_group, np.int64)
    order = np.asarray(routing.ch_order, np.int64)
    C = np.int64(topo.n_channels)
    by_src, out_ptr, lo, first = _marks_layout(topo)
    ch_dst = np.asarray(topo.ch_dst, np.int64)
    rt = np.ascontiguousarray(routing.table, np.int32).reshape(-1)
    alt = rt if routing.alt_table is None else \
        np.ascontiguousarray(routing.alt_table, np.int32).reshape(-1)
    pos = np.zeros((topo.n_nodes, 0), np.int32) if routing.node_pos is None else \
        np.ascontiguousarray(routing.node_pos, np.int32)
    kb = 2
    while first[-1] * kb * kb <= MARKS_MAX and kb <= 64:
        seen = np.zeros(max(int(first[-1]) * kb * kb, 1), np.uint8)
        st = core.mark_class_dependencies(
            rt, topo.n_nodes, np.asarray(topo.endpoints(), np.int64),
            np.asarray(topo.ch_dst, np.int32), group, order, first, lo, kb, seen, alt,
            pos.reshape(-1), pos.shape[1] if routing.entry_class else 0)
        if st == 2:
            raise ConfigError("routing: a route ends before its destination")
        if st == 3:
            raise ConfigError("routing: the routing tables loop")
        if st == 0:
            idx = np.flatnonzero(seen)
            k2 = idx % kb
            k1 = (idx // kb) % kb
            mk = idx // (kb * kb)
            c1 = np.searchsorted(first, mk, side="right") - 1
            c2 = by_src[out_ptr[ch_dst[c1]] + mk - first[c1]]
            a, pa, b, pb = c1, k1, c2, k2
            top = 0                        # (the first hops' classes: below)
            break
        kb *= 2
    else:
        keys = []
        top = 0
        M = np.int64(64)      # classes per channel, as a key field: (C x 64)^2 fits in 64 bits
        for p, pc, c, cc in _walk(topo, routing, group, order):
            if cc.size and cc.max() >= M:       # (more than network.vcs can ever be)
                raise ConfigError(f"routing {routing.name!r} on {topo.name}: its routes need "
                                  f"more than {int(M)} VC classes; network.vcs is at most 64")
            top = max(top, int(cc.max(initial=0)))
            had = p >= 0
            p, pc, c, cc = p[had], pc[had], c[had], cc[had]
            keys.append(np.unique((p * M + pc) * (C * M) + c * M + cc))
        k = np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
        x, y = k // (C * M), k % (C * M)
        a, pa, b, pb = x // M, x % M, y // M, y % M
    # (a route's first hop may enter its group in class 1: with entry classes, count them)
    if routing.entry_class:
        top = max(top, _first_hop_top(topo, routing))
    K = int(max(pa.max(initial=0), pb.max(initial=0), top)) + 1
    edges = np.stack([a * K + pa, b * K + pb], axis=1)
    cyc = _find_cycle(topo.n_channels * K, edges)
    if cyc is not None:
        names = " -> ".join(f"{topo.channel_name(v // K)} (class {v % K})" for v in cyc)
        raise ConfigError(f"routing {routing.name!r} could deadlock: its channel-dependency "
                          f"graph has the cycle {names}")
    routing.n_classes = K
    routing.cdg_edges = len(edges)
    return routing


def check(topo, routing, vcs, known=None):
    """Refuse a configuration whose routes need more VC classes than there are VCs. known:
    (a cycle of the one-class channel-dependency graph, or None), where the routing's rule
    gives it (else it is found from the routes)."""
    if routing.n_classes <= vcs:
        return
    if known is not None:
        cyc = known[0]
    else:
        plain = channel_dependencies(topo, routing.table, routing.alt_table)
        cyc = _find_cycle(topo.n_channels, plain)
    where = ""
    if cyc is not None:
        where = (" The channel-dependency graph with one VC class has the cycle "
                 + " -> ".join(topo.channel_name(c) for c in cyc[:12])
                 + (" -> ..." if len(cyc) > 12 else "") + ".")
    raise ConfigError(f"network.vcs = {vcs}: routing {routing.name!r} on {topo.name} needs "
                      f"{routing.n_classes} VC classes to be deadlock-free, so at least "
                      f"{routing.n_classes} VCs.{where} Set network.vcs >= {routing.n_classes}.")
