"""Building the op graph of training iterations: per stage and micro-batch the forward and
backward ops of every layer on every NPU, the collectives of each group, the sends between
stages, in the order the pipeline schedule runs them."""
from __future__ import annotations

import math

from pysim.errors import ConfigError
from pysim.schema import POS, Key, declare
from pysim.workload import collectives as coll
from pysim.workload.astra import astra_graph
from pysim.workload.compile import engine_ops
from pysim._gc import quiet_gc
from pysim import models
from pysim.workload import graph as graph_module
from pysim.workload.graph import GraphError, OpGraph, engine_params
from pysim.workload.training import count
from pysim.workload.training.compute import ACCUMULATE
from pysim.workload.training.data import _Buckets
from pysim.workload.training.experts import combine_after, dispatch_before
from pysim.workload.training.layout import _Layout, load_model
from pysim.workload.training.pipeline import schedule
from pysim.workload.training.repeat import Repeat
from pysim.workload.plan import CollectiveOps, LayerOps, Plan
from pysim.workload.training.tensor import (gather_bytes, scatter_bytes, tp_backward,
                                            tp_forward)


class _Builder:
    def __init__(self, lay: _Layout, graph, prefix, hooks=None):
        self.lay = lay
        self.g = graph
        self.prefix = prefix
        self.hooks = hooks
        cfg = lay.cfg
        self.chunks = cfg.workload.chunks
        self.in_flight = cfg.workload.chunks_in_flight
        self.peers = cfg.workload.all_to_all_peers
        self.grain = cfg.workload.packet_flits * cfg.network.flit_bytes
        idx = {n: i for i, n in enumerate(lay.topo.node_names)}
        ep = engine_params(lay.topo, cfg)[idx[lay.npus[0]]]
        self.sram = ep[1] if lay.engine == "offload" else None
        if lay.engine == "offload":
            coll.check_offload_sram(lay.topo, cfg, lay.npus)
        self.sram_pieces = ep[3]
        self.units = coll.held_units(cfg, lay.topo, lay.engine)   # (see workload.endpoint)
        self.streams = coll.comm_streams(cfg)
        self.sram_state = ({}, {})
        self.orders = {}
        self.parts = {}                  # tp_ranks = 'one': (collective, group, bytes) -> part
        self.step_done = {}              # (iteration, layer, npu) -> the op ending its step
        self.held = {}                   # (iteration, stage) -> [(chunk, _Buckets)]
        self.gathered = {}
        self.repeat = Repeat(self)       # passes built once per class, repeated as arrays
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

    def algorithm(self, collective):
        """The algorithm a collective runs: workload.algorithm for all-reduces, and for
        reduce-scatters and all-gathers with NCCL's (which runs them as rings); else
        direct."""
        if collective == "all_reduce" or (self.lay.algorithm == "nccl" and
                                          collective in ("reduce_scatter", "all_gather")):
            return self.lay.algorithm
        return "direct"

    def _add_collective(self, g, what, collective, group, nbytes, start, done, sram_state,
                        streams):
        """Add a collective over `group` to g, each NPU's part after start[npu]; `done`
        receives {npu: op ending its part}."""
        topo = self.lay.topo
        algorithm = self.algorithm(collective)
        order = self._order(group, algorithm)
        dims = None
        if algorithm in coll.HIERARCHICAL:
            if sorted(order) != sorted(topo.node_names) or topo.coords is None:
                raise ConfigError(f"workload.algorithm = {algorithm!r} runs over every node "
                                  f"of a torus or mesh; the {what} group {group} is not that "
                                  f"(choose ring, bidir_ring, direct, halving_doubling or "
                                  f"tree)")
            order, dims = list(topo.node_names), list(topo.dims)
        built = None
        if self.lay.tp_ranks == "one":   # rank 0's parts alone (the others by symmetry)
            ranks = len(self.lay.ranks_run())
            built = [n for n in group if self.lay.coords[n][1] < ranks]
        if nbytes <= 0:
            done.update({n: g.delay(0, after=start[n]) for n in (built or group)})
            return
        if built is not None and len(built) < len(group) and \
                algorithm not in coll.HIERARCHICAL:
            # the part, made once per collective, group and size (collectives.symmetric)
            key = (collective, tuple(group), int(nbytes))
            if key not in self.parts:
                self.parts[key] = coll.symmetric(
                    collective, algorithm, order, int(nbytes), self.chunks, None,
                    self.lay.engine, self.in_flight, self.grain, self.units,
                    self.lay.cfg.workload.collective_form, peers=self.peers,
                    **coll.nccl_args(self.lay.cfg, topo))
            if self.parts[key] is not None:
                coll.add_parts(self.parts[key], g, order, built, start, done, streams)
                return
        coll.build(collective, algorithm, order, int(nbytes), self.chunks, None,
                   self.lay.engine, self.sram, g, self.in_flight, dims, self.grain,
                   after={n: start[n] for n in group}, done=done, sram_state=sram_state,
                   sram_pieces=self.sram_pieces, units=self.units, streams=streams,
                   form=self.lay.cfg.workload.collective_form, built=built,
                   peers=self.peers, **coll.nccl_args(self.lay.cfg, topo))

    def collective_ops(self, collective, group, nbytes, g):
        """One collective over `group` added to the scratch graph g as `collective` adds it
        (no dependencies, nothing recorded): what pysim.workload.training.count measures."""
        self._add_collective(g, "counted", collective, group, nbytes,
                             {n: [] for n in group}, {},
                             ({}, {}) if self.sram is not None else None,
                             None if self.streams is None else ({}, self.streams[1]))

    def collective(self, what, collective, group, nbytes, start, it, mb, layers,
                   layer_bytes=()):
        """A collective over `group` (NPU names) of nbytes per participant, each NPU's part
        after start[npu]; returns {npu: op ending its part}."""
        first = len(self.g)
        done = {}
        self._add_collective(self.g, what, collective, group, nbytes, start, done,
                             self.sram_state if self.sram is not None else None, self.streams)
        self.plan.collectives.append(CollectiveOps(
            what=what, collective=collective, group=list(group), bytes=int(nbytes),
            iteration=it, micro_batch=mb, layers=list(layers), first=first, last=len(self.g),
            done=dict(done), layer_bytes=list(layer_bytes)))
        return done

    # -------------------------------------------------------------- compute
    def compute(self, npu, i, work, after, name, phase="fwd", samples=None):
        """A compute op of layer i's `phase` (None: an optimizer step) on npu: its
        (FLOPs, bytes) at the roofline of the layer kind, or (workload.compute = 'kernels')
        at the kernel model's time."""
        flops, nbytes = work
        lay = self.lay
        kind = lay.model.layers[i].kind if i is not None else "eltwise"
        peak = lay.peak[(npu, kind)]
        if lay.kernels is not None:
            peak, nbytes = lay.kernels.rate(npu, i, phase, samples or lay.mb, flops, nbytes)
        return self.g.compute(npu, flops=flops, bytes=int(math.ceil(nbytes)), after=after,
                              peak_flops=peak, name=f"{self.prefix}{name}")

    # -------------------------------------------------------------- one iteration
    def iteration(self, it, last, prev_opt):
        """Add iteration `it`; last[npu] is the last op of the previous iteration's schedule
        on npu (updated), prev_opt[(layer, npu)] the previous optimizer steps. Each stage
        runs its schedule (pysim.workload.training.pipeline) over its virtual stages."""
        lay = self.lay
        pp, V = lay.pp, lay.v
        first_op = len(self.g)
        seqs = {s: schedule(lay.schedule, s, pp, lay.m, V) for s in range(pp)}
        pos = {s: 0 for s in range(pp)}
        built = set()                    # (virtual stage, 'F' or 'B', mb) done
        fsend, bsend = {}, {}            # (virtual stage, mb, d, t) -> what it waits for
        self.gathered = {}               # ZeRO-3: per (iteration, mb, layer, pass) its gathers
        while any(pos[s] < len(seqs[s]) for s in range(pp)):
            progressed = False
            for s in range(pp):
                while pos[s] < len(seqs[s]):
                    kind, j, c = seqs[s][pos[s]]
                    vs = c * pp + s
                    need = (vs - 1, "F", j) if kind == "F" else (vs + 1, "B", j)
                    if 0 <= need[0] < pp * V and need not in built:
                        break
                    self.repeat.run(kind, it, vs, j, last, prev_opt,
                                    fsend if kind == "F" else bsend)
                    built.add((vs, kind, j))
                    pos[s] += 1
                    progressed = True
            assert progressed, "pipeline schedule cannot proceed"
        self.tied_embeddings(it, last)
        self.plan.iterations.append((first_op, len(self.g)))

    def tp_collectives(self, what, entries, npus, cur, it, j, i):
        """Each tensor-parallel group's collectives `entries` [(collective, bytes)] in turn,
        after cur[npu]; cur updated to their ends."""
        lay = self.lay
        for collective, nbytes in entries:
            for d in sorted({lay.coords[n][0] for n in npus}):
                grp = lay.tp_group(d, lay.coords[npus[0]][2])
                done = self.collective(what, collective, grp, nbytes,
                                       self.counterpart_starts(grp, cur), it, j, [i],
                                       [nbytes])
                for n in grp:
                    if n in cur:
                        cur[n] = [done[n]]

    def layer_forward(self, it, i, j, npus, cur, prev_opt, tag="fwd", record=True):
        """Layer i's forward op on each NPU of npus after cur[npu] (and the previous
        iteration's optimizer step; ZeRO-3: its weights' all-gather), with the sequence-
        parallel all-gather before it and the tensor-parallel collectives after it."""
        lay = self.lay
        layer = lay.model.layers[i]
        if lay.seq.gather_before[i]:
            self.tp_collectives("tp_all_gather", [("all_gather", gather_bytes(lay, i))], npus,
                                cur, it, j, i)
        if dispatch_before(lay, i) and lay.ep > 1:
            self.ep_all_to_all("ep_dispatch", i, lay.model.layers[i].in_elems, npus, cur, it, j)
        fwd, _, _, stash = lay.costs(i, lay.mb)
        when = "forward" if record else "recompute"
        gathered = self.zero3_gather(it, j, i, npus, self._after_step(cur, i, j, prev_opt),
                                     when)
        if record and i + 1 < len(lay.model.layers) and \
                lay.stage_of[i + 1] == lay.stage_of[i]:
            self.zero3_gather(it, j, i + 1, npus,                  # prefetch the next
                              self._after_step(cur, i + 1, j, prev_opt), when)
        for n in npus:
            deps = list(cur[n])
            if j == 0 and record and (i, n) in prev_opt:
                deps.append(prev_opt[(i, n)])
            if n in gathered:
                deps.append(gathered[n])
            op = self.compute(n, i, fwd, deps, f"it{it} {layer.name} {tag} mb{j} {n}")
            if record:
                self.plan.layer_ops[(it, i, n, j)] = LayerOps(op, None, None, stash)
                if self.hooks is not None:
                    self.hooks.forward(self.g, self.plan, it, i, n, j, op)
            else:
                self.plan.recomputed.append((it, n, op))
            cur[n] = [op]
        for collective, nbytes in tp_forward(lay, i):
            self.tp_collectives("tp_" + collective, [(collective, nbytes)], npus, cur, it,
                                j, i)
        if combine_after(lay, i) and lay.ep > 1:
            self.ep_all_to_all("ep_combine", i, lay.model.layers[i].out_elems, npus, cur, it, j)

    @staticmethod
    def _after_step(cur, i, j, prev_opt):
        """cur, with the previous iteration's step of layer i on each NPU for micro-batch 0
        (ZeRO-3 gathers the weights that step updated)."""
        if j:
            return cur
        return {n: list(v) + ([prev_opt[(i, n)]] if (i, n) in prev_opt else [])
                for n, v in cur.items()}

    def ep_all_to_all(self, what, i, elems, npus, cur, it, j):
        """Expert parallelism: an all-to-all of `elems` activations per sample over each
        expert-parallel group of npus, after cur[npu]; cur updated to its ends."""
        lay = self.lay
        nbytes = lay.mb * elems * lay.pb.act
        seen = set()
        for n in npus:
            grp = lay.ep_group(n)
            if grp[0] in seen:
                continue
            seen.add(grp[0])
            done = self.collective(what, "all_to_all", grp, nbytes,
                                   self.counterpart_starts(grp, cur), it, j, [i], [nbytes])
            for m in grp:
                if m in cur:
                    cur[m] = [done[m]]

    def forward(self, it, s, j, last, prev_opt, fsend):
        lay, g = self.lay, self.g
        a, b = lay.stages[s]
        npus = lay.stage_npus(s)
        cur = {}
        for n in npus:
            d, t, _ = lay.coords[n]
            cur[n] = ([last[n]] if n in last else []) + list(fsend.get((s, j, d, t), []))
        self.receive_gather(it, j, s, npus, cur, fsend)
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
            if not lay.split_table[i]:
                self.layer_forward(it, i, j, npus, cur, prev_opt)
                continue
            for n in npus:
                if lay.table_owner[i] != n:
                    continue
                deps = list(start[n])
                if j == 0 and (i, n) in prev_opt:
                    deps.append(prev_opt[(i, n)])
                fwd, _, bw, stash = lay.costs(i, lay.gmb)   # all replicas' samples
                op = self.compute(n, i, fwd, deps, f"it{it} {layer.name} fwd mb{j} {n}",
                                  "fwd", lay.gmb)
                self.plan.layer_ops[(it, i, n, j)] = LayerOps(op, None, None, stash)
                if self.hooks is not None:
                    self.hooks.forward(g, self.plan, it, i, n, j, op)
                table_last[n] = op
        if a2a_at is None and tables:      # tables at the stage's end: exchange there
            done = self._all_to_all(it, j, npus, table_last, start, tables, "forward")
            for n in npus:
                cur[n] = cur[n] + [done[n]]
        for n in npus:
            last[n] = cur[n][-1] if len(cur[n]) == 1 else g.delay(0, after=cur[n])
        if s + 1 < lay.pp * lay.v:       # the activations go to the next stage
            self.stage_send(it, j, s, s + 1, b - 1, lay.model.layers[b - 1].out_elems,
                            npus, last, fsend, "forward", "act")

    def stage_send(self, it, j, s, to, i, elems, npus, last, into, direction, label):
        """The activations (or their gradients) of layer i's boundary from virtual stage s to
        `to`, from each NPU to its counterpart there. With tensor parallelism each NPU of a
        group holds the same tensor: Megatron-LM's scatter-gather optimisation
        (workload.parallel.scatter_gather, default true) sends 1/tp of it from each and
        all-gathers it over the receiving group; under sequence parallelism the tensor is
        already split by sequence and its parts are sent as they are. With
        workload.parallel.p2p_sync the sending NPU's next op waits for its send (Megatron-LM's
        p2p_communication: batch_isend_irecv, then torch.cuda.synchronize())."""
        lay, g = self.lay, self.g
        nbytes = lay.mb * elems * lay.pb.act
        split = lay.tp > 1 and (lay.sp or lay.scatter_gather)
        gather = split and not lay.sp
        if split:
            nbytes /= lay.tp
        nbytes = int(math.ceil(nbytes))
        sent = {}
        for n in npus:
            d, t, _ = lay.coords[n]
            dst = lay.npu(d, t, to % lay.pp)
            op = g.send(n, dst, nbytes, after=[last[n]],
                        name=f"{self.prefix}it{it} {label} s{s}->s{to} mb{j} {n}")
            sent[dst] = op
            into[(to, j, d, t)] = [op]
            if lay.p2p_sync:             # the stage goes on once its send is done
                last[n] = op
            self.plan.sends.append(dict(iteration=it, micro_batch=j, direction=direction,
                                        src=n, dst=dst, bytes=nbytes, op=op))
        if gather:                       # all-gathered by the receiving stage in its turn
            into[(to, j, "gather")] = (i, nbytes * lay.tp)

    def receive_gather(self, it, j, s, npus, cur, into):
        """The scatter-gather's all-gather of what virtual stage s received for micro-batch
        j, over each tensor-parallel group of npus, when the stage reaches that pass in its
        schedule (after what it ran before and the piece it received: the receiver's
        program order, and so its collectives' stream order); cur updated to its ends."""
        got = into.pop((s, j, "gather"), None)
        if got is None:
            return
        i, nbytes = got
        lay = self.lay
        for d in sorted({lay.coords[n][0] for n in npus}):
            grp = lay.tp_group(d, s)
            done = self.collective("pp_all_gather", "all_gather", grp, nbytes,
                                   self.counterpart_starts(grp, cur), it, j, [i])
            for n in grp:
                if n in cur:
                    cur[n] = [done[n]]

    def counterpart_starts(self, group, cur):
        """Each member's start in cur; a member whose passes are not built (replicas or
        tp_ranks = 'one') starts with its counterpart (_Layout.counterpart), as it would by
        symmetry."""
        lay = self.lay
        return {n: list(cur[n] if n in cur else cur.get(lay.counterpart(n), []))
                for n in group}

    def zero3_gather(self, it, j, i, npus, cur, when):
        """ZeRO-3: layer i's weights all-gathered over each data-parallel group of npus
        before its `when` pass (forward, backward or recompute) of micro-batch j, issued as
        the layer before it starts (cur: what that layer waits for), so that one layer's
        gather runs ahead of the compute; returns {npu: its end}."""
        lay = self.lay
        if lay.zero < 3 or lay.dp == 1 or not lay.model.layers[i].params:
            return {}
        key = (it, j, i, when)
        if key not in self.gathered:
            nbytes = lay.model.layers[i].params * lay.pad[i] * lay.pb.weight / lay.splits[i][2]
            ends = {}
            for t in sorted({lay.coords[n][1] for n in npus}):
                grp = lay.dp_group(t, lay.coords[npus[0]][2])
                ends.update(self.collective("zero3_all_gather", "all_gather", grp,
                                            int(math.ceil(nbytes)),
                                            self.counterpart_starts(grp, cur), it, j, [i]))
            self.gathered[key] = ends
        return self.gathered[key]

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
            cur[n] = [last[n]] + list(bsend.get((s, j, d, t), []))
        self.receive_gather(it, j, s, npus, cur, bsend)
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
        block_end = {bb - 1: aa for aa, bb in lay.blocks}
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
                                      f"it{it} {layer.name} bwd_weight mb{j} {n}",
                                      "bwd_weight", lay.gmb)
                    self.plan.layer_ops[(it, i, n, j)].bwd_weight = op
                    if final:
                        self.step_done[(it, i, n)] = self._optimizer(it, i, n, [op])
                continue
            if lay.recompute == "full" and i in block_end:
                # the transformer layer's forward again (its collectives too), from its input
                for k in range(max(block_end[i], a), i + 1):
                    self.layer_forward(it, k, j, npus, cur, {}, "recompute", record=False)
            elif lay.recompute == "selective" and layer.kind == "attention" and \
                    (lay.blocks and any(aa <= i < bb for aa, bb in lay.blocks)):
                fwd, _, _, _ = lay.costs(i, lay.mb)
                for n in npus:
                    cur[n] = [self.compute(n, i, fwd, cur[n],
                                           f"it{it} {layer.name} recompute mb{j} {n}")]
                    self.plan.recomputed.append((it, n, cur[n][0]))
            if combine_after(lay, i) and lay.ep > 1:     # the combine's gradient
                self.ep_all_to_all("ep_combine_grad", i, layer.out_elems, npus, cur, it, j)
            if lay.seq.scatter_after[i]:     # the output gradient, whole again
                self.tp_collectives("tp_all_gather", [("all_gather", scatter_bytes(lay, i))],
                                    npus, cur, it, j, i)
            gathered = self.zero3_gather(it, j, i, npus, cur, "backward")
            _, bin_, bw, _ = lay.costs(i, lay.mb)
            for n in npus:
                lo = self.plan.layer_ops[(it, i, n, j)]
                deps = list(cur[n]) + ([gathered[n]] if n in gathered else [])
                if self.hooks is not None:
                    deps = deps + list(self.hooks.backward(g, self.plan, it, i, n, j) or [])
                if bin_ is not None:
                    lo.bwd_input = self.compute(n, i, bin_, deps,
                                                f"it{it} {layer.name} bwd_input mb{j} {n}",
                                                "bwd_input")
                    deps = [lo.bwd_input]
                if bw is not None:
                    lo.bwd_weight = self.compute(n, i, bw, deps,
                                                 f"it{it} {layer.name} bwd_weight mb{j} {n}",
                                                 ACCUMULATE if lay.grad_add and j else
                                                 "bwd_weight")
                    deps = [lo.bwd_weight]
                cur[n] = deps
            for collective, nbytes in tp_backward(lay, i):
                # the input gradient's collective: beside the weight gradient's product
                # (tp_overlap), or after it
                for d in sorted({lay.coords[n][0] for n in npus}):
                    grp = lay.tp_group(d, s)
                    st = self.counterpart_starts(grp, {
                        n: ([self.plan.layer_ops[(it, i, n, j)].bwd_input]
                            if lay.tp_overlap else list(cur[n])) for n in grp if n in cur})
                    done = self.collective("tp_" + collective, collective, grp, nbytes, st,
                                           it, j, [i], [nbytes])
                    for n in grp:
                        if n in cur:
                            cur[n] = cur[n] + [done[n]] if lay.tp_overlap else [done[n]]
            if dispatch_before(lay, i) and lay.ep > 1:   # the dispatch's gradient
                self.ep_all_to_all("ep_dispatch_grad", i, layer.in_elems, npus, cur, it, j)
            if i == a2a_at:                # the tables' gradients go back to their owners
                st = {n: [cur[n][0]] for n in npus}
                table_grad = self._all_to_all(it, j, npus, {}, st, tables, "backward")
            if final:
                buckets.add(i, {n: cur[n] for n in npus})
        for n in npus:
            last[n] = cur[n][0] if len(cur[n]) == 1 else g.delay(0, after=cur[n])
        if final:
            self.close_buckets(it, s, buckets, {n: [last[n]] for n in npus})
        if s > 0:                        # the input gradient goes back to the stage before
            self.stage_send(it, j, s, s - 1, a, lay.model.layers[a].in_elems, npus, last,
                            bsend, "backward", "grad")

    def close_buckets(self, it, s, buckets, ready):
        """Virtual stage s's gradients reduced after its last backward pass (ready). Without
        overlap and with model chunks (interleaving), every chunk's wait for the stage's
        whole backward pass, then go in chunk order: Megatron-LM's local data parallelism
        all-reduces each chunk's buffer after the schedule returns, then steps
        (megatron/training.py, train_step: `for model_module in model:
        model_module.allreduce_gradients()`). With step_after = 'all' and model chunks, with
        overlap or without, every step of the stage waits for every chunk's gradients."""
        lay = self.lay
        if lay.v == 1 or (buckets.overlap and not buckets.step_all):
            buckets.close(ready)
            return
        chunk, stage = divmod(s, lay.pp)
        held = self.held.setdefault((it, stage), [])
        held.append((chunk, buckets))
        if buckets.overlap:              # its all-reduces as it ends; its steps wait (below)
            buckets.close(ready, step=False)
        if len(held) < lay.v:
            return
        del self.held[(it, stage)]
        order = [b for _, b in sorted(held, key=lambda x: x[0])]
        if not buckets.overlap:
            for b in order:
                b.flush(ready)
            for b in order:
                b.close(ready, step=False)
        if buckets.step_all:
            order[0].step_every(order[1:])

    def tied_embeddings(self, it, last):
        """A tied output layer (the LM head sharing the token embedding's weights) on another
        stage than the embedding: Megatron-LM keeps a copy on the last stage and all-reduces
        the two copies' gradients between the first and last stage after the backward pass."""
        lay = self.lay
        for head, emb in lay.tied:
            se, sh = lay.stage_of[emb] % lay.pp, lay.stage_of[head] % lay.pp
            if se == sh:
                continue
            nbytes = lay.grad_bytes(emb)
            for d in lay.replicas_run():
                for t in lay.ranks_run():
                    grp = [lay.npu(d, t, se), lay.npu(d, t, sh)]
                    done = self.collective("tied_all_reduce", "all_reduce", grp, nbytes,
                                           {n: [last[n]] for n in grp}, it, None, [emb, head])
                    for n in grp:
                        last[n] = done[n]

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


SAMPLE = 3       # blocks of the small models a long zoo model's compute is extrapolated from


def refuse_before_building(cfg, topo, npus=None, existing=0):
    """A zoo model of many repeated blocks (workload.model_params.layers) past the op limit is
    refused before its layer list is built: its compute ops (count.count, per layer, rank,
    micro-batch and iteration) are counted on the same model with SAMPLE, SAMPLE + 1 and
    SAMPLE + 2 blocks and extrapolated at the smaller of the two increments per block -- a
    lower bound of the run's ops (collectives and sends come on top), so a run this refuses
    the full count would refuse too. Anything the small models cannot show (a bad key, a
    layout that needs more layers) is left to the full build, which reports it. Returns the
    first small model's layout (None if none was made), whose NPUs, coordinates and specs the
    full model's layout takes."""
    w = cfg.workload
    found, like = _least_compute(cfg, topo, npus)
    if found is None:
        return like
    least, per_block = found
    blocks = w.model_params["layers"]
    limit = graph_module.MAX_OPS
    if least + existing > limit:
        raise GraphError(
            f"training {w.model} with workload.model_params.layers = {blocks:,} would expand "
            f"into at least {least:,} engine ops of compute alone (about "
            f"{math.ceil(least * count.BYTES_PER_OP / 1e9)} GB), more than the {limit:,} an "
            f"op graph may have: {per_block:,} per block (its layers on every rank, "
            f"micro-batch and iteration; workload.iterations = {w.iterations:,}); fewer "
            f"layers, ranks, micro-batches or iterations make fewer")
    return like


def least_compute(cfg, topo, npus=None):
    """(at least how many engine ops of compute, per block), for a zoo model of
    workload.model_params.layers blocks, from small models (refuse_before_building); None
    where the model has no such key or the small models cannot be laid out."""
    return _least_compute(cfg, topo, npus)[0]


def _least_compute(cfg, topo, npus):
    """least_compute, and the first small model's layout (None if none was laid out): the
    full model's layout takes its NPUs, coordinates and specs (_Layout's `like`)."""
    w = cfg.workload
    params = dict(w.model_params or {})
    blocks = params.get("layers")
    if w.model not in models.names() or isinstance(blocks, bool) or \
            not isinstance(blocks, int) or blocks <= SAMPLE + 2:
        return None, None
    made = []

    def compute(k):
        m = models.get(w.model, **{**params, "layers": k})
        made.append(_Layout(cfg, topo, m, npus, like=made[0] if made else None))
        return count.count(_Builder(made[-1], OpGraph(), ""), measure=False).engine["compute"]
    try:
        c = [compute(SAMPLE + d) for d in range(3)]
    except (ConfigError, GraphError):
        return None, None
    per_block = min(c[1] - c[0], c[2] - c[1])
    return (c[0] + (blocks - SAMPLE) * per_block, per_block), made[0]


@quiet_gc
def training_graph(cfg, topo, model=None, npus=None, graph=None, prefix="", hooks=None,
                   counted=None, op_count=None):
    """Add workload.iterations training iterations to `graph` (see the module's doc); returns
    (graph, plan). counted(op_count): called with the run's pysim.workload.training.count
    OpCount (an upper bound) once it is known to fit, before any op is built. op_count: that
    OpCount counted already by the caller (count.count of the same configuration, model
    and NPUs), checked against the limit instead of counting again."""
    if graph is not None and not isinstance(graph, OpGraph):
        raise TypeError(f"training_graph(graph): expected an OpGraph or None, not "
                        f"{type(graph).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"training_graph(prefix): expected a str, not {type(prefix).__name__}")
    like = None
    if model is None:
        like = refuse_before_building(cfg, topo, npus,
                                      engine_ops(graph) if graph is not None else 0)
        model = load_model(cfg)
    if not hasattr(model, "layers"):
        raise ConfigError(f"model = {model!r}: expected a pysim.models.Model (pysim.models.get"
                          f"(name) or pysim.models.load(path)), or None for workload.model")
    if model.given_times:
        count.check_given(model, len(npus if npus is not None else cfg.workload.group or
                                     [k for k in topo.node_kinds if k == "npu"]),
                          cfg.workload.iterations)
        return astra_graph(cfg, topo, model, npus, graph, prefix)
    lay = _Layout(cfg, topo, model, npus, like=like)
    g = graph if graph is not None else OpGraph()
    b = _Builder(lay, g, prefix, hooks)
    if cfg.workload.memory.policy == "none":
        lay.check_memory()               # else the memory plan decides what stays in HBM
    c = count.check(b, engine_ops(g), op_count)    # refused at once past the op limit
    if counted is not None:              # (the run's estimate: for a plan that fits)
        counted(c)
    b.plan.layout = lay
    last, prev_opt = {}, {}
    # the passes' names are unique by construction (iteration, layer, pass, micro-batch,
    # NPU): in a graph of no names before, those of repeated passes are indexed when first
    # looked up (OpGraph._add_names)
    g._defer = not g._by_name and not g._unindexed
    try:
        for it in range(cfg.workload.iterations):
            b.iteration(it, last, prev_opt)
            prev_opt = {(i, n): op for (it_, i, n), op in b.step_done.items()
                        if it_ == it and op is not None}
    finally:
        g._defer = False
    if cfg.is_set("workload.all_to_all_peers") and \
            not any(c.collective == "all_to_all" for c in b.plan.collectives):
        raise ConfigError(f"workload.all_to_all_peers = {cfg.workload.all_to_all_peers!r} has "
                          f"no effect: this plan of {model.name} runs no all-to-all (expert "
                          f"parallelism, workload.parallel.ep > 1, and split embedding tables "
                          f"run them); leave it out")
    return g, b.plan



declare(Key("workload", "iterations", "int", 2, "-",
            "Training: iterations simulated; the last is reported.", POS))
