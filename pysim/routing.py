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
keep their scheme. `pysim.deadlock.analyse()` follows every route, builds the CDG over (channel, class), checks
that it is acyclic and counts the classes needed; `pysim.deadlock.check()` refuses a
configuration whose routes need more classes than there are VCs, naming a cycle of the
one-class CDG.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysim.deadlock import analyse, channel_dependencies, check, csr
from pysim.engine import core
from pysim.errors import ConfigError
from pysim.schema import Key, declare
from pysim.topology import tree_links


# Routes by rule are analysed route by route (the channel-dependency graph of every route,
# from their table) up to this many nodes; beyond, their classes come from the rule's theorem
# (dimension order on meshes and tori, Dally and Seitz; up/down on trees), which the tests
# hold to the analysis on every small shape.
ANALYSE_MAX_NODES = 2048
# A table of every pair of nodes is built from a rule on demand (for the analyses that read
# one: the deadlock check's route walk, a cut-out network's routes) up to this many nodes
# (1 GiB of int32); the routes of given pairs are looked up from the rule at any size
# (Routing.next, paths).
TABLE_MAX_NODES = 16384


@dataclass
class Rule:
    """Routes by rule, as csim's routers look them up (csim.RouteRule): `spec` holds kind
    ('dor': dimension order from coordinates; 'rows': a row per kind of node plus the node's
    offset, and exceptions), n and the kind's arrays; `order`, if given, a topological
    order of the channels along every route (one VC class suffices: up/down routes)."""
    spec: dict
    order: np.ndarray | None = None
    _rr: object = None

    def routes(self):
        if self._rr is None:
            self._rr = core.RouteRule(self.spec)
        return self._rr

    def table(self):
        """The table of every (node, destination) pair (at most TABLE_MAX_NODES nodes)."""
        n = self.spec["n"]
        if n > TABLE_MAX_NODES:
            raise ConfigError(f"routes of {n:,} nodes are by rule; a table of every pair is "
                              f"made for at most {TABLE_MAX_NODES:,} nodes (the routes of "
                              f"given pairs are looked up from the rule: pysim.routing.paths)")
        return self.routes().rows(0, n)


@dataclass
class Routing:
    name: str
    tab: np.ndarray | None  # (n_nodes, n_nodes) int32 topology channel ids, -1 on the
                            # diagonal; None where routes are by rule (`table` builds it)
    ch_group: np.ndarray   # per topology channel
    ch_order: np.ndarray
    n_classes: int = 1     # VC classes the routes need (set by analyse)
    cdg_edges: int = 0     # (-1: not enumerated: deadlock-free by the rule's theorem)
    node_pos: np.ndarray | None = None   # (n_nodes, groups) positions, or None (see above)
    entry_class: bool = False   # class 1 on entering a group where the position is above
                                # the destination's (else class 0)
    scheme: str = ""       # how the classes were chosen, in words (pysim topo prints it)
    tie_k: np.ndarray | None = None      # random ties: per group, k of its ring (0: none)
    ch_rev: np.ndarray | None = None     # ... per channel, the one leaving its source the
    alt: object = None     # other way; the table with every tie taken that way (or a
                           # function making it from the table)
    rule: Rule | None = None   # routes by rule (else by `tab`)

    @property
    def table(self):
        """The table of every (node, destination) pair (built from the rule if need be)."""
        if self.tab is None:
            self.tab = self.rule.table()
        return self.tab

    def next(self, src, dst):
        """The channel a packet at src bound for dst takes next, per pair (src and dst
        broadcast; -1 where src == dst): from the table where there is one, else looked up
        from the rule (compiled; no table of every pair)."""
        s, d = np.broadcast_arrays(np.asarray(src, np.int64), np.asarray(dst, np.int64))
        if self.tab is not None:
            return np.asarray(self.tab)[s, d].astype(np.int32)
        return self.rule.routes().next(s.reshape(-1), d.reshape(-1)).reshape(s.shape)

    @property
    def alt_table(self):
        if callable(self.alt):
            self.alt = self.alt(self.table)
        return self.alt


# ------------------------------------------------------------------ dimension order

def _channel_index(topo):
    """chan[node, dim, 0 for +1 / 1 for -1] -> channel id, or -1."""
    nd = len(topo.dims)
    chan = np.full((topo.n_nodes, max(nd, 1), 2), -1, dtype=np.int64)
    dim = np.asarray(topo.ch_dim, np.int64)
    c = np.flatnonzero(dim >= 0)
    chan[np.asarray(topo.ch_src, np.int64)[c], dim[c],
         np.where(np.asarray(topo.ch_dir, np.int64)[c] > 0, 0, 1)] = c
    return chan


def _dimension_order(topo, wrap_dims):
    """Dimension-order routing (lowest dimension first) on a regular topology, as a rule
    (csim's RT_DOR: the next hop from the coordinates; no table of every pair).

    In a dimension with wrap-around links the shorter way round is taken; at distance exactly
    k/2 (k even) the packet goes in the + direction when its coordinate in that dimension is
    even at the router where it enters the dimension, and - when odd, which splits the ties
    evenly between the two directions. A unidirectional ring always goes +.
    """
    n = topo.n_nodes
    coords = np.asarray(topo.coords, np.int64).reshape(n, -1)
    dims = np.array(topo.dims, np.int64)
    wrap = np.array(topo.wrap, bool) if wrap_dims else np.zeros(dims.size, bool)
    chan = _channel_index(topo)
    # every channel a route may ask for exists: + below the top (or anywhere where the
    # dimension wraps), - above 0 (or anywhere where it wraps both ways)
    moves = dims[None, :] > 1
    need_p = moves & (wrap[None, :] | (coords < dims[None, :] - 1))
    need_m = moves & ((wrap[None, :] & topo.bidirectional) | (~wrap[None, :] & (coords > 0)))
    lack = (need_p & (chan[:, :dims.size, 0] < 0)) | (need_m & (chan[:, :dims.size, 1] < 0))
    if lack.any():
        src = int(np.flatnonzero(lack.any(axis=1))[0])
        raise ConfigError(f"routing: no channel from {topo.node_names[src]} in "
                          "dimension order (the topology lacks a link)")
    spec = dict(kind="dor", n=n, dims=dims, wrap=np.array(topo.wrap, np.int32),
                coords=coords, chan=chan[:, :dims.size, :], bidir=bool(topo.bidirectional),
                dateline=bool(wrap_dims))
    # classes: a group per dimension; along each direction the order rises with the
    # position travelled, and the wrap-around channel is lowest (the dateline)
    group = np.array(topo.ch_dim, np.int32)
    order = np.zeros(topo.n_channels, np.int32)
    d = np.asarray(topo.ch_dim, np.int64)
    c = np.flatnonzero(d >= 0)
    k = dims[d[c]]
    x = coords[np.asarray(topo.ch_src, np.int64)[c], d[c]]
    plus = np.asarray(topo.ch_dir, np.int64)[c] > 0
    order[c] = np.where(np.asarray(topo.ch_wrap, bool)[c], 0, np.where(plus, x + 1, k - x))
    return Rule(spec), group, order


def _dor_used(topo, r):
    """Per topology channel: does some route take it? Dimension order takes every channel but,
    in a wrapping dimension of 2 nodes with links both ways (where + and - lead to the same
    neighbour), the one its parity does not pick."""
    used = np.ones(topo.n_channels, bool)
    if r.name != "dor_dateline" or not topo.bidirectional:
        return used
    d = np.asarray(topo.ch_dim, np.int64)
    dims = np.array(topo.dims, np.int64)
    c = np.flatnonzero((d >= 0) & (dims[np.maximum(d, 0)] == 2) &
                       np.array(topo.wrap, bool)[np.maximum(d, 0)])
    x = topo.coords[np.asarray(topo.ch_src, np.int64)[c], d[c]]
    used[c] = (np.asarray(topo.ch_dir, np.int64)[c] > 0) == (x % 2 == 0)
    return used


def route_dor(topo, cfg):
    if topo.coords is None:
        raise ConfigError("routing 'dor' needs a regular (mesh) topology")
    rule, group, order = _dimension_order(topo, wrap_dims=False)
    return Routing("dor", None, group, order, rule=rule)


def _random_ties(topo, r):
    """Let a packet at distance k/2 on a ring dimension of even k go either way (chosen per
    packet by the engine): per dimension k, per channel the one leaving its source the other
    way in its dimension, and (made when asked for) the table with every tie taken that
    other way."""
    chan = _channel_index(topo)
    dims = np.array(topo.dims)
    tie_k = np.where(np.array(topo.wrap) & (dims % 2 == 0), dims, 0).astype(np.int32)
    rev = np.full(topo.n_channels, -1, np.int32)
    d = np.asarray(topo.ch_dim, np.int64)
    c = np.flatnonzero(d >= 0)
    rev[c] = chan[np.asarray(topo.ch_src, np.int64)[c], d[c],
                  np.where(np.asarray(topo.ch_dir, np.int64)[c] > 0, 1, 0)]

    def alt_table(table):
        alt = table.copy()
        coords = topo.coords
        rows = np.arange(topo.n_nodes)
        for src in range(topo.n_nodes):
            diff = coords - coords[src]
            moving = diff != 0
            has = moving.any(axis=1)
            first = np.argmax(moving, axis=1)
            k = tie_k[first]
            tie = has & (k > 0) & (np.mod(diff[rows, first], np.maximum(k, 1)) * 2 == k)
            alt[src, tie] = rev[table[src, tie]]
        return alt
    r.tie_k, r.ch_rev, r.alt = tie_k, rev, alt_table


DATELINES = ("booksim", "crossing", "fewest")


def route_dor_dateline(topo, cfg):
    if topo.coords is None:
        raise ConfigError("routing 'dor_dateline' needs a regular (ring or torus) topology")
    rule, group, order = _dimension_order(topo, wrap_dims=True)
    r = Routing("dor_dateline", None, group, order, rule=rule)
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


def _tree_rule(topo, transit, how="hops"):
    """Routes of a connected tree (every link both ways) as rows (csim's RT_ROWS): rooted at
    its node of most links, a node's row is its channel up to its parent, except towards the
    endpoints below it, each reached through the child above it (among parallel channels the
    cheapest by `how`, topology.route_weight, then the lowest id, as the table's). Its ranks
    rise along every route (up, then down). None where a node that may not pass traffic on
    (topology.transit) lies inside the tree."""
    n = topo.n_nodes
    src = np.asarray(topo.ch_src, np.int64)
    dst = np.asarray(topo.ch_dst, np.int64)
    if not tree_links(n, src, dst):
        return None
    deg = np.bincount(np.unique(src * n + dst) // n, minlength=n)
    kinds = np.array(topo.node_kinds)
    if transit is not None and (deg[~np.isin(kinds, list(transit))] > 1).any():
        return None
    # the channel u -> v (the cheapest, then the lowest id, among parallel ones), then a
    # breadth-first search
    order = np.lexsort((np.arange(src.size), _weights(topo, how), dst, src))
    key = src[order] * n + dst[order]
    keep = np.ones(key.size, bool)
    keep[1:] = key[1:] != key[:-1]
    ch_key, ch_of = key[keep], order[keep]
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src[ch_of], minlength=n), out=ptr[1:])
    nbr = dst[ch_of]
    root = int(np.argmax(np.where(kinds == "switch", deg, 0) if (kinds == "switch").any()
                         else deg))
    parent = np.full(n, -1, np.int64)
    depth = np.full(n, -1, np.int64)
    depth[root] = 0
    frontier = np.array([root], np.int64)
    while frontier.size:
        lo, hi = ptr[frontier], ptr[frontier + 1]
        cnt = hi - lo
        idx = np.repeat(hi - np.cumsum(cnt), cnt) + np.arange(int(cnt.sum()))
        frm = np.repeat(frontier, cnt)
        to = nbr[idx]
        new = depth[to] < 0
        to, frm = to[new], frm[new]
        depth[to] = depth[frm] + 1
        parent[to] = frm
        frontier = to
    up = np.full(n, -1, np.int64)              # u -> parent(u)
    down = np.full(n, -1, np.int64)            # parent(u) -> u
    kids = np.flatnonzero(parent >= 0)
    up[kids] = ch_of[np.searchsorted(ch_key, kids * n + parent[kids])]
    down[kids] = ch_of[np.searchsorted(ch_key, parent[kids] * n + kids)]
    # exceptions: every ancestor of each endpoint d, towards d through the child above d
    ends = np.flatnonzero(kinds != "switch")
    eu, ed, ec = [], [], []
    cur, d = ends, ends
    while True:
        has = parent[cur] >= 0
        cur, d = cur[has], d[has]
        if cur.size == 0:
            break
        eu.append(parent[cur])
        ed.append(d)
        ec.append(down[cur])
        cur = parent[cur]
    eu, ed, ec = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (eu, ed, ec))
    srt = np.lexsort((ed, eu))
    exc_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(eu, minlength=n), out=exc_ptr[1:])
    vec = np.where(kinds != "switch", 0, -1)
    rows = np.concatenate([vec, np.full(n, -1)])       # row 0: up; row 1 (the root): none
    cls = np.where(parent >= 0, 0, 1)
    off = np.where(parent >= 0, up, 0)
    spec = dict(kind="rows", n=n, cls=cls, off=off, vec=rows, exc_ptr=exc_ptr,
                exc_d=ed[srt], exc_c=ec[srt])
    dmax = int(depth.max())
    going_up = depth[dst] < depth[src]
    rank = np.where(going_up, dmax - depth[src], dmax + depth[dst]).astype(np.int32)
    return Rule(spec, rank)


def route_table(topo, cfg):
    """Shortest paths on any graph; classes from the CDG order (see the module docstring).
    On a tree (every link both ways), its only paths, by rule (_tree_rule)."""
    rule = _tree_rule(topo, cfg.topology.transit, cfg.topology.route_weight)
    if rule is not None:
        return Routing("table", None, np.zeros(topo.n_channels, np.int32), None, rule=rule)
    table = shortest_path_table(topo, cfg.topology.route_weight, cfg.topology.transit)
    return Routing("table", table, np.zeros(topo.n_channels, np.int32), None)  # (build: order)


# ------------------------------------------------------------------ channel dependencies

def route_given(topo, cfg):
    """The routes the topology carries (topo.table: a network cut out of a larger one keeps
    the routes it had there); classes from the CDG order, as for 'table'."""
    if topo.tab is None and topo.rule is None:
        raise ConfigError("routing 'given' needs a topology that carries its routing table")
    if topo.rule is not None:              # (a cluster's up/down routes, by rule)
        return Routing("given", None, np.zeros(topo.n_channels, np.int32), None,
                       rule=topo.rule)
    return Routing("given", np.asarray(topo.table, np.int32),
                   np.zeros(topo.n_channels, np.int32), None)           # (build: order)


ROUTINGS = {
    "dor": route_dor,
    "dor_dateline": route_dor_dateline,
    "table": route_table,
    "given": route_given,
}


def _theorem(topo, r):
    """What following every route finds (for build), from the rule's theorem instead:
    (a cycle of the one-class channel-dependency graph as a list of channels, or None; the
    VC classes the routes need with the classes r gives them; a topological order of the
    one-class graph where it is acyclic). Up/down routes (a tree's) and dimension order on a
    mesh never close a cycle (Dally and Seitz); on a ring of k, dimension order closes one
    where routes of two hops or more start at every position (one way round: k >= 3; both
    ways: k >= 5, or k = 4 with random ties), and within a dimension a route takes its
    wrap-around channel after another one where it may go two hops towards it (both ways:
    k >= 4; one way: k >= 3) -- the dateline's second class; BookSim's entry classes need
    two wherever a dimension has two positions or more."""
    if r.name in ("given", "table"):          # (up/down: a cluster's, a tree's)
        return None, 1, r.rule.order
    dims = np.array(topo.dims, np.int64)
    wraps = np.array(topo.wrap, bool) & (r.name == "dor_dateline")
    bi = topo.bidirectional
    ring = [bool(w) and k >= 3 and (not bi or k >= 5 or (k == 4 and r.tie_k is not None))
            for k, w in zip(dims, wraps)]
    cycle = None
    if any(ring):                      # the + channels round the ring at 0 elsewhere
        d = ring.index(True)
        coords = np.asarray(topo.coords, np.int64)
        others = np.delete(coords, d, axis=1)
        nodes = np.flatnonzero((others == 0).all(axis=1))
        nodes = nodes[np.argsort(coords[nodes, d])]
        cycle = [int(x) for x in _channel_index(topo)[nodes, d, 0]]
    if r.entry_class:
        classes = 2 if (dims >= 2).any() else 1
    else:
        classes = 2 if any(w and k >= (4 if bi else 3) for k, w in zip(dims, wraps)) else 1
    # where acyclic: by dimension, then along each direction the position travelled
    d = np.asarray(topo.ch_dim, np.int64)
    x = np.asarray(topo.coords, np.int64)[np.asarray(topo.ch_src, np.int64), d]
    k = dims[d]
    plus = np.asarray(topo.ch_dir, np.int64) > 0
    order = (d * (2 * int(dims.max()) + 2) + np.where(plus, x + 1, k - x)).astype(np.int32)
    return cycle, classes, order


def build(topo, cfg, exact=None) -> Routing:
    """The routing of the topology, its VC classes and their proof (see the module
    docstring). exact: follow every route to find the classes (default: for routes by table,
    and routes by rule of up to ANALYSE_MAX_NODES nodes), else take them from the rule's
    theorem (_theorem)."""
    name = topo.routing
    if name not in ROUTINGS:
        raise ConfigError(f"routing {name!r}: unknown; known: {', '.join(sorted(ROUTINGS))}")
    r = ROUTINGS[name](topo, cfg)
    if exact is None:
        exact = r.rule is None or topo.n_nodes <= ANALYSE_MAX_NODES
    elif not exact and r.rule is None:
        raise ValueError(f"routing {name!r} has no rule: its classes are found exactly")
    if exact:
        deps = channel_dependencies(topo, r.table, r.alt_table)
        post, cycle = core.dfs_order(topo.n_channels, *csr(topo.n_channels, deps))
        # reverse postorder of a DFS of the one-class CDG: a topological order when it is
        # acyclic, and where it is not, descents (new VC classes) happen on back edges only
        order = np.zeros(topo.n_channels, np.int32)
        order[post[::-1]] = np.arange(topo.n_channels, dtype=np.int32)
        edges = len(deps)
    else:
        cycle, classes, order = _theorem(topo, r)
        edges = -1
    keep = name == "dor_dateline" and cfg.topology.dateline != "fewest"
    if not keep and cycle is None:
        # the routes cannot deadlock even in one class: every VC serves every packet, and
        # with a topological order no route ever drops in order (one group: the table's
        # ties, whose dependencies were counted too, are taken as they are)
        r.ch_group = np.zeros(topo.n_channels, np.int32)
        r.ch_order = order
        r.node_pos = None
        r.entry_class = False
        r.tie_k = r.ch_rev = r.alt = None
        r.n_classes = 1
        r.cdg_edges = edges
        r.scheme = ("one VC class: the routes' channel-dependency graph is acyclic" +
                    (" (topology.dateline = 'fewest')" if name == "dor_dateline" else ""))
    else:
        if r.ch_order is None:                     # (table routing: the CDG's own order)
            r.ch_order = order
        if exact:
            analyse(topo, r)
        else:
            r.n_classes, r.cdg_edges = classes, -1
        if not r.scheme:
            r.scheme = (f"{r.n_classes} VC class(es) from the order of the channel-dependency "
                        "graph")
    if name == "dor_dateline" and topo.bidirectional and \
            any(w and k % 2 == 0 for w, k in zip(topo.wrap, topo.dims)):
        r.scheme += ("; ties at distance k/2 either way, by a coin per packet "
                     "(topology.tie_break = 'random')" if r.tie_k is not None else
                     "; ties at distance k/2 by parity (topology.tie_break = 'parity')")
    if not exact:
        r.scheme += " (deadlock-free by the routing's rule)"   # (its theorem: _theorem)
    check(topo, r, cfg.network.vcs, None if exact else (cycle,))
    return r


def paths(topo, routing, src, dst):
    """The routes of the pairs (src[i], dst[i]): an (m, L) int64 array of the topology
    channels each takes in order, -1 after its last (L: the longest route's hops). All pairs
    advance one hop per step (Routing.next: by rule, no table of every pair), so the cost is
    the pairs times the longest route, whatever the network's size."""
    src = np.asarray(src, np.int64).reshape(-1)
    dst = np.asarray(dst, np.int64).reshape(-1)
    if src.size != dst.size:
        raise ValueError("paths: src and dst differ in length")
    ch_dst = np.asarray(topo.ch_dst, np.int64)
    cur = src.copy()
    act = np.flatnonzero(cur != dst)
    hops = []
    while act.size:
        if len(hops) > topo.n_nodes:
            i = int(act[0])
            raise ConfigError(f"routing: the route from {topo.node_names[src[i]]} to "
                              f"{topo.node_names[dst[i]]} loops")
        c = routing.next(cur[act], dst[act]).astype(np.int64)
        if (c < 0).any():
            i = int(act[np.flatnonzero(c < 0)[0]])
            raise ConfigError(f"routing: no route from {topo.node_names[src[i]]} to "
                              f"{topo.node_names[dst[i]]}")
        step = np.full(src.size, -1, np.int64)
        step[act] = c
        hops.append(step)
        cur[act] = ch_dst[c]
        act = act[cur[act] != dst[act]]
    return np.stack(hops, axis=1) if hops else np.full((src.size, 0), -1, np.int64)


def path(topo, routing, src, dst):
    """The list of topology channels a packet from src to dst traverses."""
    row = paths(topo, routing, [src], [dst])[0]
    return [int(c) for c in row[row >= 0]]


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
        "a dimension: 'parity' (+ if its coordinate there is even, else -: routes are fixed, "
        "as the flow level's, every link gets the same share of ties, and a 4-ary "
        "torus needs no dateline classes) or 'random' (BookSim's: either, by a coin per "
        "packet).", None, lambda: ["parity", "random"]),
)
