"""What a stream run measured, per policy and per job, as JSON and as a table."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STATS = ("mean", "p50", "p75", "p95", "worst")


def _stats(x):
    x = np.asarray(x, float)
    return dict(mean=float(x.mean()), p50=float(np.percentile(x, 50)),
                p75=float(np.percentile(x, 75)), p95=float(np.percentile(x, 95)),
                worst=float(x.max()))


def reference(names):
    """The policy the others are compared with: baseline if it ran, else the first."""
    return "baseline" if "baseline" in names else names[0]


def summarise(records, names):
    """Per policy: execution-time statistics (s), mean queueing time, makespan, the time
    jobs spent slowed by others, and each relative to the reference policy; per-job
    speedups over the reference (its time / this policy's time, for the same job)."""
    ref = reference(names)
    out = {}
    by_id = {n: {r["id"]: r for r in records[n]} for n in names}
    for n in names:
        rs = records[n]
        ex = [r["exec_s"] for r in rs]
        d = _stats(ex)
        d["queue_mean"] = float(np.mean([r["queue_s"] for r in rs]))
        d["makespan"] = float(max(r["end_s"] for r in rs))
        d["slowdown_mean"] = float(np.mean([r["slowdown"] for r in rs]))
        d["score_mean"] = float(np.mean([r["score_gbps"] for r in rs]))
        d["jobs"] = len(rs)
        out[n] = d
    for n in names:
        d = out[n]
        base = out[ref]
        d["relative"] = {k: d[k] / base[k] if base[k] else float("nan")
                         for k in STATS + ("queue_mean", "makespan")}
        sp = np.array([by_id[ref][i]["exec_s"] / by_id[n][i]["exec_s"] for i in by_id[n]])
        d["speedup"] = dict(p25=float(np.percentile(sp, 25)), p50=float(np.percentile(sp, 50)),
                            p75=float(np.percentile(sp, 75)),
                            p95=float(np.percentile(sp, 95)), mean=float(sp.mean()),
                            max=float(sp.max()), min=float(sp.min()))
    return out


@dataclass
class StreamResult:
    server: str
    policies: dict
    jobs: list
    stream: list
    stats: dict
    config: dict = field(default_factory=dict)
    seed: int = 0
    version: str = ""

    def to_dict(self):
        return dict(kind="jobs", server=self.server, reference=reference(list(self.policies)),
                    policies=self.policies, jobs=self.jobs, stream=self.stream,
                    stats=self.stats, config=self.config, seed=self.seed, version=self.version)

    def summary(self):
        names = list(self.policies)
        ref = reference(names)
        head = ["policy", "mean", "p50", "p75", "p95", "worst", "queue", "makespan",
                "slowdown", "p75 speedup"]
        rows = []
        for n in names:
            d = self.policies[n]
            rows.append([n] + [_t(d[k]) for k in STATS] +
                        [_t(d["queue_mean"]), _t(d["makespan"]),
                         f"{d['slowdown_mean']:.3f}", f"{d['speedup']['p75']:.3f}"])
            if n != ref:
                rel = d["relative"]
                rows.append([f"  / {ref}"] + [f"{rel[k]:.3f}" for k in STATS] +
                            [f"{rel['queue_mean']:.3f}", f"{rel['makespan']:.3f}", "", ""])
        w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
        lines = [f"server {self.server}: {len(self.stream)} jobs, execution and queueing "
                 f"times in seconds; speedup = a job's time under {ref} / under the policy"]
        lines.append("  ".join(h.rjust(w[i]) if i else h.ljust(w[i]) for i, h in enumerate(head)))
        for r in rows:
            lines.append("  ".join(str(c).rjust(w[i]) if i else str(c).ljust(w[i])
                                   for i, c in enumerate(r)))
        s = self.stats
        lines.append(f"simulations {s['simulations']} ({s['together']} of jobs running "
                     f"together, {s.get('for_sensitivity', 0)} for bandwidth sensitivity) at "
                     f"the {s.get('network_model', '?')} level, cache hits {s['cache_hits']}, "
                     f"simulated {s['sim_wall_seconds']:.1f} s; wall {s['wall_seconds']:.1f} s")
        lines.append(f"seed / version  {self.seed} / pysim {self.version}")
        return "\n".join(lines)


def _t(x):
    return f"{x:.4g}"
