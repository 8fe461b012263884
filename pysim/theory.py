"""Closed forms for the configured pipeline (used for reference lines and summaries).

Zero-load latency of one packet of L flits, created at a NIC with nothing else in the network,
from creation to the ejection of its tail:

    T0 = W_nic + (H + 1) * (routing + vc_alloc + sw_alloc + st) + sum(W_link) + W_nic
         + serialisation

with H router-to-router hops (H + 1 routers), W_nic the NIC-router channel latency and
serialisation = ceil((L - 1) / r) on the slowest channel of the path (r flits/cycle, from the
exact integer credits: ceil((L - 1) * den / num)). The serialisation term is exact when the
path's channels slower than one flit per cycle all have the same rate.
"""
from __future__ import annotations

import numpy as np


def path_arrays(network, src, dst):
    """Vectorised walk of the routing table for pairs (src[i], dst[i]) of node ids:
    (hops, sum of link latencies, slowest rate as (num, den) of the path incl. NIC channels)."""
    arr = network.arrays
    rt = arr["rt"].reshape(arr["n_nodes"], arr["n_nodes"])
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    cur = src.copy()
    hops = np.zeros(src.size, np.int64)
    lat = np.zeros(src.size, np.int64)
    inj = network.inj_ch[src]
    ej = network.ej_ch[dst]
    # slowest rate: compare num/den as cross products, track the argmin channel
    worst = inj.astype(np.int64)
    def slower(a, b):   # channel a slower than channel b?
        return network.ch_num[a] * network.ch_den[b] < network.ch_num[b] * network.ch_den[a]
    worst = np.where(slower(ej, worst), ej, worst)
    active = cur != dst
    for _ in range(arr["n_nodes"] + 1):
        if not active.any():
            break
        c = rt[cur[active], dst[active]].astype(np.int64)
        idx = np.flatnonzero(active)
        hops[idx] += 1
        lat[idx] += network.ch_lat[c]
        worst[idx] = np.where(slower(c, worst[idx]), c, worst[idx])
        cur[idx] = network.ch_dst[c]
        active = cur != dst
    return hops, lat, network.ch_num[worst], network.ch_den[worst]


def zero_load_latency(network, cfg, src, dst, length):
    """T0 (cycles) per pair, vectorised; see the module docstring."""
    net = cfg.network
    hops, lat, num, den = path_arrays(network, src, dst)
    per_router = net.routing_delay + net.vc_alloc_delay + net.sw_alloc_delay + net.st_delay
    w_nic = network.ch_lat[network.inj_ch[np.asarray(src)]] + \
        network.ch_lat[network.ej_ch[np.asarray(dst)]]
    ser = -((-(np.asarray(length, np.int64) - 1) * den) // num)    # ceil
    return w_nic + (hops + 1) * per_router + lat + ser


def mean_zero_load(network, cfg, pattern, sizes, cdf):
    """Zero-load latency averaged over the pattern's pairs and the packet-size mix."""
    eps = np.asarray(network.topo.endpoints())
    n = eps.size
    probs = np.diff(np.concatenate(([0.0], cdf)))
    if pattern.mode == "perm":
        pairs_s, pairs_d, w = eps, eps[np.asarray(pattern.perm)], np.full(n, 1.0 / n)
    else:
        s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        s, d = s.ravel(), d.ravel()
        w = np.full(s.size, 1.0)
        if not pattern.include_self:
            w[s == d] = 0.0
        w /= w.sum()
        if pattern.hot:
            hot_w = np.zeros(n)
            hot_w[pattern.hot] = 1.0 / len(pattern.hot)
            w = (1 - pattern.hot_frac) * w + pattern.hot_frac * hot_w[d] / n
        pairs_s, pairs_d = eps[s], eps[d]
    total = 0.0
    for size, p in zip(sizes, probs):
        t = zero_load_latency(network, cfg, pairs_s, pairs_d, np.full(pairs_s.size, size))
        total += p * float(np.dot(w, t))
    return total


def mean_hops(network, pattern):
    """Average router-to-router hops under the pattern (unweighted by packet size)."""
    eps = np.asarray(network.topo.endpoints())
    n = eps.size
    if pattern.mode == "perm":
        h, *_ = path_arrays(network, eps, eps[np.asarray(pattern.perm)])
        return float(h.mean())
    s, d = np.meshgrid(eps, eps, indexing="ij")
    h, *_ = path_arrays(network, s.ravel(), d.ravel())
    h = h.reshape(n, n).astype(float)
    if not pattern.include_self:
        return float(h.sum() / (n * (n - 1)))
    return float(h.mean())
