"""Every command the documentation shows runs as written (tests/doc_commands.py finds them: the
`pysim` and `python` lines of each page's code blocks, and whole inline commands).

Each page's `pysim` commands run in order in one fresh folder (a later command may read what
an earlier one wrote), through the command line's entry point in the test's own process (in
the slow tier, each in a fresh `python -m pysim.cli` process), with the files a page names as the reader's own (`my_net.onnx`,
`workload.txt`) written there first; a non-zero exit fails; a command shown twice runs once.
Commands measured to take more than a few seconds run in the slow tier only (SLOW below),
with the commands that read what they write; the rest run in the default tier too. `python -m pysim.docs` is held by test_docs (the
generated pages match it). The benchmarks (`python bench/...`, minutes to hours each) are
checked to exist and to accept every option the page gives them, not run.
"""
import os
import re
import shlex
import signal
import subprocess
import sys

import pytest

from conftest import ROOT

import doc_commands

PAGES = [os.path.join(ROOT, "README.md")] + sorted(
    os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
    if f.endswith(".md"))

# Commands that take more than a few seconds (measured on 2 cores; the page's own figures
# say how long): run in the slow tier, with the rest of their page.
SLOW = (
    "pysim jobs dgx1-v100 --jobs 1000",
    "pysim run mcdla-8 --set workload.kind=training --set workload.model=vgg16",
    "pysim run selene --set topology.node_count=2",
    "pysim run dgx1-v100 --set workload.kind=training --set workload.model=resnet50",
    "pysim run dgx-a100 --set workload.kind=training --set workload.model=gpt2",
    "pysim sweep dgx1-v100 --param workload.kind=training",
)

ASTRA = ("DATA\n2\nconv1 -1 100 NONE 0 120 NONE 0 140 ALLREDUCE 37632 10\n"
         "fc1 -1 50 NONE 0 60 NONE 0 70 ALLREDUCE 8192000 5\n")


def onnx_net(path):
    """A small ONNX network with a symbolic sequence length `seq`: two linear layers."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    w1 = TensorProto(name="w1", data_type=TensorProto.FLOAT, dims=[64, 256])
    w2 = TensorProto(name="w2", data_type=TensorProto.FLOAT, dims=[256, 64])
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


# The files pages name as the reader's own.
READERS_FILES = {"my_net.onnx": onnx_net, "net.onnx": onnx_net,
                 "workload.txt": lambda p: open(p, "w").write(ASTRA)}


# Pages whose ```sh blocks test_docs runs whole (their here-documents included): here only
# their commands outside those blocks.
RUN_WHOLE = ("README.md", "user-guide.md")


def page_commands(page):
    """The page's pysim commands, in order; one it shows again (prose naming a command of an
    earlier block) runs once."""
    fenced = os.path.basename(page) not in RUN_WHOLE
    seen, out = set(), []
    for at, c in doc_commands.commands(page, fenced=fenced):
        if c.split()[0] == "pysim" and c not in seen:
            seen.add(c)
            out.append((at, c))
    return out


def is_slow(cmd):
    return any(cmd.startswith(s) for s in SLOW)


OUTPUT_OPTIONS = ("--json", "--trace", "--db", "-o", "--export-chakra", "--write-jobs",
                  "--draw")


def outputs(cmd):
    argv = shlex.split(cmd, comments=True)
    return {b for a, b in zip(argv, argv[1:]) if a in OUTPUT_OPTIONS}


def split(page):
    """(the page's quick commands: not slow, and reading nothing a slow one writes; all of
    its commands)."""
    cmds = page_commands(page)
    slow_out, quick = set(), []
    for at, c in cmds:
        if is_slow(c):
            slow_out |= outputs(c)
        elif not {w.rpartition("=")[2] for w in shlex.split(c, comments=True)} & slow_out:
            quick.append((at, c))
    return quick, cmds


def run_commands(page, cmds, folder, timeout):
    """Each command in a fresh `python -m pysim.cli` process."""
    _readers_files(cmds, folder)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    pysim = [sys.executable, "-m", "pysim.cli"]
    for at, cmd in cmds:
        argv = shlex.split(cmd, comments=True)
        p = subprocess.run(pysim + argv[1:], cwd=folder, capture_output=True, text=True,
                           timeout=timeout, env=env)
        assert p.returncode == 0, (f"{os.path.relpath(page, ROOT)}:{at}: {cmd}\nexit "
                                   f"{p.returncode}\n{p.stdout[-2000:]}{p.stderr[-3000:]}")


def run_commands_here(page, cmds, folder, timeout, monkeypatch):
    """Each command through the same command-line entry point, in this process (no
    interpreter start and import per command), in `folder`, each failing after `timeout`
    seconds rather than hanging."""
    from click.testing import CliRunner
    from pysim import cli
    _readers_files(cmds, folder)
    monkeypatch.chdir(folder)

    def ring(*_):
        raise TimeoutError(f"blocked for {timeout} s")
    old = signal.signal(signal.SIGALRM, ring)
    try:
        for at, cmd in cmds:
            argv = shlex.split(cmd, comments=True)
            signal.alarm(timeout)
            r = CliRunner().invoke(cli.main, argv[1:])
            signal.alarm(0)
            assert r.exit_code == 0, (f"{os.path.relpath(page, ROOT)}:{at}: {cmd}\nexit "
                                      f"{r.exit_code}\n{r.output[-3000:]}\n{r.exception!r}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _readers_files(cmds, folder):
    for name, make in READERS_FILES.items():
        if any(name in c for _, c in cmds):
            make(os.path.join(folder, name))


def _id(page):
    return os.path.relpath(page, ROOT)


@pytest.mark.parametrize("page", [p for p in PAGES if split(p)[0]], ids=_id)
def test_the_quick_commands_of_each_page_run(page, tmp_path, monkeypatch):
    run_commands_here(page, split(page)[0], str(tmp_path), 120, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if len(split(p)[0]) < len(split(p)[1])],
                         ids=_id)
def test_every_command_of_each_page_runs(page, tmp_path):
    run_commands(page, split(page)[1], str(tmp_path), timeout=1800)


def test_the_pages_show_commands_and_memory_and_training_are_among_them():
    found = {os.path.basename(p) for p in PAGES if page_commands(p)}
    assert {"memory.md", "training.md", "jobs.md", "models.md", "README.md"} <= found
    # every slow prefix still names a command of some page
    every = [c for p in PAGES for _, c in page_commands(p)]
    for s in SLOW:
        assert any(c.startswith(s) for c in every), s


def _bench_options(cmd):
    argv = shlex.split(cmd, comments=True)
    return argv[1], [a.split("=")[0] for a in argv[2:] if a.startswith("--")]


@pytest.mark.parametrize("page", [p for p in PAGES if any(
    c.startswith("python bench/") for _, c in doc_commands.commands(p))], ids=_id)
def test_the_benchmark_commands_exist_and_take_their_options(page):
    for at, cmd in doc_commands.commands(page):
        if not cmd.startswith("python bench/"):
            continue
        script, options = _bench_options(cmd)
        path = os.path.join(ROOT, script)
        assert os.path.exists(path), f"{_id(page)}:{at}: {script} does not exist"
        text = open(path, encoding="utf-8").read()
        for opt in options:
            assert re.search(rf"['\"]{re.escape(opt)}['\"]", text), \
                f"{_id(page)}:{at}: {script} takes no option {opt}"


SLOW_PYTHON = ("jobs.md",)          # (a job stream's simulations: about 30 s)


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=[pytest.mark.slow] if os.path.basename(p) in SLOW_PYTHON else [])
    for p in PAGES if os.path.basename(p) not in RUN_WHOLE
    and any(lang == "python" for lang, _ in doc_commands.blocks(p))], ids=_id)
def test_the_python_examples_of_each_page_run(page, tmp_path):
    """A page's ```python blocks, in order, each in a fresh interpreter in one folder (the
    files a page names as the reader's own made first): an example that leans on a name it
    never defines fails."""
    texts = [t for lang, t in doc_commands.blocks(page) if lang == "python"]
    _readers_files([(0, t) for t in texts], str(tmp_path))
    for text in texts:
        p = subprocess.run([sys.executable, "-c", text], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "MPLBACKEND": "Agg"})
        assert p.returncode == 0, f"{_id(page)}:\n{text}\n{p.stderr[-3000:]}"
