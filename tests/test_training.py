"""Training iterations against closed forms: one layer on one NPU is
the roofline time of its ops; data parallelism with free communication is the compute, with
free compute the all-reduces' alpha-beta time, with overlap between max and sum, without
overlap the sum; GPipe's and 1F1B's bubble (p - 1)/(m + p - 1); Megatron-LM's all-reduces
per transformer layer; and refusals of bad plans.

The models here are made by hand from the layer table's fields (pysim.models.Layer), so that
every number is known."""
import math
import re

import pytest

from conftest import make_cfg
from pysim import simulate
from pysim.errors import ConfigError
from pysim.models import Layer, Model
from pysim.topology import build as build_topology
from pysim.workload import OpGraph, run_graph
from pysim.workload.training import training_graph

FAST = {"vcs": 4, "wait_for_tail_credit": False, "vc_buffer_flits": 16}


def layer(name, flops=0.0, params=0, ins=0, outs=0, stash=None, kind="linear", tp=None,
          bwd=True):
    """A layer with forward, input-gradient and weight-gradient FLOPs all `flops` (per
    sample), `ins`/`outs` activation elements in and out, `params` weights."""
    return Layer(name, kind, params=params, fwd_flops=flops,
                 bwd_input_flops=flops if bwd else 0.0, bwd_weight_flops=flops,
                 in_elems=ins, out_elems=outs, stash_elems=ins if stash is None else stash,
                 in_shape=(ins,), out_shape=(outs,), tp=tp)


def model(layers, name="hand"):
    return Model(name, layers, input_shape=(1,))


def run_model(m, system, **workload):
    """Simulate training of model m (hand-made, so given to training_graph directly)."""
    cfg = make_cfg(**system, workload={"kind": "training", "batch": 8, **workload})
    topo = build_topology(cfg)
    graph, plan = training_graph(cfg, topo, m)
    res = run_graph(cfg, graph)
    from pysim.workload.training import training_report
    return training_report(graph, plan, res, cfg), plan, graph, res


def ring8(link_gbps=32.0, **npu):
    return dict(topology={"kind": "ring", "size": 8, "link_gbps": link_gbps,
                          "npu": npu or None},
                network={**FAST, "injection_gbps": 2 * link_gbps,
                         "ejection_gbps": 2 * link_gbps})


# ------------------------------------------------------------------ one NPU, one layer

def roofline(flops, nbytes, peak_per_cycle, hbm_per_cycle):
    return max(math.ceil(flops / peak_per_cycle - 1e-9), math.ceil(nbytes / hbm_per_cycle
                                                                    - 1e-9))


@pytest.mark.parametrize("iterations", [1, 2])
def test_one_layer_on_one_npu_is_the_roofline_of_its_ops(iterations):
    """Batch 4, fp32, SGD with momentum, a 100 TFLOP/s NPU with 1000 GB/s of HBM at 1 GHz,
    a linear layer (efficiency 0.75: 75,000 FLOPs a cycle; 1000 bytes a cycle):
    forward reads 4 x 3000 inputs and the 50,000 weights and writes 4 x 1000 outputs;
    the input gradient the same; the weight gradient reads the output gradient and the
    stash and writes the weight gradient; the step reads weights, gradient and momentum and
    writes weights and momentum (5 x 4 bytes a weight) at 4 FLOPs a weight (efficiency 1)."""
    L = layer("fc", flops=2.0e7, params=50_000, ins=3000, outs=1000)
    system = dict(topology={"kind": "graph", "nodes": [{"name": "a", "kind": "npu"},
                                                       {"name": "h", "kind": "host"}],
                            "links": [{"a": "a", "b": "h"}],
                            "npu": {"tflops": 100.0, "hbm_gbps": 1000.0}})
    rep, plan, _, _ = run_model(model([L]), system, batch=4, group=["a"],
                                iterations=iterations)
    pk, hbm, b, w = 75_000, 1000, 4, 50_000
    fwd = roofline(b * 2e7, 4 * (b * 3000 + b * 1000 + w), pk, hbm)
    bin_ = roofline(b * 2e7, 4 * (b * 3000 + b * 1000 + w), pk, hbm)
    bw = roofline(b * 2e7, 4 * (b * 1000 + b * 3000 + w), pk, hbm)
    opt = roofline(4 * w, 20 * w, 100_000, hbm)
    assert (fwd, bin_, bw, opt) == (1067, 1067, 1067, 1000)
    assert rep["iteration_cycles"] == fwd + bin_ + bw + opt
    assert rep["compute_cycles"] == rep["iteration_cycles"]
    assert rep["exposed_comm_cycles"] == 0 and rep["comm_cycles"] == 0
    assert rep["samples_per_second"] == pytest.approx(4 / (rep["iteration_cycles"] * 1e-9))


# ------------------------------------------------------------------ data parallel

def dp_model(n_layers=4, flops=1e8, params=1 << 20):
    return model([layer(f"l{i}", flops=flops, params=params, ins=256, outs=256)
                  for i in range(n_layers)])


def compute_closed_form(m, batch_per_npu, pk, hbm, opt_flops=4, opt_bytes=20):
    """Cycles of one NPU's ops (fp32, SGD), from the layer table alone."""
    total = 0
    for L in m.layers:
        io = 4 * batch_per_npu * (L.in_elems + L.out_elems)
        w = 4 * L.weight_elems
        total += roofline(batch_per_npu * L.fwd_flops, io + w, pk, hbm)
        total += roofline(batch_per_npu * L.bwd_input_flops, io + w, pk, hbm)
        total += roofline(batch_per_npu * L.bwd_weight_flops,
                          4 * batch_per_npu * (L.out_elems + L.stash_elems) + w, pk, hbm)
        if L.params:
            total += roofline(opt_flops * L.params, opt_bytes * L.params, 100_000 * pk / 75_000,
                              hbm)
    return total


def test_data_parallel_with_free_communication_is_the_compute():
    """Gradients of a few bytes: the all-reduce costs its latency terms only (a few hundred
    cycles against a compute of millions)."""
    m = dp_model(params=16)
    rep, *_ = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0), batch=64)
    compute = compute_closed_form(m, 8, 75_000, 1000)
    assert rep["compute_cycles"] == compute
    assert compute <= rep["iteration_cycles"] <= compute + 2000


@pytest.mark.parametrize("bucket_mb", [1.0, 25.0])
def test_data_parallel_with_free_compute_is_the_all_reduce_alpha_beta_time(bucket_mb):
    """Compute and memory (HBM, reductions) a million times faster than the links: the
    iteration is the ring all-reduce of every gradient, 2(p-1)/p N / B, within 3% (buckets
    of 1 MiB are issued at once and share the links)."""
    m = dp_model(flops=1.0, params=1 << 20)             # 4 MiB of fp32 gradients each
    system = ring8(tflops=1e6, hbm_gbps=1e9, reduce_gbps=1e9)
    rep, plan, *_ = run_model(m, system, batch=8, bucket_mb=bucket_mb)
    N = 4 * 4 * (1 << 20)
    alpha_beta = 2 * 7 / 8 * N / 32.0
    assert alpha_beta <= rep["iteration_cycles"] <= 1.03 * alpha_beta
    assert len([c for c in plan.collectives if c.what == "dp_all_reduce" and
                c.iteration == 1]) == (4 if bucket_mb == 1.0 else 1)


def test_steps_after_every_bucket_wait_for_the_last_all_reduce():
    """workload.step_after with overlap (buckets of 4 MiB, one per layer, four layers, eight
    replicas): 'all' starts no optimizer step before the last bucket's all-reduce has ended on
    its replica (a step clipping by the gradients' global norm needs every bucket), and the
    four steps, memory-bound (fp32 SGD with momentum: 20 bytes per parameter), share the HBM
    and end together at that all-reduce's end plus their bytes over the HBM, 4 x 20 x 2^20 /
    1000 cycles; 'bucket' steps the layer of the first bucket before the last all-reduce ends.
    Both all-reduce the same four buckets."""
    m = dp_model(n_layers=4, flops=2e8, params=1 << 20)
    system = ring8(tflops=100.0, hbm_gbps=1000.0)
    for mode in ("all", "bucket"):
        rep, plan, graph, res = run_model(m, system, batch=64, bucket_mb=4.0, step_after=mode)
        ars = [c for c in plan.collectives if c.what == "dp_all_reduce" and c.iteration == 1]
        assert len(ars) == 4
        for n in plan.npus:
            last = max(res.ops[c.done[n]]["finish"] for c in ars)
            steps = sorted((res.ops[op]["start"], res.ops[op]["finish"])
                           for (it, i, npu), op in plan.optimizer.items()
                           if it == 1 and npu == n)
            assert len(steps) == 4
            if mode == "all":
                assert steps[0][0] >= last, n
                assert max(f for _, f in steps) == pytest.approx(
                    last + 4 * 20 * (1 << 20) / 1000, abs=4)
            else:
                assert steps[0][0] < last, n


@pytest.mark.parametrize("step_after", ["bucket", "all"])
def test_steps_after_every_bucket_wait_for_the_experts_all_reduces_too(step_after):
    """gpt_moe over dp = 8 with ep = 4 (each expert layer's gradient all-reduced over the 2
    replicas holding the same experts, the rest over all 8): with step_after = 'all' no
    optimizer step on an NPU, expert or not, starts before the last all-reduce of either
    kind has ended there (the global norm takes every gradient); with 'bucket' some step
    starts before it."""
    from pysim import models
    m = models.get("gpt_moe", layers=2, hidden=64, heads=4, seq=16, vocab=256, experts=4,
                   top_k=2)
    _, plan, _, res = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0), batch=8,
                                bucket_mb=0.01, step_after=step_after, iterations=1,
                                parallel={"dp": 8, "ep": 4})
    kinds = {c.what for c in plan.collectives}
    assert {"dp_all_reduce", "expert_dp_all_reduce"} <= kinds
    early = 0
    for n in plan.npus:
        last = max(res.ops[c.done[n]]["finish"] for c in plan.collectives
                   if c.what in ("dp_all_reduce", "expert_dp_all_reduce") and n in c.group)
        first = min(res.ops[op]["start"] for (it, i, nn), op in plan.optimizer.items()
                    if nn == n)
        if step_after == "all":
            assert first >= last, n
        early += first < last
    assert (early > 0) == (step_after == "bucket")


def test_steps_after_every_bucket_wait_for_the_whole_backward_without_replicas():
    """dp = 1 (nothing to all-reduce) with step_after = 'all': no step starts before the
    NPU's last backward op has ended (the global norm takes every gradient); with
    'bucket' the first layers' steps run beside the rest of the backward pass."""
    m = model([layer(f"l{i}", flops=2e8, params=1 << 20, ins=1024, outs=1024)
               for i in range(4)])
    for mode in ("all", "bucket"):
        _, plan, _, res = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0),
                                    group=["n0"], batch=8, step_after=mode, iterations=1)
        last_bwd = max(res.ops[op]["finish"] for (it, i, nn, j), lo in plan.layer_ops.items()
                       for op in (lo.bwd_input, lo.bwd_weight) if op is not None)
        first = min(res.ops[op]["start"] for op in plan.optimizer.values())
        assert (first >= last_bwd) == (mode == "all"), mode


def test_steps_after_every_bucket_are_refused_under_zero():
    """workload.step_after = 'all' waits for every bucket's all-reduce; ZeRO reduce-scatters
    the buckets and steps each shard after its own, which the key would not change: refused,
    naming both keys, rather than ignored."""
    from pysim.errors import ConfigError
    m = dp_model(n_layers=2)
    with pytest.raises(ConfigError, match=r"step_after = 'all'.*parallel.zero = 1"):
        run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0), step_after="all",
                  parallel={"zero": 1})


def test_overlap_lies_between_the_max_and_the_sum_and_no_overlap_is_the_sum():
    """Compute and communication of similar size. Without overlap the iteration is the
    compute plus one all-reduce of every gradient, as long as that all-reduce takes alone;
    with overlap (buckets of 4 MiB, one per layer) at least the larger of compute and
    communication and at most their sum."""
    m = dp_model(n_layers=4, flops=2e8, params=1 << 20)
    system = ring8(tflops=100.0, hbm_gbps=1000.0)
    compute = compute_closed_form(m, 8, 75_000, 1000)
    rep_no, *_ = run_model(m, system, batch=64, overlap=False)
    rep_ov, plan, *_ = run_model(m, system, batch=64, bucket_mb=4.0)
    assert len([c for c in plan.collectives if c.what == "dp_all_reduce" and
                c.iteration == 1]) == 4

    def alone(nbytes):
        cfg = make_cfg(**system, workload={"kind": "collective", "bytes": nbytes,
                                           "engine": "npu"})
        return simulate(cfg).to_dict()["collective_cycles"]
    all_at_once = alone(16 << 20)
    per_bucket = alone(4 << 20)
    assert rep_no["compute_cycles"] == compute
    assert rep_no["iteration_cycles"] == pytest.approx(compute + all_at_once, rel=0.005)
    assert max(compute, all_at_once) <= rep_ov["iteration_cycles"] <= compute + 4 * per_bucket
    assert rep_ov["iteration_cycles"] < 0.9 * rep_no["iteration_cycles"]
    assert 0 < rep_ov["exposed_comm_cycles"] < rep_no["exposed_comm_cycles"]
    assert rep_no["exposed_comm_cycles"] == pytest.approx(all_at_once, rel=0.01)


# ------------------------------------------------------------------ pipelines

@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("m_", [4, 8])
def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1(schedule, m_):
    """Four uniform stages (one layer each, no weights: no optimizer or all-reduce), tiny
    activations between stages: the idle fraction of every stage is GPipe's bubble
    (p - 1)/(m + p - 1), within 2%, under GPipe and under 1F1B alike."""
    p = 4
    m = model([layer(f"l{i}", flops=1e8, ins=8, outs=8) for i in range(p)])
    rep, plan, *_ = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0), group=[
        f"n{i}" for i in range(p)], batch=m_ * 2,
        parallel={"pp": p, "micro_batches": m_, "schedule": schedule})
    assert plan.stages == [(i, i + 1) for i in range(p)]
    per_mb = 3 * math.ceil(2 * 1e8 / 75_000)          # forward + two backward ops
    busy = m_ * per_mb
    assert rep["compute_cycles"] == busy
    bubble = 1 - busy / rep["iteration_cycles"]
    assert bubble == pytest.approx((p - 1) / (m_ + p - 1), rel=0.02)


def test_1f1b_keeps_fewer_micro_batches_stashed_than_gpipe():
    """Memory: GPipe keeps every micro-batch's activations until its backward, 1F1B at most
    pp - stage of them (Narayanan et al., SC 2021)."""
    p, m_ = 4, 8
    m = model([layer(f"l{i}", flops=1e6, ins=1000, outs=1000, stash=10**6)
               for i in range(p)])
    need = {}
    for schedule in ("gpipe", "1f1b"):
        cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": m_, "group": [
            f"n{i}" for i in range(p)], "parallel": {"pp": p, "micro_batches": m_,
                                                   "schedule": schedule}})
        _, plan = training_graph(cfg, build_topology(cfg), m)
        need[schedule] = plan.memory
    stash = 4 * 10**6                                   # fp32, one sample per micro-batch
    for s in range(p):
        assert need["gpipe"][f"n{s}"] == m_ * stash
        assert need["1f1b"][f"n{s}"] == (p - s) * stash


# ------------------------------------------------------------------ tensor parallel

def test_tensor_parallel_all_reduces_are_megatrons():
    """Megatron-LM (Shoeybi et al. 2019): per transformer layer two all-reduces of the
    activations (b x s x h) in the forward pass -- after the attention's output projection
    and the MLP's second linear layer, both row-split -- and two of their gradients in the
    backward pass -- at the inputs of the column-split QKV projection and first MLP layer;
    the vocabulary-parallel embedding's output is all-reduced in the forward pass, the
    column-split output layer's input gradient in the backward pass, and the parallel
    cross entropy reduces three numbers per token. Each in every tensor-parallel group."""
    from pysim import models
    h, s, L, tp, dp = 64, 16, 2, 4, 2
    m = models.get("transformer", layers=L, hidden=h, heads=4, seq=s, vocab=1000)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 2 * dp, "iterations": 1,
                                        "parallel": {"tp": tp, "dp": dp}})
    _, plan = training_graph(cfg, build_topology(cfg), m)
    act = 2 * 2 * s * h                                 # mixed: 2-byte activations, mb 2
    names = [l.name for l in m.layers]
    per = {}
    for c in plan.collectives:
        if c.what != "tp_all_reduce":
            continue
        assert len(c.group) == tp
        assert all(plan.coords[n][0] == plan.coords[c.group[0]][0] for n in c.group)
        key = names[c.layers[0]]
        per.setdefault(key, []).append(c.bytes)
    want = {f"layer{i}.{x}": [act] * dp for i in range(L) for x in ("proj", "fc2", "qkv",
                                                                     "fc1")}
    want["embed.tokens"] = [act] * dp
    want["lm_head"] = [act] * dp
    want["loss"] = [2 * s * 4] * (3 * dp)
    assert per == want
    # the forward ones come after their layer's forward, the backward ones after the
    # input gradient
    layer_ops = plan.layer_ops
    for c in plan.collectives:
        i = c.layers[0]
        n = c.group[0]
        lo = layer_ops[(0, i, n, 0)]
        first_dep = min(d for k in range(c.first, c.last) for d in [k])
        assert first_dep > (lo.bwd_input if names[i].endswith(("qkv", "fc1", "lm_head"))
                            else lo.fwd)


# ------------------------------------------------------------------ the plan for others

def test_two_jobs_share_one_graph_on_their_own_npus():
    """training_graph appends to a graph, on chosen NPUs, with a name prefix: two 4-NPU jobs
    on one ring of 8 run together; the plan names each layer's stash producer and consumer;
    each job alone is no slower than the two together."""
    m = dp_model(n_layers=3, flops=1e7, params=1 << 18)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 16, "iterations": 1})
    topo = build_topology(cfg)
    g = OpGraph()
    g, p1 = training_graph(cfg, topo, m, npus=["n0", "n1", "n2", "n3"], graph=g,
                           prefix="job1 ")
    n1 = len(g)
    g, p2 = training_graph(cfg, topo, m, npus=["n4", "n5", "n6", "n7"], graph=g,
                           prefix="job2 ")
    assert p1.dp == p2.dp == 4
    assert all(g.names[i] is None or g.names[i].startswith("job1 ") for i in range(n1))
    assert any(g.names[i] and g.names[i].startswith("job2 ") for i in range(n1, len(g)))
    prod, cons, nbytes = p2.stash(0, 1, "n5", 0)
    assert g.node[prod] == g.node[cons] == "n5"
    assert "l1 fwd" in g.names[prod] and "l1 bwd_weight" in g.names[cons]
    assert nbytes == 4 * 4 * 256                       # 4 samples x 256 fp32 elements
    for (it, i, n, j), lo in p1.layer_ops.items():
        assert g.node[lo.fwd] == n and n in p1.npus
    assert all(set(c.group) <= set(p2.npus) for c in p2.collectives)
    res = run_graph(cfg, g)
    both = max(op["finish"] for op in res.ops)
    alone, _ = training_graph(cfg, topo, m, npus=["n0", "n1", "n2", "n3"])
    assert max(op["finish"] for op in run_graph(cfg, alone).ops) <= both


def test_dlrm_tables_are_split_and_exchanged_all_to_all():
    """DLRM-style: each embedding table lives on one NPU, which looks it up for every
    replica's samples; an all-to-all gives each NPU its samples' rows of every table
    (forward) and sends the gradients back (backward); the MLPs' gradients are
    all-reduced; the tables' are not."""
    from pysim import models
    m = models.get("dlrm", tables=(1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000), dim=16,
                   bottom=(32, 16), top=(32, 1))
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 64, "iterations": 1})
    _, plan = training_graph(cfg, build_topology(cfg), m)
    owners = plan.table_owner
    assert sorted(owners.values()) == sorted(plan.npus)           # one table per NPU here
    kinds = [c.what for c in plan.collectives]
    assert kinds.count("all_to_all_forward") == 1 and kinds.count("all_to_all_backward") == 1
    a2a = next(c for c in plan.collectives if c.what == "all_to_all_forward")
    assert a2a.bytes == 64 * 16 * 4                 # the global batch x dim x fp32, per NPU
    dp = [c for c in plan.collectives if c.what == "dp_all_reduce"]
    carried = {i for c in dp for i in c.layers}
    assert not carried & set(owners)
    assert {m.layers[i].name for i in carried} == {l.name for l in m.layers
                                                   if l.params and l.kind == "linear"}
    for i, n in owners.items():                     # only the owner looks its table up
        assert [k for k in plan.layer_ops if k[1] == i] == [(0, i, n, 0)]


# ------------------------------------------------------------------ the command line

def test_training_from_the_command_line(tmp_path):
    import json
    from click.testing import CliRunner
    from pysim.cli import main
    from conftest import TOPOLOGIES
    import os
    out = tmp_path / "it.json"
    trace = tmp_path / "it.trace.json"
    res = CliRunner().invoke(main, ["run", os.path.join(TOPOLOGIES, "ring8.toml"),
                                    "--set", "workload.kind=training",
                                    "--set", "workload.model=dlrm",
                                    "--set", "workload.model_params={tables = [1000, 2000], "
                                             "dim = 16, bottom = [32, 16], top = [32, 1]}",
                                    "--set", "workload.batch=64", "--json", str(out),
                                    "--trace", str(trace)])
    assert res.exit_code == 0, res.output
    assert "the default for training" in res.output
    d = json.loads(out.read_text())
    for key in ("iteration_cycles", "iteration_seconds", "samples_per_second",
                "compute_cycles", "comm_cycles", "exposed_comm_cycles", "per_layer",
                "per_npu", "config", "seed", "version"):
        assert key in d
    assert d["samples_per_second"] == pytest.approx(64 / d["iteration_seconds"])
    assert {r["name"] for r in d["per_layer"]} >= {"emb0", "interaction", "top.fc0"}
    assert set(d["per_npu"]) == {f"n{i}" for i in range(8)}
    assert d["config"]["workload"]["model"] == "dlrm"
    t = json.loads(trace.read_text())
    assert any("interaction fwd" in e.get("name", "") for e in t["traceEvents"])


# ------------------------------------------------------------------ refusals

@pytest.mark.parametrize("workload,fragment", [
    ({"model": "resnet5O"}, "did you mean 'resnet50'"),
    ({"model": "nosuch"}, "the zoo has:"),
    ({"model": "resnet50", "batch": 100}, "not divisible among the dp = 8"),
    ({"model": "resnet50", "batch": 64, "parallel": {"dp": 2, "tp": 2, "pp": 1}},
     "dp x tp x pp = 2 x 2 x 1 = 4, but 8 NPUs"),
    ({"model": "resnet50", "batch": 64, "parallel": {"tp": 3}}, "tp x pp = 3 x 1 does not"),
    ({"model": "resnet50", "batch": 64, "parallel": {"pp": 2, "micro_batches": 3}},
     "micro_batches = 3 does not divide"),
    ({"model": "resnet50", "batch": 64, "parallel": {"sched": "gpipe"}}, "did you mean"),
    ({"model": "resnet50", "batch": 64, "parallel": {"schedule": "pipedream"}},
     "expected one of 1f1b, gpipe"),
    ({"model": "resnet50"}, "needs workload.batch"),
    ({"batch": 8}, "needs workload.model"),
    ({"model": "gpt2", "batch": 64}, "does not fit in the HBM of n"),
])
def test_bad_training_input_is_refused(workload, fragment):
    with pytest.raises(ConfigError) as e:
        simulate(make_cfg(**ring8(), workload={"kind": "training", **workload}))
    assert fragment in str(e.value)


def test_a_model_too_big_for_hbm_names_the_npu_the_bytes_and_the_capacity():
    m = model([layer("big", flops=1.0, params=3 * 10**9)])
    cfg = make_cfg(**ring8(hbm_gb=32.0), workload={"kind": "training", "batch": 8})
    with pytest.raises(ConfigError) as e:
        training_graph(cfg, build_topology(cfg), m)
    msg = str(e.value)
    # fp32 weights, gradients, momentum: 12 bytes a weight
    assert "HBM of n0" in msg and f"{36 * 10**9:,} bytes" in msg and "32,000,000,000" in msg


def test_a_system_without_npus_is_refused():
    cfg = make_cfg(topology={"kind": "graph", "nodes": [{"name": "h0", "kind": "host"},
                                                         {"name": "h1", "kind": "host"}],
                             "links": [{"a": "h0", "b": "h1"}]},
                   workload={"kind": "training", "model": "resnet50", "batch": 8})
    with pytest.raises(ConfigError, match="has no NPU"):
        simulate(cfg)


def test_a_zoo_model_trains_data_parallel_with_each_layer_at_its_roofline():
    """ResNet-50 from the zoo, data parallel on 8 NPUs, one sample each: every layer's
    forward op takes its roofline time on the NPU (pysim.models.presets: peak x the kind's
    efficiency, HBM bandwidth), to the cycle (nothing else runs during the forward pass of
    the first iteration); the gradients, 25.6 M fp32 weights, are all-reduced in buckets of
    25 MiB."""
    from pysim import models
    from pysim.models.presets import npu_spec
    cfg = make_cfg(topology={"kind": "ring", "size": 8}, network=FAST,
                   workload={"kind": "training", "model": "resnet50", "batch": 8,
                             "iterations": 1, "chunks": 1})
    r = simulate(cfg)
    d = r.to_dict()
    m = models.get("resnet50")
    sp = npu_spec(cfg)
    assert [x["name"] for x in d["per_layer"]] == [l.name for l in m.layers]
    for x, L in zip(d["per_layer"], m.layers):
        want = sp.layer_seconds(L, "fp32", 1, "fwd") * 1e9
        assert abs(x["fwd_cycles"] - want) <= 1, (L.name, x["fwd_cycles"], want)
    plan = r.training["plan"]
    assert (plan["dp"], plan["tp"], plan["pp"]) == (8, 1, 1)
    grads = 4 * m.params
    assert d["iteration_cycles"] >= d["compute_cycles"] > 0
    assert sum(v["network_bytes"] for v in d["per_npu"].values()) == pytest.approx(
        8 * 2 * 7 / 8 * grads, rel=0.001)


def test_a_sweep_of_training_runs_draws_a_breakdown(tmp_path):
    """pysim sweep over the engine, then pysim plot --kind breakdown: stacked compute,
    exposed communication and other, which add up to the iteration."""
    import os
    from click.testing import CliRunner
    from pysim.cli import main
    from pysim import plot as P
    from pysim.sweep import Store
    from conftest import TOPOLOGIES
    cfg = tmp_path / "t.toml"
    cfg.write_text(f'''[topology]
file = "{os.path.join(TOPOLOGIES, "ring8.toml")}"
[workload]
kind = "training"
model = "dlrm"
model_params = {{tables = [1000, 2000], dim = 16, bottom = [32, 16], top = [32, 1]}}
batch = 64
iterations = 1
''')
    db = tmp_path / "s.sqlite"
    # (a --param of one value first, as docs/training.md's sweep has: a setting, not the
    # bars' key, which the default --x skips)
    r = CliRunner().invoke(main, ["sweep", str(cfg), "--param", "workload.kind=training",
                                  "--param", "workload.engine=npu,offload",
                                  "--db", str(db), "--jobs", "1", "-q"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "b.png"
    r = CliRunner().invoke(main, ["plot", str(db), "--kind", "breakdown", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    store = Store(str(db), readonly=True)
    rows = store.rows()
    store.close()
    table = P.breakdown(rows, str(tmp_path / "c.svg"), x="workload.engine")
    assert set(table) == {("npu", None), ("offload", None)}
    for row in rows:
        res = row["result"]
        parts = table[(row["params"]["workload.engine"], None)]
        assert sum(parts) == pytest.approx(res["iteration_seconds"] * 1e3)


@pytest.mark.parametrize("order,neighbours", [(["tp", "dp", "pp"], "tp"),
                                              (["dp", "tp", "pp"], "dp"),
                                              (["pp", "tp", "dp"], "pp")])
def test_hybrid_plans_lay_the_first_dimension_on_neighbouring_npus(order, neighbours):
    """dp x tp x pp = 2 x 2 x 2 on a ring of 8: the first dimension of `order` varies
    fastest over the NPUs (in rank order), so its groups are neighbours on the ring; every
    NPU has one coordinate; tensor-parallel collectives stay in their tensor-parallel group,
    gradients go to the same (tp, pp) place in every replica, activations to the next stage
    of the same (dp, tp)."""
    from pysim import models
    m = models.get("transformer", layers=2, hidden=64, heads=4, seq=16, vocab=1000)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 4, "iterations": 1,
                                        "parallel": {"dp": 2, "tp": 2, "pp": 2,
                                                     "micro_batches": 2, "order": order}})
    _, plan = training_graph(cfg, build_topology(cfg), m)
    assert sorted(plan.coords.values()) == [(d, t, s) for d in range(2) for t in range(2)
                                            for s in range(2)]
    dim = {"dp": 0, "tp": 1, "pp": 2}[neighbours]
    for r in range(0, 8, 2):               # ranks 2k and 2k+1 differ in that dimension only
        a, b = plan.coords[f"n{r}"], plan.coords[f"n{r + 1}"]
        assert [i for i in range(3) if a[i] != b[i]] == [dim]
    for c in plan.collectives:
        cs = [plan.coords[n] for n in c.group]
        if c.what == "tp_all_reduce":
            assert len({(x[0], x[2]) for x in cs}) == 1 and len({x[1] for x in cs}) == 2
        if c.what == "dp_all_reduce":
            assert len({(x[1], x[2]) for x in cs}) == 1 and len({x[0] for x in cs}) == 2
    for sd in plan.sends:
        a, b = plan.coords[sd["src"]], plan.coords[sd["dst"]]
        assert a[:2] == b[:2] and abs(a[2] - b[2]) == 1


def test_hooks_let_a_memory_plan_add_ops_around_each_stash():
    """A memory plan's hooks: after each forward op a write of its stash to HBM (an offload,
    here a memory op), before each backward a read back that the backward waits for; the
    backward ops start after the read-back, which follows the write."""
    m = dp_model(n_layers=3, flops=1e7, params=1024)

    class Offload:
        def __init__(self):
            self.out, self.back = {}, {}

        def forward(self, g, plan, it, i, npu, j, op):
            nbytes = plan.layer_ops[(it, i, npu, j)].stash_bytes
            self.out[(it, i, npu, j)] = g.memory(npu, nbytes, after=[op])

        def backward(self, g, plan, it, i, npu, j):
            op = g.memory(npu, plan.layer_ops[(it, i, npu, j)].stash_bytes,
                          after=[self.out[(it, i, npu, j)]])
            self.back[(it, i, npu, j)] = op
            return [op]

    hooks = Offload()
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 16, "iterations": 1})
    g, plan = training_graph(cfg, build_topology(cfg), m, hooks=hooks)
    res = run_graph(cfg, g)
    assert len(hooks.out) == len(hooks.back) == 3 * 8
    for key, lo in plan.layer_ops.items():
        back = res.ops[hooks.back[key]]
        first = lo.bwd_input if lo.bwd_input is not None else lo.bwd_weight
        assert res.ops[first]["start"] >= back["finish"] >= res.ops[hooks.out[key]]["finish"]
        assert back["size"] == lo.stash_bytes == 2 * 4 * 256


@pytest.mark.parametrize("sync", [False, True])
def test_p2p_sync_holds_a_stage_until_its_send_is_done(sync):
    """Two stages under GPipe, four micro-batches of 2 samples, 10^6 fp32 activations a
    sample between them (8 MB a send) on ring8's 32 GB/s links: with
    workload.parallel.p2p_sync (Megatron-LM's exchanges end in torch.cuda.synchronize())
    stage 0's next forward starts when its send of the previous one ends, and the send takes
    its bytes alone over the link (8e6 / 32 GB/s = 250 us, within 2%); without it, when the
    previous forward ends (2 x 10^9 FLOPs at 75 TFLOP/s, 27 us), the sends queueing beside
    it."""
    p, m_, acts = 2, 4, 10**6
    m = model([layer(f"l{i}", flops=1e9, ins=acts, outs=acts) for i in range(p)])
    par = {"pp": p, "micro_batches": m_, "schedule": "gpipe"}
    if sync:
        par["p2p_sync"] = True
    _, plan, graph, res = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0),
                                    group=["n0", "n1"], batch=2 * m_, parallel=par)
    sends = sorted((sd for sd in plan.sends if sd["src"] == "n0" and sd["iteration"] == 0),
                   key=lambda sd: sd["micro_batch"])
    assert [sd["bytes"] for sd in sends] == [2 * acts * 4] * m_
    fwd = {lo.fwd: j for (it, i, n, j), lo in plan.layer_ops.items() if n == "n0" and it == 0}
    start = {j: res.ops[op]["start"] for op, j in fwd.items()}
    finish = {j: res.ops[op]["finish"] for op, j in fwd.items()}
    for sd, nxt in zip(sends, sends[1:]):
        j, op = sd["micro_batch"], res.ops[sd["op"]]
        assert op["start"] == finish[j]
        if sync:                      # alone on the link, and the stage waits for it
            assert (op["finish"] - op["start"]) * 1e-9 == pytest.approx(8e6 / 32e9,
                                                                         rel=0.02)
            assert start[j + 1] == op["finish"]
        else:                         # the next forward (27 us) at once: sends overlap
            assert start[j + 1] == finish[j]
            assert res.ops[nxt["op"]]["start"] < op["finish"]


def test_p2p_sync_must_be_a_boolean():
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8) for i in range(2)])
    with pytest.raises(ConfigError, match=r"workload.parallel.p2p_sync = 'yes'.*true or false"):
        run_model(m, ring8(), group=["n0", "n1"], batch=4,
                  parallel={"pp": 2, "micro_batches": 2, "p2p_sync": "yes"})


@pytest.mark.parametrize("par, refused", [
    ({"pp": 1, "tp": 2, "p2p_sync": True}, "p2p_sync = true has no effect with pp = 1"),
    ({"pp": 1, "tp": 2, "scatter_gather": False},
     "scatter_gather = false has no effect with pp = 1"),
    ({"pp": 2, "tp": 1, "micro_batches": 2, "scatter_gather": False},
     "scatter_gather = false has no effect with tp = 1"),
    ({"pp": 2, "tp": 2, "micro_batches": 2, "sp": True, "scatter_gather": False},
     "scatter_gather = false has no effect with sp = true"),
    ({"tp": 1, "pp": 2, "micro_batches": 2, "tp_overlap": False},
     "tp_overlap = false has no effect with tp = 1"),
    ({"tp": 1, "sp": True}, "sp = true has no effect with tp = 1"),
    ({"pp": 1, "interleave": 2, "micro_batches": 2}, "interleave = 2: the interleaved schedule "
                                                     "needs pp > 1"),
    ({"dp": 1, "pp": 4, "micro_batches": 4, "zero": 1}, "zero = 1 has no effect with dp = 1"),
])
def test_a_plan_field_with_no_effect_under_the_plan_is_refused(par, refused):
    """A plan field set to what changes nothing under the plan would be read by nothing:
    refused, naming the field, its value and why (the plan alike, each field with effect,
    runs)."""
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8, tp=("column", "row")[i % 2])
               for i in range(4)])
    with pytest.raises(ConfigError, match=f"workload.parallel.{re.escape(refused)}"):
        run_model(m, ring8(), group=["n0", "n1", "n2", "n3"], batch=8, parallel=par)
    field = refused.split()[0]
    kept = {k: v for k, v in par.items() if k != field}
    run_model(m, ring8(), group=["n0", "n1", "n2", "n3"], batch=8, parallel=kept)


@pytest.mark.parametrize("tps, par, refused", [
    ((None, "replicated"), {"tp": 2}, r"tp = 2: hand has no layer that tensor parallelism "
                                      r"splits \(every layer's tp in pysim models hand is '-' "
                                      r"or replicated\), so each NPU of a tensor-parallel "
                                      r"group would run the whole model"),
    (("row", "row"), {"tp": 2, "tp_overlap": False},
     r"tp_overlap = false has no effect with hand: it has no column-split linear layer"),
    (("column", "column"), {"tp": 2, "sp": True},
     r"sp = true has no effect with hand: it has no row-split layer"),
    (("column", "row"), {"pp": 2, "schedule": "gpipe"},
     r"schedule = 'gpipe' has no effect with micro_batches = 1: a stage runs the one "
     r"micro-batch's forward then its backward under either schedule"),
])
def test_a_plan_field_with_no_effect_on_the_model_is_refused(tps, par, refused):
    """What only the model's layers (or the micro-batch count) leave idle: tensor
    parallelism of a model none of whose layers it splits (every NPU of a group running the
    whole model), tp_overlap without a column-split layer, sp without a row-split one, a
    schedule with one micro-batch. The model with the layers that read the field runs."""
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8, tp=tps[i % 2]) for i in range(4)])
    with pytest.raises(ConfigError, match=f"^workload.parallel.{refused}"):
        run_model(m, ring8(), group=["n0", "n1"], batch=8, parallel=par)
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8, tp=("column", "row")[i % 2])
               for i in range(4)])
    run_model(m, ring8(), group=["n0", "n1"], batch=8,
              parallel={**par, "micro_batches": 2} if "schedule" in par else par)


@pytest.mark.parametrize("step_after", ["bucket", "all"])
def test_without_overlap_every_chunks_all_reduce_waits_for_the_whole_backward_pass(
        step_after):
    """workload.overlap = false with model chunks (pp 2, interleave 2, dp 2; one layer of
    2^20 fp32 weights a chunk): Megatron-LM's local data parallelism all-reduces each
    chunk's gradients after the schedule returns, chunk 0 first, then steps
    (megatron/training.py, train_step). On every NPU no all-reduce's op starts before the
    NPU's last backward op ends, and chunk 1's starts when chunk 0's ends there (one
    communicator: stream order); with step_after = 'all' no optimizer step starts before
    chunk 1's all-reduce ends, with 'bucket' chunk 0's layer steps before it ends."""
    m = model([layer(f"l{i}", flops=2e8, params=1 << 20, ins=1024, outs=1024)
               for i in range(4)])
    _, plan, _, res = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0),
                                group=[f"n{i}" for i in range(4)], batch=16, overlap=False,
                                step_after=step_after, iterations=1,
                                parallel={"pp": 2, "dp": 2, "interleave": 2,
                                          "micro_batches": 4})
    ars = [c for c in plan.collectives if c.what == "dp_all_reduce"]
    assert sorted(c.layers[0] for c in ars) == [0, 1, 2, 3]
    for n in plan.npus:
        mine = sorted((c for c in ars if n in c.group), key=lambda c: c.first)
        assert [c.layers[0] // 2 for c in mine] == [0, 1]          # chunk 0, then chunk 1
        last_bwd = max(res.ops[op]["finish"] for (it, i, nn, j), lo in plan.layer_ops.items()
                       if nn == n for op in (lo.bwd_input, lo.bwd_weight) if op is not None)
        starts = [min(res.ops[o]["start"] for o in range(c.first, c.last + 1)
                      if res.ops[o]["node"] == n) for c in mine]
        assert starts[0] >= last_bwd, n
        assert starts[1] >= res.ops[mine[0].done[n]]["finish"], n
        ended = res.ops[mine[1].done[n]]["finish"]
        steps = {i: res.ops[op]["start"] for (it, i, nn), op in plan.optimizer.items()
                 if nn == n}
        assert sorted(steps) == sorted(c.layers[0] for c in mine)
        if step_after == "all":
            assert min(steps.values()) >= ended, n
        else:
            assert steps[mine[0].layers[0]] < ended, n


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("dp", [1, 2])
def test_steps_after_every_gradient_of_the_stage_span_its_model_chunks(overlap, dp):
    """step_after = 'all' with model chunks (pp 2, interleave 2; one layer of 2^20 fp32
    weights a chunk): a stage's gradients are those of both its chunks, so no optimizer step
    on an NPU starts before the NPU's last backward op has ended (dp 1: nothing to
    all-reduce) nor before the last data-parallel all-reduce there has ended (dp 2), with or
    without overlap (the global norm takes every gradient of the stage)."""
    m = model([layer(f"l{i}", flops=2e8, params=1 << 20, ins=1024, outs=1024)
               for i in range(4)])
    _, plan, _, res = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0),
                                group=[f"n{i}" for i in range(2 * dp)], batch=16,
                                overlap=overlap, step_after="all", iterations=1,
                                parallel={"pp": 2, "dp": dp, "interleave": 2,
                                          "micro_batches": 4})
    for n in plan.npus:
        last = max(res.ops[op]["finish"] for (it, i, nn, j), lo in plan.layer_ops.items()
                   if nn == n for op in (lo.bwd_input, lo.bwd_weight) if op is not None)
        last = max([last] + [res.ops[c.done[n]]["finish"] for c in plan.collectives
                             if c.what == "dp_all_reduce" and n in c.group])
        steps = [res.ops[op]["start"] for (it, i, nn), op in plan.optimizer.items()
                 if nn == n]
        assert len(steps) == 2, n
        assert min(steps) >= last, n
