"""ZeRO (Rajbhandari et al., SC 2020) and Megatron-LM's distributed optimizer:
`workload.parallel.zero` = 0, 1, 2 or 3.

- 0: every data-parallel replica keeps the whole training state and all-reduces gradients.
- 1: the optimizer state (and the fp32 master weights) is sharded over the dp replicas:
  gradients are reduce-scattered, each replica steps its 1/dp shard, and the updated weights
  are all-gathered (Megatron-LM's distributed optimizer).
- 2: gradients are sharded too (reduce-scattered as they are produced).
- 3 (≈ FSDP): the weights are sharded as well; each layer's weights are all-gathered before
  its forward and again before its backward pass (prefetched one layer ahead) and its
  gradients reduce-scattered after the last micro-batch's backward pass.

Per parameter, with K bytes of optimizer state and master weights (12 for Adam in mixed
precision) and 2-byte weights and gradients: 0: 2 + 2 + K; 1: 2 + 2 + K/dp; 2: 2 + (2 + K)/dp;
3: (2 + 2 + K)/dp (the paper's Figure 1: 2Ψ + 2Ψ + KΨ/N_d, 2Ψ + (2 + K)Ψ/N_d, (2 + 2 + K)Ψ/N_d).
"""
from __future__ import annotations

ZERO_STAGES = (0, 1, 2, 3)


def state_bytes_per_param(pb, optimizer_state_bytes, zero, dp):
    """Bytes of training state each NPU keeps per parameter it holds under ZeRO stage
    `zero` over dp replicas: weights, gradients, master weights and optimizer state."""
    k = pb.master + optimizer_state_bytes
    if zero == 0:
        return pb.weight + pb.grad + k
    if zero == 1:
        return pb.weight + pb.grad + k / dp
    if zero == 2:
        return pb.weight + (pb.grad + k) / dp
    return (pb.weight + pb.grad + k) / dp
