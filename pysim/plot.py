"""Figures (matplotlib, no screen needed): PNG, PDF or SVG chosen by the file extension."""
from __future__ import annotations

import os

import numpy as np

from pysim.config import ConfigError

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


# ------------------------------------------------------------------ sweep figures

def _get(row, key):
    """A value of a tidy row: a swept key ('traffic.injection_rate'), a metric, or a key of
    the resolved config stored with the result."""
    if key in row:
        return row[key]
    cfg = row.get("_config") or {}
    s, _, k = key.partition(".")
    return cfg.get(s, {}).get(k)


def _tidy_with_config(rows):
    from pysim.sweep import tidy
    out = tidy(rows)
    for t, r in zip(out, rows):
        t["_config"] = (r.get("result") or {}).get("config", {})
    return out


def _require(tidy_rows, **roles):
    """Every key named for a role (x="traffic.injection_rate", ...) must have a value in some
    point that did not fail, else the figure would be empty or fail deep inside matplotlib."""
    ok = [t for t in tidy_rows if t["status"] != "failed"]
    if not ok:
        raise ConfigError("every point of the sweep failed: nothing to plot")
    for role, key in roles.items():
        if key is not None and all(_get(t, key) is None for t in ok):
            names = sorted({k for t in ok for k in t if not k.startswith("_")})
            raise ConfigError(f"--{role} {key}: no point has it; the rows have "
                              f"{', '.join(names)}, and every configuration key "
                              f"(section.key)")


def series_data(rows, x, y, series=None):
    """{series value: (xs, ys, saturated flags)} from stored sweep rows, sorted by x; failed
    points are left out."""
    data = {}
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, x=x, y=y, series=series)
    for t in tidy_rows:
        if t["status"] == "failed":
            continue
        key = _get(t, series) if series else None
        data.setdefault(key, []).append((_get(t, x), _get(t, y), bool(t.get("saturated"))))
    return {k: tuple(map(list, zip(*sorted(v, key=lambda p: p[0])))) for k, v in data.items()}


def _finish(fig, ax, path, title):
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    fig.savefig(path, format=fmt, dpi=150)


def _label(key, series):
    if key is None:
        return None
    return f"{series.split('.')[-1]} = {key}"


def latency_load(rows, path, x="traffic.injection_rate", series=None,
                 y="avg_packet_latency", title=None):
    """Latency against offered load, one line per series value; saturated points drawn
    hollow with a dotted line at the first of them; the zero-load latency as a dashed line.
    Returns the plotted data."""
    plt = _figure()
    data = series_data(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    zl = series_data(rows, x, "zero_load_latency", series)
    for i, (key, (xs, ys, sat)) in enumerate(sorted(data.items(), key=lambda kv: str(kv[0]))):
        color = f"C{i}"
        ok = [j for j, s in enumerate(sat) if not s]
        bad = [j for j, s in enumerate(sat) if s]
        ax.plot([xs[j] for j in ok], [ys[j] for j in ok], "o-", color=color,
                label=_label(key, series))
        if bad:
            ax.plot([xs[j] for j in bad], [ys[j] for j in bad], "o", mfc="none", color=color)
            ax.axvline(xs[bad[0]], color=color, linestyle=":", linewidth=1)
        z = [v for v in zl.get(key, ([], [], []))[1] if v is not None]
        if z:
            ax.axhline(z[0], color=color, linestyle="--", linewidth=0.8, alpha=0.7)
    ax.set_xlabel("offered load (flits/node/cycle)" if x == "traffic.injection_rate" else x)
    ax.set_ylabel("average packet latency (cycles)" if y == "avg_packet_latency" else y)
    ymax = max((max(v[1]) for v in data.values() if v[1]), default=1)
    zmax = max((v for s in zl.values() for v in s[1] if v), default=0)
    ax.set_ylim(0, min(ymax, max(8 * zmax, 1)) * 1.1 if zmax else None)
    if series:
        ax.legend(fontsize=8, frameon=False)
    _finish(fig, ax, path, title or _system_title(rows, "latency vs offered load "
                                                        "(hollow: saturated; dashed: zero-load)"))
    plt.close(fig)
    return data


def throughput(rows, path, x="offered_rate", series=None, y="accepted_rate", title=None):
    """Accepted against offered throughput, with the accepted = offered line."""
    plt = _figure()
    data = series_data(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top = 0.0
    for i, (key, (xs, ys, sat)) in enumerate(sorted(data.items(), key=lambda kv: str(kv[0]))):
        ax.plot(xs, ys, "o-", color=f"C{i}", label=_label(key, series))
        top = max(top, max(xs))
    ax.plot([0, top], [0, top], "--", color="gray", linewidth=0.8, label="accepted = offered")
    ax.set_xlabel("offered load (flits/node/cycle)")
    ax.set_ylabel("accepted throughput (flits/node/cycle)")
    ax.legend(fontsize=8, frameon=False)
    _finish(fig, ax, path, title or _system_title(rows, "accepted vs offered throughput"))
    plt.close(fig)
    return data


def collective(rows, path, x="workload.bytes", y="busbw_gbps", series="workload.algorithm",
               title=None):
    """Collective time or bandwidth against message size per algorithm: sizes on a log axis;
    a bandwidth (`*_gbps`) on a linear axis from zero, anything else (a time) on a log axis."""
    plt = _figure()
    data = series_data(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(7.6, 4.4))      # (the legend sits to the right)
    for i, (key, (xs, ys, _)) in enumerate(sorted(data.items(), key=lambda kv: str(kv[0]))):
        ax.plot(xs, ys, "o-", color=f"C{i}", label=_label(key, series))
    ax.set_xscale("log", base=2)
    if y.endswith("_gbps"):
        ax.set_ylim(bottom=0, top=1.08 * max((max(v[1]) for v in data.values() if v[1]),
                                               default=1))
    else:
        ax.set_yscale("log")
    name = {"busbw_gbps": "bus bandwidth (GB/s)", "algbw_gbps": "algorithm bandwidth (GB/s)",
            "collective_cycles": "time (cycles)"}.get(y, y)
    ax.set_xlabel("message size (bytes)" if x == "workload.bytes" else x)
    ax.set_ylabel(name)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _finish(fig, ax, path, title or _system_title(rows, f"{name.split(' (')[0]} vs message "
                                                        "size"))
    plt.close(fig)
    return data


def speedup_bars(rows, path, group, series, metric, baseline, title=None):
    """Grouped bars: metric(baseline series value) / metric(series value) per group, i.e.
    speed-up over the baseline (> 1 is faster for a time-like metric)."""
    plt = _figure()
    table = {}
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, group=group, series=series, y=metric)
    for t in tidy_rows:
        if t["status"] != "failed":
            table[(_get(t, group), _get(t, series))] = _get(t, metric)
    groups = sorted({g for g, _ in table}, key=str)
    kinds = sorted({s for _, s in table}, key=str)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    width = 0.8 / max(len(kinds), 1)
    data = {}
    for i, s in enumerate(kinds):
        vals = [table[(g, baseline)] / table[(g, s)]
                if (g, s) in table and (g, baseline) in table and table[(g, s)] else np.nan
                for g in groups]
        data[s] = vals
        ax.bar(np.arange(len(groups)) + i * width, vals, width, label=_label(s, series))
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xticks(np.arange(len(groups)) + width * (len(kinds) - 1) / 2)
    ax.set_xticklabels([str(g) for g in groups])
    ax.set_xlabel(group)
    ax.set_ylabel(f"speed-up over {series.split('.')[-1]} = {baseline} ({metric})")
    ax.legend(fontsize=8, frameon=False)
    _finish(fig, ax, path, title or _system_title(rows, "speed-up"))
    plt.close(fig)
    return groups, data


BREAKDOWN = (("compute_cycles", "compute", "#4c72b0"),
             ("exposed_comm_cycles", "exposed communication", "#dd8452"),
             ("other_cycles", "other (idle)", "#bbbbbb"))


def breakdown(rows, path, x, series=None, title=None):
    """Stacked bars of training iterations: the busiest NPU's compute, the communication it
    waited for, and the rest of the iteration, in ms, one bar per `x` value (and per `series`
    value beside it). Returns {(x value, series value): (compute, exposed, other) ms}."""
    plt = _figure()
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, x=x, series=series, y="iteration_cycles")
    table = {}
    for t in tidy_rows:
        if t["status"] == "failed" or t.get("iteration_cycles") is None:
            continue
        ms = t["iteration_seconds"] * 1e3 / t["iteration_cycles"] if t["iteration_cycles"] \
            else 0.0
        table[(_get(t, x), _get(t, series) if series else None)] = tuple(
            (t.get(k) or 0) * ms for k, _, _ in BREAKDOWN)
    xs = sorted({a for a, _ in table}, key=str)
    ss = sorted({b for _, b in table}, key=str)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(xs) * len(ss) + 2), 4.4))
    width = 0.8 / max(len(ss), 1)
    ticks, labels = [], []
    for j, sv in enumerate(ss):
        pos = np.arange(len(xs)) + j * width
        bottom = np.zeros(len(xs))
        for k, (_, name, color) in enumerate(BREAKDOWN):
            vals = np.array([table.get((xv, sv), (np.nan,) * 3)[k] for xv in xs])
            ax.bar(pos, vals, width * 0.92, bottom=bottom, color=color,
                   label=name if j == 0 else None, edgecolor="white", linewidth=0.5)
            bottom = bottom + np.nan_to_num(vals)
        for p_, xv in zip(pos, xs):
            ticks.append(p_)
            labels.append(f"{xv}" + (f"\n{sv}" if series else ""))
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel(x + (f" / {series}" if series else ""))
    ax.set_ylabel("iteration (ms)")
    ax.legend(fontsize=8, frameon=False)
    _finish(fig, ax, path, title or _system_title(rows, "training iteration breakdown"))
    plt.close(fig)
    return table


def link_utilisation(network, cfg, result, path, title=None):
    """A run's per-link utilisation drawn on the topology, links coloured by heat."""
    plt = _figure()
    import matplotlib as mpl
    topo = network.topo
    pos = layout(topo)
    index = {n: i for i, n in enumerate(topo.node_names)}
    util = {}
    for link in result["links"]:
        k = (index[link["src"]], index[link["dst"]])
        util[k] = max(util.get(k, 0.0), link["utilization"])
    fig, ax = plt.subplots(figsize=(7, 6))
    cmap = mpl.colormaps["inferno_r"]
    vmax = max(max(util.values(), default=0.0), 1e-9)
    for (a, b), u in util.items():
        # draw each direction offset a little so both are visible
        d = pos[b] - pos[a]
        nrm = np.array([-d[1], d[0]]) / max(np.linalg.norm(d), 1e-9) * 0.04
        ax.plot(*np.stack([pos[a] + nrm, pos[b] + nrm]).T, color=cmap(u / vmax), linewidth=2.5)
    for kind, (color, marker, label) in KIND_STYLE.items():
        idx = [i for i, k in enumerate(topo.node_kinds) if k == kind]
        if idx:
            ax.scatter(*pos[idx].T, s=80, c="white", marker=marker, edgecolors=color,
                       zorder=3, label=label)
    sm = mpl.cm.ScalarMappable(cmap=cmap, norm=mpl.colors.Normalize(0, vmax))
    fig.colorbar(sm, ax=ax, label="link utilisation (fraction of bandwidth)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.axis("off")
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    ax.set_title(title or f"{topo.name}: link utilisation (each direction drawn on its "
                          f"right)", fontsize=10)
    fig.tight_layout()
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    fig.savefig(path, format=fmt, dpi=150)
    plt.close(fig)
    return util


def timeline(trace, path, title=None):
    """A Gantt chart per node and resource from a Chrome/Perfetto trace (events with
    ph = "X": pid = node, tid = resource, ts and dur in microseconds = cycles)."""
    plt = _figure()
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = [e for e in events if e.get("ph") == "X"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[(e.get("pid"), e.get("tid") if e["name"] == "thread_name" else None)] = \
                e["args"]["name"]
    tracks = sorted({(e["pid"], e.get("tid", 0)) for e in spans})
    row = {t: i for i, t in enumerate(tracks)}
    cats = sorted({e.get("cat", e.get("name", "")) for e in spans})
    color = {c: f"C{i % 10}" for i, c in enumerate(cats)}
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.35 * max(len(tracks), 1)))
    for e in spans:
        c = e.get("cat", e.get("name", ""))
        ax.barh(row[(e["pid"], e.get("tid", 0))], e["dur"], left=e["ts"], height=0.7,
                color=color[c])
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([f"{names.get((p, None), p)} / {names.get((p, t), t)}"
                        for p, t in tracks], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (cycles)")
    handles = [mpl_patch(color[c], c) for c in cats]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="upper right")
    _finish(fig, ax, path, title or "timeline per node and resource")
    plt.close(fig)
    return {t: [(e["ts"], e["dur"]) for e in spans if (e["pid"], e.get("tid", 0)) == t]
            for t in tracks}


def mpl_patch(color, label):
    from matplotlib.patches import Patch
    return Patch(color=color, label=label)


def _system_title(rows, what):
    for r in rows:
        res = r.get("result") or {}
        name = (res.get("config") or {}).get("_system")
        if name:
            return f"{name}: {what}"
    return what


def jobs_cdf(result, path, title=None):
    """A job stream's result (pysim jobs --json): left, the CDF of the jobs' execution times
    per policy (log scale); right, the CDF of each job's speedup over the reference policy
    (its time there / its time under the policy), with the 75th percentile marked."""
    plt = _figure()
    names = list(result["policies"])
    ref = result.get("reference", names[0])
    by = {n: {r["id"]: r for r in result["jobs"] if r["policy"] == n} for n in names}
    if not all(by[n] for n in names):
        raise ConfigError("the jobs result has a policy without jobs")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    data = {}
    for i, n in enumerate(names):
        ex = np.sort([r["exec_s"] for r in by[n].values()])
        frac = np.arange(1, len(ex) + 1) / len(ex)
        ax.step(ex, frac, where="post", color=f"C{i}", label=n)
        sp = np.sort([by[ref][j]["exec_s"] / r["exec_s"] for j, r in by[n].items()])
        bx.step(sp, frac, where="post", color=f"C{i}", label=n)
        p75 = float(np.percentile(sp, 75))
        bx.plot([p75], [0.75], "o", color=f"C{i}", ms=4)
        data[n] = dict(exec_s=ex.tolist(), speedup=sp.tolist(), speedup_p75=p75)
    ax.set_xscale("log")
    from matplotlib.ticker import NullFormatter
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("execution time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.grid(alpha=0.3)
    bx.axvline(1.0, color="0.6", lw=0.8, ls="--")
    bx.axhline(0.75, color="0.8", lw=0.8, ls=":")
    bx.set_xlabel(f"speedup over {ref} (same job)")
    bx.set_ylabel("fraction of jobs")
    bx.grid(alpha=0.3)
    n_jobs = len(by[ref])
    fig.suptitle(title or f"{result.get('server', '')}: {n_jobs} jobs per policy", fontsize=10)
    fig.tight_layout()
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    fig.savefig(path, format=fmt, dpi=150)
    plt.close(fig)
    return data
