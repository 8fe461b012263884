"""Which of the training keys a run reads, by where its model comes from.

An ASTRA-sim workload gives each layer's compute times and its own parallelism: the keys that
shape compute (precision, compute, attention), parallelism, data-parallel buckets, the
optimizer and memory plans are not read for it, and are refused when given, as the kinds'
declarations refuse a key of another kind (pysim.workload.base.check_reads). A model of the
zoo or an ONNX file reads no ASTRA-sim key. A Chakra trace (workload.model names its folder)
gives every rank's work, messages and collectives: it reads the collectives' algorithm and
chunks (and NCCL's settings) and the op graph's keys, nothing that shapes a model, its
parallelism, its iterations or its memory (`check_trace_keys`).
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.schema import short
from pysim.workload.base import OP_GRAPH_KEYS

ASTRA_ONLY = ("workload.astra_endpoint_delay", "workload.astra_scheduling",
              "workload.astra_collective_optimization")
NOT_FOR_ASTRA = ("workload.model_params", "workload.parallel", "workload.precision",
                 "workload.optimizer", "workload.bucket_mb", "workload.overlap",
                 "workload.step_after",
                 "workload.compute", "workload.kernel_library", "workload.attention",
                 "workload.grad_accumulation",
                 "workload.optimizer_step", "workload.loss_kernels", "workload.layer_kernels",
                 "workload.memory.")


def check_model_keys(cfg, model):
    """Refuse a training key given (cfg.explicit) that `model` does not read."""
    given = sorted(cfg.explicit)
    if model.given_times:
        for path in given:
            if path.startswith(NOT_FOR_ASTRA):
                raise ConfigError(
                    f"{path} = {short(cfg.get(path))} is not read with an ASTRA-sim workload "
                    f"(workload.model = {cfg.workload.model!r}: its layers give their compute "
                    f"times and parallelism); it is read with a model of the zoo or an ONNX "
                    f"file; leave it out")
        return
    for path in given:
        if path in ASTRA_ONLY:
            raise ConfigError(f"{path} = {short(cfg.get(path))} is read only with an ASTRA-sim "
                              f"workload, and workload.model = {cfg.workload.model!r} is not "
                              f"one; leave it out")


# The workload keys a run of a Chakra trace reads (pysim.workload.chakra.run_trace).
TRACE_READS = ("workload.kind", "workload.model", "workload.algorithm", "workload.chunks",
               "workload.nccl_algorithm", "workload.nccl_protocol",
               "workload.nccl_channels") + OP_GRAPH_KEYS


def check_trace_keys(cfg):
    """Refuse a workload key given (cfg.explicit) that a Chakra trace's run does not read."""
    for path in sorted(cfg.explicit):
        if path.startswith("workload.") and path not in TRACE_READS:
            raise ConfigError(
                f"{path} = {short(cfg.get(path))} is not read with a Chakra trace "
                f"(workload.model = {cfg.workload.model!r}: its nodes give each rank's work, "
                f"messages and collectives); the trace reads "
                f"{', '.join(TRACE_READS[1:7])} and the op graph's keys; leave it out")
