"""Memory transfers at the two levels: at the flow level a swap is one flow (S / B plus the
route's latency over a link of B), counted in a few engine ops whatever its size; the flit
and flow levels agree on small memory-plan cases."""
import pytest

from conftest import make_cfg
from pysim.workload import transfer
from pysim.workload.graph import GraphError, OpGraph, run_graph
from test_memory_training import conv_net, run, system


def one_link(model, gbps=16.0, latency_ns=100.0, mem_latency_ns=100.0):
    nodes = [{"name": "npu", "kind": "npu", "hbm_gbps": 900.0},
             {"name": "m0", "kind": "mem", "mem_gbps": 1000.0,
              "mem_latency_ns": mem_latency_ns}]
    for n in nodes:
        n["injection_gbps"] = n["ejection_gbps"] = 1000.0
    return make_cfg(topology={"kind": "graph", "nodes": nodes,
                              "links": [{"a": "npu", "b": "m0", "gbps": gbps,
                                         "latency_ns": latency_ns}]},
                    network={"model": model}, workload={"packet_flits": 16})


@pytest.mark.parametrize("size", [1 << 20, 1 << 24, 1_600_000_000])
def test_a_flow_level_swap_takes_bytes_over_bandwidth_plus_latency(size):
    """A swap-out then a swap-in of S bytes over one 16 GB/s link of 100 ns (HBM at 900 GB/s,
    the memory node at 1,000 GB/s: the link is the narrowest part): each takes S / 16 cycles
    plus the link's latency (100) and the memory node's access latency (100); the swap-in
    also waits for its request's trip (100 and a few cycles)."""
    g = OpGraph()
    w = g.mem_write("npu", "m0", size)
    g.mem_read("npu", "m0", size, after=[w])
    r = run_graph(one_link("flow"), g)
    ideal = 2 * (size / 16 + 100 + 100) + 100
    assert ideal <= r.makespan_cycles <= ideal + 50, (r.makespan_cycles, ideal)


def test_a_flow_level_transfer_is_a_few_engine_ops_whatever_its_size():
    for size in (0, 1, 1 << 20, 10**12):
        assert transfer.engine_ops("mem_write", size, 65536, True) <= 2 * 64 + 2
        assert transfer.engine_ops("mem_read", size, 65536, True) <= 2 * 64 + 3
    assert transfer.engine_ops("mem_write", 1 << 30, 65536, False) == 3 * (1 << 14)


def test_the_op_count_refusal_names_the_key_for_the_level():
    """At the flit level a transfer in many small pieces is refused before anything is
    built, naming workload.mem_piece_bytes and the flow level; at the flow level the same
    graph runs."""
    g = OpGraph()
    w = g.mem_write("npu", "m0", 1 << 40)
    cfg = one_link("flit").with_overrides({"workload.mem_piece_bytes": 1})
    with pytest.raises(GraphError, match=r"workload.mem_piece_bytes = 1 at the flit level.*"
                                         r"network.model = 'flow'"):
        run_graph(cfg, g)
    g = OpGraph()
    g.mem_write("npu", "m0", 1 << 30)
    r = run_graph(one_link("flow").with_overrides({"workload.mem_piece_bytes": 1}), g)
    assert r.makespan_cycles >= (1 << 30) / 16


@pytest.mark.parametrize("policy", ["offload", "lms", "karma", "offload+compression"])
def test_flit_and_flow_levels_agree_on_memory_plans(policy):
    """A convolutional network's iteration with its stashes offloaded to a memory node over
    a 32 GB/s link: the flow level within 5% of the flit level."""
    times = {}
    for model in ("flit", "flow"):
        c = system(policy, batch=32, hbm_gb=1.0 if policy == "offload" else 0.02)
        c = c.with_overrides({"network.model": model})
        r, applied, _, times[model] = run(c, conv_net(), check=False)
        assert applied.plans["npu"].counts()["swap"] > 0
    assert times["flow"] == pytest.approx(times["flit"], rel=0.05), times
