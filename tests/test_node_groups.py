"""What a node's own table and the configuration decide (its roofline, collectives engine,
memory, compute units, NIC bandwidths) is worked out once per group of nodes sharing one
table (Topology.node_groups) and given to every node of the group: each equals a reference
that works it out node by node, on systems whose NPUs share some tables and not others."""
import numpy as np
import pytest

from conftest import make_cfg
from pysim.errors import ConfigError
from pysim.models.presets import npu_spec
from pysim.network import nic_bandwidths
from pysim.topology import build
from pysim.workload import endpoint
from pysim.workload.holds import capacities
from pysim.workload.params import compute_params, engine_params

NODES = 12


def system(seed, **npu):
    """A switch star of NPUs, two hosts and a memory node; the NPUs' own tables drawn from
    a few objects (some shared, some equal but distinct, some empty), and a NIC bandwidth
    of their own on some."""
    g = np.random.default_rng(seed)
    nodes = [{"name": f"g{i}", "kind": "npu"} for i in range(NODES)] + \
        [{"name": "h0", "kind": "host"}, {"name": "m", "kind": "mem"},
         {"name": "h1", "kind": "host", "tflops": 3.0}, {"name": "s", "kind": "switch"}]
    for x in nodes[:NODES]:
        if g.random() < 0.3:
            x["injection_gbps"] = float(g.choice([50.0, 200.0]))
        if g.random() < 0.3:
            x["ejection_gbps"] = float(g.choice([70.0, 300.0]))
    cfg = make_cfg(topology={"kind": "graph", "transit": ["switch"], "nodes": nodes,
                             "links": [{"a": x["name"], "b": "s"} for x in nodes[:-1]],
                             "npu": {"preset": "a100", **npu}},
                   workload={"engine": "npu"})
    topo = build(cfg)
    tables = [{}, {"preset": "h100"}, {"sms": 40, "hbm_gb": 20.0},
              {"offload_gbps": 100.0, "reduce_gbps": 300.0, "offload_pieces": 4},
              {"tflops": 50.0, "hbm_gbps": 900.0}]
    mem = list(topo.node_mem)
    for i in range(NODES):
        k = int(g.integers(len(tables) + 1))
        mem[i] = dict(tables[k - 1]) if k == len(tables) else tables[k]   # (a copy: equal,
    topo.node_mem = mem                                                 # not the same)
    return cfg, topo


def ref_compute(topo, cfg):
    clock = cfg.network.clock_ghz
    out = {}
    for i, k in enumerate(topo.node_kinds):
        if k == "npu":
            sp = npu_spec(cfg, topo, i)
            peak = sp.tflops.get("fp32") or max(sp.tflops.values())
            out[i] = (peak * 1e3 / clock, sp.hbm_bytes_per_s / 1e9 / clock)
        elif k == "host":
            d = cfg.topology.host or {}
            own = topo.node_mem[i]
            out[i] = (own.get("tflops", d.get("tflops", 2.0)) * 1e3 / clock,
                      own.get("dram_gbps", d.get("dram_gbps", 100.0)) / clock)
    return out


def ref_engine(topo, cfg):
    clock, d = cfg.network.clock_ghz, cfg.topology.npu or {}
    return {i: (topo.node_mem[i].get("offload_gbps", d.get("offload_gbps", 256.0)) / clock,
                int(topo.node_mem[i].get("offload_sram_mb", d.get("offload_sram_mb", 8.0))
                    * 2 ** 20),
                topo.node_mem[i].get("reduce_gbps", d.get("reduce_gbps", 450.0)) / clock,
                max(1, int(topo.node_mem[i].get("offload_pieces", d.get("offload_pieces", 16)))))
            for i, k in enumerate(topo.node_kinds) if k == "npu"}


def ref_units(cfg, topo):
    out = {}
    for i, k in enumerate(topo.node_kinds):
        if k == "npu":
            preset = npu_spec(cfg, topo, i).name
            u = endpoint.comm_units(cfg, endpoint.npu_sms(cfg, topo, i, preset), preset)
            if u:
                out[topo.node_names[i]] = u
    return out


def ref_nics(topo, cfg):
    net = cfg.network
    inj, ej = np.zeros(topo.n_nodes), np.zeros(topo.n_nodes)
    for i in topo.endpoints():
        a, b = topo.node_injection_gbps[i], topo.node_ejection_gbps[i]
        a = a if a is not None else net.injection_gbps
        b = b if b is not None else net.ejection_gbps
        inj[i] = net.flit_bytes if a is None else a / net.clock_ghz
        ej[i] = net.flit_bytes if b is None else b / net.clock_ghz
    return inj, ej


@pytest.mark.parametrize("seed", range(8))
def test_per_group_equals_per_node(seed):
    cfg, topo = system(seed)
    groups = topo.node_groups("npu")
    assert sorted(i for g in groups for i in g) == list(range(NODES))
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    for g in groups:
        assert g == sorted(g) and all(topo.node_mem[i] is topo.node_mem[g[0]] for i in g)
    assert len(groups) < NODES                  # (some NPUs do share a table)
    assert compute_params(topo, cfg) == ref_compute(topo, cfg)
    assert engine_params(topo, cfg) == ref_engine(topo, cfg)
    units = endpoint.held_units(cfg, topo, "npu")
    assert units == ref_units(cfg, topo) and list(units) == list(ref_units(cfg, topo))
    assert capacities(topo, cfg) == {
        i: int(round(npu_spec(cfg, topo, i).hbm_capacity_bytes)) if k == "npu" else
        int(round({"host": 256.0, "mem": 128.0}[k] * 1e9))
        for i, k in enumerate(topo.node_kinds) if k != "switch"}
    hbm = compute_params(topo, cfg)
    ends = endpoint.endpoint_arrays(cfg, topo, lambda i: hbm[i][1] * 1e9)
    for i in range(NODES):
        preset = npu_spec(cfg, topo, i).name
        k_all = endpoint.npu_sms(cfg, topo, i, preset)
        k = endpoint.comm_units(cfg, k_all, preset)
        assert (ends["sms"][i], ends["units"][i]) == (k_all, k)
        assert ends["reduce_fraction"][i] == (k / k_all if k_all and k else 1.0)
        assert ends["comm_hbm"][i] == (k / k_all if k_all and k else 1.0)
    for got, want in zip(nic_bandwidths(topo, cfg), ref_nics(topo, cfg)):
        assert got.tolist() == want.tolist()


def test_a_refusal_names_the_first_npu_in_node_order():
    """comm_hbm_gbps below the least share of a 20,000 GB/s HBM: the first NPU of that HBM
    in node order is named, whichever group it is in."""
    cfg, topo = system(0)
    big = {"hbm_gbps": 2e7}
    topo.node_mem[:NODES] = [{} if i % 4 != 3 else (big if i < 9 else dict(big))
                             for i in range(NODES)]
    cfg = cfg.with_overrides({"workload.comm_hbm_gbps": 1e-2})
    hbm = {i: (0.0, npu_spec(cfg, topo, i).hbm_bytes_per_s / 1e9) for i in range(NODES)}
    with pytest.raises(ConfigError, match="HBM bandwidth of g3 "):
        endpoint.endpoint_arrays(cfg, topo, lambda i: hbm[i][1] * 1e9)
