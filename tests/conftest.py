import atexit
import compileall
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from pysim.config import from_dict  # noqa: E402
from pysim.network import CH_EJECT  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOLOGIES = os.path.join(ROOT, "topologies")


def _bytecode_for_subprocesses():
    """With PYTHONDONTWRITEBYTECODE set, every `python -m pysim` a test starts would compile
    from source again pysim's ~100 modules and what they import (numpy, click, matplotlib:
    seconds each time). Compile them once into a folder of this session and point the
    subprocesses at it (PYTHONPYCACHEPREFIX): they read bytecode as usual and write none.
    A prefix holds the bytecode of every module, the standard library's and third parties'
    included, so one child process writes there what the commands import, and compileall
    adds the pysim modules that child did not import. Nothing is written outside the folder,
    which is removed at exit."""
    if not sys.flags.dont_write_bytecode or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = tempfile.mkdtemp(prefix="pysim-tests-pyc-")
    atexit.register(shutil.rmtree, prefix, True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=prefix, MPLBACKEND="Agg")
    subprocess.run([sys.executable, "-c",
                    "import concurrent.futures, io, multiprocessing, sqlite3, pysim, pysim.cli, "
                    "pysim.engine, pysim_entry\n"
                    "import matplotlib.pyplot as plt\n"
                    "plt.plot([0, 1]); plt.savefig(io.BytesIO(), format='png')"],
                   env=env, capture_output=True, timeout=300)
    sys.pycache_prefix = prefix
    try:
        compileall.compile_dir(os.path.join(ROOT, "pysim"), quiet=2)
    finally:
        sys.pycache_prefix = None
    os.environ["PYTHONPYCACHEPREFIX"] = prefix


_bytecode_for_subprocesses()


def interruptible():
    """preexec_fn of a subprocess a test interrupts as a terminal's Ctrl-C would: SIGINT at
    its default, which a shell starting the tests in the background leaves ignored (and
    Python then raises no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def make_cfg(**sections):
    """from_dict with sections given as keyword dicts: make_cfg(topology={...}, ...)."""
    return from_dict({k: v for k, v in sections.items() if v})


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def check_state(network, eng):
    """Conservation of flits and of credits, and packet order inside every buffer."""
    c = eng.counters()
    snap = eng.snapshot()
    V, D = snap["vcs"], snap["buffer_flits"]
    ev = snap["events"]
    wire = ev[ev[:, 4] >= 0]
    cred = ev[ev[:, 4] < 0]
    # every flit created is unsent, on a wire, in a buffer, or ejected
    assert c["flits_created"] == (c["unsent_flits"] + len(wire) + snap["ivc_cnt"].sum() +
                                  c["flits_ejected"])
    assert len(wire) + snap["ivc_cnt"].sum() == c["flits_injected"] - c["flits_ejected"]
    # credits: upstream credits + flits on the wire + flits buffered + credits returning = depth
    C = len(network.ch_kind)
    on_wire = np.zeros(C * V, np.int64)
    np.add.at(on_wire, wire[:, 1] * V + wire[:, 2], 1)
    returning = np.zeros(C * V, np.int64)
    np.add.at(returning, cred[:, 1] * V + cred[:, 2], 1)
    total = snap["ovc_credits"] + on_wire + snap["ivc_cnt"] + returning
    buffered = np.repeat(network.ch_kind != CH_EJECT, V)
    assert (total[buffered] == D).all()
    # inside a VC buffer, flits of one packet are consecutive and in order
    for ivc in np.flatnonzero(snap["ivc_cnt"]):
        slots = [(ivc * D + (snap["ivc_head"][ivc] + k) % D) for k in range(snap["ivc_cnt"][ivc])]
        pk = snap["buf_pkt"][slots]
        sq = snap["buf_seq"][slots]
        for k in range(1, len(slots)):
            if pk[k] == pk[k - 1]:
                assert sq[k] == sq[k - 1] + 1
            else:
                assert sq[k] == 0
    assert c["bad_eject"] == 0 and c["buf_overflow"] == 0 and c["bad_front"] == 0


def pytest_report_header(config):
    from test_random_configs import FUZZ_BUDGET, FUZZ_SEED
    return (f"fuzz sample: {FUZZ_BUDGET} cases, seed {FUZZ_SEED} (repeat with "
            f"PYSIM_FUZZ_SEED={FUZZ_SEED}; PYSIM_FUZZ_BUDGET=0 runs every case)")
