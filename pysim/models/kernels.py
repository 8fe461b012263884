"""Kernel times on an accelerator: matrix products by their shape, attention, element-wise
kernels at their memory roofline, and a fixed launch overhead per kernel.

A matrix product C (m x n) = A (m x k) B (k x n), repeated `batch` times, runs as tiles of
tile_m x tile_n outputs, one tile per SM at a time, in waves:

    tiles = batch ceil(m / tile_m) ceil(n / tile_n),  waves = ceil(tiles / SMs)
    wave efficiency = batch m n / (waves SMs tile_m tile_n)      (tile and wave quantisation)
    depth efficiency = k / (k + k_half)                          (each tile's prologue and
                                                                  epilogue beside its k loop)
    time = launch + 2 batch m n k / (peak x gemm_efficiency x wave x depth)

`gemm_efficiency` is the best fraction of peak a large product reaches. The constants of each
accelerator (`KERNELS`) are fitted to published measurements of kernels alone, cited with
them: none is fitted to a training iteration. `KERNELS_CUDA11` holds the A100's products as
the libraries of the CUDA 11 era ran them (fitted to that era's measurements, kept beside it).

Attention ("unfused", as Megatron-LM ran it in 2021): the batched products Q K^T and P V
(forward; four in backward) by the model above, each no faster than its operands' HBM
bytes at the preset's measured batched-product efficiency (`batched_seconds`), and the
scores' element-wise passes (scaled masked softmax, dropout) at the memory roofline: 9 bytes
per score forward (softmax read and write 2 + 2; dropout read 2, write 2 and a 1-byte mask),
11 backward; or the passes Megatron-LM of 2021 ran (`megatron_score_passes`: its fused
causal softmax reading the lower triangle, or PyTorch's fp32 softmax where the fused kernel
does not apply). "flash": the attention's FLOPs at the measured FlashAttention throughput. Element-wise kernels (and
everything else that is memory-bound): bytes / (HBM bandwidth x hbm_efficiency).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

ATTENTION = ("unfused", "flash")
SCORE_BYTES = {"fwd": 9, "bwd_input": 11}


@dataclass(frozen=True)
class KernelModel:
    sms: int                      # streaming multiprocessors
    gemm_efficiency: float        # large products' fraction of peak
    tile: tuple                   # (tile_m, tile_n) outputs per SM at a time
    k_half: float                 # depth at which a tile reaches half its rate
    launch_seconds: float         # fixed cost of each kernel
    hbm_efficiency: float         # achievable fraction of the HBM bandwidth
    flash_efficiency: float       # FlashAttention's fraction of peak
    bmm_hbm_efficiency: float | None = None   # the attention's batched products: their
    #                               operands' bytes at this fraction of the HBM bandwidth
    source: str = ""
    bmm_source: str = ""


KERNELS = {
    "a100": KernelModel(
        sms=108, gemm_efficiency=0.845, tile=(128, 128), k_half=160.0,
        launch_seconds=1.75e-6, hbm_efficiency=1.70 / 2.039, flash_efficiency=179.5 / 312,
        bmm_hbm_efficiency=0.485,
        bmm_source="Fitted to standard (unfused) attention measured on an A100-SXM4-40GB by "
                   "Dao et al., FlashAttention (NeurIPS 2022), appendix E.6, Tables 18 and 19 "
                   "('PyTorch Attention', fp16, batch 16, 8 heads of dimension 64, no dropout "
                   "or mask): forward 1.27, 4.32, 16.47 ms and backward 2.44, 8.82, 33.87 ms "
                   "at sequence 1,024, 2,048, 4,096, less the softmax's passes at "
                   "hbm_efficiency (the same tables' dropout increments, Tables 15 and 16, "
                   "run at 77-89% of the HBM bandwidth); within -9% to +12% of each, and of "
                   "Tables 15 and 16 (with dropout, not fitted) within -7% to +6%; at "
                   "sequence 512 (not fitted) 18-23% below all four tables.",
        source="Fitted to the cuBLASLt fp16 products measured on an A100-SXM4-80GB by "
               "Azure's AI benchmarking guide (github.com/Azure/AI-benchmarking-guide, "
               "Azure_Results/ND_A100_v4_results.md, CUDA 12.5: 1024^3 119.4, 2048^3 221.8, "
               "4096^3 228.0, 8192^3 253.7, 16384^3 256.5, 1024x2145x1024 132.8, "
               "6144x12288x12288 250.8, 802816x192x768 157.8 TFLOP/s; the fit is within 6% "
               "of each but 2048^3, 15% below); HBM: its STREAM triad, 1.70 TB/s; FlashAttention-2: "
               "179.5 TFLOP/s (head dimension 64, batch 2, sequence 8192). 108 SMs: NVIDIA "
               "A100 Tensor Core GPU Architecture white paper (2020)."),
    "h100": KernelModel(
        sms=132, gemm_efficiency=794.5 / 989.5, tile=(128, 128), k_half=160.0,
        launch_seconds=3.75e-6, hbm_efficiency=2.97 / 3.35, flash_efficiency=0.35,
        source="gemm_efficiency: the largest bf16 product measured on an H100 SXM, 794.5 "
               "TFLOP/s (github.com/stas00/ml-engineering, compute/accelerator/README.md, "
               "'Maximum Achievable Matmul FLOPS', torch 2.7.0+cu126); tile, k_half and "
               "launch fitted to XLA's measured bf16 matmul table for sm_90 "
               "(github.com/tensorflow/tensorflow, third_party/xla/xla/service/gpu/model/"
               "matmul_interpolator_data.h: 41 shapes from 256 to 4096, mean error 14%, "
               "products of 2048^3 FLOPs and more within 9%); HBM: STREAM triad 2.97 TB/s "
               "(Azure_Results ND H100 v5); FlashAttention-2: 35% of peak on H100 (Shah et "
               "al., FlashAttention-3, NeurIPS 2024, abstract). 132 SMs: NVIDIA H100 Tensor Core GPU Architecture white paper "
               "(2022)."),
}
KERNELS["a100_40"] = KERNELS["a100"]

# The products as the libraries of the CUDA 11 era ran them (workload.kernel_library =
# "cuda11"): the same model with the large products' efficiency fitted to the three published
# measurements of that era's A100 products below (least squares in the logarithm of the time;
# residuals -6%, +2% and +4%). The rest of the model (tiles, depth, launch, HBM, attention) is
# the preset's.
A100_CUDA11_PRODUCTS = (        # m, n, k, seconds, source
    (3072, 2048, 768, 62.4e-6,
     "cuBLAS on an A100, fp16 (kernel ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_"
     "32x5_nn), the reporter's CUDA toolkit 11.2 (its compiler, V11.2.152; the cuBLAS "
     "release is not printed): NVIDIA/cutlass #430 on GitHub (March 2022)"),
    (8192, 8192, 8192, 2 * 8192 ** 3 / 230e12,
     "a @ b in PyTorch, fp16, on an A100 80GB (2,039 GB/s: the SXM4 part): 230 TFLOP/s, the "
     "README's one figure from micro_bench.ipynb's square sizes 128 to 8192, taken as its "
     "largest (github.com/mli/transformers-benchmarks, August 2022). The A100 run's software "
     "is not given; the README's set-up names NGC PyTorch 22.07 (CUDA 11.7), as the "
     "notebook's stored run on another GPU printed"),
    (3456, 4096, 8192, 0.98647e-3,
     "CUTLASS 2.2's cutlass_tensorop_s16816gemm_f16_256x128_32x3 on an A100 (sm_80), fp16 in "
     "and fp32 accumulation and output: 0.986 ms, 235.1 TFLOP/s (NVIDIA/cutlass, "
     "media/docs/profiler.md, its example run of June 2020)"),
)


def gemm_seconds(km: KernelModel, peak_flops, m, n, k, batch=1):
    """Time of `batch` products of (m x k) by (k x n) at peak_flops (FLOP/s)."""
    m, n, k = max(1, m), max(1, n), max(1, k)
    tm, tn = km.tile
    tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(tiles / km.sms)
    wave = batch * m * n / (waves * km.sms * tm * tn)
    depth = k / (k + km.k_half)
    flops = 2.0 * batch * m * n * k
    return km.launch_seconds + flops / (peak_flops * km.gemm_efficiency * wave * depth)


KERNEL_LIBRARIES = ("cuda12", "cuda11")


def fit_gemm_efficiency(km, peak_flops, products):
    """The large products' efficiency at which km's product times match `products` ((m, n,
    k, seconds, ...) rows): the geometric mean of model over measured time is 1 (least
    squares in the logarithm of the time, the launch cost aside; the time falls as the
    efficiency rises, so bisection finds it)."""
    def log_ratio(e):
        k2 = replace(km, gemm_efficiency=e)
        return sum(math.log(gemm_seconds(k2, peak_flops, m, n, k) / t)
                   for m, n, k, t, *_ in products)
    lo, hi = 1e-3, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if log_ratio(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


KERNELS_CUDA11 = {
    "a100": replace(
        KERNELS["a100"],
        # at the A100's 312 TFLOP/s of fp16 tensor math (its preset's peak): 0.739
        gemm_efficiency=fit_gemm_efficiency(KERNELS["a100"], 312e12, A100_CUDA11_PRODUCTS),
        source="Products: gemm_efficiency fitted to three measurements of the A100's fp16 "
               "products with the libraries of the CUDA 11 era (cuBLAS with a CUDA 11.2 "
               "toolkit, 3072x2048x768: 62.4 us, NVIDIA/cutlass #430 on GitHub; PyTorch, "
               "likely CUDA 11.7, 8192^3: 230 TFLOP/s, mli/transformers-benchmarks; CUTLASS "
               "2.2, "
               "3456x4096x8192: 235.1 TFLOP/s, NVIDIA/cutlass profiler.md), within -6% to +4% "
               "of each; everything else as the a100 preset. " + KERNELS["a100"].source),
}
KERNELS_CUDA11["a100_40"] = KERNELS_CUDA11["a100"]


def batched_seconds(km: KernelModel, peak_flops, hbm_bytes_per_s, m, n, k, batch,
                    act_bytes=2):
    """Time of the attention's `batch` products of (m x k) by (k x n): the product model
    above, bounded below by its operands' HBM bytes (act_bytes (m k + k n + m n) each,
    read and written once) at bmm_hbm_efficiency of the bandwidth, where the preset
    has one. With an s x s operand and a thin side (the head dimension) these products
    move more bytes than they compute."""
    t = gemm_seconds(km, peak_flops, m, n, k, batch)
    if km.bmm_hbm_efficiency is None:
        return t
    nbytes = act_bytes * batch * (m * k + k * n + m * n)
    return max(t, km.launch_seconds + nbytes / (hbm_bytes_per_s * km.bmm_hbm_efficiency))


def memory_seconds(km: KernelModel, hbm_bytes_per_s, nbytes, kernels=1):
    """Time of memory-bound kernels moving nbytes."""
    return kernels * km.launch_seconds + nbytes / (hbm_bytes_per_s * km.hbm_efficiency)


def linear_seconds(km, peak, tokens, k, n, phase):
    """A linear layer's product for `tokens` rows of k inputs and n outputs: forward
    (tokens x k)(k x n), input gradient (tokens x n)(n x k), weight gradient
    (k x tokens)(tokens x n)."""
    if phase == "fwd":
        return gemm_seconds(km, peak, tokens, n, k)
    if phase == "bwd_input":
        return gemm_seconds(km, peak, tokens, k, n)
    return gemm_seconds(km, peak, k, n, tokens)


def megatron_score_passes(phase, fused, act_bytes, causal_q=None):
    """(bytes per score, kernels) of the passes over the attention scores as Megatron-LM of
    2021 ran them over q x q causal scores (causal_q = q) or scores with a padding mask
    (causal_q None) (megatron/model/fused_softmax.py, FusedScaleMaskSoftmax; the probabilities'
    dropout, torch.nn.Dropout: PyTorch's fused dropout writing a 1-byte mask), at act_bytes
    per activation, forward ('fwd') or backward.

    fused (16-bit scores, 16 < kv <= 2048, q and samples x heads multiples of 4): one
    softmax kernel. Causal (scaled_upper_triang_masked_softmax): forward reads each row's
    lower triangle only, (q + 1) / (2 q) of the scores, and writes every score (zeros
    above the diagonal); backward reads the output gradient and the probabilities in the
    lower triangle and writes every score. With a padding mask (scaled_masked_softmax):
    forward reads the scores and the 1-byte mask, writes the probabilities; backward reads
    both tensors and writes one. Not fused: PyTorch's own kernels in fp32, forward the cast
    to fp32 (act + 4), the scaling (4 + 4), the mask's masked_fill_ (4 + 1 + 4), the softmax
    (4 + 4) and the cast back (4 + act), backward the same five in reverse (the softmax's
    reading the gradient and the probabilities); fp32 scores have no casts. The dropout
    after it: forward reads the probabilities and writes them and the mask (act + act + 1),
    backward reads the gradient and the mask and writes the gradient (act + 1 + act)."""
    a = act_bytes
    dropout = 2 * a + 1
    if fused:
        if causal_q is not None:          # causal: the rows' lower triangles
            lower = (causal_q + 1) / (2 * causal_q)
            soft = lower * a + a if phase == "fwd" else 2 * lower * a + a
        else:
            soft = a + 1 + a if phase == "fwd" else 3 * a
        return soft + dropout, 2
    cast = (a + 4) if a < 4 else 0
    soft = (8 + 9 + 8 if phase == "fwd" else 8 + 9 + 12) + 2 * cast
    return soft + dropout, (5 if cast else 3) + 1


def megatron_softmax_fused(q, kv, batch_heads, act_bytes):
    """Whether Megatron-LM of 2021 runs its fused softmax kernel over these scores
    (FusedScaleMaskSoftmax.forward's conditions): 16-bit scores, 16 < kv <= 2048, q and
    the batched heads (samples x heads on the GPU) multiples of 4."""
    return act_bytes < 4 and 16 < kv <= 2048 and q % 4 == 0 and int(batch_heads) % 4 == 0


def attention_seconds(km, peak, hbm, batch_heads, q, kv, d, phase, mode="unfused",
                      flops=0.0, act_bytes=2, score_passes=None):
    """The attention core of batch_heads (samples x heads) heads of dimension d;
    score_passes: (bytes per score, kernels) of the passes over the scores instead of
    SCORE_BYTES in two kernels."""
    if mode == "flash":
        return km.launch_seconds * (1 if phase == "fwd" else 2) + \
            flops / (peak * km.flash_efficiency)
    scores = batch_heads * q * kv

    def bmm(m, n, k):
        return batched_seconds(km, peak, hbm, m, n, k, batch_heads, act_bytes)
    if phase == "fwd":                    # Q K^T, P V
        t = bmm(q, kv, d) + bmm(q, d, kv)
    else:                                 # dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q
        t = bmm(q, kv, d) + bmm(kv, d, q) + bmm(q, d, kv) + bmm(kv, d, q)
    if score_passes is not None:
        per, kernels = score_passes
        return t + memory_seconds(km, hbm, scores * per, kernels)
    nbytes = scores * SCORE_BYTES["fwd" if phase == "fwd" else "bwd_input"] * act_bytes / 2
    return t + memory_seconds(km, hbm, nbytes, kernels=2)
