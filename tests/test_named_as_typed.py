"""An error names what the user typed, where they typed it: a sweep's grid from Python is not
'--param', a sweep's --jobs is not --workers, pysim jobs' --jobs is not an override on the
server's file; a figure asked for by series of a key that does not vary says so."""
import warnings

import pytest
from click.testing import CliRunner

import pysim
from pysim import ConfigError
from pysim.cli import main
from pysim.errors import PysimWarning
from pysim.plot import _common


@pytest.mark.parametrize("grid, zipped, msg", [
    ({"traffic.bogus": [1]}, False, r"^swept key traffic\.bogus: not a configuration key"),
    ({"traffic.injection_rate": []}, False, r"^swept key traffic\.injection_rate: no values"),
    ({"traffic.injection_rate": [0.1, 0.2], "network.vcs": [2]}, True,
     r"^zipped \(--zip\): every swept key needs the same number of values, got "
     r"traffic\.injection_rate: 2, network\.vcs: 1")])
def test_a_sweep_from_python_names_the_swept_key_not_an_option(grid, zipped, msg):
    with pytest.raises(ConfigError, match=msg):
        pysim.sweep("ring8", grid, zipped=zipped, jobs=1)


def test_the_worker_options_are_named_as_typed(tmp_path):
    db = str(tmp_path / "r.sqlite")
    for opt in ("--jobs", "--workers", "-j"):
        res = CliRunner().invoke(main, ["sweep", "ring8", "--param", "network.vcs=2", opt,
                                        "0", "--db", db, "-q"])
        shown = "--workers" if opt == "-j" else opt
        assert res.exit_code == 1 and f"{shown} 0: expected at least 1" in res.output


@pytest.mark.parametrize("args, msg", [
    (["--jobs", "0"], "jobs.count = 0: expected a number > 0 (given as --jobs 0)"),
    (["--seed", "-1"], "simulation.seed = -1: expected a number >= 0 (given as --seed -1)")])
def test_pysim_jobs_names_its_option_not_an_override_on_the_file(args, msg):
    res = CliRunner().invoke(main, ["jobs", "dgx1-v100", *args, "-q"])
    assert res.exit_code == 1 and msg in res.output and "override" not in res.output


def test_a_series_of_a_key_that_does_not_vary_is_warned_once():
    rows = [{"hash": str(i), "params": {"traffic.injection_rate": r}, "status": "done",
             "error": None, "result": {"avg_packet_latency": 10.0 + i, "saturated": False,
                                       "config": {"network": {"vcs": 2},
                                                  "traffic": {"injection_rate": r}}}}
            for i, r in enumerate((0.1, 0.2))]
    _common._WARNED.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pts = _common.points(rows, x="traffic.injection_rate", y="avg_packet_latency",
                             series="network.vcs")
        _common.points(rows, x="traffic.injection_rate", y="avg_packet_latency",
                       series="network.vcs")
    said = [str(x.message) for x in w if issubclass(x.category, PysimWarning)]
    assert said == ["series network.vcs (--series): every point has network.vcs = 2 (not "
                    "swept), so the figure has one series; the keys swept: "
                    "traffic.injection_rate"]
    assert list(pts) == [2]


def test_a_key_refused_that_came_from_topology_file_names_the_file(tmp_path):
    (tmp_path / "sys.toml").write_text(
        '[topology]\nkind = "graph"\nnodes = [{name = "a", kind = "npu"}, '
        '{name = "b", kind = "npu"}]\nlinks = [{a = "a", b = "b", gbps = 10}]\n')
    (tmp_path / "use.toml").write_text('[topology]\nfile = "sys.toml"\nkind = "mesh"\n'
                                       'dims = [2, 2]\n')
    with pytest.warns(PysimWarning):
        cfg = pysim.load(str(tmp_path / "use.toml"))
    assert cfg.origin["topology.nodes"] == str(tmp_path / "sys.toml")
    with pytest.raises(ConfigError, match=r"topology\.links is not used by topology\.kind = "
                                          r"'mesh' \(topology\.links read from .*sys\.toml, "
                                          r"the system topology\.file = 'sys\.toml' names; "
                                          r"topology\.kind set in .*use\.toml\)"):
        pysim.simulate(cfg)
    # a value the included file holds, refused on loading, names that file
    (tmp_path / "bad.toml").write_text('[topology]\nkind = "ring"\nsize = 1\n')
    (tmp_path / "use2.toml").write_text('[topology]\nfile = "bad.toml"\n')
    with pytest.raises(ConfigError, match=r"^.*bad\.toml \(the system topology\.file names "
                                          r"in .*use2\.toml\): topology\.size = 1"):
        pysim.load(str(tmp_path / "use2.toml"))


def test_a_key_the_systems_kind_does_not_read_names_the_config_and_the_system(tmp_path):
    """The key is the config's own and the kind the system's: both files are named."""
    (tmp_path / "use.toml").write_text('[topology]\nfile = "mesh8x8"\nnode_count = 3\n')
    cfg = pysim.load(str(tmp_path / "use.toml"))
    with pytest.raises(ConfigError, match=r"^topology\.node_count is not used by "
                                          r"topology\.kind = 'mesh' \(topology\.node_count "
                                          r"set in .*use\.toml; topology\.kind read from "
                                          r".*mesh8x8\.toml, the system topology\.file = "
                                          r"'mesh8x8' names\) \(it reads: dim_link_gbps, "):
        pysim.simulate(cfg)
    (tmp_path / "use2.toml").write_text('[topology]\nfile = "dgx-a100"\nlink_gbps = 5\n')
    with pytest.raises(ConfigError, match=r"^topology\.link_gbps is not used by topology\."
                                          r"kind = 'cluster' \(topology\.link_gbps set in "
                                          r".*use2\.toml; topology\.kind read from "
                                          r".*dgx-a100\.toml"):
        pysim.simulate(pysim.load(str(tmp_path / "use2.toml")))


def test_a_config_whose_topology_file_names_itself_is_told_so(tmp_path):
    (tmp_path / "self.toml").write_text('[topology]\nfile = "self.toml"\n')
    with pytest.raises(ConfigError, match=r"^topology\.file = 'self\.toml' names this config "
                                          r"itself \(.*self\.toml\); expected a system to "
                                          r"build on"):
        pysim.load(str(tmp_path / "self.toml"))
    # a file naming another that names a third is still one level too many
    (tmp_path / "a.toml").write_text('[topology]\nfile = "self.toml"\n')
    with pytest.raises(ConfigError, match=r"names another topology\.file; one level"):
        pysim.load(str(tmp_path / "a.toml"))


def test_an_op_graph_stopped_by_max_packets_names_it_not_max_cycles():
    """The flit level stops a run with more than simulation.max_packets packets alive; an op
    graph so stopped was reported as not finishing by workload.max_cycles (10^12 cycles)."""
    cfg = pysim.load("ring8", {"workload.kind": "collective", "workload.bytes": 65536,
                               "simulation.max_packets": 10})
    with pytest.raises(ConfigError, match=r"^simulation\.max_packets = 10: the op graph had "
                                          r"more packets alive at once"):
        pysim.simulate(cfg)
    assert pysim.simulate(cfg.with_overrides({"simulation.max_packets": 4_000_000})) \
        .makespan_cycles > 0


@pytest.mark.parametrize("text, msg", [
    ('[[topology]]\nkind = "ring"\nsize = 4\n',
     r"\[\[topology\]\] is an array of tables \(1 of them\); \[topology\] is one table: "
     r"write \[topology\], with single brackets"),
    ('[topology]\nkind = "ring"\nsize = 4\n[traffic]\ninjection_rate = 1979-05-27\n',
     r"traffic\.injection_rate = 1979-05-27 \(a date/time\): expected a number")])
def test_odd_toml_is_named_as_written(tmp_path, text, msg):
    f = tmp_path / "odd.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        pysim.load(str(f))


def test_a_breakdown_of_runs_that_are_not_training_names_the_kind_not_a_y_never_typed(
        tmp_path):
    """--kind breakdown over synthetic runs said '--y iteration_cycles: no point has it'
    (no --y was typed); it says what the kind draws and what the points are."""
    db = str(tmp_path / "s.sqlite")
    assert CliRunner().invoke(main, ["sweep", "ring8", "--param", "network.vcs=2,4",
                                     "--param", "simulation.measure_cycles=200",
                                     "--db", db, "-q", "-j", "1"]).exit_code == 0
    res = CliRunner().invoke(main, ["plot", db, "--kind", "breakdown", "-o",
                                    str(tmp_path / "b.png")])
    assert res.exit_code == 1 and "--kind breakdown draws training runs" in res.output
    assert "its points are synthetic runs" in res.output and "--y" not in res.output


def test_a_trace_folder_without_traces_names_the_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    cfg = pysim.load("ring8", {"workload.kind": "training", "workload.model": "empty"})
    with pytest.raises(ConfigError, match=r"^workload\.model = 'empty' \(a folder of Chakra "
                                          r"traces\): .*empty: no Chakra trace files"):
        pysim.simulate(cfg)
