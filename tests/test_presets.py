"""Accelerator presets: the datasheets' figures, explicit fields overriding them, the
efficiency table, and the roofline."""
import pytest

from pysim import config, models
from pysim.errors import ConfigError
from pysim.models.presets import DEFAULT_EFFICIENCY, PRESETS, npu_spec, spec
from pysim.topology import build


def cfg(npu=None, **topology):
    t = {"kind": "ring", "size": 4, **topology}
    if npu is not None:
        t["npu"] = npu
    return config.from_dict({"topology": t})


def test_presets_carry_their_datasheet_figures():
    # NVIDIA V100 datasheet: 15.7 TFLOPS fp32, 125 TFLOPS tensor; HBM2 900 GB/s, 32 GB
    v = npu_spec(cfg({"preset": "v100"}))
    assert v.peak_flops("fp32") == 15.7e12 and v.peak_flops("fp16") == 125e12
    assert v.peak_flops("mixed") == 125e12
    assert v.hbm_bytes_per_s == 900e9 and v.hbm_capacity_bytes == 32e9
    # A100 80GB SXM: 312 TFLOPS fp16/bf16 dense, 2,039 GB/s; H100 SXM: 989.5, 3.35 TB/s
    a = npu_spec(cfg({"preset": "a100"}))
    assert a.peak_flops("bf16") == 312e12 and a.hbm_bytes_per_s == 2039e9
    h = npu_spec(cfg({"preset": "h100"}))
    assert h.peak_flops("mixed") == 989.5e12 and h.hbm_bytes_per_s == 3.35e12
    t = npu_spec(cfg({"preset": "tpu_v3"}))
    assert t.peak_flops("bf16") == 123e12 and t.hbm_capacity_bytes == 32e9
    for name, p in PRESETS.items():
        assert p["source"], name


def test_a_precision_the_datasheet_lacks_is_refused_by_name():
    v = npu_spec(cfg({"preset": "v100"}))
    with pytest.raises(ConfigError, match="'v100' has no bf16 peak.*tflops_bf16"):
        v.peak_flops("bf16")
    with pytest.raises(ConfigError, match="'tpu_v3' has no fp32 peak"):
        npu_spec(cfg({"preset": "tpu_v3"})).peak_flops("fp32")


def test_explicit_fields_override_the_preset():
    s = npu_spec(cfg({"preset": "v100", "hbm_gbps": 1000.0, "tflops_fp16": 100.0}))
    assert s.hbm_bytes_per_s == 1000e9 and s.hbm_capacity_bytes == 32e9
    assert s.peak_flops("fp16") == 100e12 and s.peak_flops("mixed") == 100e12
    assert s.peak_flops("fp32") == 15.7e12
    s = npu_spec(cfg({"preset": "a100", "tflops": 50.0}))
    assert {s.peak_flops(p) for p in ("fp32", "fp16", "bf16", "mixed")} == {50e12}
    # without a preset: the documented defaults (100 TFLOP/s, 900 GB/s, 32 GB)
    d = npu_spec(cfg())
    assert d.peak_flops("fp32") == 100e12 and d.hbm_bytes_per_s == 900e9
    assert d.hbm_capacity_bytes == 32e9 and d.name == "custom"


def test_graph_nodes_override_the_table():
    c = config.from_dict({"topology": {
        "kind": "graph", "npu": {"preset": "v100", "hbm_gb": 16.0},
        "nodes": [{"name": "a", "kind": "npu"}, {"name": "b", "kind": "npu", "preset": "h100"},
                  {"name": "c", "kind": "npu", "tflops": 10.0},
                  {"name": "m", "kind": "mem"}],
        "links": [{"a": "a", "b": "b"}, {"a": "b", "b": "c"}, {"a": "c", "b": "m"}]}})
    topo = build(c)
    a, b, cc = (npu_spec(c, topo, n) for n in ("a", "b", "c"))
    assert a.name == "v100" and a.hbm_capacity_bytes == 16e9
    assert b.name == "h100" and b.hbm_capacity_bytes == 80e9      # its own datasheet
    assert cc.peak_flops("fp16") == 10e12 and cc.hbm_capacity_bytes == 16e9
    assert npu_spec(c, topo, 1).name == "h100"
    with pytest.raises(ConfigError, match="'m' is a mem, not an NPU"):
        npu_spec(c, topo, "m")


def test_efficiency_table_default_and_override():
    s = npu_spec(cfg({"efficiency": {"conv": 0.5}}))
    assert s.efficiency("conv") == 0.5
    assert s.efficiency("linear") == DEFAULT_EFFICIENCY["linear"]
    assert set(DEFAULT_EFFICIENCY) == set(models.KINDS)
    assert all(0 < e <= 1 for e in DEFAULT_EFFICIENCY.values())
    # an override of one field by --set keeps the rest of the table
    c = cfg({"preset": "a100"}).with_overrides({"topology.npu.efficiency.lstm": 0.2})
    s = npu_spec(c)
    assert s.efficiency("lstm") == 0.2 and s.name == "a100"


@pytest.mark.parametrize("npu,message", [
    ({"preset": "v101"}, "topology.npu.preset = 'v101': unknown preset (did you mean 'v100'?)"),
    ({"efficiency": {"convv": 0.5}}, "topology.npu.efficiency.convv: unknown layer kind"),
    ({"efficiency": {"conv": 1.5}}, "topology.npu.efficiency.conv = 1.5: expected a number "
                                    "in (0, 1]"),
    ({"efficiency": {"conv": 0}}, "expected a number in (0, 1]"),
    ({"tflops_fp61": 3.0}, "topology.npu.tflops_fp61: unknown field (did you mean"),
    ({"tflops_fp16": -3.0}, "topology.npu.tflops_fp16 = -3.0: expected a finite number > 0"),
])
def test_bad_npu_tables_are_refused(npu, message):
    with pytest.raises(ConfigError) as e:
        cfg(npu)
    assert message in str(e.value)


def test_bad_node_preset():
    base = {"kind": "graph", "links": [{"a": "a", "b": "m"}]}
    with pytest.raises(ConfigError, match=r"topology.nodes\[0\].preset = 'a10': unknown preset"):
        build(config.from_dict({"topology": {**base, "nodes": [
            {"name": "a", "preset": "a10"}, {"name": "m", "kind": "mem"}]}}))
    with pytest.raises(ConfigError, match="preset: only for NPUs"):
        build(config.from_dict({"topology": {**base, "nodes": [
            {"name": "a"}, {"name": "m", "kind": "mem", "preset": "a100"}]}}))


def test_roofline():
    s = spec("v100")
    # compute-bound: a big product at 125 TFLOP/s x 0.75 efficiency
    assert s.roofline_seconds(1e12, 1e6, "linear", "fp16") == pytest.approx(1 / (125 * 0.75))
    # memory-bound: 900 GB moved at 900 GB/s
    assert s.roofline_seconds(1e9, 900e9, "eltwise", "fp16") == pytest.approx(1.0)
    layer = models.get("resnet50").layer("fc")
    t = s.layer_seconds(layer, "fp32", batch=32)
    b = layer.bytes("fp32")
    assert t == pytest.approx(max(32 * layer.fwd_flops / (15.7e12 * 0.75),
                                  (32 * (b["read"] + b["write"]) + b["weights"]) / 900e9))
