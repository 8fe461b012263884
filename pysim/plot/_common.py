"""What the figures share: styles and axis labels, points averaged over seeds with confidence
intervals, the checks that refuse data a figure cannot draw, and saving (PNG, PDF or SVG by the
file's extension; matplotlib is loaded when a figure is first drawn).
"""
from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np

from pysim._io import OutputError, as_path, by_path, check_output, write_atomic
from pysim.errors import ConfigError, PysimWarning
from pysim.sweep import tidy


KIND_STYLE = {   # colour, marker, label
    "npu": ("#1f77b4", "s", "NPU"),
    "mem": ("#2ca02c", "o", "memory node"),
    "host": ("#d62728", "D", "host"),
    "switch": ("#7f7f7f", "h", "switch"),
}


SEED = "simulation.seed"


_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


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


def figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def check_figure(path, force=False):
    """Before anything is drawn: a figure's file is not overwritten unless `force`, and one
    that could not be written (no such folder) is refused (pysim._io.OutputError, naming
    it)."""
    path = as_path(path, "path")
    if not force and os.path.lexists(path) and not os.path.isdir(path):
        raise OutputError(f"{path} exists; pass force=True to overwrite it")
    check_output(path, force=True, what="figure")


def save(fig, path, force=False):
    """Write the figure whole or not at all (the format from the extension; png without
    one), never over an existing file unless `force`."""
    path = as_path(path, "path")
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    write_atomic(path, by_path(lambda tmp: fig.savefig(tmp, format=fmt, dpi=150,
                                                       bbox_inches="tight")), force=force)


def label(key):
    return LABELS.get(key, key)


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


def get(row, key):
    """A value of a tidy row: a swept key ('traffic.injection_rate'), a metric, or a key of
    the resolved config stored with the result."""
    if key in row:
        return row[key]
    cfg = row.get("_config") or {}
    s, _, k = key.partition(".")
    return cfg.get(s, {}).get(k)


def tidy_with_config(rows):
    out = tidy(rows)
    for t, r in zip(out, rows):
        t["_config"] = (r.get("result") or {}).get("config", {})
        t["_params"] = r.get("params") or {}
    return out


def require(tidy_rows, **roles):
    """Every key named for a role (x="traffic.injection_rate", ...) must have a value in some
    point that did not fail, else the figure would be empty or fail deep inside matplotlib."""
    ok = [t for t in tidy_rows if t["status"] != "failed"]
    if not ok:
        raise ConfigError("every point of the sweep failed: nothing to plot")
    for role, key in roles.items():
        if key is not None and all(get(t, key) is None for t in ok):
            names = sorted({k for t in ok for k in t if not k.startswith("_")})
            raise ConfigError(f"--{role} {key}: no point has it; the rows have "
                              f"{', '.join(names)}, and every configuration key "
                              f"(section.key)")


def hashable(v):
    """A series or group value as a dict key: a list (topology.dims) as a tuple, a table as
    its JSON text."""
    if isinstance(v, list):
        return tuple(hashable(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def numeric(tidy_rows, **roles):
    """Every key named for a role must have numbers (or nothing) where it has a value: a
    string metric (saturation_reason) on an axis is refused, naming the numeric ones."""
    ok = [t for t in tidy_rows if t["status"] != "failed"]
    for role, key in roles.items():
        bad = [v for v in (get(t, key) for t in ok) if v is not None and not number(v)]
        if bad:
            names = sorted({k for t in ok for k, v in t.items()
                            if not k.startswith("_") and number(v)})
            raise ConfigError(f"--{role} {key}: its values are not numbers (one is "
                              f"{short(bad[0])}); the numeric columns are {', '.join(names)}")


def check_rows(rows, x, y, series=None):
    """Refuse, before drawing, a figure whose axes would be empty or not numbers."""
    tidy_rows = tidy_with_config(rows)
    require(tidy_rows, x=x, y=y, series=series)
    numeric(tidy_rows, x=x, y=y)
    return tidy_rows


def check_breakdown(rows, x, series=None):
    """Refuse a breakdown whose bars would be empty: no point has `x` (or `series`), or none
    is a training run (no iteration_cycles)."""
    tidy_rows = tidy_with_config(rows)
    require(tidy_rows, x=x, series=series, y="iteration_cycles")
    numeric(tidy_rows, y="iteration_cycles")
    one_per_cell(tidy_rows, (x, series), "iteration_cycles")
    return tidy_rows


def one_per_cell(tidy_rows, keys, metric):
    """The points a bar averages (same values of `keys`) are one configuration over seeds
    (one_configuration)."""
    cells = {}
    for t in tidy_rows:
        if t["status"] != "failed" and get(t, metric) is not None:
            cells.setdefault(tuple(hashable(get(t, k)) if k else None for k in keys),
                             []).append(t)
    for cell, pts in cells.items():
        if len(pts) > 1:
            one_configuration(pts, ", ".join(f"{k} = {v}" for k, v in zip(keys, cell) if k))


def check_speedup(rows, group, series, metric, baseline):
    """Refuse a speed-up figure whose baseline no point has (its bars would all be empty),
    or whose metric is not a number."""
    tidy_rows = tidy_with_config(rows)
    require(tidy_rows, group=group, series=series, y=metric)
    numeric(tidy_rows, y=metric)
    values = {hashable(get(t, series)) for t in tidy_rows if t["status"] != "failed"}
    if hashable(baseline) not in values:
        shown = ", ".join(sorted(map(repr, values)))
        raise ConfigError(f"--baseline {baseline!r}: no point that did not fail has {series} "
                          f"= {baseline!r}; its values are {shown}")
    one_per_cell(tidy_rows, (group, series), metric)


def check_result(obj, source):
    """A run's --json result, as far as a link-utilisation figure reads it."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a run's --json result (a JSON object), got a "
                         f"{type(obj).__name__}")
    if not isinstance(obj.get("config"), dict):
        raise ValueError(f"'config' = {short(obj.get('config'))}: expected the resolved "
                         f"configuration (an object of sections)")
    links = obj.get("links")
    if not isinstance(links, list) or not all(
            isinstance(link, dict) and isinstance(link.get("src"), str) and
            isinstance(link.get("dst"), str) and number(utilisation_of(link))
            for link in links):
        raise ValueError(f"'links' = {short(links)}: expected a list of objects with src, "
                         f"dst (node names) and utilisation (a number)")
    return obj


def utilisation_of(link):
    """A link's utilisation in a result: `utilisation`, or `utilization` in results written by
    pysim 0.1.0 (see CHANGELOG.md)."""
    return link.get("utilisation", link.get("utilization"))


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
        raise ValueError(f"'traceEvents' = {short(events)}: expected a list of event objects")
    for e in events:
        if e.get("ph") == "X":
            if not (number(e.get("ts")) and number(e.get("dur")) and
                    number(e["ts"] + e["dur"]) and e["dur"] >= 0 and
                    isinstance(e.get("pid"), (int, str)) and
                    isinstance(e.get("tid", 0), (int, str))):
                raise ValueError(f"event {short(e)}: a complete event (ph 'X') needs ts and "
                                 f"dur (finite numbers, dur >= 0), pid and tid")
        elif e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            if not (isinstance(e.get("args"), dict) and isinstance(e["args"].get("name"), str)
                    and isinstance(e.get("pid"), (int, str)) and
                    isinstance(e.get("tid", 0), (int, str))):
                raise ValueError(f"event {short(e)}: a name event needs pid, tid and "
                                 f"args.name")
    return obj


def short(v, limit=80):
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."


def series_keys(tidy_rows, x, series, exclude=()):
    """The keys that tell series apart: `series`, then any other swept key whose value varies
    (except x and the seed, over which points are averaged)."""
    keys = [series] if series else []
    swept = sorted({k for t in tidy_rows for k in t["_params"]})
    for k in swept:
        if k in (x, SEED) or k in keys or k in exclude:
            continue
        if len({hashable(t["_params"].get(k)) for t in tidy_rows}) > 1:
            keys.append(k)
    return keys


def one_configuration(pts, where):
    """Points averaged as one are one configuration run over seeds: refuse points that
    differ in any other key of their resolved config (two sweeps in one database), naming
    it, rather than average them as seeds."""
    first = pts[0].get("_config") or {}
    for t in pts[1:]:
        cfg = t.get("_config") or {}
        for s in sorted(set(first) | set(cfg)):
            a, b = first.get(s), cfg.get(s)
            if s in ("_system", "_source") or a == b:
                continue
            if not (isinstance(a, dict) and isinstance(b, dict)):
                a, b, k = {s: a}, {s: b}, [s]
            else:
                k = [f"{s}.{n}" for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
            k = [n for n in k if n != SEED]
            if k:
                n = k[0].partition(".")[2] or k[0]
                raise ConfigError(f"{where}: points differ in {k[0]} ({short(a.get(n))} and "
                                  f"{short(b.get(n))}), not only in {SEED}, and would be "
                                  f"averaged as seeds of one run (two sweeps in one "
                                  f"database?); draw it as a series (--series {k[0]}) or "
                                  f"keep one configuration per database")


def one_series(ok, series, swept):
    """Warn when `series` has one value over the points (a key the sweep did not vary): the
    figure has one series, which the user asking for series by it did not expect."""
    values = {hashable(get(t, series)) for t in ok} if series else set()
    if len(values) == 1:
        others = ", ".join(sorted(swept)) or "none"
        text = (f"series {series} (--series): every point has {series} = {next(iter(values))!r} "
                f"(not swept), so the figure has one series; the keys swept: {others}")
        if text not in _WARNED:             # (once: pysim plot checks, then draws)
            _WARNED.add(text)
            warnings.warn(text, PysimWarning, stacklevel=2)


_WARNED = set()


def series_label(keys, values):
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
    keys = series_keys(ok, along, series)
    one_series(ok, series, swept)
    groups = {}
    for t in ok:
        sv = tuple(hashable(get(t, k)) for k in keys)
        groups.setdefault(sv, {}).setdefault(hashable(get(t, along)), []).append(t)
    out = {}
    for sv, by_x in groups.items():
        d = {"x": [], "y": [], "ci": [], "n": [], "saturated": [], "keys": keys,
             **{m: [] for m in extra}}
        for xv in sorted(by_x, key=lambda v: (v is None, v)):
            pts = [t for t in by_x[xv] if get(t, y) is not None and get(t, x) is not None]
            if not pts:
                continue
            one_configuration(pts, f"{along} = {xv}")
            m, h = mean_ci([get(t, y) for t in pts])
            d["x"].append(xv if along == x else float(np.mean([get(t, x) for t in pts])))
            d["y"].append(m)
            d["ci"].append(h)
            d["n"].append(len(pts))
            d["saturated"].append(any(bool(t.get("saturated")) for t in pts))
            for e in extra:
                vals = [get(t, e) for t in pts if get(t, e) is not None]
                d[e].append(float(np.mean(vals)) if vals else None)
        key = sv[0] if len(sv) == 1 and series else (sv if sv else None)
        out[key] = d
    return out


def ordered(data):
    return sorted(data.items(), key=lambda kv: str(kv[0]))


def legend_name(key, d):
    if key is None:
        return None
    values = key if isinstance(key, tuple) else (key,)
    return series_label(d["keys"], values)


def bytes_text(v, _pos=None):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= size:
            return f"{v / size:g} {unit}"
    return f"{v:g} B"


def run_description(cfg, swept=()):
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
            what.append(f"{bytes_text(w.get('bytes') or 0)} per participant")
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


def common_config(rows):
    for r in rows:
        cfg = (r.get("result") or {}).get("config")
        if cfg:
            return cfg
    return {}


def apply_axes(ax, xlim, ylim, logy):
    if logy:
        ax.set_yscale("log")
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)


def finish(fig, ax, path, title, force=False):
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    save(fig, path, force)


def is_load(key):
    return key in ("traffic.injection_rate", "offered_rate")


def title_of(title, rows):
    """The title given, or what the points have in common: the system and the workload."""
    if title is not None:
        return title
    values = {}
    for r in rows:
        for k, v in (r.get("params") or {}).items():
            values.setdefault(k, set()).add(hashable(v))
    return run_description(common_config(rows), {k for k, v in values.items() if len(v) > 1})
