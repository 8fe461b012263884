"""Collectives against the alpha-beta closed forms: p
participants, N bytes each, link bandwidth B, per-step latency alpha.

    ring reduce-scatter / all-gather    (p-1) alpha + (p-1)/p N/B
    ring all-reduce                    2(p-1) alpha + 2(p-1)/p N/B
    bidirectional-ring all-reduce      2(p-1) alpha + (p-1)/p N/B
    halving-doubling all-reduce        2 log2(p) alpha + 2(p-1)/p N/B

Small N: the latency terms, exactly (alpha = the zero-load time of a one-flit message to the
neighbour). Large N: within 3% of the bandwidth term plus the latency terms."""

import math
import os

import pytest

from conftest import TOPOLOGIES, make_cfg
from pysim import load
from pysim.network import compile_network
from pysim.errors import ConfigError
from pysim.sim import simulate
from pysim.workload import collectives

# a network that lets one stream use a whole link: enough VCs, VC reuse after the tail,
# buffers over the credit round trip, long packets
FAST = {"vcs": 4, "wait_for_tail_credit": False, "vc_buffer_flits": 16}


def ring8(**net):
    return {"topology": {"kind": "ring", "size": 8}, "network": {**FAST, **net}}


def star8(**net):
    return {"topology": {"kind": "switch", "size": 8}, "network": {**FAST, **net}}


def run(system, **workload):
    cfg = make_cfg(**system, workload={"kind": "collective", "packet_flits": 16, **workload})
    return simulate(cfg).to_dict()


def dgx1(**workload):
    """The shipped DGX-1 config running a collective, and its topology."""
    cfg = load(os.path.join(TOPOLOGIES, "dgx1-v100.toml"),
               {"workload.kind": "collective", **{f"workload.{k}": v for k, v in
                                                  workload.items()}})
    return cfg, compile_network(cfg).topo


def linked(topo, pairs):
    """Is every (node name, node name) pair joined by a direct channel?"""
    idx = {n: i for i, n in enumerate(topo.node_names)}
    links = {(topo.ch_src[c], topo.ch_dst[c]) for c in range(topo.n_channels)}
    return all((idx[a], idx[b]) in links for a, b in pairs)


def cycle(order):
    return list(zip(order, order[1:] + order[:1]))


def alpha_one_flit_one_hop():
    # NIC injection delay, NIC -> router, two routers of 4 cycles, one link, router -> NIC:
    # 1 + 1 + 8 + 1 + 1
    return 12


@pytest.mark.parametrize("collective,steps", [("all_reduce", 14), ("reduce_scatter", 7),
                                              ("all_gather", 7)])
def test_small_ring_collectives_cost_their_latency_terms_exactly(collective, steps):
    r = run(ring8(), collective=collective, algorithm="ring", bytes=8 * 32, chunks=1)
    assert r["collective_cycles"] == steps * alpha_one_flit_one_hop()


@pytest.mark.parametrize("collective,algorithm,factor,system,net", [
    ("all_reduce", "ring", 2 * 7 / 8, ring8, {}),
    ("reduce_scatter", "ring", 7 / 8, ring8, {}),
    ("all_gather", "ring", 7 / 8, ring8, {}),
    # both directions at once: the NIC must inject two flits per cycle
    ("all_reduce", "bidir_ring", 7 / 8, ring8, {"injection_gbps": 64.0, "ejection_gbps": 64.0}),
    ("all_reduce", "halving_doubling", 2 * 7 / 8, star8, {}),
    ("all_reduce", "direct", 2 * 7 / 8, star8, {}),
])
def test_large_collectives_reach_the_bandwidth_term(collective, algorithm, factor, system, net):
    N = 4 << 20
    r = run(system(**net), collective=collective, algorithm=algorithm, bytes=N, chunks=4)
    bandwidth_term = factor * N / 32            # B = 32 bytes/cycle
    steps = {"ring": 2 * 7, "bidir_ring": 2 * 7, "halving_doubling": 2 * 3, "direct": 2}
    latency = steps[algorithm] * 30             # generous per-step latency allowance
    t = r["collective_cycles"]
    assert bandwidth_term <= t <= 1.03 * bandwidth_term + latency, (t, bandwidth_term)


def test_a_collective_reports_what_each_link_carried():
    """Ring all-reduce of N bytes on a ring: each link in the ring's direction carries
    2(p-1)/p N bytes, the other direction nothing; the per-link flits add up to the flit hops,
    and the utilisation is carried / (makespan x bandwidth)."""
    N = 1 << 20
    r = run(ring8(), collective="all_reduce", algorithm="ring", bytes=N)
    links = r["links"]
    assert len(links) == 16
    used = [l for l in links if l["flits"]]
    assert len(used) == 8
    assert {l["flits"] for l in used} == {2 * 7 * N // 8 // 32}
    assert sum(l["flits"] for l in links) == r["flit_hops"]
    for l in used:                     # 32 GB/s at 1 GHz: one flit per cycle
        assert l["utilisation"] == pytest.approx(l["flits"] / r["makespan_cycles"])


def test_algbw_and_busbw_follow_nccl_tests_conventions():
    r = run(ring8(), collective="all_reduce", algorithm="ring", bytes=1 << 20)
    t_s = r["collective_cycles"] / 1e9                     # 1 GHz
    assert r["algbw_gbps"] == pytest.approx((1 << 20) / t_s / 1e9)
    assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * 7 / 8)
    g = run(ring8(), collective="all_gather", algorithm="ring", bytes=1 << 20)
    assert g["busbw_gbps"] == pytest.approx(g["algbw_gbps"] * 7 / 8)


def test_every_node_sends_what_the_algorithm_says():
    """Bytes on the wire per node: ring all-reduce 2(p-1)/p N, halving-doubling the same,
    all-to-all (p-1)/p N."""
    for alg in ("ring", "halving_doubling", "direct", "bidir_ring"):
        g = collectives.build("all_reduce", alg, [f"n{i}" for i in range(8)], 8000, chunks=2)
        sent = {}
        for k, node, size in zip(g.kind, g.node, g.size):
            if k == "send":
                sent[node] = sent.get(node, 0) + size
        assert set(sent.values()) == {2 * 7 * 1000}, alg
    g = collectives.build("all_to_all", "direct", [f"n{i}" for i in range(8)], 8000)
    assert {sum(s for k, n, s in zip(g.kind, g.node, g.size) if n == f"n{i}")
            for i in range(8)} == {7000}


def test_a_direct_all_reduce_has_dependencies_quadratic_in_its_participants():
    """Each of the p(p-1) sends of the all-gather half waits for its block's p-1
    reductions through one join op: per chunk p(p-1) reductions after their send, p joins
    after p-1 reductions each, p(p-1) sends after a join -- 3p(p-1) dependencies, not the
    p(p-1)^2 + p(p-1) of every send waiting on every reduction (1.07 billion, 8 GB of ids,
    at 1,024 participants)."""
    for p in (4, 16, 64):
        g = collectives.build("all_reduce", "direct", [f"n{i}" for i in range(p)],
                              64 * p, chunks=2)
        assert sum(len(a) for a in g.after) == 2 * 3 * p * (p - 1), p


def test_the_dgx1_ring_follows_nvlinks():
    cfg, topo = dgx1()
    order = collectives.ring_order(cfg, topo, collectives.participants(cfg, topo))
    assert sorted(order) == [f"gpu{i}" for i in range(8)]
    assert linked(topo, cycle(order))              # every ring hop is a direct NVLink


@pytest.mark.parametrize("topo,has_cycle", [
    ({"kind": "mesh", "dims": [8, 8]}, True), ({"kind": "torus", "dims": [4, 4, 4]}, True),
    ({"kind": "mesh", "dims": [6, 5]}, True), ({"kind": "torus", "dims": [3, 6]}, True),
    ({"kind": "mesh", "dims": [2, 3, 3]}, True),
    ({"kind": "mesh", "dims": [5, 5]}, False),     # bipartite, 25 nodes: no such cycle
])
def test_rings_of_more_than_16_on_grids_go_through_direct_links(topo, has_cycle):
    cfg = make_cfg(topology=topo, workload={"kind": "collective"})
    t = compile_network(cfg).topo
    group = collectives.participants(cfg, t)
    order = collectives.ring_order(cfg, t, group)
    assert sorted(order) == sorted(group)
    assert linked(t, cycle(order)) == has_cycle
    if not has_cycle:
        assert order == group                     # node order, as documented


def test_a_bidirectional_ring_on_a_mesh_streams_at_the_nic_rate():
    """Bidirectional-ring all-reduce on an 8x8 mesh through neighbour links: each node
    sends one flit a cycle in all (its NIC's rate, 32 GB/s), so busbw -> 32 GB/s (the
    ring in node order crosses the mesh at each row's end: 21 GB/s)."""
    cfg = make_cfg(topology={"kind": "mesh", "dims": [8, 8]}, network=FAST,
                   workload={"kind": "collective", "algorithm": "bidir_ring",
                             "bytes": 1 << 20, "packet_flits": 16})
    assert simulate(cfg).to_dict()["busbw_gbps"] >= 0.95 * 32.0


def test_halving_doubling_ranks_the_dgx1_in_node_order():
    """Ranks follow the ring only for ring algorithms. In node order every halving-doubling
    partner on a DGX-1 is an NVLink peer (the cube-mesh is built for it: XOR 1, 2, 4); in
    ring order some were two hops away (busbw 18 GB/s at 1 MB, now 29)."""
    cfg, topo = dgx1(algorithm="halving_doubling", bytes=1 << 16)
    g, meta = collectives.collective_graph(cfg, topo)
    assert meta["order"] == [f"gpu{i}" for i in range(8)]
    sends = [(a, b) for k, a, b in zip(g.kind, g.node, g.dst) if k == "send"]
    assert sends and linked(topo, sends)


@pytest.mark.parametrize("nbytes", [256 << 10, 16 << 20])
def test_the_dgx1_ring_uses_both_links_of_each_nvlink_pair(nbytes):
    """The DGX-1 ring runs over double NVLinks (two 25 GB/s channels per direction): a ring
    all-reduce must approach their 50 GB/s (the bandwidth term 2(p-1)/p N / B: busbw -> B).
    The NIC reaches a pair through several injection ports, each sending one flit a cycle;
    if one port held both channels of the pair (its packets in two VCs), the pair would carry
    one flit a cycle (32 GB/s) for as long as that lasted (busbw was 32.7 at 16 MB, 38.6 at
    256 KB before a port holding one channel of a pair asked after the others)."""
    cfg, _ = dgx1(bytes=nbytes)
    r = simulate(cfg).to_dict()
    assert 0.9 * 50.0 <= r["busbw_gbps"] <= 50.0


@pytest.mark.parametrize("workload,fragment", [
    ({"algorithm": "halving_doubling", "group": ["n0", "n1", "n2", "n3", "n4", "n5"]},
     "power-of-two"),
    ({"algorithm": "ring", "collective": "all_to_all"}, "does not implement"),
    ({"group": ["n0", "n9"]}, "'n9' is not a node"),
    ({"ring_order": ["n0", "n1"]}, "expected the participants"),
    ({"algorithm": "butterfly"}, "workload.algorithm = 'butterfly'"),
    ({"engine": "npu", "bytes": 40 * 10**9}, "more than the HBM of n0"),
    ({"algorithm": "tree", "collective": "all_gather"}, "does not implement"),
])
def test_bad_collectives_are_refused(workload, fragment):
    with pytest.raises(ConfigError) as e:
        run(ring8(), **workload)
    assert fragment in str(e.value)


def test_offload_engine_moves_3x_less_hbm_and_spares_concurrent_compute():
    """Ring all-reduce on 8 NPUs with a memory-bound layer running on npu0 at the same time.
    On the NPU a reduced block costs 5 bytes of HBM traffic per byte (written, read with the
    local block, result written, read to send) and a forwarded one 2; the offload engine
    touches HBM only to load the input and store the result: 3.5 vs 1.14 bytes per network
    byte. The layer shares the HBM with the collective's traffic, so it slows under the NPU
    baseline and much less under the engine: it loses about the collective's own memory time
    (it shares the HBM in proportion), about 3x more under the NPU."""
    from pysim.workload import OpGraph, run_graph
    ratio, slow, isolated = {}, {}, None
    for engine in ("npu", "offload"):
        # fast links (150 GB/s) against a 300 GB/s HBM, as in ACE's setting: the NPU-run
        # collective needs 3.5 x 150 GB/s of HBM, more than there is
        cfg = make_cfg(topology={"kind": "switch", "size": 8, "link_gbps": 150.0,
                                 "npu": {"hbm_gbps": 300.0}},
                       network={**FAST, "injection_gbps": 150.0, "ejection_gbps": 150.0},
                       workload={"kind": "collective", "packet_flits": 16, "engine": engine,
                                 "bytes": 8 << 20})
        topo = compile_network(cfg).topo
        g = OpGraph()
        g.compute("npu0", flops=10**6, bytes=120 * 10**6, name="layer")  # 400000 cycles alone
        graph, meta = collectives.collective_graph(cfg, topo, graph=g)
        res = run_graph(cfg, graph)
        per = collectives.endpoint_report(graph, res, meta["order"], 1.0)
        ratio[engine] = per["npu3"]["hbm_bytes_per_network_byte"]
        layer = res.ops[0]
        isolated = layer["isolated_cycles"]
        slow[engine] = layer["finish"] - layer["start"] - isolated
    assert isolated == 400000
    assert ratio["npu"] == pytest.approx(3.5)
    assert ratio["offload"] == pytest.approx(2 / 1.75)
    assert ratio["npu"] / ratio["offload"] >= 3
    # the collective's memory time alone: 7(p-1)/p x 8 MiB at 300 bytes per cycle under
    # the NPU, 2 x 8 MiB under the engine
    assert slow["npu"] == pytest.approx(7 * 7 / 8 * (8 << 20) / 300, rel=0.1)
    assert slow["offload"] == pytest.approx(2 * (8 << 20) / 300, rel=0.1)


def ring8_slow_links(engine, nbytes, sram_mb=None):
    """8 NPUs on a ring of 53.7 GB/s links of 500 ns, NICs at twice the link."""
    B = 53.7
    return make_cfg(topology={"kind": "ring", "size": 8, "link_gbps": B,
                              "link_latency_ns": 500.0,
                              "npu": {"offload_sram_mb": sram_mb} if sram_mb else None},
                    network={"vcs": 4, "vc_buffer_flits": 2048, "wait_for_tail_credit": False,
                             "injection_gbps": 2 * B, "ejection_gbps": 2 * B},
                    workload={"kind": "collective", "packet_flits": 16, "bytes": nbytes,
                              "engine": engine})


@pytest.mark.parametrize("N,sram_mb", [(8 << 20, 2),
                                       pytest.param(32 << 20, None, marks=pytest.mark.slow)])
def test_offload_engine_streams_a_large_all_reduce_at_link_bandwidth(N, sram_mb):
    """A ring all-reduce of 32 MiB with the default 4 chunks of 8 MiB and the default 8 MiB
    SRAM (and the same at a quarter: 8 MiB, chunks and SRAM of 2 MiB): the engine streams
    each chunk through its SRAM in pieces, so it runs at the links' bandwidth,
    2(p-1)/p N / B, within 1% (whole chunks that fill the SRAM, one after the other, would
    take 1.19x). The NPU running the same collective, with the whole HBM for its budget,
    streams each step's block through its memory as it arrives (csim/_dag.pxd's streams)
    and runs at the links' bandwidth too, within 1%."""
    t = {e: simulate(ring8_slow_links(e, N, sram_mb)).to_dict()["collective_cycles"]
         for e in ("npu", "offload")}
    bandwidth_term = 2 * 7 / 8 * N / 53.7
    assert bandwidth_term <= t["offload"] <= 1.01 * bandwidth_term
    assert bandwidth_term <= t["npu"] <= 1.01 * bandwidth_term


@pytest.mark.parametrize("N,sram_mb", [(8 << 20, 2),
                                       pytest.param(32 << 20, None, marks=pytest.mark.slow)])
def test_offload_engine_is_no_slower_than_the_npu_on_the_dgx1(N, sram_mb):
    """32 MB all-reduce on the shipped DGX-1 with default chunking (and the same at a
    quarter: 8 MB, an SRAM of 2 MB): the offload engine, which touches HBM about 3x less per
    network byte, finishes no later than the NPU (whole chunks through the SRAM one at a time
    made it 15% slower)."""
    t = {}
    for e in ("npu", "offload"):
        cfg, _ = dgx1(bytes=N, engine=e)
        if sram_mb:
            cfg = cfg.with_overrides({"topology.npu.offload_sram_mb": sram_mb})
        t[e] = simulate(cfg).to_dict()["collective_cycles"]
    assert t["offload"] <= t["npu"]


@pytest.mark.parametrize("pieces", [4, 16])
def test_offload_engine_sram_bounds_the_bytes_in_flight(pieces):
    """Per node, the bytes loaded into the engine's SRAM and not yet stored back never pass
    its size, and the engine does fill it (pieces of SRAM / offload_pieces stream, several
    at a time). Loads are the memory ops that wait only for stores; stores wait for the
    piece's last step."""
    from pysim.workload import run_graph
    sram = 1 << 20
    cfg = make_cfg(topology={"kind": "ring", "size": 4, "npu": {"offload_sram_mb": 1,
                                                              "offload_pieces": pieces}},
                   network=FAST, workload={"kind": "collective", "packet_flits": 16,
                                           "bytes": 8 << 20, "engine": "offload"})
    topo = compile_network(cfg).topo
    g, _ = collectives.collective_graph(cfg, topo)
    res = run_graph(cfg, g)
    events = {}
    for i, op in enumerate(res.ops):
        if op["kind"] != "memory":
            continue
        load = all(g.kind[d] == "memory" for d in g.after[i])
        ev = events.setdefault(op["node"], [])
        ev.append((op["start"], 1, op["size"]) if load else (op["finish"], 0, -op["size"]))
    for node, ev in events.items():
        held = peak = 0
        for _, _, b in sorted(ev):            # at equal times, stores free before loads take
            held += b
            peak = max(peak, held)
        assert held == 0
        assert sram // 2 < peak <= sram, (node, peak)
        assert len(ev) == 2 * (8 << 20) // (sram // pieces)      # a load and a store each


def test_offload_engine_reduces_as_data_arrives():
    """Two NPUs reduce-scatter on the engine: each node's reduction of the half it receives
    runs while the message arrives, so it ends one packet's reduction after the data, not
    a whole block's reduction after it; with an engine slower than the link it ends when
    the engine has done all the work since the message started."""
    from pysim.workload import run_graph
    out = {}
    for gbps in (256.0, 4.0):              # faster and slower than the 32 GB/s link
        cfg = make_cfg(topology={"kind": "ring", "size": 2, "npu": {"offload_gbps": gbps}},
                       network=FAST, workload={"kind": "collective", "packet_flits": 16,
                                               "collective": "reduce_scatter", "chunks": 1,
                                               "bytes": 2 << 20, "engine": "offload"})
        topo = compile_network(cfg).topo
        g, _ = collectives.collective_graph(cfg, topo)
        res = run_graph(cfg, g)
        sends = [op for op in res.ops if op["kind"] == "send"]
        red = [op for op in res.ops if op["kind"] == "reduce_offload"]
        arrive = max(op["finish"] for op in sends)
        start = min(op["start"] for op in sends)
        out[gbps] = (max(op["finish"] for op in red), arrive, start)
    done, arrive, _ = out[256.0]
    assert arrive < done <= arrive + math.ceil(512 / 256.0) + 1
    done, arrive, start = out[4.0]
    assert done >= start + (1 << 20) / 4.0 > arrive


def test_collective_json_reports_per_npu_hbm_per_network_byte(tmp_path):
    import json
    from click.testing import CliRunner
    from pysim.cli import main
    out = tmp_path / "o.json"
    res = CliRunner().invoke(main, ["run", os.path.join(TOPOLOGIES, "ring8.toml"),
                                    "--set", "workload.kind=collective",
                                    "--set", "workload.collective=all_reduce",
                                    "--set", "workload.bytes=262144",
                                    "--set", "workload.engine=npu", "--json", str(out)])
    assert res.exit_code == 0, res.output
    d = json.loads(out.read_text())
    for key in ("collective_cycles", "algbw_gbps", "busbw_gbps", "per_npu"):
        assert key in d
    assert set(d["per_npu"]) == {f"n{i}" for i in range(8)}
    assert all(v["hbm_bytes_per_network_byte"] == pytest.approx(3.5)
               for v in d["per_npu"].values())


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_pipelined_broadcast_and_reduce_take_the_pipeline_time(collective):
    """Along a ring of p, C chunks of N/C bytes each move hop by hop: the last chunk arrives
    after (C + p - 2) chunk times of N / (C B), within 3% plus the per-hop latencies."""
    N, C, p = 4 << 20, 16, 8
    r = run(ring8(), collective=collective, algorithm="ring", bytes=N, chunks=C)
    ideal = (C + p - 2) * (N / C) / 32
    assert ideal <= r["collective_cycles"] <= 1.03 * ideal + (C + p) * 30
    assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])


def test_chunks_in_flight_bounds_the_pipeline():
    """One chunk in flight at a time: a ring reduce-scatter of C chunks takes about C times
    its per-chunk time instead of overlapping them."""
    free = run(ring8(), collective="reduce_scatter", algorithm="ring", bytes=1 << 20, chunks=8)
    one = run(ring8(), collective="reduce_scatter", algorithm="ring", bytes=1 << 20, chunks=8,
              chunks_in_flight=1)
    assert one["collective_cycles"] > free["collective_cycles"]
    # structure: without a bound every chunk's first step starts at once (p x C sends wait
    # for nothing); with one chunk in flight only chunk 0's do, and each later first send
    # waits for exactly one op: its own node's last reduction of the chunk before
    names = [f"n{i}" for i in range(4)]
    free_g = collectives.build("reduce_scatter", "ring", names, 4000, chunks=3)
    one_g = collectives.build("reduce_scatter", "ring", names, 4000, chunks=3,
                              chunks_in_flight=1)
    assert sum(k == "send" and not a for k, a in zip(free_g.kind, free_g.after)) == 4 * 3
    assert sum(k == "send" and not a for k, a in zip(one_g.kind, one_g.after)) == 4
    sends = [i for i, k in enumerate(one_g.kind) if k == "send"]
    per_chunk = 4 * 3                       # p nodes x (p - 1) steps, step 0 first
    for c in (1, 2):
        for i in sends[c * per_chunk: c * per_chunk + 4]:
            (dep,) = one_g.after[i]
            assert one_g.kind[dep] == "compute" and one_g.node[dep] == one_g.node[i]
            assert sends[(c - 1) * per_chunk] < dep < sends[c * per_chunk]


def test_hierarchical_all_reduce_on_a_ring_of_rings():
    """4x4 ring of rings, 50 GB/s rings (dimension 0) joined by 25 GB/s rings: reduce-scatter
    in the inner rings, all-reduce of the quarter across, all-gather back. One chunk, so the
    phases follow one another: 3/4 N/50 + 2 (3/4) (N/4)/25 + 3/4 N/50 cycles (1 GHz), within
    3% plus the latency of the 12 steps."""
    N = 4 << 20
    cfg = load(os.path.join(TOPOLOGIES, "ring-of-rings4x4.toml"),
               {"workload.kind": "collective", "workload.algorithm": "hierarchical",
                "workload.bytes": N, "workload.chunks": 1})
    r = simulate(cfg).to_dict()
    ideal = 0.75 * N / 50 + 2 * 0.75 * (N / 4) / 25 + 0.75 * N / 50
    assert ideal <= r["collective_cycles"] <= 1.03 * ideal + 12 * 150
    flat = simulate(cfg.with_overrides({"workload.algorithm": "ring"})).to_dict()
    assert r["collective_cycles"] < flat["collective_cycles"]
    with pytest.raises(ConfigError, match="two or more dimensions"):
        run(star8(), algorithm="hierarchical")


@pytest.mark.parametrize("net", ["flit", "flow"])
def test_bidirectional_hierarchical_all_reduce_uses_both_directions(net):
    """4x4 torus of 32 (dimension 0) and 16 GB/s links, S = 4 MiB, one chunk, no endpoint
    model. hierarchical sends each ring one way: per NPU 3/4 S of reduce-scatter and 3/4 S of
    all-gather on its + link of dimension 0, 2 (3/4) (S/4) = 3/8 S on its + link of dimension
    1, nothing on the - links; the phases one after another, 3 (3/4 S / 32) (the middle one,
    3/8 S / 16, as long), so a bus bandwidth (1.875 S over the time) of 1.875 / (2.25 / 32) =
    26.7 GB/s. bidir_hierarchical halves each dimension's shard, one half each way: every
    directed link of dimension 0 carries 3/4 S, of dimension 1 3/16 S, and the phases take
    half as long: 53.3 GB/s (perfectly pipelined chunks would be bound by dimension 0's
    links: 1.875 / (0.75 / 32) = 80). Bytes per link exactly (whole flits), bandwidth within
    1% plus the steps' latency."""
    S = 4 << 20

    def run_(alg):
        cfg = load(os.path.join(TOPOLOGIES, "torus4x4x4.toml"), {
            "topology.dims": [4, 4], "topology.dim_link_gbps": [32.0, 16.0],
            "workload.kind": "collective", "workload.algorithm": alg, "workload.bytes": S,
            "workload.chunks": 1, "network.model": net})
        r = simulate(cfg)
        carried = {}
        for link in r.links:
            key = (link["src"], link["dst"], round(link["bandwidth_gbps"]))
            carried[key] = carried.get(key, 0) + link["flits"] * cfg.network.flit_bytes
        per_link = {}
        for (_, _, bw), b in carried.items():
            per_link.setdefault(bw, set()).add(b / S)
        return r.to_dict()["collective_cycles"], per_link

    one, links = run_("hierarchical")
    assert links == {32: {0.0, 1.5}, 16: {0.0, 0.375}}
    assert 2.25 * S / 32 <= one <= 1.01 * 2.25 * S / 32 + 12 * 150
    both, links = run_("bidir_hierarchical")
    assert links == {32: {0.75}, 16: {0.1875}}
    assert 1.125 * S / 32 <= both <= 1.01 * 1.125 * S / 32 + 12 * 150


@pytest.mark.parametrize("net", ["flit", "flow"])
def test_an_npu_run_bidirectional_all_reduce_drives_both_directions_at_once(net):
    """The same one-chunk bidir_hierarchical all-reduce run by the NPUs (V100s, 16 SMs, 900
    GB/s of budget): each step reads, sends and reduces its block piece by piece, and the
    two directions' steps run at once (two channels, as an NCCL kernel's), so it takes the
    time with no endpoint model plus at most each of its 12 steps' last piece read and
    reduced (8 cycles), and at least the closed form 1.125 S / 32 (53.3 GB/s per NPU). (With
    the two directions' reads one after the other, each phase would wait a block's read:
    2% more.)"""
    S = 4 << 20
    over = {"topology.dims": [4, 4], "topology.dim_link_gbps": [32.0, 16.0],
            "workload.kind": "collective", "workload.algorithm": "bidir_hierarchical",
            "workload.bytes": S, "workload.chunks": 1, "network.model": net}
    path = os.path.join(TOPOLOGIES, "torus4x4x4.toml")
    alone = simulate(load(path, over)).to_dict()["collective_cycles"]
    npu = simulate(load(path, {**over, "topology.npu.preset": "v100",
                               "workload.engine": "npu", "workload.comm_sms": 16,
                               "workload.comm_hbm_gbps": 900.0})).to_dict()
    assert 1.125 * S / 32 <= alone <= npu["collective_cycles"] <= alone + 12 * 8


def test_double_binary_tree_all_reduce():
    """Two mirrored heap-shaped binary trees over 8 NPUs on a switch: every node is interior
    in at most one tree; each tree moves N/2 up p-1 edges and down p-1 edges, so 2(p-1)N
    bytes cross the network; a 1-flit-per-tree all-reduce takes 2 x depth (3) message
    latencies, a message being 1 + 1 + 3 routers x 4 + 2 links + 1 = 17 cycles (the NIC's
    injection delay and channel, routers, links, ejection channel)."""
    p = 8
    parents = [[collectives._tree_parent(i, p, m) for i in range(p)] for m in (False, True)]
    interior = [{q for q in par if q >= 0} for par in parents]
    assert not (interior[0] & interior[1])
    N = 4000
    g = collectives.build("all_reduce", "tree", [f"n{i}" for i in range(p)], N, chunks=3)
    assert sum(s for k, s in zip(g.kind, g.size) if k == "send") == 2 * (p - 1) * N
    r = run(star8(), collective="all_reduce", algorithm="tree", bytes=2 * 32, chunks=1)
    assert 6 * 17 <= r["collective_cycles"] <= 6 * 17 + 6
    big = run(star8(), collective="all_reduce", algorithm="tree", bytes=4 << 20, chunks=16)
    # each node sends at most 2N (interior: N/2 up, N down; leaf: N/2 up) at 32 B/cycle,
    # and the pipeline of 16 chunks fills 6 levels: (16 + 6) / 16 x 2N / 32
    assert 2 * (4 << 20) / 32 <= big["collective_cycles"] <= 1.03 * 22 / 16 * 2 * (4 << 20) / 32
