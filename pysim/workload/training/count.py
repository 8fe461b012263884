"""The ops a training run makes, counted from its plan before any is built: pysim's one op
counter (the training builder refuses with it a run past the op limit before building).

`count(b)` walks what the training builder b (`pysim.workload.training.builder._Builder`)
adds for one iteration -- per virtual stage and layer, never per op; the micro-batches but
the last make the same ops, walked once for them all, the last (its gradients' collectives
and optimizer steps besides) once more -- and returns
an `OpCount`: per part, the graph's ops (what len(graph) counts) and the engine ops they
expand into (pysim.workload.compile: two for a roofline compute op, one for a send or a join;
the op limit, pysim.workload.graph.MAX_OPS, counts these), for workload.iterations
iterations. The parts: compute (forward, recomputed, backward and optimizer ops), pipeline
(sends between stages and the joins of a stage's last ops), tp_collectives (tensor and
sequence parallelism, the pipeline's all-gathers), dp_collectives (gradients, ZeRO, the tied
embeddings), ep_collectives (expert parallelism), tables (the split embedding tables' ops and
all-to-alls). Each collective is counted as b builds it (b.collective_ops: its algorithm,
endpoint engine, pieces and, for workload.algorithm = 'nccl', NCCL's machine and settings),
once per kind, size and group size (per group, for NCCL, whose expansion depends on where
the ranks are), into a scratch graph; one whose closed-form bound
(pysim.workload.collectives.ops_bound) passes MEASURED is counted by that bound instead
(`OpCount.exact` is then false). `count(b, measure=False)` counts every collective by that
bound, building nothing: an upper bound, in the time of the walk. A memory plan's ops come
on top.

`check(b, existing)` refuses, before building, a run whose graph would pass the op limit by
that upper bound (so a run within a few percent of the limit may be refused), naming the part
that makes most of its ops and the key that makes it smaller, and the memory it would take;
`check_given` does the same for a model of given layer times (an ASTRA-sim workload).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pysim._gc import quiet_gc
from pysim.errors import ConfigError
from pysim.workload import collectives as coll
from pysim.workload import graph as graph_module
from pysim.workload.compile import engine_ops
from pysim.workload.graph import GraphError, OpGraph
from pysim.workload.training.experts import combine_after, dispatch_before
from pysim.workload.training.tensor import gather_bytes, scatter_bytes, tp_backward, tp_forward

PARTS = ("compute", "pipeline", "tp_collectives", "dp_collectives", "ep_collectives",
         "tables")
MEASURED = 200_000      # a collective bounded above this many engine ops is not built to count
ROOFLINE = 2            # engine ops of a roofline compute op (it and its memory companion)
# bytes a run takes per engine op at its peak (resident set), the graph, its plan and the
# engine's arrays together, an upper bound from 0.6 M engine ops up: a chain of ONNX Relu
# layers trained on the DGX-1 (8 NPUs, 2 iterations, flow level) peaks at 870, 740 and 687
# bytes per op with 0.32 M, 0.64 M and 1.28 M engine ops (610-633 per op added over ~75 MB
# the process holds before building), at 609 with 6.4 M; the 1,024-NPU GPT-3 iteration of
# bench/scale.py at 460 (3.4 GB for 7.4 M), Narayanan et al.'s 529.6B and 1T rows
# (bench/megatron.py) at 564 and 557 (3.1 GB for 5.5 M, 6.8 GB for 12.2 M; see
# docs/performance.md). Writing --json holds the
# result's dict as well: 1,013, 921 and 914 bytes per op at those sizes, 812 at 6.4 M.
BYTES_PER_OP = 800
JSON_BYTES_PER_OP = 1000


@dataclass
class OpCount:
    """Per part (PARTS), the graph's ops and the engine ops they expand into."""
    graph: dict
    engine: dict
    exact: bool = True

    @property
    def graph_total(self):
        return sum(self.graph.values())

    @property
    def engine_total(self):
        return sum(self.engine.values())


class _Collectives:
    """(graph ops, engine ops) of collectives as the builder adds them, measured once."""

    def __init__(self, b, measure):
        self.b = b
        self.measure = measure
        self.cache = {}
        self.exact = True
        self.by_group = b.lay.algorithm == "nccl"
        self.nccl_kw = coll.nccl_args(b.lay.cfg, b.lay.topo) if self.by_group else {}

    def nccl(self, group):
        """ops_bound's NCCL arguments for a group (NCCL's plan needs the machine and ranks)."""
        if not self.by_group:
            return {}
        return dict(machine=self.nccl_kw["machine"], order=list(group),
                    nccl_settings=self.nccl_kw["nccl_settings"])

    def _one(self, collective, group, nbytes):
        b, lay = self.b, self.b.lay
        p = len(group)
        ranks = len(lay.ranks_run())
        k = sum(1 for n in group if lay.coords[n][1] < ranks)      # members built
        if nbytes <= 0:
            return k, k                           # a join per member built
        key = (collective, tuple(group) if self.by_group else p, nbytes, k)
        if key not in self.cache:
            algorithm = b.algorithm(collective)
            pieces = 1
            if lay.engine == "offload" and b.sram is not None:
                piece = max(1, b.sram // b.sram_pieces)
                pieces = max(1, -(-(-(-nbytes // b.chunks)) // piece))
            dims = list(lay.topo.dims) if algorithm in coll.HIERARCHICAL and lay.topo.dims \
                else None
            bound = coll.ops_bound(collective, algorithm, p, b.chunks, lay.engine, dims,
                                   pieces, lay.cfg.workload.collective_form,
                                   nbytes, **self.nccl(group)) + 2 * p
            if k < p and coll.symmetric(collective, algorithm, b._order(group, algorithm),
                                        nbytes, b.chunks, None, lay.engine, b.in_flight,
                                        b.grain, b.units, lay.cfg.workload.collective_form,
                                        **coll.nccl_args(lay.cfg, lay.topo)) is not None:
                bound = -(-bound * k // p)        # each member's part alike
            if bound > MEASURED or not self.measure:
                self.exact = False
                self.cache[key] = (bound, bound)
            else:
                g = OpGraph()
                b.collective_ops(collective, list(group), nbytes, g)
                self.cache[key] = (len(g), engine_ops(g))
        return self.cache[key]

    def __call__(self, collective, groups, nbytes):
        """(graph ops, engine ops) of the collective over each group of `groups`."""
        groups = list(groups)
        if not groups:
            return 0, 0
        nbytes = int(nbytes)
        if self.by_group:
            ops = [self._one(collective, grp, nbytes) for grp in groups]
            return sum(x for x, _ in ops), sum(y for _, y in ops)
        g, e = self._one(collective, groups[0], nbytes)
        return len(groups) * g, len(groups) * e


@quiet_gc
def count(b, measure=True):
    """The OpCount of workload.iterations iterations built by b (see the module's doc)."""
    lay = b.lay
    C = _Collectives(b, measure)
    graph = dict.fromkeys(PARTS, 0)
    engine = dict.fromkeys(PARTS, 0)
    P = lay.pp * lay.v
    layers = lay.model.layers
    blocks = {e - 1: a for a, e in lay.blocks}
    dps = sorted(set(lay.replicas_run()))

    mult = 1                              # the micro-batches a pass of the walk stands for

    def add(part, ops, per=1):
        graph[part] += ops * mult
        engine[part] += ops * per * mult

    def coll_(part, collective, groups, nbytes):
        g, e = C(collective, groups, nbytes)
        graph[part] += g * mult
        engine[part] += e * mult

    def tp_groups(vs):
        return [lay.tp_group(d, vs) for d in dps]

    def ep_groups(vs):
        seen, out = set(), []
        for n in lay.stage_npus(vs):
            grp = lay.ep_group(n)
            if grp[0] not in seen:
                seen.add(grp[0])
                out.append(grp)
        return out

    def dp_groups(vs):
        return [lay.dp_group(t, vs) for t in lay.ranks_run()]

    def zero3(i, vs):
        if lay.zero < 3 or lay.dp == 1 or not layers[i].params:
            return
        nbytes = layers[i].params * lay.pad[i] * lay.pb.weight / lay.splits[i][2]
        coll_("dp_collectives", "all_gather", dp_groups(vs), int(math.ceil(nbytes)))

    def forward_layer(i, n, vs):
        """One layer_forward: its compute, collectives and ZeRO-3 gathers."""
        if lay.seq.gather_before[i]:
            coll_("tp_collectives", "all_gather", tp_groups(vs), gather_bytes(lay, i))
        if dispatch_before(lay, i) and lay.ep > 1:
            coll_("ep_collectives", "all_to_all", ep_groups(vs),
                  lay.mb * layers[i].in_elems * lay.pb.act)
        zero3(i, vs)
        add("compute", n, ROOFLINE)
        for collective, nbytes in tp_forward(lay, i):
            coll_("tp_collectives", collective, tp_groups(vs), nbytes)
        if combine_after(lay, i) and lay.ep > 1:
            coll_("ep_collectives", "all_to_all", ep_groups(vs),
                  lay.mb * layers[i].out_elems * lay.pb.act)

    def send(elems, n, to):
        add("pipeline", n)
        if lay.tp > 1 and lay.scatter_gather and not lay.sp:
            nbytes = int(math.ceil(lay.mb * elems * lay.pb.act / lay.tp))
            coll_("tp_collectives", "all_gather", tp_groups(to), nbytes * lay.tp)

    def tables_all_to_all(tables, vs):
        per = {}
        for i in tables:
            per[lay.table_owner[i]] = per.get(lay.table_owner[i], 0) + layers[i].out_elems
        coll_("tables", "all_to_all", [lay.stage_npus(vs)],
              lay.gmb * max(per.values()) * lay.pb.act)

    def buckets(a, e, n, vs):
        """The data-parallel gradients of stage (a, e) after its last backward pass, and the
        optimizer steps (pysim.workload.training.data._Buckets)."""
        cap = int(lay.cfg.workload.bucket_mb * 2 ** 20)
        held, held_layers = 0, 0

        def flush():
            if not held_layers:
                return
            add("compute", n * held_layers, ROOFLINE)
            if not lay.zero:
                coll_("dp_collectives", "all_reduce", dp_groups(vs), held)
            else:
                coll_("dp_collectives", "reduce_scatter", dp_groups(vs), held)
                if lay.zero < 3:
                    coll_("dp_collectives", "all_gather", dp_groups(vs),
                          int(held * lay.pb.weight / lay.pb.grad))

        for i in range(e - 1, a - 1, -1):
            nbytes = lay.grad_bytes(i)
            if layers[i].params == 0 or lay.split_table[i]:
                continue
            if lay.expert[i] and lay.ep > 1:
                for t in lay.ranks_run():
                    groups = [g for g in lay.expert_dp_groups(t, vs) if len(g) > 1]
                    coll_("dp_collectives", "all_reduce", groups, nbytes)
                add("compute", n, ROOFLINE)
                continue
            if lay.dp == 1 or not nbytes:
                add("compute", n, ROOFLINE)
                continue
            held += nbytes
            held_layers += 1
            if lay.cfg.workload.overlap and held >= cap:
                flush()
                held, held_layers = 0, 0
        flush()

    for vs in range(P):
        a, e = lay.stages[vs]
        npus = lay.stage_npus(vs)
        n = len(npus)
        tables = [i for i in range(a, e) if lay.split_table[i]]
        a2a_at = next((i for i in range(max(tables) + 1, e) if not lay.split_table[i]),
                      None) if tables else None
        # every micro-batch but the last makes the same ops: walked once for them all
        for j, mult in ([(0, lay.m - 1)] if lay.m > 1 else []) + [(lay.m - 1, 1)]:
            # forward
            joined = False                    # cur[n] holds more than one op at the end
            for i in range(a, e):
                if a2a_at is not None and i == a2a_at:
                    tables_all_to_all(tables, vs)
                    joined = True
                if lay.split_table[i]:
                    add("tables", 1, ROOFLINE)           # its owner's, for the global batch
                    continue
                forward_layer(i, n, vs)
                joined = False
            if a2a_at is None and tables:
                tables_all_to_all(tables, vs)
                joined = True
            if joined:
                add("tables", n)
            if vs + 1 < P:
                send(layers[e - 1].out_elems, n, vs + 1)
            # backward
            length = 1 + (vs + 1 < P)         # cur[n]: last op, the send into the stage
            if tables:                        # the tables' gradients back to their owners
                tables_all_to_all(tables, vs)
            for i in range(e - 1, a - 1, -1):
                if lay.split_table[i]:
                    if lay.costs(i, lay.gmb)[2] is not None:
                        add("tables", 1, ROOFLINE)
                        if j == lay.m - 1 and layers[i].params:
                            add("tables", 1, ROOFLINE)   # its optimizer step
                    continue
                if lay.recompute == "full" and i in blocks:
                    for k in range(max(blocks[i], a), i + 1):
                        forward_layer(k, n, vs)
                    length = 1
                elif lay.recompute == "selective" and layers[i].kind == "attention" and \
                        any(x <= i < y for x, y in lay.blocks):
                    add("compute", n, ROOFLINE)
                    length = 1
                if combine_after(lay, i) and lay.ep > 1:
                    coll_("ep_collectives", "all_to_all", ep_groups(vs),
                          lay.mb * layers[i].out_elems * lay.pb.act)
                    length = 1
                if lay.seq.scatter_after[i]:
                    coll_("tp_collectives", "all_gather", tp_groups(vs),
                          scatter_bytes(lay, i))
                    length = 1
                zero3(i, vs)
                _, bin_, bw, _ = lay.costs(i, lay.mb)
                ops = (bin_ is not None) + (bw is not None)
                add("compute", n * ops, ROOFLINE)
                if ops:
                    length = 1
                for collective, nbytes in tp_backward(lay, i):
                    coll_("tp_collectives", collective, tp_groups(vs), nbytes)
                    length += 1
                if dispatch_before(lay, i) and lay.ep > 1:
                    coll_("ep_collectives", "all_to_all", ep_groups(vs),
                          lay.mb * layers[i].in_elems * lay.pb.act)
                    length = 1
            if length > 1:
                add("pipeline", n)            # the join of the stage's last ops
            if j == lay.m - 1:
                buckets(a, e, n, vs)
            if vs > 0:
                send(layers[a].in_elems, n, vs - 1)
    mult = 1
    for head, emb in lay.tied:
        se, sh = lay.stage_of[emb] % lay.pp, lay.stage_of[head] % lay.pp
        if se != sh:
            groups = [[lay.npu(d, t, se), lay.npu(d, t, sh)] for d in dps
                      for t in lay.ranks_run()]
            coll_("dp_collectives", "all_reduce", groups, lay.grad_bytes(emb))
    its = lay.cfg.workload.iterations
    return OpCount({k: v * its for k, v in graph.items()},
                   {k: v * its for k, v in engine.items()}, C.exact)


def _cause(lay, part):
    """What makes a part's ops, naming the keys that set it."""
    w = lay.cfg.workload
    m = f"{lay.m} micro-batches (workload.parallel.micro_batches)"
    if w.algorithm == "nccl":        # (NCCL's chunks are its own: workload.chunks unread)
        chunks = "NCCL's own chunks and slices"
        fewer = ("NCCL's ring in streams (workload.nccl_algorithm = 'ring', "
                 "workload.collective_form = 'streams') makes fewer ops")
    else:
        chunks = f"workload.chunks = {w.chunks}"
        fewer = "workload.algorithm tree or halving_doubling makes fewer ops than ring"
    return {
        "compute": f"{lay.model.name}'s {len(lay.model.layers):,} layers (workload.model_params "
                   f"sets them) on {len(lay.npus)} NPUs x {m}",
        "pipeline": f"the sends between {lay.pp} stages x {m}",
        "tp_collectives": f"tensor-parallel collectives (tp = {lay.tp}) in {chunks} x {m}; "
                          f"{fewer}",
        "dp_collectives": f"gradient collectives of workload.bucket_mb = {w.bucket_mb:g} in "
                          f"{chunks}; {fewer}",
        "ep_collectives": f"expert-parallel all-to-alls (ep = {lay.ep}) in workload.chunks = "
                          f"{w.chunks} x {m}",
        "tables": f"the split embedding tables' all-to-alls in workload.chunks = {w.chunks} "
                  f"x {m}"}[part]


def check(b, existing=0, counted=None):
    """Refuse, before building, a training run whose graph would expand past the op limit by
    the upper bound count(b, measure=False) (`existing`: the engine ops of what the graph
    holds already; `counted`: the run's OpCount counted already, by count(b) or count(b,
    measure=False), taken instead of counting again); returns that OpCount."""
    c = count(b, measure=False) if counted is None else counted
    total = c.engine_total + existing
    limit = graph_module.MAX_OPS
    if total <= limit:
        return c
    lay = b.lay
    its = lay.cfg.workload.iterations
    per_it = c.engine_total // its
    worst = max(c.engine, key=c.engine.get)
    what = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in c.engine.items() if v)
    top = f"workload.iterations = {its:,}" if its > 2 and per_it <= limit \
        else _cause(lay, worst)
    raise GraphError(
        f"training (workload.parallel = dp {lay.dp} x tp {lay.tp} x pp {lay.pp}) would "
        f"expand into up to {total:,} engine ops ({what}; about "
        f"{math.ceil(total * BYTES_PER_OP / 1e9)} GB), more than the {limit:,} an op graph "
        f"may have: workload.iterations = {its:,} x {per_it:,} per iteration; most come from "
        f"{top}" + ("; fewer iterations make fewer" if its > 1 and per_it * 2 <= limit
                    else ""))


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
