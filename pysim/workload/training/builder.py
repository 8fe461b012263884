"""Building the op graph of training iterations: per stage and micro-batch the forward and
backward ops of every layer on every NPU, the collectives of each group, the sends between
stages, in the order the pipeline schedule runs them."""
from __future__ import annotations

import math

from pysim.errors import ConfigError
from pysim.workload import collectives as coll
from pysim.workload.graph import OpGraph, engine_params
from pysim.workload.training.data import _Buckets
from pysim.workload.training.layout import _Layout, load_model
from pysim.workload.training.pipeline import schedule
from pysim.workload.training.records import CollectiveOps, LayerOps, Plan
from pysim.workload.training.tensor import tp_backward, tp_forward


class _Builder:
    def __init__(self, lay: _Layout, graph, prefix, hooks=None):
        self.lay = lay
        self.g = graph
        self.prefix = prefix
        self.hooks = hooks
        cfg = lay.cfg
        self.chunks = cfg.workload.chunks
        self.in_flight = cfg.workload.chunks_in_flight
        self.grain = cfg.workload.packet_flits * cfg.network.flit_bytes
        idx = {n: i for i, n in enumerate(lay.topo.node_names)}
        ep = engine_params(lay.topo, cfg)[idx[lay.npus[0]]]
        self.sram = ep[1] if lay.engine == "offload" else None
        if lay.engine == "offload":
            coll.check_offload_sram(lay.topo, cfg, lay.npus)
        self.sram_pieces = ep[3]
        self.sram_state = ({}, {})
        self.orders = {}
        self.plan = Plan(model=lay.model, precision=lay.precision,
                         optimizer_name=lay.optimizer,
                         batch=lay.batch, dp=lay.dp, tp=lay.tp, pp=lay.pp,
                         micro_batches=lay.m, schedule=lay.schedule, order=lay.order,
                         tables=lay.tables, engine=lay.engine, algorithm=lay.algorithm,
                         npus=list(lay.npus), coords=dict(lay.coords),
                         stages=list(lay.stages), table_owner=dict(lay.table_owner),
                         memory=dict(lay.memory))

    # -------------------------------------------------------------- collectives
    def _order(self, group, algorithm):
        key = (tuple(group), algorithm)
        if key not in self.orders:
            if algorithm in coll.RING_ALGORITHMS:
                shim = _NoRingOrder(self.lay.cfg) if sorted(group) != sorted(
                    self.lay.cfg.workload.ring_order or []) else self.lay.cfg
                self.orders[key] = coll.ring_order(shim, self.lay.topo, list(group))
            else:
                self.orders[key] = list(group)
        return self.orders[key]

    def collective(self, what, collective, group, nbytes, start, it, mb, layers,
                   layer_bytes=()):
        """A collective over `group` (NPU names) of nbytes per participant, each NPU's part
        after start[npu]; returns {npu: op ending its part}."""
        topo = self.lay.topo
        algorithm = self.lay.algorithm if collective == "all_reduce" else "direct"
        order = self._order(group, algorithm)
        dims = None
        if algorithm == "hierarchical":
            if sorted(order) != sorted(topo.node_names) or topo.coords is None:
                raise ConfigError(f"workload.algorithm = 'hierarchical' runs over every node "
                                  f"of a torus or mesh; the {what} group {group} is not that "
                                  f"(choose ring, bidir_ring, direct, halving_doubling or "
                                  f"tree)")
            order, dims = list(topo.node_names), list(topo.dims)
        first = len(self.g)
        done = {}
        if nbytes <= 0:
            done = {n: self.g.delay(0, after=start[n]) for n in group}
        else:
            coll.build(collective, algorithm, order, int(nbytes), self.chunks, None,
                       self.lay.engine, self.sram, self.g, self.in_flight, dims, self.grain,
                       after={n: start[n] for n in group}, done=done,
                       sram_state=self.sram_state if self.sram is not None else None,
                       sram_pieces=self.sram_pieces)
        self.plan.collectives.append(CollectiveOps(
            what=what, collective=collective, group=list(group), bytes=int(nbytes),
            iteration=it, micro_batch=mb, layers=list(layers), first=first, last=len(self.g),
            done=dict(done), layer_bytes=list(layer_bytes)))
        return done

    # -------------------------------------------------------------- compute
    def compute(self, npu, i, work, after, name):
        flops, nbytes = work
        kind = self.lay.model.layers[i].kind if i is not None else "eltwise"
        return self.g.compute(npu, flops=flops, bytes=int(math.ceil(nbytes)), after=after,
                              peak_flops=self.lay.peak[(npu, kind)],
                              name=f"{self.prefix}{name}")

    # -------------------------------------------------------------- one iteration
    def iteration(self, it, last, prev_opt):
        """Add iteration `it`; last[npu] is the last op of the previous iteration's schedule
        on npu (updated), prev_opt[(layer, npu)] the previous optimizer steps."""
        lay = self.lay
        first_op = len(self.g)
        seqs = {s: schedule(lay.schedule, s, lay.pp, lay.m) for s in range(lay.pp)}
        pos = {s: 0 for s in range(lay.pp)}
        built = set()                    # (stage, 'F' or 'B', mb) done
        fsend, bsend = {}, {}            # (stage, mb, d, t) -> the send into that stage
        while any(pos[s] < len(seqs[s]) for s in range(lay.pp)):
            progressed = False
            for s in range(lay.pp):
                while pos[s] < len(seqs[s]):
                    kind, j = seqs[s][pos[s]]
                    need = (s - 1, "F", j) if kind == "F" else (s + 1, "B", j)
                    if 0 <= need[0] < lay.pp and need not in built:
                        break
                    if kind == "F":
                        self.forward(it, s, j, last, prev_opt, fsend)
                    else:
                        self.backward(it, s, j, last, bsend)
                    built.add((s, kind, j))
                    pos[s] += 1
                    progressed = True
            assert progressed, "pipeline schedule cannot proceed"
        self.plan.iterations.append((first_op, len(self.g)))

    def forward(self, it, s, j, last, prev_opt, fsend):
        lay, g = self.lay, self.g
        a, b = lay.stages[s]
        npus = lay.stage_npus(s)
        cur = {}
        for n in npus:
            d, t, _ = lay.coords[n]
            cur[n] = ([last[n]] if n in last else []) + \
                ([fsend[(s, j, d, t)]] if (s, j, d, t) in fsend else [])
        start = {n: list(cur[n]) for n in npus}
        tables = [i for i in range(a, b) if lay.split_table[i]]
        a2a_at = None
        if tables:
            a2a_at = next((i for i in range(max(tables) + 1, b) if not lay.split_table[i]),
                          None)
        table_last = {}
        for i in range(a, b):
            layer = lay.model.layers[i]
            if a2a_at is not None and i == a2a_at:
                done = self._all_to_all(it, j, npus, table_last, start, tables, "forward")
                for n in npus:
                    cur[n] = cur[n] + [done[n]]
            ops = {}
            for n in npus:
                deps = list(cur[n] if not lay.split_table[i] else start[n])
                if j == 0 and (i, n) in prev_opt:
                    deps.append(prev_opt[(i, n)])
                if lay.split_table[i]:
                    if lay.table_owner[i] != n:
                        continue
                    fwd, _, bw, stash = lay.costs(i, lay.gmb)   # all replicas' samples
                else:
                    fwd, _, bw, stash = lay.costs(i, lay.mb)
                op = self.compute(n, i, fwd, deps, f"it{it} {layer.name} fwd mb{j} {n}")
                ops[n] = op
                self.plan.layer_ops[(it, i, n, j)] = LayerOps(op, None, None, stash)
                if self.hooks is not None:
                    self.hooks.forward(g, self.plan, it, i, n, j, op)
                if lay.split_table[i]:
                    table_last[n] = op
                else:
                    cur[n] = [op]
            if lay.split_table[i]:
                continue
            for extra, nbytes in tp_forward(lay, i):
                for d in range(lay.dp):
                    grp = lay.tp_group(d, s)
                    done = self.collective("tp_all_reduce", "all_reduce", grp, nbytes,
                                           {n: cur[n] for n in grp}, it, j, [i], [nbytes])
                    for n in grp:
                        cur[n] = [done[n]]
        if a2a_at is None and tables:      # tables at the stage's end: exchange there
            done = self._all_to_all(it, j, npus, table_last, start, tables, "forward")
            for n in npus:
                cur[n] = cur[n] + [done[n]]
        for n in npus:
            last[n] = cur[n][-1] if len(cur[n]) == 1 else g.delay(0, after=cur[n])
        if s + 1 < lay.pp:               # the activations go to the next stage
            nbytes = lay.mb * lay.model.layers[b - 1].out_elems * lay.pb.act
            for n in npus:
                d, t, _ = lay.coords[n]
                dst = lay.npu(d, t, s + 1)
                op = g.send(n, dst, int(math.ceil(nbytes)), after=[last[n]],
                            name=f"{self.prefix}it{it} act s{s}->s{s + 1} mb{j} {n}")
                fsend[(s + 1, j, d, t)] = op
                self.plan.sends.append(dict(iteration=it, micro_batch=j, direction="forward",
                                            src=n, dst=dst, bytes=int(math.ceil(nbytes)),
                                            op=op))

    def _all_to_all(self, it, j, npus, table_last, start, tables, direction):
        """The embeddings of the split tables, computed by their owners for the global
        batch, exchanged so that each NPU holds its samples' rows of every table (forward),
        or their gradients sent back (backward): per NPU, the most table bytes an NPU
        holds for the global batch (the direct all-to-all sends each other NPU 1/p)."""
        lay = self.lay
        per = {n: 0 for n in npus}
        for i in tables:
            per[lay.table_owner[i]] += lay.model.layers[i].out_elems
        nbytes = lay.gmb * max(per.values()) * lay.pb.act
        st = {n: ([table_last[n]] if n in table_last else list(start[n])) for n in npus}
        return self.collective(f"all_to_all_{direction}", "all_to_all", npus, nbytes, st, it,
                               j, tables, [lay.gmb * lay.model.layers[i].out_elems *
                                           lay.pb.act for i in tables])

    def backward(self, it, s, j, last, bsend):
        lay, g = self.lay, self.g
        a, b = lay.stages[s]
        npus = lay.stage_npus(s)
        cur = {}
        for n in npus:
            d, t, _ = lay.coords[n]
            cur[n] = [last[n]] + ([bsend[(s, j, d, t)]] if (s, j, d, t) in bsend else [])
        tables = [i for i in range(a, b) if lay.split_table[i]]
        a2a_at = None
        if tables:
            a2a_at = next((i for i in range(max(tables) + 1, b) if not lay.split_table[i]),
                          None)
        final = j == lay.m - 1           # the last backward of either schedule
        buckets = _Buckets(self, it, s, final)
        table_grad = None
        if a2a_at is None and tables:
            table_grad = self._all_to_all(it, j, npus, {n: cur[n][0] for n in npus},
                                          cur, tables, "backward")
        for i in range(b - 1, a - 1, -1):
            layer = lay.model.layers[i]
            if lay.split_table[i]:
                for n in npus:
                    if lay.table_owner[i] != n:
                        continue
                    _, _, bw, _ = lay.costs(i, lay.gmb)
                    if bw is None:
                        continue
                    op = self.compute(n, i, bw, [table_grad[n]],
                                      f"it{it} {layer.name} bwd_weight mb{j} {n}")
                    self.plan.layer_ops[(it, i, n, j)].bwd_weight = op
                    if final:
                        self._optimizer(it, i, n, [op])
                continue
            _, bin_, bw, _ = lay.costs(i, lay.mb)
            for n in npus:
                lo = self.plan.layer_ops[(it, i, n, j)]
                deps = cur[n]
                if self.hooks is not None:
                    deps = list(deps) + list(self.hooks.backward(g, self.plan, it, i, n, j)
                                             or [])
                if bin_ is not None:
                    lo.bwd_input = self.compute(n, i, bin_, deps,
                                                f"it{it} {layer.name} bwd_input mb{j} {n}")
                    deps = [lo.bwd_input]
                if bw is not None:
                    lo.bwd_weight = self.compute(n, i, bw, deps,
                                                 f"it{it} {layer.name} bwd_weight mb{j} {n}")
                    deps = [lo.bwd_weight]
                cur[n] = deps
            nbytes = tp_backward(lay, i)
            if nbytes:
                for d in range(lay.dp):
                    grp = lay.tp_group(d, s)
                    st = {n: [self.plan.layer_ops[(it, i, n, j)].bwd_input] for n in grp}
                    done = self.collective("tp_all_reduce", "all_reduce", grp, nbytes, st,
                                           it, j, [i], [nbytes])
                    for n in grp:
                        cur[n] = cur[n] + [done[n]]
            if i == a2a_at:                # the tables' gradients go back to their owners
                st = {n: [cur[n][0]] for n in npus}
                table_grad = self._all_to_all(it, j, npus, {}, st, tables, "backward")
            if final:
                buckets.add(i, {n: cur[n] for n in npus})
        for n in npus:
            last[n] = cur[n][0] if len(cur[n]) == 1 else g.delay(0, after=cur[n])
        if final:
            buckets.close({n: [last[n]] for n in npus})
        if s > 0:                        # the input gradient goes back to the stage before
            nbytes = lay.mb * lay.model.layers[a].in_elems * lay.pb.act
            for n in npus:
                d, t, _ = lay.coords[n]
                dst = lay.npu(d, t, s - 1)
                op = g.send(n, dst, int(math.ceil(nbytes)), after=[last[n]],
                            name=f"{self.prefix}it{it} grad s{s}->s{s - 1} mb{j} {n}")
                bsend[(s - 1, j, d, t)] = op
                self.plan.sends.append(dict(iteration=it, micro_batch=j, direction="backward",
                                            src=n, dst=dst, bytes=int(math.ceil(nbytes)),
                                            op=op))

    def _optimizer(self, it, i, npu, after):
        work = self.lay.optimizer_work(i, npu)
        if work is None:
            return None
        op = self.compute(npu, None, work, after,
                          f"it{it} {self.lay.model.layers[i].name} optimizer {npu}")
        self.plan.optimizer[(it, i, npu)] = op
        return op


class _NoRingOrder:
    """The config seen by ring_order for a subgroup: workload.ring_order (which orders every
    participant of one collective) does not apply."""

    def __init__(self, cfg):
        self.workload = _Ns(ring_order=None)


class _Ns:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def training_graph(cfg, topo, model=None, npus=None, graph=None, prefix="", hooks=None):
    """Add workload.iterations training iterations to `graph` (see the module's doc); returns
    (graph, plan)."""
    if model is None:
        model = load_model(cfg)
    if model.given_times:
        from pysim.workload.astra import astra_graph
        return astra_graph(cfg, topo, model, npus, graph, prefix)
    lay = _Layout(cfg, topo, model, npus)
    if cfg.workload.memory.policy == "none":
        lay.check_memory()               # else the memory plan decides what stays in HBM
    g = graph if graph is not None else OpGraph()
    b = _Builder(lay, g, prefix, hooks)
    b.plan.layout = lay
    last, prev_opt = {}, {}
    for it in range(cfg.workload.iterations):
        b.iteration(it, last, prev_opt)
        prev_opt = {(i, n): op for (it_, i, n), op in b.plan.optimizer.items()
                    if it_ == it}
    return g, b.plan

