"""Pipeline passes repeated as array work (pysim.workload.training.repeat) against the
reference: every pass built op by op (repeat.ENABLED = False, the builder's own path), and a
memory plan's holds repeated as columns (pysim.workload.memory.apply) against every
micro-batch's added one by one (apply.REPEAT = False). The
two graphs must be equal op for op -- kinds, nodes, sizes, dependencies, names, roofline
work, step latencies, the ops that may stream, holds -- with the same plan records, for every
plan, collective algorithm, endpoint engine and memory policy; and passes must actually have
been repeated (else the comparison would hold by construction)."""
import importlib

import numpy as np
import pytest

from conftest import make_cfg
from pysim import load, models
from pysim.topology import build
from pysim.workload import graph as graph_module
from pysim.workload import plan as plan_module
from pysim.workload.graph import GraphError
from pysim.workload.memory.training import apply_training
from pysim.workload.training import repeat, training_graph
from pysim.workload.training import _memory_config
from test_training import ring8

apply = importlib.import_module("pysim.workload.memory.apply")   # (the module, not its function)
TINY = dict(layers=4, hidden=64, heads=4, seq=16, vocab=256)


def built(cfg, model, on, monkeypatch, memory=True):
    monkeypatch.setattr(repeat, "ENABLED", on)
    monkeypatch.setattr(apply, "REPEAT", on)
    bulk = []
    orig_repeat = apply._Recorder.repeat

    def counted(self, *a):
        bulk.append(orig_repeat(self, *a))
        return bulk[-1]
    monkeypatch.setattr(apply._Recorder, "repeat", counted)
    topo = build(cfg)
    seen = {}
    orig = repeat.Repeat.__init__

    def keep(self, b):
        orig(self, b)
        seen["r"] = self
    monkeypatch.setattr(repeat.Repeat, "__init__", keep)
    g, plan = training_graph(cfg, topo, model)
    monkeypatch.setattr(repeat.Repeat, "__init__", orig)
    if memory:
        apply_training(_memory_config(cfg, plan), topo, g, plan)
    return g, plan, seen["r"].repeated + sum(bulk)


def same_graph(a, b):
    assert len(a) == len(b)
    x, y = a.arrays(), b.arrays()
    for k in x:
        assert np.array_equal(x[k], y[k]), k
    assert a.node_names == b.node_names
    assert list(a.names) == list(b.names)
    for u, v in zip(a.roofline(), b.roofline()):
        assert np.array_equal(u, v, equal_nan=True)
    assert a.latencies == b.latencies
    assert np.array_equal(a.stream_mask(), b.stream_mask())
    ha, hb = a.hold_arrays(), b.hold_arrays()
    for k in ha:
        if k == "what":
            assert ha[k] == hb[k]
        else:
            assert np.array_equal(ha[k], hb[k]), k


def same_plan(p, q):
    assert p.iterations == q.iterations
    assert p.layer_ops == q.layer_ops
    assert p.optimizer == q.optimizer
    assert p.collectives == q.collectives
    assert p.sends == q.sends
    assert p.recomputed == q.recomputed


def check(cfg, model, monkeypatch, least=1, memory=True):
    ref, rp, none = built(cfg, model, False, monkeypatch, memory)
    assert none == 0
    got, gp, repeated = built(cfg, model, True, monkeypatch, memory)
    assert repeated >= least
    same_graph(got, ref)
    same_plan(gp, rp)
    return repeated


def training(par, npu=None, **extra):
    w = {"kind": "training", "iterations": 1, "batch": 96, "optimizer": "adam",
         "parallel": par}
    return make_cfg(**ring8(**(npu or {})), workload={**w, **extra})


@pytest.mark.parametrize("par,extra", [
    ({"pp": 2, "dp": 4, "micro_batches": 4}, {}),
    ({"tp": 2, "pp": 2, "dp": 2, "micro_batches": 4}, {"iterations": 2}),
    ({"tp": 2, "pp": 2, "sp": True, "interleave": 2, "micro_batches": 4},
     {"memory": {"policy": "recompute", "recompute": "full"}}),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 3, "micro_batches": 4},
     {"memory": {"policy": "recompute", "recompute": "selective"}}),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 1, "replicas": "one", "micro_batches": 4},
     {"overlap": True, "bucket_mb": 0.01}),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 2, "micro_batches": 4}, {"overlap": True}),
    ({"tp": 4, "pp": 2, "scatter_gather": False, "micro_batches": 4}, {"iterations": 2}),
    ({"tp": 2, "pp": 2, "dp": 2, "sp": True, "zero": 3, "tp_ranks": "one", "replicas": "one",
      "micro_batches": 4}, {"collective_form": "streams"}),
    ({"tp": 4, "pp": 2, "tp_ranks": "one", "micro_batches": 6}, {"iterations": 2}),
    ({"tp": 2, "pp": 4, "interleave": 2, "p2p_sync": True, "micro_batches": 8}, {}),
    ({"tp": 2, "pp": 2, "dp": 2, "interleave": 2, "micro_batches": 8},
     {"memory": {"policy": "recompute", "recompute": "full"}, "grad_accumulation": "add",
      "compute": "kernels", "layer_kernels": "passes", "npu": {"preset": "a100"}}),
    ({"pp": 4, "dp": 2, "micro_batches": 6, "schedule": "gpipe"}, {}),
    ({"pp": 2, "dp": 4, "micro_batches": 4}, {"memory": {"policy": "recompute"}}),
    ({"pp": 2, "tp": 2, "dp": 2, "micro_batches": 4}, {"comm_streams": 2}),
])
def test_every_plan_repeats_to_the_graph_built_op_by_op(par, extra, monkeypatch):
    m = models.get("transformer", **TINY)
    check(training(par, **extra), m, monkeypatch)


@pytest.mark.parametrize("policy", ["offload", "lms", "karma", "offload+compression"])
def test_every_memory_policy_repeats_to_the_graph_built_op_by_op(policy, monkeypatch):
    """Memory nodes (MC-DLA's system): the plans' swaps, recomputations and holds come
    after the iteration is built, on the same graph and plan."""
    m = models.get("transformer", **TINY)
    cfg = load("mcdla-8", {"workload.kind": "training", "workload.batch": 64,
                           "workload.iterations": 1, "workload.memory.policy": policy,
                           "workload.parallel": {"pp": 2, "dp": 4, "micro_batches": 4}})
    check(cfg, m, monkeypatch)


@pytest.mark.parametrize("algorithm", ["ring", "bidir_ring", "direct", "tree",
                                       "halving_doubling"])
@pytest.mark.parametrize("engine", [None, "npu", "offload"])
def test_every_algorithm_and_engine_repeats_to_the_graph_built_op_by_op(algorithm, engine,
                                                                        monkeypatch):
    m = models.get("transformer", **TINY)
    cfg = training({"tp": 2, "pp": 2, "dp": 2, "micro_batches": 4}, algorithm=algorithm,
                   engine=engine, chunks=2, bucket_mb=0.05, overlap=True, iterations=2)
    # (the collectives offload engine keeps each node's SRAM across passes: built op by op)
    check(cfg, m, monkeypatch, least=0 if engine == "offload" else 1)


def test_experts_and_split_tables_repeat_to_the_graph_built_op_by_op(monkeypatch):
    moe = models.get("gpt_moe", layers=2, hidden=64, heads=4, seq=16, vocab=256, experts=4)
    check(training({"dp": 4, "ep": 4, "pp": 2, "micro_batches": 4}), moe, monkeypatch)
    dlrm = models.get("dlrm", tables=(1000, 2000, 3000, 4000), dim=16, bottom=(32, 16),
                      top=(32, 1))
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 64, "iterations": 2,
                                        "parallel": {"micro_batches": 4}})
    check(cfg, dlrm, monkeypatch)


def test_nccl_on_a_cluster_repeats_to_the_graph_built_op_by_op(monkeypatch):
    cfg = make_cfg(topology={"kind": "cluster", "node": "dgx-a100", "node_count": 2},
                   workload={"kind": "training", "model": "transformer", "model_params": TINY,
                             "iterations": 1, "batch": 16, "algorithm": "nccl",
                             "collective_form": "streams",
                             "parallel": {"tp": 4, "pp": 2, "dp": 2, "micro_batches": 4,
                                          "interleave": 2, "tp_ranks": "one",
                                          "replicas": "one"},
                             "memory": {"policy": "recompute", "recompute": "full"}})
    check(cfg, None, monkeypatch)


def test_a_pass_is_repeated_for_every_micro_batch_between_the_first_and_last(monkeypatch):
    """One stage, m micro-batches: forward passes 1..m-1 and backward passes 1..m-2 are one
    class each, built once: 2 m - 5 repeated."""
    m = models.get("transformer", **TINY)
    assert check(training({"dp": 8, "micro_batches": 8}, batch=64), m, monkeypatch,
                 memory=False) == 2 * 8 - 5


def test_the_names_of_repeated_passes_are_found_and_never_given_twice(monkeypatch):
    """Names of repeated passes are indexed when first needed: a dependency by name finds
    its op, and an op given a name a repeated pass has already is refused."""
    m = models.get("transformer", **TINY)
    cfg = training({"pp": 2, "dp": 4, "micro_batches": 6})
    g, plan, repeated = built(cfg, m, True, monkeypatch, memory=False)
    assert repeated > 0
    fwd = plan.layer_ops[(0, 1, plan.npus[0], 4)].fwd       # a repeated forward pass's op
    name = g.names[fwd]
    assert name == f"it0 {m.layers[1].name} fwd mb4 {plan.npus[0]}"
    with pytest.raises(GraphError, match="used twice"):
        g.delay(0, name=name)
    g2, plan2, _ = built(cfg, m, True, monkeypatch, memory=False)
    assert g2.delay(0, after=[name]) == len(g2) - 1
    assert g2.after[len(g2) - 1] == [fwd]


def test_names_made_when_read_read_as_the_list_of_them(monkeypatch):
    """A repeated pass's names are made when read (OpGraph._add_lazy_names): every way of
    reading the graph's names (an op, a negative index, slices, iteration, an op's label,
    the run's op table) gives what the list of the names built op by op gives, and taking
    the last op away drops its name."""
    m = models.get("transformer", **TINY)
    cfg = training({"pp": 2, "dp": 4, "micro_batches": 6})
    g, _, repeated = built(cfg, m, True, monkeypatch, memory=False)
    ref, _, _ = built(cfg, m, False, monkeypatch, memory=False)
    assert repeated > 0
    got, want = g._names, list(ref._names)
    assert type(ref._names[0]) is str and graph_module._LAZY in list.__iter__(got)
    n = len(want)
    for i in (0, 1, n // 2, n - 1, -1, -n):
        assert got[i] == want[i]
    for sl in (slice(None), slice(3, n - 2), slice(n - 1, 0, -3), slice(-7, None)):
        assert got[sl] == want[sl]
    assert [g.label(i) for i in range(n)] == [ref.label(i) for i in range(n)]
    last = got[n - 1]
    g._pop()
    assert len(g._names) == n - 1 and list(g._names) == want[:n - 1]
    assert (last is None) or last not in g._by_name


def test_a_backward_pass_sets_its_forward_records_by_key_where_not_in_a_block(monkeypatch):
    """A repeated backward pass sets the records its forward pass made through the rows of
    that pass's block; where the forward pass has no block (built op by op) by key, with
    the same graph and records."""
    monkeypatch.setattr(plan_module.LayerTable, "block_row", lambda self, it, mb, tag: None)
    m = models.get("transformer", **TINY)
    check(training({"tp": 2, "pp": 2, "dp": 2, "interleave": 2, "micro_batches": 8},
                   memory={"policy": "recompute", "recompute": "full"},
                   compute="kernels", npu={"preset": "a100"}), m, monkeypatch)


def test_the_plan_tables_read_as_the_records_they_hold(monkeypatch):
    """The columns of plan.layer_ops, plan.collectives and plan.recomputed (what the
    reports read) hold what their records read one by one say; and a LayerTable reads,
    adds and sets records as a dict of LayerOps does."""
    m = models.get("transformer", **TINY)
    cfg = training({"tp": 2, "pp": 2, "dp": 2, "micro_batches": 6},
                   memory={"policy": "recompute", "recompute": "full"})
    _, plan, repeated = built(cfg, m, True, monkeypatch, memory=False)
    assert repeated > 0
    lops = plan.layer_ops
    c = lops.columns()
    names = lops.npus
    got = list(zip(c["it"].tolist(), c["layer"].tolist(), [names[x] for x in c["npu"]],
                   c["mb"].tolist(), *[[None if x < 0 else x for x in c[f].tolist()]
                                       for f in ("fwd", "bwd_input", "bwd_weight")]))
    assert got == [k + (v.fwd, v.bwd_input, v.bwd_weight) for k, v in lops.items()]
    assert all(lops[k] == v and k in lops for k, v in lops.items())
    one = lops.columns(iteration=0)
    assert len(one["rows"]) == len(lops) and (0, 0, "nope", 0) not in lops
    colls = list(plan.collectives)
    c = plan.collectives.columns(iteration=0)
    names = plan.collectives.npus
    assert c["first"].tolist() == [x.first for x in colls]
    assert c["last"].tolist() == [x.last for x in colls]
    assert [None if x < 0 else x for x in c["mb"].tolist()] == [x.micro_batch for x in colls]
    ptr = c["done_ptr"]
    assert [dict(zip([names[n] for n in c["done_npu"][a:b]], c["done_op"][a:b].tolist()))
            for a, b in zip(ptr[:-1], ptr[1:])] == [x.done for x in colls]
    assert plan.collectives[-1] == colls[-1] and plan.collectives[1:3] == colls[1:3]
    rc = plan.recomputed.columns(iteration=0)
    assert list(zip(rc["it"].tolist(), [plan.recomputed.npus[n] for n in rc["npu"]],
                    rc["op"].tolist())) == list(plan.recomputed) and len(rc["op"]) > 0
    # a table against a dict, under the same adds and sets
    t, d = plan_module.LayerTable(), {}
    for k in [(0, 1, "a", 0), (0, 2, "b", 1), (1, 1, "a", 0)]:
        for x in (t, d):
            x[k] = plan_module.LayerOps(k[1] * 10, None, None, 7.5)
    for x in (t, d):
        x[(0, 2, "b", 1)].bwd_weight = 99
        x[(0, 1, "a", 0)] = plan_module.LayerOps(1, 2, 3, 4)
    assert t == d and list(t) == list(d) and len(t) == len(d)
    assert t.get((9, 9, "z", 9)) is None and t[(0, 2, "b", 1)].bwd_weight == 99
    d[(1, 1, "a", 0)].stash_bytes = 8
    assert t != d
