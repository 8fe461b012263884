"""A key the chosen workload does not read is refused, naming what would read it: every
registered workload kind declares the keys it reads, and each key another kind reads is
refused by it before any work; within training, the keys a model's source does not read."""
import pytest

import pysim
from pysim import ConfigError, from_dict, simulate
from pysim.schema import KEY_MAP, KEYS, governed, read_by
from pysim.workload import WORKLOADS

# A valid value of each workload key whose default is None (the rest are given at their
# default: a key given at its default is still given).
VALUE = {"workload.comm_sms": 1, "workload.comm_hbm_gbps": 10.0, "workload.file": "g.toml",
         "workload.group": ["npu0", "npu1"], "workload.ring_order": ["npu0", "npu1"],
         "workload.reduce_gbps": 10.0, "workload.engine": "npu",
         "workload.memory.ratio": {"conv": 2.0}, "workload.model": "resnet50",
         "workload.model_params": {}, "workload.batch": 8, "workload.parallel": {"dp": 2},
         "workload.precision": "fp32", "traffic.packet_weights": [1.0]}

RING = {"topology": {"kind": "ring", "size": 2}}


def value(path):
    return VALUE[path] if KEY_MAP[path].default is None else KEY_MAP[path].default


def config(kind, path):
    section, name = path.split(".", 1)
    raw = {**RING, "workload": {"kind": kind}}
    body = raw.setdefault(section, {})
    sub, dot, field = name.partition(".")
    if dot:
        body[sub] = {field: value(path)}
    else:
        body[name] = value(path)
    return from_dict(raw)


def test_every_kind_declares_what_it_reads_and_every_workload_key_is_read():
    for kind in WORKLOADS.values():
        assert read_by("workload.kind", kind.name) is not None, kind.name
    read = set().union(*(read_by("workload.kind", k) for k in WORKLOADS))
    workload_keys = {k.path for k in KEYS if k.section == "workload"}
    assert workload_keys <= read, sorted(workload_keys - read)
    assert read <= set(KEY_MAP), sorted(read - set(KEY_MAP))   # no misspelt declaration


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_each_kind_refuses_the_keys_only_other_kinds_read(kind):
    mine = read_by("workload.kind", kind)
    refused = sorted(governed("workload.kind") - mine)
    assert refused or kind == "training"
    for path in refused:
        cfg = config(kind, path)
        with pytest.raises(ConfigError, match=rf"{path} = .* is not read by workload.kind = "
                                              rf"'{kind}': it is read by workload.kind ="):
            simulate(cfg)


def test_the_newcomers_traps():
    # forgot workload.kind = 'collective': a synthetic run would have been reported
    with pytest.raises(ConfigError, match=r"workload.bytes = 4194304 is not read by "
                                          r"workload.kind = 'synthetic' \(the default\): it is "
                                          r"read by workload.kind = 'collective'"):
        pysim.simulate(pysim.load("dgx1-v100", {"workload.bytes": 4194304}))
    with pytest.raises(ConfigError, match=r"workload.batch = 256 is not read by workload.kind "
                                          r"= 'collective': it is read by workload.kind = "
                                          r"'training'"):
        pysim.simulate(pysim.load("dgx1-v100", {"workload.kind": "collective",
                                                "workload.batch": 256}))


def test_changing_the_kind_on_top_of_a_file_leaves_out_the_files_other_keys():
    """selene's file runs a collective (workload.bytes, .collective); training on it keeps
    what training reads of the file (its algorithm, chunks) and drops the rest."""
    cfg = pysim.load("selene", {"workload.kind": "training", "workload.model": "resnet50"})
    assert "workload.bytes" not in cfg.explicit and "workload.collective" not in cfg.explicit
    assert cfg.workload.algorithm == "tree" and cfg.is_set("workload.algorithm")
    again = pysim.load("selene").with_overrides({"workload.kind": "training",
                                                  "workload.model": "resnet50"})
    assert again.explicit == cfg.explicit
    # a key given with the new kind is the user's own, and is checked
    with pytest.raises(ConfigError, match="workload.bytes = 8 is not read"):
        simulate(pysim.load("selene", {"workload.kind": "training", "workload.bytes": 8,
                                       "workload.model": "resnet50"}))


def train(**over):
    base = {"topology": {"kind": "ring", "size": 2},
            "network": {"model": "flow"},
            "workload": {"kind": "training", "model": "resnet50", "batch": 8,
                         "iterations": 1}}
    for path, v in over.items():
        section, name = path.split(".", 1)
        node = base[section]
        *heads, last = name.split(".")
        for h in heads:
            node = node.setdefault(h, {})
        node[last] = v
    return from_dict(base)


def test_split_tables_on_a_model_without_tables():
    with pytest.raises(ConfigError, match=r"workload.parallel.tables = 'split': resnet50 has "
                                          r"no embedding tables .*dlrm"):
        simulate(train(**{"workload.parallel": {"tables": "split"}}))


def test_recompute_segments_beyond_the_layers():
    n = len(pysim.models.get("resnet50").layers)
    with pytest.raises(ConfigError, match=r"workload.memory.segments = 1000000: more segments "
                                          r"than the \d+ layers"):
        simulate(train(**{"workload.memory.policy": "recompute",
                          "workload.memory.segments": 1000000}))
    assert n > 4   # (and a count within the layers runs)
    assert simulate(train(**{"workload.memory.policy": "recompute",
                             "workload.memory.segments": 4})).training


ASTRA = "DATA\n2\nfc1 -1 50 NONE 0 60 NONE 0 70 ALLREDUCE 8192 5\n" \
        "fc2 -1 5 NONE 0 6 NONE 0 7 ALLREDUCE 64 1\n"


@pytest.mark.parametrize("path,v", [("workload.memory.policy", "offload"),
                                    ("workload.memory.policy", "karma"),
                                    ("workload.memory.policy", "compression"),
                                    ("workload.precision", "fp16"),
                                    ("workload.parallel", {"tp": 2})])
def test_an_astra_workload_refuses_what_it_does_not_read(tmp_path, path, v):
    f = tmp_path / "w.txt"
    f.write_text(ASTRA)
    with pytest.raises(ConfigError, match=rf"{path} = .* is not read with an ASTRA-sim "
                                          rf"workload"):
        simulate(train(**{"workload.model": str(f), path: v}))
    assert simulate(train(**{"workload.model": str(f)})).training   # (without it, it runs)


def test_a_zoo_model_refuses_astra_keys():
    with pytest.raises(ConfigError, match=r"workload.astra_scheduling = 'FIFO' is read only "
                                          r"with an ASTRA-sim workload"):
        simulate(train(**{"workload.astra_scheduling": "FIFO"}))


@pytest.mark.parametrize("path,v", [("traffic.injection_rate", 0.5),
                                    ("traffic.pattern", "transpose"),
                                    ("traffic.packet_flits", 8),
                                    ("simulation.warmup_cycles", 100),
                                    ("simulation.measure_cycles", 5),
                                    ("simulation.drain_cycles", 7)])
@pytest.mark.parametrize("kind", ["collective", "graph", "training"])
def test_synthetic_traffic_and_its_window_are_refused_by_the_other_kinds(kind, path, v):
    """[traffic] and the measured window shape synthetic traffic alone: an op graph, a
    collective or training runs to its end, whatever they say."""
    section, name = path.split(".", 1)
    body = {"collective": {"kind": "collective", "bytes": 4096},
            "graph": {"kind": "graph", "file": "g.toml"},
            "training": {"kind": "training", "model": "resnet50", "batch": 8}}[kind]
    cfg = from_dict({**RING, "workload": body, section: {name: v}})
    with pytest.raises(ConfigError, match=rf"{path} = {v!r} is not read by workload.kind = "
                                          rf"'{kind}': it is read by workload.kind = "
                                          rf"'synthetic'"):
        simulate(cfg)


def test_a_systems_traffic_is_left_out_when_the_command_line_changes_the_kind():
    """dgx1-v100's file sets [traffic] and the window for its synthetic run; a collective
    asked for on top of it leaves them out, while the same keys typed are the user's."""
    cfg = pysim.load("dgx1-v100", {"workload.kind": "collective", "workload.bytes": 4096})
    assert not any(p.startswith("traffic.") or p in ("simulation.warmup_cycles",
                                                     "simulation.measure_cycles")
                   for p in cfg.explicit)
    assert cfg.is_set("simulation.seed")     # (read by every kind: kept)
    for over in ({"traffic.injection_rate": 0.5}, {"simulation.measure_cycles": 5}):
        with pytest.raises(ConfigError, match=rf"{next(iter(over))} = .* is not read by "
                                              r"workload.kind = 'collective'"):
            simulate(pysim.load("mesh8x8", {"workload.kind": "collective",
                                            "workload.bytes": 4096, **over}))


def test_a_system_named_by_topology_file_brings_no_window_to_a_training_run(tmp_path):
    """A config of the user's own naming a shipped system (topology.file = dgx1-v100, whose
    [simulation] holds a window for synthetic traffic) runs a training iteration: the
    system's window is left out, not blamed on the user, while the user's own window is
    refused."""
    train = ('[workload]\nkind = "training"\nmodel = "dlrm"\nbatch = 64\n'
             'model_params = {tables = [1000, 2000], dim = 16, bottom = [32, 16], '
             'top = [32, 1]}\n')
    f = tmp_path / "t.toml"
    f.write_text('[topology]\nfile = "dgx1-v100"\n' + train)
    cfg = pysim.load(str(f))
    assert not cfg.is_set("simulation.measure_cycles")
    simulate(cfg.with_overrides({"network.model": "flow"}))
    f.write_text('[topology]\nfile = "dgx1-v100"\n[simulation]\nmeasure_cycles = 5\n' + train)
    with pytest.raises(ConfigError, match=r"simulation.measure_cycles = 5 is not read by "
                                          r"workload.kind = 'training'"):
        simulate(pysim.load(str(f)))
