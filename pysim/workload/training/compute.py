"""How long a training op computes: `workload.compute`.

- "roofline" (the default): max(FLOPs / (peak x the layer kind's efficiency), bytes / HBM
  bandwidth), the efficiencies of [topology.npu] (pysim.models.presets).
- "kernels": the kernel model of the NPU's preset (pysim.models.kernels): a linear layer's
  product by its shape on this NPU (its tensor-parallel share), the attention core's batched
  products and score passes (`workload.attention`: 'unfused' or 'flash'), every other layer
  at its memory roofline at the achievable HBM bandwidth, each kernel with its launch
  overhead. A dropout followed by a residual addition runs forward as one fused kernel
  (Megatron-LM's bias-dropout-add; Narayanan et al., SC 2021, section 4.2): the addition
  reads both inputs and writes its output, the dropout only writes its 1-byte mask. The op keeps its bytes (for the HBM it shares with communication); its rate is
  set so that it takes the kernel model's time.

`workload.grad_accumulation`: how a micro-batch's weight gradient joins the gradient
accumulated over the iteration's earlier micro-batches. 'fused' (the default) costs nothing
beyond the weight gradient's product (the product adds into the accumulated gradient in its
epilogue). 'add' (with 'kernels'): a separate element-wise addition after the product, on
every micro-batch but the first, reading both gradients and writing the sum (3 gradient
bytes per parameter at the achievable HBM bandwidth, and a launch): what PyTorch's autograd
does when a parameter's gradient already exists (`param.grad += new`), and Megatron-LM's
local data parallelism of 2021 did (its contiguous buffers' hook, `main_grad.add_(grad)`).

`workload.loss_kernels`: the cross-entropy loss over the logits. 'fused' (the default): one
kernel forward reading the logits (and writing a number per token), one backward writing
their gradient, at the activations' precision. 'passes' (with 'kernels'): Megatron-LM's
vocabulary-parallel cross entropy as its code of 2021 runs it without
`--fp16-lm-cross-entropy` (megatron/model/gpt_model.py casts the fp16 logits to fp32,
megatron/mpu/cross_entropy.py works on them in place), per logit on its GPU: forward the
cast (2 read + 4 written), the maximum (4), subtracting it (4 + 4), the exponential (4 + 4),
the sum (4), the division into probabilities kept for backward (4 + 4): 38 bytes in 6
kernels; backward the target's subtraction (one element per token), the multiplication by
the output gradient (4 + 4) and the cast back to fp16 (4 + 2): 14 bytes in 3 kernels.
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.models.kernels import (ATTENTION, KERNELS, attention_seconds, linear_seconds,
                                  memory_seconds)
from pysim.models.layers import prod
from pysim.schema import Key, declare

COMPUTE = ("roofline", "kernels")
GRAD_ACCUMULATION = ("fused", "add")
LOSS_KERNELS = ("fused", "passes")
# workload.loss_kernels = 'passes': (bytes per logit, kernels) forward and backward
LOSS_PASSES = {"fwd": (38, 6), "bwd_input": (14, 3)}
ACCUMULATE = "bwd_weight_add"   # the phase of a weight gradient followed by its addition

declare(
    Key("workload", "compute", "str", "roofline", "-",
        "Training: how long an op computes: 'roofline' (FLOPs at peak x the layer kind's "
        "efficiency, or bytes at HBM bandwidth) or 'kernels' (the NPU preset's kernel "
        "model: products by their shape, attention, element-wise kernels at achievable HBM "
        "bandwidth, launch overhead).", None, lambda: list(COMPUTE)),
    Key("workload", "attention", "str", "unfused", "-",
        "Training with workload.compute = 'kernels': the attention core's kernels, "
        "'unfused' (batched products and softmax/dropout passes over the scores) or "
        "'flash' (FlashAttention).", None, lambda: list(ATTENTION)),
    Key("workload", "grad_accumulation", "str", "fused", "-",
        "Training with workload.compute = 'kernels': a micro-batch's weight gradient added "
        "to the accumulated one inside its product ('fused') or by a separate element-wise "
        "kernel after it on every micro-batch but the first ('add': 3 gradient bytes per "
        "parameter, as PyTorch's autograd and Megatron-LM of 2021 do).", None,
        lambda: list(GRAD_ACCUMULATION)),
    Key("workload", "loss_kernels", "str", "fused", "-",
        "Training with workload.compute = 'kernels': the cross-entropy loss as one kernel "
        "each way over the logits ('fused') or as Megatron-LM of 2021 runs it on fp32 "
        "logits ('passes': 38 bytes per logit in 6 kernels forward, 14 in 3 backward).",
        None, lambda: list(LOSS_KERNELS)),
)


def kernel_model(spec):
    """The kernel model of an NPU's preset, or a ConfigError."""
    km = KERNELS.get(spec.name)
    if km is None:
        raise ConfigError(f"workload.compute = 'kernels' needs an NPU preset with a kernel "
                          f"model ({', '.join(sorted(KERNELS))}); the NPU is "
                          f"{spec.name!r} (topology.npu.preset)")
    return km


class KernelTimes:
    """Per op, the rate that makes it take the kernel model's time."""

    def __init__(self, lay):
        self.lay = lay
        self.mode = getattr(lay.cfg.workload, "attention", "unfused")
        self.heads = lay.model.config.get("heads")
        self.loss_passes = getattr(lay.cfg.workload, "loss_kernels", "fused") == "passes"
        self.models = {n: kernel_model(sp) for n, sp in lay.specs.items()}
        layers = lay.model.layers
        self.fused = {i for i, l in enumerate(layers[:-1])       # dropout + residual add
                      if l.kind == "eltwise" and l.op == "dropout" and
                      layers[i + 1].kind == "eltwise" and layers[i + 1].op == "add"}
        # NPUs of equal specs time an op alike: per NPU, the first NPU with its spec
        self.like, firsts = {}, []
        for n, sp in lay.specs.items():
            self.like[n] = next((m for m in firsts if lay.specs[m] == sp), n)
            if self.like[n] == n:
                firsts.append(n)
        self.memo = {}

    def seconds(self, npu, i, phase, samples, nbytes):
        lay = self.lay
        spec, km = lay.specs[npu], self.models[npu]
        peak = spec.peak_flops(lay.precision)
        hbm = spec.hbm_bytes_per_s
        layer = lay.model.layers[i]
        fi, fo, fw, ff = lay.splits[i]
        if layer.kind == "linear" and layer.in_shape:
            tokens = samples * prod(layer.in_shape[:-1])
            k, n = layer.in_shape[-1], layer.out_shape[-1] * lay.pad[i]
            if layer.tp == "column" and lay.tp > 1:
                n /= lay.tp
            elif layer.tp == "row" and lay.tp > 1:
                k /= lay.tp
            t = linear_seconds(km, peak, int(tokens), int(k), int(n), phase)
            return max(t, memory_seconds(km, hbm, nbytes))
        if layer.kind == "attention" and layer.op in ("causal", "dot") and self.heads and \
                phase != "bwd_weight":
            q = layer.out_shape[0]
            hidden = layer.out_shape[-1]
            d = hidden // self.heads
            flops = samples * (layer.fwd_flops if phase == "fwd" else layer.bwd_input_flops)
            return attention_seconds(km, peak, hbm, samples * self.heads / ff, q, q, d, phase,
                                     self.mode, flops / ff, lay.pb.act)
        if phase == "fwd" and i in self.fused:       # its mask, in the addition's kernel
            return memory_seconds(km, hbm, self.mask_bytes(i, samples), kernels=0)
        if layer.kind == "loss" and self.loss_passes and phase in LOSS_PASSES:
            per, kernels = LOSS_PASSES[phase]
            return memory_seconds(km, hbm, per * samples * layer.in_elems / fi, kernels)
        return memory_seconds(km, hbm, nbytes)

    def accumulate_bytes(self, i):
        """Layer i's gradient accumulation on one NPU ('add'): the accumulated and the new
        gradient read, the sum written."""
        return 3 * self.lay.grad_bytes(i)

    def mask_bytes(self, i, samples):
        """A fused dropout's 1-byte mask for `samples` samples on one NPU."""
        return samples * self.lay.model.layers[i].out_elems / self.lay.splits[i][1]

    def rate(self, npu, i, phase, samples, flops, nbytes):
        """(peak FLOP/s, bytes) for a compute op of layer i on npu taking the kernel
        model's time (i None: an optimizer step, memory-bound); computed once per spec of
        NPU and op."""
        key = (self.like[npu], i, phase, samples, flops, nbytes)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._rate(npu, i, phase, samples, flops, nbytes)
        return got

    def _rate(self, npu, i, phase, samples, flops, nbytes):
        if i is None:
            t = memory_seconds(self.models[npu], self.lay.specs[npu].hbm_bytes_per_s, nbytes)
        elif phase == ACCUMULATE:
            add = self.accumulate_bytes(i)
            t = self.seconds(npu, i, "bwd_weight", samples, nbytes) + \
                memory_seconds(self.models[npu], self.lay.specs[npu].hbm_bytes_per_s, add)
            nbytes += add
        else:
            t = self.seconds(npu, i, phase, samples, nbytes)
            if phase == "fwd" and i in self.fused:   # the HBM it moves: its mask alone
                nbytes = self.mask_bytes(i, samples)
        spec = self.lay.specs[npu]
        if flops > 0:
            return flops / t, nbytes
        return spec.peak_flops(self.lay.precision), max(nbytes, t * spec.hbm_bytes_per_s)
