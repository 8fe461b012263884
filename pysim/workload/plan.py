"""What a training plan records of the op graph it built: per layer and NPU the ops of each
pass and the bytes kept for backward (LayerOps), each collective's ops (CollectiveOps), and
the plan itself (Plan). Written by the training builders (pysim.workload.training, and the
ASTRA-sim workloads, pysim.workload.astra); read by the memory plans and the reports."""
from __future__ import annotations

from dataclasses import dataclass, field


# ------------------------------------------------------------------ what the plan records

@dataclass
class LayerOps:
    fwd: int | None
    bwd_input: int | None
    bwd_weight: int | None
    stash_bytes: int                     # kept from this forward op for the backward ops


@dataclass
class CollectiveOps:
    what: str                            # dp_all_reduce, tp_all_reduce, all_to_all, ...
    collective: str                      # all_reduce, all_to_all
    group: list
    bytes: int                           # per participant
    iteration: int
    micro_batch: int | None
    layers: list                         # layer indices whose data it carries
    first: int                           # op id range [first, last) in the graph
    last: int
    done: dict                           # per NPU: the op ending its part
    layer_bytes: list = field(default_factory=list)   # per layer in `layers`: its bytes


@dataclass
class Plan:
    model: object
    precision: str
    optimizer_name: str
    batch: int
    dp: int
    tp: int
    pp: int
    micro_batches: int
    schedule: str
    order: list
    tables: str
    engine: str
    algorithm: str
    npus: list
    coords: dict                         # npu -> (dp index, tp index, stage)
    stages: list                         # per stage: (first layer, last layer + 1)
    iterations: list = field(default_factory=list)     # per iteration: (first, last) op ids
    layer_ops: dict = field(default_factory=dict)
    optimizer: dict = field(default_factory=dict)
    collectives: list = field(default_factory=list)
    sends: list = field(default_factory=list)
    recomputed: list = field(default_factory=list)     # (iteration, npu, op): recomputation
    table_owner: dict = field(default_factory=dict)    # layer index -> npu (split tables)
    memory: dict = field(default_factory=dict)         # npu -> bytes needed in HBM
    layout: object = None                # the resolved layout (sizes, splits, costs)

    def stash(self, iteration, layer, npu, micro_batch):
        """(op producing the layer's stash, last op consuming it, bytes) on npu, or None."""
        lo = self.layer_ops.get((iteration, layer, npu, micro_batch))
        if lo is None or lo.fwd is None:
            return None
        last = lo.bwd_weight if lo.bwd_weight is not None else lo.bwd_input
        return lo.fwd, last, lo.stash_bytes

    def describe(self):
        return dict(model=self.model.name, precision=self.precision,
                    optimizer=self.optimizer_name, batch=self.batch, dp=self.dp, tp=self.tp,
                    pp=self.pp, micro_batches=self.micro_batches, schedule=self.schedule,
                    order=list(self.order), tables=self.tables, engine=self.engine,
                    algorithm=self.algorithm, npus=list(self.npus),
                    stages=[list(s) for s in self.stages],
                    memory_bytes=dict(self.memory))
