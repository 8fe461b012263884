"""How many ops a training run will make, counted from its layout before any is built.

A graph is limited to pysim.workload.graph.MAX_OPS ops; building one op costs microseconds
and bytes, so a run that would pass the limit is refused here, at once, naming the key that
makes most of its ops (workload.iterations, the model's layers, micro-batches,
workload.bucket_mb, workload.chunks) rather than minutes later, when the graph reaches it.

The count is a lower bound: every layer's compute ops on every NPU of its stage, per
micro-batch and iteration, and the ops of each gradient all-reduce and tensor-parallel
all-reduce as the collective expands without an endpoint model (pysim.workload.collectives.
ops_bound with no engine, exact for the ring). A run refused here would pass the limit.
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.workload import collectives as coll
from pysim.workload import graph as graph_module


def _fmt(parts):
    return ", ".join(f"{n:,} {what}" for what, n in parts if n)


def check_training(lay, iterations, chunks, limit=None):
    """Raise ConfigError if the training run of layout `lay` (pysim.workload.training's
    _Layout) makes more than `limit` ops (default: MAX_OPS), before any is built."""
    limit = graph_module.MAX_OPS if limit is None else limit
    model = lay.model
    reps = len(lay.replicas_run()) if hasattr(lay, "replicas_run") else lay.dp
    per_stage = reps * lay.tp          # the NPUs whose passes are built (replicas = 'one')
    compute = optimizer = 0
    tp_ops = 0
    form = lay.cfg.workload.collective_form
    tp_one = coll.ops_bound("all_reduce", "ring", lay.tp, chunks, form=form) if lay.tp > 1 \
        else 0
    for i, layer in enumerate(model.layers):
        if lay.split_table[i]:
            compute += 1                              # its owner's, for the global batch
            continue
        _, bin_, bw, _ = lay.costs(i, lay.mb)
        compute += per_stage * (1 + (bin_ is not None) + (bw is not None))
        optimizer += per_stage if layer.params else 0       # a step per iteration
        if lay.tp > 1 and layer.tp not in (None, "replicated", "heads"):
            if layer.tp == "row" and layer.kind in ("linear", "embedding"):
                tp_ops += reps * tp_one
            if layer.kind == "linear" and layer.tp == "column" and layer.bwd_input_flops:
                tp_ops += reps * tp_one
    compute = compute * lay.m + optimizer
    tp_ops *= lay.m
    buckets = 0
    if lay.dp > 1:                                    # gradient buckets, filled backwards
        cap = int(lay.cfg.workload.bucket_mb * 2 ** 20)
        overlap = lay.cfg.workload.overlap
        for a, b in lay.stages:
            filled = 0
            open_ = False
            for i in range(b - 1, a - 1, -1):
                nbytes = lay.grad_bytes(i)
                if model.layers[i].params == 0 or not nbytes:
                    continue
                filled += nbytes
                open_ = True
                if overlap and filled >= cap:
                    buckets += 1
                    filled, open_ = 0, False
            buckets += open_
        buckets *= lay.tp
    dp_ops = buckets * coll.ops_bound("all_reduce", lay.algorithm or "ring", lay.dp, chunks,
                                      form=form) \
        if lay.dp > 1 else 0
    per_it = compute + tp_ops + dp_ops
    total = per_it * iterations
    if total <= limit:
        return total
    causes = [(compute, f"{model.name}'s {len(model.layers):,} layers (workload.model_params "
                        f"sets them) on {len(lay.npus)} NPUs x {lay.m} micro-batches "
                        f"(workload.parallel.micro_batches)"),
              (dp_ops, f"{buckets:,} gradient all-reduces of workload.bucket_mb = "
                       f"{lay.cfg.workload.bucket_mb:g} in workload.chunks = {chunks}"),
              (tp_ops, f"tensor-parallel all-reduces (tp = {lay.tp}) in workload.chunks = "
                       f"{chunks}")]
    top = f"workload.iterations = {iterations:,}" if iterations > 2 and per_it <= limit \
        else max(causes)[1]
    raise ConfigError(
        f"training makes at least {total:,} ops, more than the {limit:,} a graph may have: "
        f"workload.iterations = {iterations:,} x {per_it:,} per iteration (" +
        _fmt([("compute", compute), ("tensor-parallel", tp_ops), ("gradient all-reduce",
                                                                  dp_ops)]) +
        f" ops); most come from {top}" + (
            "; fewer iterations make fewer" if iterations > 1 and per_it * 2 <= limit else ""))


def check_given(model, npus, iterations, limit=None):
    """The same for a model of given layer times (an ASTRA-sim workload): at least three
    compute ops per layer, NPU and iteration."""
    limit = graph_module.MAX_OPS if limit is None else limit
    per_it = 3 * len(model.layers) * npus
    total = per_it * iterations
    if total > limit:
        raise ConfigError(
            f"training makes at least {total:,} ops, more than the {limit:,} a graph may "
            f"have: workload.iterations = {iterations:,} x {len(model.layers):,} layers of "
            f"{model.name} x 3 x {npus} NPUs" +
            ("; fewer iterations make fewer" if iterations > 1 and per_it * 2 <= limit
             else ""))
    return total
