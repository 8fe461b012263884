"""The rates and sizes of a topology's nodes that op graphs are compiled against: an NPU's or
host's roofline, an NPU's collectives engine, a memory node's bandwidth, latency and capacity."""
from __future__ import annotations

from pysim.models.presets import npu_spec
from pysim.errors import ConfigError
from pysim.schema import MAX_INT
from pysim.topology import at_clock, cycles_text, ns_to_cycles
from pysim.workload.base import last_of


@last_of
def compute_params(topo, cfg):
    """Per NPU or host: (FLOPs per cycle, memory bytes per cycle) of its roofline. An NPU's
    from its accelerator spec (pysim.models.presets.npu_spec: [topology.npu] preset, tflops,
    hbm_gbps, or the node's own): its fp32 peak (its highest if it has none) and its HBM
    bandwidth; a host's from [topology.host] (tflops, dram_gbps) or its own values."""
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    out = [None] * topo.n_nodes
    for idx in topo.node_groups("npu"):          # (one spec per group of NPUs)
        sp = npu_spec(cfg, topo, idx[0])
        peak = sp.tflops.get("fp32") or max(sp.tflops.values())
        v = (peak * 1e3 / clock, sp.hbm_bytes_per_s / 1e9 / clock)
        for i in idx:
            out[i] = v
    for i, k in enumerate(topo.node_kinds):
        if k == "host":
            d = (cfg.topology.host or {}) if cfg else {}
            own = topo.node_mem[i] if topo.node_mem else {}
            tflops = own.get("tflops", d.get("tflops", 2.0))
            gbps = own.get("dram_gbps", d.get("dram_gbps", 100.0))
            out[i] = (tflops * 1e3 / clock, gbps / clock)
    return {i: v for i, v in enumerate(out) if v is not None}


@last_of
def engine_params(topo, cfg):
    """Per NPU: (offload-engine reduction bytes per cycle, its SRAM bytes, the NPU cores'
    reduction bytes per cycle, the pieces the engine streams its SRAM in), from
    [topology.npu] offload_gbps (default 256), offload_sram_mb (8), reduce_gbps (450) and
    offload_pieces (16), or the node's own."""
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    d = (cfg.topology.npu or {}) if cfg is not None else {}
    out = [None] * topo.n_nodes
    for idx in topo.node_groups("npu"):          # (once per group of NPUs)
        own = topo.node_mem[idx[0]] if topo.node_mem else {}
        v = (own.get("offload_gbps", d.get("offload_gbps", 256.0)) / clock,
             int(own.get("offload_sram_mb", d.get("offload_sram_mb", 8.0)) * 2 ** 20),
             own.get("reduce_gbps", d.get("reduce_gbps", 450.0)) / clock,
             max(1, int(own.get("offload_pieces", d.get("offload_pieces", 16)))))
        for i in idx:
            out[i] = v
    return {i: v for i, v in enumerate(out) if v is not None}


def memory_params(topo, cfg):
    """Per memory node: (bytes per cycle, access latency in cycles, capacity in bytes)."""
    out = {}
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    d = (cfg.topology.mem or {}) if cfg is not None else {}
    for i, k in enumerate(topo.node_kinds):
        if k != "mem":
            continue
        own = topo.node_mem[i] if topo.node_mem else {}
        gbps = own.get("mem_gbps", d.get("gbps", 100.0))
        lat = own.get("mem_latency_ns", d.get("latency_ns", 50.0))
        cap = own.get("capacity_gb", d.get("capacity_gb", 128.0))
        cycles = ns_to_cycles(lat, clock)
        if cycles > MAX_INT:               # (the engine counts cycles in 64 bits)
            key = f"topology.nodes' {topo.node_names[i]}.mem_latency_ns" \
                if "mem_latency_ns" in own else "topology.mem.latency_ns"
            raise ConfigError(f"memory node {topo.node_names[i]}: latency "
                              f"{cycles_text(cycles)}; expected at most {MAX_INT:,} ({key} "
                              f"= {lat:g}{at_clock(cfg) if cfg is not None else ''})")
        out[i] = (gbps / clock, cycles, int(cap * 1e9))
    return out
