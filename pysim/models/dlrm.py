"""DLRM, the deep-learning recommendation model (Naumov et al., arXiv:1906.00091, 2019), in
the configuration of the MLPerf training benchmark on the Criteo Terabyte click logs."""
from __future__ import annotations

from pysim.models.layers import ModelError
from pysim.models.model import Net
from pysim.models.registry import MAX_BLOCKS, check_int, register

# rows of the 26 categorical features' tables in MLPerf's DLRM (Criteo Terabyte, hashed to at
# most 40 million rows), as the DLRM reference implementation defines them
CRITEO_TERABYTE_ROWS = (
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
    2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36)


def _ints(name, what, v):
    if not isinstance(v, (list, tuple)) or not 0 < len(v) <= MAX_BLOCKS:
        raise ModelError(f"model {name!r}: {what}: expected a list of 1 .. {MAX_BLOCKS:,} "
                         f"integers, got {v!r:.80}")
    for x in v:
        check_int(name, what, x)
    return tuple(v)


@register("dlrm")
def dlrm(tables=CRITEO_TERABYTE_ROWS, dim=128, dense=13, bottom=(512, 256, 128),
         top=(1024, 1024, 512, 256, 1), lookups=1):
    """DLRM: a bottom MLP over the `dense` features, one embedding table per categorical
    feature (`tables`: their rows; `dim` wide; `lookups` rows summed per sample, 1 for
    Criteo's one-hot features), the pairwise dot products of the embeddings and the bottom
    MLP's output, and a top MLP ending in one logit. Each table is its own layer (`table`
    numbers them) for model-parallel placement."""
    name = "dlrm"
    tables = _ints(name, "tables", tables)
    bottom = _ints(name, "bottom", bottom)
    top = _ints(name, "top", top)
    for what, v in (("dim", dim), ("dense", dense), ("lookups", lookups)):
        check_int(name, what, v)
    if bottom[-1] != dim:
        raise ModelError(f"model {name!r}: bottom MLP ends in {bottom[-1]} features, but the "
                         f"interaction needs dim = {dim}")
    net = Net()
    x = net.input((dense,))
    for i, width in enumerate(bottom):
        x = net.linear(x, f"bottom.fc{i}", width)
        x = net.act(x, f"bottom.relu{i}")
    embs = [net.embedding(f"emb{t}", rows, dim, lookups=lookups, pooled=True, table=t)
            for t, rows in enumerate(tables)]
    x = net.interaction([x] + embs, "interaction")
    for i, width in enumerate(top):
        x = net.linear(x, f"top.fc{i}", width)
        if i < len(top) - 1:
            x = net.act(x, f"top.relu{i}")
    net.loss(x, op="binary_cross_entropy")
    return net.model(name, input_shape=(dense + len(tables),),
                     source="Naumov et al.: Deep Learning Recommendation Model for "
                            "Personalization and Recommendation Systems, arXiv:1906.00091, "
                            "2019; MLPerf Training's Criteo Terabyte configuration")
