"""The plan's layout: a model, a batch and the NPUs resolved into dp x tp x pp coordinates,
groups, pipeline stages, per-layer costs and the memory each NPU needs.

`workload.parallel` is checked here (`check_parallel`), field by field."""
from __future__ import annotations

import difflib
import math
import os

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import KEY_MAP, POS, Key, declare, raising
from pysim import models
from pysim.models import optimizer_bytes, precision_bytes
from pysim.models.precision import OPTIMIZER_FLOPS, PRECISIONS, weight_traffic
from pysim.models.presets import npu_spec
from pysim.workload.training.compute import KernelTimes
from pysim.workload.training.experts import check_experts
from pysim.workload.training.pipeline import SCHEDULES
from pysim.workload.training.recompute import RECOMPUTE, recompute_mode, stash_per_sample
from pysim.workload.training.sequence import sequence_plan
from pysim.workload.training.tensor import (check_divisible, tied_layers, tp_backward,
                                            tp_split, vocabulary_padding)
from pysim.workload.training.zero import ZERO_STAGES, state_bytes_per_param

OPTIMIZER_STEPS = ("fused", "passes")   # workload.optimizer_step

# the training keys the kernel model alone reads (workload.compute = 'kernels'), and what each
# does, for the refusal of one set under the roofline
KERNEL_ONLY = {
    "grad_accumulation": "times the addition with the kernel model",
    "kernel_library": "chooses the kernel model's products",
    "loss_kernels": "times the loss's passes with the kernel model",
    "layer_kernels": "times the layers' small kernels with the kernel model",
    "attention": "chooses the kernel model's attention kernels",
}

DIMS = ("tp", "dp", "pp")
TABLES = ("split", "replicated")
PARALLEL_FIELDS = ("dp", "tp", "pp", "micro_batches", "schedule", "order", "tables", "sp",
                   "interleave", "zero", "replicas", "tp_ranks", "scatter_gather", "ep",
                   "tp_overlap", "p2p_sync")
REPLICAS = ("all", "one")


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
        if k in ("dp", "tp", "pp", "micro_batches", "interleave", "ep"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{where} = {v!r}: expected an integer >= 1")
        elif k == "zero" and (isinstance(v, bool) or v not in ZERO_STAGES):
            raise ConfigError(f"{where} = {v!r}: expected a ZeRO stage, one of 0, 1, 2, 3")
        elif k in ("sp", "scatter_gather", "tp_overlap", "p2p_sync") and \
                not isinstance(v, bool):
            raise ConfigError(f"{where} = {v!r}: expected true or false")
        elif k in ("replicas", "tp_ranks") and v not in REPLICAS:
            raise ConfigError(f"{where} = {v!r}: expected one of {', '.join(REPLICAS)}")
        elif k == "schedule" and v not in SCHEDULES:
            raise ConfigError(f"{where} = {v!r}: expected one of {', '.join(SCHEDULES)}")
        elif k == "tables" and v not in TABLES:
            raise ConfigError(f"{where} = {v!r}: expected one of {', '.join(TABLES)}")
        elif k == "order" and (not isinstance(v, list) or sorted(map(str, v)) != sorted(DIMS)):
            raise ConfigError(f"{where} = {v!r}: expected the three dimensions "
                              f"{list(DIMS)} in some order (the first: neighbouring NPUs)")


def check_effect(par, tp, pp):
    """Refuse a plan field set to a value that changes nothing under the plan's tp and pp
    (it would be read by nothing), naming the field, its value and why."""
    idle = []
    if pp == 1:
        why = "pp = 1: no pipeline stage sends to another"
        idle += [("p2p_sync", True, why), ("scatter_gather", False, why)]
    if tp == 1:
        idle += [("sp", True, "tp = 1: no tensor-parallel group to split the sequence over"),
                 ("tp_overlap", False, "tp = 1: there is no tensor-parallel collective to "
                                       "run beside or after the weight gradient"),
                 ("scatter_gather", False, "tp = 1: a stage's whole tensor is sent, there "
                                           "being no tensor-parallel group to scatter over")]
    elif par.get("sp") is True:
        idle.append(("scatter_gather", False, "sp = true: the tensor a stage sends is split "
                                              "by sequence already, its parts sent as they "
                                              "are"))
    for field, value, why in idle:
        if par.get(field) is value:
            raise ConfigError(f"workload.parallel.{field} = {str(value).lower()} has no effect "
                              f"with {why}; leave it out")


def check_model_effect(lay, par):
    """Refuse a plan field that changes nothing for this model and micro-batch count (read
    by nothing), naming the field, its value and why: check_effect's fields, with what only
    the model's layers and the schedule's micro-batches decide."""
    name, layers = lay.model.name, lay.model.layers
    if lay.tp > 1 and all(l.tp in (None, "replicated") for l in layers):
        raise ConfigError(f"workload.parallel.tp = {lay.tp}: {name} has no layer that tensor "
                          f"parallelism splits (every layer's tp in pysim models {name} is "
                          f"'-' or replicated), so each NPU of a tensor-parallel group would "
                          f"run the whole model on the same samples; use dp (or pp) instead")
    if lay.tp > 1 and par.get("tp_overlap") is False and \
            not any(tp_backward(lay, i) for i in range(len(layers))):
        raise ConfigError(f"workload.parallel.tp_overlap = false has no effect with {name}: "
                          f"it has no column-split linear layer, whose input gradient's "
                          f"tensor-parallel collective tp_overlap places; leave it out")
    if lay.sp and not any(lay.seq.split) and not any(lay.seq.scatter_after):
        raise ConfigError(f"workload.parallel.sp = true has no effect with {name}: it has no "
                          f"row-split layer whose output sequence parallelism would "
                          f"reduce-scatter; leave it out")
    if "schedule" in par and lay.m == 1:
        raise ConfigError(f"workload.parallel.schedule = {par['schedule']!r} has no effect "
                          f"with micro_batches = 1: a stage runs the one micro-batch's forward "
                          f"then its backward under either schedule; leave it out, or set "
                          f"workload.parallel.micro_batches")


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
    if os.path.exists(path):        # (a device or FIFO is refused by the reader, by name)
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


def _stages(costs, parts, blocks):
    """Contiguous layer ranges for `parts` stages. A model of transformer layers is cut
    between them, as Megatron-LM cuts it: the layers before the first one go with it, those
    after the last with the last; as many transformer layers per stage where parts divides
    their number, else about equal costs. Other models: about equal costs per stage."""
    if not blocks or len(blocks) < parts:
        return _partition(costs, parts)
    units = [list(b) for b in blocks]
    units[0][0] = 0
    units[-1][1] = len(costs)
    if len(units) % parts == 0:
        k = len(units) // parts
        return [(units[p * k][0], units[p * k + k - 1][1]) for p in range(parts)]
    cut = _partition([sum(costs[a:b]) for a, b in units], parts)
    return [(units[a][0], units[b - 1][1]) for a, b in cut]


class _Peaks:
    """The FLOP/s of a layer kind on an NPU, lay.peak[(npu, kind)], from the table of its
    spec (one per distinct spec, not an entry per NPU and kind)."""
    __slots__ = ("by_npu",)

    def __init__(self, by_npu):
        self.by_npu = by_npu

    def __getitem__(self, key):
        npu, kind = key
        return self.by_npu[npu][kind]


class _Layout:
    """The resolved plan: sizes, NPUs and their coordinates, groups, stages, costs."""

    def __init__(self, cfg, topo, model, npus, like=None):
        """like: a layout made before of the same cfg, topo and npus (the op-limit pre-check's
        small model, builder.refuse_before_building): its NPUs, their coordinates and specs
        (a Python loop over every NPU each) are taken instead of worked out again."""
        w = cfg.workload
        self.cfg, self.topo, self.model = cfg, topo, model
        if like is not None and not (like.cfg is cfg and like.topo is topo and
                                     like._npus_given is npus):
            like = None
        self._npus_given = npus
        names, kinds = topo.node_names, topo.node_kinds
        all_npus = like.npus if like is not None else \
            [n for n, k in zip(names, kinds) if k == "npu"]
        if not all_npus:
            raise ConfigError(f"workload.kind = 'training': {topo.name} has no NPU to train on "
                              f"(nodes of kind 'npu')")
        where = "the npus given" if npus is not None else (
            "workload.group" if w.group is not None else f"every NPU of {topo.name}")
        if npus is None:
            npus = list(w.group) if w.group is not None else all_npus
        if isinstance(npus, str) or not len(npus):
            raise ConfigError(f"{where} = {npus!r}: expected a list of one NPU or more")
        pos = {n: i for i, n in enumerate(names)} if like is None else None
        for n in npus if like is None else ():
            if n not in pos:
                raise ConfigError(f"{where}: {n!r} is not a node of {topo.name}")
            if kinds[pos[n]] != "npu":
                raise ConfigError(f"{where}: {n!r} is a {kinds[pos[n]]}, not an NPU")
        if like is None and len(set(npus)) != len(npus):
            raise ConfigError(f"{where}: an NPU is named twice")
        self.npus = list(npus) if like is None else like.npus
        par = dict(w.parallel or {})
        check_parallel(par)
        tp, pp = par.get("tp", 1), par.get("pp", 1)
        check_effect(par, tp, pp)
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
        if dp == 1 and par.get("zero", 0):
            raise ConfigError(f"workload.parallel.zero = {par['zero']} has no effect with "
                              f"dp = 1: there are no data-parallel replicas to shard the "
                              f"training state over; leave it out")
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
        self.v = par.get("interleave", 1)
        if self.v > 1 and (pp == 1 or self.m % pp):
            raise ConfigError(f"workload.parallel.interleave = {self.v}: the interleaved "
                              f"schedule needs pp > 1 and micro_batches a multiple of pp (got "
                              f"pp = {pp}, micro_batches = {self.m})")
        self.sp = bool(par.get("sp", False)) and tp > 1
        self.zero = par.get("zero", 0)
        self.replicas = par.get("replicas", "all")
        self.tp_ranks = par.get("tp_ranks", "all")
        self._costs_of = {}
        self.scatter_gather = par.get("scatter_gather", True)
        self.tp_overlap = par.get("tp_overlap", True)
        self.p2p_sync = par.get("p2p_sync", False)
        self.recompute = recompute_mode(cfg)
        L = len(model.layers)
        if pp * self.v > L:
            raise ConfigError(f"workload.parallel.pp = {pp}" +
                              (f" x interleave = {self.v}" if self.v > 1 else "") +
                              f": more stages than the {L} layers of {model.name}")
        check_divisible(model, tp)
        self.ep = par.get("ep", 1)
        self.expert = [l.tp == "expert" for l in model.layers]
        check_experts(model, self.expert, self.ep, dp, tp)
        self.precision = w.precision or model.default_precision
        self.pb = precision_bytes(self.precision)
        self.optimizer = w.optimizer
        self.engine = w.engine or "npu"
        self.algorithm = w.algorithm
        has_tables = any(l.kind == "embedding" and l.table is not None for l in model.layers)
        self.tables = par.get("tables", "split" if has_tables else "replicated")
        if "tables" in par and not has_tables:
            raise ConfigError(f"workload.parallel.tables = {par['tables']!r}: {model.name} has "
                              f"no embedding tables to place (the key is read by models with "
                              f"them, such as dlrm); leave it out")
        if self.tables == "split" and has_tables and (tp > 1 or pp > 1):
            raise ConfigError(f"workload.parallel.tables = 'split': embedding tables are spread "
                              f"over the data-parallel NPUs, which needs tp = pp = 1 (got tp = "
                              f"{tp}, pp = {pp}); or set tables = 'replicated'")
        # coordinates: rank r -> (d, t, s), the first dimension of `order` varying fastest
        size = {"dp": dp, "tp": tp, "pp": pp}
        self.coords, self.at = ({}, {}) if like is None else (like.coords, like.at)
        self._counterparts = {}          # (counterpart(), once per NPU)
        for r, npu in enumerate(self.npus if like is None else ()):
            c, x = {}, r
            for d in self.order:
                c[d] = x % size[d]
                x //= size[d]
            key = (c["dp"], c["tp"], c["pp"])
            self.coords[npu] = key
            self.at[key] = npu
        self.specs, same = ({} if like is None else like.specs), {}   # (NPUs sharing their
        for n in self.npus if like is None else ():      # own fields' table: one spec)
            own = topo.node_mem[pos[n]] if topo.node_mem else None
            sp = same.get(id(own))
            if sp is None:
                sp = same[id(own)] = npu_spec(cfg, topo, pos[n])
            self.specs[n] = sp
        if like is not None and like.precision == self.precision:
            self.peak = like.peak
        else:
            by_spec, kinds_peak = {}, {}     # (NPUs of one spec share its table)
            for n, sp in self.specs.items():
                t = by_spec.get(id(sp))
                if t is None:
                    t = by_spec[id(sp)] = {kind: sp.peak_flops(self.precision) *
                                           sp.efficiency(kind) for kind in sp.efficiencies}
                kinds_peak[n] = t
            self.peak = _Peaks(kinds_peak)   # (npu, kind) -> FLOP/s
        self.split_table = [self.tables == "split" and l.kind == "embedding" and
                            l.table is not None for l in model.layers]
        self.splits = [tp_split(l, tp) for l in model.layers]
        self.pad = vocabulary_padding(model, tp)
        self.tied = tied_layers(model)
        # sequence parallelism: which layers run on 1/tp of the sequence, and where the
        # sequence is gathered and scattered
        self.seq = sequence_plan(model, tp, self.sp)
        check_model_effect(self, par)
        self.stash_div = [tp if (self.seq.split[i] or self.seq.gather_before[i]) else
                          self.splits[i][0] for i in range(L)]
        for i in range(L):
            if self.seq.split[i]:
                self.splits[i] = (tp, tp, self.splits[i][2], tp)
            if self.expert[i]:           # each NPU holds experts / ep of the experts
                self.splits[i] = (1, 1, self.ep, 1)
        # per sample, the bytes each layer keeps for its backward pass (recomputation
        # keeps less)
        self.stash_sample, self.blocks = stash_per_sample(model, self.pb, self.recompute)
        # stages: contiguous layer ranges of about equal roofline time on the first NPU;
        # with interleave = v, pp x v virtual stages, virtual stage c pp + s on stage s
        sp0 = self.specs[self.npus[0]]
        t = [sum(sp0.layer_seconds(l, self.precision, self.mb, ph)
                 for ph in ("fwd", "bwd_input", "bwd_weight")) for l in model.layers]
        self.stages = _stages(t, pp * self.v, self.blocks)
        self.stage_of = np.zeros(L, np.int64)
        for s, (a, b) in enumerate(self.stages):
            self.stage_of[a:b] = s
        self.kernels = KernelTimes(self) if w.compute == "kernels" else None
        self.grad_add = w.grad_accumulation == "add"
        for key, what in KERNEL_ONLY.items():     # (read by the kernel model alone)
            v = getattr(w, key)
            if self.kernels is None and v != KEY_MAP[f"workload.{key}"].default:
                raise ConfigError(f"workload.{key} = {v!r} {what}, and workload.compute = "
                                  f"{w.compute!r}; set workload.compute = 'kernels' or leave "
                                  f"the key out")
        if w.step_after == "all" and self.zero:
            raise ConfigError(f"workload.step_after = 'all' steps after every bucket's "
                              f"all-reduce, and workload.parallel.zero = {self.zero} "
                              f"reduce-scatters the buckets, each shard stepped after its "
                              f"own; leave workload.step_after out or set it to 'bucket'")
        self.optimizer_step = w.optimizer_step
        self.table_owner = {}
        if any(self.split_table):
            self._place_tables()
        self.memory = self._memory_needed()

    # -------------------------------------------------------------- groups
    def npu(self, d, t, s):
        return self.at[(d, t, s)]

    def dp_group(self, t, s):
        return [self.at[(d, t, s % self.pp)] for d in range(self.dp)]

    def tp_group(self, d, s):
        return [self.at[(d, t, s % self.pp)] for t in range(self.tp)]

    def ep_group(self, npu):
        """The expert-parallel group of npu: the ep consecutive data-parallel replicas it
        belongs to (same tensor rank and stage)."""
        d, t, s = self.coords[npu]
        first = d - d % self.ep
        return [self.at[(x, t, s)] for x in range(first, first + self.ep)]

    def expert_dp_groups(self, t, s):
        """The groups that all-reduce the experts' gradients: replicas holding the same
        experts (the same position in their expert-parallel group)."""
        return [[self.at[(d, t, s % self.pp)] for d in range(c, self.dp, self.ep)]
                for c in range(self.ep)]

    def replicas_run(self):
        """The data-parallel replicas whose passes are built (replicas = 'one': replica 0;
        the others, identical, only join its gradient collectives)."""
        return range(1 if self.replicas == "one" else self.dp)

    def ranks_run(self):
        """The tensor-parallel ranks whose ops are built (tp_ranks = 'one': rank 0; the
        others, identical, are not built: their parts of a group's collectives are rank 0's
        own by symmetry)."""
        return range(1 if self.tp_ranks == "one" else self.tp)

    def stage_npus(self, s):
        """The NPUs of stage s (a virtual stage: the stage s % pp) that run passes: every
        replica's, or replica 0's alone when workload.parallel.replicas = 'one'; of each,
        every tensor-parallel rank, or rank 0 alone when tp_ranks = 'one'."""
        s %= self.pp
        return [self.at[(d, t, s)] for d in self.replicas_run() for t in self.ranks_run()]

    def counterpart(self, npu):
        """The NPU whose passes npu's are taken to be: itself if built, else the one of
        replica 0 (replicas = 'one') and rank 0 (tp_ranks = 'one') in its place."""
        c = self._counterparts.get(npu)
        if c is None:
            d, t, s = self.coords[npu]
            c = self._counterparts[npu] = self.at[(d if d < len(self.replicas_run()) else 0,
                                                   t if t < len(self.ranks_run()) else 0, s)]
        return c

    # -------------------------------------------------------------- costs
    def costs(self, i, samples):
        """_costs(i, samples), computed once per layer and sample count."""
        key = (i, samples)
        got = self._costs_of.get(key)
        if got is None:
            got = self._costs_of[key] = self._costs(i, samples)
        return got

    def _costs(self, i, samples):
        """(flops, bytes) of layer i's forward, input-gradient and weight-gradient ops on one
        NPU for `samples` samples (None where there is no such work), and the bytes it
        stashes. Forward reads its input and weights and writes its output; the input
        gradient reads the output gradient and the weights and writes the input gradient;
        the weight gradient reads the output gradient and the tensors the layer saved and
        writes the weight gradient (as pysim.models.presets.NpuSpec.layer_seconds). The
        bytes stashed are those of the tensors the layer owns (each kept tensor counted
        once, pysim.models.tensors)."""
        layer = self.model.layers[i]
        fi, fo, fw, ff = self.splits[i]
        pad = self.pad[i]
        a = self.pb.act
        inb = samples * layer.in_elems * a / fi
        outb = samples * layer.out_elems * a / fo * pad
        # the weights' bytes per phase (amp: their 16-bit casts; weight_traffic)
        elems = layer.weight_elems / fw * (samples if layer.kind == "embedding" else 1) * pad
        w_fwd, w_bin, w_bw = (elems * b for b in weight_traffic(self.pb, layer.kind))
        stash = samples * self.stash_sample[i] / self.stash_div[i]
        # what the weight gradient reads: every tensor the layer saved, recomputed or kept
        saved = samples * (layer.saved_elems * a + layer.saved_fixed_bytes) / self.stash_div[i]
        ff = ff / pad
        fwd = (samples * layer.fwd_flops / ff, inb + outb + w_fwd)
        bin_ = (samples * layer.bwd_input_flops / ff, inb + outb + w_bin) \
            if layer.bwd_input_flops else None
        bw = (samples * layer.bwd_weight_flops / ff, outb + saved + w_bw) \
            if layer.bwd_weight_flops else None
        return fwd, bin_, bw, int(math.ceil(stash))

    def grad_bytes(self, i):
        """Bytes of layer i's weight gradient on one NPU (its share under tensor
        parallelism); split embedding tables have none to all-reduce."""
        layer = self.model.layers[i]
        if self.split_table[i]:
            return 0
        return int(math.ceil(layer.params * self.pad[i] * self.pb.grad / self.splits[i][2]))

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
        n = layer.params * self.pad[i] / self.splits[i][2]
        if self.zero:                    # each replica steps its shard of the parameters
            n /= self.dp
        if not n:
            return None
        return n * OPTIMIZER_FLOPS[self.optimizer], n * self.step_bytes_per_param()

    def step_bytes_per_param(self):
        """HBM bytes per parameter of a dense optimizer step (workload.optimizer_step).
        'fused': one pass reading the weights, the gradient, the fp32 master weights (mixed)
        and the optimizer state, writing all but the gradient. 'passes': the step as separate
        multi-tensor kernels, as Megatron-LM's mixed-precision optimizer of 2021 ran it
        (megatron/optimizer/optimizer.py, FP16OptimizerWithFP16Params.step; clip_grads.py):
        mixed precision: the gradient converted to fp32 (read g, write 4), unscaled and
        checked for inf/NaN (read 4, write 4), its norm for clipping (read 4), Adam or SGD
        over the fp32 master weights and state (read gradient, master and state, write
        master and state), the master weights copied to the model's (read 4, write w);
        amp: GradScaler's unscale and inf check in place (read g, write g), then as the other
        precisions: the gradient's norm (read g) and the step. (The fused step takes the
        loss scale itself, as fused optimizers do.)"""
        pb, state = self.pb, optimizer_bytes(self.optimizer, self.precision)
        if self.optimizer_step == "fused":
            return 2 * pb.weight + pb.grad + 2 * pb.master + 2 * state
        if pb.master:
            return (pb.grad + 4) + (4 + 4) + 4 + (4 + 2 * pb.master + 2 * state) + \
                (pb.master + pb.weight)
        unscale = 2 * pb.grad if pb.cast else 0
        return unscale + pb.grad + (2 * pb.weight + pb.grad + 2 * state)

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
        per_param = state_bytes_per_param(pb, optimizer_bytes(self.optimizer, self.precision),
                                          self.zero, self.dp)
        out, by_stage = {}, {}
        tables = any(self.split_table)
        for npu in self.npus:
            d, t, s = self.coords[npu]
            if not tables and s in by_stage:         # (the same for every NPU of a stage)
                out[npu] = by_stage[s]
                continue
            state = stash = 0.0
            for c in range(self.v):
                a, b = self.stages[c * self.pp + s]
                for i in range(a, b):
                    layer = self.model.layers[i]
                    if self.split_table[i]:
                        if self.table_owner.get(i) == npu:
                            state += layer.params * pb.weight
                        continue
                    state += layer.params * self.pad[i] / self.splits[i][2] * per_param
                    stash += self.mb * self.stash_sample[i] / self.stash_div[i] / self.v
            if self.schedule == "gpipe":
                inflight = self.m * self.v
            elif self.v == 1:
                inflight = min(self.m, self.pp - s)
            else:                        # the interleaved schedule's warm-up, in chunks
                inflight = min(self.m * self.v, (self.pp - s - 1) * 2 + (self.v - 1) *
                               self.pp + 1)
            out[npu] = by_stage[s] = int(math.ceil(state + stash * inflight))
        return out

    def state_per_param(self):
        """Bytes of training state an NPU keeps per parameter it holds (ZeRO's sharding)."""
        return state_bytes_per_param(self.pb, optimizer_bytes(self.optimizer, self.precision),
                                     self.zero, self.dp)

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



# The configuration keys the layout reads (pysim.schema).
declare(
    Key("workload", "model", "str", None, "-",
        "Training: a zoo model's name (pysim models), or an .onnx or ASTRA-sim workload file, "
        "or a folder of Chakra execution traces, one per rank (relative to the config).", None),
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
        "('split': embedding tables spread over the NPUs with all-to-all, or 'replicated'), "
        "sp (sequence parallelism, default false), interleave (model chunks per stage, "
        "default 1), zero (ZeRO stage 0-3, default 0), ep (expert parallelism, default 1), "
        "scatter_gather (default true), tp_overlap (default true: the input gradient's "
        "tensor-parallel collective runs beside the weight gradient; false: after it), "
        "p2p_sync (default false: a stage's next pass starts beside its sends to the next "
        "or previous stage; true: after them, as Megatron-LM's exchanges end in "
        "torch.cuda.synchronize()), "
        "replicas ('all' or 'one': build data-parallel "
        "replica 0's passes only), tp_ranks ('all' or 'one': build tensor-parallel rank "
        "0's ops only, the other ranks' parts of its groups' collectives taken to be its "
        "own by symmetry); see docs/training.md.",
        raising(check_parallel)),
    Key("workload", "precision", "str", None, "-",
        "Training: fp32, fp16, bf16, mixed (16-bit weights, activations and gradients, "
        "fp32 master weights: Micikevicius et al.) or amp (PyTorch's automatic mixed "
        "precision: fp32 weights, gradients and state, 16-bit activations and products, "
        "weights cast per use); default: the model's.", None,
        lambda: list(PRECISIONS)),
    Key("workload", "optimizer", "str", "sgd", "-",
        "Training: 'sgd' (with momentum) or 'adam': the state the optimizer step reads and "
        "writes.", None, lambda: ["sgd", "adam"]),
    Key("workload", "optimizer_step", "str", "fused", "-",
        "Training: the optimizer step's HBM traffic: 'fused' (one pass over weights, "
        "gradient, master weights and state) or 'passes' (separate kernels as Megatron-LM's "
        "mixed-precision optimizer of 2021: fp32 gradient copy, unscale and inf check, "
        "norm for clipping, the step, the weights copied back; 52 bytes per parameter with "
        "mixed precision and Adam).", None, lambda: list(OPTIMIZER_STEPS)),
)
