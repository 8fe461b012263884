"""Language models: transformers (a configurable stack, BERT-large, GPT-2) and GNMT.

A sample is one sequence (one sentence pair for GNMT). Transformer layers are labelled with
how Megatron-LM's tensor parallelism splits them (Shoeybi et al., 2019): the QKV projection and
the first MLP layer by output features ("column"), attention by heads, the attention output
projection and the second MLP layer by input features ("row": an all-reduce of the output in
forward), the token embedding by vocabulary (its output all-reduced: "row"), the LM head and
its loss by vocabulary ("column"); normalisations, dropouts and residual additions are
replicated.
"""
from __future__ import annotations

from pysim.models.layers import ModelError
from pysim.models.model import Act, Net
from pysim.models.registry import MAX_BLOCKS, check_choice, check_int, register


def _dropout(net, x, name, p, tp="replicated"):
    return net.act(x, name, "dropout", tp=tp) if p else x


def _block(net, x, name, heads, ffn, dropout, causal, pre_ln):
    """One transformer layer: self-attention and an MLP (GELU), each with a residual
    connection and a layer normalisation (before each sub-block if `pre_ln`, as GPT-2; after,
    as BERT and the original transformer)."""
    h = x.shape[1]
    res = x
    if pre_ln:
        x = net.norm(x, f"{name}.ln1", "layer", tp="replicated")
    y = net.linear(x, f"{name}.qkv", 3 * h, tp="column")
    y = net.attention(y, f"{name}.attention", heads, dropout=bool(dropout), causal=causal)
    y = net.linear(y, f"{name}.proj", h, tp="row")
    y = _dropout(net, y, f"{name}.proj_dropout", dropout)
    x = net.add([y, res], f"{name}.add1", tp="replicated")
    if not pre_ln:
        x = net.norm(x, f"{name}.ln1", "layer", tp="replicated")
    res = x
    if pre_ln:
        x = net.norm(x, f"{name}.ln2", "layer", tp="replicated")
    y = net.linear(x, f"{name}.fc1", ffn, tp="column")
    y = net.act(y, f"{name}.gelu", "gelu", tp="column")
    y = net.linear(y, f"{name}.fc2", h, tp="row")
    y = _dropout(net, y, f"{name}.fc_dropout", dropout)
    x = net.add([y, res], f"{name}.add2", tp="replicated")
    if not pre_ln:
        x = net.norm(x, f"{name}.ln2", "layer", tp="replicated")
    return x


def _check_dropout(name, p):
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ModelError(f"model {name!r}: dropout = {p!r}: expected a number in [0, 1)")
    return p


def _decoder_lm(name, layers, hidden, heads, seq, vocab, ffn, dropout, positions, source,
                precision, causal=True):
    """A GPT-style language model: token and position embeddings, pre-LN layers, a final
    layer normalisation, and an LM head tied to the token embedding."""
    for what, v in (("hidden", hidden), ("heads", heads), ("seq", seq),
                    ("vocab", vocab), ("ffn", ffn), ("positions", positions)):
        check_int(name, what, v)
    check_int(name, "layers", layers, 1, MAX_BLOCKS)
    _check_dropout(name, dropout)
    if hidden % heads:
        raise ModelError(f"model {name!r}: hidden = {hidden} is not a multiple of heads = "
                         f"{heads}")
    if seq > positions:
        raise ModelError(f"model {name!r}: seq = {seq} exceeds the {positions} learned "
                         f"positions")
    net = Net()
    tok = net.embedding("embed.tokens", vocab, hidden, lookups=seq, tp="row")
    pos = net.embedding("embed.positions", positions, hidden, lookups=seq, tp="replicated")
    x = net.add([tok, pos], "embed.add", tp="replicated")
    x = _dropout(net, x, "embed.dropout", dropout)
    for i in range(layers):
        x = _block(net, x, f"layer{i}", heads, ffn, dropout, causal, pre_ln=True)
    x = net.norm(x, "ln_f", "layer", tp="replicated")
    x = net.linear(x, "lm_head", vocab, bias=False, tp="column", tied=True)
    net.loss(x, tp="column")
    return net.model(name, input_shape=(seq,), source=source, default_precision=precision)


MEGATRON = ("Shoeybi et al.: Megatron-LM: Training Multi-Billion Parameter Language Models "
            "Using Model Parallelism, arXiv:1909.08053, 2019 (Table 1: 8.3B = 72 layers, "
            "hidden 3072, 32 heads, sequence 1024, vocabulary 51,200)")


@register("transformer")
def transformer(layers=72, hidden=3072, heads=32, seq=1024, vocab=51200, ffn=None,
                dropout=0.1, positions=None):
    """A GPT-style decoder-only transformer of any size (`ffn` defaults to 4 x hidden,
    `positions` to seq); the defaults are Megatron-LM's 8.3-billion-parameter model."""
    return _decoder_lm("transformer", layers, hidden, heads, seq, vocab,
                       4 * hidden if ffn is None else ffn, dropout,
                       seq if positions is None else positions, MEGATRON, "mixed")


GPT2_SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16), "large": (36, 1280, 20),
              "xl": (48, 1600, 25)}


@register("gpt2")
def gpt2(size="xl", seq=1024, vocab=50257):
    """GPT-2 (Radford et al., 2019): `size` small, medium, large or xl (the 1.5-billion-
    parameter model the paper calls GPT-2); context 1024, vocabulary 50,257."""
    check_choice("gpt2", "size", size, tuple(GPT2_SIZES))
    layers, hidden, heads = GPT2_SIZES[size]
    return _decoder_lm("gpt2", layers, hidden, heads, seq, vocab, 4 * hidden, 0.1, 1024,
                       "Radford et al.: Language Models are Unsupervised Multitask Learners, "
                       "OpenAI 2019 (Table 2)", "mixed")


@register("bert_large")
def bert_large(seq=512, vocab=30522, layers=24, hidden=1024, heads=16, dropout=0.1):
    """BERT-large (Devlin et al., NAACL 2019): 24 post-LN layers, hidden 1024, 16 heads, with
    its pre-training heads (masked LM over every position, tied to the token embedding, and
    next-sentence prediction on the first token)."""
    name = "bert_large"
    for what, v in (("seq", seq), ("vocab", vocab), ("hidden", hidden), ("heads", heads)):
        check_int(name, what, v)
    check_int(name, "layers", layers, 1, MAX_BLOCKS)
    _check_dropout(name, dropout)
    if seq > 512:
        raise ModelError(f"model {name!r}: seq = {seq} exceeds BERT's 512 positions")
    if hidden % heads:
        raise ModelError(f"model {name!r}: hidden = {hidden} is not a multiple of heads = "
                         f"{heads}")
    net = Net()
    tok = net.embedding("embed.tokens", vocab, hidden, lookups=seq, tp="row")
    pos = net.embedding("embed.positions", 512, hidden, lookups=seq, tp="replicated")
    typ = net.embedding("embed.segments", 2, hidden, lookups=seq, tp="replicated")
    x = net.add([tok, pos, typ], "embed.add", tp="replicated")
    x = net.norm(x, "embed.ln", "layer", tp="replicated")
    x = _dropout(net, x, "embed.dropout", dropout)
    for i in range(layers):
        x = _block(net, x, f"layer{i}", heads, 4 * hidden, dropout, False, pre_ln=False)
    # masked-LM head: dense, GELU, layer norm, the decoder tied to the token embedding
    y = net.linear(x, "mlm.dense", hidden, tp="replicated")
    y = net.act(y, "mlm.gelu", "gelu", tp="replicated")
    y = net.norm(y, "mlm.ln", "layer", tp="replicated")
    y = net.linear(y, "mlm.decoder", vocab, tied=True, tp="column")
    net.loss(y, "mlm.loss", tp="column")
    # next-sentence head: the pooler (dense, tanh) on the first token, a 2-way classifier
    first = Act((hidden,))
    p = net.linear(first, "nsp.pooler", hidden, tp="replicated")
    p = net.act(p, "nsp.tanh", "tanh", tp="replicated")
    p = net.linear(p, "nsp.classifier", 2, tp="replicated")
    net.loss(p, "nsp.loss", tp="replicated")
    return net.model(name, input_shape=(seq,), default_precision="mixed",
                     source="Devlin et al.: BERT: Pre-training of Deep Bidirectional "
                            "Transformers for Language Understanding, NAACL 2019")


@register("gnmt")
def gnmt(layers=8, hidden=1024, vocab=32000, src_len=50, tgt_len=50):
    """GNMT (Wu et al., 2016): an LSTM encoder (the first layer bidirectional, residual
    connections from the third layer) and decoder of `layers` layers each, additive attention
    from the first decoder layer over the encoder's output fed to every decoder layer above
    it, and a softmax over a shared wordpiece vocabulary. A sample is a sentence pair of
    `src_len` and `tgt_len` wordpieces."""
    name = "gnmt"
    for what, v in (("hidden", hidden), ("vocab", vocab), ("src_len", src_len),
                    ("tgt_len", tgt_len)):
        check_int(name, what, v)
    check_int(name, "layers", layers, 2, MAX_BLOCKS)
    h = hidden
    net = Net()
    x = net.embedding("enc.embed", vocab, h, lookups=src_len)
    x = net.lstm(x, "enc.lstm0", h, bidirectional=True)
    for i in range(1, layers):
        y = net.lstm(x, f"enc.lstm{i}", h)
        x = net.add([y, x], f"enc.add{i}") if i >= 2 else y
    memory = x
    y = net.embedding("dec.embed", vocab, h, lookups=tgt_len)
    # the first decoder layer reads its input with the previous step's attention context
    x = net.lstm(Act((tgt_len, 2 * h)), "dec.lstm0", h)
    net.additive_attention(x, memory, "dec.attention")
    for i in range(1, layers):
        y = net.lstm(Act((tgt_len, 2 * h)), f"dec.lstm{i}", h)   # [below; context]
        x = net.add([y, x], f"dec.add{i}") if i >= 2 else y
    x = net.linear(x, "dec.softmax", vocab)
    net.loss(x)
    return net.model(name, input_shape=(src_len + tgt_len,),
                     source="Wu et al.: Google's Neural Machine Translation System: Bridging "
                            "the Gap between Human and Machine Translation, arXiv:1609.08144, "
                            "2016")
