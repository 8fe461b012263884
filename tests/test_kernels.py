"""The kernel model (pysim.models.kernels) against published measurements of kernels alone,
kept here as data with their sources, and the training ops that use it against the model's
closed form.

A100: cuBLASLt fp16 products measured on an A100-SXM4-80GB (Azure AI benchmarking guide,
github.com/Azure/AI-benchmarking-guide, Azure_Results/ND_A100_v4_results.md). H100: bf16
products measured by XLA (github.com/tensorflow/tensorflow, third_party/xla/xla/service/gpu/
model/matmul_interpolator_data.h, sm_90). Both tables are what the presets' constants were
fitted to: these tests hold the fit to the residuals the presets' sources state, so that a
change of the model or its constants that loses them fails."""
import json
import math
from pathlib import Path

import pytest

from conftest import make_cfg
from pysim.models.kernels import (A100_CUDA11_PRODUCTS, KERNELS, KERNELS_CUDA11,
                                  attention_seconds, batched_seconds, gemm_seconds,
                                  memory_seconds)
from pysim.topology import build as build_topology
from pysim.workload import run_graph
from pysim.workload.training import training_graph
from test_training import layer, model

A100_CUBLASLT_FP16 = [          # m, n, k, TFLOP/s
    (1024, 1024, 1024, 119.4), (2048, 2048, 2048, 221.8), (4096, 4096, 4096, 228.0),
    (8192, 8192, 8192, 253.7), (16384, 16384, 16384, 256.5), (1024, 2145, 1024, 132.8),
    (6144, 12288, 12288, 250.8), (802816, 192, 768, 157.8)]
H100_XLA_BF16 = [               # batch, m, n, k, FLOP/s: the products of 2048^3 FLOPs or more
    (2, 4096, 4096, 2048, 763.011e12), (1, 4096, 4096, 4096, 783.329e12),
    (2, 2048, 4096, 1024, 678.724e12), (1, 2048, 2048, 2048, 631.985e12),
    (1, 2048, 4096, 2048, 715.351e12), (1, 1024, 2048, 4096, 653.525e12),
    (1, 4096, 4096, 1024, 677.440e12), (1, 512, 4096, 4096, 644.116e12),
    (4, 1024, 2048, 2048, 712.739e12), (2, 4096, 2048, 4096, 783.186e12)]


@pytest.mark.parametrize("m,n,k,tflops", A100_CUBLASLT_FP16)
def test_a100_products_match_the_measured_table(m, n, k, tflops):
    t = gemm_seconds(KERNELS["a100"], 312e12, m, n, k)
    got = 2 * m * n * k / t / 1e12
    tol = 0.16 if (m, n, k) == (2048, 2048, 2048) else 0.06
    assert got == pytest.approx(tflops, rel=tol)


@pytest.mark.parametrize("b,m,n,k,flops", H100_XLA_BF16)
def test_h100_large_products_match_xlas_measurements(b, m, n, k, flops):
    t = gemm_seconds(KERNELS["h100"], 989.5e12, m, n, k, b)
    assert 2 * b * m * n * k / t == pytest.approx(flops, rel=0.09)


def test_wave_quantisation_and_depth():
    """One more tile than the SMs take in a wave costs a whole wave; a product's rate rises
    with its depth k towards gemm_efficiency x peak."""
    km = KERNELS["a100"]
    one = gemm_seconds(km, 312e12, 128 * 108, 128, 4096) - km.launch_seconds
    two = gemm_seconds(km, 312e12, 128 * 109, 128, 4096) - km.launch_seconds
    assert two == pytest.approx(2 * one * 109 / 108 * 108 / 109, rel=1e-9)
    rates = [2 * 8192 * 8192 * k / gemm_seconds(km, 312e12, 8192, 8192, k)
             for k in (256, 1024, 4096, 65536)]
    assert rates == sorted(rates)
    assert rates[-1] < 312e12 * km.gemm_efficiency


def test_memory_bound_kernels_run_at_the_achievable_bandwidth():
    km = KERNELS["a100"]
    assert memory_seconds(km, 2039e9, 1.7e12) == pytest.approx(km.launch_seconds + 1.0)


@pytest.mark.parametrize("m,n,k,seconds,source", A100_CUDA11_PRODUCTS)
def test_a100_cuda11_products_match_that_eras_measurements(m, n, k, seconds, source):
    """workload.kernel_library = 'cuda11': the A100's products against the three published
    measurements of the CUDA 11 era's libraries they are fitted to (kept in
    pysim.models.kernels with their sources), within 7% of each; and each of them is slower
    than the presets' fit to CUDA 12.5's cuBLASLt says (by 9-17%), as the fit's one free
    constant cannot make all three by itself."""
    t = gemm_seconds(KERNELS_CUDA11["a100"], 312e12, m, n, k)
    assert t == pytest.approx(seconds, rel=0.07)
    assert gemm_seconds(KERNELS["a100"], 312e12, m, n, k) < 0.92 * seconds


def test_the_efficiency_fit_recovers_the_efficiency_that_made_the_times():
    """fit_gemm_efficiency inverts the model: times made by the a100 model at an efficiency
    of 0.6 (the three shapes of the CUDA 11 table) give back 0.6; times 10% longer than the
    a100 preset's at every shape give about 0.845 / 1.1 (the launch cost aside)."""
    from dataclasses import replace
    from pysim.models.kernels import fit_gemm_efficiency
    km = KERNELS["a100"]
    shapes = [row[:3] for row in A100_CUDA11_PRODUCTS]
    made = [(m, n, k, gemm_seconds(replace(km, gemm_efficiency=0.6), 312e12, m, n, k))
            for m, n, k in shapes]
    assert fit_gemm_efficiency(km, 312e12, made) == pytest.approx(0.6, rel=1e-9)
    slower = [(m, n, k, 1.1 * gemm_seconds(km, 312e12, m, n, k)) for m, n, k in shapes]
    assert fit_gemm_efficiency(km, 312e12, slower) == pytest.approx(0.845 / 1.1, rel=0.01)


def test_the_cuda11_products_are_the_a100s_only():
    from pysim.errors import ConfigError
    with pytest.raises(ConfigError, match="kernel_library = 'cuda11'.*'h100'"):
        _one_linear(kernel_library="cuda11", preset="h100")
    with pytest.raises(ConfigError, match="kernel_library = 'cuda11'.*compute = 'roofline'"):
        _one_linear(kernel_library="cuda11", compute="roofline")
    with pytest.raises(ConfigError, match="kernel_library.*'cuda10'.*cuda11"):
        _one_linear(kernel_library="cuda10")


@pytest.mark.parametrize("library", ["cuda12", "cuda11"])
def test_a_training_linear_layer_takes_the_kernel_models_time(library):
    """One linear layer of 512 x 1024 -> 4096 per sample on one A100, workload.compute =
    'kernels': its forward op takes the product (512 b) x 4096 x 1024's time, its input
    gradient (512 b) x 1024 x 4096's and its weight gradient 1024 x 4096 x (512 b)'s, by
    the model of workload.kernel_library's products."""
    from pysim.models.layers import linear
    from pysim.models import Model
    m = Model("one", [linear("l0", (512, 1024), 4096)], input_shape=(512,),
              default_precision="mixed")
    cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": "a100"}},
                   network={"model": "flow"},
                   workload={"kind": "training", "batch": 2, "group": ["n0"],
                             "iterations": 1, "compute": "kernels",
                             "kernel_library": library})
    graph, plan = training_graph(cfg, build_topology(cfg), m)
    res = run_graph(cfg, graph)
    lo = plan.layer_ops[(0, 0, "n0", 0)]
    km, tokens = (KERNELS if library == "cuda12" else KERNELS_CUDA11)["a100"], 2 * 512
    for op, (mm, nn, kk) in ((lo.fwd, (tokens, 4096, 1024)), (lo.bwd_input, (tokens, 1024, 4096)),
                             (lo.bwd_weight, (1024, 4096, tokens))):
        took = res.ops[op]["finish"] - res.ops[op]["start"]
        assert took == pytest.approx(gemm_seconds(km, 312e12, mm, nn, kk) * 1e9, abs=2)


def test_dropout_and_residual_add_run_forward_as_one_fused_kernel():
    """Megatron-LM's bias-dropout-add (Narayanan et al., SC 2021, section 4.2): a dropout
    followed by a residual addition costs forward one kernel moving 7 bytes per element
    (both 2-byte inputs read, the 2-byte output and the 1-byte mask written); a dropout
    alone (the embeddings') keeps its own kernel reading and writing 2 bytes each."""
    from pysim import models
    s, h, b = 256, 512, 2
    m = models.get("transformer", layers=1, hidden=h, heads=8, seq=s, vocab=1024)
    cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": "a100"}},
                   network={"model": "flow"},
                   workload={"kind": "training", "batch": b, "group": ["n0"],
                             "iterations": 1, "compute": "kernels"})
    graph, plan = training_graph(cfg, build_topology(cfg), m)
    res = run_graph(cfg, graph)
    names = [l.name for l in m.layers]
    km, hbm = KERNELS["a100"], 2039e9

    def took(name):
        op = plan.layer_ops[(0, names.index(name), "n0", 0)].fwd
        return res.ops[op]["finish"] - res.ops[op]["start"]
    for drop, add in (("layer0.proj_dropout", "layer0.add1"),
                      ("layer0.fc_dropout", "layer0.add2")):
        assert took(drop) + took(add) == pytest.approx(
            memory_seconds(km, hbm, 7 * s * h * b) * 1e9, abs=3)
    assert took("embed.dropout") == pytest.approx(
        memory_seconds(km, hbm, 4 * s * h * b) * 1e9, abs=2)


def _one_linear(preset="a100", **workload):
    from pysim.models.layers import linear
    from pysim.models import Model
    m = Model("one", [linear("l0", (512, 1024), 4096)], input_shape=(512,),
              default_precision="mixed")
    cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": preset}},
                   network={"model": "flow"},
                   workload={"kind": "training", "batch": 4, "group": ["n0"],
                             "iterations": 1, "compute": "kernels", "optimizer": "adam",
                             "parallel": {"micro_batches": 4}, **workload})
    graph, plan = training_graph(cfg, build_topology(cfg), m)
    return m, plan, run_graph(cfg, graph)


@pytest.mark.parametrize("key, value, what", [
    ("attention", "flash", "chooses the kernel model's attention kernels"),
    ("grad_accumulation", "add", "times the addition with the kernel model"),
    ("layer_kernels", "passes", "times the layers' small kernels with the kernel model"),
    ("loss_kernels", "passes", "times the loss's passes with the kernel model")])
def test_a_key_of_the_kernel_model_under_the_roofline_is_refused(key, value, what):
    """Each key the kernel model alone reads, set under workload.compute = 'roofline', is
    refused naming it, its value and the key that would read it (attention = 'flash' ran to
    the cycle of 'unfused'); at its default it runs."""
    from pysim.errors import ConfigError
    with pytest.raises(ConfigError, match=rf"^workload\.{key} = '{value}' {what}, and "
                                          r"workload\.compute = 'roofline'; set workload\."
                                          r"compute = 'kernels' or leave the key out"):
        _one_linear(compute="roofline", **{key: value})
    _one_linear(compute="roofline", **{key: {"attention": "unfused",
                                             "grad_accumulation": "fused"}.get(key, "fused")})


def test_gradient_accumulation_adds_a_kernel_after_the_first_micro_batch():
    """workload.grad_accumulation = 'add': on micro-batches 1, 2, 3 the weight gradient's
    op takes its product's time and an element-wise addition's (the accumulated and the new
    fp16 gradient read, the sum written: 3 x 2 bytes per parameter at the achievable HBM
    bandwidth, one launch); micro-batch 0 its product's alone, as every micro-batch with
    'fused'."""
    km, hbm, tokens = KERNELS["a100"], 2039e9, 512
    gemm = gemm_seconds(km, 312e12, 1024, 4096, tokens) * 1e9
    for mode in ("add", "fused"):
        m, plan, res = _one_linear(grad_accumulation=mode)
        add = memory_seconds(km, hbm, 3 * 2 * m.layers[0].params) * 1e9
        for j in range(4):
            op = plan.layer_ops[(0, 0, "n0", j)].bwd_weight
            took = res.ops[op]["finish"] - res.ops[op]["start"]
            want = gemm + (add if mode == "add" and j else 0)
            assert took == pytest.approx(want, abs=2), (mode, j)


def test_the_optimizer_step_as_megatrons_separate_passes():
    """workload.optimizer_step = 'passes', mixed precision and Adam: Megatron-LM's step of
    2021 (megatron/optimizer/optimizer.py) moves per parameter: the fp16 gradient to fp32
    (2 + 4), unscale and inf check (4 + 4), the norm for clipping (4), Adam (grad, master,
    two moments read: 16; master and moments written: 12), the master copied to the fp16
    weights (4 + 2): 52 bytes; 'fused', one pass: weights read and written (4), the gradient
    (2), master (8) and moments (16) read and written: 30. The step takes those bytes at the
    achievable HBM bandwidth."""
    km, hbm = KERNELS["a100"], 2039e9
    for mode, per in (("passes", 52), ("fused", 30)):
        m, plan, res = _one_linear(optimizer_step=mode)
        (op,) = plan.optimizer.values()
        took = res.ops[op]["finish"] - res.ops[op]["start"]
        assert took == pytest.approx(memory_seconds(km, hbm, per * m.layers[0].params) * 1e9,
                                     abs=2), mode


def test_gradient_accumulation_add_needs_the_kernel_model():
    from pysim.errors import ConfigError
    with pytest.raises(ConfigError, match="grad_accumulation = 'add'.*compute = 'roofline'"):
        _one_linear(grad_accumulation="add", compute="roofline")


def test_the_loss_as_megatrons_fp32_passes():
    """workload.loss_kernels = 'passes': Megatron-LM's cross entropy of 2021 on fp32 logits
    (megatron/model/gpt_model.py without --fp16-lm-cross-entropy; megatron/mpu/
    cross_entropy.py): forward per logit the cast to fp32 (2 + 4 bytes), the maximum (4),
    its subtraction (4 + 4), the exponential (4 + 4), the sum (4) and the division (4 + 4),
    38 bytes in 6 kernels; backward the multiplication by the output gradient (4 + 4) and
    the cast back (4 + 2), 14 bytes in 3 kernels. With tensor parallelism each GPU holds
    its vocabulary's share of the logits. 'fused': one kernel each way reading the fp16
    logits (2 bytes) and writing one number per token forward, the logits' gradient
    backward."""
    from pysim import models
    s, h, b, vocab = 128, 256, 2, 4096
    km, hbm = KERNELS["a100"], 2039e9
    for tp in (1, 2):
        m = models.get("transformer", layers=1, hidden=h, heads=4, seq=s, vocab=vocab)
        i = [l.kind for l in m.layers].index("loss")
        logits = b * s * vocab / tp
        want = {"passes": (memory_seconds(km, hbm, 38 * logits) + 5 * km.launch_seconds,
                           memory_seconds(km, hbm, 14 * logits) + 2 * km.launch_seconds),
                "fused": (memory_seconds(km, hbm, 2 * logits),      # (and the loss's
                          memory_seconds(km, hbm, 2 * logits))}     # few bytes: under 1 ns)
        for mode, (fwd, bwd) in want.items():
            cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": "a100"}},
                           network={"model": "flow"},
                           workload={"kind": "training", "batch": b,
                                     "group": [f"n{k}" for k in range(tp)], "iterations": 1,
                                     "compute": "kernels", "loss_kernels": mode,
                                     "parallel": {"tp": tp}})
            graph, plan = training_graph(cfg, build_topology(cfg), m)
            res = run_graph(cfg, graph)
            lo = plan.layer_ops[(0, i, "n0", 0)]
            for op, t in ((lo.fwd, fwd), (lo.bwd_input, bwd)):
                took = res.ops[op]["finish"] - res.ops[op]["start"]
                assert took == pytest.approx(t * 1e9, abs=2), (tp, mode)


def test_loss_passes_need_the_kernel_model():
    from pysim.errors import ConfigError
    with pytest.raises(ConfigError, match="loss_kernels = 'passes'.*compute = 'roofline'"):
        _one_linear(loss_kernels="passes", compute="roofline")


def test_the_loss_passes_on_fp32_logits_run_no_cast():
    """workload.loss_kernels = 'passes' with fp32 activations (workload.precision = 'fp32'):
    the logits are fp32 already, so neither the cast to fp32 forward (2 + 4 bytes a logit)
    nor the cast back backward (4 + 2) runs: forward the maximum (4), its subtraction (4 +
    4), the exponential (4 + 4), the sum (4) and the division (4 + 4), 32 bytes in 5
    kernels; backward the target's subtraction and the multiplication (4 + 4), 8 bytes in 2."""
    from pysim import models
    s, h, b, vocab = 128, 256, 2, 4096
    km, hbm = KERNELS["a100"], 2039e9
    m = models.get("transformer", layers=1, hidden=h, heads=4, seq=s, vocab=vocab)
    i = [l.kind for l in m.layers].index("loss")
    logits = b * s * vocab
    cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": "a100"}},
                   network={"model": "flow"},
                   workload={"kind": "training", "batch": b, "group": ["n0"],
                             "iterations": 1, "compute": "kernels", "precision": "fp32",
                             "loss_kernels": "passes"})
    graph, plan = training_graph(cfg, build_topology(cfg), m)
    res = run_graph(cfg, graph)
    lo = plan.layer_ops[(0, i, "n0", 0)]
    for op, t in ((lo.fwd, memory_seconds(km, hbm, 32 * logits) + 4 * km.launch_seconds),
                  (lo.bwd_input, memory_seconds(km, hbm, 8 * logits) + km.launch_seconds)):
        took = res.ops[op]["finish"] - res.ops[op]["start"]
        assert took == pytest.approx(t * 1e9, abs=2)


def test_megatrons_causal_softmax_reads_the_lower_triangle():
    """Megatron-LM's fused causal softmax of 2021 (scaled_upper_triang_masked_softmax) reads
    row r's first r + 1 scores and writes all q of them; backward reads the gradient and
    the probabilities of the same triangle and writes every score. The dropout after it:
    2 + 2 + 1 bytes forward, 2 + 1 + 2 backward. Counted here score by score."""
    from pysim.models.kernels import megatron_score_passes
    q = 96
    read = sum(r + 1 for r in range(q))                # lower triangle, the diagonal in
    fwd = (2 * read + 2 * q * q) / (q * q) + 5
    bwd = (2 * 2 * read + 2 * q * q) / (q * q) + 5
    assert megatron_score_passes("fwd", True, 2, q) == (pytest.approx(fwd), 2)
    assert megatron_score_passes("bwd_input", True, 2, q) == (pytest.approx(bwd), 2)
    # a padding mask: the 1-byte mask read forward, all scores read
    assert megatron_score_passes("fwd", True, 2) == (2 + 1 + 2 + 5, 2)
    assert megatron_score_passes("bwd_input", True, 2) == (3 * 2 + 5, 2)


def test_megatrons_unfused_softmax_in_fp32():
    """Where the fused kernel does not apply, Megatron-LM of 2021 runs PyTorch's kernels in
    fp32: forward cast to fp32 (2 + 4), scale (4 + 4), masked_fill_ (4 + 1 + 4), softmax
    (4 + 4), cast back (4 + 2): 37 bytes in 5 kernels; backward cast (2 + 4), masked_fill
    (4 + 1 + 4), scale (4 + 4), softmax (4 + 4 + 4), cast (4 + 2): 41; then the dropout
    (5 and 5 bytes, one kernel). With fp32 scores no casts: 25 and 29 in 3, the dropout 9."""
    from pysim.models.kernels import megatron_score_passes, megatron_softmax_fused
    assert megatron_score_passes("fwd", False, 2, 2048) == (37 + 5, 6)
    assert megatron_score_passes("bwd_input", False, 2, 2048) == (41 + 5, 6)
    assert megatron_score_passes("fwd", False, 4, 2048) == (25 + 9, 4)
    assert megatron_score_passes("bwd_input", False, 4, 2048) == (29 + 9, 4)
    # FusedScaleMaskSoftmax's conditions: 16 < kv <= 2048, q % 4 and batch x heads % 4
    assert megatron_softmax_fused(2048, 2048, 16 * 24, 2)
    assert not megatron_softmax_fused(4096, 4096, 16 * 24, 2)       # too long
    assert not megatron_softmax_fused(16, 16, 16, 2)                 # too short
    assert not megatron_softmax_fused(2048, 2048, 2 * 3, 2)          # 6 heads a GPU
    assert not megatron_softmax_fused(2048, 2048, 16, 4)             # fp32 scores


def _layer_ops(tp, mode, **w):
    from pysim import models
    s, h, b = 128, 256, 2
    m = models.get("transformer", layers=1, hidden=h, heads=4, seq=s, vocab=1024)
    cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": "a100"}},
                   network={"model": "flow"},
                   workload={"kind": "training", "batch": b, "iterations": 1,
                             "group": [f"n{k}" for k in range(tp)], "compute": "kernels",
                             "layer_kernels": mode, "parallel": {"tp": tp}, **w})
    graph, plan = training_graph(cfg, build_topology(cfg), m)
    res = run_graph(cfg, graph)
    names = [l.name for l in m.layers]
    took = {}
    for i, name in enumerate(names):
        lo = plan.layer_ops[(0, i, "n0", 0)]
        for ph in ("fwd", "bwd_input", "bwd_weight"):
            op = getattr(lo, ph)
            if op is not None:
                took[(name.split(".")[-1] if "." in name else name, ph)] = \
                    res.ops[op]["finish"] - res.ops[op]["start"]
    return took


@pytest.mark.parametrize("tp", [1, 2])
def test_megatrons_small_layer_kernels_of_2021(tp):
    """workload.layer_kernels = 'passes' against 'fused', op by op on one GPU of a
    transformer layer (hidden h = 256, 4 heads, sequence s = 128, micro-batch b = 2, tokens
    T = b s; E = h / tp features of a split tensor): each op longer by its extra kernels'
    bytes at the achievable HBM bandwidth and their launches, the bytes per kernel written
    out here from what Megatron-LM of 2021 ran on PyTorch 1.8 (fp16, 2 bytes):
    - qkv forward: add_(bias) reads and writes its 3E outputs (12 E T bytes, a kernel);
      every linear's weight gradient: its bias's gradient reads the output gradient
      (qkv 6 E T, proj 2 h T, fc1 8 E T, fc2 2 h T, a kernel each);
    - attention forward: the context's permute copy (4 E T, a kernel) and the causal
      softmax's forward reading the lower triangle, 2 (s + 1) / (2 s) bytes a score where
      the model's default counts 4 (dropout unchanged, 5); backward: dQ and dK scaled
      (2 x 4 E T, two kernels), the QKV gradient concatenated (12 E T, a kernel) and the
      softmax's backward reading two tensors' lower triangles, 4 (s + 1) / (2 s) + 2 where
      the default counts 6;
    - layer norm backward: 2 h T more and a third kernel; GeLU backward 8 E T more (its
      input read); a dropout's backward reads its mask, h T."""
    from pysim.models.kernels import SCORE_BYTES
    km, hbm = KERNELS["a100"], 2039e9
    s, h, b, heads = 128, 256, 2, 4
    T, E = b * s, h // tp
    scores = b * heads // tp * s * s
    lower = (s + 1) / (2 * s)

    def mem(nbytes, kernels):
        return memory_seconds(km, hbm, nbytes, kernels) * 1e9

    soft_fwd = scores * (2 * lower + 2 + 5) - scores * SCORE_BYTES["fwd"]
    soft_bwd = scores * (4 * lower + 2 + 5) - scores * SCORE_BYTES["bwd_input"]
    want = {("qkv", "fwd"): mem(12 * E * T, 1), ("qkv", "bwd_weight"): mem(6 * E * T, 1),
            ("proj", "bwd_weight"): mem(2 * h * T, 1),
            ("fc1", "bwd_weight"): mem(8 * E * T, 1), ("fc2", "bwd_weight"): mem(2 * h * T, 1),
            ("attention", "fwd"): mem(4 * E * T + soft_fwd, 1),
            ("attention", "bwd_input"): mem(8 * E * T + 12 * E * T + soft_bwd, 3),
            ("ln1", "bwd_input"): mem(2 * h * T, 1), ("ln2", "bwd_input"): mem(2 * h * T, 1),
            ("ln_f", "bwd_input"): mem(2 * h * T, 1), ("dropout", "bwd_input"): mem(h * T, 0),
            ("gelu", "bwd_input"): mem(8 * E * T, 0),
            ("proj_dropout", "bwd_input"): mem(h * T, 0),
            ("fc_dropout", "bwd_input"): mem(h * T, 0)}
    fused, passes = _layer_ops(tp, "fused"), _layer_ops(tp, "passes")
    assert fused.keys() == passes.keys()
    for key in fused:
        assert passes[key] - fused[key] == pytest.approx(want.get(key, 0.0), abs=3), key


def test_megatrons_softmax_unfused_past_2048():
    """Past 2,048 keys FusedScaleMaskSoftmax falls back to PyTorch's fp32 kernels (37 + 5
    bytes a score forward in 6 kernels, 41 + 5 backward): at sequence 4,096 the attention
    op takes those passes."""
    from pysim import models
    from pysim.models.kernels import attention_seconds
    km, hbm, peak = KERNELS["a100"], 2039e9, 312e12
    s, h, b, heads = 4096, 256, 1, 4
    m = models.get("transformer", layers=1, hidden=h, heads=heads, seq=s, vocab=1024)
    cfg = make_cfg(topology={"kind": "ring", "size": 8, "npu": {"preset": "a100"}},
                   network={"model": "flow"},
                   workload={"kind": "training", "batch": b, "iterations": 1,
                             "group": ["n0"], "compute": "kernels", "layer_kernels": "passes"})
    graph, plan = training_graph(cfg, build_topology(cfg), m)
    res = run_graph(cfg, graph)
    i = [l.kind for l in m.layers].index("attention")
    lo = plan.layer_ops[(0, i, "n0", 0)]
    copy = memory_seconds(km, hbm, 4 * h * s * b, 1)
    t = attention_seconds(km, peak, hbm, b * heads, s, s, h // heads, "fwd",
                          score_passes=(42, 6)) + copy
    took = res.ops[lo.fwd]["finish"] - res.ops[lo.fwd]["start"]
    assert took == pytest.approx(t * 1e9, abs=2)


def test_layer_passes_need_the_kernel_model():
    from pysim.errors import ConfigError
    with pytest.raises(ConfigError, match="layer_kernels = 'passes'.*compute = 'roofline'"):
        _one_linear(layer_kernels="passes", compute="roofline")


FLASH = json.loads((Path(__file__).parent / "data" / "flashattention_a100_attention.json")
                   .read_text())


def _standard_attention_ms(s, dropout):
    """Standard attention as FlashAttention's appendix E.6 measured it, by the kernel model
    on the A100 40GB (1,555 GB/s): the products by `attention_seconds`, PyTorch's fp16
    softmax one kernel reading and writing each score (4 bytes forward; backward reads the
    gradient and the probabilities, writes one: 6), the dropout 5 bytes each way (the
    probabilities read and written, a 1-byte mask)."""
    km, peak, hbm = KERNELS["a100"], 312e12, FLASH["hbm_bytes_per_s"]
    bh, d = FLASH["batch"] * FLASH["heads"], FLASH["head_dim"]
    extra = 5 if dropout else 0
    fwd = attention_seconds(km, peak, hbm, bh, s, s, d, "fwd", score_passes=(4 + extra, 1))
    bwd = attention_seconds(km, peak, hbm, bh, s, s, d, "bwd", score_passes=(6 + extra, 1))
    return fwd * 1e3, bwd * 1e3


@pytest.mark.parametrize("s", [1024, 2048, 4096])
def test_standard_attention_fit_residuals_tables_18_19(s):
    """The A100's bmm_hbm_efficiency is fitted to these times (Tables 18 and 19, no
    dropout): a fit's residuals, held to the preset's stated -9% to +12%, not agreement."""
    i = FLASH["seq"].index(s)
    fwd, bwd = _standard_attention_ms(s, False)
    assert fwd == pytest.approx(FLASH["pytorch_forward_ms"][i], rel=0.12)
    assert bwd == pytest.approx(FLASH["pytorch_backward_ms"][i], rel=0.09)


@pytest.mark.parametrize("s", [1024, 2048, 4096])
def test_standard_attention_with_dropout_not_fitted_tables_15_16(s):
    """Tables 15 and 16 (dropout 0.1) are not fitted to; they are the same products as
    Tables 18 and 19 with one more pass each way, so what they check beyond the fit is the
    dropout's pass at the STREAM efficiency: within -7% to +6%."""
    i = FLASH["seq"].index(s)
    fwd, bwd = _standard_attention_ms(s, True)
    assert fwd == pytest.approx(FLASH["pytorch_dropout_forward_ms"][i], rel=0.06)
    assert bwd == pytest.approx(FLASH["pytorch_dropout_backward_ms"][i], rel=0.07)


def test_standard_attention_at_sequence_512_is_below_the_measurement():
    """At sequence 512 (left out of the fit) the model misses all four tables by 18-23%,
    below the measurement: the stated limit of the fit (docs/validation.md), held so that a
    change of the model that moves it is seen."""
    for dropout, keys in ((False, ("pytorch_forward_ms", "pytorch_backward_ms")),
                          (True, ("pytorch_dropout_forward_ms",
                                  "pytorch_dropout_backward_ms"))):
        for got, key in zip(_standard_attention_ms(512, dropout), keys):
            assert 0.76 < got / FLASH[key][0] < 0.83, key


@pytest.mark.parametrize("s", [1024, 2048, 4096])
def test_dropout_pass_at_the_stream_efficiency(s):
    """What dropout adds to the measured attention (Table 15 less 18 forward, 16 less 19
    backward) is one 5-byte pass over the scores at hbm_efficiency (the STREAM triad's,
    not fitted to these): within 16%."""
    i = FLASH["seq"].index(s)
    km, hbm = KERNELS["a100"], FLASH["hbm_bytes_per_s"]
    scores = FLASH["batch"] * FLASH["heads"] * s * s
    want = memory_seconds(km, hbm, 5 * scores) * 1e3
    assert FLASH["pytorch_dropout_forward_ms"][i] - FLASH["pytorch_forward_ms"][i] == \
        pytest.approx(want, rel=0.16)
    assert FLASH["pytorch_dropout_backward_ms"][i] - FLASH["pytorch_backward_ms"][i] == \
        pytest.approx(want, rel=0.16)


def test_batched_products_bound_by_their_bytes_by_hand():
    """The 1.7B row of Table 1 (micro-batch 16, 24 heads of 96 on one GPU, sequence 2,048):
    P V is 384 products of (2,048 x 2,048)(2,048 x 96). Its operands: 2 bytes x 384 x
    (2,048 x 2,048 + 2,048 x 96 + 2,048 x 96) = 3,523,215,360 bytes, at 0.485 of 2,039 GB/s
    3.5625 ms (+ 1.75 us launch); its FLOPs 2 x 384 x 2,048 x 96 x 2,048 = 309.2 G by the
    product model 1.69 ms: the bytes bind. Q K^T (depth 96) writes the same scores:
    2 x 384 x (2,048 x 96 x 2 + 2,048^2) bytes, the same 3.5625 ms. Without a
    bmm_hbm_efficiency (the h100 preset) the product model alone."""
    km, peak, hbm = KERNELS["a100"], 312e12, 2039e9
    assert km.bmm_hbm_efficiency == 0.485
    want = 1.75e-6 + 3_523_215_360 / (2039e9 * 0.485)
    assert batched_seconds(km, peak, hbm, 2048, 96, 2048, 384) == pytest.approx(want, rel=1e-12)
    assert batched_seconds(km, peak, hbm, 2048, 2048, 96, 384) == pytest.approx(want, rel=1e-12)
    assert gemm_seconds(km, peak, 2048, 96, 2048, 384) == pytest.approx(1.69e-3, rel=0.01)
    big = batched_seconds(km, peak, hbm, 8192, 8192, 8192, 2)      # compute-bound
    assert big == gemm_seconds(km, peak, 8192, 8192, 8192, 2)
    h = KERNELS["h100"]
    assert h.bmm_hbm_efficiency is None
    assert batched_seconds(h, 989.5e12, 3.35e12, 2048, 96, 2048, 384) == \
        gemm_seconds(h, 989.5e12, 2048, 96, 2048, 384)
