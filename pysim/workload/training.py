"""Training iterations: a model and a parallel plan turned into one op graph, and run.

    pysim run topologies/dgx1-v100.toml --set workload.kind=training \\
        --set workload.model=resnet50 --set workload.batch=256

A model (pysim.models) is an ordered table of layers. A plan lays `dp x tp x pp` NPUs out as
data-parallel replicas, tensor-parallel groups and pipeline stages, and the iteration becomes
ops: per layer, NPU and micro-batch a roofline compute op for the forward pass, one for the
input gradient and one for the weight gradient; per layer and NPU an optimizer step; the
collectives of each group (pysim.workload.collectives, on the group's NPUs and the physical
topology, run by `workload.engine`: the NPU itself by default, or its offload engine); and
sends between pipeline stages. See docs/training.md for the semantics and the results.

Building on it (memory plans, job streams) -- the API:

    graph, plan = training_graph(cfg, topo, model=None, npus=None, graph=None, prefix="")

adds `workload.iterations` iterations of `model` (default: workload.model) to `graph` (a new
OpGraph if None), on the NPUs `npus` (names, in rank order; default workload.group, else
every NPU of `topo`), every op name starting with `prefix` (so that several jobs can share
one graph). Ops are added in the order the schedule runs them, so an op added afterwards may
depend on any of them. `plan` (a `Plan`) records what was built, by op id:

- `plan.layer_ops[(iteration, layer, npu, micro_batch)]` -> `LayerOps(fwd, bwd_input,
  bwd_weight, stash_bytes)`: the forward op that produces the layer's stashed activations on
  that NPU, the backward ops (None where the layer has no such work there), and the bytes
  kept from forward to backward; `plan.stash(...)` gives (producer, last consumer, bytes).
- `plan.optimizer[(iteration, layer, npu)]` -> the optimizer step's op id.
- `plan.collectives`: `CollectiveOps` records (what, collective, group, bytes, iteration,
  micro_batch, layers, the op id range [first, last), `done`: per NPU the op that ends its
  part).
- `plan.sends`: pipeline sends (iteration, micro_batch, direction, src, dst, bytes, op).
- `plan.iterations[i]`: the op id range [first, last) of iteration i; `plan.npus`,
  `plan.coords[npu]` = (dp index, tp index, pp stage), `plan.stages` (layer ranges).

`hooks` (optional) lets a memory plan add its ops while the iteration is built: an object with
`forward(graph, plan, iteration, layer, npu, micro_batch, op)`, called right after a layer's
forward op is added (e.g. to add an offload of its stash after it), and
`backward(graph, plan, iteration, layer, npu, micro_batch) -> [op ids]`, called before the
layer's backward ops are added on that NPU, whose ops the first of them then waits for (e.g.
a prefetch of the stash, added there, after the ops it should follow).

`run_training(cfg)` (workload.kind = "training") builds, runs (pysim.workload.graph.run_graph)
and reports a `TrainingResult`.
"""
from __future__ import annotations

import difflib
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import POS, Key, declare, raising
from pysim.topology import build as build_topology
from pysim.workload import collectives as coll
from pysim.workload.base import register
from pysim.workload.estimate import check_training
from pysim.workload.graph import (GraphResult, OpGraph, engine_params, memory_rows, op_times,
                                  quiet_gc, run_graph)
from pysim.workload.plan import CollectiveOps, LayerOps, Plan  # noqa: F401  (re-exported)
from pysim import models
from pysim.models import optimizer_bytes, precision_bytes
from pysim.models.precision import OPTIMIZER_FLOPS
from pysim.models.presets import npu_spec
from pysim.workload.astra import astra_graph
from pysim.workload.memory import apply_training, training_memory_report

SCHEDULES = ("1f1b", "gpipe")
DIMS = ("tp", "dp", "pp")
TABLES = ("split", "replicated")
PARALLEL_FIELDS = ("dp", "tp", "pp", "micro_batches", "schedule", "order", "tables")
# Megatron's vocabulary-parallel cross entropy all-reduces, per token, the logits' maximum,
# the target's logit and the sum of exponentials: three all-reduces of one fp32 per token.
LOSS_ALL_REDUCES = 3


# ------------------------------------------------------------------ configuration

def check_parallel(table):
    """workload.parallel's fields, each checked (a ConfigError naming the field)."""
    for k, v in table.items():
        where = f"workload.parallel.{k}"
        if k not in PARALLEL_FIELDS:
            close = difflib.get_close_matches(k, PARALLEL_FIELDS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: unknown field{hint}; expected "
                              f"{', '.join(PARALLEL_FIELDS)}")
        if k in ("dp", "tp", "pp", "micro_batches"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{where} = {v!r}: expected an integer >= 1")
        elif k == "schedule" and v not in SCHEDULES:
            raise ConfigError(f"{where} = {v!r}: expected one of {', '.join(SCHEDULES)}")
        elif k == "tables" and v not in TABLES:
            raise ConfigError(f"{where} = {v!r}: expected one of {', '.join(TABLES)}")
        elif k == "order" and (not isinstance(v, list) or sorted(map(str, v)) != sorted(DIMS)):
            raise ConfigError(f"{where} = {v!r}: expected the three dimensions "
                              f"{list(DIMS)} in some order (the first: neighbouring NPUs)")


def load_model(cfg):
    """workload.model: a zoo name, else a file (.onnx, or an ASTRA-sim workload) relative to
    the config."""
    w = cfg.workload
    if w.model is None:
        raise ConfigError(f"workload.kind = 'training' needs workload.model: a model of the "
                          f"zoo ({', '.join(models.names())}) or a file (.onnx, or an "
                          f"ASTRA-sim workload)")
    params = dict(w.model_params or {})
    if w.model in models.names():
        try:
            return models.get(w.model, **params)
        except ConfigError as e:
            raise ConfigError(f"workload.model_params: {e}") from None
    path = w.model if os.path.isabs(w.model) else os.path.join(cfg.base_dir, w.model)
    if os.path.isfile(path):
        try:
            return models.load(path, **params)
        except ConfigError as e:
            raise ConfigError(f"workload.model = {w.model!r}: {e}") from None
    try:
        models.get(w.model)
    except ConfigError as e:
        raise ConfigError(f"workload.model = {w.model!r}: {e}; nor is it a file "
                          f"({path} does not exist)") from None
    raise AssertionError("unreachable")


# ------------------------------------------------------------------ the plan's layout

def _tp_split(layer, tp):
    """How tensor parallelism divides a layer over tp NPUs: (input, output, weights, FLOPs)
    divisors. Linear layers as Megatron-LM splits them: column (output features split, the
    input read whole), row (input features split, the output whole: partial sums); an
    embedding split by rows (row) or columns; attention by heads; element-wise work on a
    split tensor split with it; replicated or unsplittable layers run whole on every NPU."""
    if tp == 1 or layer.tp in (None, "replicated"):
        return 1, 1, 1, 1
    if layer.kind == "linear":
        return (1, tp, tp, tp) if layer.tp == "column" else (tp, 1, tp, tp)
    if layer.kind == "embedding":
        return (1, 1, tp, tp) if layer.tp == "row" else (1, tp, tp, tp)
    if layer.tp == "row":
        return tp, 1, tp, tp
    return tp, tp, tp, tp


def _partition(costs, parts):
    """Cut a list of costs into `parts` contiguous non-empty ranges of about equal sums."""
    n = len(costs)
    total = float(sum(costs)) or float(n)
    if not sum(costs):
        costs = [1.0] * n
    cuts, acc, k = [0], 0.0, 1
    for i, c in enumerate(costs):
        if k >= parts:
            break
        before, acc = acc, acc + c
        target = total * k / parts
        # cut before or after layer i, whichever lands nearer the target; leave enough
        # layers for the stages still to come
        if acc >= target:
            cut = i if (target - before) < (acc - target) and i > cuts[-1] else i + 1
            cut = min(max(cut, cuts[-1] + 1), n - (parts - k))
            cuts.append(cut)
            k += 1
    while len(cuts) < parts:
        cuts.append(min(cuts[-1] + 1, n - (parts - len(cuts))))
    cuts.append(n)
    return [(cuts[i], cuts[i + 1]) for i in range(parts)]


class _Layout:
    """The resolved plan: sizes, NPUs and their coordinates, groups, stages, costs."""

    def __init__(self, cfg, topo, model, npus):
        w = cfg.workload
        self.cfg, self.topo, self.model = cfg, topo, model
        names, kinds = topo.node_names, topo.node_kinds
        all_npus = [n for n, k in zip(names, kinds) if k == "npu"]
        if not all_npus:
            raise ConfigError(f"workload.kind = 'training': {topo.name} has no NPU to train on "
                              f"(nodes of kind 'npu')")
        where = "the npus given" if npus is not None else (
            "workload.group" if w.group is not None else f"every NPU of {topo.name}")
        if npus is None:
            npus = list(w.group) if w.group is not None else all_npus
        for n in npus:
            if n not in names:
                raise ConfigError(f"{where}: {n!r} is not a node of {topo.name}")
            if kinds[names.index(n)] != "npu":
                raise ConfigError(f"{where}: {n!r} is a {kinds[names.index(n)]}, not an NPU")
        if len(set(npus)) != len(npus):
            raise ConfigError(f"{where}: an NPU is named twice")
        self.npus = list(npus)
        par = dict(w.parallel or {})
        check_parallel(par)
        tp, pp = par.get("tp", 1), par.get("pp", 1)
        n = len(npus)
        dp = par.get("dp")
        if dp is None:
            if n % (tp * pp):
                raise ConfigError(f"workload.parallel: tp x pp = {tp} x {pp} does not divide "
                                  f"the {n} NPUs used ({where})")
            dp = n // (tp * pp)
        if dp * tp * pp != n:
            raise ConfigError(f"workload.parallel: dp x tp x pp = {dp} x {tp} x {pp} = "
                              f"{dp * tp * pp}, but {n} NPUs are used ({where})")
        self.dp, self.tp, self.pp = dp, tp, pp
        if w.batch is None:
            raise ConfigError("workload.kind = 'training' needs workload.batch (the global "
                              "mini-batch, samples per iteration over all replicas)")
        self.batch = w.batch
        if w.batch % dp:
            raise ConfigError(f"workload.batch = {w.batch} is not divisible among the dp = "
                              f"{dp} data-parallel replicas")
        self.m = par.get("micro_batches", 1)
        if (w.batch // dp) % self.m:
            raise ConfigError(f"workload.parallel.micro_batches = {self.m} does not divide "
                              f"the {w.batch // dp} samples of each replica (workload.batch = "
                              f"{w.batch}, dp = {dp})")
        self.mb = w.batch // dp // self.m
        self.gmb = self.mb * dp          # one micro-batch of every replica
        self.schedule = par.get("schedule", "1f1b")
        self.order = list(par.get("order", ["tp", "dp", "pp"]))
        L = len(model.layers)
        if pp > L:
            raise ConfigError(f"workload.parallel.pp = {pp}: more stages than the {L} layers "
                              f"of {model.name}")
        self.precision = w.precision or model.default_precision
        self.pb = precision_bytes(self.precision)
        self.optimizer = w.optimizer
        self.engine = w.engine or "npu"
        self.algorithm = w.algorithm
        has_tables = any(l.kind == "embedding" and l.table is not None for l in model.layers)
        self.tables = par.get("tables", "split" if has_tables else "replicated")
        if self.tables == "split" and has_tables and (tp > 1 or pp > 1):
            raise ConfigError(f"workload.parallel.tables = 'split': embedding tables are spread "
                              f"over the data-parallel NPUs, which needs tp = pp = 1 (got tp = "
                              f"{tp}, pp = {pp}); or set tables = 'replicated'")
        # coordinates: rank r -> (d, t, s), the first dimension of `order` varying fastest
        size = {"dp": dp, "tp": tp, "pp": pp}
        self.coords, self.at = {}, {}
        for r, npu in enumerate(self.npus):
            c, x = {}, r
            for d in self.order:
                c[d] = x % size[d]
                x //= size[d]
            key = (c["dp"], c["tp"], c["pp"])
            self.coords[npu] = key
            self.at[key] = npu
        self.specs = {n: npu_spec(cfg, topo, n) for n in self.npus}
        self.peak = {}                   # (npu, kind) -> FLOP/s
        for n, sp in self.specs.items():
            for kind in sp.efficiencies:
                self.peak[(n, kind)] = sp.peak_flops(self.precision) * sp.efficiency(kind)
        self.split_table = [self.tables == "split" and l.kind == "embedding" and
                            l.table is not None for l in model.layers]
        self.splits = [_tp_split(l, tp) for l in model.layers]
        # stages: contiguous layer ranges of about equal roofline time on the first NPU
        sp0 = self.specs[self.npus[0]]
        t = [sum(sp0.layer_seconds(l, self.precision, self.mb, ph)
                 for ph in ("fwd", "bwd_input", "bwd_weight")) for l in model.layers]
        self.stages = _partition(t, pp)
        self.stage_of = np.zeros(L, np.int64)
        for s, (a, b) in enumerate(self.stages):
            self.stage_of[a:b] = s
        self.table_owner = {}
        if any(self.split_table):
            self._place_tables()
        self.memory = self._memory_needed()

    # -------------------------------------------------------------- groups
    def npu(self, d, t, s):
        return self.at[(d, t, s)]

    def dp_group(self, t, s):
        return [self.at[(d, t, s)] for d in range(self.dp)]

    def tp_group(self, d, s):
        return [self.at[(d, t, s)] for t in range(self.tp)]

    def stage_npus(self, s):
        return [self.at[(d, t, s)] for d in range(self.dp) for t in range(self.tp)]

    # -------------------------------------------------------------- costs
    def costs(self, i, samples):
        """(flops, bytes) of layer i's forward, input-gradient and weight-gradient ops on one
        NPU for `samples` samples (None where there is no such work), and the bytes it
        stashes. Forward reads its input and weights and writes its output; the input
        gradient reads the output gradient and the weights and writes the input gradient;
        the weight gradient reads the output gradient and the stash and writes the weight
        gradient (as pysim.models.presets.NpuSpec.layer_seconds)."""
        layer = self.model.layers[i]
        fi, fo, fw, ff = self.splits[i]
        a, wb_ = self.pb.act, self.pb.weight
        inb = samples * layer.in_elems * a / fi
        outb = samples * layer.out_elems * a / fo
        wts = layer.weight_elems * wb_ / fw * (samples if layer.kind == "embedding" else 1)
        stash = samples * (layer.stash_elems * a + layer.stash_mask_bytes) / fi
        fwd = (samples * layer.fwd_flops / ff, inb + outb + wts)
        bin_ = (samples * layer.bwd_input_flops / ff, inb + outb + wts) \
            if layer.bwd_input_flops else None
        bw = (samples * layer.bwd_weight_flops / ff, outb + stash + wts) \
            if layer.bwd_weight_flops else None
        return fwd, bin_, bw, int(math.ceil(stash))

    def grad_bytes(self, i):
        """Bytes of layer i's weight gradient on one NPU (its share under tensor
        parallelism); split embedding tables have none to all-reduce."""
        layer = self.model.layers[i]
        if self.split_table[i]:
            return 0
        return int(math.ceil(layer.params * self.pb.grad / self.splits[i][2]))

    def optimizer_work(self, i, npu):
        """(flops, bytes) of layer i's optimizer step on npu, or None. Reads the weights,
        the gradient, the fp32 master weights (mixed) and the optimizer state, and writes
        all but the gradient. Split embedding tables take a sparse SGD step: only the rows
        looked up, weights read and written and their gradients read, no state."""
        layer = self.model.layers[i]
        if self.split_table[i]:
            if self.table_owner.get(i) != npu:
                return None
            n = min(layer.params, self.batch * layer.weight_elems)
            return n, n * (2 * self.pb.weight + self.pb.grad)
        n = layer.params / self.splits[i][2]
        if not n:
            return None
        per = (2 * self.pb.weight + self.pb.grad + 2 * self.pb.master +
               2 * optimizer_bytes(self.optimizer, self.precision))
        return n * OPTIMIZER_FLOPS[self.optimizer], n * per

    def _place_tables(self):
        """Split embedding tables: each to the NPU holding the fewest table bytes so far,
        largest tables first."""
        held = {n: 0 for n in self.npus}
        order = sorted((i for i, s in enumerate(self.split_table) if s),
                       key=lambda i: (-self.model.layers[i].params, i))
        for i in order:
            n = min(self.npus, key=lambda x: (held[x], self.npus.index(x)))
            self.table_owner[i] = n
            held[n] += self.model.layers[i].params

    def _memory_needed(self):
        """Per NPU: the bytes its training state (weights, gradients, master weights and
        optimizer state of the layers it holds, its share under tensor parallelism) and its
        stashed activations (of the micro-batches in flight at once: all of them under
        GPipe, pp - stage under 1F1B) need in HBM."""
        pb = self.pb
        per_param = pb.weight + pb.grad + pb.master + optimizer_bytes(self.optimizer,
                                                                      self.precision)
        out = {}
        for npu in self.npus:
            d, t, s = self.coords[npu]
            a, b = self.stages[s]
            state = stash = 0.0
            for i in range(a, b):
                layer = self.model.layers[i]
                if self.split_table[i]:
                    if self.table_owner.get(i) == npu:
                        state += layer.params * pb.weight
                    continue
                state += layer.params / self.splits[i][2] * per_param
                stash += self.mb * (layer.stash_elems * pb.act + layer.stash_mask_bytes) / \
                    self.splits[i][0]
            inflight = self.m if self.schedule == "gpipe" else min(self.m, self.pp - s)
            out[npu] = int(math.ceil(state + stash * inflight))
        return out

    def check_memory(self):
        for npu, need in self.memory.items():
            cap = self.specs[npu].hbm_capacity_bytes
            if need > cap:
                raise ConfigError(
                    f"{self.model.name} does not fit in the HBM of {npu}: its training state "
                    f"and stashed activations need {need:,} bytes, and {npu} has {cap:,.0f} "
                    f"(workload.batch = {self.batch}, precision {self.precision}, optimizer "
                    f"{self.optimizer}, dp x tp x pp = {self.dp} x {self.tp} x {self.pp}, "
                    f"micro_batches = {self.m})")


# ------------------------------------------------------------------ building the graph

def _schedule(kind, s, pp, m):
    """The order stage s runs its micro-batches' forward ('F', mb) and backward ('B', mb)
    passes in: GPipe all forwards then all backwards; 1F1B (PipeDream-Flush, as Megatron-LM
    runs it) pp - s - 1 forwards to warm up, then one forward and one backward in turn, then
    the remaining backwards."""
    if kind == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(pp - s - 1, m)
    seq = [("F", j) for j in range(warm)]
    for j in range(m - warm):
        seq += [("F", warm + j), ("B", j)]
    seq += [("B", j) for j in range(m - warm, m)]
    return seq


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
        seqs = {s: _schedule(lay.schedule, s, lay.pp, lay.m) for s in range(lay.pp)}
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
            for extra, nbytes in self._tp_forward(i):
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

    def _tp_forward(self, i):
        """The all-reduces (Megatron-LM) after layer i's forward, (label, bytes) each: a row-
        split layer's output (partial sums); a column-split loss's three per-token
        reductions."""
        lay = self.lay
        layer = lay.model.layers[i]
        if lay.tp == 1 or layer.tp in (None, "replicated", "heads"):
            return []
        if layer.tp == "row" and layer.kind in ("linear", "embedding"):
            return [("row", lay.mb * layer.out_elems * lay.pb.act)]
        if layer.kind == "loss" and layer.tp == "column":
            tokens = max(1, layer.in_elems // max(1, layer.in_shape[-1] if layer.in_shape
                                                  else 1))
            return [("loss", lay.mb * tokens * 4)] * LOSS_ALL_REDUCES
        return []

    def _tp_backward(self, i):
        """The all-reduce (Megatron-LM) after layer i's input gradient: a column-split
        linear layer's input gradient (its input was read whole by every NPU)."""
        lay = self.lay
        layer = lay.model.layers[i]
        if lay.tp == 1 or layer.kind != "linear" or layer.tp != "column" or \
                not layer.bwd_input_flops:
            return 0
        return lay.mb * layer.in_elems * lay.pb.act

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
            nbytes = self._tp_backward(i)
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


class _Buckets:
    """Data-parallel gradient buckets of one stage in one iteration, filled in backward
    order. With overlap, a bucket is all-reduced as soon as the layers in it have produced
    their gradients on every micro-batch, and each layer's optimizer step follows its
    bucket; without, one all-reduce of every gradient after the whole backward pass."""

    def __init__(self, b: _Builder, it, s, final):
        self.b, self.it, self.s = b, it, s
        lay = b.lay
        self.cap = int(lay.cfg.workload.bucket_mb * 2 ** 20)
        self.overlap = lay.cfg.workload.overlap
        self.layers, self.sizes, self.bytes = [], [], 0

    def add(self, i, ready):
        lay = self.b.lay
        nbytes = lay.grad_bytes(i)
        if lay.model.layers[i].params == 0:
            return
        if lay.dp == 1 or not nbytes:
            for n, deps in ready.items():       # nothing to all-reduce: step at once
                self.b._optimizer(self.it, i, n, deps)
            return
        self.layers.append(i)
        self.sizes.append(nbytes)
        self.bytes += nbytes
        self.ready = ready
        if self.overlap and self.bytes >= self.cap:
            self.flush(ready)

    def flush(self, ready):
        if not self.layers:
            return
        lay, b = self.b.lay, self.b
        for t in range(lay.tp):
            grp = lay.dp_group(t, self.s)
            done = b.collective("dp_all_reduce", "all_reduce", grp, self.bytes,
                                {n: ready[n] for n in grp}, self.it, None, self.layers,
                                self.sizes)
            for n in grp:
                for i in self.layers:
                    b._optimizer(self.it, i, n, [done[n]])
        self.layers, self.sizes, self.bytes = [], [], 0

    def close(self, ready):
        self.flush(ready)


@quiet_gc
def training_graph(cfg, topo, model=None, npus=None, graph=None, prefix="", hooks=None):
    """Add workload.iterations training iterations to `graph` (see the module's doc); returns
    (graph, plan)."""
    if model is None:
        model = load_model(cfg)
    if model.given_times:
        return astra_graph(cfg, topo, model, npus, graph, prefix)
    lay = _Layout(cfg, topo, model, npus)
    if cfg.workload.memory.policy == "none":
        lay.check_memory()               # else the memory plan decides what stays in HBM
    g = graph if graph is not None else OpGraph()
    b = _Builder(lay, g, prefix, hooks)
    b.plan.layout = lay
    check_training(b, len(g))            # refused at once past the op limit
    last, prev_opt = {}, {}
    for it in range(cfg.workload.iterations):
        b.iteration(it, last, prev_opt)
        prev_opt = {(i, n): op for (it_, i, n), op in b.plan.optimizer.items()
                    if it_ == it}
    return g, b.plan


# ------------------------------------------------------------------ results

def _union(iv):
    """Merge intervals [(start, end)] into disjoint sorted ones."""
    out = []
    for a, b in sorted(iv):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def _length(iv):
    return sum(b - a for a, b in iv)


def _minus(iv, cut):
    """Intervals iv (disjoint, sorted) less intervals cut (disjoint, sorted)."""
    out = []
    j = 0
    for a, b in iv:
        while j < len(cut) and cut[j][1] <= a:
            j += 1
        k = j
        while a < b:
            if k >= len(cut) or cut[k][0] >= b:
                out.append([a, b])
                break
            if cut[k][0] > a:
                out.append([a, cut[k][0]])
            a = max(a, cut[k][1])
            k += 1
    return out


def _clip(iv, lo, hi):
    return [[max(a, lo), min(b, hi)] for a, b in iv if min(b, hi) > max(a, lo)]


@dataclass
class TrainingResult(GraphResult):
    """A training run: the op graph's result plus the iteration's breakdown (`training`)."""
    training: dict = field(default_factory=dict)

    def to_dict(self):
        d = super().to_dict()
        d.pop("training", None)
        d.pop("ops", None)               # (every op is in the trace: pysim run --trace)
        d.update(self.training)
        return d

    def summary(self):
        t = self.training
        p = t["plan"]
        where = ("on each NPU's collectives offload engine" if p["engine"] == "offload" else
                 "on the NPUs themselves (workload.engine = 'npu', the default for training)")
        rows = [("model", f"{p['model']}, {p['precision']}, optimizer {p['optimizer']}, "
                          f"batch {p['batch']}" if p["precision"] else
                          f"{p['model']} (an ASTRA-sim {p['schedule'].split()[-1]} workload: "
                          f"given cycles, run by ASTRA-sim's rules)"),
                ("plan", f"dp {p['dp']} x tp {p['tp']} x pp {p['pp']} on {len(p['npus'])} "
                         f"NPUs" + (f", {p['micro_batches']} micro-batches ({p['schedule']})"
                                    if p["pp"] > 1 or p["micro_batches"] > 1 else "")),
                ("collectives", f"{p['algorithm']}, reductions {where}"),
                ("iteration", f"{t['iteration_cycles']:,} cycles = "
                              f"{t['iteration_seconds'] * 1e3:.3f} ms (the last of "
                              f"{t['iterations']})" +
                              (f", {t['samples_per_second']:,.1f} samples/s"
                               if t["samples_per_second"] is not None else "")),
                ("compute", f"{t['compute_cycles']:,} cycles on {t['critical_npu']} (the "
                            f"busiest NPU)"),
                ("communication", f"{t['comm_cycles']:,} cycles running there, "
                                  f"{t['exposed_comm_cycles']:,} exposed (compute waiting)"),
                ("other", f"{t['other_cycles']:,} cycles (neither)")]
        util = sorted(t["per_npu"].items())
        rows.append(("compute utilisation", ", ".join(
            f"{n} {100 * v['compute_utilization']:.0f}%" for n, v in util[:8]) +
            (" ..." if len(util) > 8 else "")))
        rows.append(("HBM per network byte", ", ".join(
            f"{n} {v['hbm_comm_bytes_per_network_byte']:.2f}" for n, v in util[:8]) +
            (" ..." if len(util) > 8 else "")))
        rows += [("link utilisation", self._link_line())]
        rows += memory_rows(self.memory)
        rows += [("speed", f"{self.cycles_per_second:,.0f} cycles/s, {self.wall_seconds:.2f} s "
                           f"wall ({t['build_seconds']:.2f} s building {len(self.ops):,} ops)"),
                 ("seed / version", f"{self.seed} / pysim {self.version}")]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def training_report(graph, plan, res, cfg):
    """The last iteration's breakdown: its cycles, compute and communication on the busiest
    NPU, per layer and per NPU (see docs/training.md)."""
    clock = cfg.network.clock_ghz
    start, finish = op_times(res.ops)
    lo, hi = plan.iterations[-1]
    t0, t1 = int(start[lo:hi].min()), int(finish[lo:hi].max())
    cycles = t1 - t0
    ids = range(lo, hi)
    # training compute ops (forward, backward, optimizer) per NPU, in the last iteration
    comp = {n: [] for n in plan.npus}
    it = len(plan.iterations) - 1
    fwd_ops, bwd_ops = {}, {}
    for (it_, i, n, j), lo_ in plan.layer_ops.items():
        if it_ != it:
            continue
        for op, bucket in ((lo_.fwd, fwd_ops), (lo_.bwd_input, bwd_ops),
                           (lo_.bwd_weight, bwd_ops)):
            if op is not None:
                comp[n].append((int(start[op]), int(finish[op])))
                bucket[(i, n)] = bucket.get((i, n), 0) + int(finish[op] - start[op])
    for (it_, i, n), op in plan.optimizer.items():
        if it_ == it:
            comp[n].append((int(start[op]), int(finish[op])))
    comp_u = {n: _union(v) for n, v in comp.items()}
    busy = {n: _length(v) for n, v in comp_u.items()}
    crit = max(plan.npus, key=lambda n: (busy[n], n))
    # communication intervals per NPU: each collective from its first op touching the NPU
    # to the end of the NPU's part; each pipeline send from or to it
    node = graph.node
    dst = graph.dst
    comm = {n: [] for n in plan.npus}
    coll_iv = []                         # per collective of the last iteration: {npu: iv}
    for c in plan.collectives:
        if c.iteration != it:
            continue
        ivs = {}
        for k in range(c.first, c.last):
            for who in (node[k], dst[k]):
                if who in c.done:
                    a = ivs.setdefault(who, [start[k], finish[k]])
                    a[0] = min(a[0], start[k])
        for n, a in ivs.items():
            iv = (int(a[0]), int(finish[c.done[n]]))
            ivs[n] = iv
            comm[n].append(iv)
        coll_iv.append((c, ivs))
    for sd in plan.sends:
        if sd["iteration"] == it:
            iv = (int(start[sd["op"]]), int(finish[sd["op"]]))
            comm[sd["src"]].append(iv)
            comm[sd["dst"]].append(iv)
    comm_u = {n: _clip(_union(v), t0, t1) for n, v in comm.items()}
    exposed = {n: _minus(comm_u[n], comp_u[n]) for n in plan.npus}
    # per layer, on the critical NPU
    model = plan.model
    per_layer = []
    lay_comm = {}
    for c, ivs in coll_iv:
        if crit not in ivs:
            continue
        iv = [list(ivs[crit])]
        dur = iv[0][1] - iv[0][0]
        exp = _length(_minus(iv, comp_u[crit]))
        tot = sum(c.layer_bytes) or 1
        for i, nb in zip(c.layers, c.layer_bytes or [1] * len(c.layers)):
            share = nb / tot if c.layer_bytes else 1 / len(c.layers)
            x = lay_comm.setdefault(i, [0.0, 0.0])
            x[0] += dur * share
            x[1] += exp * share
    for i, layer in enumerate(model.layers):
        cc = lay_comm.get(i, (0.0, 0.0))
        per_layer.append(dict(name=layer.name, kind=layer.kind,
                              fwd_cycles=fwd_ops.get((i, crit), 0),
                              bwd_cycles=bwd_ops.get((i, crit), 0),
                              comm_cycles=int(round(cc[0])),
                              exposed_comm_cycles=int(round(cc[1]))))
    # per NPU
    kinds = graph.kind
    sizes = graph.size
    per_npu = {}
    for n in plan.npus:
        per_npu[n] = dict(compute_utilization=busy[n] / cycles if cycles else 0.0,
                          compute_cycles=busy[n], hbm_bytes=0, hbm_comm_bytes=0,
                          network_bytes=0)
    for k in ids:
        n = node[k]
        if n not in per_npu:
            continue
        kd = kinds[k]
        if kd == "compute" and graph.work[k] is not None:
            per_npu[n]["hbm_bytes"] += graph.work[k][1]
        elif kd == "memory":
            per_npu[n]["hbm_bytes"] += sizes[k]
            per_npu[n]["hbm_comm_bytes"] += sizes[k]
        elif kd == "reduce_npu":
            per_npu[n]["hbm_bytes"] += 4 * sizes[k]
            per_npu[n]["hbm_comm_bytes"] += 4 * sizes[k]
        elif kd == "send":
            per_npu[n]["network_bytes"] += sizes[k]
    for v in per_npu.values():
        v["hbm_comm_bytes_per_network_byte"] = (v["hbm_comm_bytes"] / v["network_bytes"]
                                                if v["network_bytes"] else 0.0)
        v["network_gbps"] = v["network_bytes"] * clock / cycles if cycles else 0.0
    seconds = cycles / (clock * 1e9)
    comm_c = _length(comm_u[crit])
    exp_c = _length(exposed[crit])
    return dict(
        iteration_cycles=cycles, iteration_seconds=seconds,
        samples_per_second=(plan.batch / seconds if seconds else float("inf"))
        if plan.batch else None,
        compute_cycles=busy[crit], comm_cycles=comm_c, exposed_comm_cycles=exp_c,
        other_cycles=max(0, cycles - busy[crit] - exp_c), critical_npu=crit,
        iterations=len(plan.iterations), iteration_start=t0, per_layer=per_layer,
        per_npu=per_npu, plan=plan.describe())


@register("training", traces=True)
def run_training(cfg, progress=None):
    """Training iterations of workload.model under workload.parallel: the last iteration's
    time, its compute and (exposed) communication, per layer and per NPU."""
    t0 = time.perf_counter()
    topo = build_topology(cfg)
    graph, plan = training_graph(cfg, topo)
    applied = None
    if not plan.model.given_times:       # memory plans: pysim.workload.memory
        applied = apply_training(cfg, topo, graph, plan)
    built = time.perf_counter() - t0
    res = run_graph(cfg, graph, progress=progress)
    if applied is not None:
        training_memory_report(res, applied)
    report = training_report(graph, plan, res, cfg)
    report["build_seconds"] = built
    out = TrainingResult(**{k: v for k, v in res.__dict__.items()}, training=report)
    out.wall_seconds = time.perf_counter() - t0
    return out


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "model", "str", None, "-",
        "Training: a zoo model's name (pysim models), or an .onnx or ASTRA-sim workload file "
        "(relative to the config).", None),
    Key("workload", "model_params", "table", None, "-",
        "Training: parameters of the zoo model's builder, e.g. {layers = 24, seq = 512}.",
        None),
    Key("workload", "batch", "int", None, "samples",
        "Training: the global mini-batch, samples per iteration over all data-parallel "
        "replicas.", POS),
    Key("workload", "parallel", "table", None, "-",
        "Training: the plan: dp, tp, pp (their product the NPUs used; default dp = the NPUs "
        "/ (tp x pp)), micro_batches (default 1), schedule ('1f1b' or 'gpipe'), order (the "
        "dimensions from neighbouring NPUs outwards, default ['tp', 'dp', 'pp']), tables "
        "('split': embedding tables spread over the NPUs with all-to-all, or 'replicated').",
        raising(check_parallel)),
    Key("workload", "precision", "str", None, "-",
        "Training: fp32, fp16, bf16 or mixed (default: the model's).", None,
        lambda: ["fp32", "fp16", "bf16", "mixed"]),
    Key("workload", "optimizer", "str", "sgd", "-",
        "Training: 'sgd' (with momentum) or 'adam': the state the optimizer step reads and "
        "writes.", None, lambda: ["sgd", "adam"]),
    Key("workload", "iterations", "int", 2, "-",
        "Training: iterations simulated; the last is reported.", POS),
    Key("workload", "bucket_mb", "float", 25.0, "MiB",
        "Training: data-parallel gradients are all-reduced in buckets of this size.", POS),
    Key("workload", "overlap", "bool", True, "-",
        "Training: all-reduce each gradient bucket as soon as the backward pass has produced "
        "it (false: one all-reduce after the whole backward pass).", None),
)
