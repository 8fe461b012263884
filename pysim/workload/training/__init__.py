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
  A `LayerTable`: it reads as that dict (a record read is a view of its row) and
  `plan.layer_ops.columns(iteration)` gives the records as numpy arrays.
- `plan.optimizer[(iteration, layer, npu)]` -> the optimizer step's op id.
- `plan.collectives`: `CollectiveOps` records (what, collective, group, bytes, iteration,
  micro_batch, layers, the op id range [first, last), `done`: per NPU the op that ends its
  part), a `CollectiveTable` reading as that list (each record made when read; `columns()`
  as arrays).
- `plan.recomputed`: (iteration, npu, op) of recomputed forward ops, a `RecomputeTable`.
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

import time

from pysim._gc import quiet_gc
from pysim.config import Config
from pysim.topology import build as build_topology
from pysim.network import check_network
from pysim.workload.base import COLLECTIVE_KEYS, OP_GRAPH_KEYS, register
from pysim.workload.graph import run_graph
from pysim.workload.memory import apply_training, training_memory_report
from pysim.workload import runtime
from pysim.workload.training import count
from pysim.workload.training.builder import refuse_before_building, training_graph
from pysim.models.precision import OPTIMIZER_FLOPS
from pysim.workload.training.layout import (DIMS, PARALLEL_FIELDS, TABLES, check_parallel,
                                            load_model)
from pysim.workload.training.pipeline import SCHEDULES
from pysim.workload.notes import slow_group_path
from pysim.workload.training.reads import check_model_keys, check_trace_keys
from pysim.workload import chakra
from pysim.workload.plan import CollectiveOps, LayerOps, Plan
from pysim.workload.training.report import TrainingResult, training_report
from pysim.workload.training.tensor import LOSS_ALL_REDUCES

# The workload keys a training run reads (besides its collectives' and the op graph's);
# pysim.workload.training.reads narrows them by the model's source.
TRAINING = ("workload.model", "workload.model_params", "workload.batch", "workload.parallel",
            "workload.precision", "workload.optimizer", "workload.iterations",
            "workload.bucket_mb", "workload.overlap", "workload.step_after", "workload.compute",
            "workload.kernel_library", "workload.attention",
            "workload.grad_accumulation", "workload.optimizer_step", "workload.loss_kernels",
            "workload.layer_kernels",
            "workload.memory.*",
            "workload.astra_endpoint_delay", "workload.astra_scheduling",
            "workload.astra_collective_optimization")


def _memory_config(cfg, plan):
    """The configuration the memory plan sees: with Megatron-LM's recomputation (full or
    selective, built into the iteration by the plan itself) it holds the iteration's tensors
    as policy 'none' does."""
    if plan.layout.recompute is None:
        return cfg
    c = cfg.with_overrides({"workload.memory.policy": "none"})
    return Config(c._values, c.explicit - {"workload.memory.recompute"}, c.base_dir,
                  c.source, c.typed, c.origin)


@register("training", traces=True, reads=TRAINING + COLLECTIVE_KEYS + OP_GRAPH_KEYS)
@quiet_gc
def run_training(cfg, progress=None, op_count=None):
    """Training iterations of workload.model under workload.parallel: the last iteration's
    time, its compute and (exposed) communication, per layer and per NPU. op_count: the run's
    ops counted already (pysim.workload.training.count.count of cfg's layout), checked
    against the op limit instead of counting again."""
    t0 = time.perf_counter()
    if chakra.is_trace(cfg):             # workload.model names a folder of Chakra traces
        check_trace_keys(cfg)
        return chakra.run_trace(cfg, progress)
    topo = build_topology(cfg)
    check_network(topo, cfg)             # (its limits at once, not after building the graph)
    if op_count is None:                 # (a long zoo model past the op limit, unbuilt)
        refuse_before_building(cfg, topo)
    model = load_model(cfg)
    check_model_keys(cfg, model)
    estimate = getattr(progress, "estimate", None)

    def counted(c):
        estimate({**runtime.before_build(c.graph_total, c.engine_total,
                                         c.engine_total * count.BYTES_PER_OP, cfg),
                  "json_bytes": c.engine_total * count.JSON_BYTES_PER_OP})
    graph, plan = training_graph(cfg, topo, model=model, op_count=op_count,
                                 counted=None if estimate is None else counted)
    applied = None
    if not plan.model.given_times:       # memory plans: pysim.workload.memory
        applied = apply_training(_memory_config(cfg, plan), topo, graph, plan)
    built = time.perf_counter() - t0
    res = run_graph(cfg, graph, progress=progress, topo=topo)
    if applied is not None:
        training_memory_report(res, applied)
    report = training_report(graph, plan, res, cfg)
    slow = slow_group_path(res.links, cfg, topo)
    if slow:
        res.notes.append(slow)
    report["build_seconds"] = built
    out = TrainingResult(**{k: v for k, v in res.__dict__.items()}, training=report)
    out.wall_seconds = time.perf_counter() - t0
    return out


__all__ = ["CollectiveOps", "DIMS", "LOSS_ALL_REDUCES", "LayerOps", "OPTIMIZER_FLOPS",
           "PARALLEL_FIELDS", "Plan", "SCHEDULES", "TABLES", "TrainingResult", "check_parallel",
           "load_model", "run_training", "training_graph", "training_report"]
