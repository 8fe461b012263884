"""Allocation policies: which free NPUs a job gets, and in which order (its ranks).

An allocation places a job's communication pattern on the server: a ring of k NPUs in ring
order, a clique, or a double binary tree over ranks 0..k-1. `Candidates` holds every
placement of a pattern on k NPUs, in a fixed order (node sets in lexicographic order, and
within a set the rank orders, the sorted one first), with what the policies compare:

- `score`: the sum of the bandwidths (GB/s) of the routes of the pattern's edges (a ring's k
  edges, a clique's k(k-1)/2 pairs, the trees' edges), as MAPA's "LAST score" sums the
  bandwidths of the matched edges;
- `predicted`: the bandwidth the pattern's slowest edge can get (GB/s): along each route,
  each link's bandwidth shared among the edges of the pattern that cross it in the same
  direction, the least over the route, the least over the edges;
- `preserve(free)`: the NVLink bandwidth (direct NPU-NPU links, GB/s, each pair once) left
  among the NPUs that stay free.

Policies are registered functions `policy(server, job, cands, free) -> index or None` (None:
nothing fits, the job waits); `free` is a boolean array over the server's NPUs and
`cands.feasible(free)` the placements on free NPUs only. The four of MAPA (Ranganath et al.,
SC 2021):

- baseline: the lowest-numbered free NPUs (the first match), in the rank order with the best
  score (as MAPA's baseline, which permutes its first match);
- topo_aware: the first placement inside one root complex (PCIe tree under one host socket)
  when one has room, else baseline;
- greedy: the best score;
- preserve (MAPA): bandwidth-sensitive jobs the best predicted bandwidth, the others the most
  NVLink bandwidth left free; ties to the better score.

Ties go to the first placement in the order above.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import Key, declare
import difflib

POLICIES: dict[str, Callable] = {}
LABELLED: set[str] = set()      # the policies that read job.sensitive


def register(name, labels=False):
    """Register `fn(server, job, cands, free) -> index into cands, or None`. labels: the
    policy reads `job.sensitive` (a stream derives the labels only for such policies)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register(name): expected a policy's name (a str), not {name!r}")

    def deco(fn):
        if not callable(fn):
            raise TypeError(f"register({name!r}): expected a function fn(server, job, cands, "
                            f"free), not {type(fn).__name__}")
        if name in POLICIES:
            raise ValueError(f"allocation policy {name!r} is registered twice")
        POLICIES[name] = fn
        if labels:
            LABELLED.add(name)
        return fn
    return deco


def get(name):
    if name not in POLICIES:
        close = difflib.get_close_matches(name, list(POLICIES), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"jobs.policies: unknown policy {name!r}{hint}; known: "
                          f"{', '.join(sorted(POLICIES))}")
    return POLICIES[name]


# ------------------------------------------------------------------ patterns

def _tree_parent(i, p, mirrored):
    x = p - 1 - i if mirrored else i
    if x == 0:
        return None
    px = (x - 1) // 2
    return p - 1 - px if mirrored else px


def pattern_edges(pattern, k):
    """(edges the score sums, directed rank pairs whose traffic shares links) of a pattern
    on k ranks."""
    if k < 2:
        return [], []
    if pattern == "ring":
        edges = [(i, (i + 1) % k) for i in range(k)]
        return edges, edges                  # a ring all-reduce sends one way round
    if pattern == "clique":
        edges = [(i, j) for i in range(k) for j in range(i + 1, k)]
        return edges, edges + [(j, i) for i, j in edges]
    if pattern == "tree":                    # the two trees of a double binary tree
        edges = sorted({tuple(sorted((i, par))) for m in (False, True) for i in range(k)
                        for par in [_tree_parent(i, k, m)] if par is not None})
        return edges, edges + [(j, i) for i, j in edges]
    raise ConfigError(f"pattern {pattern!r}: expected ring, clique or tree")


def orders(nodes, pattern):
    k = len(nodes)
    if k <= 2 or pattern == "clique":
        return [tuple(nodes)]
    if pattern == "ring":
        first, rest = nodes[0], nodes[1:]
        return [(first,) + perm for perm in itertools.permutations(rest)
                if perm[0] < perm[-1]]
    return list(itertools.permutations(nodes))


MAX_CANDIDATES = 2_000_000


class Candidates:
    """Every placement of `pattern` on k of the server's NPUs, with its score and predicted
    bandwidth (see the module docstring)."""

    def __init__(self, server, k, pattern):
        n = server.size
        if not 1 <= k <= n:
            raise ConfigError(f"a job of {k} NPUs on a server of {n}")
        per_set = len(orders(tuple(range(k)), pattern))
        total = math.comb(n, k) * per_set
        if total > MAX_CANDIDATES:
            raise ConfigError(f"{total:,} placements of a {pattern} of {k} NPUs on {n:,} NPUs; "
                              f"at most {MAX_CANDIDATES:,} are enumerated (jobs.max_npus, "
                              f"or a job file's npus, sets the job's size)")
        self.k, self.pattern = k, pattern
        # a set's orders are orders() of its positions applied to it: orders() compares
        # nodes only by position (a ring's perm[0] < perm[-1]), and a set is in ascending order
        sets = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), k)),
                           np.int64, count=math.comb(n, k) * k).reshape(-1, k)
        ranks = np.array(orders(tuple(range(k)), pattern), np.int64).reshape(per_set, k)
        self.nodes = sets[:, ranks].reshape(-1, k)
        # consecutive placements on one node set share its id (orders of a set are adjacent)
        self.set_id = np.repeat(np.arange(len(sets), dtype=np.int64), per_set)
        rows = self.nodes
        edges, flows = pattern_edges(pattern, k)
        # (every pair's route bandwidth at once where there are fewer pairs than lookups)
        bw = server.route_gbps.dense() if n * n <= len(rows) * len(edges) else \
            server.route_gbps
        self.score = np.zeros(len(rows))
        for a, b in edges:
            self.score += bw[self.nodes[:, a], self.nodes[:, b]]
        self.predicted = _predicted(server, self.nodes, flows)
        # the direct links between NPUs (each pair once, i < j), as a sparse symmetric matrix
        keys = np.array([(server._pos.get(u, -1), server._pos.get(v, -1))
                         for u, v in server.link_gbps], np.int64).reshape(-1, 2)
        i, j = keys[:, 0], keys[:, 1]
        ok = (i >= 0) & (j >= 0) & (i < j)
        i, j = i[ok], j[ok]
        g = server.direct_gbps[i, j]
        self._nv = (i[g > 0], j[g > 0], g[g > 0])

    def __len__(self):
        return len(self.nodes)

    def feasible(self, free):
        """Which placements use free NPUs only."""
        return np.asarray(free, bool)[self.nodes].all(axis=1)

    def preserve(self, free):
        """NVLink bandwidth (GB/s) among the NPUs still free after each placement: what the
        free NPUs have among themselves, less what each placement takes (the links with an
        end in it and the other end free, those inside it once)."""
        free = np.asarray(free, bool)
        a, b, w = self._nv
        both = free[a] & free[b]
        n = len(free)
        touch = np.bincount(a[both], w[both], minlength=n) + \
            np.bincount(b[both], w[both], minlength=n)         # per free NPU: its free links
        out = np.full(len(self.nodes), w[both].sum())
        x = self.nodes
        out -= np.where(free[x], touch[x], 0.0).sum(axis=1)
        if len(a):
            key = a[both] * n + b[both]
            order = np.argsort(key)
            key, g = key[order], w[both][order]
            for p, q in itertools.combinations(range(self.k), 2):
                lo, hi = np.minimum(x[:, p], x[:, q]), np.maximum(x[:, p], x[:, q])
                k = lo * n + hi
                at = np.minimum(np.searchsorted(key, k), max(key.size - 1, 0))
                inside = (key.size > 0) & (key[at] == k) if key.size else np.zeros(k.size, bool)
                out += np.where(inside, g[at] if key.size else 0.0, 0.0)
        return out


def _predicted(server, nodes, flows, budget=20_000_000, pairs_at_once=1 << 16):
    """Per placement: the least bandwidth an edge of the pattern gets (see the module
    docstring), vectorised over placements in chunks. The routes' links are looked up once
    for every NPU pair where there are at most `pairs_at_once` pairs, else for the pairs
    each chunk joins (pysim.routing.paths), so memory stays bounded whatever the number of
    placements and NPUs."""
    if not flows:
        return np.full(len(nodes), math.inf)
    n = server.size
    fa = np.array([a for a, _ in flows])
    fb = np.array([b for _, b in flows])
    link, bw = server.link_ids()
    bw = np.r_[bw, math.inf]                                  # index -1: padding

    def route_links(pairs):
        """(pairs, L) links of the routes of NPU pairs a * n + b, -1 after the last."""
        ch = server.paths(pairs // n, pairs % n)
        if ch.shape[1] == 0:
            ch = np.full((pairs.size, 1), -1, np.int64)
        return np.where(ch >= 0, link[np.maximum(ch, 0)], -1)

    table = route_links(np.arange(n * n)) if n * n <= pairs_at_once else None
    out = np.empty(len(nodes))
    outer = max(1, pairs_at_once // len(flows))
    for lo in range(0, len(nodes), outer):
        part = nodes[lo:lo + outer]
        keys = part[:, fa] * n + part[:, fb]
        if table is None:
            keys, inv = np.unique(keys, return_inverse=True)
            links, keys = route_links(keys), inv.reshape(len(part), len(flows))
        else:
            links = table
        M = len(flows) * links.shape[1]
        step = max(1, budget // (8 * M))
        col = np.arange(M)
        for s in range(0, len(part), step):
            x = np.sort(links[keys[s:s + step]].reshape(-1, M), axis=1)          # (c, F*L)
            # each link's count among the edges' routes: the length of its run in the
            # sorted row, taken at the run's last entry (the least share over a row does
            # not depend on its order)
            end = np.ones(x.shape, bool)
            end[:, :-1] = x[:, 1:] != x[:, :-1]
            start = np.ones(x.shape, bool)
            start[:, 1:] = end[:, :-1]
            first = np.maximum.accumulate(np.where(start, col, 0), axis=1)
            share = np.where(end & (x >= 0), bw[x] / (col - first + 1), math.inf)
            out[lo + s:lo + s + len(x)] = share.min(axis=1)
    return out


def _best(keys, among):
    """First index maximising the keys lexicographically (keys: arrays, most important
    first) over the True entries of `among`."""
    idx = np.flatnonzero(among)
    if idx.size == 0:
        return None
    for key in keys:
        v = key[idx]
        idx = idx[v >= v.max() - 1e-9]
    return int(idx[0])


@register("baseline")
def baseline(server, job, cands, free):
    ok = cands.feasible(free)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return None
    first_set = cands.set_id[idx[0]]              # the lowest-numbered free NPUs
    return _best([cands.score], ok & (cands.set_id == first_set))


@register("topo_aware")
def topo_aware(server, job, cands, free):
    ok = cands.feasible(free)
    root = np.asarray(server.root)
    r = root[cands.nodes]
    inside = (r == r[:, :1]).all(axis=1) if cands.k else ok
    idx = np.flatnonzero(ok & inside)
    if idx.size:
        return int(idx[0])
    return baseline(server, job, cands, free)


@register("greedy")
def greedy(server, job, cands, free):
    return _best([cands.score], cands.feasible(free))


@register("preserve", labels=True)
def preserve(server, job, cands, free):
    ok = cands.feasible(free)
    if job.sensitive and cands.k > 1:
        return _best([cands.predicted, cands.score], ok)
    return _best([cands.preserve(free), cands.score], ok)


# The configuration keys this module reads (pysim.schema).
declare(
    Key("jobs", "policies", "strs", ["baseline", "topo_aware", "greedy", "preserve"], "-",
        "Allocation policies the stream runs under (registered in pysim.jobs.policies).",
        (lambda xs: len(xs) > 0 and len(set(xs)) == len(xs),
         "a non-empty list of policy names, each once")),
)
