"""workload.precision = "amp": PyTorch's automatic mixed precision (autocast, GradScaler,
DistributedDataParallel). Every number is worked out by hand from what AMP keeps and moves:
fp32 weights, gradients and optimizer state (no master copy), 16-bit activations and
products, and each product's weights cast to 16 bits per forward pass (read 4, write 2, the
kernel reads 2), its input gradient reading the 16-bit copy (2) and its weight gradient
written in 16 bits and cast back to the fp32 gradient (write 2, read 2, write 4)."""
import pytest

from conftest import make_cfg
from pysim import models
from pysim.models import Layer, Model
from pysim.models.presets import spec
from pysim.topology import build as build_topology
from pysim.workload import run_graph
from pysim.workload.training import training_graph, training_report

FAST = {"vcs": 4, "wait_for_tail_credit": False, "vc_buffer_flits": 16}


def linear(name, flops, params, ins, outs, kind="linear", tp=None):
    """A layer whose forward, input-gradient and weight-gradient FLOPs are all `flops` per
    sample, `ins`/`outs` activation elements, `params` weights (all in its product)."""
    return Layer(name, kind, params=params, fwd_flops=flops, bwd_input_flops=flops,
                 bwd_weight_flops=flops, in_elems=ins, out_elems=outs, stash_elems=ins,
                 in_shape=(ins,), out_shape=(outs,), tp=tp)


def one_npu(precision, optimizer="sgd", optimizer_step="fused"):
    cfg = make_cfg(topology={"kind": "graph", "nodes": [{"name": "a", "kind": "npu"},
                                                        {"name": "h", "kind": "host"}],
                             "links": [{"a": "a", "b": "h"}],
                             "npu": {"tflops": 100.0, "hbm_gbps": 1000.0}},
                   workload={"kind": "training", "batch": 4, "group": ["a"],
                             "iterations": 1, "precision": precision,
                             "optimizer": optimizer, "optimizer_step": optimizer_step})
    return cfg


def test_the_bytes_amp_keeps_per_element():
    """Activations 2, stored weights 4, gradients 4 (all-reduced as kept), no master copy,
    a 2-byte copy per use; SGD's momentum and Adam's moments 4 bytes each. Adam's training
    state is then 4 + 4 + 8 = 16 bytes per parameter (mixed: 2 + 2 + 4 + 8, the same 16;
    ZeRO, Rajbhandari et al. SC 2020, Section 3.1), SGD's 4 + 4 + 4 = 12."""
    assert tuple(models.precision_bytes("amp")) == (2, 4, 4, 0, 2)
    assert models.optimizer_bytes("sgd", "amp") == 4
    assert models.optimizer_bytes("adam", "amp") == 8
    m = models.get("resnet50")
    assert m.params == 25_557_032                       # torchvision's ResNet-50
    assert m.state_bytes("amp", "adam")["total"] == 16 * m.params
    assert m.state_bytes("amp", "sgd")["total"] == 12 * m.params
    assert m.weight_bytes("amp") == 4 * m.params


def test_amp_computes_at_the_16_bit_rate():
    """A V100's datasheet: 125 TFLOP/s on the tensor cores (fp16), 15.7 fp32: autocast's
    products run at the former."""
    v100 = spec("v100")
    assert v100.peak_flops("amp") == 125e12
    assert spec("v100", tflops_fp16=100.0).peak_flops("amp") == 100e12


@pytest.mark.parametrize("precision, cycles", [
    # fwd: 2 x 4 x (3000 + 1000) + 8 x 50,000 = 432,000 bytes; input gradient 32,000 +
    # 2 x 50,000 = 132,000; weight gradient 2 x 4 x (1000 + 3000) + 8 x 50,000 = 432,000;
    # SGD's fused step 20 bytes a weight (read weight, gradient, momentum; write weight,
    # momentum: 5 x 4) = 1,000,000; at 1000 bytes a cycle
    ("amp", (432, 132, 432, 1000)),
    # mixed: the 2-byte weights read as stored (100,000 bytes a phase), the step 22 bytes
    # a weight (weights read and written 2 x 2, gradient 2, master copy 2 x 4, momentum 2 x 4)
    ("mixed", (132, 132, 132, 1100)),
])
def test_one_layer_under_amp_moves_its_casts(precision, cycles):
    """One linear layer of 50,000 weights on one NPU (100 TFLOP/s: 75,000 FLOPs a cycle at
    the linear layers' efficiency; 1000 GB/s of HBM at 1 GHz), batch 4, 3000 inputs and 1000
    outputs per sample, 100 k FLOPs per sample and phase (6 cycles: every op memory-bound):
    the iteration is the sum of the four ops' bytes over 1000 bytes a cycle."""
    L = linear("fc", 1e5, 50_000, 3000, 1000)
    cfg = one_npu(precision)
    graph, plan = training_graph(cfg, build_topology(cfg), Model("hand", [L],
                                                                  input_shape=(1,)))
    rep = training_report(graph, plan, run_graph(cfg, graph), cfg)
    assert rep["iteration_cycles"] == sum(cycles)
    assert rep["compute_cycles"] == sum(cycles)


def test_layers_autocast_does_not_cast_move_their_fp32_weights():
    """A normalisation (not on autocast's float16 list) reads its fp32 weights in the
    forward and input-gradient passes (4 bytes each) and writes an fp32 gradient (4): with
    50,000 weights, 2 x 4 x 4000 = 32,000 bytes of activations per phase, 232,000 bytes a
    phase, and the step 1,000,000 bytes."""
    L = linear("bn", 1e5, 50_000, 3000, 1000, kind="norm")
    cfg = one_npu("amp")
    graph, plan = training_graph(cfg, build_topology(cfg), Model("hand", [L],
                                                                  input_shape=(1,)))
    rep = training_report(graph, plan, run_graph(cfg, graph), cfg)
    assert rep["iteration_cycles"] == 232 + 232 + 232 + 1000


@pytest.mark.parametrize("optimizer, step, per_param", [
    ("adam", "fused", 4 + 4 + 8 + 4 + 8),               # read w, g, 2 moments; write w, moments
    ("sgd", "passes", (4 + 4) + 4 + (4 + 4 + 4 + 4 + 4)),   # unscale, norm, the step
    ("adam", "passes", (4 + 4) + 4 + (4 + 4 + 8 + 4 + 8)),
])
def test_the_optimizer_step_moves_fp32_weights_gradients_and_state(optimizer, step,
                                                                   per_param):
    """The step's HBM bytes per parameter, by hand: fused, one pass over the fp32 weights,
    gradient and state; as separate passes, GradScaler's unscale and inf check in place
    (read and write the gradient), the gradient's norm (read), then the step; 50,000
    weights at 1000 bytes a cycle (the FLOPs, 4 or 12 a weight at 100,000 a cycle, take
    less)."""
    L = linear("fc", 0.0, 50_000, 0, 0)
    cfg = one_npu("amp", optimizer, step)
    graph, plan = training_graph(cfg, build_topology(cfg), Model("hand", [L],
                                                                  input_shape=(1,)))
    rep = training_report(graph, plan, run_graph(cfg, graph), cfg)
    w = 50_000
    opt_flops_cycles = {"sgd": 4, "adam": 12}[optimizer] * w / 100_000
    step_cycles = max(per_param * w / 1000, opt_flops_cycles)
    assert rep["optimizer_cycles"] == step_cycles


def ring8():
    return dict(topology={"kind": "ring", "size": 8, "link_gbps": 32.0},
                network={**FAST, "injection_gbps": 64.0, "ejection_gbps": 64.0})


@pytest.mark.parametrize("tp", [1, 2])
def test_data_parallel_all_reduces_four_bytes_per_weight(tp):
    """Two linear layers (column- then row-split under tensor parallelism) of 3 x 2^18 and
    2^18 weights: each data-parallel replica all-reduces 4 bytes per weight it holds, 4 x
    2^20 / tp bytes in all (the gradients DDP all-reduces under AMP are the fp32 ones; mixed
    precision would all-reduce 2)."""
    m = Model("hand", [linear("a", 1e6, 3 << 18, 256, 256, tp="column"),
                       linear("b", 1e6, 1 << 18, 256, 256, tp="row")], input_shape=(1,))
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 8, "iterations": 1,
                                        "precision": "amp",
                                        "parallel": {"tp": tp, "dp": 8 // tp}})
    _, plan = training_graph(cfg, build_topology(cfg), m)
    per_group = {}
    for c in plan.collectives:
        if c.what == "dp_all_reduce":
            key = tuple(c.group)
            per_group[key] = per_group.get(key, 0) + c.bytes
    assert len(per_group) == tp
    assert set(per_group.values()) == {4 * (1 << 20) // tp}


def test_memory_per_npu_is_the_closed_form():
    """Data-parallel over 8 NPUs, batch 8 (one sample each), SGD: per NPU 12 bytes of state
    per weight (fp32 weight, gradient and momentum) and the stash of one sample at 2 bytes
    per element: 12 x 2^20 + 2 x 2 x 256 bytes. With Adam 16 x 2^20 + the same stash."""
    m = Model("hand", [linear("a", 1e6, 3 << 18, 256, 256),
                       linear("b", 1e6, 1 << 18, 256, 256)], input_shape=(1,))
    for optimizer, per_weight in (("sgd", 12), ("adam", 16)):
        cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 8, "iterations": 1,
                                            "precision": "amp", "optimizer": optimizer})
        _, plan = training_graph(cfg, build_topology(cfg), m)
        assert set(plan.memory.values()) == {per_weight * (1 << 20) + 2 * 2 * 256}


def test_zero_shards_fp32_state_and_moves_four_bytes_per_weight():
    """ZeRO stage 1 over 8 replicas (Rajbhandari et al., SC 2020) under amp, SGD: the fp32
    gradients are reduce-scattered and the updated fp32 weights all-gathered, 4 x 2^20 bytes
    each; per NPU the weights and gradients stay whole (4 + 4 bytes a weight) and the
    momentum is sharded (4 / 8): 8.5 x 2^20 bytes of state, and the stash of one sample."""
    m = Model("hand", [linear("a", 1e6, 3 << 18, 256, 256),
                       linear("b", 1e6, 1 << 18, 256, 256)], input_shape=(1,))
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 8, "iterations": 1,
                                        "precision": "amp", "parallel": {"zero": 1}})
    _, plan = training_graph(cfg, build_topology(cfg), m)
    moved = {}
    for c in plan.collectives:
        moved[c.what] = moved.get(c.what, 0) + c.bytes
    assert moved == {"zero_reduce_scatter": 4 << 20, "zero_all_gather": 4 << 20}
    assert set(plan.memory.values()) == {int(8.5 * (1 << 20)) + 2 * 2 * 256}
