"""Counters from csim -> a Result (latency percentiles, throughput, per-link load)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pysim._io import json_safe


class LinkTable(Sequence):
    """The per-link report of a run (pysim.workload.base.link_report) as a sequence of dicts
    -- src, dst (node names), lane, bandwidth_gbps, latency_cycles, flits, utilisation, and
    with the flit level's counts vc_flits -- made when asked for: the columns are arrays
    (`src` and `dst` node ids into `node_names`), not a dict per channel (a cluster of
    65,536 GPUs has 2.75 M channel lanes). `column(key)` reads one column as an array.

    With `runs` (rows per entry), every column holds one entry per run of rows alike but for
    their lane, which counts up from the entry's `lane`: the flow level's lanes of a link
    carry its bytes evenly, so its report is a run per link, its rows made when read."""

    KEYS = ("src", "dst", "lane", "bandwidth_gbps", "latency_cycles", "flits", "utilisation")

    def __init__(self, node_names, src, dst, lane, bandwidth_gbps, latency_cycles, flits,
                 utilisation, vc_flits=None, runs=None):
        self.node_names = node_names
        self.cols = dict(src=src, dst=dst, lane=lane, bandwidth_gbps=bandwidth_gbps,
                         latency_cycles=latency_cycles, flits=flits, utilisation=utilisation)
        self.vc_flits = vc_flits
        self.runs = None if runs is None else np.asarray(runs, np.int64)
        if self.runs is None:
            self.n = len(src)
        else:
            self.first = np.cumsum(self.runs) - self.runs      # (each run's first row)
            self.n = int(self.runs.sum())

    def __len__(self):
        return self.n

    def _expand(self, key, col):
        if self.runs is None or col is None:
            return col
        out = np.repeat(col, self.runs, axis=0)
        if key == "lane":                    # (the run's first lane, counting up)
            out += np.arange(self.n, dtype=out.dtype) - np.repeat(self.first, self.runs)
        return out

    def column(self, key):
        """One column over every row, an array (src and dst: node ids)."""
        return self._expand(key, self.cols[key] if key != "vc_flits" else self.vc_flits)

    def by_run(self):
        """(columns, rows, first): each column with an entry per run of alike rows (see the
        class; without runs, a run per row), the rows of each run and each run's first row:
        what reads the report by columns without making a row or an array per lane."""
        if self.runs is None:
            ones = np.ones(self.n, np.int64)
            return dict(self.cols), ones, np.arange(self.n, dtype=np.int64)
        return dict(self.cols), self.runs, self.first

    def _rows(self, lo, hi):
        names = self.node_names
        if self.runs is None:
            c, v = self.cols, self.vc_flits
            lane = c["lane"][lo:hi]
            at = slice(lo, hi)
        else:                                 # (the runs' entries of rows lo..hi)
            rows = np.arange(lo, hi, dtype=np.int64)
            at = np.searchsorted(self.first, rows, side="right") - 1
            c, v = self.cols, self.vc_flits
            lane = c["lane"][at] + (rows - self.first[at]).astype(c["lane"].dtype)
        cols = zip(c["src"][at].tolist(), c["dst"][at].tolist(),
                   lane.tolist(), c["bandwidth_gbps"][at].tolist(),
                   c["latency_cycles"][at].tolist(), c["flits"][at].tolist(),
                   c["utilisation"][at].tolist())
        if v is None:
            for s, d, k, b, L, x, u in cols:
                yield dict(src=names[s], dst=names[d], lane=k, bandwidth_gbps=b,
                           latency_cycles=L, flits=x, utilisation=u)
        else:
            for (s, d, k, b, L, x, u), vf in zip(cols, v[at].tolist()):
                yield dict(src=names[s], dst=names[d], lane=k, bandwidth_gbps=b,
                           latency_cycles=L, flits=x, utilisation=u, vc_flits=vf)

    def __getitem__(self, i):
        if isinstance(i, slice):
            lo, hi, step = i.indices(self.n)
            if step == 1:
                return list(self._rows(lo, max(lo, hi)))
            return [self[k] for k in range(lo, hi, step)]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("link index out of range")
        return next(self._rows(i, i + 1))

    def __iter__(self):
        step = 1 << 16                   # (a block of rows' columns as lists at a time)
        for lo in range(0, self.n, step):
            yield from self._rows(lo, min(lo + step, self.n))

    def __eq__(self, other):
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None

    def __repr__(self):
        return f"<LinkTable of {self.n:,} links>"


def percentile_from_hist(hist: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of values whose counts by value are `hist`: the smallest
    value v with at least q% of the samples <= v (nearest-rank)."""
    total = int(hist.sum())
    if total == 0:
        return float("nan")
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    return float(np.searchsorted(np.cumsum(hist), rank))


def link_column(links, key):
    """One numeric column of a per-link report (a LinkTable, or a list of its rows), an
    array."""
    if isinstance(links, LinkTable):
        return links.column(key)
    return np.array([l[key] for l in links])


@dataclass
class Result:
    """What one run measured. `to_dict()` is the JSON `pysim run --json` writes."""
    status: str                     # "ok" or "saturated"
    saturated: bool
    saturation_reason: str
    cycles: int                     # cycles simulated in all (warm-up, window, drain)
    warmup_cycles: int
    measure_cycles: int
    drain_cycles_used: int
    endpoints: int
    packets_measured: int
    packets_delivered: int
    avg_packet_latency: float       # cycles, creation to tail ejection, measured packets
    avg_network_latency: float      # cycles, head injection to tail ejection
    p50_packet_latency: float
    p95_packet_latency: float
    p99_packet_latency: float
    max_packet_latency: float
    p99_network_latency: float
    avg_hops: float                 # router-to-router links per measured packet
    offered_rate: float             # flits/node/cycle created in the window
    accepted_rate: float            # flits/node/cycle ejected in the window
    zero_load_latency: float | None
    wall_seconds: float
    run_seconds: float
    cycles_per_second: float
    flit_hops: int
    flit_hops_per_second: float
    cycles_skipped: int             # jumped over by fast-forward (nothing in flight)
    links: Sequence = field(default_factory=list)    # per channel, in the window: a LinkTable
    latency_histogram: list = field(default_factory=list)   # [[cycles, count], ...]
    config: dict = field(default_factory=dict)
    network_model: str = "flit"     # synthetic traffic runs at the flit level only
    seed: int = 0
    version: str = ""
    build: dict = field(default_factory=dict)
    zero_load_how: str = "every pair"   # or "closed form", "sampled: ..." (theory)

    def to_dict(self):
        """Plain JSON-able data; a number that could not be measured (no packet delivered)
        is None rather than NaN."""
        d = dict(self.__dict__)
        d["config"] = dict(self.config)
        return json_safe(d)

    def to_json(self, **kw):
        return json.dumps(self.to_dict(), **kw)

    def summary(self) -> str:
        """A readable table of the headline numbers."""
        def f(x, nd=2):
            return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else \
                f"{x:.{nd}f}"
        verdict = "SATURATED (" + self.saturation_reason + ")" if self.saturated else "no"
        rows = [
            ("system", self.config.get("_system", "")),
            ("network model", self.network_model),
            ("offered load", f"{f(self.offered_rate, 4)} flits/node/cycle"),
            ("accepted load", f"{f(self.accepted_rate, 4)} flits/node/cycle"),
            ("saturated", verdict),
            ("packets measured", f"{self.packets_delivered} of {self.packets_measured} delivered"),
            ("packet latency", f"avg {f(self.avg_packet_latency)}  p50 {f(self.p50_packet_latency, 0)}"
                               f"  p95 {f(self.p95_packet_latency, 0)}  p99 "
                               f"{f(self.p99_packet_latency, 0)}  max "
                               f"{f(self.max_packet_latency, 0)} cycles"),
            ("network latency", f"avg {f(self.avg_network_latency)}  p99 "
                                f"{f(self.p99_network_latency, 0)} cycles"),
            ("zero-load latency", f"{f(self.zero_load_latency)} cycles (avg over pairs, "
                                  f"no contention"
                                  + ("" if self.zero_load_how == "every pair" else
                                     f"; {self.zero_load_how}") + ")"),
            ("average hops", f(self.avg_hops, 3)),
            ("max link utilisation", f(max(link_column(self.links, "utilisation").tolist(),
                                           default=float("nan")), 3)),
            ("cycles simulated", f"{self.cycles} (warm-up {self.warmup_cycles}, window "
                                 f"{self.measure_cycles}, drain {self.drain_cycles_used})"),
            ("speed", f"{self.cycles_per_second:,.0f} cycles/s, "
                      f"{self.flit_hops_per_second / 1e6:,.1f} M flit-hops/s, "
                      f"{self.wall_seconds:.2f} s wall"),
            ("seed / version", f"{self.seed} / pysim {self.version}"),
        ]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
