"""Shared multi-accelerator servers: the system a job stream runs on, with what allocation
policies need to know of it.

A server is any configuration with two or more NPUs. `load_server` takes a preset name (the
MAPA systems below), a shipped system's name or a TOML file, and returns a `Server`: the
resolved config, the compiled routes, and per pair of NPUs the bandwidth of the route between
them (its narrowest link, parallel links added), the bandwidth of their direct link if they
have one (an NVLink), and per NPU its root complex (the host socket its PCIe path reaches
first).

A stream runs at the flow level unless `network.model` is set (in the file or as an
override): it needs one simulation per shape and per group of jobs running together, a few
hundred for a thousand jobs, and a training iteration that takes 0.02-0.2 s there takes 5-60 s
at the flit level, which steps every cycle a gradient all-reduce has flits in flight (the two
agree within about 1% on these jobs; docs/jobs.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from pysim._io import as_path
from pysim.config import Config, load
from pysim.errors import ConfigError
from pysim import systems
from pysim.network import compile_network
from pysim.routing import paths
from pysim.schema import readers, short, unread
from pysim.workload.base import check_model_reads

_HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (shipped file, overrides): the systems of MAPA (Ranganath et al., SC 2021), as
# shipped (their GPUs, and GPUs that do not forward each other's traffic).
PRESETS = {
    "dgx1-v100": ("dgx1-v100", {}),
    "dgx1-p100": ("dgx1-p100", {}),
    "summit-node": ("summit-node", {}),
    "gpu16-torus4x4": ("gpu16-torus4x4", {}),
    "gpu16-cubemesh": ("gpu16-cubemesh", {}),
}
ALIASES = {"dgx-v": "dgx1-v100", "dgx-p": "dgx1-p100", "summit": "summit-node",
           "torus-2d": "gpu16-torus4x4", "cubemesh-16": "gpu16-cubemesh"}


def resolve(name):
    """(path of the config, overrides it needs) for a preset, a shipped system or a file."""
    name = as_path(name, "load_server(name) (a server preset, a shipped system or a file)")
    key = ALIASES.get(name, name)
    if key in PRESETS:
        stem, over = PRESETS[key]
        return os.path.join(systems.directory(), stem + ".toml"), dict(over)
    if os.path.exists(name):
        return name, {}
    shipped = os.path.join(systems.directory(), name if name.endswith(".toml") else name + ".toml")
    if os.sep not in name and os.path.exists(shipped):
        return shipped, {}
    raise ConfigError(f"server {name!r}: no such file, and not a server preset (presets: "
                      f"{', '.join(sorted(PRESETS))}; MAPA's names {', '.join(sorted(ALIASES))} "
                      f"also work)")


class PairGbps:
    """A number per ordered pair of a server's NPUs, [i, j] (indices into `npus`; scalars or
    arrays, broadcast), computed on demand from the routes of the pairs asked for: no table of
    every pair, whatever the server's size. `dense()` makes the n x n array (small servers)."""

    def __init__(self, fn, n):
        self._fn, self.n = fn, n

    def __getitem__(self, key):
        i, j = key
        a, b = np.broadcast_arrays(np.asarray(i, np.int64), np.asarray(j, np.int64))
        if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= self.n):
            raise IndexError(f"an NPU index out of range (the server has {self.n})")
        out = self._fn(a.reshape(-1), b.reshape(-1)).reshape(a.shape)
        return float(out) if out.ndim == 0 else out

    def dense(self):
        i, j = np.divmod(np.arange(self.n * self.n), self.n)
        return self[i, j].reshape(self.n, self.n)


@dataclass
class Server:
    """A server: its config, routes, and what the policies read of its NPU pairs."""
    name: str
    cfg: object                   # the resolved Config (jobs and workload keys included)
    topo: object                  # pysim.topology.Topology
    routing: object               # pysim.routing.Routing (by table or by rule)
    npus: list                    # node ids of the NPUs, in node order
    names: list                   # their names
    root: list                    # per NPU: index of its root complex (host socket)
    link_gbps: dict = field(default_factory=dict)   # (u, v) node pair -> GB/s, parallel summed
    _routes: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)      # shape key -> its network (built once)
    _links: tuple = None          # (keys u * n + v sorted, per key its channels' CSR, GB/s)

    def __post_init__(self):
        t = self.topo
        n = t.n_nodes
        src = np.asarray(t.ch_src, np.int64)
        dst = np.asarray(t.ch_dst, np.int64)
        key = src * n + dst
        order = np.lexsort((np.arange(key.size), key))     # channels by link, then id
        keys, first, count = np.unique(key[order], return_index=True, return_counts=True)
        gbps = np.add.reduceat(np.asarray(t.ch_bytes_per_cycle, float)[order], first) \
            * self.cfg.network.clock_ghz if keys.size else np.zeros(0)
        self._links = (keys, order, np.r_[first, key.size], gbps)
        self._npu = np.asarray(self.npus, np.int64)
        self._pos = {int(v): i for i, v in enumerate(self.npus)}
        self._ch_gbps = np.empty(key.size)
        self._ch_gbps[order] = np.repeat(gbps, count)       # per channel: its link's GB/s
        self.link_gbps = {(int(k // n), int(k % n)): float(g) for k, g in zip(keys, gbps)}
        self.route_gbps = PairGbps(self._route_gbps, len(self.npus))
        self.direct_gbps = PairGbps(self._direct_gbps, len(self.npus))

    @property
    def size(self):
        return len(self.npus)

    def link_ids(self):
        """(per channel the id of its link, the node pair it joins; per link its GB/s)."""
        keys, order, ptr, gbps = self._links
        link = np.empty(order.size, np.int64)
        link[order] = np.repeat(np.arange(keys.size), np.diff(ptr))
        return link, gbps

    def channels(self, u, v):
        """The channels from node u to node v, in id order."""
        keys, order, ptr, _ = self._links
        k = u * self.topo.n_nodes + v
        i = int(np.searchsorted(keys, k))
        if i == keys.size or keys[i] != k:
            return []
        return [int(c) for c in order[ptr[i]:ptr[i + 1]]]

    def paths(self, i, j):
        """The channels of the routes from NPU i[k] to NPU j[k] (pysim.routing.paths)."""
        return paths(self.topo, self.routing, self._npu[np.asarray(i, np.int64)],
                     self._npu[np.asarray(j, np.int64)])

    def _route_gbps(self, i, j):
        """Per pair: the bandwidth of its route, its narrowest link (0 where i == j)."""
        out = np.zeros(i.size)
        for lo in range(0, i.size, 1 << 16):
            ch = self.paths(i[lo:lo + (1 << 16)], j[lo:lo + (1 << 16)])
            bw = np.where(ch >= 0, self._ch_gbps[np.maximum(ch, 0)], np.inf).min(axis=1) \
                if ch.shape[1] else np.zeros(ch.shape[0])
            out[lo:lo + bw.size] = np.where(np.isfinite(bw), bw, 0.0)
        return out

    def _direct_gbps(self, i, j):
        """Per pair: the bandwidth of a direct link between them (0: none)."""
        keys, _, _, gbps = self._links
        k = self._npu[i] * self.topo.n_nodes + self._npu[j]
        at = np.minimum(np.searchsorted(keys, k), max(keys.size - 1, 0))
        return np.where((keys.size > 0) & (keys[at] == k), gbps[at], 0.0) if keys.size else \
            np.zeros(k.size)

    def route(self, i, j):
        """Node pairs (u, v) along the route from NPU i to NPU j (indices into `npus`)."""
        key = (i, j)
        if key not in self._routes:
            ch = self.paths([i], [j])[0]
            ch = ch[ch >= 0]
            t = self.topo
            self._routes[key] = tuple((int(t.ch_src[c]), int(t.ch_dst[c])) for c in ch)
        return self._routes[key]

    def root_groups(self):
        """NPU indices per root complex, in order."""
        out = {}
        for i, r in enumerate(self.root):
            out.setdefault(r, []).append(i)
        return [out[r] for r in sorted(out)]


def load_server(name, overrides=None, cfg=None) -> Server:
    """The server of a preset name, a shipped system's name or a TOML file, with `overrides`
    ({"section.key": value}) applied; or of a Config already resolved (`cfg`). Its
    network.model is 'flow' unless set (see the module's doc)."""
    if cfg is None:
        path, over = resolve(name)
        over.update(overrides or {})
        cfg = load(path, over)
        label = ALIASES.get(os.fspath(name), os.fspath(name))
        label = label if label in PRESETS else os.path.splitext(os.path.basename(path))[0]
    else:
        label = name
    check_typed(cfg)
    # (the [jobs] keys typed are the stream's, read: the server's config, run alone by
    # pysim.simulate, holds them as a file would)
    cfg = Config(cfg._values, cfg.explicit, cfg.base_dir, cfg.source,
                 {p for p in cfg.typed if not p.startswith("jobs.")}, cfg.origin)
    if cfg.is_set("network.model"):
        check_model_reads(cfg)
    else:
        check_model_reads(cfg, "flow", " (a stream's default)")
        cfg = cfg.with_overrides({"network.model": "flow"})
    net = compile_network(cfg)
    t = net.topo
    npus = [i for i, k in enumerate(t.node_kinds) if k == "npu"]
    if len(npus) < 2:
        raise ConfigError(f"server {label!r}: {len(npus)} NPU(s); a shared server needs at "
                          f"least 2")
    return Server(name=label, cfg=cfg, topo=t, routing=net.routing, npus=npus,
                  names=[t.node_names[i] for i in npus], root=_roots(t, npus))


def check_typed(cfg):
    """Refuse a key typed (cfg.typed: an override, not the server file's, which may describe
    the system for single runs too) that a job stream does not read: its jobs run training
    iterations (workload.kind = 'training'), so [traffic], the measured window of synthetic
    traffic and the keys of other workload kinds are not read."""
    for path in sorted(cfg.typed):
        if path == "workload.kind" and cfg.workload.kind != "training":
            why = "its jobs run workload.kind = 'training'"
        elif path in unread("workload.kind", "training", [path]):
            users = " or ".join(repr(u) for u in readers("workload.kind", path))
            why = (f"its jobs run workload.kind = 'training', which does not read it (read by "
                   f"workload.kind = {users})")
        else:
            continue
        raise ConfigError(f"{path} = {short(cfg.get(path))} is not read by a stream of jobs "
                          f"(pysim jobs): {why}; leave it out")


def _roots(t, npus):
    """Per NPU: the nearest host reached through nodes that are not NPUs (by hops; ties to
    the lowest node id), numbered in order of first appearance; NPUs with no host each form
    their own group. One breadth-first search from every host at once, backwards along the
    channels through nodes that are not NPUs: each such node learns its nearest host (the
    lowest id among the nearest), and an NPU takes the best of its out-neighbours'."""
    n = t.n_nodes
    src = np.asarray(t.ch_src, np.int64)
    dst = np.asarray(t.ch_dst, np.int64)
    kinds = np.asarray(t.node_kinds)
    passing = kinds != "npu"
    big = np.iinfo(np.int64).max
    dist = np.full(n, big, np.int64)
    host = np.full(n, big, np.int64)
    frontier = np.flatnonzero(kinds == "host")
    dist[frontier] = 0
    host[frontier] = frontier
    keep = passing[src] & passing[dst]            # channels between nodes that pass traffic
    s_in, d_in = src[keep], dst[keep]
    order = np.argsort(d_in, kind="stable")
    s_in, d_in = s_in[order], d_in[order]
    ptr = np.searchsorted(d_in, np.arange(n + 1))
    level = 0
    while frontier.size:
        level += 1
        lo, hi = ptr[frontier], ptr[frontier + 1]
        cnt = hi - lo
        idx = np.repeat(hi - np.cumsum(cnt), cnt) + np.arange(int(cnt.sum()))
        pred, via = s_in[idx], np.repeat(frontier, cnt)      # pred -> via, via reached
        new = dist[pred] == big
        pred, via = pred[new], via[new]
        if pred.size == 0:
            break
        np.minimum.at(host, pred, host[via])
        dist[pred] = level
        frontier = np.unique(pred)
    npu = np.asarray(npus, np.int64)
    found = np.full(npu.size, big, np.int64)
    best = np.full(npu.size, big, np.int64)
    pos = np.full(n, -1, np.int64)
    pos[npu] = np.arange(npu.size)
    out_ch = np.flatnonzero((pos[src] >= 0) & passing[dst] & (dist[dst] < big))
    if out_ch.size:
        k = pos[src[out_ch]]
        d = dist[dst[out_ch]]
        np.minimum.at(best, k, d)
        at = d == best[k]
        np.minimum.at(found, k[at], host[dst[out_ch[at]]])
    hosts = [int(h) if h < big else -1 - int(v) for h, v in zip(found, npu)]
    order = {h: k for k, h in enumerate(dict.fromkeys(hosts))}
    return [order[h] for h in hosts]
