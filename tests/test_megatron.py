"""Megatron-LM's training plans against their closed forms: the interleaved schedule's bubble
(p - 1)/(m v) (Narayanan et al., SC 2021); the activation memory of a transformer layer with
tensor and sequence parallelism and selective or full recomputation (Korthikanti et al.,
MLSys 2023, Table 2); ZeRO's per-replica training state (Rajbhandari et al., SC 2020,
Figure 1); the collectives sequence parallelism, ZeRO, tied embeddings and the pipeline's
scatter-gather put in the graph; refusals of tensor parallelism that does not divide."""
import math

import pytest

from conftest import make_cfg
from pysim import models
from pysim.config import ConfigError
from pysim.topology import build as build_topology
from pysim.workload.training import run_training, training_graph
from pysim.workload.training.pipeline import bubble_fraction
from test_training import layer, model, ring8, run_model


def plan_of(m, workload, system=None):
    cfg = make_cfg(**(system or ring8()), workload={"kind": "training", "iterations": 1,
                                                    **workload})
    return training_graph(cfg, build_topology(cfg), m)[1]


# ------------------------------------------------------------------ interleaved 1F1B

@pytest.mark.parametrize("v", [1, 2, 4])
@pytest.mark.parametrize("m_", [4, 8])
def test_interleaved_bubble_is_p_minus_1_over_m_v(v, m_):
    """Four stages of v uniform chunks each, communication nearly free: the iteration is
    the ideal m x (a micro-batch's passes) plus the bubble (p - 1)/(m v) of it, within 2%
    (the residual is the sends between stages)."""
    p = 4
    m = model([layer(f"l{i}", flops=1e8, ins=8, outs=8) for i in range(p * v)])
    rep, plan, *_ = run_model(m, ring8(tflops=100.0, hbm_gbps=1000.0),
                              group=[f"n{i}" for i in range(p)], batch=m_ * 2,
                              parallel={"pp": p, "micro_batches": m_, "interleave": v})
    assert len(plan.stages) == p * v
    busy = m_ * v * 3 * math.ceil(2 * 1e8 / 75_000)
    assert rep["compute_cycles"] == busy
    assert rep["iteration_cycles"] / busy - 1 == pytest.approx(bubble_fraction(p, m_, v),
                                                               rel=0.02)


def test_interleave_needs_micro_batches_a_multiple_of_pp():
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8) for i in range(8)])
    with pytest.raises(ConfigError, match="interleave = 2.*multiple of pp"):
        plan_of(m, {"batch": 6, "group": ["n0", "n1", "n2", "n3"],
                    "parallel": {"pp": 4, "micro_batches": 6, "interleave": 2}})


# ------------------------------------------------------------------ activation memory

def block_stash(tp, sp=False, recompute=None, s=64, h=128, a=8, b=2):
    """Bytes one transformer layer keeps for its backward pass on one NPU, for b samples."""
    m = models.get("transformer", layers=2, hidden=h, heads=a, seq=s, vocab=1024)
    w = {"batch": b, "group": [f"n{i}" for i in range(tp)],
         "parallel": {"tp": tp, "sp": sp}}
    if recompute:
        w["memory"] = {"policy": "recompute", "recompute": recompute}
    plan = plan_of(m, w)
    lay = plan.layout
    (a0, b0), _ = lay.blocks
    return sum(lay.costs(i, b)[3] for i in range(a0, b0))


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_activation_memory_per_layer_is_korthikantis(tp):
    """Korthikanti et al., Table 2, per transformer layer (16-bit activations, 1-byte
    dropout masks): no parallelism s b h (34 + 5 a s / h); tensor parallel
    s b h (10 + 24/t + 5 a s / (h t)); with sequence parallelism s b h / t (34 + 5 a s / h);
    with selective recomputation too, 34 s b h / t; full recomputation 2 s b h."""
    s, h, a, b = 64, 128, 8, 2
    sbh = s * b * h
    assert block_stash(tp) == pytest.approx(sbh * (10 + 24 / tp + 5 * a * s / (h * tp)))
    if tp == 1:
        assert block_stash(1) == sbh * (34 + 5 * a * s / h)
        return
    assert block_stash(tp, sp=True) == pytest.approx(sbh / tp * (34 + 5 * a * s / h))
    assert block_stash(tp, sp=True, recompute="selective") == pytest.approx(34 * sbh / tp)
    assert block_stash(tp, recompute="full") == 2 * sbh


def _peak(memory=None, group=("n0",), parallel=None):
    w = {"kind": "training", "model": "transformer",
         "model_params": {"layers": 4, "hidden": 256, "heads": 4, "seq": 128, "vocab": 1024},
         "batch": 2 * len(group), "group": list(group), "iterations": 1,
         "precision": "mixed", "optimizer": "adam", "memory": memory or {},
         "parallel": parallel or {}}
    res = run_training(make_cfg(**ring8(tflops=10.0, hbm_gbps=1000.0), workload=w))
    return res.memory["devices"][group[0]]["peak_bytes"]


def test_a_runs_memory_peak_keeps_what_recomputation_keeps():
    """The memory a run holds (the HBM peak at the end of the forward pass, one NPU, 4
    layers) falls by Korthikanti et al.'s difference per layer: s b h (32 + 5 a s / h) under
    full recomputation (34 + 5 a s / h kept down to 2), 5 a s / h s b h under selective;
    ZeRO-1 over two replicas keeps half the fp32 master weights and Adam's state (12 bytes
    per parameter)."""
    s, h, a, b, L = 128, 256, 4, 2, 4
    sbh = s * b * h
    none = _peak()
    full = _peak({"policy": "recompute", "recompute": "full"})
    sel = _peak({"policy": "recompute", "recompute": "selective"})
    assert none - full == L * sbh * (32 + 5 * a * s // h)
    assert none - sel == L * sbh * (5 * a * s // h)
    m = models.get("transformer", layers=L, hidden=h, heads=a, seq=s, vocab=1024)
    params = sum(l.params for l in m.layers)
    z0 = _peak(group=("n0", "n1"), parallel={"dp": 2})
    z1 = _peak(group=("n0", "n1"), parallel={"dp": 2, "zero": 1})
    assert z0 - z1 == pytest.approx(params * 12 / 2, abs=8)


# ------------------------------------------------------------------ ZeRO

@pytest.mark.parametrize("zero,want", [(0, lambda P, N: 16 * P),
                                       (1, lambda P, N: 4 * P + 12 * P / N),
                                       (2, lambda P, N: 2 * P + 14 * P / N),
                                       (3, lambda P, N: 16 * P / N)])
def test_zero_state_per_replica_is_the_papers(zero, want):
    """Rajbhandari et al., Figure 1 (mixed precision, Adam: K = 12): Ψ parameters over N_d
    replicas keep 2Ψ + 2Ψ + KΨ (baseline), 2Ψ + 2Ψ + KΨ/N_d (P_os), 2Ψ + (2 + K)Ψ/N_d
    (P_os+g), (2 + 2 + K)Ψ/N_d (P_os+g+p) bytes each."""
    P, N = 1 << 20, 8
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8, stash=0, params=P // 4)
               for i in range(4)])
    plan = plan_of(m, {"batch": N, "precision": "mixed", "optimizer": "adam",
                       "parallel": {"dp": N, "zero": zero}})
    for npu in plan.npus:
        assert plan.memory[npu] == pytest.approx(want(P, N), abs=1)


def test_zero_reduce_scatters_steps_shards_and_gathers():
    """ZeRO-1/2: each bucket reduce-scattered, a 1/dp step, the weights all-gathered;
    ZeRO-3: no all-gather after the step, but each layer's weights gathered before its
    forward and its backward pass (one of each per micro-batch)."""
    P, N, L = 1 << 16, 8, 4
    m = model([layer(f"l{i}", flops=1e6, ins=8, outs=8, params=P) for i in range(L)])
    base = {"batch": 2 * N, "precision": "mixed", "optimizer": "adam", "bucket_mb": 1000.0}
    whats = {}
    for zero in (0, 1, 3):
        plan = plan_of(m, {**base, "parallel": {"dp": N, "zero": zero,
                                                "micro_batches": 2}})
        whats[zero] = [c.what for c in plan.collectives]
        steps = {plan.graph_flops[op] if hasattr(plan, "graph_flops") else op
                 for op in plan.optimizer.values()}
        assert len(steps) == L * N
    assert whats[0] == ["dp_all_reduce"]
    assert whats[1] == ["zero_reduce_scatter", "zero_all_gather"]
    assert whats[3].count("zero_reduce_scatter") == 1
    assert whats[3].count("zero3_all_gather") == L * 2 * 2      # layers x passes x mbs


def test_zero_steps_a_shard():
    """The optimizer step of a ZeRO replica reads and writes 1/dp of the state."""
    P, N = 1 << 16, 8
    m = model([layer("l0", flops=1e6, ins=8, outs=8, params=P)])
    for zero in (0, 1):
        plan = plan_of(m, {"batch": N, "optimizer": "adam",
                           "parallel": {"dp": N, "zero": zero}})
        flops, nbytes = plan.layout.optimizer_work(0, plan.npus[0])
        assert flops == pytest.approx(12 * P / (N if zero else 1))


# ------------------------------------------------------------------ sequence parallelism

def test_sequence_parallelism_turns_all_reduces_into_reduce_scatter_and_all_gather():
    """Korthikanti et al., section 4.2.2: per transformer layer and tensor-parallel group,
    the forward pass's two all-reduces become reduce-scatters (after the row-split
    projection and second MLP layer) and all-gathers (before the column-split QKV and first
    MLP layer), the backward pass's likewise, each of the bytes of the all-reduce it
    replaces; the replicated layers (norms, dropouts, additions) run on 1/tp of the
    sequence."""
    h, s, L, tp = 64, 16, 2, 4
    m = models.get("transformer", layers=L, hidden=h, heads=4, seq=s, vocab=1024)
    w = {"batch": 2, "group": [f"n{i}" for i in range(tp)], "parallel": {"tp": tp}}
    plain = plan_of(m, w)
    w["parallel"] = {"tp": tp, "sp": True}
    sp = plan_of(m, w)
    act = 2 * 2 * s * h
    names = [l.name for l in m.layers]

    def per_layer(plan):
        out = {}
        for c in plan.collectives:
            out.setdefault(names[c.layers[0]], []).append((c.collective, c.bytes))
        return out

    got = per_layer(sp)
    for i in range(L):
        for x in ("proj", "fc2"):
            assert sorted(got[f"layer{i}.{x}"]) == [("all_gather", act),
                                                    ("reduce_scatter", act)]
        for x in ("qkv", "fc1"):
            assert sorted(got[f"layer{i}.{x}"]) == [("all_gather", act),
                                                    ("reduce_scatter", act)]
        assert per_layer(plain)[f"layer{i}.proj"] == [("all_reduce", act)]
    lay, lay0 = sp.layout, plain.layout
    ln = names.index("layer0.ln1")
    assert lay.costs(ln, 2)[0][0] == pytest.approx(lay0.costs(ln, 2)[0][0] / tp)
    qkv = names.index("layer0.qkv")
    assert lay.costs(qkv, 2)[0][0] == lay0.costs(qkv, 2)[0][0]


# ------------------------------------------------------------------ recomputation

def test_full_recomputation_runs_each_transformer_layers_forward_again():
    """One NPU, free communication: full recomputation adds exactly the forward ops of the
    transformer layers (not of the embeddings, final norm or head) to the compute; selective
    adds the attention cores' forward ops."""
    m = models.get("transformer", layers=2, hidden=64, heads=4, seq=32, vocab=1024)
    sysm = ring8(tflops=100.0, hbm_gbps=1000.0)
    base, *_ = run_model(m, sysm, group=["n0"], batch=2, iterations=1)
    fwd_block = sum(r["fwd_cycles"] for r in base["per_layer"]
                    if r["name"].startswith("layer"))
    attn = sum(r["fwd_cycles"] for r in base["per_layer"] if r["kind"] == "attention")
    for mode, extra in (("full", fwd_block), ("selective", attn)):
        rep, *_ = run_model(m, sysm, group=["n0"], batch=2, iterations=1,
                            memory={"policy": "recompute", "recompute": mode})
        assert rep["compute_cycles"] - base["compute_cycles"] == extra


@pytest.mark.parametrize("name", ["resnet50", "alexnet"])
@pytest.mark.parametrize("mode", ["full", "selective"])
def test_megatron_recomputation_of_a_model_without_transformer_layers_is_refused(name, mode):
    """Megatron-LM's recomputation re-runs transformer layers (their attention cores): a
    model without any would recompute nothing (alexnet) or its `layer<k>` stages that are no
    transformer layers (resnet50's, named as torchvision names them); refused naming the key,
    the value, the model and the way that works for it."""
    with pytest.raises(ConfigError, match=rf"^workload\.memory\.recompute = '{mode}': {name} "
                                          r"has no transformer layer \(a run of layers named "
                                          r"layer<k>\.\* with an attention core\).*use "
                                          r"workload\.memory\.recompute = 'segments'"):
        plan_of(models.get(name), {"batch": 2, "group": ["n0"], "memory": {
            "policy": "recompute", "recompute": mode}})


# ------------------------------------------------------------------ pipeline details

def test_tied_embeddings_and_scatter_gather_across_stages():
    """pp = 2, tp = 2: the LM head tied to the token embedding on the other stage has its
    gradient all-reduced between the two stages (V h / tp 16-bit values per pair); the
    activations between stages go as 1/tp from each NPU and are all-gathered after."""
    h, s, V, tp = 64, 16, 1024, 2
    m = models.get("transformer", layers=2, hidden=h, heads=4, seq=s, vocab=V)
    plan = plan_of(m, {"batch": 2, "group": ["n0", "n1", "n2", "n3"],
                       "parallel": {"tp": tp, "pp": 2, "micro_batches": 2}})
    tied = [c for c in plan.collectives if c.what == "tied_all_reduce"]
    assert len(tied) == tp
    assert all(c.bytes == V * h * 2 // tp for c in tied)
    assert all(plan.coords[c.group[0]][2] != plan.coords[c.group[1]][2] for c in tied)
    act = 1 * s * h * 2
    assert {sd["bytes"] for sd in plan.sends} == {act // tp}
    assert sum(c.what == "pp_all_gather" for c in plan.collectives) == 2 * 2  # mb x dir
    off = plan_of(m, {"batch": 2, "group": ["n0", "n1", "n2", "n3"],
                      "parallel": {"tp": tp, "pp": 2, "micro_batches": 2,
                                   "scatter_gather": False}})
    assert {sd["bytes"] for sd in off.sends} == {act}


def test_the_input_gradients_collective_beside_or_after_the_weight_gradient():
    """tp_overlap (default): a column-split layer's input-gradient all-reduce starts when its
    input gradient is done and runs beside its weight-gradient product; false (Megatron-LM
    as Narayanan et al. ran it): it starts when the weight gradient is done, so the
    iteration is longer by at most those all-reduces' time and no shorter."""
    m = models.get("transformer", layers=2, hidden=256, heads=4, seq=64, vocab=1024)
    runs = {}
    for overlap in (True, False):
        runs[overlap] = run_model(m, ring8(tflops=10.0, hbm_gbps=1000.0), batch=2,
                                  group=["n0", "n1", "n2", "n3"], iterations=1,
                                  parallel={"tp": 4, "tp_overlap": overlap})
    for overlap, (rep, plan, graph, res) in runs.items():
        bwd = [c for c in plan.collectives if c.what == "tp_all_reduce" and
               plan.model.layers[c.layers[0]].kind == "linear" and
               plan.model.layers[c.layers[0]].tp == "column"]
        assert len(bwd) == 2 * 2 + 1         # qkv and fc1 of each layer, the LM head
        for c in bwd:
            for n in c.group:
                lo = plan.layer_ops[(0, c.layers[0], n, c.micro_batch)]
                first = min(res.ops[k]["start"] for k in range(c.first, c.last)
                            if graph.node[k] == n)
                assert first >= res.ops[lo.bwd_input]["finish"]
                if overlap:
                    assert first < res.ops[lo.bwd_weight]["finish"]
                else:
                    assert first >= res.ops[lo.bwd_weight]["finish"]
    on, off = runs[True][0]["iteration_cycles"], runs[False][0]["iteration_cycles"]
    assert on < off
    # the report's communication by kind: every all-reduce exposed without the overlap
    # (one NPU's collectives are in stream order and each waits for compute or the reverse),
    # some of them hidden with it; nothing else is communicated
    for overlap, (rep, *_rest) in runs.items():
        kinds = rep["comm_by_kind"]
        assert set(kinds) == {"tp_all_reduce"}
        tp = kinds["tp_all_reduce"]
        assert tp["count"] == 2 * (2 + 2) + 1 + 1 + 3    # layers x 4, LM head, embedding, loss
        assert tp["exposed_comm_cycles"] == rep["exposed_comm_cycles"]
        if overlap:
            assert tp["exposed_comm_cycles"] < tp["comm_cycles"]
        else:
            assert tp["exposed_comm_cycles"] == tp["comm_cycles"]


@pytest.mark.parametrize("v", [1, 2])
def test_scatter_gather_waits_only_for_its_pieces(v):
    """The scatter-gather's all-gather runs when the receiving stage reaches that pass (its
    program order), not when the sender sends: with communication nearly free, sending
    1/tp and all-gathering it takes the iteration sending the whole tensor takes (within
    1%), and the time the critical stage waits on the other is at most the pipeline's
    bubble (p - 1)/(m v) of the rest."""
    m = models.get("transformer", layers=4, hidden=256, heads=4, seq=64, vocab=1024)
    times, idle = {}, {}
    for sg in (True, False):
        rep, plan, *_ = run_model(m, ring8(link_gbps=1e4, tflops=10.0, hbm_gbps=1000.0),
                                  batch=8, group=["n0", "n1", "n2", "n3"], iterations=1,
                                  parallel={"tp": 2, "pp": 2, "micro_batches": 8,
                                            "interleave": v, "scatter_gather": sg})
        times[sg] = rep["iteration_cycles"]
        idle[sg] = rep["other_cycles"] + rep["comm_by_kind"]["pp_send"]["exposed_comm_cycles"]
    assert times[True] == pytest.approx(times[False], rel=0.01)
    # what the critical stage waits for the other: the bubble (p - 1)/(m v) of its passes
    assert idle[True] <= (times[True] - idle[True]) * bubble_fraction(2, 8, v) * 1.05


def test_one_replica_stands_for_all():
    """replicas = 'one' builds replica 0's passes only; on a ring, where replicas share no
    link during their passes, its iteration equals that of every replica built."""
    m = model([layer(f"l{i}", flops=1e8, ins=1 << 12, outs=1 << 12, params=1 << 16)
               for i in range(4)])
    times = {}
    for rep_ in ("all", "one"):
        rep, plan, graph, _ = run_model(m, ring8(), batch=16,
                                        parallel={"dp": 8, "replicas": rep_})
        times[rep_] = (rep["iteration_cycles"], len(graph))
    assert times["one"][0] == times["all"][0]
    assert times["one"][1] < times["all"][1]


# ------------------------------------------------------------------ refusals

def test_tensor_parallelism_must_divide_heads_and_pads_the_vocabulary():
    m = models.get("transformer", layers=1, hidden=96, heads=3, seq=8, vocab=1024)
    with pytest.raises(ConfigError, match="tp = 2 does not divide the 3 attention heads"):
        plan_of(m, {"batch": 1, "group": ["n0", "n1"], "parallel": {"tp": 2}})
    m = models.get("transformer", layers=1, hidden=64, heads=4, seq=8, vocab=1001)
    plan = plan_of(m, {"batch": 1, "group": ["n0", "n1"], "parallel": {"tp": 2}})
    names = [l.name for l in m.layers]
    assert plan.layout.pad[names.index("lm_head")] == 1024 / 1001     # 128 x tp = 256


def test_the_heads_are_the_attention_layers_own_whatever_the_models_parameters():
    """GPT-2 XL (25 heads, hidden 1600) names its size, not its heads: tensor parallelism
    of 5 divides its heads and 2 does not (though 2 divides every linear layer's features);
    and its attention cores take the kernel model's time as the same transformer built by
    its parameters does (they took the HBM roofline's when the heads were not known)."""
    xl = models.get("gpt2")
    with pytest.raises(ConfigError, match=r"^workload\.parallel\.tp = 2 does not divide the "
                                          r"25 attention heads of gpt2"):
        plan_of(xl, {"batch": 2, "group": ["n0", "n1"], "parallel": {"tp": 2}})
    small = models.get("gpt2", size="small")               # 12 layers, hidden 768, 12 heads
    same = models.get("transformer", layers=12, hidden=768, heads=12, seq=1024, vocab=50257)
    sysm = ring8(preset="a100")
    attn = {}
    for m in (small, same):
        rep, *_ = run_model(m, sysm, group=["n0"], batch=1, iterations=1, compute="kernels")
        attn[m.name] = [r["fwd_cycles"] for r in rep["per_layer"] if r["kind"] == "attention"]
    assert attn["gpt2"] == attn["transformer"] and len(attn["gpt2"]) == 12


@pytest.mark.parametrize("field,value,fragment", [
    ("zero", 4, "ZeRO stage"), ("sp", 1, "true or false"), ("interleave", 0, ">= 1"),
    ("replicas", "some", "all, one"), ("tp_overlap", "yes", "true or false")])
def test_bad_megatron_fields_are_refused(field, value, fragment):
    m = model([layer("l0", flops=1e6, ins=8, outs=8)])
    with pytest.raises(ConfigError, match=fragment):
        plan_of(m, {"batch": 8, "parallel": {field: value}})


# ------------------------------------------------------------------ expert parallelism

def test_expert_parallelism_dispatches_and_combines_all_to_all():
    """gpt_moe over dp = 8 with ep = 4: per transformer layer and expert-parallel group of 4
    replicas, an all-to-all of each NPU's b s top_k h activations before the experts
    (dispatch) and after them (combine), and the two again in backward; each NPU holds
    experts / ep of the experts' weights, whose gradients are all-reduced over the dp / ep
    replicas holding the same experts; the rest of the model over all 8."""
    L, h, s, E, k, ep, dp = 2, 64, 16, 4, 2, 4, 8
    m = models.get("gpt_moe", layers=L, hidden=h, heads=4, seq=s, vocab=256, experts=E,
                   top_k=k)
    plan = plan_of(m, {"batch": dp, "parallel": {"dp": dp, "ep": ep}})
    act = s * k * h * 2
    for what in ("ep_dispatch", "ep_combine", "ep_dispatch_grad", "ep_combine_grad"):
        cs = [c for c in plan.collectives if c.what == what]
        assert len(cs) == L * dp // ep
        assert all(c.bytes == act and len(c.group) == ep for c in cs)
    names = [l.name for l in m.layers]
    fc1 = m.layers[names.index("layer0.experts.fc1")]
    assert plan.layout.grad_bytes(names.index("layer0.experts.fc1")) == fc1.params * 2 // ep
    xr = [c for c in plan.collectives if c.what == "expert_dp_all_reduce"]
    assert len(xr) == L * 2 * ep and all(len(c.group) == dp // ep for c in xr)
    assert [len(c.group) for c in plan.collectives if c.what == "dp_all_reduce"] == [dp]


def test_all_to_all_peers_is_read_by_a_plan_with_all_to_alls_alone():
    """workload.all_to_all_peers sets the peers in flight of an all-to-all: taken by a plan
    with expert parallelism, refused (naming the key, the value and why) by one without."""
    m = models.get("gpt_moe", layers=1, hidden=64, heads=4, seq=16, vocab=256, experts=4,
                   top_k=2)
    plan = plan_of(m, {"batch": 8, "all_to_all_peers": 2, "parallel": {"dp": 8, "ep": 4}})
    assert any(c.collective == "all_to_all" for c in plan.collectives)
    with pytest.raises(ConfigError, match=r"workload.all_to_all_peers = 2 has no effect: this "
                                          r"plan of gpt_moe runs no all-to-all"):
        plan_of(m, {"batch": 8, "all_to_all_peers": 2, "parallel": {"dp": 8}})


def test_expert_parallelism_is_refused_where_it_cannot_be():
    m = models.get("gpt_moe", layers=1, hidden=64, heads=4, seq=16, vocab=256, experts=4)
    with pytest.raises(ConfigError, match="ep = 3 does not divide dp = 8"):
        plan_of(m, {"batch": 8, "parallel": {"dp": 8, "ep": 3}})
    with pytest.raises(ConfigError, match="ep = 8 does not divide the 4 experts"):
        plan_of(m, {"batch": 8, "parallel": {"dp": 8, "ep": 8}})
    dense = model([layer("l0", flops=1e6, ins=8, outs=8)])
    with pytest.raises(ConfigError, match="has no experts"):
        plan_of(dense, {"batch": 8, "parallel": {"dp": 8, "ep": 2}})


# ------------------------------------------------------------------ together

@pytest.mark.parametrize("par,memory", [
    ({"tp": 2, "pp": 2, "sp": True, "interleave": 2, "micro_batches": 2}, "full"),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 3, "micro_batches": 2}, "selective"),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 1, "sp": True, "replicas": "one",
      "micro_batches": 2}, "full"),
    ({"tp": 4, "pp": 2, "interleave": 2, "micro_batches": 4, "scatter_gather": False}, None),
])
def test_megatron_plans_combine_and_run(par, memory):
    """The pieces together on 8 NPUs at the flow level: the iteration ends, the busiest
    NPU's compute fits in it, and running twice gives the same cycles."""
    m = models.get("transformer", layers=4, hidden=64, heads=4, seq=16, vocab=1024)
    w = {"batch": 8 if par.get("dp", 1) == 2 else 4, "parallel": par, "optimizer": "adam"}
    if memory:
        w["memory"] = {"policy": "recompute", "recompute": memory}
    sysm = ring8()
    sysm["network"] = {**sysm["network"], "model": "flow"}
    a, plan, *_ = run_model(m, sysm, **w)
    b, *_ = run_model(m, sysm, **w)
    assert 0 < a["compute_cycles"] <= a["iteration_cycles"]
    assert a["iteration_cycles"] == b["iteration_cycles"]
