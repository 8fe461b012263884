"""Closed forms for the configured pipeline (used for reference lines and summaries).

Zero-load latency of one packet of L flits, created at a NIC with nothing else in the network,
from creation to the ejection of its tail:

    T0 = I + W_nic + (H + 1) * (routing + vc_alloc + sw_alloc + st) + sum(W_link) + W_nic
         + max(L - 1, ceil((L - 1) / r) - K * (routing + vc_alloc))

with I the NIC's injection delay (network.injection_delay: a flit chosen at cycle t enters the
NIC-router channel at t + I), H router-to-router hops (H + 1 routers) and W_nic the NIC-router
channel latency. The
last term is the tail's distance behind the head: r (flits/cycle) is the rate of the slowest
channel on the path, which spaces the flits ceil(i / r) cycles behind the head, and K is the
number of routers after the last channel of that rate; at each of them the head spends
routing + vc_alloc cycles that body flits skip, so the tail catches up, but never closer than
one flit per cycle. Exact when the path's channels are either one flit per cycle or share one
slower rate (tests/test_zero_load.py checks it for every pair).
"""
from __future__ import annotations

import numpy as np

from pysim.engine import CH_INJECT, CH_NET, core


def path_arrays(network, src, dst):
    """Walk the routing table for pairs (src[i], dst[i]) of node ids (compiled; pairs grouped
    by destination share the walk of their common tails, so give them in that order).

    Returns hops, the sum of link latencies, the slowest rate on the path including the NIC
    channels as (num, den), and the number of routers after the last channel of that rate."""
    arr = network.arrays
    src = np.ascontiguousarray(src, np.int64).reshape(-1)
    dst = np.ascontiguousarray(dst, np.int64).reshape(-1)
    hops, lat, worst, after = core.path_walk(
        arr.routes(), int(arr["n_nodes"]),
        network.ch_dst, network.ch_lat, network.ch_num, network.ch_den, network.inj_ch,
        network.ej_ch, src, dst)
    return hops, lat, network.ch_num[worst], network.ch_den[worst], after


def zero_load_latency(network, cfg, src, dst, length, paths=None):
    """T0 (cycles) per pair, vectorised; see the module docstring. `paths`: path_arrays of
    the pairs, if already walked."""
    net = cfg.network
    hops, lat, num, den, after = path_arrays(network, src, dst) if paths is None else paths
    per_router = net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay + net.st_delay
    w_nic = network.ch_lat[network.inj_ch[np.asarray(src)]] + \
        network.ch_lat[network.ej_ch[np.asarray(dst)]]
    body = np.asarray(length, np.int64) - 1
    spaced = -((-body * den) // num)                                  # ceil(body / r)
    tail = np.maximum(body, spaced - after * (net.routing_delay + net.vc_alloc_delay))
    return net.injection_delay + w_nic + (hops + 1) * per_router + lat + tail


# Averages over every ordered pair of endpoints (the zero-load latency of a uniform pattern in
# a run's report, the hops of `pysim topo`): every pair is walked up to this many pairs (about
# 10 s at a load of 1); beyond, closed forms where the routes have them, else the routes from
# a sample of sources to every destination, said so.
PAIRS_EXACT = 1 << 24
SAMPLE_SOURCES = 256


def dor_hops(topo, routing):
    """(diameter, sum of hops over ordered pairs) of dimension order where every node is an
    endpoint, or None: a route's hops are the sum over dimensions of the distance travelled
    in each (|a - b|; where the routes use the wrap-around links, the shorter way round, or
    (b - a) mod k one way round), so the sum over all pairs is, per dimension, the sum over
    coordinate pairs times (n / k)^2."""
    if topo.coords is None or routing.name not in ("dor", "dor_dateline") or \
            len(topo.endpoints()) != topo.n_nodes:
        return None
    n = topo.n_nodes
    diameter, total = 0, 0
    for k, w in zip(topo.dims, topo.wrap):
        k = int(k)
        # sums over the k^2 ordered coordinate pairs: k distances 0..k-1 each (one way
        # round); k floor(k^2 / 4) (the shorter way round); 2 (k - d) pairs at each distance d
        # (no wrap): (k - 1) k (k + 1) / 3
        if w and routing.name == "dor_dateline":
            far, pair_sum = (k // 2, k * (k * k // 4)) if topo.bidirectional else \
                (k - 1, k * k * (k - 1) // 2)
        else:
            far, pair_sum = k - 1, (k - 1) * k * (k + 1) // 3
        diameter += far
        total += pair_sum * (n // k) ** 2
    return diameter, total


def tree_hops(topo, routing):
    """(diameter, sum of hops over ordered pairs of endpoints) of a tree's only paths, or None
    where the routes are not a tree's: a link carries the routes between the E - s endpoints
    on one side and the s on the other, both ways (2 s (E - s) hops in all), and the longest
    route joins the two deepest endpoints below some node."""
    if routing.name != "table" or routing.rule is None:
        return None
    n = topo.n_nodes
    src = np.asarray(topo.ch_src, np.int64)
    dst = np.asarray(topo.ch_dst, np.int64)
    key = np.unique(src * n + dst)
    a, b = key // n, key % n
    ptr = np.searchsorted(a, np.arange(n + 1))
    parent = np.full(n, -1, np.int64)
    depth = np.full(n, -1, np.int64)
    depth[0] = 0
    order, frontier = [np.array([0], np.int64)], np.array([0], np.int64)
    while frontier.size:
        lo, hi = ptr[frontier], ptr[frontier + 1]
        cnt = hi - lo
        idx = np.repeat(hi - np.cumsum(cnt), cnt) + np.arange(int(cnt.sum()))
        to, frm = b[idx], np.repeat(frontier, cnt)
        new = depth[to] < 0
        to, frm = to[new], frm[new]
        depth[to] = depth[frm] + 1
        parent[to] = frm
        frontier = to
        order.append(to)
    end = np.array([k != "switch" for k in topo.node_kinds])
    E = int(end.sum())
    below = end.astype(np.int64)                       # endpoints in each subtree
    deep = np.where(end, 0, -1 << 40).astype(np.int64)  # the deepest endpoint below, in hops
    best = 0
    for level in reversed(order[1:]):                  # children before their parents
        if level.size == 0:
            continue
        p = parent[level]
        np.add.at(below, p, below[level])
        down = deep[level] + 1
        # the longest route through p: its two deepest children (or p itself if an endpoint)
        o = np.lexsort((-down, p))
        ps, ds = p[o], down[o]
        first = np.flatnonzero(np.r_[True, ps[1:] != ps[:-1]])
        top1 = ds[first]
        top2 = np.where(end[ps[first]], 0, -1 << 40)
        nxt = first + 1
        ok = nxt < ps.size
        ok[ok] = ps[nxt[ok]] == ps[first[ok]]
        top2[ok] = np.maximum(top2[ok], ds[nxt[ok]])
        if first.size:
            best = max(best, int((top1 + top2).max()))
        np.maximum.at(deep, p, down)
    s = below[np.flatnonzero(parent >= 0)]
    return best, int((2 * s * (E - s)).sum())



def _uniform_pairs(eps, pattern, chunk, src=None):
    """Yield (src nodes, dst nodes, weights) for the uniform / hotspot pattern, a few
    destinations at a time, each with all its sources (memory stays O(chunk * n), and
    path_arrays walks each destination's routing tree once). `src` (endpoint indices): only
    the pairs from these sources, weighted as in the full pattern."""
    n = eps.size
    srcs = np.arange(n) if src is None else np.asarray(src)
    hot_w = np.zeros(n)
    if pattern.hot:                      # a node listed twice is drawn twice as often
        np.add.at(hot_w, np.asarray(pattern.hot), 1.0 / len(pattern.hot))
    base = 1.0 / (n * n) if pattern.include_self else 1.0 / (n * (n - 1))
    for lo in range(0, n, chunk):
        d, s = np.meshgrid(np.arange(lo, min(n, lo + chunk)), srcs, indexing="ij")
        s, d = s.ravel(), d.ravel()
        w = np.full(s.size, base)
        if not pattern.include_self:
            w[s == d] = 0.0
        if pattern.hot:
            w = (1 - pattern.hot_frac) * w + pattern.hot_frac * hot_w[d] / n
        yield eps[s], eps[d], w


def _pairs(network, pattern, src=None):
    eps = np.asarray(network.topo.endpoints())
    if pattern.mode == "perm":
        yield eps, eps[np.asarray(pattern.perm)], np.full(eps.size, 1.0 / eps.size)
    else:
        rows = eps.size if src is None else len(src)
        yield from _uniform_pairs(eps, pattern, max(1, 65536 // max(rows, 1)), src)


def _walk_mean(network, cfg, pattern, sizes, probs, src=None):
    """(sum of weight * T0 over the pairs walked, mixed over packet sizes; sum of weights)."""
    total = weight = 0.0
    for s, d, w in _pairs(network, pattern, src):
        weight += float(w.sum())
        paths = path_arrays(network, s, d)
        for size, p in zip(sizes, probs):
            t = zero_load_latency(network, cfg, s, d, np.full(s.size, size), paths)
            total += p * float((w * t).sum())    # not np.dot: keep BLAS threads idle
    return total, weight


def _tail_by_dst(network, eps, body, skip):
    """Per destination, the tail's distance behind the head (T0's last term) from every other
    endpoint when it is one from all of them, else None. It is when no channel before the
    ejection is slower than a flit per cycle, or than the ejection channel: the slowest is
    then the ejection channel, the last of equals, with no router after it (ceil(body /
    r_ej), at least body). It is also when every link has one rate r, no injection channel is
    slower: the slowest is the ejection channel where it is no faster than r, else the last
    link, with the destination's router after it (ceil(body / r) - skip, at least body;
    distinct endpoints are a hop apart at least). `skip`: routing + vc_alloc delays."""
    kind = network.ch_kind
    num, den = network.ch_num.astype(np.int64), network.ch_den.astype(np.int64)
    before = (kind == CH_NET) | (kind == CH_INJECT)
    ej = network.ej_ch[eps]
    e_num, e_den = num[ej], den[ej]
    spaced = np.maximum(body, -((-body * e_den) // e_num))
    b_num, b_den = num[before], den[before]
    if bool(np.all(b_num >= b_den)):
        return spaced
    k = int(np.argmin(b_num / b_den))
    if not bool(np.all(b_num[k] * b_den <= b_num * b_den[k])):   # not the slowest after all
        return None
    if bool(np.all(e_num * b_den[k] <= b_num[k] * e_den)):        # no ejection faster than it
        return spaced
    link = kind == CH_NET
    l_num, l_den = num[link], den[link]
    if l_num.size == 0 or not bool(np.all(l_num * l_den[0] == l_num[0] * l_den)) or \
            not bool(np.all(b_num * l_den[0] >= l_num[0] * b_den)):
        return None                          # links of several rates, or a slower injection
    r_num, r_den = int(l_num[0]), int(l_den[0])
    behind = np.maximum(body, -((-body * r_den) // r_num) - skip)
    return np.where(e_num * r_den <= r_num * e_den, spaced, behind)


def closed_hops(topo, routing):
    """(diameter, sum of router-to-router hops over ordered pairs of distinct endpoints) by
    closed form (dor_hops, tree_hops), or None where the routes have none."""
    return dor_hops(topo, routing) or tree_hops(topo, routing)


def _closed_mean(network, cfg, pattern, sizes, probs):
    """The uniform part of mean_zero_load without the pair walk, or None where the routes or
    the channels do not allow it. T0 splits into terms of the source (its NIC channel), of the
    destination (its NIC channel, the tail: _tail_by_dst) and of the path (hops and the sum
    of link latencies, which is the hops times the link latency where all links have one);
    summed over the n (n - 1) pairs of distinct endpoints, the source and destination terms
    count n - 1 times each, and the path terms are the closed form's sum of hops."""
    net = cfg.network
    eps = np.asarray(network.topo.endpoints(), np.int64)
    n = eps.size
    link_lat = np.unique(network.ch_lat[network.ch_kind == CH_NET])
    if link_lat.size > 1:
        return None
    closed = closed_hops(network.topo, network.routing)
    if closed is None:
        return None
    hop_sum = closed[1]
    per_router = net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay + net.st_delay
    nic = float(network.ch_lat[network.inj_ch[eps]].sum()) + \
        float(network.ch_lat[network.ej_ch[eps]].sum())
    path = float(hop_sum) * (per_router + (int(link_lat[0]) if link_lat.size else 0))
    total = 0.0
    for size, p in zip(sizes, probs):
        tail = _tail_by_dst(network, eps, np.full(n, int(size) - 1, np.int64),
                            net.routing_delay + net.vc_alloc_delay)
        if tail is None:
            return None
        summed = n * (n - 1) * (net.injection_delay + per_router) + (n - 1) * (
            nic + float(tail.sum())) + path
        count = n * (n - 1)
        if pattern.include_self:
            summed += float(zero_load_latency(network, cfg, eps, eps, np.full(n, size)).sum())
            count = n * n
        total += p * summed / count
    return total


def _hot_mean(network, cfg, pattern, sizes, probs):
    """The hotspot part of mean_zero_load: T0 averaged over every source to each hot
    destination (its n pairs walked), weighted as the pattern picks the destinations."""
    eps = np.asarray(network.topo.endpoints(), np.int64)
    n = eps.size
    hot, times = np.unique(np.asarray(pattern.hot, np.int64), return_counts=True)
    total = 0.0
    for h, k in zip(hot, times):
        for size, p in zip(sizes, probs):
            t = zero_load_latency(network, cfg, eps, np.full(n, eps[h]), np.full(n, size))
            total += p * float(t.sum()) / n * k / len(pattern.hot)
    return total


def mean_zero_load(network, cfg, pattern, sizes, cdf, exact_pairs=PAIRS_EXACT,
                   sample=None, seed=1):
    """Zero-load latency averaged over the pattern's pairs and the packet-size mix, and how it
    was found: 'every pair' (walked; a permutation's n pairs always are), 'closed form'
    (uniform traffic where _closed_mean applies, the hot destinations walked), or 'sampled'
    (the pairs from `sample` sources drawn at random, seeded, to every destination; by
    default SAMPLE_SOURCES, fewer past 16,384 endpoints to keep to 2^22 pairs, 16 at least)."""
    probs = np.diff(np.concatenate(([0.0], cdf)))
    n = len(network.topo.endpoints())
    if pattern.mode == "perm" or n * n <= exact_pairs:
        return _walk_mean(network, cfg, pattern, sizes, probs)[0], "every pair"
    uniform = _closed_mean(network, cfg, pattern, sizes, probs)
    if uniform is not None:
        hf = pattern.hot_frac if pattern.hot else 0.0
        hot = _hot_mean(network, cfg, pattern, sizes, probs) if hf else 0.0
        return (1 - hf) * uniform + hf * hot, "closed form"
    if sample is None:
        sample = min(SAMPLE_SOURCES, max(16, (1 << 22) // n))
    src = np.sort(np.random.default_rng(seed).choice(n, size=min(sample, n), replace=False))
    total, weight = _walk_mean(network, cfg, pattern, sizes, probs, src)
    return total / weight, (f"sampled: {src.size} sources drawn at random (seed {seed}) to "
                            f"every endpoint")


def mean_hops(network, pattern):
    """Average router-to-router hops under the pattern (unweighted by packet size)."""
    total = 0.0
    for src, dst, w in _pairs(network, pattern):
        total += float((w * path_arrays(network, src, dst)[0]).sum())
    return total
