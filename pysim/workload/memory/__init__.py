"""Memory plans for training iterations: what each NPU keeps in its HBM, offloads to remote
memory, recomputes or compresses, and the ops and memory holds that follow.

A policy (`workload.memory.policy`, one module of `policies` each, registered by name) looks
at one NPU's layers -- the bytes each layer's forward pass keeps for its backward pass (its
stash), the cycles of its forward and backward ops -- and at the NPU's memory budget and its
bandwidth to remote memory, and returns a `Plan`: per layer `keep`, `swap` (out to remote
memory after the forward op, back before the backward ops) or `recompute` (dropped after the
forward pass, its forward op run again before its backward ops), with a compression ratio
per layer when `compression` is joined to the policy (COMET). `expand` turns a plan into
ops, dependencies and holds on a *sink*: the iteration's op graph (`GraphSink`, the real
run) or `Estimate`, which schedules the plan on one NPU's compute unit and a channel each
way in csim's compiled op scheduler and predicts its time and peak memory, which the
planning policies (lms's auto-tuning, karma) use to choose. Both see the same expansion, so
on one NPU with a dedicated link the prediction equals the run by construction
(self-consistency); they differ by what the estimate leaves out (shared links, HBM contention,
collectives).

Lifetimes on an NPU (per micro-batch; bytes of the NPU's share of the layer):
- resident: weights, gradients, optimizer state -- from the NPU's first op to its last;
- a kept tensor (pysim.models.tensors; owned by the first layer that keeps it): from its
  owner's forward op's start to its owner's last backward op's finish (keep); swapped: until
  its swap-out (after the last forward op reading it) is done (vDNN: the layer two after
  waits for it; LMS: freed when the swap-out and the next layer's forward are done), and
  again from its swap-in's start; recomputed: until the next layer's forward is done, and again from its
  recomputation's start; compressed: the full stash until its compressor op is done, the
  compressed bytes until its decompressor op, the full stash again from then;
- transients: a forward op's output while it runs, a backward op's input gradient while the
  layer's backward ops run.
On a memory node or host, an offloaded stash takes its bytes from its write's start to its
read's finish. Offloaded pages go to the NPU's nearest memory nodes in proportion to the
bandwidth of its links to them (MC-DLA's bandwidth-aware placement), or to its nearest
host's DRAM.

Package layout: `registry` (policies by name, their keys), `plan` (layer costs, kept
tensors, budgets, plans), `policies` (one module per policy), `expand` (a plan's ops and
holds on a sink), `estimate` (the planner's performance model), `placement` (where
offloaded bytes go), `apply` (plans added to an op graph), `training` (training
iterations).
"""
from __future__ import annotations

from pysim.workload.memory.registry import (  # noqa: F401
    COMMON_FIELDS, COMPRESSION_FIELDS, DEFAULT_RATIO, KEEP, LAYER_KINDS, POLICIES, RECOMPUTE,
    SWAP, Policy, check_fields, check_ratios, params_from, parse_policy, policy_names, register)
from pysim.workload.memory.plan import Budget, Kept, LayerCost, Plan  # noqa: F401
from pysim.workload.memory.expand import Skeleton, expand  # noqa: F401
from pysim.workload.memory.estimate import Estimate, Prediction, chain, estimate  # noqa: F401
from pysim.workload.memory.placement import Placement, placement, split  # noqa: F401
from pysim.workload.memory.apply import (  # noqa: F401
    Applied, GraphSink, NpuWork, apply, budget_for, decide)
from pysim.workload.memory.policies.karma import decide_karma  # noqa: F401
from pysim.workload.memory.policies.lms import decide_lms  # noqa: F401
from pysim.workload.memory.policies.none import decide_none  # noqa: F401
from pysim.workload.memory.policies.offload import decide_offload  # noqa: F401
from pysim.workload.memory.policies.recompute import decide_recompute  # noqa: F401
from pysim.workload.memory.training import (  # noqa: F401
    apply_training, host_update, kept_tensors, layer_costs, resident_bytes, training_memory_report,
    training_work)
