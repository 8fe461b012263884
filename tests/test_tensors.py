"""Tensors kept for the backward pass, each counted once: against the bytes PyTorch's
autograd saves (measured by bench/saved_tensors.py, kept in tests/data/saved_tensors.json
with its provenance), and against hand-counted closed forms for small chains."""
import json
import os

import pytest

from pysim import models
from pysim.models import Net
from pysim.models.tensors import stashes

DATA = os.path.join(os.path.dirname(__file__), "data", "saved_tensors.json")
with open(DATA) as f:
    SAVED = json.load(f)


def test_the_measurement_carries_its_provenance():
    p = SAVED["provenance"]
    assert p["torch"].startswith("2.") and p["date"] and p["dtype"] == "float32"
    assert set(SAVED["models"]) == {"resnet50", "vgg16", "alexnet", "googlenet",
                                    "inception_v3"}


@pytest.mark.parametrize("name", sorted(SAVED["models"]))
def test_kept_bytes_match_pytorch_autograd(name):
    """PyTorch's saved storages (parameters and buffers left out) at batch 2, fp32, against
    pysim's kept tensors; the networks are the same (equal parameter counts). What pysim
    leaves out: batch normalisation's per-channel mean and inverse deviation (two fp32 per
    channel and batch, not per sample) and the loss's target (8 bytes a sample)."""
    r = SAVED["models"][name]
    m = models.get(name)
    assert m.params == r["params"]
    got = r["batch"] * m.activation_bytes("fp32")
    assert got == pytest.approx(r["total_bytes"], rel=0.01), (got, r["total_bytes"])
    # the int64 storages: max pooling's indices (and the target)
    fixed = r["batch"] * sum(l.stash_mask_bytes for l in m.layers)
    torch_fixed = sum(r["other_bytes"].values())
    assert fixed == pytest.approx(torch_fixed, abs=8 * r["batch"] + 1)


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "alexnet", "googlenet",
                                  "inception_v3"])
def test_each_layer_declares_what_its_backward_reads(name):
    """Counting what every layer declares, a tensor kept by two layers is counted twice:
    that sum is larger than the kept bytes by exactly the declarations that name a tensor
    another layer already keeps."""
    m = models.get(name)
    declared = sum(l.saved_elems * 4 + l.saved_fixed_bytes for l in m.layers)
    kept = m.activation_bytes("fp32")
    again = 0
    for s in m.stashes:
        again += (len(s.keepers) - 1) * (s.elems * 4 + s.fixed_bytes)
    assert declared - kept == again
    assert again > 0.15 * declared          # ReLU outputs kept by the next layer too


def test_a_relu_in_place_and_the_conv_after_it_keep_one_tensor():
    """conv -> ReLU (in place) -> conv -> max pool: the first ReLU's output is kept by the
    ReLU and by the second convolution (one tensor, owned by the ReLU, needed first by the
    conv's backward); the second conv's output by the max pool, with the pool's indices."""
    net = Net()
    x = net.input((3, 8, 8))
    x = net.conv(x, "c1", 4, 3, padding=1)
    x = net.act(x, "r1", inplace=True)
    x = net.conv(x, "c2", 4, 3, padding=1)
    x = net.pool(x, "p", 2, 2)
    m = net.model("chain")
    n = 4 * 8 * 8
    found = {s.name: s for s in m.stashes}
    assert set(found) == {"c1 input", "r1 output", "c2 output", "p indices"}
    relu = found["r1 output"]
    assert (relu.elems, relu.owner, relu.needed, relu.last_read) == (n, 1, 2, 2)
    assert found["c1 input"].elems == 3 * 64 and found["c1 input"].owner == 0
    assert found["p indices"].fixed_bytes == 4 * 4 * 4 * 8
    assert m.activation_bytes("fp32") == 4 * (3 * 64 + n + n) + 4 * 16 * 8
    # not in place: the ReLU's output is a tensor of its own, its input the conv's
    net = Net()
    y = net.conv(net.input((3, 8, 8)), "c1", 4, 3, padding=1)
    y = net.act(y, "r1")
    net.conv(y, "c2", 4, 3, padding=1)
    assert net.model("c").activation_bytes("fp32") == 4 * (3 * 64 + n)


def test_a_residual_input_is_kept_once_and_read_until_the_add():
    """x -> (conv a, conv b, add): x is kept by both convolutions (one tensor) and read by
    the add after them, so it may leave the device only once the add has run."""
    net = Net()
    x = net.input((4, 8, 8))
    x = net.conv(x, "stem", 4, 1)
    x = net.act(x, "relu", inplace=True)
    a = net.conv(x, "a", 4, 3, padding=1)
    b = net.conv(a, "b", 4, 3, padding=1)
    net.add([b, x], "add")
    m = net.model("res")
    s = {s.name: s for s in m.stashes}["relu output"]
    assert s.keepers == (1, 2) and s.last_read == 4


def test_a_dropout_mask_is_one_byte_whatever_the_precision():
    net = Net()
    x = net.linear(net.input((16,)), "fc", 32)
    x = net.act(x, "drop", "dropout")
    net.linear(x, "fc2", 8)
    m = net.model("d")
    # fc keeps its input (16), dropout its mask (32 bytes), fc2 dropout's output (32)
    assert m.activation_bytes("fp32") == 4 * 16 + 32 + 4 * 32
    assert m.activation_bytes("fp16") == 2 * 16 + 32 + 2 * 32


def test_stashes_are_exact_for_transformer_layers():
    """Korthikanti et al. (MLSys 2023), eq. 1: a transformer layer keeps s*b*h*(34 + 5*a*s/h)
    bytes at 16-bit precision with dropout; tensors are counted once by construction."""
    m = models.get("bert_large", seq=128)
    per_layer = [l for l in m.layers if l.name.startswith("layer3.")]
    s, h, a = 128, 1024, 16
    assert sum(l.bytes("mixed")["stash"] for l in per_layer) == s * h * (34 + 5 * a * s / h)
    assert all(len(x.keepers) == 1 for x in stashes(m.layers)
               if m.layers[x.owner].name.startswith("layer"))


@pytest.mark.parametrize("name", ["gnmt", "bert_large", "dlrm", "inception_v3"])
def test_kept_tensors_have_distinct_names(name):
    """A memory plan names its ops after the tensors they move: every kept tensor of a zoo
    model has a name of its own (tensors no layer writes, such as GNMT's decoder inputs,
    are named after the layer that keeps them)."""
    names = [s.name for s in models.get(name).stashes]
    assert len(names) == len(set(names))
