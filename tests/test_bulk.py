"""Op graphs in bulk: the array compilation of an op graph (pysim.workload.compile) equals
the op-by-op expansion (tests/refcompile.py) primitive for primitive, on the graphs every
collective algorithm, endpoint model, training plan and memory policy makes, on random DAGs,
and on memory ops; and the collectives emitted in bulk equal those emitted op by op."""
import numpy as np
import pytest

import refcompile
from conftest import make_cfg
from pysim.topology import build
from pysim.workload import OpGraph
from pysim.workload import collectives as coll
from pysim.workload.graph import GraphError, compile_graph
from pysim.workload.memory import POLICIES, apply_training
from pysim.workload.training import training_graph

FIELDS = ("kind", "unit", "node", "dst", "size", "deps", "succ_ptr", "succ")


def assert_same_compilation(g, topo, cfg):
    ref, ref_span = refcompile.compile_graph_by_op(g, topo, cfg)
    got, span = compile_graph(g, topo, cfg)
    for f in FIELDS:
        assert got[f].dtype == ref[f].dtype, f
        assert np.array_equal(got[f], ref[f]), f
    assert [tuple(int(x) for x in s) for s in span] == [tuple(s) for s in ref_span]
    iso = got["isolated"]              # (an array, or from the op-by-op path a dict)
    iso = {int(i): int(v) for i, v in (iso.items() if isinstance(iso, dict) else
                                       enumerate(iso)) if v >= 0}
    assert iso == {i: int(v) for i, v in ref["isolated"].items()}


def small_system(n=8, **npu):
    return make_cfg(topology={"kind": "switch", "size": n, "npu": npu or None},
                    network={"vcs": 2})


@pytest.mark.parametrize("algorithm,collective", [
    (a, c) for a, (_, cs) in sorted(coll.ALGORITHMS.items()) if a not in coll.HIERARCHICAL + ("nccl",)
    for c in sorted(cs)])
@pytest.mark.parametrize("engine", [None, "npu", "offload"])
@pytest.mark.parametrize("nbytes", [1 << 20, pytest.param(3 << 20, marks=pytest.mark.slow)])
def test_collective_graphs_compile_as_op_by_op(algorithm, collective, engine, nbytes):
    """(1 MiB in 3 chunks still passes the offload engine's 256 KiB SRAM: streamed in
    pieces.)"""
    cfg = small_system(8, offload_sram_mb=0.25)
    topo = build(cfg)
    order = [f"npu{i}" for i in range(8)]
    g = coll.build(collective, algorithm, order, nbytes, chunks=3, engine=engine,
                   reduce_bytes_per_cycle=None if engine else 40.0, sram_bytes=1 << 18)
    assert_same_compilation(g, topo, cfg)


@pytest.mark.parametrize("algorithm", ["hierarchical", "bidir_hierarchical"])
def test_hierarchical_on_a_torus_compiles_as_op_by_op(algorithm):
    cfg = make_cfg(topology={"kind": "torus", "dims": [4, 2]}, network={"vcs": 2},
                   workload={"algorithm": algorithm, "chunks": 2, "engine": "npu"})
    topo = build(cfg)
    g, _ = coll.collective_graph(cfg, topo)
    assert_same_compilation(g, topo, cfg)


def training_cfg(parallel, memory=None, nodes=16, layers=4, **w):
    npus = [{"name": f"g{i}", "kind": "npu"} for i in range(nodes)]
    mems = [{"name": "m0", "kind": "mem", "capacity_gb": 4096.0}]
    hosts = [{"name": "h0", "kind": "host"}]
    links = ([{"a": f"g{i}", "b": "sw"} for i in range(nodes)] +
             [{"a": "m0", "b": "sw"}, {"a": "h0", "b": "sw"}])
    work = {"kind": "training", "model": "transformer",
            "model_params": {"layers": layers, "hidden": 256, "heads": 4, "seq": 128},
            "batch": 16, "parallel": parallel, "iterations": 2, "mem_piece_bytes": 1 << 22,
            **w}
    if memory:
        work["memory"] = memory
    return make_cfg(topology={"kind": "graph", "nodes": npus + mems + hosts +
                              [{"name": "sw", "kind": "switch"}], "links": links,
                              "transit": ["switch"], "npu": {"hbm_gb": 1000.0}},
                    network={"vcs": 2}, workload=work)


PLANS = [dict(dp=16), dict(tp=4, dp=4), dict(pp=4, dp=4, micro_batches=4),
         dict(tp=2, pp=4, dp=2, micro_batches=4, schedule="gpipe")]


@pytest.mark.parametrize("parallel", PLANS)
@pytest.mark.parametrize("engine", [None, "offload"])
@pytest.mark.parametrize("layers", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_training_plans_compile_as_op_by_op(parallel, engine, layers):
    cfg = training_cfg(parallel, engine=engine, layers=layers)
    topo = build(cfg)
    g, plan = training_graph(cfg, topo)
    apply_training(cfg, topo, g, plan)
    assert_same_compilation(g, topo, cfg)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_memory_policies_compile_as_op_by_op(policy):
    cfg = training_cfg(dict(dp=2), memory={"policy": policy}, nodes=2)
    topo = build(cfg)
    g, plan = training_graph(cfg, topo)
    apply_training(cfg, topo, g, plan)
    assert_same_compilation(g, topo, cfg)


@pytest.mark.parametrize("seed", range(5))
def test_random_graphs_with_every_kind_compile_as_op_by_op(seed):
    rng = np.random.default_rng(seed)
    cfg = training_cfg(dict(dp=4), nodes=4)
    topo = build(cfg)
    npus = [f"g{i}" for i in range(4)]
    g = OpGraph()
    for i in range(300):
        after = sorted(set(rng.integers(0, i, rng.integers(0, 4)).tolist())) if i else []
        k = rng.integers(0, 11)
        a, b = rng.choice(npus, 2, replace=False)
        size = int(rng.integers(0, 1 << 24))
        if k == 0:
            g.compute(a, int(rng.integers(0, 5000)), after=after)
        elif k == 1:
            g.compute(a, flops=float(rng.random() * 1e12), bytes=size, after=after,
                      peak_flops=None if rng.random() < 0.5 else 1e14)
        elif k == 2:
            g.send(a, b, size, after=after)
        elif k == 3:
            g.delay(int(rng.integers(0, 100)), after=after)
        elif k == 4:
            g.memory(a, size, after=after)
        elif k == 5:
            g.reduce(a, size, "npu" if rng.random() < 0.5 else "offload", after=after)
        elif k == 6:
            g.engine(a, size, after=after)
        elif k == 7:
            x = g.acquire(a, int(rng.integers(0, 3)), after=after)
            g.release(a, after=[x])
        elif k == 8:
            w = g.mem_write(a, "m0" if rng.random() < 0.7 else "h0", size, after=after)
            if rng.random() < 0.5:
                g.free(g.space(w), at=w)
        elif k == 9:
            g.mem_read(a, "m0", size, after=after + ([] if not i else [i - 1]))
        else:
            g.send(a, b, size, after=after + after[:1])      # a dependency given twice
    for _ in range(20):                  # dependencies on later ops: a topological order
        x, y = sorted(rng.choice(len(g), 2, replace=False).tolist())
        g.depend(x, y)
    try:
        ref = refcompile.compile_graph_by_op(g, topo, cfg)
    except GraphError as e:              # (a random depend may close a cycle)
        with pytest.raises(GraphError, match="cycle"):
            compile_graph(g, topo, cfg)
        assert "cycle" in str(e)
        return
    assert ref
    assert_same_compilation(g, topo, cfg)


@pytest.mark.parametrize("make,fragment", [
    (lambda g: g.compute("nope", 5), "no node of that name"),
    (lambda g: g.compute("sw", 5), "is a switch"),
    (lambda g: g.compute("m0", 5), "is a mem node; expected npu or host"),
    (lambda g: g.send("g0", "g0", 5), "a send from 'g0' to itself"),
    (lambda g: g.send("g0", 3, 5), "expected a node name"),
    (lambda g: g.engine("h0", 5), "is a host node; expected npu"),
    (lambda g: g.mem_write("g0", "g1", 5), "is a npu node; expected mem or host"),
    (lambda g: g.compute("g0", flops=1e30), "takes more than 1,000,000,000,000,000 cycles"),
])
def test_bad_ops_raise_the_op_by_op_errors(make, fragment):
    cfg = training_cfg(dict(dp=4), nodes=4)
    topo = build(cfg)
    g = OpGraph()
    g.compute("g1", 10)
    make(g)
    g.compute("nope-later", 10)           # a later bad op: the first one is named
    with pytest.raises(GraphError) as ref:
        refcompile.compile_graph_by_op(g, topo, cfg)
    with pytest.raises(GraphError) as got:
        compile_graph(g, topo, cfg)
    assert fragment in str(ref.value)
    assert str(got.value) == str(ref.value)


def same_graph(a, b):
    assert len(a) == len(b)
    for f in ("kind", "node", "dst", "size", "after", "names", "work"):
        assert getattr(a, f) == getattr(b, f), f


@pytest.mark.parametrize("algorithm,collective", [
    (a, c) for a, (_, cs) in sorted(coll.ALGORITHMS.items()) if a not in coll.HIERARCHICAL + ("nccl",)
    for c in sorted(cs)])
@pytest.mark.parametrize("engine", [None, "npu"])
def test_collectives_in_bulk_equal_op_by_op(algorithm, collective, engine, monkeypatch):
    """Each participant's part waits for an op of its own (as in a training plan), and the
    graph has ops before the collective."""
    order = [f"npu{i}" for i in (3, 1, 0, 2, 6, 7, 5, 4)]
    graphs = []
    for bulk in (True, False):
        monkeypatch.setattr(coll.builder, "BULK", bulk)
        g = OpGraph()
        ready = {n: [g.compute(n, 10 * i + 1)] for i, n in enumerate(order) if i % 3}
        done = {}
        coll.build(collective, algorithm, order, 3 * 2 ** 20 + 5, chunks=3,
                   reduce_bytes_per_cycle=None if engine else 37.5, engine=engine, graph=g,
                   after=ready, done=done)
        graphs.append((g, done))
    same_graph(graphs[0][0], graphs[1][0])
    assert graphs[0][1] == graphs[1][1]


@pytest.mark.parametrize("parallel", PLANS)
def test_training_plans_in_bulk_equal_op_by_op(parallel, monkeypatch):
    graphs = []
    for bulk in (True, False):
        monkeypatch.setattr(coll.builder, "BULK", bulk)
        cfg = training_cfg(parallel, engine="npu", algorithm="halving_doubling"
                           if parallel.get("dp", 1) in (2, 4, 16) else "ring")
        graphs.append(training_graph(cfg, build(cfg))[0])
    same_graph(*graphs)


def test_bulk_ops_are_checked():
    g = OpGraph()
    g.compute("a", 1)
    with pytest.raises(GraphError, match="no such op"):
        g.add_ops(["send"], ["a"], ["b"], [5], [[1]])
    with pytest.raises(GraphError, match="size = -5"):
        g.add_ops(["send"], ["a"], ["b"], [-5], [[0]])
    assert len(g) == 1
    assert g.add_ops(["send", "delay"], ["a", None], ["b", None], [5, 0], [[0], [1]]) == 1
    assert g.after == [[], [0], [1]] and g.kind == ["compute", "send", "delay"]


@pytest.mark.parametrize("algorithm,collective", [
    (a, c) for a, (_, cs) in sorted(coll.ALGORITHMS.items()) if a not in coll.HIERARCHICAL + ("nccl",)
    for c in sorted(cs)])
@pytest.mark.parametrize("engine", [None, "npu"])
def test_a_collectives_engine_ops_are_counted_exactly_before_building(algorithm, collective,
                                                                      engine):
    cfg = small_system(8)
    topo = build(cfg)
    order = [f"npu{i}" for i in range(8)]
    g = coll.build(collective, algorithm, order, 3 << 20, chunks=3, engine=engine,
                   reduce_bytes_per_cycle=None if engine else 40.0)
    arrays, _ = compile_graph(g, topo, cfg)
    assert coll.ops_bound(collective, algorithm, 8, 3, engine) == arrays["kind"].size
