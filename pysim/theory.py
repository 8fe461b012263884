"""Closed forms for the configured pipeline (used for reference lines and summaries).

Zero-load latency of one packet of L flits, created at a NIC with nothing else in the network,
from creation to the ejection of its tail:

    T0 = W_nic + (H + 1) * (routing + vc_alloc + sw_alloc + st) + sum(W_link) + W_nic
         + max(L - 1, ceil((L - 1) / r) - K * (routing + vc_alloc))

with H router-to-router hops (H + 1 routers) and W_nic the NIC-router channel latency. The
last term is the tail's distance behind the head: r (flits/cycle) is the rate of the slowest
channel on the path, which spaces the flits ceil(i / r) cycles behind the head, and K is the
number of routers after the last channel of that rate; at each of them the head spends
routing + vc_alloc cycles that body flits skip, so the tail catches up, but never closer than
one flit per cycle. Exact when the path's channels are either one flit per cycle or share one
slower rate (tests/test_zero_load.py checks it for every pair).
"""
from __future__ import annotations

import numpy as np


def path_arrays(network, src, dst):
    """Vectorised walk of the routing table for pairs (src[i], dst[i]) of node ids.

    Returns hops, the sum of link latencies, the slowest rate on the path including the NIC
    channels as (num, den), and the number of routers after the last channel of that rate."""
    arr = network.arrays
    rt = arr["rt"].reshape(arr["n_nodes"], arr["n_nodes"])
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    num, den = network.ch_num, network.ch_den
    cur = src.copy()
    hops = np.zeros(src.size, np.int64)
    lat = np.zeros(src.size, np.int64)
    worst = network.inj_ch[src].astype(np.int64)
    worst_at = np.zeros(src.size, np.int64)       # index of the router the channel enters

    def not_faster(a, b):   # channel a at most as fast as channel b (cross-multiplied)
        return num[a] * den[b] <= num[b] * den[a]

    active = cur != dst
    for _ in range(arr["n_nodes"] + 1):
        if not active.any():
            break
        idx = np.flatnonzero(active)
        c = rt[cur[idx], dst[idx]].astype(np.int64)
        hops[idx] += 1
        lat[idx] += network.ch_lat[c]
        take = not_faster(c, worst[idx])
        worst[idx] = np.where(take, c, worst[idx])
        worst_at[idx] = np.where(take, hops[idx], worst_at[idx])
        cur[idx] = network.ch_dst[c]
        active = cur != dst
    ej = network.ej_ch[dst].astype(np.int64)
    take = not_faster(ej, worst)
    worst = np.where(take, ej, worst)
    after = np.where(take, 0, hops + 1 - worst_at)
    return hops, lat, num[worst], den[worst], after


def zero_load_latency(network, cfg, src, dst, length):
    """T0 (cycles) per pair, vectorised; see the module docstring."""
    net = cfg.network
    hops, lat, num, den, after = path_arrays(network, src, dst)
    per_router = net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay + net.st_delay
    w_nic = network.ch_lat[network.inj_ch[np.asarray(src)]] + \
        network.ch_lat[network.ej_ch[np.asarray(dst)]]
    body = np.asarray(length, np.int64) - 1
    spaced = -((-body * den) // num)                                  # ceil(body / r)
    tail = np.maximum(body, spaced - after * (net.routing_delay + net.vc_alloc_delay))
    return w_nic + (hops + 1) * per_router + lat + tail


def _uniform_pairs(eps, pattern, chunk):
    """Yield (src nodes, dst nodes, weights) for the uniform / hotspot pattern, a few source
    rows at a time (memory stays O(chunk * n))."""
    n = eps.size
    hot_w = np.zeros(n)
    if pattern.hot:
        hot_w[pattern.hot] = 1.0 / len(pattern.hot)
    base = 1.0 / (n * n) if pattern.include_self else 1.0 / (n * (n - 1))
    for lo in range(0, n, chunk):
        s, d = np.meshgrid(np.arange(lo, min(n, lo + chunk)), np.arange(n), indexing="ij")
        s, d = s.ravel(), d.ravel()
        w = np.full(s.size, base)
        if not pattern.include_self:
            w[s == d] = 0.0
        if pattern.hot:
            w = (1 - pattern.hot_frac) * w + pattern.hot_frac * hot_w[d] / n
        yield eps[s], eps[d], w


def _pairs(network, pattern):
    eps = np.asarray(network.topo.endpoints())
    if pattern.mode == "perm":
        yield eps, eps[np.asarray(pattern.perm)], np.full(eps.size, 1.0 / eps.size)
    else:
        yield from _uniform_pairs(eps, pattern, max(1, 65536 // max(eps.size, 1)))


def mean_zero_load(network, cfg, pattern, sizes, cdf):
    """Zero-load latency averaged over the pattern's pairs and the packet-size mix."""
    probs = np.diff(np.concatenate(([0.0], cdf)))
    total = 0.0
    for src, dst, w in _pairs(network, pattern):
        for size, p in zip(sizes, probs):
            t = zero_load_latency(network, cfg, src, dst, np.full(src.size, size))
            total += p * float((w * t).sum())    # not np.dot: keep BLAS threads idle
    return total


def mean_hops(network, pattern):
    """Average router-to-router hops under the pattern (unweighted by packet size)."""
    total = 0.0
    for src, dst, w in _pairs(network, pattern):
        total += float((w * path_arrays(network, src, dst)[0]).sum())
    return total
