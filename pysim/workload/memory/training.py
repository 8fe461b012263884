"""Memory plans of training iterations: layer costs and kept tensors from a model or an iteration's
ops, resident state, KARMA's host-side optimizer step, and the report."""
from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from pysim.models import optimizer_bytes, precision_bytes
from pysim._gc import quiet_gc
from pysim.workload.graph import compute_params
from pysim.workload.memory.apply import NpuWork, apply
from pysim.workload.memory.expand import Positions, Skeleton
from pysim.workload.memory.placement import placement
from pysim.workload.memory.plan import Kept, LayerCost
from pysim.workload.memory.registry import parse_policy
from pysim.models.precision import OPTIMIZER_FLOPS


def kept_tensors(model, layer_ids, act_bytes, samples, div=None):
    """Per layer of `layer_ids` (the model's indices of one NPU's layers, ascending): the
    Kept tensors it owns for `samples` samples (bytes divided by div(i), its tensor-parallel
    split of layer i's input), with the positions of their last reader and first consumer
    among those layers. A tensor is counted on every NPU one of whose layers keeps it (each
    pipeline stage keeps what its own backward ops need: a tensor at a stage cut is kept on
    both sides of it), owned there by the first of its keepers among those layers. A model
    that does not know its tensors (pysim.models.tensors): one tensor per layer, its
    stash."""
    local = {i: p for p, i in enumerate(layer_ids)}
    out = [[] for _ in layer_ids]
    if model.stashes is None:
        return [()] * len(layer_ids)

    def at(i):                        # the position of the last of the layers <= i
        return max(0, bisect.bisect_right(layer_ids, i) - 1)

    kinds = [l.kind for l in model.layers]
    for s in model.stashes:
        mine = [j for j in s.keepers if j in local]
        if not mine:
            continue
        owner = mine[0]
        d = div(owner) if div else 1
        nb = int(math.ceil(samples * s.bytes(act_bytes) / d))
        keepers = tuple(local[j] for j in mine)
        out[local[owner]].append(Kept(nb, at(s.last_read), local[mine[-1]], keepers, s.name,
                                      any(kinds[j] == "conv" for j in mine)))
    return [tuple(x) for x in out]


def layer_costs(model, spec, precision, batch, clock_ghz=1.0):
    """One LayerCost per layer of `model` for `batch` samples on an NPU whose roofline is
    `spec` (pysim.models.presets.NpuSpec): the stash (layer.bytes(precision)['stash'] per
    sample, each kept tensor once: `kept_tensors`), the forward op's cycles and FLOPs, the
    backward ops' cycles (input gradient, then weight gradient; those with work), the
    forward's output (none in place) and the input gradient as transients."""
    out = []
    hz = clock_ghz * 1e9
    kept = kept_tensors(model, list(range(len(model.layers))),
                        precision_bytes(precision).act, batch)
    for li, layer in enumerate(model.layers):
        b = layer.bytes(precision)
        fwd = spec.layer_seconds(layer, precision, batch, "fwd")
        bwd = [spec.layer_seconds(layer, precision, batch, ph)
               for ph, fl in (("bwd_input", layer.bwd_input_flops),
                              ("bwd_weight", layer.bwd_weight_flops)) if fl]
        out.append(LayerCost(layer.name, layer.kind, int(b["stash"] * batch),
                             max(1, int(math.ceil(fwd * hz))),
                             tuple(max(1, int(math.ceil(t * hz))) for t in bwd),
                             fwd_flops=layer.fwd_flops * batch,
                             fwd_bytes=int(batch * (b["read"] + b["write"]) + b["weights_fwd"]),
                             fwd_peak=spec.peak_flops(precision) * spec.efficiency(layer.kind),
                             out_bytes=0 if layer.inplace else int(b["write"] * batch),
                             grad_bytes=int(b["read"] * batch), tensors=kept[li]))
        if kept[li]:
            out[-1].stash_bytes = sum(t.nbytes for t in kept[li])
    return out


def resident_bytes(model, precision, optimizer="sgd"):
    """Weights (and their fp32 master copy in mixed precision), gradients and optimizer
    state of `model`: held for the whole run."""
    p = precision_bytes(precision)
    return int(model.params * (p.weight + p.grad + p.master + optimizer_bytes(optimizer,
                                                                             precision)))




def _op_cycles(g, op, cparams, clock, node_index):
    """An op's time alone: a roofline op's max(flops / its peak, bytes / HBM bandwidth), a
    cycles op's cycles."""
    if g.work[op] is None:
        return int(g.size[op])
    flops, nbytes, peak = g.work[op]
    fpc, bpc = cparams[node_index[g.node[op]]]
    if peak is not None:
        fpc = peak / (clock * 1e9)
    c = int(math.ceil(flops / fpc - 1e-9)) if flops else 0
    h = int(math.ceil(nbytes / bpc - 1e-9)) if nbytes else 0
    return max(c, h, 1)


class Skeletons(Sequence):
    """One NPU's Skeletons, one per (iteration, micro-batch), made when read from its
    records as arrays: F (runs x layers: the forward ops), lo and hi (the backward ops of
    each layer in program order: -1 where fewer than two). `slots` (runs x places): each
    run's ops in pysim.workload.memory.apply's order (its forward ops, then its backward
    ops layer by layer), where every run has backward ops at the same layers (`uniform`);
    else None."""

    def __init__(self, F, lo, hi, order, pos):
        self.F, self.lo, self.hi, self.order, self.pos = F, lo, hi, order, pos
        n = (lo >= 0).astype(np.int64) + (hi >= 0)
        self.uniform = bool((n == n[:1]).all())
        self.slots = None
        if self.uniform and len(F):
            both = np.stack([lo, hi], 2).reshape(len(F), -1)      # per layer lo, hi
            keep = np.stack([n[0] == 2, n[0] >= 1], 1).reshape(-1)
            self.slots = np.concatenate([F, both[:, keep]], 1)

    def __len__(self):
        return len(self.F)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(len(self))[k]]
        F, lo, hi = self.F[k].tolist(), self.lo[k].tolist(), self.hi[k].tolist()
        return Skeleton(F, [[] if y < 0 else [y] if x < 0 else [x, y]
                            for x, y in zip(lo, hi)], self.order, self.pos)


def training_work(cfg, topo, g, plan):
    """{npu: NpuWork} of a training iteration built by pysim.workload.training: per NPU the
    layers it runs (its stage; a split embedding table on its owner), their costs from the
    graph's ops, a Skeleton per iteration and micro-batch, its resident training state
    (weights, gradients, master weights, optimizer state of its share of its layers) and its
    first and last ops (a zero delay after its last optimizer steps and backward op)."""
    lay = plan.layout
    cparams = compute_params(topo, cfg)
    clock = cfg.network.clock_ghz
    index = {n: i for i, n in enumerate(topo.node_names)}
    pb = lay.pb
    per_param = getattr(lay, "state_per_param", None)        # (ZeRO shards the state)
    per_param = per_param() if per_param is not None else \
        pb.weight + pb.grad + pb.master + optimizer_bytes(lay.optimizer, lay.precision)
    # Megatron-LM's recomputation keeps what the plan's stash says (a transformer layer's
    # input under "full"), not every tensor the layer table keeps
    planned = getattr(lay, "recompute", None) is not None
    table = plan.layer_ops
    L = table.columns()
    # the records by NPU, each NPU's by (iteration, micro-batch) and layer
    o = np.lexsort((L["layer"], L["mb"], L["it"], L["npu"]))
    L = {k: v[o] for k, v in L.items()}
    npu_at = np.searchsorted(L["npu"], np.arange(len(table.npus) + 1))
    work = {}
    last_it = len(plan.iterations) - 1
    last_steps = {}                      # per NPU: its optimizer steps of the last iteration
    for (it, _, npu), op in plan.optimizer.items():
        if it == last_it:
            last_steps.setdefault(npu, []).append(op)
    ids = {n: k for k, n in enumerate(table.npus)}
    for n in plan.npus:
        k = ids.get(n)
        if k is None or npu_at[k] == npu_at[k + 1]:
            continue
        mine = slice(npu_at[k], npu_at[k + 1])
        lay_, its, mbs = L["layer"][mine], L["it"][mine], L["mb"][mine]
        fw, bi, bw = L["fwd"][mine], L["bwd_input"][mine], L["bwd_weight"][mine]
        layers = np.unique(lay_).tolist()
        nl = len(layers)
        runs = sorted(set(zip(its[::nl].tolist(), mbs[::nl].tolist())))
        if len(lay_) != nl * len(runs) or \
                (lay_.reshape(-1, nl) != np.asarray(layers, np.int64)).any():
            raise KeyError(f"{n}: a micro-batch's records lack a layer of its others")
        rows = L["rows"][mine]
        costs = []
        samples_ = lay.mb
        kept = kept_tensors(lay.model, layers, pb.act, samples_, lambda i: lay.splits[i][0])
        for li, i in enumerate(layers):
            layer = lay.model.layers[i]
            lo = table.at(int(rows[li]))             # (the first run's record of layer i)
            fi, fo, _, _ = lay.splits[i]
            samples = lay.gmb if lay.split_table[i] else lay.mb
            bwd = [b for b in (lo.bwd_input, lo.bwd_weight) if b is not None]
            bwd.sort()
            flops, nbytes, peak = g.work[lo.fwd]
            costs.append(LayerCost(
                layer.name, layer.kind, int(lo.stash_bytes),
                _op_cycles(g, lo.fwd, cparams, clock, index),
                tuple(_op_cycles(g, b, cparams, clock, index) for b in bwd),
                fwd_flops=flops, fwd_bytes=int(nbytes), fwd_peak=peak,
                out_bytes=0 if layer.inplace else
                int(math.ceil(samples * layer.out_elems * pb.act / fo)),
                grad_bytes=int(math.ceil(samples * layer.in_elems * pb.act / fi))
                if lo.bwd_input is not None else 0,
                tensors=() if lay.split_table[i] or planned else kept[li]))
            if costs[-1].tensors:
                costs[-1].stash_bytes = sum(t.nbytes for t in costs[-1].tensors)
        every = np.concatenate([fw, bi, bw])
        order = np.sort(every[every >= 0]).tolist()
        pos = Positions(order)
        skeletons = Skeletons(fw.reshape(-1, nl), np.minimum(bi, bw).reshape(-1, nl),
                              np.maximum(bi, bw).reshape(-1, nl), order, pos)
        resident = 0.0
        for i in layers:
            layer = lay.model.layers[i]
            if lay.split_table[i]:
                resident += layer.params * pb.weight
            else:
                resident += layer.params / lay.splits[i][2] * per_param
        ends = last_steps.get(n, []) + [order[-1]]
        last = g.delay(0, after=sorted(set(ends)))
        s_ = plan.coords[n][2]
        inflight = plan.micro_batches if plan.schedule == "gpipe" else \
            min(plan.micro_batches, plan.pp - s_)
        work[n] = NpuWork(costs, skeletons, int(math.ceil(resident)), order[0], last,
                          [f"it{it} mb{j}" for it, j in runs], layers,
                          max(1, inflight))
    return work


@quiet_gc
def apply_training(cfg, topo, g, plan):
    """Add the configured memory plan (workload.memory) to a training iteration's graph: every
    NPU's stashes, transients and resident state held in its HBM, and the plan's transfers,
    recomputations and compressions. Returns the Applied plans."""
    work = training_work(cfg, topo, g, plan)
    name, _ = parse_policy(cfg.workload.memory.policy)
    if name == "karma" and cfg.workload.memory.host_update:
        host_update(cfg, topo, g, plan, work)
    return apply(cfg, topo, g, work)


def host_update(cfg, topo, g, plan, work):
    """KARMA's multi-node scheme: each layer's optimizer step runs on the NPU's nearest host
    instead of the NPU. Once the layer's gradient is reduced (when the NPU's own step would
    have run; that op is emptied), the gradient goes to the host, the host's roofline runs
    the step over the fp32 master weights and optimizer state it keeps in its DRAM, and the
    updated weights come back before the layer's next forward op (and before the NPU's last
    op). The NPU keeps only weights and gradients resident."""
    lay = plan.layout
    pb = lay.pb
    opt_b = optimizer_bytes(lay.optimizer, lay.precision)
    hosts = {}
    for (it, i, n), op in sorted(plan.optimizer.items()):
        if n not in work:
            continue
        if n not in hosts:
            hosts[n] = placement(topo, cfg, n, "host").targets[0][0]
        host = hosts[n]
        layer = lay.model.layers[i]
        params = layer.params / lay.splits[i][2]
        if lay.split_table[i] or not params:
            continue
        flops, nbytes, peak = g.work[op]
        g.work[op] = (0.0, 0, peak)                  # the step moves to the host
        up = g.send(n, host, int(math.ceil(params * pb.grad)), after=[op],
                    name=f"it{it} {layer.name} gradient to {host} {n}")
        step = g.compute(host, after=[up], flops=params * OPTIMIZER_FLOPS[lay.optimizer],
                         bytes=int(math.ceil(nbytes)),
                         name=f"it{it} {layer.name} optimizer on {host} for {n}")
        down = g.send(host, n, int(math.ceil(params * pb.weight)), after=[step],
                      name=f"it{it} {layer.name} weights from {host} {n}")
        nxt = plan.layer_ops.get((it + 1, i, n, 0))
        g.depend(nxt.fwd if nxt is not None else work[n].last_op, down)
    for n, w in work.items():
        if n not in hosts:
            continue
        on_host = sum(lay.model.layers[i].params / lay.splits[i][2] * (pb.master + opt_b)
                      for i in w.layer_ids if not lay.split_table[i])
        w.resident = max(0, w.resident - int(on_host))
        g.free(g.hold(hosts[n], int(math.ceil(on_host)), w.first_op, "start",
                      f"{n} master weights and optimizer state"), w.last_op, "finish")


def training_memory_report(result, applied):
    """Add to a run's `memory` what the plans did: per NPU its recomputed FLOPs, and the
    plans (`plans`: per NPU the layers kept, swapped and recomputed, the parameters chosen,
    where its offloaded bytes went)."""
    if not result.memory:
        return
    rep = applied.report()
    for npu, v in rep.items():
        d = result.memory["devices"].get(npu)
        if d is not None:
            d["recomputed_flops"] = v["recomputed_flops"]
    result.memory["policy"] = applied.policy
    result.memory["plans"] = rep
