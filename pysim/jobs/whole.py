"""A policy's whole stream as one simulation: the reference the event loop's approximation
(jobs' speeds taken as steady between events) is measured against.

Every job's iterations -- all of them -- go into one op graph on the whole server, with the
decisions of the event loop's run kept: the same NPUs, the same rank order, and a job starts
once (a) it has arrived, (b) the jobs whose end let it start in that run have ended, (c) the
jobs that held its NPUs before have ended, and (d) the job ahead of it in the queue has
started. Jobs then share links exactly as the network has them share, phase by phase. Only
small streams fit: the graph holds every iteration of every job.
"""
from __future__ import annotations

import numpy as np

from pysim.jobs.loop import spec_of
from pysim.workload.graph import OpGraph, run_graph


def whole_stream(server, jobs, records, builder):
    """Simulate `records` (one policy's, from run_stream) of `jobs` in one op graph; returns
    {job id: (start_s, end_s)}."""
    cfg = server.cfg
    clock = cfg.network.clock_ghz * 1e9
    by_id = {j.id: j for j in jobs}
    queue = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
    ahead = {b.id: a.id for a, b in zip(queue, queue[1:])}
    g = OpGraph()
    gate, end, holder = {}, {}, {}
    for r in sorted(records, key=lambda r: (r["start_s"], [j.id for j in queue].index(r["id"]))):
        job = by_id[r["id"]]
        deps = [g.delay(int(round(job.arrival_s * clock)))]
        deps += [end[i] for i in r["started_by"]]
        deps += [end[holder[n]] for n in r["npus"] if n in holder]
        if ahead.get(job.id) in gate:
            deps.append(gate[ahead[job.id]])
        gate[job.id] = g.delay(0, after=sorted(set(deps)))
        lo = len(g)
        ends = builder(cfg, spec_of(job), r["npus"], g, f"j{job.id}.", job.iterations,
                       topo=server.topo)
        g.start_after(gate[job.id], lo)
        end[job.id] = ends[-1]
        for n in r["npus"]:
            holder[n] = job.id
    res = run_graph(cfg, g)
    fin = np.array([op["finish"] for op in res.ops], float)
    return {i: (fin[gate[i]] / clock, fin[end[i]] / clock) for i in gate}


def compare(server, jobs, result, builder, policy=None):
    """Per job of one policy (default: the reference): the event loop's start and end beside
    the whole-stream simulation's, and the relative error of its execution time."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    policy = policy or d["reference"]
    records = [r for r in d["jobs"] if r["policy"] == policy]
    whole = whole_stream(server, jobs, records, builder)
    rows = []
    for r in records:
        s, e = whole[r["id"]]
        rows.append(dict(id=r["id"], loop_start_s=r["start_s"], loop_end_s=r["end_s"],
                         whole_start_s=s, whole_end_s=e, loop_exec_s=r["exec_s"],
                         whole_exec_s=e - s, error=(r["exec_s"] - (e - s)) / (e - s)))
    return rows
