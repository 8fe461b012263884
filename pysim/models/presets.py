"""Accelerator presets and the roofline of a layer on an NPU.

`topology.npu.preset = "v100"` (or a graph node's `preset`) fills an NPU's peak FLOP/s per
precision, HBM bandwidth and capacity from the vendor's datasheet; fields given explicitly
(`tflops`, `tflops_fp32`, `tflops_fp16`, `tflops_bf16`, `hbm_gbps`, `hbm_gb`) override them,
a node's own over the [topology.npu] table's. A layer's compute time is the roofline

    max(flops / (peak_flops(precision) * efficiency(kind)), bytes / hbm_bytes_per_s)

with a kernel efficiency per layer kind (`DEFAULT_EFFICIENCY`, overridable by
`topology.npu.efficiency = {conv = 0.6, ...}`).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from pysim.models.layers import KINDS, ModelError

# peak FLOP/s per precision (dense: no structured sparsity), in TFLOP/s; "mixed" runs its
# products at the 16-bit rate. Memory in decimal GB and GB/s, as the datasheets give them.
PRESETS = {
    "v100": dict(
        tflops={"fp32": 15.7, "fp16": 125.0, "mixed": 125.0},
        hbm_gbps=900.0, hbm_gb=32.0,
        source="NVIDIA Tesla V100 GPU Accelerator datasheet (2018), V100 SXM2 32 GB: "
               "15.7 TFLOPS single precision, 125 TFLOPS tensor (fp16), HBM2 900 GB/s; "
               "no bf16"),
    "a100": dict(
        tflops={"fp32": 19.5, "fp16": 312.0, "bf16": 312.0, "mixed": 312.0},
        hbm_gbps=2039.0, hbm_gb=80.0, sms=108,
        source="NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM: 19.5 TFLOPS "
               "fp32, 312 TFLOPS fp16/bf16 tensor (dense), HBM2e 2,039 GB/s; 108 SMs"),
    "a100_40": dict(
        tflops={"fp32": 19.5, "fp16": 312.0, "bf16": 312.0, "mixed": 312.0},
        hbm_gbps=1555.0, hbm_gb=40.0, sms=108,
        source="NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB SXM: 19.5 TFLOPS "
               "fp32, 312 TFLOPS fp16/bf16 tensor (dense), HBM2 1,555 GB/s; 108 SMs"),
    "h100": dict(
        tflops={"fp32": 67.0, "fp16": 989.5, "bf16": 989.5, "mixed": 989.5},
        hbm_gbps=3350.0, hbm_gb=80.0, sms=132,
        source="NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM: 67 TFLOPS fp32, "
               "989.5 TFLOPS fp16/bf16 tensor (dense; 1,979 with sparsity), HBM3 3.35 TB/s; "
               "132 SMs"),
    "tpu_v3": dict(
        tflops={"bf16": 123.0, "mixed": 123.0},
        hbm_gbps=900.0, hbm_gb=32.0,
        source="Jouppi et al.: A Domain-Specific Supercomputer for Training Deep Neural "
               "Networks, CACM 63(7), 2020 (TPU v3 chip: 123 TFLOPS bf16, 32 GiB HBM at "
               "900 GB/s); its matrix units take bf16 only"),
}

# Kernel efficiency per layer kind: the fraction of peak FLOP/s a layer's kernels reach when
# compute-bound. Assumed round figures, not measurements: large matrix products run near
# three quarters of peak, convolutions and attention somewhat lower, LSTMs (many small
# sequential products) lower still. Element-wise kinds, normalisations and embeddings are
# memory-bound, so the bytes term of the roofline decides their time and 1.0 leaves it so.
DEFAULT_EFFICIENCY = {
    "linear": 0.75, "matmul": 0.7, "conv": 0.6, "attention": 0.5, "lstm": 0.4,
    "interaction": 0.5, "embedding": 1.0, "norm": 1.0, "pool": 1.0, "eltwise": 1.0,
    "softmax": 1.0, "loss": 1.0, "given": 1.0,
}
assert set(DEFAULT_EFFICIENCY) == set(KINDS)

# the NPU's defaults without a preset (the [topology.npu] key's documentation, pysim.topology)
DEFAULT_TFLOPS = 100.0
DEFAULT_HBM_GBPS = 900.0
DEFAULT_HBM_GB = 32.0
PRECISION_FIELDS = {"fp32": "tflops_fp32", "fp16": "tflops_fp16", "bf16": "tflops_bf16",
                    "mixed": None}
# precisions whose products run at another's peak: amp's autocast products at mixed's
# 16-bit rate
SAME_PEAK = {"amp": "mixed"}


def _suggest(name, options):
    close = difflib.get_close_matches(str(name), list(options), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_preset(where, name):
    if not isinstance(name, str):
        raise ModelError(f"{where} = {name!r}: expected a preset's name (a string); known: "
                         f"{', '.join(PRESETS)}")
    if name not in PRESETS:
        raise ModelError(f"{where} = {name!r}: unknown preset{_suggest(name, PRESETS)}; "
                         f"known: {', '.join(PRESETS)}")
    return name


def check_efficiency(where, table):
    """A table {kind: fraction in (0, 1]}."""
    if not isinstance(table, dict):
        raise ModelError(f"{where} = {table!r}: expected a table of layer kind = fraction")
    for k, v in table.items():
        if k not in KINDS:
            raise ModelError(f"{where}.{k}: unknown layer kind{_suggest(k, KINDS)}; expected "
                             f"one of {', '.join(KINDS)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise ModelError(f"{where}.{k} = {v!r}: expected a number in (0, 1]")
    return table


@dataclass
class NpuSpec:
    """One NPU's roofline: peak FLOP/s per precision, HBM bytes/s and capacity, and the
    kernel efficiency per layer kind."""
    name: str
    tflops: dict                       # precision -> TFLOP/s (after overrides)
    hbm_bytes_per_s: float
    hbm_capacity_bytes: float
    efficiencies: dict = field(default_factory=lambda: dict(DEFAULT_EFFICIENCY))
    source: str = ""

    def peak_flops(self, precision) -> float:
        """Peak FLOP/s at `precision` (fp32, fp16, bf16, or mixed and amp: the 16-bit
        rate)."""
        asked, precision = precision, SAME_PEAK.get(precision, precision)
        if precision not in PRECISION_FIELDS:
            raise ModelError(f"precision {asked!r}: expected one of "
                             f"{', '.join([*PRECISION_FIELDS, *SAME_PEAK])}")
        t = self.tflops.get(precision)
        if t is None:
            field_ = PRECISION_FIELDS[precision] or "tflops_fp16 or tflops_bf16"
            raise ModelError(f"NPU {self.name!r} has no {asked} peak (its datasheet gives "
                             f"{', '.join(sorted(self.tflops)) or 'none'}); set "
                             f"topology.npu.{field_} or topology.npu.tflops")
        return t * 1e12

    def efficiency(self, kind) -> float:
        try:
            return self.efficiencies[kind]
        except KeyError:
            raise ModelError(f"layer kind {kind!r}: unknown; expected one of "
                             f"{', '.join(KINDS)}") from None

    def roofline_seconds(self, flops, nbytes, kind, precision) -> float:
        """A layer's (or op's) time: max(flops / (peak x efficiency), bytes / HBM bytes/s)."""
        t = 0.0
        if flops:
            t = flops / (self.peak_flops(precision) * self.efficiency(kind))
        return max(t, nbytes / self.hbm_bytes_per_s)

    def layer_seconds(self, layer, precision, batch=1, phase="fwd") -> float:
        """Roofline time of one layer for `batch` samples; `phase` fwd, bwd_input or
        bwd_weight. Forward reads inputs and weights and writes outputs; the input gradient
        reads the output gradient and the weights and writes the input gradient; the weight
        gradient reads the output gradient and the tensors saved and writes the weight
        gradients (the weights' bytes per phase: Layer.bytes, with amp's casts)."""
        b = layer.bytes(precision)
        if phase == "fwd":
            flops = layer.fwd_flops
            nbytes = batch * (b["read"] + b["write"]) + b["weights_fwd"]
        elif phase == "bwd_input":
            flops = layer.bwd_input_flops
            nbytes = batch * (b["read"] + b["write"]) + b["weights_bwd_input"] if flops else 0
        elif phase == "bwd_weight":
            flops = layer.bwd_weight_flops
            nbytes = batch * (b["write"] + b["saved"]) + b["weights_bwd_weight"] if flops else 0
        else:
            raise ValueError(f"phase {phase!r}: expected fwd, bwd_input or bwd_weight")
        return self.roofline_seconds(batch * flops, nbytes, layer.kind, precision)

    def to_dict(self):
        return {"name": self.name, "tflops": dict(self.tflops),
                "hbm_bytes_per_s": self.hbm_bytes_per_s,
                "hbm_capacity_bytes": self.hbm_capacity_bytes,
                "efficiency": dict(self.efficiencies), "source": self.source}


def spec(preset=None, **fields) -> NpuSpec:
    """An NpuSpec from a preset name (or none) and explicit fields (those of [topology.npu]:
    tflops, tflops_fp32, tflops_fp16, tflops_bf16, hbm_gbps, hbm_gb, efficiency)."""
    if preset is not None:
        check_preset("preset", preset)
        p = PRESETS[preset]
        tflops, gbps, gb, source = dict(p["tflops"]), p["hbm_gbps"], p["hbm_gb"], p["source"]
    else:
        tflops = {k: DEFAULT_TFLOPS for k in PRECISION_FIELDS}
        gbps, gb, source = DEFAULT_HBM_GBPS, DEFAULT_HBM_GB, ""
    if fields.get("tflops") is not None:
        tflops = {k: float(fields["tflops"]) for k in PRECISION_FIELDS}
    for prec, key in PRECISION_FIELDS.items():
        if key and fields.get(key) is not None:
            tflops[prec] = float(fields[key])
    # mixed runs its products at the 16-bit rate: an explicit 16-bit peak carries over
    for key in ("tflops_bf16", "tflops_fp16"):
        if fields.get(key) is not None:
            tflops["mixed"] = float(fields[key])
    eff = dict(DEFAULT_EFFICIENCY)
    eff.update(check_efficiency("efficiency", fields.get("efficiency") or {}))
    if fields.get("hbm_gbps") is not None:
        gbps = float(fields["hbm_gbps"])
    if fields.get("hbm_gb") is not None:
        gb = float(fields["hbm_gb"])
    return NpuSpec(name=preset or "custom", tflops=tflops, hbm_bytes_per_s=gbps * 1e9,
                   hbm_capacity_bytes=gb * 1e9, efficiencies=eff, source=source)


SPEC_FIELDS = ("tflops", "tflops_fp32", "tflops_fp16", "tflops_bf16", "hbm_gbps", "hbm_gb")


def npu_spec(cfg, topo=None, node=None) -> NpuSpec:
    """The NPU `node` (an index into `topo`'s nodes, or a name; None: the [topology.npu]
    defaults) of a configuration: its preset and fields, a graph node's own over the
    [topology.npu] table's."""
    table = dict((cfg.topology.npu or {}) if cfg is not None else {})
    own = {}
    if node is not None and topo is not None:
        idx = topo.node_names.index(node) if isinstance(node, str) else int(node)
        if topo.node_kinds[idx] != "npu":
            raise ModelError(f"node {topo.node_names[idx]!r} is a {topo.node_kinds[idx]}, "
                             f"not an NPU")
        own = dict(topo.node_mem[idx]) if topo.node_mem else {}
    # (the NPUs of a system mostly share their fields: one spec per distinct pair of tables,
    # read-only, instead of one per NPU -- 65,536 NPUs ask about ten times each)
    key = (repr(sorted(table.items())), repr(sorted(own.items())))
    hit = _SPECS.get(key)
    if hit is None:
        if len(_SPECS) >= 256:
            _SPECS.clear()
        hit = _SPECS[key] = _npu_spec(table, own)
    return hit


_SPECS = {}


def _npu_spec(table, own):
    """npu_spec from the [topology.npu] table and a node's own fields."""
    preset = own.get("preset", table.get("preset"))
    fields = {k: table.get(k) for k in SPEC_FIELDS}
    if "preset" in own and own["preset"] != table.get("preset"):
        fields = {k: None for k in SPEC_FIELDS}     # a node's own preset replaces the table's
    for k in SPEC_FIELDS:
        if own.get(k) is not None:
            if k == "tflops":            # a node's single peak replaces every precision's
                for j in SPEC_FIELDS[1:4]:
                    fields[j] = None
            fields[k] = own[k]
    fields["efficiency"] = table.get("efficiency")
    return spec(preset, **fields)
