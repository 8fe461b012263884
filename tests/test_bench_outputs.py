"""The benchmarks' outputs (bench/outputs.py): `--json`/`--out` may name a bare file in the
current folder; one that exists is refused unless --force, one naming an input even with
it; Ctrl-C ends a benchmark in one line."""
import ast
import glob
import json
import os
import re
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "bench")


def test_write_json_takes_a_bare_file_name(tmp_path, monkeypatch):
    sys.path.insert(0, BENCH)
    try:
        from provenance import write_json
    finally:
        sys.path.remove(BENCH)
    monkeypatch.chdir(tmp_path)
    write_json("out.json", {"rows": [1]})
    write_json(os.path.join("new", "deeper", "out.json"), {"rows": [2]})
    assert json.loads((tmp_path / "out.json").read_text()) == {"rows": [1]}
    assert json.loads((tmp_path / "new" / "deeper" / "out.json").read_text()) == {"rows": [2]}


def _is(node, dotted):
    return isinstance(node, ast.Call) and ast.unparse(node.func) == dotted


def test_no_benchmark_makes_the_folder_of_a_bare_file_name():
    """os.makedirs(os.path.dirname(path)) raises for a bare "x.json" (dirname ""): every
    benchmark that makes its output's folder makes it of the absolute path (or leaves it to
    provenance.write_json)."""
    bad = []
    for path in sorted(glob.glob(os.path.join(BENCH, "*.py"))):
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if _is(node, "os.makedirs") and node.args and _is(node.args[0], "os.path.dirname"):
                inner = node.args[0].args[0] if node.args[0].args else None
                if not _is(inner, "os.path.abspath"):
                    bad.append(f"{os.path.basename(path)}:{node.lineno}")
    assert not bad, bad


# Nothing the user wrote is overwritten without asking (bench/outputs.py): an output that
# exists is refused unless --force, one naming an input even with it, and Ctrl-C ends a
# benchmark with one line, not a traceback.

def _bench(*args, timeout=120):
    return subprocess.run([sys.executable, os.path.join(BENCH, args[0]), *args[1:]],
                          capture_output=True, text=True, timeout=timeout)


def _refused(r, option, path):
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"error: {option} {path} exists; pass --force to overwrite it" in r.stderr, r.stderr


def test_nccl_tests_refuses_an_existing_json_and_writes_it_with_force(tmp_path):
    out = tmp_path / "n.json"
    out.write_text("mine")
    _refused(_bench("nccl_tests.py", "--systems", "dgx-a100", "--json", str(out)),
             "--json", out)
    assert out.read_text() == "mine"
    r = _bench("nccl_tests.py", "--systems", "dgx-a100", "--json", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert set(json.loads(out.read_text())["systems"]) == {"dgx-a100"}


def test_nccl_tests_refuses_to_write_over_its_measurements(tmp_path):
    data = os.path.join(HERE, "data", "nccl_tests_allreduce.json")
    before = open(data).read()
    r = _bench("nccl_tests.py", "--systems", "dgx-a100", "--json", data, "--force")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"--json {data} is the measurements file, which this benchmark reads; --force " \
           f"writes over outputs, not inputs" in r.stderr
    assert open(data).read() == before


def test_megatron_refuses_an_existing_json_before_any_row(tmp_path):
    out = tmp_path / "m.json"
    out.write_text("mine")
    r = _bench("megatron.py", "--rows", "9", "--json", str(out))   # (a row of minutes)
    _refused(r, "--json", out)
    assert out.read_text() == "mine" and "published" not in r.stdout


def test_megatron_exchanges_refuses_an_existing_json_and_writes_it_with_force(tmp_path,
                                                                             capsys):
    sys.path.insert(0, BENCH)
    try:
        import megatron_exchanges as ex
    finally:
        sys.path.remove(BENCH)
    rows, out = tmp_path / "rows.json", tmp_path / "out.json"
    rows.write_text('{"rows": []}')
    out.write_text("mine")
    with pytest.raises(SystemExit) as e:
        ex.main([str(rows), "--json", str(out)])
    assert e.value.code == 2
    assert f"--json {out} exists; pass --force to overwrite it" in capsys.readouterr().err
    assert out.read_text() == "mine"
    ex.main([str(rows), "--json", str(out), "--force"])
    assert json.loads(out.read_text())["rows"] == []


def _own_group():
    """A child's own process group (to be sent SIGINT as a terminal would), with SIGINT's
    default action: a shell's background job starts with it ignored, and Python then
    raises no KeyboardInterrupt."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_ends_a_benchmark_in_one_line(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group, the row's worker process included)
    while megatron.py runs a row of minutes: one line, no traceback, nothing written, and
    the process ended by SIGINT as an interrupted program is."""
    out = tmp_path / "m.json"
    p = subprocess.Popen([sys.executable, "-u", os.path.join(BENCH, "megatron.py"), "--rows",
                          "9", "--json", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_own_group)
    try:
        header = p.stdout.readline()              # (printed once the rows begin)
        assert "published" in header
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == -signal.SIGINT
    assert err == "interrupted: nothing written\n", err
    assert not out.exists()


def test_what_was_written_is_said_and_importing_changes_nothing(tmp_path, monkeypatch):
    hook = sys.excepthook
    sys.path.insert(0, BENCH)
    try:
        import outputs
    finally:
        sys.path.remove(BENCH)
    assert sys.excepthook is hook            # (only a benchmark run as a program has it)
    monkeypatch.setattr(outputs, "_written", [])
    assert outputs.interrupted() == "interrupted: nothing written"
    outputs.write_json(str(tmp_path / "a.json"), {"rows": []}, quiet=True)
    outputs.wrote(str(tmp_path / "b.png"))
    assert outputs.interrupted() == (f"interrupted: written {tmp_path / 'a.json'}, "
                                     f"{tmp_path / 'b.png'}")


def test_every_benchmark_that_writes_checks_its_outputs():
    """Each script with an output option (--json, --out, --fig, --figures) takes --force
    and checks its outputs (outputs.check) before any work."""
    missing = []
    for path in sorted(glob.glob(os.path.join(BENCH, "*.py"))):
        text = open(path).read()
        if not any(f'"{o}"' in text for o in ("--json", "--out", "--fig", "--figures")):
            continue
        if '"--force"' not in text or not re.search(r"\bcheck\(ap, ", text):
            missing.append(os.path.basename(path))
    assert not missing, missing
