"""Expert parallelism (`workload.parallel.ep`; Lepikhin et al., GShard, ICLR 2021; Fedus et
al., Switch Transformer, JMLR 2022): the experts of a mixture-of-experts layer (layers with
`tp = "expert"`, e.g. the zoo's `gpt_moe`) spread over ep data-parallel replicas, each holding
experts / ep of them. Before the experts an all-to-all over the expert-parallel group sends
every token to its experts' NPUs (dispatch), after them one brings the results back (combine);
backward, the same two carry the gradients. Routing is taken as balanced: each NPU's experts
process as many rows as its own tokens send. The experts' gradients are all-reduced over the
replicas that hold the same experts (dp / ep of them); the rest of the model's over all dp.
"""
from __future__ import annotations

from pysim.errors import ConfigError


def check_experts(model, expert, ep, dp, tp):
    if not any(expert):
        if ep > 1:
            raise ConfigError(f"workload.parallel.ep = {ep}: {model.name} has no experts "
                              f"(layers with tp = 'expert', e.g. the zoo's gpt_moe)")
        return
    if dp % ep:
        raise ConfigError(f"workload.parallel.ep = {ep} does not divide dp = {dp}: the "
                          f"expert-parallel groups are made of data-parallel replicas")
    n = model.config.get("experts")
    if isinstance(n, int) and n % ep:
        raise ConfigError(f"workload.parallel.ep = {ep} does not divide the {n} experts of "
                          f"{model.name}")
    if tp > 1:
        raise ConfigError(f"workload.parallel.tp = {tp}: tensor parallelism of a model with "
                          f"experts is not built (its expert layers would run whole on every "
                          f"tensor-parallel NPU); use dp and ep")


def dispatch_before(lay, i):
    """Layer i starts a run of expert layers (tokens dispatched before it)."""
    return lay.expert[i] and (i == 0 or not lay.expert[i - 1])


def combine_after(lay, i):
    """Layer i ends a run of expert layers (results combined after it)."""
    return lay.expert[i] and (i + 1 == len(lay.expert) or not lay.expert[i + 1])
