"""Mixture-of-experts transformers (Shazeer et al., ICLR 2017; Lepikhin et al., GShard,
ICLR 2021; Fedus et al., Switch Transformer, JMLR 2022): a GPT-style decoder whose MLP is
`experts` expert MLPs, each token sent to `top_k` of them by a learned router.

Each transformer layer: layer norm, QKV, attention, projection, dropout, residual; layer
norm, the router (a linear layer to one score per expert), the experts' first linear layer,
GELU and second linear layer over the tokens routed to them (top_k rows per token: routing
taken as balanced), dropout, residual. The experts' layers carry `tp = "expert"`: expert
parallelism spreads the experts over the NPUs (each holds experts / ep of them), and an
all-to-all sends each token to its experts' NPUs before them (dispatch) and back after them
(combine).
"""
from __future__ import annotations

from pysim.models import layers as L
from pysim.models.language import _check_dropout, _dropout
from pysim.models.layers import ModelError
from pysim.models.model import Act, Net
from pysim.models.registry import MAX_BLOCKS, check_int, register


def _experts_linear(name, rows, n_in, n_out, experts):
    """`experts` linear layers of n_in -> n_out, over `rows` rows per sample in all (each
    expert its share): the FLOPs of rows x n_in x n_out, the weights of every expert."""
    layer = L.linear(name, (rows, n_in), n_out, tp="expert")
    layer.params *= experts
    layer.weight_elems *= experts
    return layer


@register("gpt_moe")
def gpt_moe(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200, experts=8, top_k=2,
            ffn=None, dropout=0.1):
    """A GPT-style decoder with a mixture of `experts` MLPs per layer, `top_k` per token
    (`ffn` defaults to 4 x hidden)."""
    name = "gpt_moe"
    for what, v in (("hidden", hidden), ("heads", heads), ("seq", seq), ("vocab", vocab),
                    ("experts", experts), ("top_k", top_k)):
        check_int(name, what, v)
    check_int(name, "layers", layers, 1, MAX_BLOCKS)
    _check_dropout(name, dropout)
    ffn = 4 * hidden if ffn is None else check_int(name, "ffn", ffn)
    if hidden % heads:
        raise ModelError(f"model {name!r}: hidden = {hidden} is not a multiple of heads = "
                         f"{heads}")
    if top_k > experts:
        raise ModelError(f"model {name!r}: top_k = {top_k} exceeds the {experts} experts")
    net = Net()
    tok = net.embedding("embed.tokens", vocab, hidden, lookups=seq, tp="row")
    pos = net.embedding("embed.positions", seq, hidden, lookups=seq, tp="replicated")
    x = net.add([tok, pos], "embed.add", tp="replicated")
    x = _dropout(net, x, "embed.dropout", dropout)
    rows = seq * top_k
    for i in range(layers):
        p = f"layer{i}"
        res = x
        x = net.norm(x, f"{p}.ln1", "layer", tp="replicated")
        y = net.linear(x, f"{p}.qkv", 3 * hidden, tp="column")
        y = net.attention(y, f"{p}.attention", heads, dropout=bool(dropout), causal=True)
        y = net.linear(y, f"{p}.proj", hidden, tp="row")
        y = _dropout(net, y, f"{p}.proj_dropout", dropout)
        x = net.add([y, res], f"{p}.add1", tp="replicated")
        res = x
        x = net.norm(x, f"{p}.ln2", "layer", tp="replicated")
        net.linear(x, f"{p}.router", experts, tp="replicated")
        net._add(_experts_linear(f"{p}.experts.fc1", rows, hidden, ffn, experts))
        net._add(L.eltwise(f"{p}.experts.gelu", (rows, ffn), "gelu", tp="expert"))
        net._add(_experts_linear(f"{p}.experts.fc2", rows, ffn, hidden, experts))
        y = Act((seq, hidden))
        y = _dropout(net, y, f"{p}.fc_dropout", dropout)
        x = net.add([y, res], f"{p}.add2", tp="replicated")
    x = net.norm(x, "ln_f", "layer", tp="replicated")
    x = net.linear(x, "lm_head", vocab, bias=False, tp="column", tied=True)
    net.loss(x, tp="column")
    return net.model(name, input_shape=(seq,), default_precision="mixed",
                     source="A GPT decoder with mixture-of-experts MLPs: Fedus et al., "
                            "Switch Transformers, JMLR 23, 2022 (top_k = 1); Lepikhin et "
                            "al., GShard, ICLR 2021 (top_k = 2)")
