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

from pysim.engine import core


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
    return net.injection_delay + w_nic + (hops + 1) * per_router + lat + tail


def _uniform_pairs(eps, pattern, chunk):
    """Yield (src nodes, dst nodes, weights) for the uniform / hotspot pattern, a few
    destinations at a time, each with all its sources (memory stays O(chunk * n), and
    path_arrays walks each destination's routing tree once)."""
    n = eps.size
    hot_w = np.zeros(n)
    if pattern.hot:
        hot_w[pattern.hot] = 1.0 / len(pattern.hot)
    base = 1.0 / (n * n) if pattern.include_self else 1.0 / (n * (n - 1))
    for lo in range(0, n, chunk):
        d, s = np.meshgrid(np.arange(lo, min(n, lo + chunk)), np.arange(n), indexing="ij")
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
