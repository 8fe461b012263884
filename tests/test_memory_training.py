"""Memory plans inside training iterations (workload.kind = 'training'): the peak with
policy none against the largest live sum computed here from the layer table, offload that
costs nothing over free links, no leak across iterations on any device, lms that swaps
nothing and compression that changes nothing equal to none, recomputed FLOPs, the JSON and
summary, and refusals through the CLI."""
import json
import os

import pytest
from click.testing import CliRunner

from conftest import TOPOLOGIES, make_cfg
from pysim import ConfigError, load, simulate
from pysim.cli import main
from pysim.models import Net, optimizer_bytes, precision_bytes
from pysim.topology import build
from pysim.workload.graph import run_graph
from pysim.workload.memory import apply_training, training_memory_report
from pysim.workload.training import training_graph


def small_cnn():
    """Six layers with stashes of different sizes: conv, batch norm, ReLU, max pool, conv,
    linear (no input gradient for the first conv)."""
    net = Net()
    x = net.input((3, 32, 32))
    x = net.conv(x, "c1", 16, 3, padding=1)
    x = net.norm(x, "bn1")
    x = net.act(x, "relu1")
    x = net.pool(x, "pool1", 2, 2)
    x = net.conv(x, "c2", 32, 3, padding=1)
    x = net.linear(x, "fc", 10)
    return net.model("small_cnn", input_shape=(3, 32, 32))


def conv_net():
    """Convolutions only (compute-bound: every op's time is its FLOPs, so the HBM traffic of
    a transfer does not slow it) and a classifier."""
    net = Net()
    x = net.input((3, 32, 32))
    x = net.conv(x, "c1", 32, 3, padding=1)
    for i in range(2, 6):
        x = net.conv(x, f"c{i}", 32, 3, padding=1)
    x = net.linear(x, "fc", 10)
    return net.model("conv_net", input_shape=(3, 32, 32))


def system(policy=None, fast=False, iterations=1, batch=8, hbm_gb=1.0, **memory):
    big = 8192.0
    nodes = [{"name": "npu", "kind": "npu", "hbm_gb": hbm_gb, "tflops": 10.0,
              "hbm_gbps": big if fast else 900.0},
             {"name": "m0", "kind": "mem", "capacity_gb": 1.0, "mem_latency_ns": 1.0,
              "mem_gbps": big if fast else 100.0}]
    for n in nodes:
        if fast:
            n["injection_gbps"] = n["ejection_gbps"] = big
    links = [{"a": "npu", "b": "m0", "gbps": big if fast else 32.0, "latency_ns": 1.0}]
    w = {"kind": "training", "model": "resnet50", "batch": batch, "iterations": iterations,
         "mem_piece_bytes": 1 << 20}
    if policy:
        w["memory"] = {"policy": policy, **memory}
    return make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links},
                    network={"vcs": 2, "vc_buffer_flits": 32}, workload=w)


def run(cfg, model=None, check=True):
    topo = build(cfg)
    g, plan = training_graph(cfg, topo, model=model or small_cnn())
    applied = apply_training(cfg, topo, g, plan)
    r = run_graph(cfg, g, check_memory=check)
    training_memory_report(r, applied)
    lo, hi = plan.iterations[-1]
    start = min(op["start"] for op in r.ops[lo:hi])
    end = max(op["finish"] for op in r.ops[lo:hi])
    return r, applied, plan, end - start


def test_peak_with_policy_none_is_the_largest_live_sum():
    """resident + max over the layers l of (the stashes of layers 0..l that have backward
    work) + (l's forward output, or the input gradient its backward ops produce)."""
    model = small_cnn()
    batch = 8
    r, _, _, _ = run(system(batch=batch), model)
    pb = precision_bytes("fp32")
    resident = model.params * (pb.weight + pb.grad + pb.master + optimizer_bytes("sgd", "fp32"))
    best, cum = 0, 0
    for layer in model.layers:
        has_bwd = layer.bwd_input_flops > 0 or layer.bwd_weight_flops > 0
        if has_bwd:
            cum += batch * (layer.stash_elems * pb.act + layer.stash_mask_bytes)
        best = max(best, cum + batch * layer.out_elems * pb.act)
        if layer.bwd_input_flops > 0:
            best = max(best, cum + batch * layer.in_elems * pb.act)
    npu = r.memory["devices"]["npu"]
    assert npu["peak_bytes"] == resident + best
    assert npu["end_bytes"] == 0 and npu["recomputed_flops"] == 0.0


def test_offload_over_free_links_costs_nothing():
    """Links, NICs, memory node and HBM so fast that every swap-out and swap-in finishes
    within the op it overlaps (convolutions of about 200,000 cycles, transfers of about
    1,000): the iteration takes exactly as long as with everything kept."""
    none, _, _, t_none = run(system(fast=True, batch=64), conv_net())
    off, applied, _, t_off = run(system("offload", fast=True, batch=64), conv_net())
    assert applied.plans["npu"].counts()["swap"] == 5      # all but the last layer
    assert off.memory["devices"]["m0"]["offloaded_bytes"] > 0
    assert t_off == t_none


def test_no_leak_across_iterations():
    """Two iterations with offload: every byte is freed by the end on the NPU and the memory
    node; when the second iteration starts the NPU holds its resident state only and the
    memory node nothing."""
    model = small_cnn()
    r, applied, plan, _ = run(system("offload", iterations=2, batch=16), model)
    for d in r.memory["devices"].values():
        assert d["end_bytes"] == 0
    pb = precision_bytes("fp32")
    resident = model.params * (pb.weight + pb.grad + pb.master + optimizer_bytes("sgd", "fp32"))
    t = r.ops[plan.iterations[1][0]]["start"]      # the second iteration's first op
    before = {d: [v for c, v in pts if c < t][-1] for d, pts in r.memory["timeline"].items()}
    assert before["npu"] == resident and before["m0"] == 0
    assert r.memory["devices"]["m0"]["peak_bytes"] > 0
    assert applied.plans["npu"].counts()["swap"] == 5


def test_lms_that_swaps_nothing_and_neutral_compression_equal_none():
    none, _, _, t_none = run(system(batch=16))
    lms, applied, _, t_lms = run(system("lms", batch=16, swapout_threshold=10_000,
                                        swapin_ahead=1, swapin_groupby=0))
    assert applied.plans["npu"].counts()["swap"] == 0
    assert t_lms == t_none
    assert lms.memory["devices"]["npu"]["peak_bytes"] == none.memory["devices"]["npu"][
        "peak_bytes"]
    comp, _, _, t_comp = run(system("compression", batch=16,
                                    ratio={"conv": 1.0, "norm": 1.0, "eltwise": 1.0,
                                           "pool": 1.0}, compress_gbps=float("inf"),
                                    decompress_gbps=float("inf")))
    assert t_comp > t_none              # its codecs still read and write HBM
    # a decompressor holds its input and its output at once: at most one tensor more
    extra = comp.memory["devices"]["npu"]["peak_bytes"] - none.memory["devices"]["npu"][
        "peak_bytes"]
    assert 0 <= extra <= 16 * max(l.stash_elems * 4 for l in small_cnn().layers)


def test_recomputed_flops_are_the_forward_flops_of_the_dropped_layers():
    model = small_cnn()
    r, applied, _, _ = run(system("recompute", batch=8, iterations=2), model)
    plan = applied.plans["npu"]
    layers = [l for l in model.layers if l.bwd_input_flops or l.bwd_weight_flops]
    dropped = [l for l, a in zip(layers, plan.action) if a == "recompute"]
    assert dropped
    want = 2 * sum(8 * l.fwd_flops for l in dropped)
    assert r.memory["devices"]["npu"]["recomputed_flops"] == pytest.approx(want)
    assert r.memory["plans"]["npu"]["layers"]["recompute"] == len(dropped)


def test_cli_run_json_summary_and_refusals(tmp_path):
    """pysim run with a memory policy on a shipped system: the summary's memory lines and the
    JSON's memory section; a policy on a system with no remote memory, and an NPU over its
    HBM, refused by name."""
    out = tmp_path / "r.json"
    base = ["run", os.path.join(TOPOLOGIES, "mcdla-8.toml"), "--set", "workload.kind=training",
            "--set", "workload.model=transformer", "--set", "workload.model_params={layers = 2, "
            "hidden = 64, heads = 2, seq = 64, vocab = 128}", "--set", "workload.batch=64",
            "--set", "workload.iterations=1"]
    res = CliRunner().invoke(main, base + ["--set", "workload.memory.policy=offload",
                                           "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "memory npu0" in res.output and "GB out" in res.output
    d = json.loads(out.read_text())
    m = d["memory"]
    assert m["policy"] == "offload"
    assert m["devices"]["npu0"]["offloaded_bytes"] == m["devices"]["npu0"]["prefetched_bytes"]
    # npu0's pages split evenly between mem7 and mem0, which also take npu1's and npu7's
    assert sorted(m["plans"]["npu0"]["targets"]) == ["mem0", "mem7"]
    total = sum(v["offloaded_bytes"] for k, v in m["devices"].items() if k.startswith("npu"))
    assert sum(v["offloaded_bytes"] for k, v in m["devices"].items()
               if k.startswith("mem")) == total
    res = CliRunner().invoke(main, ["run", os.path.join(TOPOLOGIES, "mesh8x8.toml"),
                                    "--set", "workload.kind=training",
                                    "--set", "workload.model=resnet50",
                                    "--set", "workload.batch=64",
                                    "--set", "workload.memory.policy=lms"])
    assert res.exit_code == 1 and "no remote memory reachable" in res.output
    res = CliRunner().invoke(main, base + ["--set", "workload.memory.policy=recompute",
                                           "--set", "topology.npu.hbm_gb=0.001"])
    assert res.exit_code == 1 and "workload.memory.policy = 'recompute': the training " \
        "state npu0 keeps in HBM" in res.output and "past its capacity of 1,000,000 bytes" \
        in res.output


def test_karma_host_update_moves_the_optimizer_state_to_the_host():
    """KARMA's multi-node scheme: the NPU keeps weights and gradients only (its resident
    bytes drop by params x (master + optimizer state)), the host holds the rest, each layer
    with weights sends its gradient up and gets its weights back, and the NPU's own optimizer
    steps take no time."""
    model = small_cnn()
    nodes = [{"name": "npu", "kind": "npu", "hbm_gb": 1.0},
             {"name": "cpu", "kind": "host", "dram_gb": 1.0}]
    w = {"kind": "training", "model": "resnet50", "batch": 8, "iterations": 2,
         "optimizer": "adam", "memory": {"policy": "karma"}}
    cfg = make_cfg(topology={"kind": "graph", "nodes": nodes,
                             "links": [{"a": "npu", "b": "cpu", "gbps": 32.0}]},
                   network={"vcs": 2, "vc_buffer_flits": 32}, workload=w)
    off, _, _, _ = run(cfg, model)
    on, _, plan, _ = run(cfg.with_overrides({"workload.memory.host_update": True}), model)
    pb = precision_bytes("fp32")
    moved = model.params * (pb.master + optimizer_bytes("adam", "fp32"))
    assert on.memory["devices"]["npu"]["peak_bytes"] == \
        off.memory["devices"]["npu"]["peak_bytes"] - moved
    assert on.memory["devices"]["cpu"]["peak_bytes"] == moved
    with_weights = [l for l in model.layers if l.params]
    ups = [o for o in on.ops if o["kind"] == "send" and o["dst"] == "cpu"]
    downs = [o for o in on.ops if o["kind"] == "send" and o["node"] == "cpu"]
    assert len(ups) == len(downs) == 2 * len(with_weights)
    assert sorted(o["size"] for o in ups[:len(with_weights)]) == sorted(
        l.params * pb.grad for l in with_weights)
    steps = [on.ops[op] for op in plan.optimizer.values()]
    assert all(s["finish"] == s["start"] for s in steps)


@pytest.mark.parametrize("policy", ["recompute", "offload"])
def test_training_state_past_the_hbm_is_refused_naming_the_policy_and_the_bytes(policy):
    """The weights, gradients and optimizer state stay in HBM under every plan of the
    activations: past the capacity, the refusal names the policy, the NPU, the bytes (the
    model's parameters x (4 + 4 + 4): fp32 weights, gradients and SGD's momentum) and the
    capacity, and what would help."""
    model = small_cnn()
    state = model.params * (4 + 4 + 4)
    cap = state // 2
    cfg = system(policy, hbm_gb=cap / 1e9)
    with pytest.raises(ConfigError, match=rf"^workload\.memory\.policy = '{policy}': the "
                                          r"training state npu keeps in HBM all iteration "
                                          rf"\(weights, gradients, optimizer state\), "
                                          rf"{state:,} bytes, is past its capacity of "
                                          rf"{cap:,} bytes.*workload\.parallel tp, pp or zero"):
        run(cfg, model)


def test_a_recomputation_costs_what_its_forward_op_costs():
    """layer_costs from a preset (mixed precision: the 16-bit peak times the kind's
    efficiency): a recomputed layer's op alone takes exactly its forward op's time, and the
    iteration, in the run and in the planner's prediction, is the sum of the chain's ops and
    the recomputations."""
    from pysim.models.presets import spec
    from pysim.workload import OpGraph
    from pysim.workload.memory import (GraphSink, NpuWork, apply, chain, estimate,
                                       layer_costs)
    model = small_cnn()
    costs = layer_costs(model, spec("v100"), "mixed", 64)
    cfg = make_cfg(topology={"kind": "graph", "nodes": [{"name": "npu", "kind": "npu",
                                                         "preset": "v100"},
                                                        {"name": "m", "kind": "mem"}],
                             "links": [{"a": "npu", "b": "m"}]},
                   workload={"memory": {"policy": "recompute", "segments": 1}})
    g = OpGraph()
    sk = chain(GraphSink(g, {}), "npu", costs)
    applied = apply(cfg, build(cfg), g, {"npu": NpuWork(costs, [sk], 0, sk.F[0],
                                                        sk.order[-1])})
    r = run_graph(cfg, g)
    rec = [o for o in r.ops if o["name"].startswith("npu recompute ")]
    assert len(rec) == applied.plans["npu"].counts()["recompute"] > 0
    by_name = {c.name: c for c in costs}
    for o in rec:
        assert o["isolated_cycles"] == by_name[o["name"].split()[-1]].fwd_cycles
    # one compute unit, nothing else in flight: the iteration is the sum of its ops' times,
    # a closed form independent of both the planner's estimate and the run
    plan = applied.plans["npu"]
    want = sum(c.fwd_cycles + sum(c.bwd_cycles) for c in costs) + \
        sum(c.fwd_cycles for c, a in zip(costs, plan.action) if a == "recompute")
    assert r.makespan_cycles == want
    assert estimate(plan, costs, applied.budgets["npu"]).cycles == want


def test_memory_keys_outside_training_are_refused():
    res = CliRunner().invoke(main, ["run", "mcdla-8", "--set", "workload.kind=collective",
                                    "--set", "workload.memory.policy=offload"])
    assert res.exit_code == 1
    assert ("workload.memory.policy = 'offload' is not read by workload.kind = 'collective': "
            "it is read by workload.kind = 'training'") in res.output


def test_peak_of_a_chain_with_in_place_relus_counts_each_tensor_once():
    """conv (3 -> 16, 32 x 32) -> ReLU in place -> max pool 2 -> conv (16 -> 32) -> ReLU in
    place -> linear: the tensors kept, counted by hand -- the input (3 x 1024, kept by the
    first conv), the first ReLU's output (16 x 1024, kept by the ReLU and the pool), the
    pool's int64 indices (16 x 256 x 8 bytes), the pool's output (16 x 256, kept by the second
    conv), the second ReLU's output (32 x 256, kept by the ReLU and the linear layer). Policy
    none: the peak is resident + the largest of (tensors owned so far + the layer's forward
    output, none for an in-place ReLU; + its input gradient in backward)."""
    net = Net()
    x = net.input((3, 32, 32))
    x = net.conv(x, "c1", 16, 3, padding=1)
    x = net.act(x, "r1", inplace=True)
    x = net.pool(x, "p", 2, 2)
    x = net.conv(x, "c2", 32, 3, padding=1)
    x = net.act(x, "r2", inplace=True)
    net.linear(net.flatten(x), "fc", 10)
    model = net.model("inplace")
    batch, a = 8, 4
    owned = [3 * 1024 * a, 16 * 1024 * a, 16 * 256 * 8, 16 * 256 * a, 32 * 256 * a, 0]
    outs = [16 * 1024, 0, 16 * 256, 32 * 256, 0, 10]
    ins = [3 * 1024, 16 * 1024, 16 * 1024, 16 * 256, 32 * 256, 32 * 256]
    assert [l.stash_elems * a + l.stash_mask_bytes for l in model.layers] == owned
    r, _, _, _ = run(system(batch=batch), model)
    pb = precision_bytes("fp32")
    resident = model.params * (pb.weight + pb.grad + pb.master + optimizer_bytes("sgd", "fp32"))
    best, cum = 0, 0
    for l, layer in enumerate(model.layers):
        cum += batch * owned[l]
        best = max(best, cum + batch * outs[l] * a)
        if layer.bwd_input_flops > 0:
            best = max(best, cum + batch * ins[l] * a)
    assert r.memory["devices"]["npu"]["peak_bytes"] == resident + best


def test_a_tensor_at_a_pipeline_cut_is_kept_on_both_sides():
    """conv c1 -> in-place ReLU r1 | cut | max pool p -> conv c2 -> in-place ReLU r2 -> fc:
    r1's output is kept by r1 (its backward reads its output) and by the pool (its input),
    so each stage keeps it for its own backward ops: counted on both, owned on the second by
    the pool, the first of its keepers there. Bytes by hand, per sample, fp32."""
    from pysim.workload.memory.training import kept_tensors
    net = Net()
    x = net.input((3, 32, 32))
    x = net.conv(x, "c1", 16, 3, padding=1)
    x = net.act(x, "r1", inplace=True)
    x = net.pool(x, "p", 2, 2)
    x = net.conv(x, "c2", 32, 3, padding=1)
    x = net.act(x, "r2", inplace=True)
    net.linear(net.flatten(x), "fc", 10)
    model = net.model("cut")
    a = 4
    first = kept_tensors(model, [0, 1], a, 1)
    second = kept_tensors(model, [2, 3, 4, 5], a, 1)
    assert [sorted(t.nbytes for t in ts) for ts in first] == [[3 * 1024 * a],
                                                              [16 * 1024 * a]]
    assert [sorted(t.nbytes for t in ts) for ts in second] == [
        sorted([16 * 1024 * a, 16 * 256 * 8]), [16 * 256 * a], [32 * 256 * a], []]
    cut = next(t for t in second[0] if t.nbytes == 16 * 1024 * a)
    assert cut.keepers == (0,) and cut.needed == 0 and cut.last_read == 0
    assert first[1][0].keepers == (1,)          # the pool's keeping is the other stage's
    whole = sum(t.nbytes for ts in kept_tensors(model, list(range(6)), a, 1) for t in ts)
    split = sum(t.nbytes for ts in first + second for t in ts)
    assert split - whole == 16 * 1024 * a       # only the cut tensor is counted twice


def test_workload_memory_recompute_is_read_by_the_recompute_policy():
    """workload.memory.recompute belongs to policy 'recompute': its documented default given
    explicitly runs the iteration the default runs; given with another policy the error
    names 'recompute' as its reader; and workload.memory.segments, read by recompute =
    'segments' alone, is refused beside 'full' naming recompute (not policy 'none', which the
    user did not write)."""
    base = {"workload.kind": "training", "workload.model": "gpt2", "workload.batch": 8,
            "network.model": "flow", "workload.iterations": 1,
            "workload.memory.policy": "recompute"}
    default = simulate(load("dgx-a100", base)).to_dict()["iteration_cycles"]
    given = simulate(load("dgx-a100", {**base, "workload.memory.recompute": "segments"}))
    assert given.to_dict()["iteration_cycles"] == default
    with pytest.raises(ConfigError, match=r"workload\.memory\.recompute is not read by "
                                          r"workload\.memory\.policy = 'none' \(it is read by "
                                          r"recompute\)"):
        simulate(load("dgx-a100", {**base, "workload.memory.policy": "none",
                                   "workload.memory.recompute": "full"}))
    with pytest.raises(ConfigError, match=r"workload\.memory\.segments is read by workload\."
                                          r"memory\.recompute = 'segments' only, not 'full'"):
        simulate(load("dgx-a100", {**base, "workload.memory.recompute": "full",
                                   "workload.memory.segments": 3}))
