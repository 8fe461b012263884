"""A run limited by something the user did not set says so in its summary: a NIC left at its
default below the links it feeds, a default rank placement whose groups take a slow detour;
and time spent waiting for a memory plan's transfers is its own category, not "other"."""
import pytest

import pysim


def ring(gbps, **over):
    return pysim.simulate(pysim.load("ring8", {
        "workload.kind": "collective", "workload.bytes": 16 << 20, "network.model": "flow",
        "topology.link_gbps": gbps, **over}))


def test_a_link_sweep_capped_by_the_default_nic_says_so():
    for gbps in (64.0, 128.0):
        r = ring(gbps)
        # the NIC's one flit per cycle (32 GB/s) caps the ring: busbw = the NIC's rate
        assert r.collective["busbw_gbps"] == pytest.approx(32.0, rel=0.01)
        assert any("NIC injects 32 GB/s, the default" in n and "network.injection_gbps" in n
                   for n in r.notes), r.notes
        assert "note" in r.summary()
    half = ring(64.0, **{"network.injection_gbps": 256.0})
    assert any("NIC ejects 32 GB/s" in n and "network.ejection_gbps" in n for n in half.notes)
    lifted = ring(64.0, **{"network.injection_gbps": 256.0, "network.ejection_gbps": 256.0})
    assert lifted.collective["busbw_gbps"] > 48.0 and not lifted.notes
    assert not ring(32.0).notes          # the NIC as fast as the links: nothing to say


def cubemesh(**par):
    return pysim.simulate(pysim.load("gpu16-cubemesh", {
        "workload.kind": "training", "workload.model": "transformer",
        "workload.model_params": {"layers": 4, "hidden": 256, "heads": 4, "seq": 64,
                                  "vocab": 1000},
        "workload.batch": 32, "workload.iterations": 1, "network.model": "flow",
        "workload.parallel": {"tp": 2, "pp": 2, "micro_batches": 2, **par}}))


def test_a_default_placement_over_pcie_says_so():
    r = cubemesh()
    assert any("is not between NPUs: the default rank placement" in n and
               "workload.parallel.order" in n for n in r.notes), r.notes
    assert "16 GB/s" in r.notes[0]       # a PCIe link, where the NVLinks are 25 and 50
    chosen = cubemesh(order=["dp", "tp", "pp"])
    assert not chosen.notes
    assert chosen.training["iteration_cycles"] < r.training["iteration_cycles"]


def test_offload_stalls_are_their_own_category():
    def run(**over):
        return pysim.simulate(pysim.load("mcdla-8", {
            "workload.kind": "training", "workload.model": "resnet50", "workload.batch": 256,
            "workload.iterations": 1, "network.model": "flow",
            "workload.mem_piece_bytes": 1 << 26, **over})).training
    t = run(**{"workload.memory.policy": "offload"})
    parts = (t["compute_cycles"], t["exposed_comm_cycles"], t["memory_stall_cycles"],
             t["other_cycles"])
    assert sum(parts) == t["iteration_cycles"]
    assert t["memory_stall_cycles"] > 0.05 * t["iteration_cycles"]
    assert t["other_cycles"] < 0.01 * t["iteration_cycles"]   # (was all of the stalls)
    assert run()["memory_stall_cycles"] == 0    # no memory plan: nothing to wait for
