"""The op counter (pysim.workload.training.count) against the graph it counts: built from the
plan before any op is, its count must equal the built graph's length and the engine ops that
graph compiles into, part by part summed, for every plan, collective algorithm and endpoint
engine (a reference-model oracle: the builder and the compiler are the reference). A run past
the limit is refused before a single op is built."""
import pytest

from conftest import make_cfg
from pysim import models
from pysim import simulate as pysim_simulate
from pysim.errors import ConfigError
from pysim.topology import build
from pysim.workload import OpGraph
from pysim.workload.graph import GraphError, compile_graph
from pysim.workload.training import count, training_graph
from pysim.workload.training import layout as layout_module
from pysim.workload.training.builder import _Builder
from pysim.workload.training.layout import _Layout
from test_repeat import same_graph, same_plan
from test_training import ring8

TINY = dict(layers=2, hidden=64, heads=4, seq=16, vocab=256)


def counted_and_built(cfg, model=None):
    topo = build(cfg)
    g, plan = training_graph(cfg, topo, model)
    c = count.count(_Builder(_Layout(cfg, topo, plan.model, None), OpGraph(), ""))
    return c, g, compile_graph(g, topo, cfg)[0]["kind"].size


def assert_exact(c, g, engine):
    assert c.exact
    assert c.graph_total == len(g)
    assert c.engine_total == engine
    computes = sum(1 for k in g.kind if k == "compute")
    if c.graph["tables"]:                    # the tables' part holds their compute ops too
        assert c.graph["compute"] < computes <= c.graph["compute"] + c.graph["tables"]
    else:
        assert c.graph["compute"] == computes


@pytest.mark.parametrize("par,extra", [
    ({"dp": 8}, {}),
    ({"tp": 2, "pp": 2, "dp": 2, "micro_batches": 2}, {}),
    ({"tp": 2, "pp": 2, "sp": True, "interleave": 2, "micro_batches": 2},
     {"memory": {"policy": "recompute", "recompute": "full"}}),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 3, "micro_batches": 2},
     {"memory": {"policy": "recompute", "recompute": "selective"}}),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 1, "replicas": "one", "micro_batches": 2},
     {"overlap": True, "bucket_mb": 0.01}),
    ({"tp": 4, "pp": 2, "scatter_gather": False, "micro_batches": 2}, {"iterations": 2}),
    ({"tp": 2, "pp": 2, "dp": 2, "sp": True, "zero": 3, "tp_ranks": "one", "replicas": "one",
      "micro_batches": 2}, {"collective_form": "streams"}),
    ({"tp": 4, "pp": 2, "tp_ranks": "one", "micro_batches": 2}, {"iterations": 2}),
    ({"tp": 2, "pp": 2, "dp": 2, "interleave": 2, "micro_batches": 4},
     {"memory": {"policy": "recompute", "recompute": "full"}}),
])
def test_every_plan_is_counted_as_built(par, extra):
    m = models.get("transformer", layers=4, hidden=64, heads=4, seq=16, vocab=1024)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 1, "batch": 8,
                                        "optimizer": "adam", "parallel": par, **extra})
    c, g, engine = counted_and_built(cfg, m)
    assert_exact(c, g, engine)


@pytest.mark.parametrize("algorithm", ["ring", "bidir_ring", "direct", "tree",
                                       "halving_doubling"])
@pytest.mark.parametrize("engine", [None, "npu", "offload"])
def test_every_algorithm_and_engine_is_counted_as_built(algorithm, engine):
    """The sizes of one run differ by layer, so the collectives of several sizes (and, with
    tp and pp, kinds) are counted; the offload engine's pieces depend on each size."""
    m = models.get("transformer", **TINY)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 2, "batch": 8,
                                        "algorithm": algorithm, "engine": engine,
                                        "chunks": 2, "bucket_mb": 0.05, "overlap": True,
                                        "parallel": {"tp": 2, "pp": 2, "dp": 2,
                                                     "micro_batches": 2}})
    c, g, built = counted_and_built(cfg, m)
    assert_exact(c, g, built)


def test_experts_and_split_tables_are_counted_as_built():
    moe = models.get("gpt_moe", layers=2, hidden=64, heads=4, seq=16, vocab=256, experts=4)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 1, "batch": 8,
                                        "parallel": {"dp": 8, "ep": 4}})
    assert_exact(*counted_and_built(cfg, moe))
    dlrm = models.get("dlrm", tables=(1000, 2000, 3000, 4000), dim=16, bottom=(32, 16),
                      top=(32, 1))
    cfg = make_cfg(**ring8(), workload={"kind": "training", "batch": 64, "iterations": 2,
                                        "parallel": {"micro_batches": 2}})
    c, g, built = counted_and_built(cfg, dlrm)
    assert c.graph["tables"] > 0
    assert_exact(c, g, built)


@pytest.mark.parametrize("par", [{"dp": 16}, {"tp": 4, "dp": 4}])
def test_nccl_collectives_are_counted_as_built(par):
    """workload.algorithm = 'nccl' on a cluster of two DGX A100 nodes: NCCL's expansion
    depends on where a group's ranks are (one node or two), so each group is counted."""
    cfg = make_cfg(topology={"kind": "cluster", "node": "dgx-a100", "node_count": 2},
                   workload={"kind": "training", "model": "transformer", "model_params": TINY,
                             "iterations": 1, "batch": 16, "algorithm": "nccl",
                             "parallel": par})
    c, g, built = counted_and_built(cfg)
    assert c.graph["tp_collectives" if par.get("tp") else "dp_collectives"] > 0
    assert_exact(c, g, built)


def test_a_collective_too_large_to_measure_is_bounded_from_above(monkeypatch):
    monkeypatch.setattr(count, "MEASURED", 0)
    m = models.get("transformer", **TINY)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 1, "batch": 8,
                                        "chunks": 3, "parallel": {"tp": 2, "dp": 4}})
    c, g, built = counted_and_built(cfg, m)
    assert not c.exact
    assert c.engine_total >= built and c.engine_total > c.engine["compute"]


def test_a_run_past_the_op_limit_is_refused_before_building(monkeypatch):
    """Refused by the closed-form upper bound (within a tenth of the built graph's engine
    ops here) before a single op is added (adding one would fail otherwise), naming the part
    that makes most ops and the key that makes it smaller."""
    from pysim.workload import graph as graph_module

    def no_op(*a, **k):
        raise AssertionError("an op was built")
    m = models.get("transformer", **TINY)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 1, "batch": 8,
                                        "chunks": 4, "parallel": {"tp": 4, "dp": 2}})
    topo = build(cfg)
    c, _, built = counted_and_built(cfg, m)
    bound = count.count(_Builder(_Layout(cfg, topo, m, None), OpGraph(), ""), measure=False)
    assert not bound.exact and built <= bound.engine_total <= 1.1 * built
    monkeypatch.setattr(graph_module, "MAX_OPS", bound.engine_total - 1)
    g = OpGraph()
    g._add = g.add_ops = no_op
    with pytest.raises(GraphError, match=r"into up to [0-9,]+ engine ops .*more than the .*"
                                         r"most come from tensor-parallel collectives \(tp = "
                                         r"4\) in workload.chunks = 4"):
        training_graph(cfg, topo, m, graph=g)
    monkeypatch.setattr(graph_module, "MAX_OPS", bound.engine_total)
    training_graph(cfg, topo, m)             # at the limit: built


def test_an_nccl_run_past_the_op_limit_names_what_makes_nccl_fewer_not_chunks(monkeypatch):
    """With workload.algorithm = 'nccl' the collectives' chunks are NCCL's own (the key
    workload.chunks is not read) and pysim's tree or halving-doubling are not NCCL's: the
    refusal names NCCL's ring in streams, which makes fewer ops, and that plan then builds
    within the limit the other passed (a bucket per tensor: the gradients' all-reduces make
    most ops)."""
    from pysim.workload import graph as graph_module
    w = {"kind": "training", "model": "transformer", "iterations": 1, "batch": 16,
         "model_params": {**TINY, "layers": 1}, "algorithm": "nccl", "bucket_mb": 0.0001,
         "parallel": {"dp": 16}}
    two = {"kind": "cluster", "node": "dgx-a100", "node_count": 2}
    cfg = make_cfg(topology=two, workload=w)
    ring = make_cfg(topology=two, workload={**w, "nccl_algorithm": "ring",
                                            "collective_form": "streams"})
    bounds = [count.count(_Builder(_Layout(c, build(c), layout_module.load_model(c), None),
                                   OpGraph(), ""), measure=False) for c in (cfg, ring)]
    assert bounds[1].engine_total < bounds[0].engine_total
    monkeypatch.setattr(graph_module, "MAX_OPS", bounds[1].engine_total)
    with pytest.raises(GraphError, match=r"most come from gradient collectives of workload\."
                                         r"bucket_mb = 0\.0001 in NCCL's own chunks and "
                                         r"slices; NCCL's ring in streams \(workload\."
                                         r"nccl_algorithm = 'ring', workload\.collective_form "
                                         r"= 'streams'\) makes fewer ops"):
        training_graph(cfg, build(cfg))
    training_graph(ring, build(ring))


def test_a_count_handed_in_is_checked_instead_of_counting_again(monkeypatch):
    """training_graph(op_count=c), as bench/megatron.py hands in the exact count it reports:
    the limit is checked with c (the bound, counted again, would refuse a run at the exact
    count's limit) and nothing is counted again."""
    from pysim.workload import graph as graph_module
    m = models.get("transformer", **TINY)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 1, "batch": 8,
                                        "chunks": 4, "parallel": {"tp": 4, "dp": 2}})
    topo = build(cfg)
    exact = count.count(_Builder(_Layout(cfg, topo, m, None), OpGraph(), ""))
    bound = count.count(_Builder(_Layout(cfg, topo, m, None), OpGraph(), ""), measure=False)
    assert exact.exact and exact.engine_total < bound.engine_total

    def counting(*a, **k):
        raise AssertionError("counted again")
    monkeypatch.setattr(count, "count", counting)
    monkeypatch.setattr(graph_module, "MAX_OPS", exact.engine_total)
    g, _ = training_graph(cfg, topo, m, op_count=exact)
    assert len(g) == exact.graph_total
    monkeypatch.setattr(graph_module, "MAX_OPS", exact.engine_total - 1)
    with pytest.raises(GraphError, match="more than the"):
        training_graph(cfg, topo, m, op_count=exact)


def test_a_model_of_given_times_past_the_limit_is_refused():
    class Given:
        name, layers = "trace", [None] * 10
    assert count.check_given(Given, 4, 2, limit=240) == 240
    with pytest.raises(ConfigError, match="at least 480 ops.*workload.iterations = 4"):
        count.check_given(Given, 4, 4, limit=400)


@pytest.mark.parametrize("par,extra", [
    ({"dp": 8}, {}),
    ({"tp": 2, "pp": 2, "sp": True, "interleave": 2, "micro_batches": 2},
     {"memory": {"policy": "recompute", "recompute": "full"}}),
    ({"tp": 2, "pp": 2, "dp": 2, "zero": 1, "replicas": "one", "micro_batches": 2},
     {"overlap": True, "bucket_mb": 0.01, "iterations": 2}),
])
def test_a_long_models_compute_is_bounded_from_small_ones(par, extra):
    """The compute a zoo model of many blocks makes, extrapolated from the same model with
    3, 4 and 5 blocks (least_compute, what refuses a run before its layers are built), is a
    lower bound of the compute counted on the model built whole: for a transformer, whose
    blocks are alike, it is that count unless full recomputation's segments cut across
    them."""
    from pysim.workload.training.builder import least_compute
    cfg = make_cfg(**ring8(), workload={
        "kind": "training", "iterations": 1, "batch": 8, "optimizer": "adam",
        "model": "transformer", "model_params": dict(TINY, layers=12), "parallel": par,
        **extra})
    topo = build(cfg)
    least, per_block = least_compute(cfg, topo)
    c, g, engine = counted_and_built(cfg)
    assert_exact(c, g, engine)
    assert 0 < per_block and least <= c.engine["compute"]
    if "memory" not in extra:    # (full recompute's segments are not alike block by block)
        assert least == c.engine["compute"]


def test_a_long_model_past_the_op_limit_is_refused_before_its_layers_are_built(monkeypatch):
    """20,000 transformer blocks on 8 NPUs make some 23 M engine ops of compute: refused
    naming workload.model_params.layers, with no model of more than a few blocks built."""
    built = []
    get = models.get
    monkeypatch.setattr(models, "get", lambda name, **kw: (built.append(kw.get("layers")),
                                                           get(name, **kw))[1])
    cfg = make_cfg(**ring8(), workload={
        "kind": "training", "batch": 64, "model": "transformer",
        "model_params": dict(layers=20000, hidden=8, heads=1, seq=8, vocab=8)})
    with pytest.raises(ConfigError, match=r"workload.model_params.layers = 20,000 would "
                                          r"expand into at least [\d,]+ engine ops"):
        pysim_simulate(cfg)
    assert built and max(built) <= 5


@pytest.mark.slow
@pytest.mark.parametrize("json_out", [False, True])
def test_the_memory_estimate_bounds_a_runs_peak(tmp_path, json_out):
    """count.BYTES_PER_OP (JSON_BYTES_PER_OP with --json) times a run's engine ops bounds the
    peak resident memory of the process that runs it (measured: the kernel's maxrss), here a
    chain of 10,000 ONNX Relu layers trained on the DGX-1 (640,000 engine ops)."""
    import subprocess
    import sys
    import textwrap
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    n = 10_000
    g = helper.make_graph([helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)],
                          "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(g), str(tmp_path / "chain.onnx"))
    code = textwrap.dedent(f"""
        import json, resource, sys
        from click.testing import CliRunner
        from pysim.cli import main
        args = ["run", "dgx1-v100", "-q", "--set", "workload.kind=training", "--set",
                "workload.model={tmp_path / 'chain.onnx'}", "--set", "workload.batch=64",
                "--set", "network.model=flow"] + {["--json", str(tmp_path / "r.json")]
                                                  if json_out else []!r}
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    peak = int(r.stdout.split()[-1])
    ops = 64 * n              # 8 NPUs x 2 iterations x (forward, backward) x 2 (roofline)
    per_op = count.JSON_BYTES_PER_OP if json_out else count.BYTES_PER_OP
    assert peak <= ops * per_op


@pytest.mark.parametrize("work", [
    {"parallel": {"tp": 2, "pp": 2, "dp": 2, "micro_batches": 2}},
    {"parallel": {"pp": 2, "micro_batches": 2}, "group": ["n1", "n3", "n5", "n7"],
     "precision": "fp32"},
    {"parallel": {"tp": 2, "pp": 2, "dp": 2, "zero": 1, "replicas": "one", "tp_ranks": "one",
                  "micro_batches": 2}, "collective_form": "streams"},
])
def test_the_full_layout_taking_the_pre_checks_npus_builds_the_same_graph(work, monkeypatch):
    """A zoo model of more than five blocks is laid out with the op-limit pre-check's NPUs,
    coordinates and specs (its small model's layout); the graph and plan are the ones a
    layout of its own gives (the model given, no pre-check), op for op."""
    params = dict(layers=12, hidden=64, heads=4, seq=16, vocab=256)
    cfg = make_cfg(**ring8(), workload={"kind": "training", "iterations": 1, "batch": 8,
                                        "optimizer": "adam", "model": "transformer",
                                        "model_params": params, **work})
    topo = build(cfg)
    likes = []
    init = layout_module._Layout.__init__

    def spy(self, cfg, topo, model, npus, like=None):
        likes.append(like is not None)
        init(self, cfg, topo, model, npus, like)
    monkeypatch.setattr(layout_module._Layout, "__init__", spy)
    got, gp = training_graph(cfg, topo)
    assert likes == [False, True, True, True]     # the pre-check's three, then the model's
    ref, rp = training_graph(cfg, topo, models.get("transformer", **params))
    assert likes[4:] == [False]
    same_graph(got, ref)
    same_plan(gp, rp)
