"""What a hostile user tries: values that are numbers but not quantities, names that are not
names, outputs that cannot be written, killed workers, slow links, huge expansions. Each must
end in a clear error (exit 1 from the CLI, naming the key, the value and what was expected),
a result, or a failed point recorded with its reason: never a traceback, a hang or an
out-of-memory kill."""
import json
import os
import time

import numpy as np
import pytest
from click.testing import CliRunner

from pysim import ConfigError, from_dict, simulate
from pysim.cli import main

SMALL = {"simulation": {"warmup_cycles": 0, "measure_cycles": 200, "drain_cycles": 2000},
         "topology": {"kind": "mesh", "dims": [2, 2]}}

HUGE = 10 ** 400            # an integer no float holds


def with_(base, **sections):
    out = json.loads(json.dumps(base))
    for s, body in sections.items():
        out.setdefault(s, {}).update(body)
    return out


# ------------------------------------------------------------------ numbers that are not quantities

@pytest.mark.parametrize("weights", [[float("inf"), 1.0], [float("nan"), 1.0], [1.0, HUGE]],
                         ids=["inf", "nan", "huge"])
def test_non_finite_or_huge_weights_are_refused_naming_the_key(weights):
    cfg = with_(SMALL, traffic={"packet_flits": [4, 8], "packet_weights": weights})
    with pytest.raises(ConfigError, match=r"traffic\.packet_weights = .*expected finite"):
        from_dict(cfg)


def test_weights_whose_sum_overflows_still_mean_what_they_say():
    """[1e308, 1e308] sums to infinity: the mix is still half and half (mean 6 flits)."""
    cfg = from_dict(with_(SMALL, traffic={"packet_flits": [4, 8],
                                          "packet_weights": [1e308, 1e308],
                                          "injection_rate": 0.05}))
    from pysim.traffic import packet_sizes
    assert packet_sizes(cfg)[2] == pytest.approx(6.0)
    r = simulate(cfg)
    assert r.packets_delivered > 0


@pytest.mark.parametrize("path,value", [
    ("network.clock_ghz", HUGE), ("topology.link_gbps", HUGE),
    ("topology.link_latency_ns", HUGE), ("traffic.injection_rate", HUGE),
    ("network.flit_bytes", 10 ** 15), ("topology.dim_link_gbps", [float("inf"), 10.0]),
    ("topology.dim_link_gbps", [HUGE, 10]), ("topology.npu", {"tflops": HUGE}),
], ids=lambda v: repr(v)[:24])
def test_huge_integers_and_infinities_for_float_keys_are_config_errors(path, value):
    section, key = path.split(".")
    with pytest.raises(ConfigError) as e:
        from_dict(with_(SMALL, **{section: {key: value}}))
    assert path in str(e.value) and len(str(e.value)) < 400


@pytest.mark.parametrize("overrides", [
    {"network.clock_ghz": 1e-300, "topology.link_gbps": 1e300},
    {"network.clock_ghz": 1e300, "topology.link_latency_ns": 1e300},
    {"network.nic_latency_ns": 1e300},
    {"network.injection_gbps": 1e-300},
])
def test_derived_quantities_that_overflow_are_refused(overrides):
    cfg = from_dict(SMALL).with_overrides(overrides)
    with pytest.raises(ConfigError):
        simulate(cfg)


@pytest.mark.parametrize("raw", [{"simulation": {1: 2}}, {1: {}}])
def test_keys_that_are_not_strings_are_config_errors(raw):
    with pytest.raises(ConfigError, match="expected a"):
        from_dict(raw)


# ------------------------------------------------------------------ names that are not names

@pytest.mark.parametrize("bad", [["a"], {"a": 1}, 3])
def test_a_graph_link_end_that_is_not_a_name_is_a_config_error(bad):
    cfg = with_(SMALL, topology={"kind": "graph", "dims": None,
                                 "nodes": [{"name": "a"}, {"name": "b"}],
                                 "links": [{"a": bad, "b": "b"}]})
    del cfg["topology"]["dims"]
    with pytest.raises(ConfigError, match=r"topology\.links\[0\]\.a = .*expected a node name"):
        simulate(from_dict(cfg))


@pytest.mark.parametrize("op", [
    'kind = "compute"\nnode = ["n0_0"]\ncycles = 5',
    'kind = "send"\nsrc = {a = 1}\ndst = "n1_0"\nbytes = 64',
    'kind = "mem_write"\nnpu = "n0_0"\nmem = [1]\nbytes = 64',
])
def test_an_op_node_that_is_not_a_name_is_a_config_error(tmp_path, op):
    (tmp_path / "ops.toml").write_text(f"[[ops]]\n{op}\n")
    cfg = with_({"topology": SMALL["topology"]},
                workload={"kind": "graph", "file": str(tmp_path / "ops.toml")})
    with pytest.raises(ConfigError, match="expected a node name"):
        simulate(from_dict(cfg))


# ------------------------------------------------------------------ slow is not deadlocked

def _two_nodes(gbps, **extra):
    return with_({"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"}],
                               "links": [{"a": "a", "b": "b", "gbps": gbps}]}}, **extra)


def test_a_very_slow_link_is_slow_not_deadlocked(tmp_path):
    """0.001 GB/s at 1 GHz with 32-byte flits: a flit every 32,000 cycles, longer than the
    watchdog's 20,000. A send of 4 flits takes 3 flit gaps at the link's rate (the first flit
    leaves at once; the rate is exact to 2**-20 bytes/cycle: 1049 / 2**20), not a deadlock
    report."""
    (tmp_path / "ops.toml").write_text('[[ops]]\nkind = "send"\nsrc = "a"\ndst = "b"\n'
                                       'bytes = 128\n')
    cfg = from_dict(_two_nodes(0.001, workload={"kind": "graph",
                                                 "file": str(tmp_path / "ops.toml")}))
    r = simulate(cfg)
    gap = 32 / (1049 / 2 ** 20)
    assert 3 * gap <= r.makespan_cycles <= 3 * gap + 100


@pytest.mark.parametrize("overrides", [{"network.ejection_gbps": 0.001},
                                       {"network.injection_gbps": 0.001},
                                       {"network.sw_alloc_delay": 30000}])
def test_slow_nics_and_long_router_stages_finish_a_collective(overrides):
    cfg = from_dict({"topology": {"kind": "ring", "size": 4},
                     "workload": {"kind": "collective", "bytes": 1024, "chunks": 1}})
    r = simulate(cfg.with_overrides(overrides)).to_dict()
    assert r["collective_cycles"] > 20000


def test_a_real_deadlock_beside_slow_links_is_still_reported():
    """The deadlock of test_config_cli (a ring without its dateline), on links of 1 GB/s (a
    flit every 32 cycles): the watchdog waits its 300 cycles beyond the slowest step, and
    reports it."""
    import numpy as np
    from pysim.network import compile_network
    from pysim.sim import DeadlockError, run_packets
    cfg = from_dict({"topology": {"kind": "ring", "size": 4, "bidirectional": False,
                                  "link_gbps": 1.0},
                     "network": {"vc_buffer_flits": 2}, "simulation": {"watchdog_cycles": 300}})
    net = compile_network(cfg)
    net.arrays["ch_order"][:] = 0
    src = np.arange(200) % 4
    with pytest.raises(DeadlockError, match="simulation.watchdog_cycles, plus"):
        run_packets(cfg, np.zeros(200, int), src, (src + 3) % 4, np.full(200, 8), network=net)


# ------------------------------------------------------------------ sweeps: workers that die

def test_a_worker_killed_mid_point_fails_that_point_and_the_rest_run(tmp_path, monkeypatch):
    """One point's worker is killed by SIGKILL (what the out-of-memory killer sends): that
    point is recorded as failed, saying so, and every other point runs (no BrokenProcessPool
    traceback, no point abandoned)."""
    import importlib
    import signal
    sw = importlib.import_module("pysim.sweep")
    real = sw.run_point

    def dies_on_the_second(base, p):          # (forked workers inherit the patch)
        if p["traffic.injection_rate"] == 0.1:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(base, p)
    monkeypatch.setattr(sw.execute, "run_point", dies_on_the_second)
    grid = {"traffic.injection_rate": [0.05, 0.1, 0.15, 0.2, 0.25],
            "simulation.measure_cycles": [300]}
    rows = sw.sweep(from_dict(SMALL), grid, jobs=2, db=tmp_path / "r.sqlite")
    status = {r["params"]["traffic.injection_rate"]: r["status"] for r in rows}
    assert status == {0.05: "done", 0.1: "failed", 0.15: "done", 0.2: "done", 0.25: "done"}
    err = [r["error"] for r in rows if r["status"] == "failed"][0]
    assert "killed by SIGKILL" in err and "out-of-memory" in err


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_die_with_a_killed_sweep(tmp_path, method):
    """kill -9 of the sweep's process: its workers end within seconds (they lived on,
    orphaned, simulating, for ever)."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT, TOPOLOGIES
    code = (f"import sys; sys.path[:0] = [{ROOT!r}]; from pysim.cli import main; "
            f"main(['sweep', {os.path.join(TOPOLOGIES, 'mesh8x8.toml')!r}, '--param', "
            "'traffic.injection_rate=0.05,0.1,0.15,0.2', '--param', "
            f"'simulation.measure_cycles=30000000', '--db', {str(tmp_path / 'r.sqlite')!r}, "
            "'-j', '2', '-q'])")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True,
                         env={**os.environ, "PYSIM_MP_START": method})
    workers = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(workers) < 2:
            workers = _children(p.pid)   # (with spawn, multiprocessing's resource tracker too)
            time.sleep(0.1)
        assert len(workers) >= 2
        time.sleep(1.0)                             # simulating by now
        workers = _children(p.pid)
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.time() + 5
        while time.time() < deadline and any(map(_alive, workers)):
            time.sleep(0.05)
        assert not any(map(_alive, workers))
    finally:
        for w in workers + [p.pid]:
            try:
                os.kill(w, signal.SIGKILL)
            except OSError:
                pass


# ------------------------------------------------------------------ outputs that cannot be written

CFG_TEXT = """[simulation]
warmup_cycles = 0
measure_cycles = 300
drain_cycles = 2000
[topology]
kind = "mesh"
dims = [2, 2]
"""
COLL_TEXT = """[topology]
kind = "ring"
size = 4
[workload]
kind = "collective"
bytes = 4096
"""


@pytest.fixture
def place():
    """A world-readable directory with a config, a collective, a finished results database
    and a read-only subdirectory `ro` holding a copy of that database (a directory others
    can enter: the read-only checks run as an unprivileged user when the tests are root)."""
    import shutil
    import stat
    import tempfile
    from pysim.sweep import sweep
    d = tempfile.mkdtemp(prefix="pysim-rel-")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "c.toml"), "w") as f:
        f.write(CFG_TEXT)
    with open(os.path.join(d, "coll.toml"), "w") as f:
        f.write(COLL_TEXT)
    db = os.path.join(d, "r.sqlite")
    sweep(os.path.join(d, "c.toml"), {"traffic.injection_rate": [0.05, 0.1],
                                      "network.vcs": [2, 4]}, jobs=1, db=db)
    ro = os.path.join(d, "ro")
    os.mkdir(ro)
    shutil.copy(db, os.path.join(ro, "r.sqlite"))
    for p in (d, ro):
        for name in os.listdir(p):
            q = os.path.join(p, name)
            if os.path.isfile(q):
                os.chmod(q, 0o644)
    os.chmod(os.path.join(ro, "r.sqlite"), 0o444)
    os.chmod(ro, 0o555)
    yield d
    os.chmod(ro, 0o755)
    shutil.rmtree(d, ignore_errors=True)


def invoke_unprivileged(args, cwd):
    """CliRunner().invoke(main, args) in `cwd` by a user a 0555 directory stops: a forked
    child that becomes 'nobody' when we are root (root writes anywhere). Everything it needs
    is imported before the fork (the child may not be able to read the installation).
    Returns (exit code, output)."""
    import pickle
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import pysim.network  # noqa: F401
    import pysim.plot  # noqa: F401
    import pysim.sweep  # noqa: F401
    if os.geteuid() != 0:
        old = os.getcwd()
        os.chdir(cwd)
        try:
            res = CliRunner().invoke(main, args)
        finally:
            os.chdir(old)
        return res.exit_code, res.output + ("" if res.exception is None or isinstance(
            res.exception, SystemExit) else repr(res.exception))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # pragma: no cover (the child)
        os.close(r)
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.chdir(cwd)
            res = CliRunner().invoke(main, args)
            out = (res.exit_code, res.output + ("" if res.exception is None or isinstance(
                res.exception, SystemExit) else repr(res.exception)))
        except BaseException as e:
            out = (-1, repr(e))
        os.write(w, pickle.dumps(out))
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(data)


@pytest.mark.parametrize("args", [
    ["run", "c.toml", "--json", "ro/x.json"],
    ["run", "coll.toml", "--trace", "ro/x.json"],
    ["topo", "c.toml", "--json", "ro/x.json"],
    ["topo", "c.toml", "--draw", "ro/x.png"],
    ["results", "r.sqlite", "--csv", "ro/x.csv"],
    ["plot", "r.sqlite", "--kind", "latency-load", "-o", "ro/x.png"],
    ["sweep", "c.toml", "--param", "traffic.injection_rate=0.1", "--db", "ro/new.sqlite", "-q"],
    ["sweep", "c.toml", "--param", "traffic.injection_rate=0.3", "--db", "ro/r.sqlite", "-q"],
], ids=lambda a: " ".join(a[:4]))
def test_an_output_in_a_read_only_directory_stops_the_command_first(place, args):
    """Refused before any work, naming the file (they ran the whole simulation, then ended
    in an OSError or sqlite3 traceback)."""
    code, out = invoke_unprivileged(args, place)
    assert code == 1, out
    assert "cannot write" in out and "ro/" in out and "Traceback" not in out, out
    assert "error" in out.lower() and "result written" not in out


def test_a_result_that_cannot_be_written_after_the_run_is_kept(place, monkeypatch):
    """The disk fills (or the directory goes away) during the run: the summary is printed,
    the JSON is kept in a temporary file named in the message, and the exit status is 1."""
    import errno
    real = os.replace

    def full(src, dst):
        if str(dst).endswith("x.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)
    monkeypatch.setattr(os, "replace", full)
    res = CliRunner().invoke(main, ["run", os.path.join(place, "c.toml"), "--json",
                                    os.path.join(place, "x.json")])
    assert res.exit_code == 1
    assert "No space left on device" in res.output and "accepted load" in res.output
    kept = res.output.split("kept in ")[1].split()[0]
    with open(kept) as f:
        assert json.load(f)["config"]["topology"]["dims"] == [2, 2]
    os.unlink(kept)
    assert not os.path.exists(os.path.join(place, "x.json"))
    assert not [n for n in os.listdir(place) if n.startswith(".pysim-")]   # no litter


# ------------------------------------------------------------------ results databases

def test_a_finished_database_is_one_file_and_reads_in_a_read_only_place(place):
    """A sweep leaves its database in journal mode DELETE (WAL mode needs a -shm file beside
    it, which a read-only directory cannot hold: results and plot failed there)."""
    import sqlite3
    con = sqlite3.connect(os.path.join(place, "r.sqlite"))
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()
    assert not os.path.exists(os.path.join(place, "r.sqlite-wal"))
    code, out = invoke_unprivileged(["results", "ro/r.sqlite"], place)
    assert code == 0 and out.count("done") == 4, out
    code, out = invoke_unprivileged(["plot", "ro/r.sqlite", "--kind", "latency-load", "-o",
                                     "fig.png"], place)
    assert code == 1 and "cannot write fig.png" in out     # (the place itself is root's)


def test_a_database_left_in_wal_mode_reads_in_a_read_only_place(place):
    """A database written by an earlier version (or a sweep killed before it closed) stays in
    WAL mode: opened read-only where nothing can be written, it is read as immutable."""
    import shutil
    import sqlite3
    src = os.path.join(place, "wal.sqlite")
    shutil.copy(os.path.join(place, "r.sqlite"), src)
    con = sqlite3.connect(src)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    ro = os.path.join(place, "ro")
    os.chmod(ro, 0o755)
    shutil.copy(src, os.path.join(ro, "wal.sqlite"))
    os.chmod(os.path.join(ro, "wal.sqlite"), 0o444)
    os.chmod(ro, 0o555)
    code, out = invoke_unprivileged(["results", "ro/wal.sqlite"], place)
    assert code == 0 and out.count("done") == 4, out


@pytest.mark.parametrize("damage", ["truncated", "garbled", "fake", "empty-table-json"])
def test_a_damaged_or_fake_database_is_a_clear_error(tmp_path, damage):
    import shutil
    import sqlite3
    db = tmp_path / "d.sqlite"
    from pysim.sweep import sweep
    sweep(from_dict(SMALL), {"traffic.injection_rate": [0.05, 0.1]}, jobs=1,
          db=tmp_path / "good.sqlite")
    shutil.copy(tmp_path / "good.sqlite", db)
    data = db.read_bytes()
    if damage == "truncated":
        db.write_bytes(data[: len(data) // 2])
    elif damage == "garbled":
        db.write_bytes(data[:100] + os.urandom(len(data) - 100))
    elif damage == "fake":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(5000))
    else:
        con = sqlite3.connect(db)
        con.execute("UPDATE points SET params = '[1, 2]'")
        con.commit()
        con.close()
    cfg = tmp_path / "c.toml"
    cfg.write_text(CFG_TEXT)
    for args in (["results", str(db)],
                 ["plot", str(db), "--kind", "latency-load", "-o", str(tmp_path / "x.png")],
                 ["sweep", str(cfg), "--param", "traffic.injection_rate=0.05", "--db",
                  str(db), "-q"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1, (args, res.output, res.exception)
        assert "Traceback" not in res.output and str(db) in res.output, res.output
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------ figures from malformed inputs

@pytest.mark.parametrize("kind,text,said", [
    ("link-utilisation", "[1, 2]", "is a trace; --kind link-utilisation takes a run's"),
    ("link-utilisation", '{"config": {}, "links": [], "x": [1, 2]', "not a JSON file"),
    ("link-utilisation", '{"config": "x", "links": []}', "'config' = 'x'"),
    ("link-utilisation", '{"config": {}, "links": 5}', "'links' = 5"),
    ("link-utilisation", '{"config": {}, "links": [{"src": "a", "dst": "b", '
                         '"utilisation": 0.5}]}', "'a' is not a node"),
    ("link-utilisation", '{"config": {}, "links": [], "x": NaN}', "NaN is not JSON"),
    ("timeline", '{"traceEvents": 5}', "'traceEvents' = 5"),
    ("timeline", '{"traceEvents": [{"ph": "X", "ts": "a", "dur": 1, "pid": 0}]}',
     "needs ts and dur"),
    ("timeline", '{"traceEvents": [{"ph": "M", "name": "process_name", "pid": [0]}]}',
     "a name event needs"),
    ("timeline", "\x00\x01", "not a JSON file"),
])
def test_malformed_figure_inputs_are_clear_errors(tmp_path, kind, text, said):
    src = tmp_path / "in.json"
    src.write_text(text)
    res = CliRunner().invoke(main, ["plot", str(src), "--kind", kind, "-o",
                                    str(tmp_path / "x.png")])
    assert res.exit_code == 1 and said in res.output, (res.output, res.exception)
    assert not (tmp_path / "x.png").exists()


def test_a_string_metric_on_an_axis_and_an_absent_baseline_are_refused(place):
    for args, said in (
            (["--kind", "latency-load", "--y", "saturation_reason"],
             "--y saturation_reason: its values are not numbers"),
            (["--kind", "speedup", "--group", "traffic.injection_rate", "--series",
              "network.vcs", "--baseline", "3", "--y", "avg_packet_latency"],
             "--baseline 3: no point"),
            (["--kind", "latency-load", "--series", "topology.dims"], None)):
        out = os.path.join(place, "x.png")
        res = CliRunner().invoke(main, ["plot", os.path.join(place, "r.sqlite"), *args, "-o",
                                        out])
        if said is None:                # a list-valued series (unhashable) draws
            assert res.exit_code == 0, (res.output, res.exception)
            os.unlink(out)
            continue
        assert res.exit_code == 1 and said in res.output, (res.output, res.exception)
        assert not os.path.exists(out)


def test_topo_draw_checks_the_extension_first(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CFG_TEXT)
    res = CliRunner().invoke(main, ["topo", str(cfg), "--draw", str(tmp_path / "x.xyz")])
    assert res.exit_code == 1 and "expected a .png, .pdf or .svg" in res.output


# ------------------------------------------------------------------ collectives of nothing

@pytest.mark.parametrize("algorithm", ["ring", "direct", "tree"])
def test_a_collective_of_zero_bytes_is_refused_naming_the_key(algorithm):
    """It printed 'algbw inf GB/s' and wrote Infinity (not JSON) with ring, and 'the op graph
    is empty' without naming workload.bytes with the others."""
    with pytest.raises(ConfigError, match=r"workload\.bytes = 0: expected an integer >= 1"):
        from_dict({"topology": {"kind": "ring", "size": 4},
                   "workload": {"kind": "collective", "bytes": 0, "algorithm": algorithm}})


def test_results_never_hold_non_finite_numbers():
    """Whatever a run could not define is null in the JSON, which is strict."""
    from pysim._io import json_safe
    r = simulate(from_dict(with_(SMALL, traffic={"injection_rate": 0.0})))
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["avg_packet_latency"] is None
    assert json_safe({"a": [float("inf"), {"b": float("nan")}], "c": 1.5}) == \
        {"a": [None, {"b": None}], "c": 1.5}


# ------------------------------------------------------------------ the Python API

def test_sweep_takes_arrays_ranges_and_dicts_and_refuses_bad_jobs(tmp_path):
    import numpy as np
    import pysim
    base = with_(SMALL, simulation={"measure_cycles": 100})
    rows = pysim.sweep(base, {"traffic.injection_rate": np.array([0.05, 0.1]),
                              "network.vcs": range(2, 4)}, jobs=1)
    assert sorted((r["params"]["traffic.injection_rate"], r["params"]["network.vcs"])
                  for r in rows) == [(0.05, 2), (0.05, 3), (0.1, 2), (0.1, 3)]
    assert all(r["status"] == "done" for r in rows)
    for jobs in (-1, 0, "2", 1.5, True):
        with pytest.raises(ConfigError, match="jobs = "):
            pysim.sweep(base, {"network.vcs": [2]}, jobs=jobs)
    with pytest.raises(TypeError, match="sweep.. takes a Config"):
        pysim.sweep(42, {"network.vcs": [2]})


def test_load_takes_override_pairs_and_refuses_other_things(tmp_path):
    import pysim
    p = tmp_path / "c.toml"
    p.write_text(CFG_TEXT)
    assert pysim.load(p, [("network.vcs", 4)]).network.vcs == 4
    with pytest.raises(TypeError, match="overrides must be"):
        pysim.load(p, [1, 2])
    with pytest.raises(ConfigError, match="expected a key 'section.key'"):
        pysim.load(p, {1: 2})


# ------------------------------------------------------------------ files that are not configs

@pytest.mark.parametrize("text,said", [
    ('[topology]\nfile = "empty.toml"\n', "has no [topology] table"),
    ('topology = "x"\n', "[topology] must be a table, got 'x'"),
])
def test_topology_file_and_topology_that_are_not_tables(tmp_path, text, said):
    (tmp_path / "empty.toml").write_text("x = 1\n")
    (tmp_path / "base.toml").write_text(CFG_TEXT)
    (tmp_path / "c.toml").write_text(text)
    import pysim
    for overrides in ({}, {"topology.file": str(tmp_path / "base.toml")}):
        if "file" in text and overrides:
            continue
        with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]")):
            pysim.load(tmp_path / "c.toml", overrides)
    (tmp_path / "none.toml").write_text("[simulation]\nseed = 2\n")      # no [topology]
    assert pysim.load(tmp_path / "none.toml", {"topology.file": str(tmp_path / "base.toml")}
                      ).topology.dims == [2, 2]


def test_a_byte_order_mark_is_accepted(tmp_path):
    import pysim
    p = tmp_path / "c.toml"
    p.write_bytes(b"\xef\xbb\xbf" + CFG_TEXT.encode())
    assert pysim.load(p).topology.dims == [2, 2]


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "big"])
def test_an_input_that_is_not_a_bounded_regular_file_is_refused(tmp_path, target, monkeypatch):
    """/dev/zero was read to the end of memory; a FIFO with no writer blocked for ever."""
    import pysim
    import pysim._io
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
        target = str(tmp_path / "fifo")
    elif target == "big":
        monkeypatch.setattr(pysim._io, "MAX_INPUT_BYTES", 1000)
        (tmp_path / "big.toml").write_text("[[ops]]\n" * 200)
        target = str(tmp_path / "big.toml")
    cfg = with_({"topology": SMALL["topology"]}, workload={"kind": "graph", "file": target})
    with pytest.raises(ConfigError, match="not a regular file|expected at most 1,000"):
        simulate(from_dict(cfg))


# ------------------------------------------------------------------ silent assumptions

def test_a_memory_node_in_a_collective_group_is_named_as_such():
    cfg = {"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"},
                                                   {"name": "m", "kind": "mem"}],
                        "links": [{"a": "a", "b": "b"}, {"a": "b", "b": "m"}]},
           "workload": {"kind": "collective", "group": ["a", "m"]}}
    with pytest.raises(ConfigError, match=r"workload\.group: 'm' is a memory node"):
        simulate(from_dict(cfg))


def test_a_repeated_param_is_refused(tmp_path):
    (tmp_path / "c.toml").write_text(CFG_TEXT)
    res = CliRunner().invoke(main, ["sweep", str(tmp_path / "c.toml"), "--param",
                                    "network.vcs=2", "--param", "network.vcs=4", "--db",
                                    str(tmp_path / "r.sqlite"), "-q"])
    assert res.exit_code == 1 and "--param network.vcs is given twice" in res.output
    assert not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize("table,kind", [("mem", "memory node"), ("host", "host"),
                                        ("nic", "mem node")])
def test_defaults_for_a_kind_of_node_the_system_lacks_are_refused(table, kind):
    body = {"nic": {"mem": {"injection_gbps": 10.0}}} if table == "nic" else \
        {table: {"gbps" if table == "mem" else "tflops": 10.0}}
    with pytest.raises(ConfigError, match=f"has no {kind}"):
        simulate(from_dict(with_(SMALL, topology=body)))


def test_an_offload_sram_too_small_for_its_pieces_is_refused():
    """The engine streams chunks through its SRAM in offload_pieces pieces: an SRAM where a
    piece cannot hold one byte is refused (offload_sram_mb = 1e-9 ran as if it held
    something); chunks larger than the SRAM stream through it."""
    cfg = {"topology": {"kind": "ring", "size": 4, "npu": {"offload_sram_mb": 1e-9}},
           "workload": {"kind": "collective", "engine": "offload", "bytes": 4096}}
    with pytest.raises(ConfigError, match="does not fit in the engine's SRAM"):
        simulate(from_dict(cfg))
    cfg["topology"]["npu"]["offload_sram_mb"] = 0.001      # 1,048 bytes: 65-byte pieces
    assert simulate(from_dict(cfg)).makespan_cycles > 0
    cfg["workload"]["bytes"] = 1 << 20                     # 256 KiB chunks, 4 times the SRAM
    cfg["topology"]["npu"]["offload_sram_mb"] = 0.0625
    assert simulate(from_dict(cfg)).makespan_cycles > 0


def test_reading_memory_no_op_wrote_is_a_warning(tmp_path):
    import pysim
    (tmp_path / "ops.toml").write_text('[[ops]]\nkind = "mem_read"\nnpu = "a"\nmem = "m"\n'
                                       'bytes = 4096\n')
    cfg = {"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "m", "kind": "mem"}],
                        "links": [{"a": "a", "b": "m"}]},
           "workload": {"kind": "graph", "file": str(tmp_path / "ops.toml")}}
    with pytest.warns(pysim.PysimWarning, match="reads 4,096 bytes from memory node m and "
                                                "writes 0"):
        simulate(from_dict(cfg))


# ------------------------------------------------------------------ set-up on dense graphs

def _reference_table(topo, how):
    """The definition, by all-pairs distances (Floyd-Warshall) on a small graph: u's next hop
    towards d is, among its channels c = u -> v with dist(v, d) + w(c) = dist(u, d), the one
    to the lowest v, then the lowest channel id."""
    import numpy as np
    from pysim.routing import _weights
    n, w = topo.n_nodes, _weights(topo, how)
    D = np.full((n, n), np.inf)
    np.fill_diagonal(D, 0.0)
    for c in range(topo.n_channels):
        a, b = topo.ch_src[c], topo.ch_dst[c]
        D[a, b] = min(D[a, b], w[c])
    for k in range(n):
        D = np.minimum(D, D[:, k:k + 1] + D[k:k + 1, :])
    table = np.full((n, n), -1)
    for d in range(n):
        if topo.node_kinds[d] == "switch":
            continue
        for u in range(n):
            if u == d:
                continue
            best = None
            for c in range(topo.n_channels):
                if topo.ch_src[c] == u and abs(D[topo.ch_dst[c], d] + w[c] - D[u, d]) <= 1e-9:
                    key = (topo.ch_dst[c], c)
                    best = key if best is None or key < best else best
            table[u, d] = -1 if best is None else best[1]
    return table


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("how", ["hops", "latency", "bandwidth"])
def test_compiled_shortest_paths_match_the_definition(seed, how):
    import random
    import numpy as np
    from pysim.routing import shortest_path_table
    from pysim.topology import build
    rng = random.Random(seed)
    n = rng.randint(3, 12)
    kinds = ["npu"] * n
    for i in rng.sample(range(1, n), k=min(2, n - 1)):
        kinds[i] = rng.choice(["switch", "mem", "host"])
    nodes = [{"name": f"v{i}", "kind": kinds[i]} for i in range(n)]
    links = [{"a": f"v{i}", "b": f"v{rng.randrange(i)}", "gbps": rng.choice([8.0, 25.0, 50.0]),
              "latency_cycles": rng.randint(1, 5), "count": rng.randint(1, 2)}
             for i in range(1, n)]
    links += [{"a": f"v{a}", "b": f"v{b}", "gbps": rng.choice([8.0, 25.0]),
               "latency_cycles": rng.randint(1, 5), "directed": rng.random() < 0.3}
              for a, b in (rng.sample(range(n), 2) for _ in range(n))]
    topo = build(from_dict({"topology": {"kind": "graph", "nodes": nodes, "links": links,
                                         "route_weight": how}}))
    try:
        table = shortest_path_table(topo, how)
    except ConfigError as e:          # a directed link can cut a node off: the reference too
        assert "cannot be reached" in str(e)
        ref = _reference_table(topo, how)
        eps = [i for i in range(n) if kinds[i] != "switch"]
        assert any(ref[u, d] < 0 for u in eps for d in eps if u != d)
        return
    np.testing.assert_array_equal(table, _reference_table(topo, how))


def test_a_dense_graph_compiles_every_channel_and_route():
    """fully_connected of 400 nodes: 159,600 links, each one channel a way plus the NICs',
    every pair one hop apart (bench/guards.py times it: linear in the channels)."""
    from pysim.network import compile_network
    net = compile_network(from_dict({"topology": {"kind": "fully_connected", "size": 400}}))
    assert (net.ch_kind == 0).sum() == 400 * 399
    rt = net.arrays.table().reshape(400, 400)
    off = ~np.eye(400, dtype=bool)
    assert (net.ch_dst[rt[off]] == np.nonzero(off)[1]).all()


# ------------------------------------------------------------------ expansions counted first

@pytest.mark.parametrize("collective,algorithm", [
    (c, a) for a, cs in [("ring", ["all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                   "reduce"]),
                         ("bidir_ring", ["all_reduce", "all_gather"]),
                         ("direct", ["all_reduce", "all_to_all", "broadcast", "reduce",
                                     "all_gather"]),
                         ("halving_doubling", ["all_reduce", "reduce_scatter"]),
                         ("tree", ["all_reduce"]), ("hierarchical", ["all_reduce"]),
                         ("bidir_hierarchical", ["all_reduce"])]
    for c in cs])
@pytest.mark.parametrize("engine", [None, "npu", "offload"])
def test_the_collective_op_bound_bounds_the_ops_built(collective, algorithm, engine):
    """ops_bound is what refuses a collective before building it: it must never be below
    what is built (a bound too low lets a blow-up through), and it is exact for the ring
    without an endpoint model."""
    from pysim.network import compile_network
    from pysim.workload.collectives import collective_graph, ops_bound
    from pysim.workload.graph import compile_graph
    cfg = from_dict({"topology": {"kind": "torus", "dims": [4, 2]},
                     "workload": {"kind": "collective", "collective": collective,
                                  "algorithm": algorithm, "bytes": 8192, "chunks": 3,
                                  "engine": engine}})
    net = compile_network(cfg)
    g, meta = collective_graph(cfg, net.topo)
    built = len(compile_graph(g, net.topo, cfg)[0]["kind"])
    bound = ops_bound(collective, algorithm, 8, 3, engine, [4, 2])
    assert built <= bound
    if algorithm == "ring" and engine is None and collective not in ("broadcast", "reduce"):
        assert built == bound


@pytest.mark.parametrize("ops,said", [
    ('kind = "mem_write"\nnpu = "a"\nmem = "m"\nbytes = 10000000', "mem_piece_bytes = 1"),
    ('kind = "compute"\nnode = "a"\nflops = 1e17', "slice_cycles = 1"),
])
def test_an_op_that_expands_past_the_limit_is_refused_before_building(tmp_path, ops, said):
    """A 10 MB write in 1-byte pieces is 30 million engine ops; a roofline op of 10^12 cycles
    in 1-cycle slices passes MAX_SLICES. Refused before building, naming the op and the key
    (bench/guards.py times it)."""
    (tmp_path / "ops.toml").write_text(f"[[ops]]\nname = \"big\"\n{ops}\n")
    cfg = {"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "m", "kind": "mem"}],
                        "links": [{"a": "a", "b": "m"}]},
           "workload": {"kind": "graph", "file": str(tmp_path / "ops.toml"),
                        "mem_piece_bytes": 1, "slice_cycles": 1}}
    with pytest.raises(ConfigError, match=f"op big alone into .*{said}"):
        simulate(from_dict(cfg))


def test_a_collective_too_large_is_refused_before_building():
    cfg = from_dict({"topology": {"kind": "mesh", "dims": [32, 32]},
                     "workload": {"kind": "collective", "algorithm": "direct",
                                  "collective": "all_to_all", "chunks": 10}})
    with pytest.raises(ConfigError, match="workload.chunks = 10: all_to_all by direct over "
                                          "1024 participants makes up to"):
        simulate(cfg)


@pytest.mark.parametrize("topology", [
    {"kind": "torus", "dims": [4, 4]}, {"kind": "torus", "dims": [5, 3, 2]},
    {"kind": "ring", "size": 7}, {"kind": "ring", "size": 6, "bidirectional": False},
    {"kind": "graph", "nodes": [{"name": f"v{i}"} for i in range(6)],
     "links": [{"a": f"v{i}", "b": f"v{(i + 1) % 6}", "directed": True} for i in range(6)]},
])
def test_the_compiled_class_walk_finds_what_following_every_route_finds(topology, monkeypatch):
    """analyse's compiled walk (a route stops at a (channel, class) already followed towards
    its destination) against following every route to its end (_walk): the same VC classes,
    the same dependencies, the same cycle if any."""
    import copy
    from pysim import deadlock, routing
    from pysim.topology import build
    cfg = from_dict({"topology": topology, "network": {"vcs": 8}})
    topo = build(cfg)
    r = routing.ROUTINGS[topo.routing](topo, cfg)
    deps = routing.channel_dependencies(topo, r.table)
    post, _ = routing.core.dfs_order(topo.n_channels, *deadlock.csr(topo.n_channels, deps))
    if r.ch_order is None:
        r.ch_order = np.zeros(topo.n_channels, np.int32)
        r.ch_order[post[::-1]] = np.arange(topo.n_channels, dtype=np.int32)
    results = []
    for marks in (deadlock.MARKS_MAX, 0):              # compiled, then every route walked
        monkeypatch.setattr(deadlock, "MARKS_MAX", marks)
        mine = copy.deepcopy(r)
        try:
            routing.analyse(topo, mine)
            results.append((mine.n_classes, mine.cdg_edges))
        except ConfigError as e:
            results.append(str(e))
    assert results[0] == results[1]



# ------------------------------------------------------------------ describing and drawing big systems

def test_topo_describes_a_dense_graph_without_walking_every_channel_per_link(tmp_path):
    """The description of fully_connected of 300 nodes is the definition: every pair linked,
    one hop apart (bench/guards.py times it)."""
    (tmp_path / "c.toml").write_text('[topology]\nkind = "fully_connected"\nsize = 300\n')
    res = CliRunner().invoke(main, ["topo", str(tmp_path / "c.toml"), "--json",
                                    str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    d = json.loads((tmp_path / "d.json").read_text())
    assert len(d["links"]) == 300 * 299 // 2 and d["diameter"] == 1 and d["avg_hops"] == 1.0


def test_the_bisection_of_a_large_graph_is_found_without_an_eigen_decomposition():
    """A ring given as a graph of 3,000 nodes (past the spectral cut's 2,048): the cut of
    the first half in breadth-first order crosses two links, the ring's true bisection."""
    from pysim.network import bisection
    from pysim.topology import build
    n = 3000
    cfg = from_dict({"topology": {"kind": "graph",
                                  "nodes": [{"name": f"v{i}"} for i in range(n)],
                                  "links": [{"a": f"v{i}", "b": f"v{(i + 1) % n}", "gbps": 10.0}
                                            for i in range(n)]}})
    bw, cut = bisection(build(cfg), cfg)
    assert bw == pytest.approx(20.0) and cut.sum() == n // 2


def test_a_drawing_of_too_many_links_is_refused_before_drawing(tmp_path):
    (tmp_path / "c.toml").write_text('[topology]\nkind = "fully_connected"\nsize = 300\n')
    for args in (["topo", str(tmp_path / "c.toml"), "--draw", str(tmp_path / "x.png")],
                 ["plot", str(tmp_path / "c.toml"), "--kind", "topology", "-o",
                  str(tmp_path / "x.png")]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and "44,850 linked node pairs" in res.output, res.output
        assert not (tmp_path / "x.png").exists()


def test_devices_fifos_and_links_as_outputs(tmp_path):
    """/dev/stdout and a FIFO are written in place (a file renamed over them would replace
    them: as root, /dev/null itself); /dev/full's error keeps the result; a link's target is
    overwritten with --force, the link stays a link."""
    import stat
    import threading
    cfg = tmp_path / "c.toml"
    cfg.write_text(CFG_TEXT)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    res = CliRunner().invoke(main, ["run", str(cfg), "--json", str(fifo), "-q"])
    reader.join(10)
    assert res.exit_code == 0 and json.loads(got[0])["config"]["topology"]["dims"] == [2, 2]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    if os.path.exists("/dev/full"):
        res = CliRunner().invoke(main, ["run", str(cfg), "--json", "/dev/full"])
        assert res.exit_code == 1 and "kept in" in res.output
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
        os.unlink(res.output.split("kept in ")[1].split()[0])
    (tmp_path / "real.json").write_text("{}")
    os.symlink("real.json", tmp_path / "link.json")
    res = CliRunner().invoke(main, ["run", str(cfg), "--json", str(tmp_path / "link.json"),
                                    "--force", "-q"])
    assert res.exit_code == 0 and os.path.islink(tmp_path / "link.json")
    assert "config" in json.loads((tmp_path / "real.json").read_text())


def test_sweep_values_that_are_not_finite_and_a_db_that_is_not_a_file(tmp_path):
    """--param x=1e999 (TOML's inf) ran every point to fail, stored as params null; a --db
    that is a device was 'disk I/O error'."""
    import pysim
    cfg = tmp_path / "c.toml"
    cfg.write_text(CFG_TEXT)
    res = CliRunner().invoke(main, ["sweep", str(cfg), "--param", "network.clock_ghz=1e999",
                                    "--db", str(tmp_path / "r.sqlite"), "-q"])
    assert res.exit_code == 1 and "the value inf is not a finite number" in res.output
    assert not (tmp_path / "r.sqlite").exists()
    with pytest.raises(ConfigError, match="not a finite number"):
        pysim.sweep(str(cfg), {"network.clock_ghz": [1.0, float("nan")]})
    if os.path.exists("/dev/null"):
        res = CliRunner().invoke(main, ["sweep", str(cfg), "--param", "network.vcs=2",
                                        "--db", "/dev/null", "-q"])
        assert res.exit_code == 1 and "not a regular file" in res.output


def test_with_overrides_takes_pairs_and_simulate_refuses_a_progress_that_is_not_callable():
    import pysim
    cfg = from_dict(SMALL)
    assert cfg.with_overrides([("network.vcs", 3)]).network.vcs == 3
    with pytest.raises(TypeError, match="takes a function"):
        pysim.simulate(cfg, progress="x")              # (refused before the run)


def test_a_timeline_of_too_many_ops_is_refused_unless_windowed(tmp_path, monkeypatch):
    """A timeline draws a bar per op: past MAX_TIMELINE_OPS it is refused unless windowed
    (--xlim); a span whose ts + dur is infinite is refused, not a matplotlib ValueError."""
    import pysim.plot.runs
    monkeypatch.setattr(pysim.plot.runs, "MAX_TIMELINE_OPS", 100)
    events = [{"ph": "X", "ts": float(i), "dur": 1.0, "pid": 0, "tid": 0, "name": "x"}
              for i in range(300)]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    out = str(tmp_path / "x.png")
    res = CliRunner().invoke(main, ["plot", str(tmp_path / "t.json"), "--kind", "timeline",
                                    "-o", out])
    assert res.exit_code == 1 and "the trace has 300 ops; a timeline draws at most 100" \
        in res.output
    res = CliRunner().invoke(main, ["plot", str(tmp_path / "t.json"), "--kind", "timeline",
                                    "-o", out, "--xlim", "10", "50"])     # (µs: 41 ops)
    assert res.exit_code == 0, res.output
    events.append({"ph": "X", "ts": 1e308, "dur": 1e308, "pid": 0, "tid": 0, "name": "x"})
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    res = CliRunner().invoke(main, ["plot", str(tmp_path / "t.json"), "--kind", "timeline",
                                    "-o", out, "--force"])
    assert res.exit_code == 1 and "finite numbers" in res.output


def test_a_switch_is_routed_by_its_rule_up_to_the_node_limit():
    """A switch is a tree: its routes are the rule's (up to the switch, down to the
    destination), whatever its size, and no channel dependency is enumerated past
    routing.ANALYSE_MAX_NODES (up/down routes cannot deadlock). A switch of 12,000 NPUs has
    two-hop routes through sw0 (no table, no dependency graph; its set-up time is measured
    by bench/setup_limits.py); one of 262,144 NPUs passes the node limit and is refused
    naming topology.size; the general bound on dependencies refuses a graph star the
    same way."""
    from pysim.deadlock import MAX_DEPENDENCIES, _check_dependencies
    from pysim.network import compile_network
    from pysim.routing import path
    from pysim.topology import build
    net = compile_network(from_dict({"topology": {"kind": "switch", "size": 12000}}))
    topo, r = net.topo, net.routing
    assert r.rule is not None and r.tab is None and r.cdg_edges == -1
    sw = topo.node_names.index("sw0")
    for a, b in ((0, 11999), (7000, 3), (5999, 6000)):
        chans = path(topo, r, a, b)
        assert [(topo.ch_src[c], topo.ch_dst[c]) for c in chans] == [(a, sw), (sw, b)]
    with pytest.raises(ConfigError, match="topology.size = 262144: 262,145 nodes; at most "
                                          "262,144"):
        simulate(from_dict({"topology": {"kind": "switch", "size": 262144}}))
    topo = build(from_dict({"topology": {"kind": "switch", "size": 4}}))
    with pytest.raises(ConfigError, match="more than 67,108,864 edges"):
        _check_dependencies(topo, MAX_DEPENDENCIES + 1)


def test_a_roofline_op_of_a_million_slices_runs_inside_the_engine(tmp_path):
    """A roofline op of 10^6 cycles in 1-cycle slices is two engine ops (its slices run in
    the compiled core): it takes its roofline time (bench/guards.py times it)."""
    (tmp_path / "ops.toml").write_text('[[ops]]\nname = "big"\nkind = "compute"\nnode = "a"\n'
                                       'flops = 1e11\n')
    cfg = {"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "m", "kind": "mem"}],
                        "links": [{"a": "a", "b": "m"}]},
           "workload": {"kind": "graph", "file": str(tmp_path / "ops.toml"),
                        "slice_cycles": 1}}
    r = simulate(from_dict(cfg))
    assert r.ops[0]["finish"] == 10**6                 # 1e11 FLOPs at 100 TFLOP/s, 1 GHz


def test_an_output_name_too_long_is_refused_before_the_run(tmp_path):
    """A folder for --export-chakra or a --db whose name the file system does not take was
    found after the run (the collective simulated, then `[Errno 36] File name too long`) or
    said only 'unable to open database file'; both are refused first, saying why."""
    long = "a" * 300
    res = CliRunner().invoke(main, ["run", "ring8", "--set", "workload.kind=collective",
                                    "--export-chakra", str(tmp_path / "new" / long), "-q"])
    assert res.exit_code == 1 and "has 300 bytes; the file system holding" in res.output
    assert "makespan" not in res.output and not (tmp_path / "new").exists()
    res = CliRunner().invoke(main, ["sweep", "ring8", "--param", "network.vcs=2", "--db",
                                    str(tmp_path / (long + ".sqlite")), "-q"])
    assert res.exit_code == 1 and "results database (--db): cannot write" in res.output
    assert "its name has 307 bytes" in res.output


def test_force_never_writes_an_output_over_an_input(tmp_path):
    """`pysim results DB --csv DB --force` wrote CSV over the results database, `pysim run
    c.toml --json c.toml --force` JSON over the config: --force replaces outputs, and an
    output naming a file the command reads is refused, the file left as it was."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(CFG_TEXT)
    db = tmp_path / "r.sqlite"
    assert CliRunner().invoke(main, ["sweep", str(cfg), "--param", "network.vcs=2", "--db",
                                     str(db), "-q", "-j", "1"]).exit_code == 0
    before = (cfg.read_bytes(), db.read_bytes())
    for args, opt in ((["results", str(db), "--csv", str(db)], "--csv"),
                      (["run", str(cfg), "--json", str(cfg), "-q"], "--json"),
                      (["topo", str(cfg), "--json", str(cfg)], "--json"),
                      (["plot", str(db), "--kind", "latency-load", "-o", str(db)], "-o")):
        res = CliRunner().invoke(main, args + ["--force"])
        assert res.exit_code == 1 and f"{opt} {args[args.index(opt) + 1]} is the" in \
            res.output and "--force writes over outputs, not inputs" in res.output, res.output
    assert (cfg.read_bytes(), db.read_bytes()) == before
