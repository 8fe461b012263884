"""Figures of a sweep's rows: latency against load, throughput, collectives' bus bandwidth,
speed-up bars and time breakdowns.
"""
from __future__ import annotations

import numpy as np

from pysim.plot._common import (CLIP, apply_axes, bytes_text, check_breakdown, check_figure,
                                check_speedup, figure, finish, get, hashable, is_load, label,
                                legend_name, ordered, points, tidy_with_config, title_of)
from pysim.sweep import order_key


def latency_load(rows, path, x="traffic.injection_rate", series=None,
                 y="avg_packet_latency", title=None, xlim=None, ylim=None, logy=False,
                 force=False):
    """Latency against offered load, one line per series, averaged over seeds with 95%
    confidence intervals. Saturated points are hollow; the dashed line is the zero-load
    latency; a dotted vertical line marks each series' saturation throughput (the most it
    accepted); the y-axis ends at CLIP times the zero-load latency (or `ylim`), and points
    beyond it are drawn as triangles on the top edge. Returns the plotted data."""
    check_figure(path, force)
    plt = figure()
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
    for i, (key, d) in enumerate(ordered(data)):
        color = f"C{i}"
        xs, ys, ci, sat = map(np.asarray, (d["x"], d["y"], d["ci"], d["saturated"]))
        ax.plot(xs, ys, "-", color=color, label=legend_name(key, d), zorder=2)
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
        if sat.any() and acc and is_load(x):
            ax.axvline(max(acc), color=color, linestyle=":", linewidth=1.2)
            used.add("satline")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    if not logy:
        ax.set_ylim(bottom=0)
    if top is not None:
        ax.set_ylim(top=top)
    ax.set_xlim(left=0)
    apply_axes(ax, xlim, ylim, logy)
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
    finish(fig, ax, path, title_of(title, rows), force)
    plt.close(fig)
    return data


def throughput(rows, path, x="offered_rate", series=None, y="accepted_rate", title=None,
               xlim=None, ylim=None, logy=False, force=False):
    """Accepted against offered throughput, averaged over seeds with 95% confidence
    intervals, with the accepted = offered line; saturated points hollow."""
    check_figure(path, force)
    plt = figure()
    data = points(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top = 0.0
    any_sat = False
    for i, (key, d) in enumerate(ordered(data)):
        color = f"C{i}"
        xs, ys, ci, sat = map(np.asarray, (d["x"], d["y"], d["ci"], d["saturated"]))
        ax.errorbar(xs, ys, yerr=np.where(ci > 0, ci, np.nan), fmt="-", color=color,
                    elinewidth=1, capsize=2.5, label=legend_name(key, d))
        ax.plot(xs[~sat], ys[~sat], "o", color=color)
        if sat.any():
            ax.plot(xs[sat], ys[sat], "o", color=color, mfc="white")
            any_sat = True
        top = max(top, float(xs.max()))
    ax.plot([0, top], [0, top], "--", color="gray", linewidth=0.8, label="accepted = offered")
    if any_sat:
        ax.plot([], [], "o", color="#444444", mfc="white", linestyle="none", label="saturated")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    apply_axes(ax, xlim, ylim, logy)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    finish(fig, ax, path, title_of(title, rows), force)
    plt.close(fig)
    return data


def collective(rows, path, x="workload.bytes", y="busbw_gbps", series="workload.algorithm",
               title=None, xlim=None, ylim=None, logy=False, force=False):
    """Collective time or bandwidth against message size per algorithm: sizes on a log axis
    labelled in KiB/MiB/GiB; a bandwidth (`*_gbps`) on a linear axis from zero, anything else
    (a time) on a log axis."""
    check_figure(path, force)
    plt = figure()
    from matplotlib.ticker import FuncFormatter, LogLocator
    data = points(rows, x, y, series)
    fig, ax = plt.subplots(figsize=(7.6, 4.4))      # (the legend sits to the right)
    for i, (key, d) in enumerate(ordered(data)):
        ax.errorbar(d["x"], d["y"], yerr=np.where(np.asarray(d["ci"]) > 0, d["ci"], np.nan),
                    fmt="o-", color=f"C{i}", capsize=2.5, label=legend_name(key, d))
    if x == "workload.bytes":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(LogLocator(base=4))
        ax.xaxis.set_major_formatter(FuncFormatter(bytes_text))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, p: ""))
    if y.endswith("_gbps") and not logy:
        ax.set_ylim(bottom=0, top=1.08 * max((max(d["y"]) for d in data.values() if d["y"]),
                                             default=1))
    else:
        ax.set_yscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    apply_axes(ax, xlim, ylim, logy)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    finish(fig, ax, path, title_of(title, rows), force)
    plt.close(fig)
    return data


def speedup_bars(rows, path, group, series, metric, baseline, title=None, ylim=None,
                 logy=False, force=False):
    """Grouped bars: metric(baseline series value) / metric(series value) per group, i.e.
    speed-up over the baseline (> 1 is faster for a time-like metric); values over seeds are
    averaged first."""
    check_figure(path, force)
    check_speedup(rows, group, series, metric, baseline)
    baseline = hashable(baseline)
    plt = figure()
    tidy_rows = tidy_with_config(rows)
    cells = {}
    for t in tidy_rows:
        if t["status"] != "failed" and get(t, metric) is not None:
            cells.setdefault((hashable(get(t, group)), hashable(get(t, series))),
                             []).append(get(t, metric))
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
    ax.set_xticklabels([bytes_text(g) if group == "workload.bytes" else str(g)
                        for g in groups])
    ax.set_xlabel(label(group))
    ax.set_ylabel(f"speed-up over {series.split('.')[-1]} = {baseline}\n"
                  f"({metric} of the baseline / {metric})")
    apply_axes(ax, None, ylim, logy)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    finish(fig, ax, path, title_of(title, rows), force)
    plt.close(fig)
    return groups, data


BREAKDOWN = (("compute_cycles", "compute", "#4c72b0"),
             ("exposed_comm_cycles", "exposed communication", "#dd8452"),
             ("other_cycles", "other (idle)", "#bbbbbb"))


def breakdown(rows, path, x, series=None, title=None, ylim=None, force=False):
    """Stacked bars of training iterations: the busiest NPU's compute, the communication it
    waited for, and the rest of the iteration, in ms, one bar per `x` value (and per `series`
    value beside it); values over seeds averaged. Returns {(x value, series value):
    (compute, exposed, other) ms}."""
    check_figure(path, force)
    plt = figure()
    tidy_rows = check_breakdown(rows, x, series)
    cells = {}
    for t in tidy_rows:
        if t["status"] == "failed" or not t.get("iteration_cycles"):
            continue
        ms = t["iteration_seconds"] * 1e3 / t["iteration_cycles"]
        key = (hashable(get(t, x)), hashable(get(t, series)) if series else None)
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
    ax.set_xlabel(label(x) + (f" / {label(series)}" if series else ""))
    ax.set_ylabel("iteration (ms)")
    apply_axes(ax, None, ylim, False)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    finish(fig, ax, path, title_of(title, rows), force)
    plt.close(fig)
    return table
