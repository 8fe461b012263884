"""Data parallelism: the gradients of each stage all-reduced over its data-parallel group in
buckets, and the optimizer steps that follow them; under ZeRO (pysim.workload.training.zero)
the buckets are reduce-scattered, each replica steps its shard, and (stages 1 and 2) the
updated weights are all-gathered."""
from __future__ import annotations

from pysim.schema import POS, Key, declare

STEP_AFTER = ("bucket", "all")

declare(
    Key("workload", "bucket_mb", "float", 25.0, "MiB",
        "Training: data-parallel gradients are all-reduced in buckets of this size.", POS),
    Key("workload", "overlap", "bool", True, "-",
        "Training: all-reduce each gradient bucket as soon as the backward pass has produced "
        "it (false: one all-reduce after the whole backward pass; with model chunks, "
        "workload.parallel.interleave, one per chunk in chunk order after the stage's whole "
        "backward pass, as Megatron-LM's local data parallelism)."),
    Key("workload", "step_after", "str", "bucket", "-",
        "Training with workload.overlap (or without it, with model chunks: one bucket per "
        "chunk): each layer's optimizer step after its own bucket's all-reduce ('bucket') or "
        "every step of a replica after every gradient of its stage is final there: every "
        "bucket's all-reduce, every expert layer's, and the backward pass of layers with "
        "nothing to all-reduce ('all': as a step that clips the gradients by their global "
        "norm waits, Megatron-LM's).", None,
        lambda: list(STEP_AFTER)),
)


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
        self.step_all = lay.cfg.workload.step_after == "all"
        self.waiting = []                # with step_after = 'all': (layers, replicas, done)
        self.layers, self.sizes, self.bytes = [], [], 0
        self.experts = []                # expert layers: all-reduced over their own groups
        self.unreduced = []              # with step_after = 'all': (layer, ready) of layers
        #                                  with nothing to all-reduce
        self.expert_steps = []           # with step_after = 'all': (layer, replicas, deps)

    def add(self, i, ready):
        lay = self.b.lay
        nbytes = lay.grad_bytes(i)
        if lay.model.layers[i].params == 0:
            return
        if lay.expert[i] and lay.ep > 1:
            self.experts.append((i, ready))
            return
        if lay.dp == 1 or not nbytes:
            if self.step_all:                   # no all-reduce: the step waits for the rest
                self.unreduced.append((i, ready))
                return
            for n, deps in ready.items():       # nothing to all-reduce: step at once
                self.b.step_done[(self.it, i, n)] = self.b._optimizer(self.it, i, n, deps)
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
        for t in lay.ranks_run():
            grp = lay.dp_group(t, self.s)
            starts = b.counterpart_starts(grp, ready)
            runs = [n for n in grp if n in ready]      # replicas whose passes are built
            if not lay.zero:
                done = b.collective("dp_all_reduce", "all_reduce", grp, self.bytes, starts,
                                    self.it, None, self.layers, self.sizes)
                if self.step_all:
                    self.waiting.append((list(self.layers), runs, done))
                    continue
                for n in runs:
                    for i in self.layers:
                        b.step_done[(self.it, i, n)] = b._optimizer(self.it, i, n, [done[n]])
                continue
            done = b.collective("zero_reduce_scatter", "reduce_scatter", grp, self.bytes,
                                starts, self.it, None, self.layers, self.sizes)
            steps = {n: [b._optimizer(self.it, i, n, [done[n]]) for i in self.layers]
                     for n in runs}
            if lay.zero == 3:            # the weights stay sharded: gathered per layer
                for n in runs:
                    for i, op in zip(self.layers, steps[n]):
                        b.step_done[(self.it, i, n)] = op
                continue
            wbytes = int(self.bytes * lay.pb.weight / lay.pb.grad)
            after = b.counterpart_starts(grp, {n: [x for x in steps[n] if x is not None]
                                               for n in runs})
            gathered = b.collective("zero_all_gather", "all_gather", grp, wbytes, after,
                                    self.it, None, self.layers, self.sizes)
            for n in runs:
                for i in self.layers:
                    b.step_done[(self.it, i, n)] = gathered[n]
        self.layers, self.sizes, self.bytes = [], [], 0

    def close(self, ready, step=True):
        """The last bucket and the expert layers' all-reduces; with step_after = 'all' the
        steps too, unless `step` is false (the stage's other model chunks are to join them:
        step_every)."""
        self.flush(ready)
        lay, b = self.b.lay, self.b
        # each expert layer's gradient all-reduced over the replicas holding the same experts
        for i, ready_i in self.experts:
            nbytes = lay.grad_bytes(i)
            for t in lay.ranks_run():
                for grp in lay.expert_dp_groups(t, self.s):
                    runs = [n for n in grp if n in ready_i]
                    if len(grp) > 1:
                        done = b.collective("expert_dp_all_reduce", "all_reduce", grp, nbytes,
                                            b.counterpart_starts(grp, ready_i), self.it, None,
                                            [i], [nbytes])
                        after = {n: [done[n]] for n in runs}
                    else:
                        after = {n: ready_i[n] for n in runs}
                    if self.step_all:
                        self.expert_steps.append((i, runs, after))
                        continue
                    for n in runs:
                        b.step_done[(self.it, i, n)] = b._optimizer(self.it, i, n, after[n])
        self.experts = []
        if self.step_all and step:
            self.step_every()

    def step_every(self, others=()):
        """step_after = 'all': every step of a replica (clipping by the gradients' global norm)
        after every gradient of its stage is final there -- each bucket's all-reduce, each
        expert layer's, and the gradients of the layers with nothing to all-reduce, in these
        buckets and those of the stage's other model chunks (`others`, closed)."""
        b, every = self.b, {}
        mine = (self,) + tuple(others)
        for x in mine:
            for _, runs, done in x.waiting:
                for n in runs:
                    every.setdefault(n, []).append(done[n])
            for _, runs, after in x.expert_steps:
                for n in runs:
                    every.setdefault(n, []).extend(after[n])
            for _, ready_i in x.unreduced:
                for n, deps in ready_i.items():
                    every.setdefault(n, []).extend(deps)
        for x in mine:
            for layers, runs, _ in x.waiting:
                for n in runs:
                    for i in layers:
                        b.step_done[(self.it, i, n)] = b._optimizer(self.it, i, n, every[n])
            for i, runs, _ in x.expert_steps:
                for n in runs:
                    b.step_done[(self.it, i, n)] = b._optimizer(self.it, i, n, every[n])
            for i, ready_i in x.unreduced:
                for n in ready_i:
                    b.step_done[(self.it, i, n)] = b._optimizer(self.it, i, n, every[n])
            x.waiting, x.expert_steps, x.unreduced = [], [], []
