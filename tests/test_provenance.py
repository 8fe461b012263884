"""A result carries its resolved config; read back (pysim.from_dict, pysim run RESULT.json)
and run again, it gives the same result: the invariant is rerun == run, whatever the numbers."""
import json
import math

import pytest
from click.testing import CliRunner

import pysim
from pysim._io import json_safe
from pysim.cli import main

GRAPH = ('[[ops]]\nname = "w"\nkind = "mem_write"\nnpu = "npu0"\nmem = "mem0"\nbytes = 65536\n'
         '[[ops]]\nname = "s"\nkind = "send"\nsrc = "npu0"\ndst = "npu1"\nbytes = 65536\n'
         'after = ["w"]\n')
ASTRA = "DATA\n2\nconv1 -1 100 NONE 0 120 NONE 0 140 ALLREDUCE 37632 10\n" \
        "fc1 -1 50 NONE 0 60 NONE 0 70 ALLREDUCE 819200 5\n"

# what must agree between a run and its rerun, by workload kind
SAME = ("cycles", "makespan_cycles", "iteration_cycles", "avg_packet_latency",
        "packets_delivered", "seed")


def _cases(tmp):
    (tmp / "ops.toml").write_text(GRAPH)
    (tmp / "w.txt").write_text(ASTRA)
    return {
        "synthetic": ('[topology]\nfile = "ring8"\n[simulation]\nseed = 7\nwarmup_cycles = 200\n'
                      'measure_cycles = 400\n'),
        "collective": ('[topology]\nfile = "ring8"\n[workload]\nkind = "collective"\n'
                       'collective = "all_reduce"\nbytes = 65536\nchunks = 2\n'),
        "graph": ('[topology]\nfile = "mcdla-8"\n[workload]\nkind = "graph"\n'
                  'file = "ops.toml"\n'),
        "training": ('[topology]\nfile = "dgx1-v100"\n[network]\nmodel = "flow"\n'
                     '[workload]\nkind = "training"\nmodel = "alexnet"\nbatch = 64\n'
                     'iterations = 1\n'),
        "astra": ('[topology]\nkind = "ring"\nsize = 4\n[network]\nmodel = "flow"\n'
                  '[workload]\nkind = "training"\nmodel = "w.txt"\niterations = 1\n'
                  'chunks = 2\n'),
    }


@pytest.mark.filterwarnings("ignore:topology.file")
@pytest.mark.parametrize("kind", ["synthetic", "collective", "graph", "training", "astra"])
def test_a_result_read_back_and_run_again_gives_the_same_result(tmp_path, monkeypatch, kind):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "c.toml").write_text(_cases(folder)[kind])
    first = json.loads(json.dumps(pysim.simulate(pysim.load(str(folder / "c.toml"))).to_dict()))
    assert first["config"]["jobs"]["window_s"] is None    # (None-valued keys are written)
    elsewhere = tmp_path / "elsewhere"        # (files it names are found from any folder)
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = pysim.from_dict(first["config"])
    again = pysim.simulate(cfg).to_dict()
    compared = [k for k in SAME if k in first]
    assert len(compared) >= 2
    for k in compared:
        assert again[k] == first[k], k
    # (and so rerun again, indefinitely; the system keeps the config file's name)
    assert again["config"] == first["config"]
    assert first["config"]["_system"].endswith(" (c.toml)")


def test_pysim_run_reruns_a_result_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke
    res = run(main, ["run", "ring8", "--set", "workload.kind=collective", "--set",
                     "workload.bytes=65536", "--json", "a.json", "-q"])
    assert res.exit_code == 0, res.output
    res = run(main, ["run", "a.json", "--json", "b.json", "-q"])
    assert res.exit_code == 0, res.output
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["makespan_cycles"] == b["makespan_cycles"] and a["config"] == b["config"]
    # --set applies on top of the result's config: twice the bytes take longer
    res = run(main, ["run", "a.json", "--set", "workload.bytes=131072", "--json", "c.json",
                     "-q"])
    assert res.exit_code == 0, res.output
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["config"]["workload"]["bytes"] == 131072
    assert c["makespan_cycles"] > a["makespan_cycles"]
    # the result run again is an input: --force does not write the rerun over it
    res = run(main, ["run", "a.json", "--json", "a.json", "--force", "-q"])
    assert res.exit_code != 0 and "the result file run again" in res.output
    assert json.loads((tmp_path / "a.json").read_text()) == a


@pytest.mark.parametrize("kind, absent, present", [
    ("training", ["traffic", "simulation.warmup_cycles", "workload.bytes"],
     ["workload.model", "workload.optimizer"]),
    ("collective", ["traffic", "simulation.measure_cycles", "workload.model"],
     ["workload.bytes", "workload.algorithm"]),
    ("synthetic", ["workload.model", "workload.bytes"], ["traffic.injection_rate",
                                                        "simulation.warmup_cycles"])])
def test_a_results_config_holds_the_keys_its_workload_kind_reads(kind, absent, present):
    """A resolved config leaves out the keys its workload kind does not read (a training
    run's [traffic] at its defaults said nothing of the run), keeps those it does, and reads
    back, without `_system`, to the same config."""
    over = {"training": {"workload.model": "alexnet", "workload.batch": 8},
            "collective": {"workload.bytes": 4096}, "synthetic": {}}[kind]
    cfg = pysim.load("ring8", {"workload.kind": kind, **over})
    d = cfg.resolved()

    def has(path):
        section, _, name = path.partition(".")
        body = d.get(section)
        for part in name.split(".") if name else ():
            body = body.get(part) if isinstance(body, dict) else None
        return body is not None
    assert [p for p in absent if has(p)] == [] and all(has(p) for p in present)
    back = pysim.from_dict(json.loads(json.dumps(json_safe(d))))
    assert back.resolved() == d and back.to_dict() == cfg.to_dict()


def test_a_rerun_result_keeps_the_config_files_name(tmp_path, monkeypatch):
    """A result of a config file names its system with the file's name ('ring8 (c.toml)');
    `pysim run r.json`'s result, from another folder, --set on top, names it alike."""
    (tmp_path / "c.toml").write_text('[topology]\nfile = "ring8"\n[workload]\nkind = '
                                     '"collective"\nbytes = 65536\n')
    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke
    res = run(main, ["run", "c.toml", "--json", "a.json", "-q"])
    assert res.exit_code == 0, res.output
    (tmp_path / "o").mkdir()
    monkeypatch.chdir(tmp_path / "o")
    res = run(main, ["run", "../a.json", "--set", "topology.size=4", "--json", "b.json", "-q"])
    assert res.exit_code == 0, res.output
    a = json.loads((tmp_path / "a.json").read_text())["config"]
    b = json.loads((tmp_path / "o" / "b.json").read_text())["config"]
    assert a["_system"] == "ring8 (c.toml)" and b["_system"] == "ring4 (c.toml)"
    assert a["_source"] == b["_source"] == str(tmp_path / "c.toml")


def test_a_json_file_that_is_no_result_is_refused_naming_what_it_lacks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.json").write_text('{"makespan_cycles": 3}')
    res = CliRunner().invoke(main, ["run", "x.json", "-q"])
    assert res.exit_code != 0 and "x.json" in res.output and "'config'" in res.output
    (tmp_path / "j.json").write_text('{"kind": "jobs", "config": {}, "seed": 1}')
    res = CliRunner().invoke(main, ["run", "j.json", "-q"])
    assert res.exit_code != 0 and "j.json is a result of a stream of jobs" in res.output


def test_none_for_a_key_whose_default_is_none_is_the_default():
    cfg = pysim.from_dict({"jobs": {"window_s": None}, "workload": {"file": None}})
    assert not cfg.is_set("jobs.window_s") and cfg.jobs.window_s is None
    assert not cfg.is_set("workload.file")
    with pytest.raises(pysim.ConfigError, match="workload.bytes = None: expected an integer"):
        pysim.from_dict({"workload": {"bytes": None}})


def test_an_infinite_throughput_comes_back_from_json_as_inf():
    cfg = pysim.from_dict({"workload": {"kind": "training", "model": "alexnet", "batch": 8,
                                        "memory": {"policy": "compression",
                                                   "compress_gbps": math.inf}}})
    d = json.loads(json.dumps(json_safe(cfg.resolved())))
    assert d["workload"]["memory"]["compress_gbps"] is None
    back = pysim.from_dict(d)
    assert back.workload.memory.compress_gbps == math.inf
    assert back.resolved() == cfg.resolved()


def test_a_workload_model_file_is_an_input_that_force_never_writes_over(tmp_path,
                                                                         monkeypatch):
    """workload.model naming a file (an ASTRA-sim workload) is read by the run as
    topology.file or workload.file are: --json naming it is refused even with --force, the
    file left as it was; the result names it by its absolute path (Config.files)."""
    monkeypatch.chdir(tmp_path)
    _cases(tmp_path)
    (tmp_path / "c.toml").write_text(_cases(tmp_path)["astra"])
    before = (tmp_path / "w.txt").read_bytes()
    res = CliRunner().invoke(main, ["run", "c.toml", "--json", "w.txt", "--force", "-q"])
    assert res.exit_code == 1 and "--json w.txt is workload.model, which this command " \
        "reads" in res.output, res.output
    assert (tmp_path / "w.txt").read_bytes() == before
    cfg = pysim.load(str(tmp_path / "c.toml"))
    assert cfg.files() == [("workload.model", str(tmp_path / "w.txt"))]
    assert cfg.resolved()["workload"]["model"] == str(tmp_path / "w.txt")
    assert pysim.load("ring8", {"workload.kind": "training", "workload.model": "alexnet",
                                "workload.batch": 8}).files() == []     # (a zoo name)
