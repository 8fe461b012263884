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
from pysim.config import load
from pysim.errors import ConfigError
from pysim import systems
from pysim.network import compile_network

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


@dataclass
class Server:
    """A server: its config, routes, and the NPU-pair tables the policies read."""
    name: str
    cfg: object                   # the resolved Config (jobs and workload keys included)
    topo: object                  # pysim.topology.Topology
    table: np.ndarray             # routing table: table[u, d] = topology channel u takes to d
    npus: list                    # node ids of the NPUs, in node order
    names: list                   # their names
    route_gbps: np.ndarray        # [i, j]: bandwidth of the route from NPU i to NPU j (GB/s)
    direct_gbps: np.ndarray       # [i, j]: bandwidth of a direct link i - j (0: none)
    root: list                    # per NPU: index of its root complex (host socket)
    link_gbps: dict = field(default_factory=dict)   # (u, v) node pair -> GB/s, parallel summed
    _routes: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)      # shape key -> its network (built once)

    @property
    def size(self):
        return len(self.npus)

    def route(self, i, j):
        """Node pairs (u, v) along the route from NPU i to NPU j (indices into `npus`)."""
        key = (i, j)
        if key not in self._routes:
            t = self.topo
            u, d = self.npus[i], self.npus[j]
            hops = []
            while u != d:
                v = t.ch_dst[self.table[u, d]]
                hops.append((u, v))
                u = v
            self._routes[key] = tuple(hops)
        return self._routes[key]

    def root_groups(self):
        """NPU indices per root complex, in order."""
        out = {}
        for i, r in enumerate(self.root):
            out.setdefault(r, []).append(i)
        return [out[r] for r in sorted(out)]


MAX_NPUS = 63


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
    if not cfg.is_set("network.model"):
        cfg = cfg.with_overrides({"network.model": "flow"})
    net = compile_network(cfg)
    t = net.topo
    npus = [i for i, k in enumerate(t.node_kinds) if k == "npu"]
    if len(npus) < 2:
        raise ConfigError(f"server {label!r}: {len(npus)} NPU(s); a shared server needs at "
                          f"least 2")
    if len(npus) > MAX_NPUS:
        raise ConfigError(f"server {label!r}: {len(npus)} NPUs; a shared server has at most "
                          f"{MAX_NPUS} (placements are kept as 64-bit masks of its NPUs)")
    clock = cfg.network.clock_ghz
    link = {}
    for c in range(t.n_channels):
        key = (t.ch_src[c], t.ch_dst[c])
        link[key] = link.get(key, 0.0) + t.ch_bytes_per_cycle[c] * clock
    n = len(npus)
    srv = Server(name=label, cfg=cfg, topo=t, table=net.routing.table, npus=npus,
                 names=[t.node_names[i] for i in npus], route_gbps=np.zeros((n, n)),
                 direct_gbps=np.zeros((n, n)), root=[], link_gbps=link)
    for i in range(n):
        for j in range(n):
            if i != j:
                srv.route_gbps[i, j] = min(link[h] for h in srv.route(i, j))
                srv.direct_gbps[i, j] = link.get((npus[i], npus[j]), 0.0)
    srv.root = _roots(t, npus)
    return srv


def _roots(t, npus):
    """Per NPU: the nearest host reached through nodes that are not NPUs (breadth first,
    ties to the lowest node id), numbered in order of first appearance; NPUs with no host
    each form their own group."""
    adj = {}
    for a, b in zip(t.ch_src, t.ch_dst):
        adj.setdefault(a, set()).add(b)
    hosts = []
    for s in npus:
        dist, frontier, found = {s: 0}, [s], None
        while frontier and found is None:
            nxt = []
            for u in frontier:
                for v in sorted(adj.get(u, ())):
                    if v in dist or t.node_kinds[v] == "npu":
                        continue
                    dist[v] = dist[u] + 1
                    nxt.append(v)
            hits = sorted(v for v in nxt if t.node_kinds[v] == "host")
            found = hits[0] if hits else None
            frontier = nxt
        hosts.append(found if found is not None else -1 - s)
    order = {h: k for k, h in enumerate(dict.fromkeys(hosts))}
    return [order[h] for h in hosts]
