"""Memory held by an op graph: what each device (an NPU's HBM, a memory node, a host's DRAM)
can hold, the holds checked before a run, and the occupancy of every device over the run
(its peak, when and by what), computed from the ops' times in numpy."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pysim.errors import ConfigError, GraphError
from pysim.models.presets import npu_spec
from pysim.workload.base import last_of


@last_of
def capacities(topo, cfg):
    """Per NPU, memory node and host: its memory in bytes -- an NPU's preset's HBM or
    [topology.npu] hbm_gb (default 32), [topology.mem] capacity_gb (128), [topology.host]
    dram_gb (256), or the node's own (decimal GB)."""
    out = {}
    t = cfg.topology if cfg is not None else None
    table = {"npu": ("hbm_gb", (t.npu if t else None) or {}, "hbm_gb", 32.0),
             "mem": ("capacity_gb", (t.mem if t else None) or {}, "capacity_gb", 128.0),
             "host": ("dram_gb", (t.host if t else None) or {}, "dram_gb", 256.0)}
    hbm = [None] * topo.n_nodes           # (a preset's HBM, unless hbm_gb says otherwise,
    for idx in topo.node_groups("npu"):   # read once per group of NPUs)
        v = npu_spec(cfg, topo, idx[0]).hbm_capacity_bytes
        for i in idx:
            hbm[i] = v
    for i, k in enumerate(topo.node_kinds):
        if k == "npu":
            out[i] = _capacity(hbm[i], topo, i, "hbm_gb")
        elif k in table:
            own_key, d, key, default = table[k]
            own = topo.node_mem[i] if topo.node_mem else {}
            out[i] = _capacity(own.get(own_key, d.get(key, default)) * 1e9, topo, i, own_key)
    return out


MAX_CAPACITY_BYTES = 1 << 62     # a device's memory (the engine counts bytes in int64)


def _capacity(nbytes, topo, i, key):
    if not nbytes <= MAX_CAPACITY_BYTES:
        kind = topo.node_kinds[i]
        given = f"{nbytes / 1e9:g} GB" if math.isfinite(nbytes) else "more than any float"
        raise ConfigError(f"{topo.node_names[i]}: {key} ([topology.{kind}] or the node's "
                          f"own) is {given}: expected at most "
                          f"{MAX_CAPACITY_BYTES / 1e9:,.0f} GB")
    return int(round(nbytes))


def _hold_devices(g, topo, cols=None):
    """Per hold of g, its device's node id (an error naming the first hold whose device is
    no NPU, memory node or host). Each distinct name looked up once."""
    cols = g.hold_arrays() if cols is None else cols
    index = {name: i for i, name in enumerate(topo.node_names)}
    kinds = topo.node_kinds
    table = []
    for x in g.node_names:
        n = index.get(x, -1) if isinstance(x, str) else -1
        table.append(n if n >= 0 and kinds[n] in ("npu", "mem", "host") else -1)
    dev = np.array(table + [-1], np.int64)[cols["dev"]]      # (id -1, none: the last)
    bad = np.flatnonzero(dev < 0)
    if len(bad):
        h = int(bad[0])
        device, what = g.holds[h][0], cols["what"][h]
        n = index.get(device) if isinstance(device, str) else None
        why = "no node of that name" if n is None else f"a {kinds[n]} node"
        raise GraphError(f"{what or f'hold {h}'}: memory held at {device!r}, {why}; "
                         f"expected an NPU, a memory node or a host")
    return dev


def _caps(topo, cfg):
    """capacities() as an array by node id (0 where a node holds no memory)."""
    cap = capacities(topo, cfg)
    out = np.zeros(len(topo.node_names), np.int64)
    for i, c in cap.items():
        out[i] = c
    return cap, out


def check_holds(g, topo, cfg):
    """Before the run: the holds never freed must fit on their device together (they are
    all held at the end)."""
    if not g.holds:
        return
    cols = g.hold_arrays()
    dev = _hold_devices(g, topo, cols)
    cap, capv = _caps(topo, cfg)
    nb = cols["bytes"]
    kept = np.flatnonzero((cols["end"] < 0) & (nb != 0))
    if not len(kept):
        return
    # per device, the running total of its holds never freed, in hold order
    d = dev[kept]
    by = np.argsort(d, kind="stable")
    run = np.cumsum(nb[kept][by])
    first = np.concatenate([[True], d[by][1:] != d[by][:-1]])
    base = np.maximum.accumulate(np.where(first, np.arange(len(by)), 0))
    run = run - np.concatenate([[0], run])[base]
    over = by[run > capv[d[by]]]
    if not len(over):
        return
    h = int(kept[over.min()])
    device, b, _, _, what = g.holds[h]
    label = what or f"hold {h}"
    total = int(nb[(dev == dev[h]) & (cols["end"] < 0)].sum())
    raise GraphError(f"{label}: holding {b} bytes at {device} passes its capacity "
                     f"of {cap[dev[h]]} bytes ({total} held there and never "
                     f"freed)")


def check_each_fits(g, topo, cfg):
    """Before the run: a hold larger than its device's capacity fits at no time, whatever the
    schedule (refused now, not after simulating)."""
    if not g.holds:
        return
    cols = g.hold_arrays()
    dev = _hold_devices(g, topo, cols)
    cap, capv = _caps(topo, cfg)
    bad = np.flatnonzero(cols["bytes"] > capv[dev])
    if len(bad):
        h = int(bad[0])
        device, b, _, _, what = g.holds[h]
        raise GraphError(f"{device}: {what or f'hold {h}'} alone holds {b:,} bytes, past "
                         f"its capacity of {cap[dev[h]]:,} bytes (no schedule fits it)")


@dataclass
class MemoryUsage:
    """Occupancy of every device that holds memory, from the holds and the ops' times."""
    peak_bytes: dict            # device name -> the most held at once
    peak_cycle: dict            # device name -> when the peak was first reached
    capacity_bytes: dict        # device name -> its capacity
    end_bytes: dict             # device name -> still held when the last op finished
    timeline: dict              # device name -> [[cycle, bytes held from then on], ...]
    live_at_peak: dict          # device name -> [(what, bytes), ...] largest first


def occupancy(dev, nb, t_take, t_free):
    """{device: (cycles, bytes held from each of those cycles on)} for holds of nb bytes on
    devices dev over [t_take, t_free): one point per cycle where the level changes, releases
    at a cycle before takes (vectorised: sort the events, cumulative sums per device)."""
    dev = np.asarray(dev, np.int64)
    nb = np.asarray(nb, np.int64)
    ev_dev = np.concatenate([dev, dev])
    ev_t = np.concatenate([np.asarray(t_take, np.int64), np.asarray(t_free, np.int64)])
    ev_d = np.concatenate([nb, -nb])
    order = np.lexsort((ev_d > 0, ev_t, ev_dev))
    ev_dev, ev_t, ev_d = ev_dev[order], ev_t[order], ev_d[order]
    level = np.cumsum(ev_d)
    bounds = np.flatnonzero(np.diff(ev_dev)) + 1
    starts = np.concatenate([[0], bounds]).astype(np.int64)
    ends = np.concatenate([bounds, [len(ev_d)]]).astype(np.int64)
    offset = np.concatenate([[0], level[bounds - 1]])
    level = level - np.repeat(offset, ends - starts)
    out = {}
    for lo, hi in zip(starts, ends):
        lv, tt = level[lo:hi], ev_t[lo:hi]
        last = np.flatnonzero(np.concatenate([tt[1:] != tt[:-1], [True]]))
        out[int(ev_dev[lo])] = (tt[last], lv[last])
    return out


def memory_usage(g, start, finish, topo, cfg, check=True) -> MemoryUsage:
    """Occupancy per device from the holds and the ops' start/finish cycles (computed once,
    after the run, in numpy). A hold is taken at its op's edge and released at its free's
    (never: after the last op); at the same cycle releases come before takes. With check, a
    device whose peak passes its capacity is an error naming it, the bytes at the peak, the
    capacity, the cycle and the largest holds live then."""
    names = topo.node_names
    empty = MemoryUsage({}, {}, {}, {}, {}, {})
    if not g.holds:
        return empty
    cols = g.hold_arrays()
    dev = _hold_devices(g, topo, cols)
    cap = capacities(topo, cfg)
    start = np.asarray(start, np.int64)
    finish = np.asarray(finish, np.int64)
    end_time = int(finish.max()) + 1
    nb, a_op, a_fin = cols["bytes"], cols["at"], cols["at_finish"]
    freed = cols["end"] >= 0
    f_op, f_fin = np.maximum(cols["end"], 0), cols["end_finish"]
    what = cols["what"]
    t_take = np.where(a_fin, finish[a_op], start[a_op])
    t_free = np.where(f_fin, finish[f_op], start[f_op])
    t_free = np.where(freed, np.maximum(t_free, t_take), end_time)
    u = MemoryUsage({}, {}, {}, {}, {}, {})
    by_dev = np.argsort(dev, kind="stable")          # each device's holds, once
    bounds = np.searchsorted(dev[by_dev], np.arange(len(names) + 1))
    for d, (pts_t, pts_l) in occupancy(dev, nb, t_take, t_free).items():
        name = names[d]
        k = int(np.argmax(pts_l))
        peak = int(max(pts_l[k], 0))
        u.peak_bytes[name] = peak
        u.peak_cycle[name] = int(pts_t[k])
        u.capacity_bytes[name] = cap[d]
        u.end_bytes[name] = int(pts_l[pts_t < end_time][-1]) if (pts_t < end_time).any() else 0
        u.timeline[name] = np.stack([pts_t, pts_l], 1)[pts_t < end_time].tolist()
        at = int(pts_t[k])
        mine = by_dev[bounds[d]:bounds[d + 1]]
        live = mine[(t_take[mine] <= at) & (t_free[mine] > at) & (nb[mine] > 0)]
        live = live[np.argsort(-nb[live], kind="stable")][:5]
        u.live_at_peak[name] = [(what[h] or f"hold {h}", int(nb[h])) for h in live]
        if check and peak > cap[d]:
            held = ", ".join(f"{w} {b:,}" for w, b in u.live_at_peak[name])
            raise GraphError(f"{name}: {peak:,} bytes held at once (cycle {at:,}), past its "
                             f"capacity of {cap[d]:,} bytes (largest held then: {held})")
    return u


def memory_report(g, usage: MemoryUsage, topo, cfg):
    """The result's `memory`: per device that holds memory, its peak against its capacity
    and the bytes moved out to (offloaded) and back from (prefetched) remote memory, and per
    device its occupancy timeline."""
    if not usage.peak_bytes:
        return {}
    kinds = dict(zip(topo.node_names, topo.node_kinds))
    cap = {topo.node_names[i]: c for i, c in capacities(topo, cfg).items()}
    devices = {}
    for name in topo.node_names:          # node order
        if name in usage.peak_bytes:
            devices[name] = dict(kind=kinds[name], peak_bytes=usage.peak_bytes[name],
                                 capacity_bytes=usage.capacity_bytes[name],
                                 peak_cycle=usage.peak_cycle[name],
                                 end_bytes=usage.end_bytes[name],
                                 offloaded_bytes=0, prefetched_bytes=0)
    for i in g.ops_of("mem_write", "mem_read").tolist():
        k = g.kind[i]
        if k in ("mem_write", "mem_read"):
            key = "offloaded_bytes" if k == "mem_write" else "prefetched_bytes"
            for name in (g.node[i], g.dst[i]):
                if name not in devices:
                    devices[name] = dict(kind=kinds[name], peak_bytes=0,
                                         capacity_bytes=cap[name], peak_cycle=0, end_bytes=0,
                                         offloaded_bytes=0, prefetched_bytes=0)
                devices[name][key] += g.size[i]
    return dict(devices=devices, timeline=usage.timeline)


def memory_rows(memory):
    """Summary lines: each device's peak against its capacity, and the bytes moved."""
    if not memory:
        return []
    rows = []
    for name, v in list(memory["devices"].items())[:12]:
        line = (f"peak {v['peak_bytes'] / 1e9:.3f} GB of {v['capacity_bytes'] / 1e9:.3g} GB "
                f"({100 * v['peak_bytes'] / max(v['capacity_bytes'], 1):.0f}%)"
                if v["capacity_bytes"] else "")
        moved = [f"{v['offloaded_bytes'] / 1e9:.3f} GB out" if v["offloaded_bytes"] else "",
                 f"{v['prefetched_bytes'] / 1e9:.3f} GB back" if v["prefetched_bytes"] else ""]
        if v.get("recomputed_flops"):
            moved.append(f"{v['recomputed_flops'] / 1e9:.3g} GFLOP recomputed")
        rows.append((f"memory {name}", ", ".join(x for x in [line] + moved if x)))
    if len(memory["devices"]) > 12:
        rows.append(("memory ...", f"{len(memory['devices']) - 12} more devices in the JSON"))
    return rows
