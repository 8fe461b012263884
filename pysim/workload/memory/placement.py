"""Where an NPU's offloaded bytes go: its nearest memory nodes in proportion to the bandwidth
towards them (MC-DLA's page placement), or its nearest host."""
from __future__ import annotations

import math
from dataclasses import dataclass

from pysim.errors import ConfigError
from pysim.network import nic_bandwidths
from pysim.workload.graph import compute_params, memory_params


@dataclass
class Placement:
    """Where one NPU's offloaded bytes go: targets (node names) with the fraction of every
    stash each takes, and the bandwidth (bytes/cycle) and latency (cycles) to them."""
    npu: str
    targets: list                    # [(node name, fraction)]
    out_bpc: float
    in_bpc: float
    latency: int
    kind: str                        # 'mem' or 'host'
    routes: list = None              # per target: (node index, [(a, b) node pairs of the
                                     # path to it], its store's bytes/cycle out, in)


def _widest_nearest(topo, src, kinds):
    """Nodes of `kinds` at the fewest hops from src, each with the widest bottleneck
    bandwidth (bytes/cycle, parallel channels summed) and the smallest latency over those
    shortest paths; hops through nodes of any kind."""
    pair_bw, pair_lat = {}, {}
    adj = {}
    for c in range(topo.n_channels):
        a, b = topo.ch_src[c], topo.ch_dst[c]
        pair_bw[(a, b)] = pair_bw.get((a, b), 0.0) + topo.ch_bytes_per_cycle[c]
        pair_lat[(a, b)] = topo.ch_latency_cycles[c]
        adj.setdefault(a, set()).add(b)
    dist = {src: 0}
    bw = {src: math.inf}
    lat = {src: 0}
    par = {}
    frontier = [src]
    found = []
    while frontier and not found:
        nxt = {}
        for u in frontier:
            for v in sorted(adj.get(u, ())):
                if v in dist and dist[v] <= dist[u]:
                    continue
                w = min(bw[u], pair_bw[(u, v)])
                if v not in nxt or w > nxt[v][0]:
                    nxt[v] = (w, lat[u] + pair_lat[(u, v)], u)
        for v, (w, lt, u) in nxt.items():
            dist[v] = dist[frontier[0]] + 1
            bw[v], lat[v], par[v] = w, lt, u
        found = [v for v in sorted(nxt) if topo.node_kinds[v] in kinds]
        # a path continues through switches and NPUs, not through the kind looked for
        frontier = [v for v in sorted(nxt) if topo.node_kinds[v] not in kinds]

    def path(v):
        out = []
        while v != src:
            out.append((par[v], v))
            v = par[v]
        return out[::-1]
    return [(v, bw[v], lat[v], path(v)) for v in found]


def pair_bandwidths(topo):
    """{(a, b): bytes/cycle} of every directed node pair joined by channels (parallel
    channels summed)."""
    out = {}
    for c in range(topo.n_channels):
        key = (topo.ch_src[c], topo.ch_dst[c])
        out[key] = out.get(key, 0.0) + topo.ch_bytes_per_cycle[c]
    return out


def placement(topo, cfg, npu, target=None) -> Placement:
    """Where npu's offloaded stashes go (workload.memory.target): 'mem' -- its nearest
    memory nodes, each a share of every stash in proportion to the bandwidth towards it
    (MC-DLA's bandwidth-aware page placement); 'host' -- its nearest host's DRAM (the
    widest if several are as near); 'auto' -- mem if the system has memory nodes, else
    host. A system with none reachable is a ConfigError."""
    target = target or cfg.workload.memory.target
    kinds = set(topo.node_kinds)
    if target == "auto":
        target = "mem" if "mem" in kinds else "host"
    i = topo.node_names.index(npu)
    near = _widest_nearest(topo, i, (target,))
    if not near:
        what = "memory node" if target == "mem" else "host"
        raise ConfigError(f"workload.memory.policy = {cfg.workload.memory.policy!r}: no remote "
                          f"memory reachable from {npu} (no {what} in {topo.name}; "
                          f"workload.memory.target = {cfg.workload.memory.target!r})")
    if target == "host":
        near = [max(near, key=lambda x: (x[1], -x[0]))]
    inj, ej = nic_bandwidths(topo, cfg)
    mem = memory_params(topo, cfg)
    roof = compute_params(topo, cfg)
    out, routes = [], []
    for v, w, lt, pairs in near:
        store = mem[v][0] if target == "mem" else roof[v][1]
        acc_lat = mem[v][1] if target == "mem" else 0
        out.append((v, min(w, store, ej[v]), min(w, store, inj[v]), lt + acc_lat))
        routes.append((v, pairs, min(store, ej[v]), min(store, inj[v])))
    total = sum(o[1] for o in out)
    targets = [(topo.node_names[v], wo / total) for v, wo, _, _ in out]
    return Placement(npu, targets, min(inj[i], total), min(ej[i], sum(o[2] for o in out)),
                     max(o[3] for o in out), target, routes)


def shared(topo, placements):
    """The placements with each NPU's bandwidth to its targets as its fair share when every
    NPU of `placements` moves bytes at once: a link on the paths of k of them, or a memory
    node's or host's memory that k of them use, gives each 1/k of its bandwidth (two GPUs
    behind one PCIe switch each get half its uplink). A planning policy then plans with
    what a transfer gets while its neighbours swap too, as a profiled rate would be."""
    users_out, users_in, users_node = {}, {}, {}
    for p in placements.values():
        if p is None or not p.routes:
            continue
        for v, pairs, _, _ in p.routes:
            users_node[v] = users_node.get(v, 0) + 1
            for a, b in pairs:
                users_out[(a, b)] = users_out.get((a, b), 0) + 1
                users_in[(b, a)] = users_in.get((b, a), 0) + 1
    pbw = pair_bandwidths(topo) if users_node else {}    # (none needed: no NPU offloads)
    out = {}
    for npu, p in placements.items():
        if p is None or not p.routes:
            out[npu] = p
            continue
        o = i = 0.0
        for v, pairs, store_out, store_in in p.routes:
            k = users_node[v]
            o += min([store_out / k] + [pbw[ab] / users_out[ab] for ab in pairs])
            i += min([store_in / k] + [pbw[(b, a)] / users_in[(b, a)] for a, b in pairs])
        out[npu] = Placement(p.npu, p.targets, min(p.out_bpc, o), min(p.in_bpc, i),
                             p.latency, p.kind, p.routes)
    return out


def split(nbytes, targets):
    """Bytes per target in proportion to their fractions (whole bytes; the remainder to the
    largest share)."""
    parts = [int(nbytes * f) for _, f in targets]
    k = max(range(len(targets)), key=lambda j: targets[j][1])
    parts[k] += nbytes - sum(parts)
    return parts


