"""Allocation shapes: the part of a server that a job, or jobs running together, can use,
cut out and numbered canonically.

The allocated subgraph of NPUs S (each job's NPUs in rank order, jobs one after another) is
the union of the server's routes between every ordered pair of S: its nodes, the links they
take (every parallel channel of each) and the routes themselves. Nodes outside S keep only
their forwarding role (they become switches). The nodes are numbered S first, then in the
order a fixed walk over the routes meets them (pairs in order, hops in order), and the links
likewise, so two allocations whose subgraphs are isomorphic -- ranks to ranks, links to links
of the same bandwidth and latency, routes to routes -- get the same numbered network and the
same key, and a simulation on it does not depend on which of them asked. Jobs running
together are put in a canonical order first (by label, then by their own shape; ties tried
every way, the least description kept).
"""
from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy as np

from pysim.topology import Topology


@dataclass
class Shape:
    key: str          # sha256 of what the simulation depends on
    topo: Topology    # the cut-out network, canonically numbered; nodes keep their names
    order: list       # canonical position -> index of the member given
    names: list       # per canonical position: the member's node names in rank order


def _describe(server, members):
    """The canonical description of the subgraph of `members` (lists of NPU indices, in
    this order), and the server node ids in canonical order."""
    t = server.topo
    S = [x for m in members for x in m]
    nodes = [server.npus[x] for x in S]
    idx = {v: i for i, v in enumerate(nodes)}
    links, link_idx, routes = [], {}, []
    for a in S:
        for d in S:
            if a == d:
                continue
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
    chans = {}
    for c in range(t.n_channels):
        key = (t.ch_src[c], t.ch_dst[c])
        if key in link_idx:
            chans.setdefault(key, []).append((round(float(t.ch_bytes_per_cycle[c]), 9),
                                              int(t.ch_latency_cycles[c])))
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


def shape(server, members, labels, salt=()) -> Shape:
    """The shape of `members` (per job: its NPU indices in rank order) with per-member
    `labels` (what else the simulation depends on: the model, batch, ...) and `salt` (the
    rest: the server's config, iteration counts)."""
    own = [repr((labels[i], _describe(server, [m])[0])) for i, m in enumerate(members)]
    base = sorted(range(len(members)), key=lambda i: own[i])
    # members with equal labels and equal own shapes: try their orders, keep the least
    groups = [list(g) for _, g in itertools.groupby(base, key=lambda i: own[i])]
    tries = math.prod(math.factorial(len(g)) for g in groups)
    options = ([sum(p, []) for p in itertools.product(
        *[[list(q) for q in itertools.permutations(g)] for g in groups])]
        if 1 < tries <= 720 else [base])
    best = None
    for order in options:
        desc, nodes = _describe(server, [members[i] for i in order])
        text = repr((tuple(labels[i] for i in order), desc))
        if best is None or text < best[0]:
            best = (text, order, desc, nodes)
    text, order, desc, nodes = best
    key = hashlib.sha256(repr((salt, text)).encode()).hexdigest()
    return Shape(key=key, topo=_build(server, desc, nodes), order=list(order),
                 names=[[server.names[x] for x in members[i]] for i in order])


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
