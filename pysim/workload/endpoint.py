"""The NPU endpoint as compute units and memory, as collectives use them.

An NPU has `topology.npu.sms` compute units (SMs; a preset gives its datasheet count). A
collective the NPU runs itself (`workload.engine = "npu"`) holds `workload.comm_sms` of them
from its start at the NPU to its end there, whether data is moving or not, as an NCCL kernel
holds one SM per channel; meanwhile the NPU's compute runs at (sms - held) / sms of peak. The
collective's copies and reductions move through the NPU's memory on a budget of
`workload.comm_hbm_gbps` (default: the held units' share of the HBM bandwidth), and its
reductions run on the held units at their share of `topology.npu.reduce_gbps`. Compute's,
communication's and memory transfers' traffic share the HBM max-min fairly (water-filling),
communication's share capped at its budget (csim/_dag.pxd). A collectives offload engine
holds no units: its memory traffic shares the HBM with compute's, capped only if a budget is
given.

Collectives of one communicator (one group of NPUs) run in the order they are issued, as NCCL
runs the kernels of one stream: `workload.comm_streams` streams per communicator (default 1).

csim carries all of it (csim/_dag.pxd): a collective's take/free ops change its NPU's held
units, and the units' rates change only when the held units or the busy memory units do.
"""
from __future__ import annotations

import numpy as np

from pysim.errors import ConfigError
from pysim.models.presets import npu_spec
from pysim.schema import Key, declare

# Compute units per preset: streaming multiprocessors from the vendors' datasheets and
# whitepapers (V100 SXM2 80, A100 108, H100 SXM5 132); a TPU v3 chip's two TensorCores.
SMS = {"v100": 80, "a100": 108, "h100": 132, "tpu_v3": 2}

# The units an NPU-run collective holds by default: the channel count an NCCL user of such a
# system sees for a ring all-reduce within a node (assumed round figures: 8 on a V100
# DGX-1, 16 on A100 and H100 NVSwitch systems); one core of a TPU v3.
COMM_SMS = {"v100": 8, "a100": 16, "h100": 16, "tpu_v3": 1}

MIN_SHARE = 1e-6         # the least budget, as a fraction of the HBM (a bounded slowdown)


MAX_UNITS = 1_000_000


def _nonneg_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_UNITS


def _pos_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_UNITS


def _pos(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


declare(
    Key("workload", "comm_sms", "int", None, "units",
        "Compute units (SMs) an NPU-run collective holds at each NPU from its start to its "
        "end there; compute meanwhile runs at (sms - held) / sms of peak (default: the NCCL "
        "channel count of the preset's systems: v100 8, a100 16, h100 16, tpu_v3 1; no "
        "preset and no topology.npu.sms: no units modelled).",
        (_nonneg_int, "an integer from 0 to 1,000,000")),
    Key("workload", "comm_hbm_gbps", "float", None, "GB/s",
        "Memory bandwidth budget of an NPU-run collective's copies and reductions; compute's "
        "and communication's memory traffic share the HBM max-min fairly, communication's "
        "share capped at this (default: the held units' share of the HBM bandwidth, "
        "comm_sms / sms x hbm_gbps; the whole HBM if no units are modelled and for an "
        "offload engine's traffic).",
        (_pos, "a number > 0")),
    Key("workload", "comm_streams", "int", 1, "-",
        "Collectives of one communicator (one group of NPUs) at once: each waits for the "
        "one issued comm_streams before it on the same group (1: in the order issued, as NCCL "
        "runs one stream).", (_pos_int, "an integer from 1 to 1,000,000")),
)


def npu_sms(cfg, topo, i, preset):
    """NPU i's compute units: its own `sms`, [topology.npu] sms, or its preset's (0: none)."""
    own = (topo.node_mem[i] if topo.node_mem else None) or {}
    table = (cfg.topology.npu or {}) if cfg is not None else {}
    v = own.get("sms", table.get("sms"))
    if v is None:
        return SMS.get(preset, 0)
    if not _nonneg_int(v) or v > MAX_UNITS:
        raise ConfigError(f"topology.npu.sms = {v!r}: expected an integer from 0 to "
                          f"{MAX_UNITS:,}")
    return int(v)


def comm_units(cfg, sms, preset):
    """The units one NPU-run collective holds at an NPU of `sms` units and preset `preset`."""
    w = cfg.workload if cfg is not None else None
    k = getattr(w, "comm_sms", None) if w is not None else None
    if k is None:
        k = COMM_SMS.get(preset, 0) if sms else 0
    if sms and k >= sms:
        raise ConfigError(f"workload.comm_sms = {k}: a collective would hold every one of "
                          f"the NPU's {sms} compute units (topology.npu.sms); expected fewer")
    return int(k)


def endpoint_arrays(cfg, topo, hbm_of):
    """Per node, for csim: its compute units, communication's memory budget as a fraction
    of its memory bandwidth, and the fraction of its cores' reduction rate an NPU-run
    collective's held units reach. hbm_of(i): NPU i's memory bytes per second. Worked out
    once per group of NPUs sharing their own table (Topology.node_groups)."""
    n = topo.n_nodes
    sms = np.zeros(n, np.int32)
    cap = np.ones(n, np.float64)
    red = np.ones(n, np.float64)
    units = np.zeros(n, np.int32)
    w = cfg.workload if cfg is not None else None
    budget = getattr(w, "comm_hbm_gbps", None) if w is not None else None
    offload = getattr(w, "engine", None) == "offload"
    # (the groups in the order of their first NPU: the first NPU in node order that a
    # check refuses is the first of its group, and named)
    for idx in topo.node_groups("npu"):
        i = idx[0]
        preset, hbm = npu_spec(cfg, topo, i).name, hbm_of(i)
        k_all = npu_sms(cfg, topo, i, preset)
        k = comm_units(cfg, k_all, preset)
        sms[idx], units[idx] = k_all, k
        if k_all and k:
            red[idx] = k / k_all
        if budget is not None:         # (the engine's traffic too, when one is given)
            c = min(1.0, budget * 1e9 / hbm)
            if c < MIN_SHARE:
                raise ConfigError(f"workload.comm_hbm_gbps = {budget!r}: less than "
                                  f"{MIN_SHARE:g} of the HBM bandwidth of "
                                  f"{topo.node_names[i]} ({hbm / 1e9:g} GB/s); expected more")
            cap[idx] = c
        elif k_all and k and not offload:     # the engine holds no units: the whole HBM
            cap[idx] = k / k_all
    return dict(sms=sms, comm_hbm=cap, reduce_fraction=red, units=units)


def held_units(cfg, topo, engine):
    """{NPU name: compute units one of its collectives holds} for collectives run by
    `engine` ('npu' holds units; the offload engine and no endpoint model hold none), in
    node order; worked out once per group of NPUs sharing their own table."""
    if engine != "npu":
        return {}
    held = [0] * topo.n_nodes
    for idx in topo.node_groups("npu"):
        preset = npu_spec(cfg, topo, idx[0]).name
        units = comm_units(cfg, npu_sms(cfg, topo, idx[0], preset), preset)
        for i in idx:
            held[i] = units
    return {x: u for x, u in zip(topo.node_names, held) if u}


def streams(cfg):
    """The (state, streams per communicator) that orders one graph's collectives."""
    w = cfg.workload if cfg is not None else None
    return ({}, getattr(w, "comm_streams", None) or 1)
