"""Routing: per (node, destination) output-channel tables, VC classes, and the proof that the
configured routing cannot deadlock.

Routing functions are registered by name in ROUTINGS. Each returns a `Routing`: `table[node,
dst]` is the topology channel a packet at `node` bound for `dst` takes next (-1 when node ==
dst: eject), and, per topology channel, a VC-class `group` and `order`.

VC classes (what csim's route computation does, _router.route): a packet entering a group
takes class 0, or, where the routing gives nodes a position in each group (`node_pos`), class 1
if the router it enters at lies at a higher position than its destination; it then moves to
the next class whenever it takes a channel of lower order than the one before, within the same
group. On rings and tori a group is a dimension, and `topology.dateline` picks the scheme:

- "booksim" (BookSim's dim_order_torus): the position is the coordinate and the order is flat,
  so a packet keeps, for its whole trip in the dimension, class 1 if its destination's
  coordinate is below the one it entered at, else class 0. Going +, class 1 holds the packets
  that will cross the wrap-around link; going -, those that will not (BookSim's rule is the
  same comparison for both directions). No route of at most k/2 hops can close a ring within
  one class; a ring one way round has longer ones, and takes "crossing".
- "crossing" (the dateline of Dally and Seitz): no positions; along each direction the order
  rises with the position travelled and the wrap-around channel is lowest, so a packet moves
  to class 1 when it crosses the wrap-around link.
- "fewest": one class if the routes' channel-dependency graph (CDG) is acyclic with one (a
  4-ary torus with our tie rule), else "crossing".

On an arbitrary graph there is one group, and the order is chosen from the CDG of the routes:
a topological order when it is acyclic (one class suffices), else depth-first reverse
postorder, so that only the CDG's back edges cost a class. Meshes need one class.

`build()` first checks the one-class CDG of the routes: if it is acyclic, one class will do
(one group, topological order), except on rings and tori under "booksim" and "crossing", which
keep their scheme. `analyse()` follows every route, builds the CDG over (channel, class),
checks that it is acyclic and counts the classes needed; `check()` refuses a configuration
whose routes need more classes than there are VCs, naming a cycle of the one-class CDG.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysim.engine import core
from pysim.errors import ConfigError
from pysim.schema import Key, declare


@dataclass
class Routing:
    name: str
    table: np.ndarray      # (n_nodes, n_nodes) int32 topology channel ids, -1 on the diagonal
    ch_group: np.ndarray   # per topology channel
    ch_order: np.ndarray
    n_classes: int = 1     # VC classes the routes need (set by analyse)
    cdg_edges: int = 0
    node_pos: np.ndarray | None = None   # (n_nodes, groups) positions, or None (see above)
    entry_class: bool = False   # class 1 on entering a group where the position is above
                                # the destination's (else class 0)
    scheme: str = ""       # how the classes were chosen, in words (pysim topo prints it)
    tie_k: np.ndarray | None = None      # random ties: per group, k of its ring (0: none)
    ch_rev: np.ndarray | None = None     # ... per channel, the one leaving its source the
    alt_table: np.ndarray | None = None  # other way; the table with every tie taken that way


# ------------------------------------------------------------------ dimension order

def _channel_index(topo):
    """chan[node, dim, 0 for +1 / 1 for -1] -> channel id, or -1."""
    nd = len(topo.dims)
    chan = np.full((topo.n_nodes, max(nd, 1), 2), -1, dtype=np.int64)
    for c in range(topo.n_channels):
        d = topo.ch_dim[c]
        if d >= 0:
            chan[topo.ch_src[c], d, 0 if topo.ch_dir[c] > 0 else 1] = c
    return chan


def _dimension_order(topo, wrap_dims):
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
        diff = coords - cur
        moving = diff != 0
        has = moving.any(axis=1)
        first = np.argmax(moving, axis=1)
        delta = diff[rows, first]
        k = dims[first]
        direction = np.sign(delta)
        if wrap_dims:
            off = np.mod(delta, k)
            wrap = np.array(topo.wrap)[first]
            plus = np.where(off * 2 < k, True,
                            np.where(off * 2 > k, False, (cur[first] % 2) == 0))
            if not topo.bidirectional:
                plus = np.ones_like(plus)
            direction = np.where(wrap, np.where(plus, 1, -1), direction)
        ch = chan[src, first, np.where(direction > 0, 0, 1)]
        table[src] = np.where(has, ch, -1)
        if np.any(has & (ch < 0)):
            raise ConfigError(f"routing: no channel from {topo.node_names[src]} in "
                              "dimension order (the topology lacks a link)")
    # classes: a group per dimension; along each direction the order rises with the
    # position travelled, and the wrap-around channel is lowest (the dateline)
    group = np.array(topo.ch_dim, np.int32)
    order = np.zeros(topo.n_channels, np.int32)
    for c in range(topo.n_channels):
        d = topo.ch_dim[c]
        k = topo.dims[d]
        x = int(topo.coords[topo.ch_src[c], d])
        if topo.ch_wrap[c]:
            order[c] = 0
        elif topo.ch_dir[c] > 0:
            order[c] = x + 1
        else:
            order[c] = k - x
    return table, group, order


def route_dor(topo, cfg):
    if topo.coords is None:
        raise ConfigError("routing 'dor' needs a regular (mesh) topology")
    return Routing("dor", *_dimension_order(topo, wrap_dims=False))


def _random_ties(topo, r):
    """Let a packet at distance k/2 on a ring dimension of even k go either way (chosen per
    packet by the engine): per dimension k, per channel the one leaving its source the other
    way in its dimension, and the table with every tie taken that other way."""
    chan = _channel_index(topo)
    dims = np.array(topo.dims)
    tie_k = np.where(np.array(topo.wrap) & (dims % 2 == 0), dims, 0).astype(np.int32)
    rev = np.full(topo.n_channels, -1, np.int32)
    for c in range(topo.n_channels):
        d = topo.ch_dim[c]
        if d >= 0:
            rev[c] = chan[topo.ch_src[c], d, 1 if topo.ch_dir[c] > 0 else 0]
    alt = r.table.copy()
    coords = topo.coords
    rows = np.arange(topo.n_nodes)
    for src in range(topo.n_nodes):
        diff = coords - coords[src]
        moving = diff != 0
        has = moving.any(axis=1)
        first = np.argmax(moving, axis=1)
        k = tie_k[first]
        tie = has & (k > 0) & (np.mod(diff[rows, first], np.maximum(k, 1)) * 2 == k)
        alt[src, tie] = rev[r.table[src, tie]]
    r.tie_k, r.ch_rev, r.alt_table = tie_k, rev, alt


DATELINES = ("booksim", "crossing", "fewest")


def route_dor_dateline(topo, cfg):
    if topo.coords is None:
        raise ConfigError("routing 'dor_dateline' needs a regular (ring or torus) topology")
    r = Routing("dor_dateline", *_dimension_order(topo, wrap_dims=True))
    r.node_pos = np.ascontiguousarray(topo.coords, np.int32)
    if cfg.topology.tie_break == "random" and topo.bidirectional:
        _random_ties(topo, r)
    scheme = cfg.topology.dateline
    if scheme == "booksim" and not topo.bidirectional:
        # BookSim's classes rely on minimal routes of at most k/2 hops: on a ring one way
        # round the packets of the upper class could close the ring
        r.scheme = ("dateline classes: the upper VCs from the wrap-around link on (a ring one "
                    "way round: BookSim's classes, topology.dateline = 'booksim', need both "
                    "directions)")
    elif scheme == "booksim":
        r.ch_order = np.zeros(topo.n_channels, np.int32)
        r.entry_class = True
        r.scheme = ("dateline classes as BookSim's: a packet keeps, for its whole trip in a "
                    "dimension, the upper VCs if its destination's coordinate is below the one "
                    "it entered at (topology.dateline = 'booksim')")
    else:
        r.scheme = ("dateline classes: the upper VCs from the wrap-around link on "
                    f"(topology.dateline = '{scheme}')")
    return r


# ------------------------------------------------------------------ shortest paths, any graph

def _weights(topo, how):
    if how == "hops":
        return np.ones(topo.n_channels)
    if how == "latency":
        return np.asarray(topo.ch_latency_cycles, float)
    if how == "bandwidth":
        bw = np.asarray(topo.ch_bytes_per_cycle, float)
        return bw.max() / bw
    raise ConfigError(f"topology.route_weight = {how!r}: expected 'hops', 'latency' or "
                      f"'bandwidth'")


def shortest_path_table(topo, how="hops", transit=None):
    """table[u, d]: the channel u takes towards d on a shortest path (weights: 1 per hop, link
    latency, or inverse bandwidth; ties go to the neighbour with the lowest node id, and among
    parallel channels to the lowest channel id: the engine spreads packets over a group of
    parallel channels). Every destination's next hops form a tree, so routes are loop-free.
    Switches are not destinations. Compiled (csim next_hops): a search from every
    destination over the reversed channels, O(nodes x channels) in all; where every channel
    weighs the same (hops, or links all alike), a breadth-first search that stops once every
    node is reached (the same table: distances are hops times the weight). transit: the node
    kinds a route may pass through (None: every kind); a node of another kind is only ever a
    route's first or last node."""
    n = topo.n_nodes
    w = np.ascontiguousarray(_weights(topo, how), np.float64)
    src = np.asarray(topo.ch_src, np.int64)
    dst = np.asarray(topo.ch_dst, np.int64)
    C = src.size
    in_ch = np.lexsort((np.arange(C), dst))                  # entering each node
    in_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=in_ptr[1:])
    out_ch = np.lexsort((np.arange(C), dst, src))            # leaving: by next node, id
    out_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=out_ptr[1:])
    is_dest = np.array([k != "switch" for k in topo.node_kinds], np.uint8)
    passes = np.array([transit is None or k in transit for k in topo.node_kinds], np.uint8)
    table = np.full(n * n, -1, dtype=np.int32)
    bad = core.next_hops(n, in_ptr, src[in_ch].astype(np.int32), w[in_ch],
                         in_ch.astype(np.int32), out_ptr, dst[out_ch].astype(np.int32),
                         out_ch.astype(np.int32), w[out_ch], is_dest,
                         bool(w.size == 0 or np.all(w == w[0])), table, passes)
    if bad is not None:
        d, u = bad
        table = table.reshape(n, n)
        lost = [topo.node_names[v] for v in range(n)
                if v != d and is_dest[v] and table[v, d] < 0]
        why = "the graph is not connected" if transit is None else \
            f"through the node kinds of topology.transit = {list(transit)}"
        raise ConfigError(f"topology: {topo.node_names[d]} cannot be reached from "
                          f"{', '.join(lost[:5])} ({why})")
    return table.reshape(n, n)


def route_table(topo, cfg):
    """Shortest paths on any graph; classes from the CDG order (see the module docstring)."""
    table = shortest_path_table(topo, cfg.topology.route_weight, cfg.topology.transit)
    return Routing("table", table, np.zeros(topo.n_channels, np.int32), None)  # (build: order)


# ------------------------------------------------------------------ channel dependencies

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


def _csr(n_vertices, edges):
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
    return core.dfs_order(n_vertices, *_csr(n_vertices, edges))[1]


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


def check(topo, routing, vcs):
    """Refuse a configuration whose routes need more VC classes than there are VCs."""
    if routing.n_classes <= vcs:
        return
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


def route_given(topo, cfg):
    """The routes the topology carries (topo.table: a network cut out of a larger one keeps
    the routes it had there); classes from the CDG order, as for 'table'."""
    if topo.table is None:
        raise ConfigError("routing 'given' needs a topology that carries its routing table")
    return Routing("given", np.asarray(topo.table, np.int32),
                   np.zeros(topo.n_channels, np.int32), None)           # (build: order)


ROUTINGS = {
    "dor": route_dor,
    "dor_dateline": route_dor_dateline,
    "table": route_table,
    "given": route_given,
}


def build(topo, cfg) -> Routing:
    name = topo.routing
    if name not in ROUTINGS:
        raise ConfigError(f"routing {name!r}: unknown; known: {', '.join(sorted(ROUTINGS))}")
    r = ROUTINGS[name](topo, cfg)
    deps = channel_dependencies(topo, r.table, r.alt_table)
    post, cycle = core.dfs_order(topo.n_channels, *_csr(topo.n_channels, deps))
    # reverse postorder of a DFS of the one-class CDG: a topological order when it is
    # acyclic, and where it is not, descents (new VC classes) happen on back edges only
    order = np.zeros(topo.n_channels, np.int32)
    order[post[::-1]] = np.arange(topo.n_channels, dtype=np.int32)
    keep = name == "dor_dateline" and cfg.topology.dateline != "fewest"
    if not keep and cycle is None:
        # the routes cannot deadlock even in one class: every VC serves every packet, and
        # with a topological order no route ever drops in order (one group: the table's
        # ties, whose dependencies were counted too, are taken as they are)
        r.ch_group = np.zeros(topo.n_channels, np.int32)
        r.ch_order = order
        r.node_pos = None
        r.entry_class = False
        r.tie_k = r.ch_rev = r.alt_table = None
        r.n_classes = 1
        r.cdg_edges = len(deps)
        r.scheme = ("one VC class: the routes' channel-dependency graph is acyclic" +
                    (" (topology.dateline = 'fewest')" if name == "dor_dateline" else ""))
    else:
        if r.ch_order is None:                     # (table routing: the CDG's own order)
            r.ch_order = order
        analyse(topo, r)
        if not r.scheme:
            r.scheme = (f"{r.n_classes} VC class(es) from the order of the channel-dependency "
                        "graph")
    if name == "dor_dateline" and topo.bidirectional and \
            any(w and k % 2 == 0 for w, k in zip(topo.wrap, topo.dims)):
        r.scheme += ("; ties at distance k/2 either way, by a coin per packet "
                     "(topology.tie_break = 'random')" if r.tie_k is not None else
                     "; ties at distance k/2 by parity (topology.tie_break = 'parity')")
    check(topo, r, cfg.network.vcs)
    return r


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


# The configuration keys this module reads (pysim.schema).
declare(
    Key("topology", "route_weight", "str", "hops", "-",
        "Graph routing: shortest paths by 'hops', link 'latency' or inverse 'bandwidth'.",
        None, lambda: ["hops", "latency", "bandwidth"]),
    Key("topology", "transit", "strs", None, "node kinds",
        "Graph routing: the kinds of node that forward other nodes' packets (default: every "
        "kind); ['switch', 'host'] keeps traffic between NPUs without a direct link off the "
        "other NPUs, as on servers whose GPUs do not route.",
        (lambda xs: len(xs) > 0 and all(x in ("npu", "mem", "host", "switch") for x in xs),
         "a non-empty list of node kinds: npu, mem, host, switch")),
    Key("topology", "dateline", "str", "booksim", "-",
        "Ring, torus: VC classes of each dimension. 'booksim' (BookSim's): for its whole trip "
        "in a dimension a packet uses the upper half of the VCs if its destination's "
        "coordinate is below the one it entered at, else the lower; 'crossing': the lower "
        "half until it crosses the wrap-around link, the upper from it on; 'fewest': every VC "
        "for every packet when the routes cannot deadlock without classes (a 4-ary torus with "
        "tie_break = 'parity'), else 'crossing'.", None, lambda: ["booksim", "crossing", "fewest"]),
    Key("topology", "tie_break", "str", "parity", "-",
        "Ring, torus: the way a packet takes at distance exactly k/2 (k even) where it enters "
        "a dimension: 'parity' (+ if its coordinate there is even, else -: routes are a fixed "
        "table, as the flow level's, every link gets the same share of ties, and a 4-ary "
        "torus needs no dateline classes) or 'random' (BookSim's: either, by a coin per "
        "packet).", None, lambda: ["parity", "random"]),
)
