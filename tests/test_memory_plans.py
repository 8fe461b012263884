"""Memory plans on layer tables built by hand: each policy's decisions against its stated
rule, the plans run as op graphs on one NPU with a memory node and a host (peaks against
the largest sum of live bytes computed here, offload over free links and with nothing to
overlap, no leak, lms that swaps nothing, compression that changes nothing, karma against
swapping and recomputing everything), placement on the shipped systems, and bad input."""
import math
import os

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import TOPOLOGIES, make_cfg
from pysim.cli import main
from pysim.config import load
from pysim.errors import ConfigError
from pysim.topology import build
from pysim.workload import GraphError, OpGraph, run_graph
from pysim.workload.memory import (KEEP, RECOMPUTE, SWAP, Budget, LayerCost, NpuWork,
                                   GraphSink, apply, chain, check_fields, decide, estimate,
                                   placement)
from pysim.workload.memory.placement import shared


def table(n, stash, fwd, bwd=None, kind="conv", out=0, grad=0):
    """n layers, each with the given stash bytes and cycles (scalars or lists)."""
    pick = (lambda v, i: v[i] if isinstance(v, (list, tuple, np.ndarray)) else v)
    return [LayerCost(f"l{i}", pick(kind, i), int(pick(stash, i)), int(pick(fwd, i)),
                      tuple(pick(bwd, i)) if bwd is not None else (int(pick(fwd, i)),) * 2,
                      out_bytes=int(pick(out, i)), grad_bytes=int(pick(grad, i)))
            for i in range(n)]


def system(link_gbps=32.0, hbm_gb=1.0, mem_gb=1.0, host_gb=1.0, fast=False, **memory):
    """One NPU with a memory node and a host beside it; links of link_gbps (fast: links,
    NICs, memories and HBM so fast that a stash of a few hundred kB moves in a few
    cycles)."""
    big = 4096.0 if fast else None
    nodes = [{"name": "npu", "kind": "npu", "hbm_gb": hbm_gb},
             {"name": "m0", "kind": "mem", "capacity_gb": mem_gb, "mem_latency_ns": 1.0,
              "mem_gbps": big or 200.0},
             {"name": "cpu", "kind": "host", "dram_gb": host_gb}]
    for n in nodes:
        if fast:
            n["injection_gbps"] = n["ejection_gbps"] = big
    if fast:
        nodes[0]["hbm_gbps"] = big * 4
    links = [{"a": "npu", "b": "m0", "gbps": big or link_gbps, "latency_ns": 1.0},
             {"a": "npu", "b": "cpu", "gbps": big or link_gbps / 2, "latency_ns": 1.0}]
    workload = {"packet_flits": 16, "mem_piece_bytes": 1 << 20}
    if memory:
        workload["memory"] = memory
    return make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links},
                    network={"vcs": 2, "vc_buffer_flits": 32}, workload=workload)


def run_plan(cfg, costs, resident=0, check=True):
    """Build one NPU's iteration (a chain of the layers' ops), apply the configured memory
    plan, run it."""
    topo = build(cfg)
    g = OpGraph()
    start = g.delay(0)
    sk = chain(GraphSink(g, {}), "npu", costs, after=[start])
    end = g.delay(0, after=[sk.order[-1]])
    applied = apply(cfg, topo, g, {"npu": NpuWork(costs, [sk], resident, start, end)})
    r = run_graph(cfg, g, check_memory=check)
    return r, applied, g, sk


# ---------------------------------------------------------------------- the rules


def test_policies_follow_their_rules():
    costs = table(9, [2 << 20] * 4 + [1000] + [2 << 20] * 4, 1000,
                  kind=["conv", "norm"] * 4 + ["conv"])
    b = Budget(capacity=10**9, out_bpc=10.0, in_bpc=10.0)
    off = decide({"policy": "offload"}, costs, b)
    assert off.action == [SWAP] * 8 + [KEEP] and off.sync == 1 and off.ahead == 1
    conv = decide({"policy": "offload", "layers": "conv", "prefetch_layers": 3}, costs, b)
    assert conv.action == [SWAP, KEEP] * 4 + [KEEP] and conv.ahead == 3
    # lms: op distance from F_l (position l) to the first backward op of l (position
    # 9 + 2(8 - l)) is 25 - 3l; swapped when > threshold and >= min_bytes
    lms = decide({"policy": "lms", "swapout_threshold": 12, "swapin_ahead": 2,
                  "swapin_groupby": 0, "sync_mode": 0, "min_bytes": 1 << 20}, costs, b)
    assert lms.action == [SWAP if 25 - 3 * l > 12 and l != 4 else KEEP for l in range(9)]
    assert lms.action.count(SWAP) == 4
    assert lms.ahead == 2 and lms.groupby == 0 and lms.sync == 0
    # recompute: round(sqrt(9)) = 3 segments starting at 0, 3, 6 keep their stash
    rec = decide({"policy": "recompute"}, costs, b)
    assert [l for l in range(9) if rec.action[l] == KEEP] == [0, 3, 6]
    assert decide({"policy": "recompute", "segments": 2}, costs, b).chosen["segments"] == 2
    comp = decide({"policy": "offload+compression"}, costs, Budget(
        capacity=10**9, out_bpc=10.0, in_bpc=10.0, ratio={"norm": 2.0}))
    assert comp.ratio == [15.0, 2.0] * 4 + [15.0]
    named = decide({"policy": "compression"}, costs, Budget(
        capacity=10**9, ratio={"norm": 2.0, "l3": 7.0, "l4": 9.0}))   # a name wins
    assert named.ratio == [15.0, 2.0, 15.0, 7.0, 9.0, 2.0, 15.0, 2.0, 15.0]
    assert decide({"policy": "compression"}, costs, b).action == [KEEP] * 9


def test_lms_auto_tuning_is_the_largest_threshold_that_fits():
    """Auto mode: nothing swapped when everything fits; else the threshold is the largest
    whose predicted peak fits (one more does not)."""
    costs = table(12, 1 << 20, 5000)
    roomy = Budget(capacity=10**9, fraction=1.0, out_bpc=100.0, in_bpc=100.0)
    p = decide({"policy": "lms"}, costs, roomy)
    assert p.action == [KEEP] * 12
    tight = Budget(capacity=7 << 20, fraction=1.0, out_bpc=100.0, in_bpc=100.0)
    p = decide({"policy": "lms"}, costs, tight)
    th = p.chosen["swapout_threshold"]
    assert SWAP in p.action and estimate(p, costs, tight).fits
    base = {"policy": "lms", "swapin_ahead": p.chosen["swapin_ahead"], "min_bytes": 0,
            "swapin_groupby": p.chosen["swapin_groupby"], "sync_mode": p.chosen["sync_mode"]}
    more = decide({**base, "swapout_threshold": th + 1}, costs, tight)
    assert not estimate(more, costs, tight).fits


def test_karma_rule_swaps_what_overlaps_and_recomputes_what_is_cheap():
    """A layer whose transfer fits in the next layer's forward and backward is swapped; one
    whose exposed transfer costs more than its forward is recomputed (and long runs of
    recomputed layers get swapped checkpoints); the plan fits the budget."""
    n = 10
    # layers 0-4: cheap to move (1 MB at 100 B/cycle = 10,486 cycles under 20,000 of
    # compute), layers 5-8: 8 MB, 83,886 cycles, exposed about 2 x 64,000 > their 1,000
    # forward cycles
    costs = table(n, [1 << 20] * 5 + [8 << 20] * 5, [20000] * 5 + [1000] * 5,
                  [(10000, 10000)] * 5 + [(10000, 10000)] * 5)
    b = Budget(capacity=20 << 20, fraction=1.0, out_bpc=100.0, in_bpc=100.0)
    p = decide({"policy": "karma"}, costs, b)
    assert estimate(p, costs, b).fits
    assert all(p.action[l] in (SWAP, KEEP) for l in range(5))
    assert p.action.count(RECOMPUTE) >= 1 and RECOMPUTE not in p.action[:5]
    assert p.action[9] == KEEP
    # everything fits: karma keeps everything
    assert decide({"policy": "karma"}, costs, Budget(capacity=10**9, out_bpc=100.0,
                                                     in_bpc=100.0)).action == [KEEP] * n


# ---------------------------------------------------------------------- as op graphs


@pytest.mark.parametrize("seed", range(3))
def test_peak_with_policy_none_is_the_largest_live_sum(seed):
    """Peak HBM = resident + max over ops of the stashes of the layers whose forward has
    started and whose backward has not finished, plus that op's transient (a forward op's
    output, a backward op's input gradient)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    stash = rng.integers(0, 5 << 20, n)
    out = rng.integers(1, 3 << 20, n)
    grad = rng.integers(1, 3 << 20, n)
    costs = table(n, stash, rng.integers(1, 500, n), out=out, grad=grad)
    resident = int(rng.integers(0, 10 << 20))
    r, _, _, _ = run_plan(system(), costs, resident)
    cum = np.cumsum(stash)
    oracle = resident + int(max((cum + out).max(), (cum + grad).max()))
    dev = r.memory["devices"]["npu"]
    assert dev["peak_bytes"] == oracle
    assert all(d["end_bytes"] == 0 for d in r.memory["devices"].values())


def test_offload_over_free_links_costs_nothing_and_nothing_leaks():
    """Links, NICs and memories so fast that every transfer ends within the op it overlaps:
    the iteration takes exactly as long as with everything kept; the stashes went out and
    came back; every byte is freed at the end, on the NPU and the memory node."""
    costs = table(8, 256 << 10, 3000)
    none, _, _, _ = run_plan(system(fast=True), costs)
    off, applied, _, _ = run_plan(system(fast=True, policy="offload"), costs)
    assert off.makespan_cycles == none.makespan_cycles
    m = off.memory["devices"]["m0"]
    assert m["offloaded_bytes"] == m["prefetched_bytes"] == 7 * (256 << 10)
    assert m["peak_bytes"] > 0 and m["end_bytes"] == 0
    assert off.memory["devices"]["npu"]["end_bytes"] == 0
    assert off.memory["devices"]["npu"]["peak_bytes"] < none.memory["devices"]["npu"][
        "peak_bytes"]
    assert applied.placements["npu"].targets == [("m0", 1.0)]


def test_offload_with_nothing_to_overlap_costs_its_transfer():
    """One stash swapped (offload of conv layers only), the next layer's forward long enough
    to hide the swap-out, and prefetch_layers = 0 so the swap-in overlaps nothing: the
    iteration is longer than with everything kept by exactly the swap-in's time, which is
    the bytes over the link's bandwidth plus the pipeline's fill and latency terms."""
    N = 2 << 20
    costs = table(4, [0, N, 0, 0], [100, 100, 200000, 100], kind=["norm", "conv", "norm",
                                                                 "norm"])
    cfg = system(link_gbps=32.0, policy="offload", layers="conv", prefetch_layers=0)
    none, _, _, _ = run_plan(system(link_gbps=32.0), costs)
    off, _, g, _ = run_plan(cfg, costs)
    reads = [op for op in off.ops if op["kind"] == "mem_read"]
    assert len(reads) == 1
    t_in = reads[0]["finish"] - reads[0]["start"]
    assert off.makespan_cycles - none.makespan_cycles == t_in
    # pieces of 1 MiB pipeline: the memory node's access of the first (200 GB/s), the
    # bytes over the 32 GB/s link, the NPU's HBM write of the last (900 GB/s), latencies
    piece = 1 << 20
    ideal = N / 32.0 + piece / 200.0 + piece / 900.0
    assert ideal <= t_in <= ideal + 100


def test_lms_that_swaps_nothing_equals_none():
    costs = table(6, 1 << 20, 2000)
    none, _, _, _ = run_plan(system(), costs)
    lms, applied, _, _ = run_plan(system(policy="lms", swapout_threshold=1000,
                                         swapin_ahead=1, swapin_groupby=0), costs)
    assert applied.plans["npu"].action == [KEEP] * 6
    assert [(o["start"], o["finish"]) for o in lms.ops] == \
        [(o["start"], o["finish"]) for o in none.ops]
    assert lms.memory["devices"]["npu"]["peak_bytes"] == \
        none.memory["devices"]["npu"]["peak_bytes"]
    # and with threshold 0 it swaps them (all but none of the layers is kept)
    _, applied, _, _ = run_plan(system(policy="lms", swapout_threshold=0, swapin_ahead=1,
                                       swapin_groupby=1, sync_mode=0), costs)
    assert applied.plans["npu"].action == [SWAP] * 6


def test_compressors_are_roofline_ops_that_read_and_write_hbm():
    """Compressors of infinite throughput and a ratio of 1: each still reads S and writes S
    bytes of HBM (900 GB/s: 900 bytes a cycle), so with nothing else in flight each of the 12
    (a compressor and a decompressor per layer) adds ceil(2 S / 900) cycles to the chain;
    the peak is that of no compression and one stash more (the last decompressor holds its
    input and output while it runs); joined to offload, the codecs run too; with a real
    ratio the stash held shrinks."""
    costs = table(6, 1 << 20, 3000)
    for base in ("none", "offload"):
        plain = {} if base == "none" else {"policy": base}
        ref, _, _, _ = run_plan(system(**plain), costs)
        pol = "compression" if base == "none" else f"{base}+compression"
        c, _, g, _ = run_plan(system(policy=pol, ratio={"conv": 1.0}, compress_gbps=math.inf,
                                     decompress_gbps=math.inf), costs)
        if base == "none":
            assert c.makespan_cycles == ref.makespan_cycles + 12 * math.ceil(2 * 2**20 / 900)
            # the last decompressor holds its input and its output at once
            assert c.memory["devices"]["npu"]["peak_bytes"] == \
                ref.memory["devices"]["npu"]["peak_bytes"] + (1 << 20)
        assert sum(1 for o in c.ops if o["kind"] == "compute") > sum(
            1 for o in ref.ops if o["kind"] == "compute")
    small, _, _, _ = run_plan(system(policy="compression", ratio={"conv": 4.0}), costs)
    ref, _, _, _ = run_plan(system(), costs)
    # six 1 MiB stashes kept as 256 KiB each; at the peak (the last layer's decompressor
    # op, which holds its input and its output) 6 compressed + 1 full
    assert small.memory["devices"]["npu"]["peak_bytes"] == 6 * (1 << 18) + (1 << 20)
    assert ref.memory["devices"]["npu"]["peak_bytes"] == 6 << 20


@pytest.mark.parametrize("model", ["uniform", "mixed"])
def test_karma_is_never_slower_than_swapping_or_recomputing_everything(model):
    if model == "uniform":
        costs = table(10, 2 << 20, 20000)
    else:
        costs = table(10, [1 << 20, 4 << 20] * 5, [30000, 2000] * 5)
    cap_gb = 0.7 * sum(c.stash_bytes for c in costs) / 1e9
    times = {}
    for pol in ("karma", "offload", "recompute"):
        r, applied, _, _ = run_plan(system(link_gbps=16.0, hbm_gb=cap_gb, policy=pol,
                                           budget_fraction=1.0), costs,
                                    check=pol != "karma")
        times[pol] = r.makespan_cycles
    assert times["karma"] <= min(times["offload"], times["recompute"]), times


def test_recompute_flops_and_sqrt_segments_peak():
    """n = 16 layers of equal stash S: 4 segments; 12 layers recomputed (their forward
    FLOPs counted); the peak is the 4 checkpoints plus one segment's 3 recomputed stashes
    (the recomputed layer's stash and the next layer's forward... see oracle)."""
    S = 1 << 20
    costs = table(16, S, 1000)
    for c in costs:
        c.fwd_flops = 0.0
    r, applied, _, _ = run_plan(system(policy="recompute"), costs)
    plan = applied.plans["npu"]
    assert plan.action.count(RECOMPUTE) == 12
    assert [op for op in r.ops if op["kind"] == "compute"].__len__() == 16 * 3 + 12
    # forward: a dropped stash lives until the next layer's forward is done, so at most
    # the checkpoints so far + 2; backward of the last segment: 4 checkpoints + its 3
    # recomputed stashes
    assert r.memory["devices"]["npu"]["peak_bytes"] == (4 + 3) * S


# ---------------------------------------------------------------------- placement, errors


def test_placement_on_the_shipped_systems():
    """MC-DLA: each NPU's pages split evenly over the two memory nodes beside it (three
    25 GB/s links to each: 150 GB/s); HC-DLA: the host CPU of its socket over three NVLinks;
    DGX-1: the host of its PCIe switch, 16 GB/s."""
    cfg = load(os.path.join(TOPOLOGIES, "mcdla-8.toml"))
    topo = build(cfg)
    p = placement(topo, cfg, "npu0", "auto")
    assert sorted(p.targets) == [("mem0", 0.5), ("mem7", 0.5)]
    assert p.out_bpc == pytest.approx(150.0) and p.kind == "mem"
    cfg = load(os.path.join(TOPOLOGIES, "hcdla-8.toml"))
    p = placement(build(cfg), cfg, "npu5", "auto")
    assert p.targets == [("cpu1", 1.0)] and p.out_bpc == pytest.approx(75.0)
    cfg = load(os.path.join(TOPOLOGIES, "dgx1-v100.toml"))
    p = placement(build(cfg), cfg, "gpu6", "auto")
    assert p.targets == [("cpu1", 1.0)] and p.out_bpc == pytest.approx(16.0)
    with pytest.raises(ConfigError, match="no remote memory reachable from gpu0 \\(no memory "
                                          "node in dgx1-v100"):
        placement(build(cfg), cfg, "gpu0", "mem")


def test_planned_bandwidth_is_the_fair_share_when_every_npu_moves_bytes():
    """With every NPU offloading at once, each plans with its max-min fair share: on the
    DGX-1 two GPUs share their PCIe switch's 16 GB/s uplink (8 each); on HC-DLA four GPUs
    share their socket's DRAM (100 GB/s: 25 each, under their 75 GB/s of NVLink); on MC-DLA
    each memory node's controller (100 GB/s) serves the two NPUs beside it (50 each from
    each of two: 100); an NPU alone keeps its whole path."""
    for name, npu, alone, fair in (("dgx1-v100", "gpu6", 16.0, 8.0),
                                   ("hcdla-8", "npu5", 75.0, 25.0),
                                   ("mcdla-8", "npu0", 150.0, 100.0)):
        cfg = load(os.path.join(TOPOLOGIES, f"{name}.toml"))
        topo = build(cfg)
        npus = [n for n, k in zip(topo.node_names, topo.node_kinds) if k == "npu"]
        every = shared(topo, {n: placement(topo, cfg, n, "auto") for n in npus})
        assert every[npu].out_bpc == pytest.approx(fair), name
        assert every[npu].in_bpc == pytest.approx(fair), name
        one = shared(topo, {npu: placement(topo, cfg, npu, "auto")})
        assert one[npu].out_bpc == pytest.approx(alone), name


def test_bad_input_is_refused_clearly():
    costs = table(4, 1 << 20, 1000)
    # no remote memory reachable
    mesh = make_cfg(topology={"kind": "mesh", "dims": [2, 2]},
                    workload={"memory": {"policy": "offload"}})
    g = OpGraph()
    sk = chain(GraphSink(g, {}), "n0_0", costs)
    with pytest.raises(ConfigError, match="no remote memory reachable from n0_0"):
        apply(mesh, build(mesh), g, {"n0_0": NpuWork(costs, [sk], 0, sk.F[0],
                                                        sk.order[-1])})
    # a memory node and a host over capacity, named (stashes that fit alone, not together)
    small = table(4, 600_000, 1000)
    with pytest.raises(GraphError, match=r"m0: [\d,]+ bytes held at once .* past its "
                                         r"capacity of 1,000,000 bytes"):
        run_plan(system(policy="offload", mem_gb=0.001), small)
    with pytest.raises(GraphError, match=r"cpu: [\d,]+ bytes held at once .* past its "
                                         r"capacity of 1,000,000 bytes"):
        run_plan(system(policy="offload", target="host", host_gb=0.001), small)
    # the NPU over its HBM
    with pytest.raises(GraphError, match=r"npu: 4,194,304 bytes held at once .* past its "
                                         r"capacity of 3,000,000 bytes \(largest held then: "
                                         r"npu l0 stash 1,048,576"):
        run_plan(system(hbm_gb=0.003), costs)
    # unknown fields, with did-you-mean; a field of another policy
    with pytest.raises(ConfigError, match="unknown key workload.memory.prefetch_layer "
                                          "\\(did you mean 'prefetch_layers'\\?\\)"):
        system(policy="offload", prefetch_layer=2)
    with pytest.raises(ConfigError, match="workload.memory.swapin_ahead is not read by "
                                          "workload.memory.policy = 'offload' \\(it is read "
                                          "by lms\\)"):
        check_fields(system(policy="offload", swapin_ahead=2))
    with pytest.raises(ConfigError, match="unknown policy 'vdnn'"):
        system(policy="vdnn")
    # a compression ratio for a layer the model does not have, with did-you-mean
    with pytest.raises(ConfigError, match=r"workload.memory.ratio.l3x: neither a layer kind "
                                          r"nor a layer of the model \(did you mean 'l3'"):
        run_plan(system(policy="compression", ratio={"l3x": 4.0}), table(4, 1 << 20, 1000))
    with pytest.raises(ConfigError, match=r"workload.memory.ratio.conv = 0.5: expected a "
                                          r"number >= 1"):
        system(policy="compression", ratio={"conv": 0.5})
    res = CliRunner().invoke(main, ["run", os.path.join(TOPOLOGIES, "mcdla-8.toml"),
                                    "--set", "workload.memory.polcy=offload"])
    assert res.exit_code == 1 and "did you mean 'policy'" in res.output


def test_memory_plot_and_json(tmp_path):
    """The result's memory section survives JSON; plot --kind memory draws every device's
    occupancy (the peaks it draws are the result's); a result without memory is refused."""
    import json
    from pysim import plot as P
    costs = table(6, 1 << 20, 3000)
    r, _, _, _ = run_plan(system(policy="offload"), costs)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(r.to_dict()))
    d = json.loads(path.read_text())
    assert set(d["memory"]["devices"]) == {"npu", "m0"}
    png = tmp_path / "m.png"
    res = CliRunner().invoke(main, ["plot", str(path), "--kind", "memory", "-o", str(png)])
    assert res.exit_code == 0, res.output
    assert png.stat().st_size > 5000
    peaks = P.memory(d, str(tmp_path / "m2.png"))
    assert peaks == {k: v["peak_bytes"] for k, v in d["memory"]["devices"].items()}
    del d["memory"]
    path.write_text(json.dumps(d))
    res = CliRunner().invoke(main, ["plot", str(path), "--kind", "memory", "-o",
                                    str(tmp_path / "x.png")])
    assert res.exit_code != 0 and "has no memory occupancy" in res.output


def test_an_npus_transfers_each_way_run_one_at_a_time_in_the_order_needed():
    """Swap-outs in layer order, swap-ins from the last layer down, each starting after the
    previous one of its direction has finished (a copy engine per direction); the two
    directions may overlap."""
    costs = table(8, 1 << 20, 500)              # transfers longer than the compute
    r, _, g, _ = run_plan(system(link_gbps=8.0, policy="lms", swapout_threshold=0,
                                 swapin_ahead=6, swapin_groupby=1, sync_mode=0), costs)
    writes = [o for o in r.ops if o["kind"] == "mem_write"]
    reads = [o for o in r.ops if o["kind"] == "mem_read"]
    assert len(writes) == len(reads) == 8
    layer = (lambda o: int(o["name"].split()[2][1:]))    # "npu swap-out l3 to m0"
    for ops, order in ((writes, sorted), (reads, lambda x: sorted(x, reverse=True))):
        by_start = sorted(ops, key=lambda o: o["start"])
        assert [layer(o) for o in by_start] == order([layer(o) for o in ops])
        for a, b in zip(by_start, by_start[1:]):
            assert b["start"] >= a["finish"]


def test_a_convolution_workspace_is_held_while_its_op_runs():
    """workspace_mb = 1: every convolution op holds 1 MiB while it runs, so the peak (inside
    a convolution op, as every layer here is one) is one MiB more."""
    costs = table(6, 1 << 20, 3000)
    ref, _, _, _ = run_plan(system(), costs)
    ws, _, g, _ = run_plan(system(policy="none", workspace_mb=1.0), costs)
    assert ws.memory["devices"]["npu"]["peak_bytes"] == \
        ref.memory["devices"]["npu"]["peak_bytes"] + (1 << 20)
    assert ws.makespan_cycles == ref.makespan_cycles


def test_vdnn_dynamic_offloads_the_least_that_fits():
    """vDNN's dynamic policy: nothing when everything fits, the convolutions' tensors when
    those suffice, everything otherwise."""
    costs = table(8, 1 << 20, 1000, kind=["conv", "norm"] * 4)
    roomy = Budget(capacity=10**9, fraction=1.0, out_bpc=10.0, in_bpc=10.0)
    p = decide({"policy": "offload", "layers": "dynamic"}, costs, roomy)
    assert p.chosen["layers"] == "none" and SWAP not in p.action
    # the conv layers' 4 MiB out leaves 4 MiB (3 norms and the last layer's): fits in 5 MiB
    mid = Budget(capacity=5 << 20, fraction=1.0, out_bpc=10.0, in_bpc=10.0)
    p = decide({"policy": "offload", "layers": "dynamic"}, costs, mid)
    assert p.chosen["layers"] == "conv"
    assert [a == SWAP for a in p.action] == [True, False] * 4
    tight = Budget(capacity=3 << 20, fraction=1.0, out_bpc=10.0, in_bpc=10.0)
    p = decide({"policy": "offload", "layers": "dynamic"}, costs, tight)
    assert p.chosen["layers"] == "all"


@pytest.mark.parametrize("prefetch", [1, 0])
@pytest.mark.parametrize("seed", range(3))
def test_offload_peak_of_a_chain_is_the_closed_form(seed, prefetch):
    """vDNN offload of every stash over links so fast that a transfer ends within the op it
    overlaps: a stash S_j is held from its forward op's start until the next layer's forward
    is done (its swap-out overlaps it), and again from the start of the backward pass of
    layer j + prefetch_layers until its own backward is done. So the peak is the largest of
    S_j + S_(j-1) + out_j over the forward ops and S_j + [prefetch] S_(j-1) + grad_j over
    the backward ops (the last layer keeps its stash, which changes nothing here)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 12))
    S = [int(x) for x in rng.integers(1 << 20, 5 << 20, n)]
    out = [int(x) for x in rng.integers(1, 3 << 20, n)]
    grad = [int(x) for x in rng.integers(1, 3 << 20, n)]
    costs = table(n, S, rng.integers(2000, 5000, n), out=out, grad=grad)
    r, applied, _, _ = run_plan(system(fast=True, policy="offload", prefetch_layers=prefetch),
                                costs)
    assert applied.plans["npu"].counts()["swap"] == n - 1
    prev = [0] + S[:-1]
    oracle = max(max(S[j] + prev[j] + out[j], S[j] + prefetch * prev[j] + grad[j])
                 for j in range(n))
    assert r.memory["devices"]["npu"]["peak_bytes"] == oracle
