"""Allocation shapes: the part of a server that a job, or jobs running together, use, cut out
and numbered canonically.

The allocated subgraph of a job is the union of the server's routes between the pairs of its
NPUs that communicate (its pattern's: a ring's neighbours, a clique's every pair, a tree's
edges; every ordered pair if not said): their nodes, the links they take (every parallel
channel of each) and the routes themselves. Nodes other than the jobs' NPUs keep only their
forwarding role (they become switches). The nodes are numbered the jobs' NPUs first (job after
job, rank after rank), then in the order a fixed walk over the routes meets them, and the
links likewise, so two allocations whose subgraphs are isomorphic -- ranks to ranks, links to
links of the same bandwidth and latency, routes to routes -- get the same numbered network
and the same key, and a simulation on it does not depend on which of them asked. A placement's
ranks are put in a canonical order first (canonical_ranks: a ring's rotations and
reflections, a clique's permutations are one placement), and jobs running together in a
canonical order (by label, then by their own shape; ties tried every way, the least
description kept).
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy as np

from pysim.errors import ConfigError
from pysim.topology import Topology
from pysim.routing import build as routes


@dataclass
class Shape:
    key: str          # sha256 of what the simulation depends on
    topo: Topology    # the cut-out network, canonically numbered; nodes keep their names
    order: list       # canonical position -> index of the member given
    names: list       # per canonical position: the member's node names in rank order


def _all_pairs(k):
    return [(a, b) for a in range(k) for b in range(k) if a != b]


def _describe(server, members, pairs=None):
    """The canonical description of the subgraph of `members` (lists of NPU indices, in
    this order) over the routes of `pairs` (per member, the (rank, rank) pairs that
    communicate; default every ordered pair), and the server node ids in canonical order."""
    t = server.topo
    S = [x for m in members for x in m]
    nodes = [server.npus[x] for x in S]
    idx = {v: i for i, v in enumerate(nodes)}
    links, link_idx, routes = [], {}, []
    pairs = pairs or [_all_pairs(len(m)) for m in members]
    walk = [(m[a], m[d]) for m, ps in zip(members, pairs) for a, d in ps]
    for a, d in walk:
        dd = idx[server.npus[d]]
        for u, v in server.route(a, d):
            for w in (u, v):
                if w not in idx:
                    idx[w] = len(nodes)
                    nodes.append(w)
            if (u, v) not in link_idx:
                link_idx[(u, v)] = len(links)
                links.append((u, v))
            routes.append((idx[u], dd, link_idx[(u, v)]))
    chans = {key: [(round(float(t.ch_bytes_per_cycle[c]), 9), int(t.ch_latency_cycles[c]))
                   for c in server.channels(*key)] for key in link_idx}
    node_desc = []
    for i, v in enumerate(nodes):
        if i < len(S):
            own = t.node_mem[v] if t.node_mem else {}
            inj = t.node_injection_gbps[v] if t.node_injection_gbps else None
            ej = t.node_ejection_gbps[v] if t.node_ejection_gbps else None
            node_desc.append((t.node_kinds[v], tuple(sorted(own.items())), inj, ej))
        else:
            node_desc.append(("switch",))
    link_desc = tuple((idx[u], idx[v], tuple(sorted(chans[(u, v)]))) for u, v in links)
    desc = (tuple(len(m) for m in members), tuple(node_desc), link_desc,
            tuple(sorted(set(routes))))
    return desc, nodes


def canonical_ranks(server, nodes, pattern, pairs):
    """The rank order of a placement that describes least (see shape): a ring's rotations
    and reflections, or a clique's permutations, are the same placement, so the one whose
    subgraph description is least is taken -- isomorphic placements then get one shape. A
    tree keeps its order (its ranks are not interchangeable)."""
    nodes = list(nodes)
    k = len(nodes)
    if k <= 1 or pattern == "tree":
        return nodes
    if pattern == "ring":
        opts = [nodes[i:] + nodes[:i] for i in range(k)]
        opts += [list(reversed(o)) for o in opts]
    else:
        opts = [list(p) for p in itertools.permutations(nodes)]
    return min(opts, key=lambda o: repr(_describe(server, [o], [pairs])[0]))


def shape(server, members, labels, salt=(), pairs=None) -> Shape:
    """The shape of `members` (per job: its NPU indices in rank order) with per-member
    `labels` (what else the simulation depends on: the model, batch, ...), `salt` (the
    rest: the server's config, iteration counts) and `pairs` (per member, the rank pairs
    that communicate: only their routes are kept; default every ordered pair)."""
    pairs = pairs or [_all_pairs(len(m)) for m in members]
    own = [repr((labels[i], _describe(server, [m], [pairs[i]])[0]))
           for i, m in enumerate(members)]
    base = sorted(range(len(members)), key=lambda i: own[i])
    # members with equal labels and equal own shapes: try their orders, keep the least
    groups = [list(g) for _, g in itertools.groupby(base, key=lambda i: own[i])]
    tries = math.prod(math.factorial(len(g)) for g in groups)
    options = ([sum(p, []) for p in itertools.product(
        *[[list(q) for q in itertools.permutations(g)] for g in groups])]
        if 1 < tries <= 720 else [base])
    best = None
    for order in options:
        desc, nodes = _describe(server, [members[i] for i in order],
                                [pairs[i] for i in order])
        text = repr((tuple(labels[i] for i in order), desc))
        if best is None or text < best[0]:
            best = (text, order, desc, nodes)
    text, order, desc, nodes = best
    key = hashlib.sha256(repr((salt, text)).encode()).hexdigest()
    names = [[server.names[x] for x in members[i]] for i in order]
    memo = server.shapes
    if key in memo:           # the same network, its nodes named after this placement's
        topo = dataclasses.replace(memo[key],
                                   node_names=[server.topo.node_names[v] for v in nodes])
        return Shape(key=key, topo=topo, order=list(order), names=names)
    topo = _build(server, desc, nodes)
    try:
        routes(topo, server.cfg)       # (the routes of the pairs alone pass the deadlock check)
    except ConfigError:
        if any(len(p) < len(m) * (len(m) - 1) for p, m in zip(pairs, members)):
            return shape(server, members, labels, salt)        # every pair's routes, then
        raise
    if len(memo) > 4096:
        memo.clear()
    memo[key] = topo
    return Shape(key=key, topo=topo, order=list(order), names=names)


def _build(server, desc, nodes):
    t = server.topo
    sizes, node_desc, link_desc, routes = desc
    n_s = sum(sizes)
    sub = Topology(name=f"{server.name}:shape", node_names=[t.node_names[v] for v in nodes],
                   node_kinds=[d[0] for d in node_desc], routing="given",
                   node_mem=[(t.node_mem[v] if t.node_mem else {}) if i < n_s else {}
                             for i, v in enumerate(nodes)])
    first = []
    for a, b, chans in link_desc:
        first.append(sub.n_channels)
        for bpc, lat in chans:
            sub.add_channel(a, b, bpc, lat)
    sub.node_injection_gbps = [d[2] if d[0] != "switch" else None for d in node_desc]
    sub.node_ejection_gbps = [d[3] if d[0] != "switch" else None for d in node_desc]
    table = np.full((len(nodes), len(nodes)), -1, np.int32)
    for u, d, link in routes:
        table[u, d] = first[link]
    sub.table = table
    return sub
