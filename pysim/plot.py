"""Figures (matplotlib, no screen needed): PNG, PDF or SVG chosen by the file extension."""
from __future__ import annotations

import os

import numpy as np

KIND_STYLE = {   # colour, marker, label
    "npu": ("#1f77b4", "s", "NPU"),
    "mem": ("#2ca02c", "o", "memory node"),
    "host": ("#d62728", "D", "host"),
    "switch": ("#7f7f7f", "h", "switch"),
}


def _figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def layout(topo, seed=1):
    """Node positions: coordinates for meshes and tori (3-D projected), a circle for rings,
    a seeded force-directed layout for graphs."""
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


def draw_topology(network, cfg, path, title=None):
    """Draw the system: link widths proportional to bandwidth (per direction, parallel links
    summed), node kinds by colour and marker. Returns the path written."""
    from pysim.network import _undirected_bandwidth
    plt = _figure()
    topo = network.topo
    pos = layout(topo)
    pairs, _ = _undirected_bandwidth(topo, cfg)
    fig, ax = plt.subplots(figsize=(7, 6))
    gmax = max(pairs.values()) if pairs else 1.0
    for (a, b), g in pairs.items():
        ax.plot(*pos[[a, b]].T, color="#555555", alpha=0.7, zorder=1,
                linewidth=0.5 + 5.5 * g / gmax, solid_capstyle="round")
    for kind, (color, marker, label) in KIND_STYLE.items():
        idx = [i for i, k in enumerate(topo.node_kinds) if k == kind]
        if idx:
            ax.scatter(*pos[idx].T, s=220 if topo.n_nodes <= 64 else 40, c=color,
                       marker=marker, label=label, zorder=2, edgecolors="black")
    if topo.n_nodes <= 32:
        for i, name in enumerate(topo.node_names):
            ax.annotate(name, pos[i], textcoords="offset points", xytext=(0, 11),
                        ha="center", fontsize=8)
    ax.set_title(title or f"{topo.name}: link width proportional to bandwidth "
                          f"(max {gmax:g} GB/s per direction)", fontsize=10)
    ax.legend(loc="best", fontsize=8, frameon=False)
    ax.set_aspect("equal", adjustable="datalim")
    ax.axis("off")
    fig.tight_layout()
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    fig.savefig(path, format=fmt, dpi=150)
    plt.close(fig)
    return path
