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
    post, cycle = core.dfs_order(topo.n_channels, *csr(topo.n_channels, deps))
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
