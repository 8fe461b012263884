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

`workload.layer_kernels`: the small kernels around a layer's products. 'fused' (the default)
folds them into the layers' element-wise ops and the attention core's two score passes;
'passes' (with 'kernels') runs them as Megatron-LM of 2021 did on PyTorch 1.8 (bias
additions and bias gradients, the attention's copies and scalings, its softmax as
FusedScaleMaskSoftmax picks it, layer norm, GeLU and dropout backward at their full bytes;
`layer_passes`, pysim.models.kernels.megatron_score_passes).

`workload.loss_kernels`: the cross-entropy loss over the logits. 'fused' (the default): one
kernel forward reading the logits (and writing a number per token), one backward writing
their gradient, at the activations' precision. 'passes' (with 'kernels'): Megatron-LM's
vocabulary-parallel cross entropy as its code of 2021 runs it without
`--fp16-lm-cross-entropy` (megatron/model/gpt_model.py casts the fp16 logits to fp32,
megatron/mpu/cross_entropy.py works on them in place), per logit on its GPU: forward the
cast (2 read + 4 written), the maximum (4), subtracting it (4 + 4), the exponential (4 + 4),
the sum (4), the division into probabilities kept for backward (4 + 4): 38 bytes in 6
kernels; backward the target's subtraction (one element per token), the multiplication by
the output gradient (4 + 4) and the cast back to fp16 (4 + 2): 14 bytes in 3 kernels. With
fp32 activations (workload.precision = 'fp32') the logits are fp32 already, and neither cast
runs: 32 bytes in 5 kernels, 8 in 2.
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.models.kernels import (ATTENTION, KERNEL_LIBRARIES, KERNELS, KERNELS_CUDA11,
                                  attention_seconds, linear_seconds,
                                  megatron_score_passes, megatron_softmax_fused,
                                  memory_seconds)
from pysim.models.layers import prod
from pysim.schema import Key, declare

COMPUTE = ("roofline", "kernels")
GRAD_ACCUMULATION = ("fused", "add")
LOSS_KERNELS = ("fused", "passes")
LAYER_KERNELS = ("fused", "passes")
# workload.loss_kernels = 'passes': (bytes per logit, kernels) forward and backward
LOSS_PASSES = {"fwd": (38, 6), "bwd_input": (14, 3)}
ACCUMULATE = "bwd_weight_add"   # the phase of a weight gradient followed by its addition

declare(
    Key("workload", "compute", "str", "roofline", "-",
        "Training: how long an op computes: 'roofline' (FLOPs at peak x the layer kind's "
        "efficiency, or bytes at HBM bandwidth) or 'kernels' (the NPU preset's kernel "
        "model: products by their shape, attention, element-wise kernels at achievable HBM "
        "bandwidth, launch overhead).", None, lambda: list(COMPUTE)),
    Key("workload", "kernel_library", "str", "cuda12", "-",
        "Training with workload.compute = 'kernels': whose matrix products the kernel model's "
        "products are fitted to: 'cuda12' (the NPU preset's measurements, cuBLASLt of CUDA "
        "12.5 on the A100) or 'cuda11' (the A100 presets' products as the libraries of the "
        "CUDA 11 era ran them: fitted to three published measurements of that era, a large "
        "product at 0.739 of peak instead of 0.845, 14% longer).", None,
        lambda: list(KERNEL_LIBRARIES)),
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
        "logits ('passes': 38 bytes per logit in 6 kernels forward, 14 in 3 backward; "
        "with precision 'fp32' no cast, 32 in 5 and 8 in 2).",
        None, lambda: list(LOSS_KERNELS)),
    Key("workload", "layer_kernels", "str", "fused", "-",
        "Training with workload.compute = 'kernels': the small kernels around a layer's "
        "products folded away ('fused') or as Megatron-LM of 2021 ran them on PyTorch 1.8 "
        "('passes': linear biases added and their gradients summed by kernels of their own, "
        "the attention's output copy, scaled Q/K gradients and QKV gradient concatenation, "
        "its fused causal softmax reading the lower triangle or PyTorch's fp32 softmax "
        "where the fused one does not apply, layer norm, GeLU and dropout backward at "
        "their full bytes).", None, lambda: list(LAYER_KERNELS)),
)


def kernel_model(spec, library="cuda12"):
    """The kernel model of an NPU's preset with the products of `library`
    (workload.kernel_library), or a ConfigError."""
    km = KERNELS.get(spec.name)
    if km is None:
        raise ConfigError(f"workload.compute = 'kernels' needs an NPU preset with a kernel "
                          f"model ({', '.join(sorted(KERNELS))}); the NPU is "
                          f"{spec.name!r} (topology.npu.preset)")
    if library == "cuda11":
        km = KERNELS_CUDA11.get(spec.name)
        if km is None:
            raise ConfigError(f"workload.kernel_library = 'cuda11' has the products of the "
                              f"CUDA 11 era for the NPU presets "
                              f"{', '.join(sorted(KERNELS_CUDA11))}; the NPU is "
                              f"{spec.name!r} (topology.npu.preset); leave the key out or "
                              f"set it to 'cuda12'")
    return km


class KernelTimes:
    """Per op, the rate that makes it take the kernel model's time."""

    def __init__(self, lay):
        self.lay = lay
        self.mode = getattr(lay.cfg.workload, "attention", "unfused")
        self.heads = lay.model.config.get("heads")
        self.loss_passes = getattr(lay.cfg.workload, "loss_kernels", "fused") == "passes"
        self.layer_passes = getattr(lay.cfg.workload, "layer_kernels", "fused") == "passes"
        self.extra = layer_passes(lay, self.mode) if self.layer_passes else {}
        library = getattr(lay.cfg.workload, "kernel_library", "cuda12")
        self.models = {n: kernel_model(sp, library) for n, sp in lay.specs.items()}
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
        """Layer i's `phase` op on npu for `samples` samples: its kernels' time, with the
        small kernels of workload.layer_kernels = 'passes' (`extra_bytes`)."""
        t = self._seconds(npu, i, phase, samples, nbytes)
        got = self.extra.get((i, phase))
        if got is not None:
            t += memory_seconds(self.models[npu], self.lay.specs[npu].hbm_bytes_per_s,
                                got[0] * samples, got[1])
        return t

    def extra_bytes(self, i, phase, samples):
        """The HBM bytes of layer i's `phase` small kernels (layer_kernels = 'passes')."""
        got = self.extra.get((i, phase))
        return 0.0 if got is None else got[0] * samples

    def _seconds(self, npu, i, phase, samples, nbytes):
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
        nh = layer.heads or self.heads     # (its own heads, else the model's parameter)
        if layer.kind == "attention" and layer.op in ("causal", "dot") and nh and \
                phase != "bwd_weight":
            q = layer.out_shape[0]
            hidden = layer.out_shape[-1]
            d = hidden // nh
            flops = samples * (layer.fwd_flops if phase == "fwd" else layer.bwd_input_flops)
            heads = samples * nh / ff
            passes = None
            if self.layer_passes:
                fused = megatron_softmax_fused(q, q, heads, lay.pb.act)
                passes = megatron_score_passes(phase, fused, lay.pb.act,
                                               q if layer.op == "causal" else None)
            return attention_seconds(km, peak, hbm, heads, q, q, d, phase,
                                     self.mode, flops / ff, lay.pb.act, passes)
        if phase == "fwd" and i in self.fused:       # its mask, in the addition's kernel
            return memory_seconds(km, hbm, self.mask_bytes(i, samples), kernels=0)
        if layer.kind == "loss" and self.loss_passes and phase in LOSS_PASSES:
            per, kernels = LOSS_PASSES[phase]
            if lay.pb.act >= 4:          # fp32 logits already: no cast either way (2 + 4)
                per, kernels = per - 6, kernels - 1
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
            nbytes += add + self.extra_bytes(i, "bwd_weight", samples)
        else:
            t = self.seconds(npu, i, phase, samples, nbytes)
            if phase == "fwd" and i in self.fused:   # the HBM it moves: its mask alone
                nbytes = self.mask_bytes(i, samples)
            nbytes += self.extra_bytes(i, phase, samples)
        spec = self.lay.specs[npu]
        if flops > 0:
            return flops / t, nbytes
        return spec.peak_flops(self.lay.precision), max(nbytes, t * spec.hbm_bytes_per_s)


def layer_passes(lay, mode):
    """{(layer, phase): (HBM bytes per sample on one NPU, kernels)}: the small kernels
    Megatron-LM of 2021 ran on PyTorch 1.8 around a layer's products and that the kernel
    model's layers otherwise fold away (workload.layer_kernels = 'passes'), at the
    activations' precision (act bytes):

    - a linear layer with a bias, over tokens: PyTorch 1.8's F.linear on a 3-D input is a
      product then `add_(bias)` (its fused addmm takes 2-D inputs only, up to PyTorch
      1.12; pytorch/pytorch#39661 on GitHub), a kernel reading and writing the output (2
      act per output) unless the next layer takes the bias into its own fused kernel (a
      GeLU, a dropout or a residual addition: Megatron-LM's bias-GeLU and
      bias-dropout-add, skip_bias_add). Every bias's gradient is a sum of the output
      gradient over the tokens, its own kernel in the weight-gradient phase (act per
      output).
    - self-attention, unfused (megatron/model/transformer.py, ParallelAttention): the
      context's permute(...).contiguous() forward (act read and written per output), the
      gradients of Q and of K scaled by baddbmm's alpha backward (two kernels, 2 act per
      element of each), and the three gradients concatenated into the QKV projection's
      output gradient (split's backward: 2 act per input element).
    - a layer norm backward (apex's fused kernels, as megatron/model/fused_layer_norm.py
      runs them): the partial weight gradients and the input gradient each read the output
      gradient and the input, a third kernel sums the partials: one act per element and
      one kernel more than a single pass.
    - the bias-GeLU backward (megatron/model/fused_bias_gelu.py) reads the pre-activation
      as well as the output gradient: one act per element more.
    - a dropout backward reads the 1-byte mask with the gradient.
    """
    a = lay.pb.act
    layers = lay.model.layers
    out = {}

    def put(i, phase, nbytes, kernels):
        b, k = out.get((i, phase), (0.0, 0))
        out[(i, phase)] = (b + nbytes, k + kernels)

    for i, l in enumerate(layers):
        fi, fo, fw, ff = lay.splits[i]
        outs = l.out_elems / fo * lay.pad[i]
        ins = l.in_elems / fi
        if l.kind == "linear" and l.in_shape:
            if l.weight_elems > l.in_shape[-1] * l.out_shape[-1]:       # it has a bias
                nxt = layers[i + 1] if i + 1 < len(layers) else None
                taken = nxt is not None and nxt.kind == "eltwise" and \
                    nxt.op in ("gelu", "dropout", "add")
                if len(l.in_shape) >= 2 and not taken:
                    put(i, "fwd", 2 * a * outs, 1)
                put(i, "bwd_weight", a * outs, 1)
        elif l.kind == "attention" and l.op in ("causal", "dot") and mode == "unfused":
            q, hidden = l.out_shape[0], l.out_shape[-1]
            kv = (l.in_elems - q * hidden) // (2 * hidden)
            put(i, "fwd", 2 * a * outs, 1)
            put(i, "bwd_input", 2 * a * (q + kv) * hidden / ff, 2)
            if tuple(l.in_shape) == (q, 3 * hidden):                  # self-attention
                put(i, "bwd_input", 2 * a * ins, 1)
        elif l.kind == "norm" and l.op == "layer":
            put(i, "bwd_input", a * ins, 1)
        elif l.kind == "eltwise" and l.op == "gelu":
            put(i, "bwd_input", a * ins, 0)
        elif l.kind == "eltwise" and l.op == "dropout":
            put(i, "bwd_input", outs, 0)
    return out
