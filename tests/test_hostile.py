"""Inputs that could hurt the machine, hang, lose a result or mislead: each class is refused
before any work, with the key named, or gives a correct result. Resource bounds are asserted as
outcomes (processes started, a refusal before the work, a file untouched), never as timings."""
import json
import re
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from pysim import ConfigError
from pysim.cli import main
from pysim.sweep import Executor


def cores():
    return len(os.sched_getaffinity(0))


def _pid(delay):
    time.sleep(delay)
    return os.getpid()


# ------------------------------------------------------------ worker processes

def test_workers_never_outnumber_the_cores():
    """However many workers are asked for, no more processes run than the cores."""
    asked = cores() + 30
    with pytest.warns(Warning, match="worker processes asked for"):
        ex = Executor(jobs=asked, tasks=asked)
    with ex:
        fs = {ex.submit(_pid, 0.05) for _ in range(asked)}
        pids = set()
        while fs:
            done, fs = ex.wait(fs)
            pids.update(ex.result(f) for f in done)
    assert len(pids) <= cores()


def test_jobs_workers_refused_when_not_positive():
    from pysim.jobs import run_stream
    from pysim.jobs.servers import load_server
    srv = load_server("dgx1-v100", {"network.model": "flow", "jobs.count": 2})
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="workers"):
            run_stream(srv, workers=bad)


def test_jobs_workers_die_with_their_parent(tmp_path):
    """kill -9 of the process that started an executor's workers ends them too."""
    pidfile = tmp_path / "pids"
    script = textwrap.dedent(f"""
        import os, time
        from pysim.sweep import Executor

        def work(_):
            with open({str(pidfile)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            time.sleep(120)

        with Executor(jobs=2, tasks=2) as ex:
            fs = [ex.submit(work, i) for i in range(2)]
            ex.wait(set(fs))
    """)
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        for _ in range(300):
            if pidfile.exists() and len(pidfile.read_text().split()) >= min(2, cores()):
                break
            time.sleep(0.1)
        workers = [int(p) for p in pidfile.read_text().split()]
        assert workers
    finally:
        parent.kill()
        parent.wait()
    alive = workers
    for _ in range(100):                   # the kernel (or the watch thread) ends them
        alive = [p for p in alive if _alive(p)]
        if not alive:
            break
        time.sleep(0.1)
    for p in alive:                        # (leave nothing behind if the check fails)
        os.kill(p, signal.SIGKILL)
    assert not alive


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------ model files read bounded

@pytest.fixture
def alarm():
    """Fail (rather than hang the suite) if a call blocks for 20 s."""
    def ring(*_):
        raise TimeoutError("blocked for 20 s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("suffix", [".onnx", ".txt"])
def test_model_files_that_are_not_regular_or_too_large_are_refused(tmp_path, alarm, suffix):
    pytest.importorskip("onnx")
    from pysim import models
    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        models.load(str(fifo))
    dev = tmp_path / f"zero{suffix}"
    dev.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="not a regular file"):
        models.load(str(dev))
    sparse = tmp_path / f"sparse{suffix}"
    with open(sparse, "wb") as f:
        f.truncate(10 << 30)               # 10 GB that take no disk
    with pytest.raises(ConfigError, match="10,737,418,240 bytes"):
        models.load(str(sparse))


def test_a_device_as_workload_model_is_named_as_such(alarm):
    from pysim import load
    from pysim.workload.training import load_model
    cfg = load("dgx1-v100", {"workload.kind": "training", "workload.model": "/dev/zero"})
    with pytest.raises(ConfigError, match="not a regular file"):
        load_model(cfg)


# ------------------------------------------------------------ limits decided before work

def _refused_before_building(monkeypatch, config, over, key):
    """The run is refused, naming `key`, before a single op is added to a graph."""
    from pysim import load, simulate as run
    from pysim.workload import graph as G
    added = []
    real = G.OpGraph._add

    def counting(self, *a, **k):
        added.append(1)
        if len(added) > 1000:
            raise AssertionError("ops are being built")
        return real(self, *a, **k)
    monkeypatch.setattr(G.OpGraph, "_add", counting)
    with pytest.raises(ConfigError, match=key):
        run(load(config, over))
    assert len(added) <= 1000


TRAIN = {"workload.kind": "training", "network.model": "flow"}


def test_too_many_iterations_refused_before_building(monkeypatch):
    _refused_before_building(monkeypatch, "dgx1-v100", {
        **TRAIN, "workload.model": "resnet50", "workload.batch": 64,
        "workload.iterations": 1000000}, "workload.iterations = 1,000,000")


def test_tiny_buckets_refused_before_building(monkeypatch):
    _refused_before_building(monkeypatch, "mesh8x8", {
        **TRAIN, "workload.model": "resnet152", "workload.batch": 64,
        "workload.bucket_mb": 1e-6}, "workload.bucket_mb")


def test_too_many_layers_refused_before_building(monkeypatch):
    """A model whose layers alone pass the op limit (here a limit of 100,000 ops, so that
    80 layers do what 8,000 do against the shipped 10,000,000)."""
    from pysim.workload import graph as G
    monkeypatch.setattr(G, "MAX_OPS", 100_000)
    _refused_before_building(monkeypatch, "dgx1-v100", {
        **TRAIN, "workload.model": "transformer", "workload.batch": 64,
        "workload.model_params": {"layers": 80, "hidden": 8, "heads": 1, "seq": 8,
                                  "vocab": 8}, "workload.iterations": 1,
        "workload.parallel": {"micro_batches": 8}}, "layers")


# ------------------------------------------------------------ slow links and long packets

def _collective(over):
    from pysim import load, simulate
    return simulate(load("ring8", {"workload.kind": "collective", **over}))


def test_flow_calibration_is_bounded_by_neither_packet_size_nor_link_slowness(alarm):
    """The flow level's calibration finishes whatever the packets and links (it was a
    flit-level stream of 72 packets: hours at packet_flits = 1e9 or a 1e-5 GB/s link)."""
    base = {"workload.bytes": 1 << 20, "network.model": "flow"}
    small = _collective({**base, "workload.packet_flits": 1 << 15})   # one packet a message
    huge = _collective({**base, "workload.packet_flits": 10 ** 9})
    # every message is one packet at either setting; the flow level rates a single-VC class
    # by a stream of full packets of packet_flits (extended affinely past a few thousand
    # flits), so the two differ by the per-packet gap over 2^15 flits at most
    assert huge.makespan_cycles == pytest.approx(small.makespan_cycles, rel=1e-3)
    slow = _collective({"workload.bytes": 1024, "network.model": "flow",
                        "topology.link_gbps": 1e-5})
    # ring all-reduce: 2 (p - 1) / p x bytes over each link, at the link's rate (as the engine
    # holds it: an integer number of 2^-20 bytes per cycle)
    rate = round(1e-5 * 2 ** 20) / 2 ** 20
    assert slow.makespan_cycles >= 2 * 7 / 8 * 1024 / rate


def test_a_slow_link_is_slow_not_deadlocked(alarm):
    """The watchdog allows the serialisation the engine runs (the integer rate), so a slow
    link finishes whatever simulation.watchdog_cycles is."""
    r = _collective({"topology.size": 2, "workload.bytes": 512, "workload.chunks": 1,
                     "topology.link_gbps": 0.0000958347, "simulation.watchdog_cycles": 1})
    rate = round(0.0000958347 * 2 ** 20) / 2 ** 20          # bytes per cycle, as run
    assert r.makespan_cycles >= 256 / rate


def test_a_link_too_slow_to_keep_statistics_of_is_refused():
    with pytest.raises(ConfigError, match="topology.link_gbps"):
        _collective({"workload.bytes": 1024, "topology.link_gbps": 1e-6})


# ------------------------------------------------------------ outputs: never lost, checked first

def test_a_second_writer_of_one_output_fails_and_keeps_its_result(tmp_path):
    """Two runs writing one --json: both passed the check before their work; the one that
    finishes second must not replace the other's file without --force."""
    from pysim._io import OutputError, check_output, write_atomic
    out = tmp_path / "same.json"
    check_output(out)                       # run A's check
    check_output(out)                       # run B's check, while A runs
    write_atomic(out, lambda f: f.write("A"), force=False)
    with pytest.raises(OutputError, match="another process"):
        write_atomic(out, lambda f: f.write("B"), force=False)
    assert out.read_text() == "A"
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]    # no temporary left


def test_a_name_too_long_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["run", "ring8", "-q", "--set", "workload.kind=collective",
                                  "--set", "workload.bytes=1024", "--json",
                                  "x" * 300 + ".json"])
    assert r.exit_code == 1 and "at most 255" in r.output
    assert "Traceback" not in r.output and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", ["other-schema", "truncated", "long-name"])
def test_a_cache_that_cannot_serve_is_refused_by_name(tmp_path, damage):
    import sqlite3
    from pysim.jobs.cache import Cache
    path = tmp_path / "c.sqlite"
    if damage == "long-name":
        path = tmp_path / ("c" * 300)
    else:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE shapes (a, b)" if damage == "other-schema" else
                   "CREATE TABLE t (a)")
        db.executemany("INSERT INTO " + ("shapes VALUES (1, 2)" if damage == "other-schema"
                                         else "t VALUES (?)"),
                       [] if damage == "other-schema" else [(i,) for i in range(500)])
        db.commit()
        db.close()
        if damage == "truncated":
            data = path.read_bytes()
            path.write_bytes(data[:2000])
    with pytest.raises(ConfigError, match="--cache"):
        Cache(str(path))


# ------------------------------------------------------------ no traceback: the roots found

def _cli(args, cwd=None):
    r = CliRunner().invoke(main, args, catch_exceptions=True)
    assert r.exception is None or isinstance(r.exception, SystemExit), \
        f"{args}: {type(r.exception).__name__}: {r.exception}"
    return r


TRAIN_ARGS = ["run", "dgx1-v100", "-q", "--set", "workload.kind=training", "--set",
              "workload.model=alexnet", "--set", "workload.batch=16", "--set",
              "network.model=flow"]


@pytest.mark.parametrize("sets,key", [
    (["workload.group=[]"], "workload.group"),
    (["topology.npu.hbm_gb=1e300"], "hbm_gb"),
])
def test_training_values_refused_not_raised(sets, key):
    r = _cli(TRAIN_ARGS + [a for s in sets for a in ("--set", s)])
    assert r.exit_code == 1 and key in r.output


@pytest.mark.parametrize("sets,key", [
    (["jobs.min_npus=1", "jobs.max_npus=1"], None),
    (["jobs.arrivals=uniform", "jobs.window_s=1e300"], "jobs.window_s"),
    (['jobs.insensitive=["nosuch"]'], "jobs.insensitive"),
])
def test_job_streams_refused_or_run_not_raised(sets, key):
    r = _cli(["jobs", "dgx1-v100", "-q", "--set", "network.model=flow", "--jobs", "2",
              "--policy", "baseline"] + [a for s in sets for a in ("--set", s)])
    if key is None:
        assert r.exit_code == 0, r.output
    else:
        assert r.exit_code == 1 and key in r.output


def test_numpy_numbers_are_numbers_in_the_api():
    np = pytest.importorskip("numpy")
    from pysim import load
    cfg = load("dgx1-v100", {"workload.kind": "training", "workload.model": "alexnet",
                             "workload.batch": np.int64(16),
                             "workload.parallel": {"dp": np.int32(8)}})
    assert cfg.workload.batch == 16 and type(cfg.workload.batch) is int


def test_a_model_name_instead_of_a_model_is_refused_in_the_api():
    from pysim import load
    from pysim.topology import build
    from pysim.workload.training import training_graph
    cfg = load("dgx1-v100", {"workload.kind": "training", "workload.model": "alexnet",
                             "workload.batch": 16})
    with pytest.raises(ConfigError, match="pysim.models.Model"):
        training_graph(cfg, build(cfg), "resnet50")


def test_an_onnx_dimension_past_int64_is_refused(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from pysim import models
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S"])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g), str(path))
    with pytest.raises(ConfigError, match="dimension S"):
        models.load(str(path), S=2 ** 63)


# ------------------------------------------------------------ each figure refuses what it cannot draw

@pytest.fixture(scope="module")
def jobs_json(tmp_path_factory):
    d = tmp_path_factory.mktemp("jobsfig")
    out = d / "jobs.json"
    r = CliRunner().invoke(main, ["jobs", "dgx1-v100", "-q", "--set", "network.model=flow",
                                  "--jobs", "3", "--policy", "baseline,preserve", "--json",
                                  str(out)])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


@pytest.mark.parametrize("damage", ["no-jobs", "no-policies", "exec-str", "exec-zero",
                                    "reference"])
def test_the_jobs_figure_refuses_malformed_results(tmp_path, jobs_json, damage):
    d = json.loads(json.dumps(jobs_json))
    if damage == "no-jobs":
        d["jobs"] = []
    elif damage == "no-policies":
        d["policies"] = {}
    elif damage == "reference":
        d["reference"] = "nosuch"
    else:
        for j in d["jobs"]:
            j["exec_s"] = "fast" if damage == "exec-str" else 0
    src = tmp_path / "j.json"
    src.write_text(json.dumps(d))
    r = _cli(["plot", str(src), "--kind", "jobs", "-o", str(tmp_path / "f.png")])
    assert r.exit_code == 1 and "Error" in r.output
    assert not (tmp_path / "f.png").exists()


def test_the_memory_figure_refuses_a_malformed_timeline(tmp_path):
    good = tmp_path / "r.json"
    r = _cli(TRAIN_ARGS + ["--json", str(good)])
    assert r.exit_code == 0, r.output
    d = json.loads(good.read_text())
    d["memory"]["timeline"]["gpu0"] = "abc"
    src = tmp_path / "m.json"
    src.write_text(json.dumps(d))
    r = _cli(["plot", str(src), "--kind", "memory", "-o", str(tmp_path / "f.png")])
    assert r.exit_code == 1 and "memory.timeline" in r.output


def test_a_traffic_figure_refuses_a_training_sweep(tmp_path):
    db = tmp_path / "t.sqlite"
    r = _cli(["sweep", "dgx1-v100", "-q", "--db", str(db), "--param", "workload.batch=16,32",
              "--param", "workload.kind=training", "--param",
              "workload.model=alexnet", "--param", "network.model=flow", "-j", "1"])
    assert r.exit_code == 0, r.output
    r = _cli(["plot", str(db), "--kind", "latency-load", "-o", str(tmp_path / "f.png")])
    assert r.exit_code == 1 and "training runs" in r.output


# ------------------------------------------------------------ messages name the cause

@pytest.mark.parametrize("sets,names,not_named", [
    (["workload.memory.policy=compression", "workload.memory.compress_gbps=1e-300"],
     "workload.memory.compress_gbps", None),
    (["topology.npu.tflops=1e-12"], "TFLOP/s", "(raise it)"),
    (["topology.npu.hbm_gbps=1e-12"], "hbm_gbps", "(raise it)"),
])
def test_a_tiny_rate_is_named_as_the_cause(sets, names, not_named):
    r = _cli(["run", "dgx1-v100", "-q", "--set", "workload.kind=training", "--set",
              "workload.model=resnet50", "--set", "workload.batch=64", "--set",
              "network.model=flow"] + [a for s in sets for a in ("--set", s)])
    assert r.exit_code == 1 and names in r.output
    assert not_named is None or not_named not in r.output
    assert not any(len(w) > 40 and w.strip(",.:").isdigit() for w in r.output.split())


def test_an_astra_value_out_of_range_names_the_file_and_line(tmp_path):
    from pysim import models
    path = tmp_path / "w.txt"
    path.write_text("DATA\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1000000000000000000 10\n")
    with pytest.raises(ConfigError, match=r"w.txt, line 3: .*1000000000000000000"):
        models.load(str(path))
    path.write_text("DATA\n1\nl1 -1 5 NONE 0 5 NONE 0 1_000 ALLREDUCE 10 10\n")
    with pytest.raises(ConfigError, match="line 3"):
        models.load(str(path))


def test_an_astra_layer_name_with_a_control_character_is_refused(tmp_path):
    from pysim import models
    path = tmp_path / "w.txt"
    path.write_bytes(b"DATA\n1\nl\x001 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10\n")
    with pytest.raises(ConfigError, match=r"w.txt, line 3: the layer name 'l\\x001' holds a "
                                          r"control character"):
        models.load(str(path))


def test_an_astra_file_may_start_with_a_byte_order_mark(tmp_path):
    """As a TOML file may (an editor's UTF-8 byte-order mark is not part of the text)."""
    from pysim import models
    text = b"DATA\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10\n"
    (tmp_path / "a.txt").write_bytes(text)
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbf" + text)
    a, b = models.load(str(tmp_path / "a.txt")), models.load(str(tmp_path / "b.txt"))
    assert [l.given for l in a.layers] == [l.given for l in b.layers]


def test_a_job_that_does_not_fit_is_named():
    r = _cli(["jobs", "dgx1-v100", "-q", "--set", "network.model=flow", "--jobs", "2",
              "--policy", "baseline", "--set", 'jobs.models=["gpt2"]', "--set",
              "jobs.batch_per_npu=4096"])
    assert r.exit_code == 1 and "a job of gpt2" in r.output and "batch_per_npu" in r.output
    assert re.search(r"jobs? [0-9, ]+: a job of gpt2", r.output)


def test_the_job_that_does_not_fit_is_named_by_its_id(tmp_path):
    """Of a job file's jobs, the one whose model does not fit its NPUs is named (its id),
    not the others."""
    f = tmp_path / "j.toml"
    f.write_text('[[jobs]]\nmodel = "googlenet"\nnpus = 2\niterations = 3\nsensitive = true\n'
                 '[[jobs]]\nmodel = "gpt2"\nnpus = 2\niterations = 3\nsensitive = true\n'
                 'batch_per_npu = 4096\n')
    r = _cli(["jobs", "dgx1-v100", "-q", "--job-file", str(f), "--policy", "baseline"])
    assert r.exit_code == 1 and "job 1: a job of gpt2 on 2 NPUs" in r.output, r.output
    assert "job 0" not in r.output and "jobs 0" not in r.output


def test_model_paths_typed_here_resolve_here(tmp_path, monkeypatch):
    from pysim import load
    from pysim.workload.training import load_model
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.txt").write_text(
        "DATA\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10\n")
    monkeypatch.chdir(tmp_path)
    for given in ("sub/w.txt", "./sub/w.txt"):
        cfg = load("dgx1-v100", {"workload.kind": "training", "workload.model": given,
                                 "workload.batch": 8})
        assert len(load_model(cfg).layers) == 1


# ------------------------------------------------------------ a system's name means its hardware

def test_a_shipped_system_trains_on_its_own_accelerator():
    """dgx1-v100's GPUs are V100s in every command (pysim run as pysim jobs), and a run says
    which accelerator it used."""
    from pysim import load
    from pysim.models.presets import PRESETS, npu_spec
    from pysim.topology import build
    cfg = load("dgx1-v100")
    topo = build(cfg)
    sp = npu_spec(cfg, topo, topo.node_names[topo.node_kinds.index("npu")])
    assert sp.tflops["fp32"] == PRESETS["v100"]["tflops"]["fp32"]
    r = _cli(TRAIN_ARGS[:2] + TRAIN_ARGS[3:] + ["--set", "workload.precision=fp32"])
    assert r.exit_code == 0 and "accelerator" in r.output and "v100: 15.7 TFLOP/s fp32" \
        in r.output


def test_a_config_based_on_a_system_inherits_it_whole_and_says_what_it_changes(tmp_path):
    from pysim import PysimWarning, load
    (tmp_path / "c.toml").write_text('[topology]\nfile = "dgx1-v100"\n[network]\nvcs = 4\n')
    with pytest.warns(PysimWarning, match=r"network.vcs \(2 -> 4\)"):
        cfg = load(str(tmp_path / "c.toml"))
    base = load("dgx1-v100")
    assert cfg.network.vcs == 4
    for key in ("vc_buffer_flits", "va_input_arbiter", "sa_input_arbiter",
                "wait_for_tail_credit"):
        assert getattr(cfg.network, key) == getattr(base.network, key), key
    assert cfg.topology.npu == base.topology.npu


def test_tensor_parallelism_that_does_not_divide_the_heads_is_refused():
    r = _cli(TRAIN_ARGS[:5] + ["--set", "workload.model=transformer", "--set",
                               "workload.batch=8", "--set", "network.model=flow", "--set",
                               "workload.model_params={layers=1,hidden=60,heads=3,seq=16,"
                               "vocab=96}", "--set", "workload.parallel={tp=8}"])
    assert r.exit_code == 1 and "does not divide the 3 attention heads" in r.output


def test_shipped_systems_carry_their_hardware():
    """dgx1-v100's GPUs do not forward each other's traffic in every command (its file says
    so: the job-stream preset adds nothing); mcdla-8 and hcdla-8 are the MC-DLA study's
    16 GB V100s."""
    from pysim import load
    from pysim.jobs.servers import PRESETS
    from pysim.models.presets import npu_spec
    from pysim.topology import build
    assert load("dgx1-v100").topology.transit == ["switch", "host"]
    assert PRESETS["dgx1-v100"][1] == {}
    for name in ("mcdla-8", "hcdla-8"):
        cfg = load(name)
        topo = build(cfg)
        sp = npu_spec(cfg, topo, topo.node_kinds.index("npu"))
        assert sp.name == "v100" and sp.hbm_capacity_bytes == 16e9, name


# ------------------------------------------------------------ the API: wrong Python types

def _api_cases():
    import pysim
    import pysim.jobs as pj
    from pysim import models
    from pysim.workload import OpGraph, run_graph
    from pysim.workload import memory as M
    from pysim.workload.training import training_graph, training_report
    cfg = pysim.load("ring8", {"workload.kind": "training", "workload.model": "alexnet",
                               "workload.batch": 16, "network.model": "flow"})
    m = models.get("alexnet")
    topo = pysim.topology.build(cfg)
    return [
        ("config file", lambda: pysim.load(5)),
        ("config file", lambda: pysim.load(None)),
        ("overrides", lambda: pysim.load("ring8", [1, 2])),
        ("simulate()", lambda: pysim.simulate(None)),
        ("progress", lambda: pysim.simulate("ring8", progress=5)),
        ("models.load(path)", lambda: models.load(None)),
        ("models.load(path)", lambda: models.load(5)),
        ("load_server(name)", lambda: pj.load_server(None)),
        ("run_stream(server)", lambda: pj.run_stream(None)),
        ("training_graph(graph)", lambda: training_graph(cfg, topo, m, graph=5)),
        ("training_graph(prefix)", lambda: training_graph(cfg, topo, m, prefix=5)),
        ("training_report(plan)", lambda: training_report(OpGraph(), None, None, cfg)),
        ("decide(budget)", lambda: M.decide(None, None, None)),
        ("estimate(plan)", lambda: M.estimate("x", [], 5)),
        ("with_overrides()", lambda: cfg.with_overrides(5)),
        ("run_graph(graph)", lambda: run_graph(cfg, 5)),
        ("register('x')", lambda: pj.register("x")(5)),
        ("register(name)", lambda: pj.register(5)),
    ]


def test_the_api_names_the_argument_given_a_wrong_type():
    """Each entry point given a wrong Python type raises a TypeError naming the argument (or
    a ConfigError), never an AttributeError or an IndexError from inside."""
    for named, call in _api_cases():
        with pytest.raises(TypeError, match=re.escape(named)):
            call()


def test_a_policy_returning_a_wrong_type_is_named():
    import pysim.jobs as pj
    from pysim.jobs.policies import POLICIES
    name = "returns_text"
    if name not in POLICIES:
        pj.register(name)(lambda server, job, cands, free: "x")
    server = pj.load_server("dgx1-v100", {"network.model": "flow", "jobs.count": 2,
                                          "jobs.policies": [name], "jobs.min_iterations": 2,
                                          "jobs.max_iterations": 3, "jobs.sim_iterations": 2,
                                          "jobs.corun_iterations": 2})
    with pytest.raises(ConfigError, match=rf"policy '{name}' returned 'x' for job 0: expected "
                                          rf"the index of a placement"):
        pj.run_stream(server)


def test_an_onnx_graph_past_the_operator_bound_is_refused_before_reading_it(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from pysim import models
    from pysim.models.onnx_import import MAX_NODES
    n = MAX_NODES + 1
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
    g = helper.make_graph(nodes, "c", [helper.make_tensor_value_info(
        "t0", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info(
            f"t{n}", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(g), str(path))
    with pytest.raises(ConfigError, match=rf"{n:,} operators: at most {MAX_NODES:,}"):
        models.load(str(path))


def test_an_override_is_named_as_typed_not_as_the_files():
    """A bad value typed with --set is reported as the override it is, not as a line of the
    shipped file it was applied to."""
    r = _cli(["run", "dgx1-v100", "--set", "workload.kind=collective", "--set",
              "workload.bytes=4MB"])
    assert r.exit_code == 1
    assert "workload.bytes = '4MB': expected an integer (given as an override, on " in r.output


def test_a_check_across_keys_names_the_override_that_broke_it():
    """A check across two keys (a max below a min) that fails because of a typed value names
    that override and its value, whichever key the message starts with; one that fails from
    the file's own values alone is still the file's."""
    r = _cli(["jobs", "dgx1-v100", "--set", "jobs.max_iterations=10"])
    assert r.exit_code == 1
    assert ("jobs.min_iterations = 500 > jobs.max_iterations = 10: expected min_iterations <= "
            "max_iterations (jobs.max_iterations = 10 given as an override, on ") in r.output
    r = _cli(["jobs", "dgx1-v100", "--set", "jobs.min_iterations=1000000"])
    assert "max_iterations (given as an override, on " in r.output
    from pysim.config import _names
    assert _names("a.b = 1 > a.bc = 2", "a.b") and not _names("a.bc = 2", "a.b")
    assert not _names("xa.b = 1", "a.b")


@pytest.mark.parametrize("value", ["[1,2]", "{a=1}", "5", "true"])
def test_a_preset_that_is_not_a_name_is_refused(value):
    r = _cli(["run", "dgx1-v100", "--set", f"topology.npu.preset={value}"])
    assert r.exit_code == 1 and "topology.npu.preset = " in r.output
    assert "expected a preset's name (a string); known: v100" in r.output


def test_a_tensor_larger_than_its_device_is_refused_before_the_run():
    """A hold past its device's capacity on its own fits at no time: refused before
    simulating (an ONNX constant of 2^40 x 2^40 elements was found only after the run)."""
    from pysim.workload import OpGraph, run_graph
    from pysim.errors import ConfigError as CE
    cfg = pysim_load_ring()
    g = OpGraph()
    a = g.compute("n0", 10 ** 12)                 # (a long op: simulated only if not refused)
    g.free(g.hold("n0", 10 ** 15, a, "start", what="a huge tensor"), a)
    with pytest.raises(CE, match=r"n0: a huge tensor alone holds 1,000,000,000,000,000 "
                                 r"bytes, past its capacity of 32,000,000,000 bytes"):
        run_graph(cfg, g)


def pysim_load_ring():
    from pysim import load
    return load("ring8", {"workload.kind": "graph"})


def test_an_interrupt_while_pysim_imports_exits_130_in_one_line():
    """Ctrl-C while the `pysim` script is still importing pysim (about a second) ends as an
    interrupt during a run does: exit 130 and one line, no traceback. The script is run as
    pip generates it (its entry point loaded, then called), with an interrupt raised when
    pysim's components are first imported."""
    code = textwrap.dedent("""
        import sys
        from importlib.metadata import entry_points

        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == "pysim.components":
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, Interrupt())
        sys.argv = ["pysim", "systems"]
        (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "pysim"]
        sys.exit(ep.load()())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip() == "interrupted: nothing written"


def test_an_interrupt_while_the_command_line_is_parsed_exits_130_in_one_line(monkeypatch,
                                                                             capsys):
    """Ctrl-C while Click parses the command line (outside any command's own handler) ends
    as an interrupt during a run does, exit 130 with one line, not Click's "Aborted!" with
    status 1; a usage error keeps Click's status 2 and its message."""
    import click
    import pysim_entry

    def interrupted(self, ctx, args):
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(click.Group, "parse_args", interrupted)
        m.setattr(sys, "argv", ["pysim", "systems"])
        assert pysim_entry.main() == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted: nothing written" and "Aborted" not in err
    monkeypatch.setattr(sys, "argv", ["pysim", "run", "--no-such-option"])
    assert pysim_entry.main() == 2
    assert "No such option '--no-such-option'" in capsys.readouterr().err


def test_a_bad_field_typed_inside_a_table_key_is_named_as_an_override(tmp_path):
    """--set topology.nic.gpu.injection_gbps=5: the error names the table ('topology.nic.gpu:
    unknown node kind') and is the override's, not a line of the shipped file ('mesh8x8.toml:
    topology.nic.gpu: ...'); a bad table of the file's own stays the file's."""
    r = _cli(["run", "mesh8x8", "--set", "topology.nic.gpu.injection_gbps=5"])
    assert r.exit_code == 1
    assert ("topology.nic.gpu: unknown node kind 'gpu'; expected one of npu, mem, host (given "
            "as an override, on ") in r.output, r.output
    bad = tmp_path / "c.toml"
    bad.write_text('[topology]\nkind = "ring"\n[topology.nic.gpu]\ninjection_gbps = 5\n')
    r = _cli(["run", str(bad), "--set", "topology.nic.npu.injection_gbps=5"])
    assert r.exit_code == 1 and "given as an override" not in r.output, r.output
    assert "c.toml: topology.nic.gpu: unknown node kind" in r.output, r.output
