"""Sweeps: the right rows, resumable (re-running skips finished points; a killed sweep
resumes without losing or repeating any), failures recorded, the same results on a Dask
cluster, and figures whose data are the stored results."""
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import importlib

import pysim
from conftest import ROOT, TOPOLOGIES, interruptible
from pysim import plot
from pysim.cli import main
from pysim.config import load
from pysim.errors import PysimWarning
from pysim.sim import simulate

sw = importlib.import_module("pysim.sweep")   # pysim.sweep is also the function
MESH = os.path.join(TOPOLOGIES, "mesh8x8.toml")
SHORT = {"simulation.warmup_cycles": [300], "simulation.measure_cycles": [1500]}
TIMING = ("wall_seconds", "run_seconds", "cycles_per_second", "flit_hops_per_second", "profile")


def same(a, b):
    return {k: v for k, v in a.items() if k not in TIMING} == \
        {k: v for k, v in b.items() if k not in TIMING}


def test_grid_parsing():
    assert sw.parse_param("traffic.injection_rate=0.05:0.2:0.05") == \
        ("traffic.injection_rate", [0.05, 0.1, 0.15, 0.2])
    assert sw.parse_param("network.vcs=2,4,8") == ("network.vcs", [2, 4, 8])
    assert sw.parse_param("topology.dims=[4,4],[8,8]") == ("topology.dims", [[4, 4], [8, 8]])
    assert sw.parse_param("traffic.pattern=uniform,transpose")[1] == ["uniform", "transpose"]
    assert sw.parse_param("network.vcs=2:8:2")[1] == [2, 4, 6, 8]
    a, b = "network.vcs", "traffic.injection_rate"
    assert len(sw.expand({a: [1, 2], b: [3, 4, 5]})) == 6
    assert sw.expand({a: 2, "traffic.pattern": "uniform"}) == \
        [{a: 2, "traffic.pattern": "uniform"}]                  # single values given bare
    assert sw.expand({a: [1, 2], b: [3, 4]}, zipped=True) == [{a: 1, b: 3}, {a: 2, b: 4}]
    with pytest.raises(pysim.ConfigError, match="same number of values"):
        sw.expand({a: [1, 2], b: [3]}, zipped=True)
    with pytest.raises(pysim.ConfigError, match="START:STOP:STEP"):
        sw.parse_param("x.y=1:b:2")
    # refused before anything runs: a range of 10^18 values, an unknown key
    with pytest.raises(pysim.ConfigError, match="10,000,000,001 values; a sweep has at most"):
        sw.parse_param("traffic.injection_rate=0:10:1e-9")
    with pytest.raises(pysim.ConfigError, match="expected finite numbers"):
        sw.parse_param("traffic.injection_rate=0:inf:1")
    with pytest.raises(pysim.ConfigError, match="the grid has 1,000,000,000 points"):
        sw.expand({a: list(range(1000)), b: list(range(1000)), "network.st_delay":
                   list(range(1000))})
    with pytest.raises(pysim.ConfigError, match="did you mean 'traffic.injection_rate'"):
        sw.expand({"traffic.injection_rat": [0.1]})


def test_sweep_on_processes_gives_the_rows_and_resumes(tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    grid = {"traffic.injection_rate": [0.05, 0.1], "network.vcs": [2, 4], **SHORT}
    rows = pysim.sweep(MESH, grid, jobs=2, db=db)
    assert len(rows) == 4 and all(r["status"] == "done" for r in rows)
    for r in rows:       # each stored result is what simulate gives for that point
        direct = simulate(load(MESH, {k: v for k, v in r["params"].items()})).to_dict()
        assert same(r["result"], direct)
        assert r["result"]["config"]["traffic"]["injection_rate"] == \
            r["params"]["traffic.injection_rate"]
    # re-running runs nothing
    monkeypatch.setattr(sw.execute, "run_point", lambda *a: (_ for _ in ()).throw(AssertionError))
    again = pysim.sweep(MESH, grid, jobs=1, db=db)
    assert [r["hash"] for r in again] == [r["hash"] for r in rows]


def test_a_failing_point_is_recorded_and_the_others_finish(tmp_path):
    db = tmp_path / "r.sqlite"
    rows = pysim.sweep(MESH, {"network.vcs": [2, 0, 4], **SHORT}, jobs=2, db=db)
    status = {r["params"]["network.vcs"]: r["status"] for r in rows}
    assert status == {2: "done", 0: "failed", 4: "done"}
    bad = [r for r in rows if r["status"] == "failed"][0]
    assert "network.vcs = 0" in bad["error"]
    res = CliRunner().invoke(main, ["results", str(db)])
    assert res.exit_code == 0 and "failed" in res.output


def test_a_killed_sweep_resumes_without_losing_or_repeating_points(tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    args = [sys.executable, "-m", "pysim.cli", "sweep", MESH, "--db", str(db), "-j", "1",
            "-q", "--param", "traffic.injection_rate=0.01:0.08:0.01",
            "--param", "simulation.measure_cycles=4000"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    stored = 0
    while time.time() < deadline and proc.poll() is None:
        if db.exists():
            try:
                con = sqlite3.connect(db, timeout=5)
                stored = con.execute("SELECT count(*) FROM points").fetchone()[0]
                con.close()
            except sqlite3.OperationalError:
                stored = 0
        if stored >= 2:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert stored >= 2
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    before = {h for (h,) in con.execute("SELECT hash FROM points")}
    con.close()
    calls = []
    real = sw.run_point

    def counting(base, p):
        calls.append(p)
        return real(base, p)
    monkeypatch.setattr(sw.execute, "run_point", counting)
    grid = {"traffic.injection_rate": sw.parse_param("x.y=0.01:0.08:0.01")[1],
            "simulation.measure_cycles": [4000]}
    rows = pysim.sweep(MESH, grid, jobs=1, db=db)
    assert len(rows) == 8 and len({r["hash"] for r in rows}) == 8
    assert len(calls) == 8 - len(before)
    assert before <= {r["hash"] for r in rows}


def test_dask_local_cluster_gives_identical_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    grid = {"traffic.injection_rate": [0.05, 0.15], **SHORT}
    local = pysim.sweep(MESH, grid, jobs=1, db=tmp_path / "a.sqlite")
    with distributed.LocalCluster(n_workers=2, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = pysim.sweep(MESH, grid, db=tmp_path / "b.sqlite", scheduler=client)
        by_address = pysim.sweep(MESH, {**grid, "traffic.injection_rate": [0.1]},
                                 db=tmp_path / "b.sqlite", scheduler=cluster.scheduler_address)
    assert [r["hash"] for r in local] == [r["hash"] for r in remote]
    for a, b in zip(local, remote):
        assert same(a["result"], b["result"])
    assert len(by_address) == 1 and by_address[0]["status"] == "done"


def test_ctrl_c_stops_a_sweep_and_its_workers_at_once(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) during a sweep on two
    workers: the command exits 130, its workers stop without finishing the points handed to
    them, and the database stays readable."""
    import signal
    db = tmp_path / "r.sqlite"
    code = (f"import sys; sys.path[:0] = [{ROOT!r}]; from pysim.cli import main; "
            "print('ready', flush=True); "
            f"main(['sweep', {MESH!r}, '--param', 'traffic.injection_rate=0.05,0.1,0.15,0.2', "
            f"'--param', 'simulation.measure_cycles=3000000', '--db', {str(db)!r}, "
            "'-j', '2', '-q'])")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=interruptible)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(2.0)                               # the workers are simulating
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=30)    # (a hang fails; bench/ measures speed)
        assert p.returncode == 130 and "interrupted" in err, err[-2000:]
        for _ in range(50):                   # its workers are gone with it
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("a worker of the interrupted sweep is still running")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()


def test_a_scheduler_that_cannot_be_reached_is_a_clear_error(tmp_path, monkeypatch):
    """A malformed address or no scheduler listening: ConfigError naming --scheduler, not a
    ValueError or an OSError traceback."""
    pytest.importorskip("distributed")
    monkeypatch.setattr(sw.execute, "SCHEDULER_TIMEOUT_S", 1)
    grid = {"traffic.injection_rate": [0.05], **SHORT}
    for addr in ("notaurl", "tcp://127.0.0.1:1"):
        with pytest.raises(pysim.ConfigError, match=f"--scheduler '{addr}': cannot connect"):
            pysim.sweep(MESH, grid, db=tmp_path / "r.sqlite", scheduler=addr)


def test_figures_plot_the_stored_results_in_every_format(tmp_path):
    db = tmp_path / "r.sqlite"
    rows = pysim.sweep(MESH, {"traffic.injection_rate": [0.05, 0.15, 0.3],
                              "network.vcs": [2, 4], **SHORT}, jobs=2, db=db)
    data = plot.latency_load(rows, str(tmp_path / "ll.png"), series="network.vcs")
    for vcs in (2, 4):
        d = data[vcs]
        mine = sorted((r["params"]["traffic.injection_rate"], r["result"]["avg_packet_latency"],
                       r["result"]["saturated"]) for r in rows
                      if r["params"]["network.vcs"] == vcs)
        assert list(zip(d["x"], d["y"], d["saturated"])) == mine
        assert d["n"] == [1, 1, 1] and d["ci"] == [0, 0, 0]     # one seed: no interval
    tdata = plot.throughput(rows, str(tmp_path / "tp.svg"), series="network.vcs")
    assert sorted(tdata[2]["y"]) == sorted(r["result"]["accepted_rate"] for r in rows
                                           if r["params"]["network.vcs"] == 2)
    assert sorted(tdata[2]["x"]) == sorted(r["result"]["offered_rate"] for r in rows
                                           if r["params"]["network.vcs"] == 2)
    groups, bars = plot.speedup_bars(rows, str(tmp_path / "sp.pdf"), "traffic.injection_rate",
                                     "network.vcs", "avg_packet_latency", 2)
    lat = {(r["params"]["traffic.injection_rate"], r["params"]["network.vcs"]):
           r["result"]["avg_packet_latency"] for r in rows}
    assert bars[4] == [lat[(g, 2)] / lat[(g, 4)] for g in groups]
    assert bars[2] == [1.0] * len(groups)
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}
    for name, ext in (("ll", "png"), ("tp", "svg"), ("sp", "pdf")):
        assert (tmp_path / f"{name}.{ext}").read_bytes()[:len(magic[ext])] == magic[ext]
    # the same through the CLI, with the data coming from the database
    for kind in ("latency-load", "throughput"):
        out = tmp_path / f"cli-{kind}.png"
        res = CliRunner().invoke(main, ["plot", str(db), "--kind", kind, "--series",
                                        "network.vcs", "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert out.read_bytes()[:4] == magic["png"]
    res = CliRunner().invoke(main, ["plot", str(db), "--kind", "latency-load", "-o",
                                    str(tmp_path / "cli-latency-load.png")])
    assert res.exit_code != 0 and "--force" in res.output
    # a key no point has, or the database given to a kind that draws another file: a clear
    # error, not a TypeError, an empty figure or a UTF-8 decode error
    for args, said in ((["--kind", "latency-load", "--x", "nosuch"], "--x nosuch: no point"),
                       (["--kind", "throughput", "--y", "nosuch"], "--y nosuch: no point"),
                       (["--kind", "latency-load", "--series", "nosuch"], "--series nosuch"),
                       (["--kind", "speedup", "--group", "traffic.injection_rate", "--series",
                         "network.vcs", "--baseline", "2", "--y", "nosuch"], "--y nosuch"),
                       (["--kind", "timeline"], "is a results database; --kind timeline "
                                                "takes a trace (pysim run CONFIG --trace")):
        res = CliRunner().invoke(main, ["plot", str(db), *args, "-o", str(tmp_path / "x.png")])
        assert res.exit_code != 0 and said in res.output and "Traceback" not in res.output
        assert not (tmp_path / "x.png").exists()


def test_link_utilisation_and_timeline_figures(tmp_path):
    out = tmp_path / "run.json"
    res = CliRunner().invoke(main, ["run", os.path.join(TOPOLOGIES, "torus4x4.toml"),
                                    "--set", "simulation.measure_cycles=1000", "--json",
                                    str(out), "-q"])
    assert res.exit_code == 0
    result = json.loads(out.read_text())
    from pysim.network import compile_network
    cfg = load(os.path.join(TOPOLOGIES, "torus4x4.toml"))
    util = plot.link_utilisation(compile_network(cfg), cfg, result, str(tmp_path / "u.png"))
    names = {n: i for i, n in enumerate(compile_network(cfg).topo.node_names)}
    for link in result["links"]:
        assert util[(names[link["src"]], names[link["dst"]])] == link["utilisation"]
    res = CliRunner().invoke(main, ["plot", str(out), "--kind", "link-utilisation", "-o",
                                    str(tmp_path / "u2.png")])
    assert res.exit_code == 0, res.output
    trace = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "npu0"}},
        {"ph": "X", "name": "compute", "cat": "compute", "pid": 0, "tid": 0, "ts": 0,
         "dur": 100},
        {"ph": "X", "name": "send", "cat": "comm", "pid": 0, "tid": 1, "ts": 50, "dur": 80},
        {"ph": "X", "name": "compute", "cat": "compute", "pid": 1, "tid": 0, "ts": 10,
         "dur": 30}]}
    spans = plot.timeline(trace, str(tmp_path / "t.png"))
    assert spans == {(0, 0): [(0, 100)], (0, 1): [(50, 80)], (1, 0): [(10, 30)]}


def test_tidy_table_and_csv(tmp_path):
    db = tmp_path / "r.sqlite"
    rows = pysim.sweep(MESH, {"traffic.injection_rate": [0.05, 0.1], **SHORT}, jobs=1, db=db)
    table = sw.tidy(rows)
    assert [t["traffic.injection_rate"] for t in table] == [0.05, 0.1]
    assert all(t["status"] == "done" and "avg_packet_latency" in t for t in table)
    csv_path = tmp_path / "r.csv"
    res = CliRunner().invoke(main, ["results", str(db), "--csv", str(csv_path)])
    assert res.exit_code == 0
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("simulation.measure_cycles,")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install .pysim\[pandas\]."):
            pysim.to_pandas(rows)
    else:
        assert len(pysim.to_pandas(rows)) == 2


def test_collective_figure_plots_its_rows(tmp_path):
    """Rows shaped as collective sweeps store them (message size, algorithm, bus bandwidth)."""
    rows = []
    for alg, scale in (("ring", 1.0), ("halving_doubling", 0.8)):
        for size in (1024, 65536, 1 << 20):
            rows.append(dict(hash=f"{alg}{size}", status="done", error=None,
                             params={"workload.bytes": size, "workload.algorithm": alg},
                             result={"busbw_gbps": scale * np.log2(size), "saturated": False,
                                     "config": {"_system": "ring8"}}))
    data = plot.collective(rows, str(tmp_path / "c.png"))
    assert data["ring"]["x"] == [1024, 65536, 1 << 20]
    assert data["halving_doubling"]["y"] == [0.8 * np.log2(s) for s in (1024, 65536, 1 << 20)]
    assert (tmp_path / "c.png").stat().st_size > 5000


def test_a_collective_sweep_stores_its_points_and_plots_them(tmp_path):
    """A real sweep of collectives (results without a saturation verdict): every point done,
    each stored result what simulate gives, bus bandwidth never above the link's 32 GB/s and
    within 10% of it at 1 MB (a ring all-reduce on a ring streams at the link rate), and the
    collective figure drawn from the stored rows."""
    ring8 = os.path.join(TOPOLOGIES, "ring8.toml")
    grid = {"workload.kind": ["collective"], "workload.bytes": [4096, 1 << 20],
            "network.vcs": [4], "network.vc_buffer_flits": [16]}
    rows = pysim.sweep(ring8, grid, jobs=1, db=tmp_path / "c.sqlite")
    assert [r["status"] for r in rows] == ["done", "done"], [r["error"] for r in rows]
    for r in rows:
        direct = simulate(load(ring8, r["params"])).to_dict()
        assert same(r["result"], direct)
        assert 0 < r["result"]["busbw_gbps"] <= 32.0 * (1 + 1e-9)
    big = [r for r in rows if r["params"]["workload.bytes"] == 1 << 20][0]
    assert big["result"]["busbw_gbps"] >= 0.9 * 32.0
    res = CliRunner().invoke(main, ["results", str(tmp_path / "c.sqlite")])
    header = res.output.splitlines()[0].split()
    assert res.exit_code == 0 and {"collective_cycles", "busbw_gbps", "algbw_gbps"} <= set(header)
    res = CliRunner().invoke(main, ["plot", str(tmp_path / "c.sqlite"), "--kind",
                                    "collective", "-o", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "c.png").stat().st_size > 5000


def test_a_file_that_is_not_a_results_database_is_never_touched(tmp_path):
    f = tmp_path / "notes.toml"
    f.write_text("[mine]\nkeep = true\n")
    before = f.read_bytes()
    with pytest.raises(pysim.ConfigError, match="not a pysim results database"):
        pysim.sweep(MESH, {"traffic.injection_rate": [0.05], **SHORT}, db=f)
    for args in (["results", str(f)], ["plot", str(f), "--kind", "latency-load", "-o",
                                         str(tmp_path / "x.png")]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code != 0 and "not a pysim results database" in res.output
        assert "Traceback" not in res.output
    assert f.read_bytes() == before
    # nor is an SQLite database of something else (the sweep added its table to it), and
    # reading commands never write: an empty file stays empty (results printed a TypeError)
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    before = other.read_bytes()
    with pytest.raises(pysim.ConfigError, match="of something else than pysim's results"):
        pysim.sweep(MESH, {"traffic.injection_rate": [0.05], **SHORT}, db=other)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    no_rows = tmp_path / "no-rows.sqlite"            # a sweep interrupted before any point
    sw.Store(no_rows).close()
    for db, said in ((other, "of something else"), (empty, "holds no results"),
                     (no_rows, "holds no results")):
        for args in (["results", str(db)], ["plot", str(db), "--kind", "latency-load", "-o",
                                              str(tmp_path / "x.png")]):
            res = CliRunner().invoke(main, args)
            assert res.exit_code != 0 and said in res.output and "Traceback" not in res.output
    assert other.read_bytes() == before and empty.read_bytes() == b""


def test_a_sweep_into_a_database_of_another_configuration_warns(tmp_path):
    """Points of two configurations in one database (`--db` defaults to results.sqlite) show
    together in `pysim results` and its CSV: the second sweep warns, naming a key they
    differ in that neither sweeps; a second sweep of the same system over another key does
    not."""
    db = tmp_path / "r.sqlite"
    grid = {"traffic.injection_rate": [0.05], **SHORT}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pysim.sweep(MESH, grid, jobs=1, db=db)
        pysim.sweep(MESH, {**grid, "network.vcs": [4]}, jobs=1, db=db)
    ring = os.path.join(TOPOLOGIES, "ring8.toml")
    with pytest.warns(PysimWarning, match=r"topology\.kind = 'mesh' there, 'ring' here"):
        pysim.sweep(ring, grid, jobs=1, db=db)


def test_results_name_the_system_of_each_row(tmp_path):
    """Points of two systems in one database: `pysim results` and its CSV (here on standard
    output, `--csv -`) say which system each row is of, from the resolved config stored with
    it (a failed point, without a result, leaves it empty)."""
    db = str(tmp_path / "r.sqlite")
    store = sw.Store(db)
    for i, system in enumerate(("ring8", "torus4x4")):
        store.put(f"h{i}", {"traffic.injection_rate": 0.1}, "done",
                  {"avg_packet_latency": 10.0 + i, "config": {"_system": system}}, None, 0.1)
    store.put("h2", {"traffic.injection_rate": 0.2}, "failed", None, "ConfigError: x", 0.0)
    store.close()
    res = CliRunner().invoke(main, ["results", db])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split()[:3] == ["traffic.injection_rate", "system", "status"]
    assert sorted(line.split()[1] for line in lines[1:3]) == ["ring8", "torus4x4"]
    assert lines[3].split()[:2] == ["0.2", "failed"]
    res = CliRunner().invoke(main, ["results", db, "--csv", "-"])
    assert res.exit_code == 0 and res.stderr == "", res.output
    got = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [(r["traffic.injection_rate"], r["system"], r["status"]) for r in got] == \
        [("0.1", "ring8", "done"), ("0.1", "torus4x4", "done"), ("0.2", "", "failed")]
    assert not (tmp_path / "-").exists()


def test_a_point_stored_by_another_grid_is_returned_with_this_grids_parameters(tmp_path):
    """The second grid's point traffic.injection_rate = 0.1 is the configuration the first
    grid stored as network.vcs = 2 (0.1 is the default): it is not run again, and it comes
    back labelled with this grid's parameters, as every other point of the grid (not the
    first grid's {'network.vcs': 2}: rows[i]['params'][key] is there)."""
    db = str(tmp_path / "r.sqlite")
    cfg = load("ring8", {"simulation.measure_cycles": 200})
    first = pysim.sweep(cfg, {"network.vcs": [2, 4]}, jobs=1, db=db)
    rows = pysim.sweep(cfg, {"traffic.injection_rate": [0.05, 0.1]}, jobs=1, db=db)
    assert [r["params"] for r in rows] == [{"traffic.injection_rate": 0.05},
                                           {"traffic.injection_rate": 0.1}]
    assert rows[1]["hash"] == first[0]["hash"] and rows[1]["result"] == first[0]["result"]
