"""pysim as a package: what an install contains, the shipped systems by name, paths typed on
the command line, the generated docs, and the command-line details a new user meets first."""
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import pysim
from conftest import ROOT, TOPOLOGIES
from pysim import docs, systems
from pysim.cli import main
from pysim.config import load, parse_override
from pysim.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# ------------------------------------------------------------------ what an install holds

def _setup_arguments(monkeypatch):
    """What setup.py hands setuptools (setup() and Cython's cythonize() replaced by
    recorders: Cython is a build requirement, not installed beside the tests)."""
    import types
    import setuptools
    seen = {}
    build = types.ModuleType("Cython.Build")
    build.cythonize = lambda ext, **kw: ext
    monkeypatch.setitem(sys.modules, "Cython", types.ModuleType("Cython"))
    monkeypatch.setitem(sys.modules, "Cython.Build", build)
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
    monkeypatch.chdir(ROOT)
    src = open(os.path.join(ROOT, "setup.py")).read()
    exec(compile(src, "setup.py", "exec"), {"__name__": "__main__"})
    return seen


def test_every_package_of_the_checkout_is_installed(monkeypatch):
    """Every folder of pysim/ holding Python is a package the build installs (none listed by
    hand, none left out), and the shipped systems go with it as package data."""
    kw = _setup_arguments(monkeypatch)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    installed = set(kw.get("packages") or project["tool"]["setuptools"].get("packages", []))
    on_disk = {"csim"}
    for folder, _, files in os.walk(os.path.join(ROOT, "pysim")):
        if "__pycache__" not in folder and any(f.endswith(".py") for f in files):
            on_disk.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert on_disk <= installed, f"not installed: {sorted(on_disk - installed)}"
    assert kw["package_dir"]["pysim.topologies"] == "topologies"
    data = project["tool"]["setuptools"]["package-data"]
    assert "*.toml" in data["pysim.topologies"]
    assert project["project"]["optional-dependencies"]["pandas"]


# ------------------------------------------------------------------ shipped systems

def _node_counts_from_file(path):
    """Nodes by kind, read from the TOML itself (independently of the builders)."""
    with open(path, "rb") as f:
        t = tomllib.load(f)["topology"]
    count = {"npu": 0, "mem": 0, "host": 0, "switch": 0}
    kind = t.get("kind", "mesh")
    if kind == "graph":
        for n in t["nodes"]:
            count[n["kind"]] += 1
    elif kind == "cluster":         # its GPUs, and the switches its comment line states
        count["npu"] = 8 * t.get("node_count", 4)
        line = next(x for x in open(path) if x.startswith("# Switches:"))
        count["switch"] = sum(int(w.split()[0]) for w in line[11:].split(","))
    elif kind in ("mesh", "torus"):
        count["npu"] = eval("*".join(map(str, t["dims"])))
    else:
        count["npu"] = t["size"]
        count["switch"] = 1 if kind == "switch" else 0
    return count


def test_shipped_systems_are_found_by_name_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert systems.names() == sorted(f[:-5] for f in os.listdir(TOPOLOGIES))
    for name in ("mesh8x8", "mesh8x8.toml"):
        assert load(name).to_dict() == load(os.path.join(TOPOLOGIES, "mesh8x8.toml")).to_dict()
    res = CliRunner().invoke(main, ["run", "ring8", "--set", "simulation.measure_cycles=300",
                                    "--json", "r.json"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "r.json").read_text())["config"]["_system"] == "ring8"
    res = CliRunner().invoke(main, ["plot", "mcdla-8", "--kind", "topology", "-o", "m.png"])
    assert res.exit_code == 0 and (tmp_path / "m.png").stat().st_size > 5000, res.output
    res = CliRunner().invoke(main, ["sweep", "ring8", "--param", "traffic.injection_rate=0.05",
                                    "--param", "simulation.measure_cycles=300", "--db",
                                    "s.sqlite", "-q", "-j", "1"])
    assert res.exit_code == 0, res.output
    # a config of one's own may take a shipped system's topology by name
    (tmp_path / "mine.toml").write_text('[topology]\nfile = "dgx1-v100"\n[network]\n'
                                        'vc_buffer_flits = 128\n')
    assert load("mine.toml").topology.kind == "graph"
    assert load("mine.toml", {"topology.file": "mcdla-8"}).topology.nodes[1]["kind"] == "mem"
    # a file of that name here takes precedence
    (tmp_path / "ring8").write_text('[topology]\nkind = "ring"\nsize = 4\n')
    assert load("ring8").topology.size == 4


def test_an_unknown_system_lists_the_shipped_ones():
    with pytest.raises(ConfigError) as e:
        load("mesh8x9")
    msg = str(e.value)
    assert "did you mean 'mesh8x8'?" in msg and all(n in msg for n in systems.names())
    res = CliRunner().invoke(main, ["topo", "dgx1-v10"])
    assert res.exit_code == 1 and "did you mean 'dgx1-v100'?" in res.output
    res = CliRunner().invoke(main, ["plot", "mcdla", "--kind", "topology", "-o", "x.png"])
    assert res.exit_code == 1 and "did you mean 'mcdla-8'?" in res.output
    with pytest.raises(ConfigError, match="no such file nowhere/x.toml"):
        load("nowhere/x.toml")


def test_pysim_systems_lists_each_with_its_nodes_and_source():
    res = CliRunner().invoke(main, ["systems"])
    assert res.exit_code == 0
    lines = res.output.splitlines()
    for name in systems.names():
        line = next(x for x in lines if x.split()[0] == name)
        npu, mem, host, sw = map(int, line.split()[1:5])
        assert dict(npu=npu, mem=mem, host=host, switch=sw) == \
            _node_counts_from_file(os.path.join(TOPOLOGIES, name + ".toml"))
        what, source = systems.header(os.path.join(TOPOLOGIES, name + ".toml"))
        assert what and source and what in line and source in line


@pytest.mark.parametrize("name", sorted(os.listdir(TOPOLOGIES)))
def test_shipped_files_cite_papers_not_files(name):
    """A user has the shipped file and nothing else: its sources are papers and datasheets
    (a year in each source line), never a file outside the repository."""
    text = open(os.path.join(TOPOLOGIES, name)).read()
    assert not re.search(r"PAPERS|seeds/|\.md\b|session|issue", text)
    what, source = systems.header(os.path.join(TOPOLOGIES, name))
    assert re.search(r"(19|20)\d\d", source), source
    assert len(what) <= 60 and len(source) <= 70


# ------------------------------------------------------------------ paths on the command line

OPS = '[[ops]]\nname = "a"\nkind = "compute"\nnode = "n0"\ncycles = 123\n'


def test_paths_typed_on_the_command_line_are_relative_to_the_current_directory(
        tmp_path, monkeypatch):
    """--set workload.file=ops.toml names ops.toml in the current directory, not beside the
    config."""
    confdir, here = tmp_path / "configs", tmp_path / "work"
    confdir.mkdir()
    here.mkdir()
    (confdir / "ring.toml").write_text('[topology]\nkind = "ring"\nsize = 4\n'
                                       '[workload]\nkind = "graph"\nfile = "theirs.toml"\n')
    (confdir / "theirs.toml").write_text(OPS.replace("123", "77"))
    (here / "ops.toml").write_text(OPS)
    monkeypatch.chdir(here)
    cfg = os.path.join("..", "configs", "ring.toml")
    # written in the file: relative to the file
    assert pysim.simulate(load(cfg)).makespan_cycles == 77
    # typed on the command line / given in Python: relative to the current directory
    res = CliRunner().invoke(main, ["run", cfg, "--set", "workload.file=ops.toml", "--json",
                                    "r.json"])
    assert res.exit_code == 0, res.output
    assert json.loads((here / "r.json").read_text())["makespan_cycles"] == 123
    assert pysim.simulate(load(cfg, {"workload.file": "ops.toml"})).makespan_cycles == 123
    assert pysim.simulate(load(cfg).with_overrides({"workload.file": "ops.toml"})) \
        .makespan_cycles == 123
    assert pysim.simulate(pysim.from_dict(
        {"topology": {"kind": "ring", "size": 4},
         "workload": {"kind": "graph", "file": "ops.toml"}})).makespan_cycles == 123
    rows = pysim.sweep(cfg, {"workload.file": ["ops.toml"]}, jobs=1)
    assert rows[0]["result"]["makespan_cycles"] == 123
    # and the result says which file ran
    assert load(cfg, {"workload.file": "ops.toml"}).workload.file == str(here / "ops.toml")


# ------------------------------------------------------------------ command-line details

def test_a_range_written_with_a_dash_is_refused_before_anything_runs(tmp_path):
    db = tmp_path / "r.sqlite"
    res = CliRunner().invoke(main, ["sweep", "mesh8x8", "--param",
                                    "traffic.injection_rate=0.1-0.5", "--db", str(db), "-q"])
    assert res.exit_code == 1
    assert "a range is START:STOP:STEP" in res.output
    assert "traffic.injection_rate=0.1:0.5:0.1" in res.output
    assert not db.exists()
    res = CliRunner().invoke(main, ["sweep", "mesh8x8", "--param", "network.vcs=two,4",
                                    "--db", str(db), "-q"])
    assert res.exit_code == 1 and "'two' is not a number" in res.output and not db.exists()


def test_results_are_listed_in_the_order_of_the_swept_values(tmp_path):
    from pysim.sweep import Store
    db = str(tmp_path / "r.sqlite")
    store = Store(db)
    finished = [(0.3, 4), (0.1, 8), (0.2, 4), (0.1, 4), (0.3, 8), (0.2, 8)]   # as they ended
    for i, (rate, vcs) in enumerate(finished):
        store.put(f"h{i}", {"traffic.injection_rate": rate, "network.vcs": vcs}, "done",
                  {"avg_packet_latency": 10.0 + i}, None, 0.1)
    store.close()
    res = CliRunner().invoke(main, ["results", db])
    assert res.exit_code == 0
    body = [line.split()[:2] for line in res.output.splitlines()[1:]]
    assert body == [[str(v), str(r)] for v, r in sorted((v, r) for r, v in finished)]
    res = CliRunner().invoke(main, ["results", db, "--csv", str(tmp_path / "r.csv")])
    rows = (tmp_path / "r.csv").read_text().splitlines()[1:]
    assert [tuple(map(float, r.split(",")[:2])) for r in rows] == \
        sorted((float(v), float(r)) for r, v in finished)


def test_a_string_list_without_quotes_gets_the_toml_quoting():
    with pytest.raises(ConfigError) as e:
        parse_override("workload.group=[gpu0, gpu1]")
    assert """--set 'workload.group=["gpu0", "gpu1"]'""" in str(e.value)
    assert parse_override('workload.group=["gpu0", "gpu1"]')[1] == ["gpu0", "gpu1"]
    assert parse_override("topology.dims=[4,4]")[1] == [4, 4]
    res = CliRunner().invoke(main, ["run", "dgx1-v100", "--set", "workload.kind=collective",
                                    "--set", "workload.group=[gpu0,gpu1]"])
    assert res.exit_code == 1 and 'need double quotes' in res.output


def test_timeline_and_link_utilisation_say_which_file_they_take(tmp_path):
    res = CliRunner().invoke(main, ["run", "ring8", "--set", "simulation.measure_cycles=300",
                                    "--json", str(tmp_path / "r.json"), "-q"])
    assert res.exit_code == 0
    res = CliRunner().invoke(main, ["plot", str(tmp_path / "r.json"), "--kind", "timeline",
                                    "-o", str(tmp_path / "t.png")])
    assert res.exit_code == 1 and "traceEvents" not in res.output
    assert "is a run's result; --kind timeline takes a trace (pysim run CONFIG --trace" \
        in res.output
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": []}))
    res = CliRunner().invoke(main, ["plot", str(tmp_path / "t.json"), "--kind",
                                    "link-utilisation", "-o", str(tmp_path / "u.png")])
    assert res.exit_code == 1 and "is a trace; --kind link-utilisation takes a run's result" \
        in res.output


def test_pysim_plot_is_importable_from_pysim():
    import importlib
    assert pysim.plot is importlib.import_module("pysim.plot")
    assert callable(pysim.plot.latency_load)


# ------------------------------------------------------------------ generated docs

@pytest.mark.parametrize("page", sorted(docs.PAGES))
def test_generated_docs_are_current(page):
    with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as f:
        committed = f.read()
    assert committed == docs.PAGES[page](), \
        f"docs/{page} is stale: regenerate it with `{docs.COMMAND}` (from the repository's " \
        f"top folder)"


def test_every_key_is_in_the_configuration_reference():
    text = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    from pysim.config import KEYS
    for k in KEYS:
        assert f"| `{k.path}` |" in text


def test_python_dash_m_pysim_is_the_command_line(tmp_path):
    """`python -m pysim ...` runs the same command line as the `pysim` script."""
    p = subprocess.run([sys.executable, "-m", "pysim", "--version"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == f"pysim, version {pysim.__version__}", \
        p.stderr


def test_the_command_lines_names_point_to_the_api():
    """`pysim run` is the command line's; from Python a new user's pysim.run(...) is told
    what runs a configuration."""
    import pysim
    with pytest.raises(AttributeError, match=r"no attribute 'run'; pysim.simulate\(cfg\) "
                                             r"runs a configuration"):
        pysim.run
    with pytest.raises(AttributeError, match=r"no attribute 'bogus'$"):
        pysim.bogus
