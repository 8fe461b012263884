"""Figures of one run: the timeline of its ops, its devices' memory over time, and a job
stream's job times.
"""
from __future__ import annotations

import json

import numpy as np

from pysim.errors import ConfigError
from pysim.plot._common import apply_axes, check_figure, figure, label, save


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


def timeline(trace, path, title=None, xlim=None, force=False):
    """A Gantt chart from a Chrome/Perfetto trace (events with ph = "X": pid = node, tid =
    resource, ts and dur in microseconds): a row per node and resource, ops that overlap on
    one resource side by side in sub-rows, time in ns, µs or ms, colours by op kind with the
    key outside the data. Returns {(pid, tid): [(ts, dur), ...]} in the trace's units."""
    check_figure(path, force)
    plt = figure()
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
    save(fig, path, force)
    plt.close(fig)
    return {t: [(e["ts"], e["dur"]) for e in by_track[t]] for t in tracks}


def jobs_cdf(result, path, title=None, force=False):
    """A job stream's result (pysim jobs --json): left, the CDF of the jobs' execution times
    per policy (log scale); right, the CDF of each job's speedup over the reference policy
    (its time there / its time under the policy), with the 75th percentile marked."""
    check_figure(path, force)
    plt = figure()
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
    save(fig, path, force)
    plt.close(fig)
    return data


def memory(result, path, title=None, devices=None, xlim=None, force=False):
    """Occupancy over time of every device that held memory in a run (a result with
    `memory`: pysim run CONFIG --json r.json): a step line per device in GB, its capacity
    dashed in the same colour when it is within reach; NPUs in one panel, memory nodes and
    hosts in another; time in ns, µs or ms (xlim in that unit). Returns {device: peak
    bytes}."""
    check_figure(path, force)
    mem = result.get("memory") if isinstance(result, dict) else None
    if not mem or not mem.get("timeline"):
        raise ValueError("the result has no memory occupancy (run a training iteration or "
                         "an op graph that holds memory, and write it with --json)")
    plt = figure()
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
        apply_axes(ax, xlim, None, False)
    axes[-1, 0].set_xlabel(f"time ({unit})")
    system = (result.get("config") or {}).get("_system")
    policy = mem.get("policy")
    default = ((f"{system}: " if system else "") + "memory held" +
               (f" (policy {policy})" if policy else "") + "; dashed: capacity")
    t = default if title is None else title
    if t:
        axes[0, 0].set_title(t, fontsize=10)
    save(fig, path, force)
    plt.close(fig)
    return {d: max((p[1] for p in tl[d]), default=0) for d in names}
