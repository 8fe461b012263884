"""What a training iteration's op graph will hold, counted before any op is built.

`training_ops(builder)` counts, from the plan alone (per layer and per bucket, never per op),
the engine ops (what pysim.workload.graph.compile_graph expands the graph into, and what its
limit counts) of the ops pysim.workload.training's builder makes: per layer, NPU and
micro-batch its compute ops (roofline ops: two engine ops each); per layer and NPU the
optimizer steps; the pipeline sends and the joins between them; every collective as
pysim.workload.collectives.ops_bound counts it (exact but on an offload engine, where it is
an upper bound) plus one join per participant. A memory plan's ops come on top.
`check_training` refuses a plan past the op limit at once, naming the part that makes most
of them and the key that makes it smaller, and the memory the run would take.
"""
from __future__ import annotations

import math

from pysim.workload import collectives as coll
from pysim.workload import graph as graph_module
from pysim.workload.graph import GraphError
from pysim.workload.training.tensor import tp_backward, tp_forward

# bytes a run takes per engine op, the graph, its plan and the engine's arrays together:
# the 1,024-NPU GPT-3 iteration of bench/scale.py peaks at 3.4 GB for 7.4 M engine ops (see
# docs/performance.md)
BYTES_PER_OP = 460


def _collective_ops(b, collective, algorithm, group_size, nbytes):
    """Ops of one collective (pysim.workload.collectives.build) and its joins."""
    lay = b.lay
    if nbytes <= 0:
        return 2 * group_size
    pieces = 1
    if lay.engine == "offload" and b.sram is not None:
        piece = max(1, b.sram // b.sram_pieces)
        pieces = max(1, -(-(-(-int(nbytes) // b.chunks)) // piece))
    dims = list(lay.topo.dims) if algorithm == "hierarchical" and lay.topo.dims else None
    return coll.ops_bound(collective, algorithm, group_size, b.chunks, lay.engine, dims,
                          pieces, lay.cfg.workload.collective_form) \
        + 2 * group_size      # (the units held: taken, freed)


def training_ops(b):
    """{part: ops} of the whole run (every iteration) of the training builder `b`:
    compute, pipeline, tp_collectives, dp_collectives, all_to_all."""
    lay = b.lay
    cfg = lay.cfg
    m, dp, tp, pp = lay.m, lay.dp, lay.tp, lay.pp
    layers = lay.model.layers
    L = len(layers)
    split = sum(1 for x in lay.split_table if x)
    parts = dict(compute=0, pipeline=0, tp_collectives=0, dp_collectives=0, all_to_all=0)
    # the replicas whose ops are built (all, or one standing for all)
    runs = len(lay.replicas_run()) if hasattr(lay, "replicas_run") else dp
    # forward, input and weight gradients per layer, NPU and micro-batch (where the layer has
    # such work); the optimizer steps (each a roofline op and its memory companion)
    for i in range(L):
        _, bin_, bw, _ = lay.costs(i, lay.mb)
        ops = 1 + (bin_ is not None) + (bw is not None)
        if lay.split_table[i]:
            parts["compute"] += 2 * 3 * m + 2
        else:
            parts["compute"] += 2 * ops * runs * tp * m + 2 * runs * tp * (layers[i].params > 0)
    # a send each way between stages, and a join per NPU and micro-batch each way
    parts["pipeline"] = 2 * (pp - 1) * runs * tp * m + 2 * runs * tp * pp * m
    alg = lay.algorithm
    if tp > 1 and pp > 1 and getattr(lay, "scatter_gather", False):
        # a send between stages split over the tensor-parallel group, all-gathered there
        for a, e in lay.stages[1:]:
            nbytes = lay.mb * max(layers[a].in_elems, layers[a - 1].out_elems) * lay.pb.act
            parts["pipeline"] += 2 * m * runs * _collective_ops(b, "all_gather", "direct"
                                                                if alg == "hierarchical"
                                                                else alg, tp, nbytes)
    for i in range(L):
        if lay.split_table[i]:
            continue
        for collective, nbytes in tp_forward(lay, i) + tp_backward(lay, i):
            parts["tp_collectives"] += m * runs * _collective_ops(b, collective, alg, tp,
                                                                  nbytes)
    if dp > 1:
        cap = int(cfg.workload.bucket_mb * 2 ** 20)
        for a, e in lay.stages:
            held = 0
            for i in range(e - 1, a - 1, -1):        # backward order, as _Buckets fills
                nbytes = lay.grad_bytes(i)
                if layers[i].params == 0 or not nbytes:
                    continue
                held += nbytes
                if cfg.workload.overlap and held >= cap:
                    parts["dp_collectives"] += tp * _collective_ops(b, "all_reduce", alg, dp,
                                                                    held)
                    held = 0
            if held:
                parts["dp_collectives"] += tp * _collective_ops(b, "all_reduce", alg, dp, held)
    for head, emb in getattr(lay, "tied", ()):    # tied embeddings' copies all-reduced
        if lay.stage_of[emb] % pp != lay.stage_of[head] % pp:
            parts["dp_collectives"] += runs * tp * _collective_ops(
                b, "all_reduce", alg, 2, lay.grad_bytes(emb))
    if split:
        per = 0
        for i in range(L):
            if lay.split_table[i]:
                per += layers[i].out_elems
        nbytes = lay.gmb * per * lay.pb.act
        parts["all_to_all"] = 2 * m * _collective_ops(b, "all_to_all", "direct", dp, nbytes)
    its = cfg.workload.iterations
    return {k: v * its for k, v in parts.items()}


KEYS = {"compute": "workload.parallel.micro_batches or workload.iterations",
        "pipeline": "workload.parallel.micro_batches",
        "tp_collectives": "workload.chunks, workload.algorithm (tree or halving_doubling "
                          "make fewer ops than ring) or workload.parallel.micro_batches",
        "dp_collectives": "workload.chunks, workload.bucket_mb (larger buckets, fewer "
                          "collectives) or workload.algorithm (tree or halving_doubling)",
        "all_to_all": "workload.parallel.micro_batches or workload.chunks"}


def counted(lay):
    """Whether training_ops counts this plan: data, tensor and pipeline parallelism with
    neither interleaving, sequence parallelism, ZeRO nor experts (their ops are not counted
    yet, so such a plan meets the limit while it is built)."""
    return (getattr(lay, "v", 1) == 1 and not getattr(lay, "sp", False) and
            not getattr(lay, "zero", 0) and getattr(lay, "ep", 1) == 1)


def check_training(b, existing=0):
    """Refuse, before building, a training run whose graph would pass the op limit
    (`existing`: the ops already in the graph it is added to)."""
    if not counted(b.lay):
        return None
    parts = training_ops(b)
    total = sum(parts.values()) + existing
    limit = graph_module.MAX_OPS
    if total <= limit:
        return parts
    worst = max(parts, key=parts.get)
    what = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in parts.items() if v)
    lay = b.lay
    raise GraphError(
        f"workload.parallel = dp {lay.dp} x tp {lay.tp} x pp {lay.pp}, "
        f"{lay.m} micro-batches, {b.lay.cfg.workload.iterations} iteration(s): the training "
        f"graph would expand into up to {total:,} engine ops ({what}; about "
        f"{math.ceil(total * BYTES_PER_OP / 1e9)} GB), more than the {limit:,} an op graph "
        f"may have; most are {worst.replace('_', ' ')}: fewer with {KEYS[worst]}")
