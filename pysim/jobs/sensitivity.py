"""A job's bandwidth sensitivity, derived from pysim's own iteration times.

The preserve policy gives bandwidth-sensitive jobs the placement of best predicted bandwidth
and the others the one that leaves the most NVLink bandwidth free. Whether a job is sensitive
is derived here (`jobs.sensitivity = "derived"`, the default): per (model, NPUs, pattern,
samples per NPU) of the stream, one job's steady-state iteration is simulated alone on its
best placement (the highest predicted bandwidth, ties to the better score) and on its worst
(the lowest predicted bandwidth, ties to the worse score); its sensitivity is worst / best - 1,
and it counts as sensitive when that is at least `jobs.sensitivity_threshold`.
`jobs.sensitivity = "published"` takes the labels instead: every model is sensitive but those
of `jobs.insensitive` (MAPA's published labels: GoogLeNet and CaffeNet). A job file's own
`sensitive` wins over both. The simulations are the loop's own (same keys, same cache), so a
placement the policies later choose is not simulated twice.
"""
from __future__ import annotations

import dataclasses

from pysim.jobs import execute
from pysim.workload import runtime
from pysim.jobs.policies import _best, pattern_edges
from pysim.jobs.shape import canonical_ranks, shape
from pysim.jobs.stream import ALGORITHM


def _steady(res):
    e = res["ends"][0]
    return float(e[-1] - e[0]) / (len(e) - 1) if len(e) > 1 else float(e[0])


def kind_shape(server, cands_for, settings, model, k, pattern, bpn, best=True):
    """(shape, spec) of one job of a kind alone on its best placement (the highest predicted
    bandwidth, ties to the better score) or its worst (the lowest, ties to the worse)."""
    cands = cands_for(k, pattern)
    every = cands.predicted == cands.predicted
    pick = (_best([cands.predicted, cands.score], every) if best else
            _best([-cands.predicted, -cands.score], every))
    pairs = pattern_edges(pattern, k)[1]
    nodes = canonical_ranks(server, [int(x) for x in cands.nodes[pick]], pattern, pairs)
    spec = dict(model=model, batch=bpn * k, algorithm=ALGORITHM[pattern])
    sh = shape(server, [nodes], [tuple(sorted(spec.items()))],
               (settings["salt"], "alone", settings["sim_iterations"]), [pairs])
    return sh, spec


def derive(server, jobs, builder, cache, cands_for, settings, simulated=None):
    """Jobs with `sensitive` None given their derived label; and per (model, npus, pattern,
    batch_per_npu) a row: best and worst placements' iteration cycles, sensitivity, label.
    simulated(result): called with each simulation's result (not with cache hits)."""
    cfg = server.cfg
    W = settings["sim_iterations"]
    rows, label = [], {}
    kinds = sorted({(j.model, j.npus, j.pattern, j.batch_per_npu) for j in jobs
                    if j.sensitive is None})
    for model, k, pattern, bpn in kinds:
        if k < 2:                                  # one NPU: nothing to place
            label[(model, k, pattern, bpn)] = False
            continue
        ends = []
        for best in (True, False):
            sh, spec = kind_shape(server, cands_for, settings, model, k, pattern, bpn, best)
            res = cache.get(sh.key)
            if res is None:
                res = execute.simulate_shapes(cfg, sh.topo, [(spec, sh.names[0], W)], builder)
                cache.put(sh.key, res)
                if simulated is not None:
                    simulated(res)
            ends.append(_steady(res))
        sens = ends[1] / ends[0] - 1.0
        sensitive = sens >= cfg.jobs.sensitivity_threshold
        label[(model, k, pattern, bpn)] = sensitive
        rows.append(dict(model=model, npus=k, pattern=pattern, batch_per_npu=bpn,
                         best_cycles=ends[0], worst_cycles=ends[1], sensitivity=sens,
                         sensitive=bool(sensitive),
                         published=model not in set(cfg.jobs.insensitive)))
    out = [j if j.sensitive is not None else dataclasses.replace(
        j, sensitive=bool(label[(j.model, j.npus, j.pattern, j.batch_per_npu)])) for j in jobs]
    return out, rows



def least_work(server, jobs, builder, cands_for, settings, labels=True):
    """Before a stream runs, a lower bound of its simulations' work (pysim.workload.runtime):
    each kind of job alone on its best placement, twice where its sensitivity is derived
    (labels: a policy reads them; the worst placement's counted as the best's). Groups of
    jobs running together, and jobs on other shapes, come on top."""
    cfg = server.cfg
    W = settings["sim_iterations"]
    ests, n = [], 0
    kinds = {}
    for j in jobs:
        key = (j.model, j.npus, j.pattern, j.batch_per_npu)
        kinds[key] = max(kinds.get(key, 1), 2 if labels and j.sensitive is None else 1)
    for (model, k, pattern, bpn), times in sorted(kinds.items()):
        if k < 2:
            continue
        sh, spec = kind_shape(server, cands_for, settings, model, k, pattern, bpn)
        e = execute.estimate_shapes(cfg, sh.topo, [(spec, sh.names[0], W)], builder)
        ests += [e] * times
        n += times
    return runtime.total(ests, least=True, simulations=n) if ests else None
