"""Figures (matplotlib, no screen needed): PNG, PDF or SVG chosen by the file extension.

    import pysim
    rows = pysim.sweep("mesh8x8", {"traffic.injection_rate": [0.1, 0.2, 0.3]})
    pysim.plot.latency_load(rows, "latency.png")

From a sweep's rows (`pysim.sweep(...)`, or `pysim.sweep.Store(db).rows()`): `latency_load`,
`throughput`, `collective`, `speedup_bars`. From one run: `link_utilisation` (a result's
dict), `timeline` (a Chrome/Perfetto trace), `draw_topology` (a compiled network). Each writes
the file and returns the data it drew. Points repeated over seeds (`simulation.seed` swept)
are averaged, with 95% confidence intervals as error bars.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from pysim.errors import ConfigError
from pysim.network import undirected_bandwidth
from pysim.sweep import order_key, tidy

KIND_STYLE = {   # colour, marker, label
    "npu": ("#1f77b4", "s", "NPU"),
    "mem": ("#2ca02c", "o", "memory node"),
    "host": ("#d62728", "D", "host"),
    "switch": ("#7f7f7f", "h", "switch"),
}

SEED = "simulation.seed"
CLIP = 6.0      # latency-load: the y-axis ends at this multiple of the zero-load latency

LABELS = {      # axis labels of the common keys and metrics
    "traffic.injection_rate": "offered load (flits/node/cycle)",
    "offered_rate": "offered load (flits/node/cycle)",
    "accepted_rate": "accepted throughput (flits/node/cycle)",
    "avg_packet_latency": "average packet latency (cycles)",
    "avg_network_latency": "average network latency (cycles)",
    "p50_packet_latency": "median packet latency (cycles)",
    "p95_packet_latency": "95th-percentile packet latency (cycles)",
    "p99_packet_latency": "99th-percentile packet latency (cycles)",
    "max_packet_latency": "maximum packet latency (cycles)",
    "busbw_gbps": "bus bandwidth (GB/s)",
    "algbw_gbps": "algorithm bandwidth (GB/s)",
    "collective_cycles": "time (cycles)",
    "collective_seconds": "time (s)",
    "makespan_cycles": "makespan (cycles)",
    "workload.bytes": "message size per participant (bytes)",
}


def _figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    fig.savefig(path, format=fmt, dpi=150, bbox_inches="tight")


def _label(key):
    return LABELS.get(key, key)


# ------------------------------------------------------------------ statistics

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df):
    """Student's t quantile 0.975 with df degrees of freedom (a 95% two-sided interval): the
    table for df <= 30, the Cornish-Fisher expansion beyond (within 0.001)."""
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df)


def mean_ci(values):
    """(mean, half-width of its 95% confidence interval); the half-width is 0 for one value."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()), 0.0
    return float(v.mean()), float(t975(len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))


# ------------------------------------------------------------------ rows of a sweep

def _get(row, key):
    """A value of a tidy row: a swept key ('traffic.injection_rate'), a metric, or a key of
    the resolved config stored with the result."""
    if key in row:
        return row[key]
    cfg = row.get("_config") or {}
    s, _, k = key.partition(".")
    return cfg.get(s, {}).get(k)


def _tidy_with_config(rows):
    out = tidy(rows)
    for t, r in zip(out, rows):
        t["_config"] = (r.get("result") or {}).get("config", {})
        t["_params"] = r.get("params") or {}
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


def _hashable(v):
    """A series or group value as a dict key: a list (topology.dims) as a tuple, a table as
    its JSON text."""
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _numeric(tidy_rows, **roles):
    """Every key named for a role must have numbers (or nothing) where it has a value: a
    string metric (saturation_reason) on an axis is refused, naming the numeric ones."""
    ok = [t for t in tidy_rows if t["status"] != "failed"]
    for role, key in roles.items():
        bad = [v for v in (_get(t, key) for t in ok) if v is not None and not _number(v)]
        if bad:
            names = sorted({k for t in ok for k, v in t.items()
                            if not k.startswith("_") and _number(v)})
            raise ConfigError(f"--{role} {key}: its values are not numbers (one is "
                              f"{_short(bad[0])}); the numeric columns are {', '.join(names)}")


def check_rows(rows, x, y, series=None):
    """Refuse, before drawing, a figure whose axes would be empty or not numbers."""
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, x=x, y=y, series=series)
    _numeric(tidy_rows, x=x, y=y)
    return tidy_rows


def check_breakdown(rows, x, series=None):
    """Refuse a breakdown whose bars would be empty: no point has `x` (or `series`), or none
    is a training run (no iteration_cycles)."""
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, x=x, series=series, y="iteration_cycles")
    _numeric(tidy_rows, y="iteration_cycles")
    return tidy_rows


def check_speedup(rows, group, series, metric, baseline):
    """Refuse a speed-up figure whose baseline no point has (its bars would all be empty),
    or whose metric is not a number."""
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, group=group, series=series, y=metric)
    _numeric(tidy_rows, y=metric)
    values = {_hashable(_get(t, series)) for t in tidy_rows if t["status"] != "failed"}
    if _hashable(baseline) not in values:
        shown = ", ".join(sorted(map(repr, values)))
        raise ConfigError(f"--baseline {baseline!r}: no point that did not fail has {series} "
                          f"= {baseline!r}; its values are {shown}")


def check_result(obj, source):
    """A run's --json result, as far as a link-utilisation figure reads it."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a run's --json result (a JSON object), got a "
                         f"{type(obj).__name__}")
    if not isinstance(obj.get("config"), dict):
        raise ValueError(f"'config' = {_short(obj.get('config'))}: expected the resolved "
                         f"configuration (an object of sections)")
    links = obj.get("links")
    if not isinstance(links, list) or not all(
            isinstance(link, dict) and isinstance(link.get("src"), str) and
            isinstance(link.get("dst"), str) and _number(link.get("utilization"))
            for link in links):
        raise ValueError(f"'links' = {_short(links)}: expected a list of objects with src, "
                         f"dst (node names) and utilization (a number)")
    return obj


def check_links(network, result, source):
    """Every link of a result names nodes of the system its config describes."""
    names = set(network.topo.node_names)
    for link in result["links"]:
        for end in ("src", "dst"):
            if link[end] not in names:
                raise ValueError(f"link {link['src']}->{link['dst']}: {link[end]!r} is not a "
                                 f"node of the system its config describes")


def check_trace(obj, source):
    """A Chrome/Perfetto trace as `pysim run --trace` writes it (or its list of events)."""
    events = obj.get("traceEvents") if isinstance(obj, dict) else obj
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ValueError(f"'traceEvents' = {_short(events)}: expected a list of event objects")
    for e in events:
        if e.get("ph") == "X":
            if not (_number(e.get("ts")) and _number(e.get("dur")) and
                    _number(e["ts"] + e["dur"]) and e["dur"] >= 0 and
                    isinstance(e.get("pid"), (int, str)) and
                    isinstance(e.get("tid", 0), (int, str))):
                raise ValueError(f"event {_short(e)}: a complete event (ph 'X') needs ts and "
                                 f"dur (finite numbers, dur >= 0), pid and tid")
        elif e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            if not (isinstance(e.get("args"), dict) and isinstance(e["args"].get("name"), str)
                    and isinstance(e.get("pid"), (int, str)) and
                    isinstance(e.get("tid", 0), (int, str))):
                raise ValueError(f"event {_short(e)}: a name event needs pid, tid and "
                                 f"args.name")
    return obj


def _short(v, limit=80):
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."


def _series_keys(tidy_rows, x, series, exclude=()):
    """The keys that tell series apart: `series`, then any other swept key whose value varies
    (except x and the seed, over which points are averaged)."""
    keys = [series] if series else []
    swept = sorted({k for t in tidy_rows for k in t["_params"]})
    for k in swept:
        if k in (x, SEED) or k in keys or k in exclude:
            continue
        if len({_hashable(t["_params"].get(k)) for t in tidy_rows}) > 1:
            keys.append(k)
    return keys


def _series_label(keys, values):
    if not keys:
        return None
    return ", ".join(f"{k.split('.')[-1]} = {v}" for k, v in zip(keys, values))


def points(rows, x, y, series=None, extra=()):
    """The points of a figure, averaged over seeds: {series value: {"x": [...], "y": means,
    "ci": 95% half-widths, "n": seeds, "saturated": [any seed saturated], and the mean of
    each metric in `extra`}}, sorted by x; failed points are left out. The series value is
    that of `series`, or a tuple when other swept keys vary too (their values in order).
    When x is a measured metric (offered_rate) rather than a swept key, the points along it
    are told apart by the swept injection rate, and x is their mean."""
    tidy_rows = check_rows(rows, x, y, series)
    ok = [t for t in tidy_rows if t["status"] != "failed"]
    swept = {k for t in ok for k in t["_params"]}
    along = x if x in swept or "traffic.injection_rate" not in swept else \
        "traffic.injection_rate"
    keys = _series_keys(ok, along, series)
    groups = {}
    for t in ok:
        sv = tuple(_hashable(_get(t, k)) for k in keys)
        groups.setdefault(sv, {}).setdefault(_hashable(_get(t, along)), []).append(t)
    out = {}
    for sv, by_x in groups.items():
        d = {"x": [], "y": [], "ci": [], "n": [], "saturated": [], "keys": keys,
             **{m: [] for m in extra}}
        for xv in sorted(by_x, key=lambda v: (v is None, v)):
            pts = [t for t in by_x[xv] if _get(t, y) is not None and _get(t, x) is not None]
            if not pts:
                continue
            m, h = mean_ci([_get(t, y) for t in pts])
            d["x"].append(xv if along == x else float(np.mean([_get(t, x) for t in pts])))
            d["y"].append(m)
            d["ci"].append(h)
            d["n"].append(len(pts))
            d["saturated"].append(any(bool(t.get("saturated")) for t in pts))
            for e in extra:
                vals = [_get(t, e) for t in pts if _get(t, e) is not None]
                d[e].append(float(np.mean(vals)) if vals else None)
        key = sv[0] if len(sv) == 1 and series else (sv if sv else None)
        out[key] = d
    return out


def _ordered(data):
    return sorted(data.items(), key=lambda kv: str(kv[0]))


def _legend_name(key, d):
    if key is None:
        return None
    values = key if isinstance(key, tuple) else (key,)
    return _series_label(d["keys"], values)


def _run_description(cfg, swept=()):
    """'mesh8x8, uniform traffic, 4-flit packets' from a resolved config, leaving out what a
    sweep varies (`swept` keys)."""
    name = cfg.get("_system") or ""
    w = cfg.get("workload") or {}
    t = cfg.get("traffic") or {}
    parts = [name]
    if w.get("kind") == "collective" and "workload.kind" not in swept:
        what = []
        if "workload.algorithm" not in swept:
            what.append(str(w.get("algorithm")))
        if "workload.bytes" not in swept:
            what.append(f"{_bytes_text(w.get('bytes') or 0)} per participant")
        coll = str(w.get("collective", "")).replace("_", "-")
        if "workload.collective" not in swept:
            parts.append(coll + (f" ({', '.join(what)})" if what else ""))
    elif w.get("kind") == "graph":
        parts.append("op graph")
    elif t and w.get("kind", "synthetic") == "synthetic":
        if "traffic.pattern" not in swept:
            parts.append(f"{t.get('pattern', '')} traffic")
        pf = t.get("packet_flits")
        if isinstance(pf, int) and "traffic.packet_flits" not in swept:
            parts.append(f"{pf}-flit packets")
    return ", ".join(s for s in parts if s)


def _common_config(rows):
    for r in rows:
        cfg = (r.get("result") or {}).get("config")
        if cfg:
            return cfg
    return {}


def _apply_axes(ax, xlim, ylim, logy):
    if logy:
        ax.set_yscale("log")
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)


def _finish(fig, ax, path, title):
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    _save(fig, path)


# ------------------------------------------------------------------ sweep figures

def _is_load(key):
    return key in ("traffic.injection_rate", "offered_rate")


def latency_load(rows, path, x="traffic.injection_rate", series=None,
                 y="avg_packet_latency", title=None, xlim=None, ylim=None, logy=False):
    """Latency against offered load, one line per series, averaged over seeds with 95%
    confidence intervals. Saturated points are hollow; the dashed line is the zero-load
    latency; a dotted vertical line marks each series' saturation throughput (the most it
    accepted); the y-axis ends at CLIP times the zero-load latency (or `ylim`), and points
    beyond it are drawn as triangles on the top edge. Returns the plotted data."""
    plt = _figure()
    from matplotlib.lines import Line2D
    data = points(rows, x, y, series, extra=("zero_load_latency", "accepted_rate"))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    zl_max = max((v for d in data.values() for v in d["zero_load_latency"] if v), default=0)
    top = None
    if ylim is not None:
        top = ylim[1]
    elif not logy and zl_max:
        ymax = max((max(d["y"]) for d in data.values() if d["y"]), default=0)
        top = min(CLIP * zl_max, ymax * 1.08) if ymax > 0 else None
    used = set()
    for i, (key, d) in enumerate(_ordered(data)):
        color = f"C{i}"
        xs, ys, ci, sat = map(np.asarray, (d["x"], d["y"], d["ci"], d["saturated"]))
        ax.plot(xs, ys, "-", color=color, label=_legend_name(key, d), zorder=2)
        if (ci > 0).any():
            ax.errorbar(xs, ys, yerr=ci, fmt="none", ecolor=color, elinewidth=1, capsize=2.5,
                        zorder=2)
            used.add("ci")
        beyond = ys > top if top is not None else np.zeros(len(ys), bool)
        for mask, face, tag in ((~sat & ~beyond, color, "ok"), (sat & ~beyond, "white", "sat")):
            if mask.any():
                ax.plot(xs[mask], ys[mask], "o", color=color, mfc=face, zorder=3)
                used.add(tag)
        if beyond.any():        # the first point past the top: the line leaves through it
            j = int(np.flatnonzero(beyond)[0])
            ax.plot([xs[j]], [top], "^", color=color, mfc="white" if sat[j] else color,
                    markersize=8, clip_on=False, zorder=4)
            used.add("beyond")
        z = [v for v in d["zero_load_latency"] if v is not None]
        if z:
            ax.axhline(float(np.mean(z)), color=color, linestyle="--", linewidth=0.9,
                       alpha=0.8)
            used.add("zero")
        acc = [a for a in d["accepted_rate"] if a is not None]
        if sat.any() and acc and _is_load(x):
            ax.axvline(max(acc), color=color, linestyle=":", linewidth=1.2)
            used.add("satline")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    if not logy:
        ax.set_ylim(bottom=0)
    if top is not None:
        ax.set_ylim(top=top)
    ax.set_xlim(left=0)
    _apply_axes(ax, xlim, ylim, logy)
    grey = "#444444"
    style = [("ok", Line2D([], [], marker="o", color=grey, linestyle="none"), "measured"),
             ("ci", Line2D([], [], marker="|", color=grey, linestyle="none", markersize=10),
              "95% CI over seeds"),
             ("sat", Line2D([], [], marker="o", mfc="white", color=grey, linestyle="none"),
              "saturated"),
             ("beyond", Line2D([], [], marker="^", mfc="white", color=grey, linestyle="none"),
              "beyond the axis from here on"),
             ("zero", Line2D([], [], linestyle="--", color=grey), "zero-load latency"),
             ("satline", Line2D([], [], linestyle=":", color=grey),
              "saturation throughput")]
    handles, labels = ax.get_legend_handles_labels()
    for tag, h, text in style:
        if tag in used:
            handles.append(h)
            labels.append(text)
    ax.legend(handles, labels, fontsize=8, frameon=False, loc="upper left")
    _finish(fig, ax, path, _title(title, rows))
    plt.close(fig)
    return data


def _title(title, rows):
    """The title given, or what the points have in common: the system and the workload."""
    if title is not None:
        return title
    values = {}
    for r in rows:
        for k, v in (r.get("params") or {}).items():
            values.setdefault(k, set()).add(_hashable(v))
    return _run_description(_common_config(rows), {k for k, v in values.items() if len(v) > 1})


def throughput(rows, path, x="offered_rate", series=None, y="accepted_rate", title=None,
               xlim=None, ylim=None, logy=False):
    """Accepted against offered throughput, averaged over seeds with 95% confidence
    intervals, with the accepted = offered line; saturated points hollow."""
    plt = _figure()
    data = points(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top = 0.0
    any_sat = False
    for i, (key, d) in enumerate(_ordered(data)):
        color = f"C{i}"
        xs, ys, ci, sat = map(np.asarray, (d["x"], d["y"], d["ci"], d["saturated"]))
        ax.errorbar(xs, ys, yerr=np.where(ci > 0, ci, np.nan), fmt="-", color=color,
                    elinewidth=1, capsize=2.5, label=_legend_name(key, d))
        ax.plot(xs[~sat], ys[~sat], "o", color=color)
        if sat.any():
            ax.plot(xs[sat], ys[sat], "o", color=color, mfc="white")
            any_sat = True
        top = max(top, float(xs.max()))
    ax.plot([0, top], [0, top], "--", color="gray", linewidth=0.8, label="accepted = offered")
    if any_sat:
        ax.plot([], [], "o", color="#444444", mfc="white", linestyle="none", label="saturated")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    _apply_axes(ax, xlim, ylim, logy)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    _finish(fig, ax, path, _title(title, rows))
    plt.close(fig)
    return data


def _bytes_text(v, _pos=None):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= size:
            return f"{v / size:g} {unit}"
    return f"{v:g} B"


def collective(rows, path, x="workload.bytes", y="busbw_gbps", series="workload.algorithm",
               title=None, xlim=None, ylim=None, logy=False):
    """Collective time or bandwidth against message size per algorithm: sizes on a log axis
    labelled in KiB/MiB/GiB; a bandwidth (`*_gbps`) on a linear axis from zero, anything else
    (a time) on a log axis."""
    plt = _figure()
    from matplotlib.ticker import FuncFormatter, LogLocator
    data = points(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(7.6, 4.4))      # (the legend sits to the right)
    for i, (key, d) in enumerate(_ordered(data)):
        ax.errorbar(d["x"], d["y"], yerr=np.where(np.asarray(d["ci"]) > 0, d["ci"], np.nan),
                    fmt="o-", color=f"C{i}", capsize=2.5, label=_legend_name(key, d))
    if x == "workload.bytes":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(LogLocator(base=4))
        ax.xaxis.set_major_formatter(FuncFormatter(_bytes_text))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, p: ""))
    if y.endswith("_gbps") and not logy:
        ax.set_ylim(bottom=0, top=1.08 * max((max(d["y"]) for d in data.values() if d["y"]),
                                             default=1))
    else:
        ax.set_yscale("log")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    _apply_axes(ax, xlim, ylim, logy)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _finish(fig, ax, path, _title(title, rows))
    plt.close(fig)
    return data


def speedup_bars(rows, path, group, series, metric, baseline, title=None, ylim=None,
                 logy=False):
    """Grouped bars: metric(baseline series value) / metric(series value) per group, i.e.
    speed-up over the baseline (> 1 is faster for a time-like metric); values over seeds are
    averaged first."""
    check_speedup(rows, group, series, metric, baseline)
    baseline = _hashable(baseline)
    plt = _figure()
    tidy_rows = _tidy_with_config(rows)
    cells = {}
    for t in tidy_rows:
        if t["status"] != "failed" and _get(t, metric) is not None:
            cells.setdefault((_hashable(_get(t, group)), _hashable(_get(t, series))),
                             []).append(_get(t, metric))
    table = {k: float(np.mean(v)) for k, v in cells.items()}
    groups = sorted({g for g, _ in table}, key=order_key)
    kinds = sorted({s for _, s in table}, key=order_key)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    drawn = [s for s in kinds if s != baseline]       # the baseline is the line at 1
    width = 0.8 / max(len(drawn), 1)
    data = {}
    for s in kinds:
        data[s] = [table[(g, baseline)] / table[(g, s)]
                   if (g, s) in table and (g, baseline) in table and table[(g, s)] else np.nan
                   for g in groups]
    for i, s in enumerate(drawn):
        bars = ax.bar(np.arange(len(groups)) + i * width, data[s], width, color=f"C{i}",
                      label=f"{series.split('.')[-1]} = {s}")
        if len(groups) * len(drawn) <= 24:
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.axhline(1.0, color="gray", linewidth=0.8,
               label=f"{series.split('.')[-1]} = {baseline} (baseline)")
    ax.set_xticks(np.arange(len(groups)) + width * (len(drawn) - 1) / 2)
    ax.set_xticklabels([_bytes_text(g) if group == "workload.bytes" else str(g)
                        for g in groups])
    ax.set_xlabel(_label(group))
    ax.set_ylabel(f"speed-up over {series.split('.')[-1]} = {baseline}\n"
                  f"({metric} of the baseline / {metric})")
    _apply_axes(ax, None, ylim, logy)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _finish(fig, ax, path, _title(title, rows))
    plt.close(fig)
    return groups, data


BREAKDOWN = (("compute_cycles", "compute", "#4c72b0"),
             ("exposed_comm_cycles", "exposed communication", "#dd8452"),
             ("other_cycles", "other (idle)", "#bbbbbb"))


def breakdown(rows, path, x, series=None, title=None, ylim=None):
    """Stacked bars of training iterations: the busiest NPU's compute, the communication it
    waited for, and the rest of the iteration, in ms, one bar per `x` value (and per `series`
    value beside it); values over seeds averaged. Returns {(x value, series value):
    (compute, exposed, other) ms}."""
    plt = _figure()
    tidy_rows = _tidy_with_config(rows)
    _require(tidy_rows, x=x, series=series, y="iteration_cycles")
    cells = {}
    for t in tidy_rows:
        if t["status"] == "failed" or not t.get("iteration_cycles"):
            continue
        ms = t["iteration_seconds"] * 1e3 / t["iteration_cycles"]
        key = (_hashable(_get(t, x)), _hashable(_get(t, series)) if series else None)
        cells.setdefault(key, []).append([(t.get(k) or 0) * ms for k, _, _ in BREAKDOWN])
    table = {k: tuple(float(v) for v in np.mean(np.array(c), axis=0)) for k, c in cells.items()}
    xs = sorted({a for a, _ in table}, key=order_key)
    ss = sorted({b for _, b in table}, key=order_key) if series else [None]
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
    ax.set_xlabel(_label(x) + (f" / {_label(series)}" if series else ""))
    ax.set_ylabel("iteration (ms)")
    _apply_axes(ax, None, ylim, False)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _finish(fig, ax, path, _title(title, rows))
    plt.close(fig)
    return table


# ------------------------------------------------------------------ one run

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


def draw_topology(network, cfg, path, title=None):
    """Draw the system: link widths proportional to bandwidth (per direction, parallel links
    summed), node kinds by colour and marker, a key of the link bandwidths. Returns the path
    written."""
    from matplotlib.lines import Line2D
    plt = _figure()
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
    _save(fig, path)
    plt.close(fig)
    return path


def link_utilisation(network, cfg, result, path, title=None):
    """A run's per-link utilisation drawn on the topology: each direction of a link is a line
    on its own side (to the right of its direction of travel), coloured by the fraction of
    its bandwidth it used (the highest of its parallel lanes); nodes labelled."""
    plt = _figure()
    import matplotlib as mpl
    topo = network.topo
    index = {n: i for i, n in enumerate(topo.node_names)}
    util = {}
    for link in result["links"]:
        k = (index[link["src"]], index[link["dst"]])
        util[k] = max(util.get(k, 0.0), link["utilization"])
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
    what = _run_description({**cfgd, "_system": cfgd.get("_system") or topo.name})
    rate = (cfgd.get("traffic") or {}).get("injection_rate")
    if rate is not None and (cfgd.get("workload") or {}).get("kind", "synthetic") == "synthetic":
        what += f" at {rate:g} flits/node/cycle"
    ax.set_title(f"{what}: link utilisation" if title is None else title, fontsize=10)
    _save(fig, path)
    plt.close(fig)
    return util


KIND_NAMES = {"compute": "compute", "send": "send", "delay": "delay",
              "memory": "HBM/DRAM traffic", "engine": "offload engine",
              "mem_write": "memory-node write", "mem_read": "memory-node read",
              "reduce_npu": "reduction on the NPU", "reduce_offload": "reduction offloaded",
              "acquire": "gate taken", "release": "gate freed",
              "take_units": "compute units taken", "free_units": "compute units freed"}


def _lanes(spans):
    """Greedy interval partitioning: a lane index per (start, duration), so that ops that
    overlap in time on one resource sit side by side instead of on top of each other."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    ends, lane = [], [0] * len(spans)
    for i in order:
        s, d = spans[i]
        for j, e in enumerate(ends):
            if e <= s:
                lane[i], ends[j] = j, s + d
                break
        else:
            lane[i] = len(ends)
            ends.append(s + d)
    return lane, max(len(ends), 1)


def _time_unit(end_us):
    if end_us >= 1e4:
        return "ms", 1e-3
    if end_us >= 1:
        return "µs", 1.0
    return "ns", 1e3


MAX_TIMELINE_OPS = 50000   # ops a timeline draws at most (each is a bar)


def _window(spans, xlim):
    """The complete events a timeline draws: those that overlap xlim (in the axis's unit, as
    timeline chooses it from the whole trace) if given; more than MAX_TIMELINE_OPS are
    refused, before drawing."""
    if xlim is not None:
        _, scale = _time_unit(max((e["ts"] + e["dur"] for e in spans), default=1.0))
        lo, hi = xlim[0] / scale, xlim[1] / scale
        spans = [e for e in spans if e["ts"] <= hi and e["ts"] + e["dur"] >= lo]
    if len(spans) > MAX_TIMELINE_OPS:
        raise ConfigError(f"the trace has {len(spans):,} ops"
                          f"{' in the window --xlim' if xlim is not None else ''}; a timeline "
                          f"draws at most {MAX_TIMELINE_OPS:,} (--xlim LO HI draws those in a "
                          f"window of time)")
    return spans


def check_timeline(trace, xlim=None):
    """Refuse, before drawing, a timeline of more ops than it can draw."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    _window([e for e in events if e.get("ph") == "X"], xlim)


def timeline(trace, path, title=None, xlim=None):
    """A Gantt chart from a Chrome/Perfetto trace (events with ph = "X": pid = node, tid =
    resource, ts and dur in microseconds): a row per node and resource, ops that overlap on
    one resource side by side in sub-rows, time in ns, µs or ms, colours by op kind with the
    key outside the data. Returns {(pid, tid): [(ts, dur), ...]} in the trace's units."""
    plt = _figure()
    from matplotlib.patches import Patch
    if isinstance(trace, dict) and "traceEvents" not in trace:
        raise ConfigError("not a trace: no traceEvents (pysim run CONFIG --trace t.json "
                          "writes one)")
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    other = trace.get("otherData", {}) if isinstance(trace, dict) else {}
    every = [e for e in events if e.get("ph") == "X"]
    spans = _window(every, xlim)
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[(e.get("pid"), e.get("tid") if e["name"] == "thread_name" else None)] = \
                e["args"]["name"]
    tracks = sorted({(e["pid"], e.get("tid", 0)) for e in spans})
    by_track = {t: [] for t in tracks}
    for e in spans:                       # (one pass: a track per span searched every span)
        by_track[(e["pid"], e.get("tid", 0))].append(e)
    end = max((e["ts"] + e["dur"] for e in every), default=1.0)
    unit, scale = _time_unit(end)
    cats = sorted({e.get("cat", e.get("name", "")) for e in spans})
    color = {c: f"C{i % 10}" for i, c in enumerate(cats)}
    rows_h = []
    for t in tracks:
        lane, n = _lanes([(e["ts"], e["dur"]) for e in by_track[t]])
        rows_h.append((t, lane, n))
    height = sum(0.32 + 0.12 * (n - 1) for _, _, n in rows_h)
    fig, ax = plt.subplots(figsize=(8.5, min(1.4 + height, 16)))
    y = 0.0
    ticks, labels = [], []
    for t, lane, n in rows_h:
        h = 0.32 + 0.12 * (n - 1)
        sub = h / n
        for e, k in zip(by_track[t], lane):
            c = e.get("cat", e.get("name", ""))
            ax.barh(y + (k + 0.5) * sub, e["dur"] * scale, left=e["ts"] * scale,
                    height=sub * 0.85, color=color[c], edgecolor="none")
        ticks.append(y + h / 2)
        labels.append(f"{names.get((t[0], None), t[0])} {names.get(t, t[1])}")
        y += h + 0.08
        ax.axhline(y - 0.04, color="#dddddd", linewidth=0.5)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7 if len(tracks) <= 40 else 5)
    ax.set_ylim(y, 0)
    ax.set_xlim(0, end * scale * 1.01)
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(f"time ({unit})")
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.legend(handles=[Patch(color=color[c], label=KIND_NAMES.get(c, c)) for c in cats],
              fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    system = other.get("system")
    default = f"{system}: ops per node and unit" if system else "ops per node and unit"
    t = default if title is None else title
    if t:
        ax.set_title(t, fontsize=10)
    _save(fig, path)
    plt.close(fig)
    return {t: [(e["ts"], e["dur"]) for e in by_track[t]] for t in tracks}


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
    _save(fig, path)
    plt.close(fig)
    return data


def memory(result, path, title=None, devices=None, xlim=None):
    """Occupancy over time of every device that held memory in a run (a result with
    `memory`: pysim run CONFIG --json r.json): a step line per device in GB, its capacity
    dashed in the same colour when it is within reach; NPUs in one panel, memory nodes and
    hosts in another; time in ns, µs or ms (xlim in that unit). Returns {device: peak
    bytes}."""
    mem = result.get("memory") if isinstance(result, dict) else None
    if not mem or not mem.get("timeline"):
        raise ValueError("the result has no memory occupancy (run a training iteration or "
                         "an op graph that holds memory, and write it with --json)")
    plt = _figure()
    tl = mem["timeline"]
    info = mem.get("devices", {})
    names = [d for d in (devices or tl) if d in tl]
    if not names:
        raise ValueError(f"none of the devices {devices} held memory; those that did: "
                         f"{', '.join(tl)}")
    groups = [[d for d in names if info.get(d, {}).get("kind") == "npu"],
              [d for d in names if info.get(d, {}).get("kind") != "npu"]]
    groups = [g for g in groups if g]
    clock = ((result.get("config") or {}).get("network") or {}).get("clock_ghz") or 1.0
    end = max((pts[-1][0] for pts in tl.values() if pts), default=1)
    end = max(end, result.get("makespan_cycles") or 0)
    unit, per_us = _time_unit(end / clock / 1e3)
    scale = per_us / clock / 1e3                 # cycles -> the unit
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, 2.8 * len(groups) + 0.6),
                             squeeze=False, sharex=True)
    for ax, group in zip(axes[:, 0], groups):
        top = 0.0
        for i, d in enumerate(group[:16]):
            pts = tl[d]
            t = [p[0] * scale for p in pts] + [end * scale]
            v = [p[1] / 1e9 for p in pts] + [pts[-1][1] / 1e9 if pts else 0]
            top = max(top, max(v))
            ax.step(t, v, where="post", color=f"C{i % 10}", linewidth=1.2, label=d)
            cap = info.get(d, {}).get("capacity_bytes")
            if cap and cap / 1e9 <= 2 * max(top, 1e-9):
                ax.axhline(cap / 1e9, color=f"C{i % 10}", linestyle="--", linewidth=0.8)
        kind = "NPU HBM" if info.get(group[0], {}).get("kind") == "npu" else \
            "memory nodes, hosts"
        ax.set_ylabel(f"{kind} held (GB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if len(group) > 16:
            ax.text(0.99, 0.02, f"(the first 16 of {len(group)})", transform=ax.transAxes,
                    ha="right", fontsize=7)
        ax.legend(fontsize=7, frameon=False, ncol=min(4, len(group)),
                  loc="upper left", bbox_to_anchor=(1.0, 1.0))
        _apply_axes(ax, xlim, None, False)
    axes[-1, 0].set_xlabel(f"time ({unit})")
    system = (result.get("config") or {}).get("_system")
    policy = mem.get("policy")
    default = ((f"{system}: " if system else "") + "memory held" +
               (f" (policy {policy})" if policy else "") + "; dashed: capacity")
    t = default if title is None else title
    if t:
        axes[0, 0].set_title(t, fontsize=10)
    _save(fig, path)
    plt.close(fig)
    return {d: max((p[1] for p in tl[d]), default=0) for d in names}
