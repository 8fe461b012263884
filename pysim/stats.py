"""Counters from csim -> a Result (latency percentiles, throughput, per-link load)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from pysim._io import json_safe


def percentile_from_hist(hist: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of values whose counts by value are `hist`: the smallest
    value v with at least q% of the samples <= v (nearest-rank)."""
    total = int(hist.sum())
    if total == 0:
        return float("nan")
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    return float(np.searchsorted(np.cumsum(hist), rank))


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
    links: list = field(default_factory=list)
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
            ("max link utilisation", f(max((l["utilisation"] for l in self.links),
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
