"""The ops a training iteration's graph will hold, counted from the plan before any is built.

`graph_ops(b)` walks what the builder (`pysim.workload.training.builder._Builder` b) adds, per
virtual stage, micro-batch and layer -- never per op -- and returns {part: ops}: compute (the
forward, recomputed, backward and optimizer ops), pipeline (sends between stages, and the
joins of a stage's last op), tp_collectives (tensor and sequence parallelism, the pipeline's
all-gathers), dp_collectives (gradients, ZeRO, the tied embeddings), ep_collectives (expert
parallelism). Each collective is counted as pysim.workload.collectives.build makes it (built
once per kind, size class and group size into a scratch graph). The sum is len(graph) for the
plans the builder makes without split embedding tables and without a memory plan's hooks
(None for a model with split tables).
"""
from __future__ import annotations

from pysim.workload import collectives as coll
from pysim.workload.graph import OpGraph
from pysim.workload.training.experts import combine_after, dispatch_before
from pysim.workload.training.pipeline import schedule
from pysim.workload.training.tensor import gather_bytes, scatter_bytes, tp_backward, tp_forward

PARTS = ("compute", "pipeline", "tp_collectives", "dp_collectives", "ep_collectives")


class _Collectives:
    """Ops of one collective of a kind, group size and bytes (0 or not), measured once."""

    def __init__(self, b):
        self.b = b
        self.cache = {}

    def __call__(self, collective, p, nbytes):
        b = self.b
        algorithm = b.lay.algorithm if collective == "all_reduce" else "direct"  # (as built)
        if nbytes <= 0:
            return p
        pieces_key = nbytes if b.sram is not None else 1
        key = (collective, algorithm, p, pieces_key)
        if key not in self.cache:
            g = OpGraph()
            names = [f"x{k}" for k in range(p)]
            coll.build(collective, algorithm, names, int(nbytes), b.chunks, None, b.lay.engine,
                       b.sram, g, b.in_flight, None, b.grain, after={n: [] for n in names},
                       done={}, sram_pieces=b.sram_pieces,
                       form=b.lay.cfg.workload.collective_form)
            self.cache[key] = len(g)
        return self.cache[key]


def graph_ops(b):
    """{part: ops} of workload.iterations iterations built by b (see the module's doc)."""
    lay = b.lay
    if any(lay.split_table):
        return None
    C = _Collectives(b)
    parts = dict.fromkeys(PARTS, 0)
    P = lay.pp * lay.v
    reps = len(lay.replicas_run())
    ep_groups = max(1, reps // lay.ep) if lay.ep > 1 else 0
    layers = lay.model.layers
    blocks = {e - 1: a for a, e in lay.blocks}

    def zero3(i):
        if lay.zero < 3 or lay.dp == 1 or not layers[i].params:
            return 0
        nbytes = layers[i].params * lay.pad[i] * lay.pb.weight / lay.splits[i][2]
        return lay.tp * C("all_gather", lay.dp, int(-(-nbytes // 1)))

    def forward_layer(i, n):
        """One layer_forward: its compute, collectives and ZeRO-3 gathers."""
        if lay.seq.gather_before[i]:
            parts["tp_collectives"] += reps * C("all_gather", lay.tp, gather_bytes(lay, i))
        if dispatch_before(lay, i) and lay.ep > 1:
            parts["ep_collectives"] += ep_groups * C("all_to_all", lay.ep,
                                                     lay.mb * layers[i].in_elems * lay.pb.act)
        parts["dp_collectives"] += zero3(i)
        parts["compute"] += n
        for collective, nbytes in tp_forward(lay, i):
            parts["tp_collectives"] += reps * C(collective, lay.tp, nbytes)
        if combine_after(lay, i) and lay.ep > 1:
            parts["ep_collectives"] += ep_groups * C("all_to_all", lay.ep,
                                                     lay.mb * layers[i].out_elems * lay.pb.act)

    def send(i, elems, n):
        parts["pipeline"] += n
        if lay.tp > 1 and lay.scatter_gather and not lay.sp:
            nbytes = -(-(lay.mb * elems * lay.pb.act / lay.tp) // 1)
            parts["tp_collectives"] += reps * C("all_gather", lay.tp, int(nbytes) * lay.tp)

    def buckets(a, e, n):
        """The data-parallel gradients of stage (a, e) after its last backward pass."""
        runs = n // lay.tp                  # replicas built
        cap = int(lay.cfg.workload.bucket_mb * 2 ** 20)
        held, held_layers = 0, 0

        def flush():
            if not held_layers:
                return
            parts["compute"] += runs * lay.tp * held_layers
            if not lay.zero:
                parts["dp_collectives"] += lay.tp * C("all_reduce", lay.dp, held)
            else:
                parts["dp_collectives"] += lay.tp * C("reduce_scatter", lay.dp, held)
                if lay.zero < 3:
                    w = int(held * lay.pb.weight / lay.pb.grad)
                    parts["dp_collectives"] += lay.tp * C("all_gather", lay.dp, w)

        for i in range(e - 1, a - 1, -1):
            nbytes = lay.grad_bytes(i)
            if layers[i].params == 0:
                continue
            if lay.expert[i] and lay.ep > 1:
                per = lay.dp // lay.ep
                if per > 1:
                    parts["dp_collectives"] += lay.tp * lay.ep * C("all_reduce", per, nbytes)
                parts["compute"] += n
                continue
            if lay.dp == 1 or not nbytes:
                parts["compute"] += n
                continue
            held += nbytes
            held_layers += 1
            if lay.cfg.workload.overlap and held >= cap:
                flush()
                held, held_layers = 0, 0
        flush()

    for it in range(lay.cfg.workload.iterations):
        for vs in range(P):
            a, e = lay.stages[vs]
            n = len(lay.stage_npus(vs))
            for j in range(lay.m):
                # forward
                for i in range(a, e):
                    forward_layer(i, n)
                if vs + 1 < P:
                    send(e - 1, layers[e - 1].out_elems, n)
                # backward
                length = 1 + (vs + 1 < P)         # cur[n]: last op, the send into the stage
                for i in range(e - 1, a - 1, -1):
                    if lay.recompute == "full" and i in blocks:
                        for k in range(max(blocks[i], a), i + 1):
                            forward_layer(k, n)
                        length = 1
                    elif lay.recompute == "selective" and layers[i].kind == "attention" and \
                            any(x <= i < y for x, y in lay.blocks):
                        parts["compute"] += n
                        length = 1
                    if combine_after(lay, i) and lay.ep > 1:
                        parts["ep_collectives"] += ep_groups * C(
                            "all_to_all", lay.ep, lay.mb * layers[i].out_elems * lay.pb.act)
                        length = 1
                    if lay.seq.scatter_after[i]:
                        parts["tp_collectives"] += reps * C("all_gather", lay.tp,
                                                            scatter_bytes(lay, i))
                        length = 1
                    parts["dp_collectives"] += zero3(i)
                    _, bin_, bw, _ = lay.costs(i, lay.mb)
                    ops = (bin_ is not None) + (bw is not None)
                    parts["compute"] += n * ops
                    if ops:
                        length = 1
                    for collective, nbytes in tp_backward(lay, i):
                        parts["tp_collectives"] += reps * C(collective, lay.tp, nbytes)
                        length += 1
                    if dispatch_before(lay, i) and lay.ep > 1:
                        parts["ep_collectives"] += ep_groups * C(
                            "all_to_all", lay.ep, lay.mb * layers[i].in_elems * lay.pb.act)
                        length = 1
                if length > 1:
                    parts["pipeline"] += n        # the join of the stage's last ops
                if j == lay.m - 1:
                    buckets(a, e, n)
                if vs > 0:
                    send(a, layers[a].in_elems, n)
        for head, emb in lay.tied:
            if lay.stage_of[emb] % lay.pp != lay.stage_of[head] % lay.pp:
                parts["dp_collectives"] += reps * lay.tp * C("all_reduce", 2,
                                                             lay.grad_bytes(emb))
    return parts


def check_schedule(lay):
    """The schedule every stage runs (for callers that count per pass)."""
    return {s: schedule(lay.schedule, s, lay.pp, lay.m, lay.v) for s in range(lay.pp)}
