"""Figures of a system: its drawing (nodes and links) and its links' utilisation in a run.
"""
from __future__ import annotations

import numpy as np

from pysim.errors import ConfigError
from pysim.network import undirected_bandwidth
from pysim.plot._common import (KIND_STYLE, check_figure, figure, label, points,
                                run_description, save, utilisation_of)


FORCE_MAX_NODES = 1000     # a force-directed layout above this is a circle instead


MAX_DRAWN_LINKS = 20000    # node pairs a drawing of a system shows at most


def check_drawable(topo, pairs=None):
    """Refuse to draw more linked node pairs than a figure can show (a fully connected graph
    of 2,000 nodes has two million: hours of drawing for a grey disc)."""
    if pairs is None:
        pairs = {(min(a, b), max(a, b)) for a, b in zip(topo.ch_src, topo.ch_dst)}
    if len(pairs) > MAX_DRAWN_LINKS:
        raise ConfigError(f"{topo.name} has {len(pairs):,} linked node pairs; a drawing shows "
                          f"at most {MAX_DRAWN_LINKS:,}")


def layout(topo, seed=1):
    """Node positions: coordinates for meshes and tori (3-D projected), a circle for rings,
    a seeded force-directed layout for graphs (a circle for more than FORCE_MAX_NODES)."""
    n = topo.n_nodes
    if topo.coords is not None:
        c = topo.coords.astype(float)
        if c.shape[1] == 1:
            a = 2 * np.pi * c[:, 0] / max(topo.dims[0], 1)
            return np.stack([np.cos(a), np.sin(a)], axis=1)
        if c.shape[1] == 2:
            return c
        return np.stack([c[:, 0] + 0.35 * c[:, 2], c[:, 1] + 0.25 * c[:, 2]], axis=1)
    rng = np.random.default_rng(seed)
    angle = 2 * np.pi * np.arange(n) / n
    pos = np.stack([np.cos(angle), np.sin(angle)], axis=1) + 0.01 * rng.standard_normal((n, 2))
    if n > FORCE_MAX_NODES:        # (its n x n forces: 4 GB an iteration at 16,384 nodes)
        return pos
    edges = np.array(sorted({(min(a, b), max(a, b)) for a, b in zip(topo.ch_src, topo.ch_dst)}))
    k = 1.0 / np.sqrt(n)
    t = 0.1
    for _ in range(300):   # Fruchterman-Reingold
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(delta, axis=2), 1e-6)
        disp = (delta / dist[..., None] * (k * k / dist)[..., None]).sum(axis=1)
        if len(edges):
            d = pos[edges[:, 0]] - pos[edges[:, 1]]
            dl = np.maximum(np.linalg.norm(d, axis=1), 1e-6)
            f = d / dl[:, None] * (dl * dl / k)[:, None]
            np.add.at(disp, edges[:, 0], -f)
            np.add.at(disp, edges[:, 1], f)
        length = np.maximum(np.linalg.norm(disp, axis=1), 1e-9)
        pos += disp / length[:, None] * np.minimum(length, t)[:, None]
        t *= 0.985
    return pos


def _link_path(topo, pos, a, b, shift=0.0):
    """The points a link from a to b is drawn through, moved `shift` to the right of its
    direction: a straight line, or for a torus's wrap-around link (its ends at the two ends
    of a dimension) an arc beside the row it closes, so it does not hide the row's links."""
    pa, pb = pos[a], pos[b]
    d = pb - pa
    length = max(float(np.linalg.norm(d)), 1e-9)
    right = np.array([d[1], -d[0]]) / length
    wrap = 0
    if topo.coords is not None and topo.coords.shape[1] > 1:
        delta = np.abs(topo.coords[a].astype(int) - topo.coords[b].astype(int))
        k = np.asarray(topo.dims)[delta > 0]
        if len(k) == 1 and k[0] > 2 and delta.max() == k[0] - 1:
            wrap = int(k[0]) - 1
    if not wrap:
        return np.stack([pa + right * shift, pb + right * shift])
    step = length / wrap
    t = np.linspace(0.0, 1.0, 24)[:, None]
    lo, hi = (pa, pb) if a < b else (pb, pa)      # both directions bulge the same way
    up = np.array([-(hi - lo)[1], (hi - lo)[0]]) / length
    bulge = up * 0.35 * step * 4 * t * (1 - t)
    return pa + t * d + bulge + right * shift


def _node_labels(ax, topo, pos, offset=11, limit=64):
    """Names beside the nodes: above them, or on a grid (mesh, torus) up and to the right,
    inside the square between the links."""
    grid = topo.coords is not None and topo.coords.shape[1] > 1
    which = range(topo.n_nodes)
    if grid and topo.n_nodes > 36:            # a large grid: its corners, to orient
        which = [0, topo.n_nodes - 1]
    elif topo.n_nodes > limit:
        return
    size = 8 if topo.n_nodes <= 32 else 6
    for i in which:
        name = topo.node_names[i]
        box = dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.75)
        if grid:
            ax.annotate(name, pos[i], textcoords="offset points", xytext=(5, 5), ha="left",
                        va="bottom", fontsize=size, bbox=box, zorder=4)
        else:
            ax.annotate(name, pos[i], textcoords="offset points", xytext=(0, offset),
                        ha="center", fontsize=size, bbox=box, zorder=4)


def _nodes(ax, topo, pos, filled=True):
    big = topo.n_nodes <= 64
    for kind, (color, marker, label) in KIND_STYLE.items():
        idx = [i for i, k in enumerate(topo.node_kinds) if k == kind]
        if idx:
            ax.scatter(*pos[idx].T, s=(200 if filled else 70) if big else 25,
                       c=color if filled else "white", marker=marker, label=label, zorder=3,
                       edgecolors="black" if filled else color,
                       linewidths=1.0 if filled else 1.4)


def draw_topology(network, cfg, path, title=None, force=False):
    """Draw the system: link widths proportional to bandwidth (per direction, parallel links
    summed), node kinds by colour and marker, a key of the link bandwidths. Returns the path
    written."""
    check_figure(path, force)
    from matplotlib.lines import Line2D
    plt = figure()
    topo = network.topo
    pairs, _ = undirected_bandwidth(topo, cfg)
    check_drawable(topo, pairs)
    pos = layout(topo)
    fig, ax = plt.subplots(figsize=(7, 6))
    gmax = max(pairs.values()) if pairs else 1.0

    def width(g):
        return 0.6 + 5.4 * g / gmax

    for (a, b), g in pairs.items():
        ax.plot(*_link_path(topo, pos, a, b).T, color="#555555", alpha=0.7, zorder=1,
                linewidth=width(g), solid_capstyle="round")
    _nodes(ax, topo, pos)
    _node_labels(ax, topo, pos, offset=12, limit=32)
    handles, labels = ax.get_legend_handles_labels()
    widths = sorted({round(g, 6) for g in pairs.values()})
    if len(widths) <= 6:
        for g in widths:
            handles.append(Line2D([], [], color="#555555", alpha=0.7, linewidth=width(g)))
            labels.append(f"{g:g} GB/s per direction")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False, labelspacing=1.0, borderpad=0.8)
    ax.set_title(f"{topo.name}: its links, width proportional to bandwidth" if title is None
                 else title, fontsize=10)
    ax.set_aspect("equal", adjustable="datalim")
    ax.margins(0.08)
    ax.axis("off")
    save(fig, path, force)
    plt.close(fig)
    return path


def link_utilisation(network, cfg, result, path, title=None, force=False):
    """A run's per-link utilisation drawn on the topology: each direction of a link is a line
    on its own side (to the right of its direction of travel), coloured by the fraction of
    its bandwidth it used (the highest of its parallel lanes); nodes labelled."""
    check_figure(path, force)
    plt = figure()
    import matplotlib as mpl
    topo = network.topo
    index = {n: i for i, n in enumerate(topo.node_names)}
    util = {}
    for link in result["links"]:
        k = (index[link["src"]], index[link["dst"]])
        util[k] = max(util.get(k, 0.0), utilisation_of(link))
    check_drawable(topo, {(min(a, b), max(a, b)) for a, b in util})
    pos = layout(topo)
    fig, ax = plt.subplots(figsize=(7.4, 6))
    cmap = mpl.colormaps["inferno_r"]
    vmax = max(max(util.values(), default=0.0), 1e-9)
    span = float(np.ptp(pos, axis=0).max()) or 1.0
    shift = 0.012 * span if topo.coords is not None and topo.coords.shape[1] > 1 else 0.02 * span
    for (a, b), u in sorted(util.items(), key=lambda kv: kv[1]):
        ax.plot(*_link_path(topo, pos, a, b, shift).T, color=cmap(0.08 + 0.92 * u / vmax),
                linewidth=2.6 if topo.n_nodes <= 64 else 1.2, solid_capstyle="butt", zorder=2)
    _nodes(ax, topo, pos, filled=False)
    _node_labels(ax, topo, pos, offset=8)
    sm = mpl.cm.ScalarMappable(cmap=mpl.colors.ListedColormap(cmap(np.linspace(0.08, 1, 256))),
                               norm=mpl.colors.Normalize(0, vmax))
    fig.colorbar(sm, ax=ax, shrink=0.8, label="utilisation (fraction of the link's bandwidth)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.margins(0.05)
    ax.axis("off")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, 0.0),
              ncol=4)
    cfgd = result.get("config") or {}
    what = run_description({**cfgd, "_system": cfgd.get("_system") or topo.name})
    rate = (cfgd.get("traffic") or {}).get("injection_rate")
    if rate is not None and (cfgd.get("workload") or {}).get("kind", "synthetic") == "synthetic":
        what += f" at {rate:g} flits/node/cycle"
    ax.set_title(f"{what}: link utilisation" if title is None else title, fontsize=10)
    save(fig, path, force)
    plt.close(fig)
    return util
