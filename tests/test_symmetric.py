"""Symmetric ranks built once (workload.parallel.tp_ranks = 'one'): a participant's part of a
collective that is the same at every participant but for a rotation of the ring, built
alone, runs as it does with every part built; a training iteration with tensor-parallel
rank 0's ops alone takes the cycles it takes with every rank's. The reference is the whole
graph: for collectives on a switch, where no two ranks share a link; for training on DGX
A100 nodes, where a tensor-parallel group's links (NVLink through the node's NVSwitch) carry
nothing else (the pipeline's and the gradients' traffic take the InfiniBand rails)."""
import pytest

from conftest import make_cfg
from pysim import models
from pysim.topology import build as build_topology
from pysim.workload import collectives as coll
from pysim.workload.graph import OpGraph, run_graph
from pysim.workload.training import run_training

SWITCH = dict(topology={"kind": "switch", "size": 8, "link_gbps": 50.0,
                        "npu": {"preset": "a100"}},
              network={"model": "flow"})


def _part(collective, algorithm, form, engine, built, peers=0):
    cfg = make_cfg(**SWITCH)
    order = [f"npu{i}" for i in (3, 0, 5, 1, 7, 2, 6, 4)]     # a ring not in id order
    g = OpGraph()
    g.compute("npu0", 500)                                   # before the collective at npu0
    done = {}
    units = {n: 16 for n in order} if engine == "npu" else None
    coll.build(collective, algorithm, order, 3 << 20, 2, 4.0 if engine is None else None,
               engine, None, g, after={n: [0] for n in order}, done=done, units=units,
               form=form, built=built, peers=peers)
    res = run_graph(cfg, g)
    return {n: res.ops[op]["finish"] for n, op in done.items()}, len(g)


@pytest.mark.parametrize("algorithm,collective", [
    ("ring", "all_reduce"), ("ring", "all_gather"), ("ring", "reduce_scatter"),
    ("bidir_ring", "all_reduce"), ("direct", "all_reduce"), ("direct", "all_to_all")])
@pytest.mark.parametrize("form", ["steps", "streams"])
@pytest.mark.parametrize("engine", [None, "npu"])
def test_one_part_runs_as_in_the_whole_collective(algorithm, collective, form, engine):
    whole, n_whole = _part(collective, algorithm, form, engine, None)
    one, n_one = _part(collective, algorithm, form, engine, ["npu5"])
    assert list(one) == ["npu5"]
    assert one["npu5"] == whole["npu5"]
    assert len(set(whole.values())) == 1             # (every part alike: the premise)
    assert n_one - 1 == (n_whole - 1) // 8           # one part of eight


@pytest.mark.parametrize("peers", [1, 3])
@pytest.mark.parametrize("engine", [None, "npu"])
def test_one_part_of_an_all_to_all_with_a_window_runs_as_in_the_whole(engine, peers):
    """workload.all_to_all_peers: a message waits for receptions at another rank; by
    rotation that rank's op is the part's own of the same place."""
    whole, n_whole = _part("all_to_all", "direct", "steps", engine, None, peers)
    one, n_one = _part("all_to_all", "direct", "steps", engine, ["npu5"], peers)
    assert one["npu5"] == whole["npu5"] and len(set(whole.values())) == 1
    assert n_one - 1 == (n_whole - 1) // 8


def test_a_collective_not_symmetric_is_built_whole():
    """The tree's parts differ by rank: every part is built, the others after `after`."""
    whole, n_whole = _part("all_reduce", "tree", "steps", None, None)
    one, n_one = _part("all_reduce", "tree", "steps", None, ["npu5"])
    assert n_one == n_whole and one == whole


CLUSTER = dict(topology={"kind": "cluster", "node": "dgx-a100", "node_count": 4,
                         "fabric": "rail-optimised"},
               network={"model": "flow"})


@pytest.mark.parametrize("par", [
    {"tp": 8, "pp": 2, "dp": 2, "micro_batches": 2},
    {"tp": 8, "pp": 2, "dp": 2, "sp": True, "zero": 1, "interleave": 2, "micro_batches": 2,
     "replicas": "one"},
])
@pytest.mark.parametrize("form", ["steps", "streams"])
@pytest.mark.parametrize("algorithm", ["ring", "nccl"])
def test_rank_zero_alone_stands_for_its_group(par, form, algorithm):
    """NCCL's collectives too (its ring inside a node: one part per rank)."""
    m = "transformer"
    res = {}
    for ranks in ("all", "one"):
        cfg = make_cfg(**CLUSTER, workload={
            "kind": "training", "model": m, "iterations": 1, "batch": 8,
            "model_params": {"layers": 4, "hidden": 128, "heads": 8, "seq": 64,
                             "vocab": 1024}, "engine": "npu",
            "precision": "mixed", "optimizer": "adam", "collective_form": form,
            "algorithm": algorithm,
            "parallel": {**par, "tp_ranks": ranks}})
        r = run_training(cfg)
        res[ranks] = (r.training["iteration_cycles"], r.training["compute_cycles"], len(r.ops))
        # per NPU, those with ops of their own: rank 0 of each (dp, pp) place (and with one
        # replica built, the other replica's rank 0s, running their gradient collectives)
        assert len(r.training["per_npu"]) == (4 if ranks == "one" else 32)
    assert res["one"][:2] == res["all"][:2]
    assert res["one"][2] * 3 < res["all"][2]
