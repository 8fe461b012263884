"""The collectives offload engine's gain over the NPU-run baseline for data-parallel
ResNet-50 on the ACE study's 16-NPU torus (bench/ace.py's `torus4x4`: the first two
dimensions of the 4x4x4 sample platform, 32 and 16 GB/s links; V100 NPUs; the bidirectional
hierarchical all-reduce), flow level: the monotone property of the ACE study's oracle (the
speed-up over the best baseline rises as the per-NPU batch falls), and the mechanism behind
it: the baseline's loss to the engine is a cost per gradient byte, not per sample."""
import os
import subprocess
import sys

import pytest

from conftest import TOPOLOGIES
from pysim import load, simulate

FAMILY = ((16, 900.0), (48, 900.0))        # (comm_sms, comm_hbm_gbps): bench/ace.py's best


def _iteration(engine, per_npu, sms=None, hbm=None):
    over = {"topology.dims": [4, 4], "topology.dim_link_gbps": [32.0, 16.0],
            "topology.npu.preset": "v100", "workload.kind": "training",
            "workload.model": "resnet50", "workload.batch": 16 * per_npu,
            "workload.precision": "mixed", "workload.engine": engine,
            "workload.algorithm": "bidir_hierarchical", "workload.iterations": 1,
            "network.model": "flow"}
    if sms is not None:
        over.update({"workload.comm_sms": sms, "workload.comm_hbm_gbps": hbm})
    res = simulate(load(os.path.join(TOPOLOGIES, "torus4x4x4.toml"), over))
    return res.to_dict()["iteration_cycles"]


def test_the_engines_gain_on_the_ace_torus_rises_as_the_batch_falls():
    """Per-NPU batches 16, 4 and 1: the engine's speed-up over the better of two baselines
    (16 or 48 SMs, the whole HBM as budget) rises strictly as the batch falls. The reason
    is checked too: the baseline's loss per iteration (held SMs slowing compute, its 3.5
    bytes of HBM per network byte against the engine's about 1, its slower collective) is
    set by the gradient bytes, which do not change with the batch, so it is within 25% of
    the same number of cycles at every batch while the iteration shrinks about 7x; the
    speed-up is then 1 + loss / the engine's iteration."""
    gains, losses, engine = [], [], []
    for per_npu in (16, 4, 1):
        best = min(_iteration("npu", per_npu, s, h) for s, h in FAMILY)
        e = _iteration("offload", per_npu)
        gains.append(best / e)
        losses.append(best - e)
        engine.append(e)
    assert gains[0] < gains[1] < gains[2], gains
    assert engine[0] > 5 * engine[2], engine
    assert max(losses) < 1.25 * min(losses), losses
    assert min(losses) > 0, losses


BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench",
                     "ace.py")


@pytest.mark.parametrize("value", ["16", "16x", "ax900", "0x900", "16x-1", ""])
def test_a_bad_baseline_family_is_refused_naming_the_option(value):
    """bench/ace.py --baselines takes SMSxGBPS pairs: anything else is a usage error
    naming the option, its value and the form expected, before any run."""
    r = subprocess.run([sys.executable, BENCH, "--baselines", value], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"--baselines {value!r}: expected SMSxGBPS pairs" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("value", ["4,x", "0", ""])
def test_a_bad_chunk_list_is_refused_naming_the_option(value):
    """bench/ace.py --chunks takes positive integers: anything else is a usage error naming
    the option and its value, before any run."""
    r = subprocess.run([sys.executable, BENCH, "--chunks", value], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"--chunks {value!r}: expected positive integers" in r.stderr
    assert "Traceback" not in r.stderr
