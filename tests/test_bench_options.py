"""bench/megatron.py's and bench/nccl_tests.py's options: a value no run can use is a usage
error naming the option, its value and what is expected, before any run (each was a
traceback, or a value silently read as its default)."""
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def usage_error(script, *args):
    r = subprocess.run([sys.executable, os.path.join(BENCH, script), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


@pytest.mark.parametrize("args, said", [
    (["--rows", "99"], "--rows '99': expected indices of the table's rows, 0 to 9"),
    (["--rows", "a"], "--rows 'a': expected indices"),
    (["--micro-batch", "0"], "--micro-batch 0: expected an integer >= 1"),
    (["--micro-batch", "3"], "--micro-batch 3: does not divide the 16 samples of each "
                             "data-parallel replica of row 0 (1.7B)"),
    (["--interleave", "0"], "--interleave '0': expected 'auto' or a count of model chunks"),
    (["--op-limit", "0"], "--op-limit 0: expected an integer >= 1"),
    (["--comm-sms", "-1"], "--comm-sms -1: expected an integer >= 0"),
    (["--algorithm", "foo"], "--algorithm 'foo': expected one of ring, "),
])
def test_megatron_refuses_what_no_row_can_run(args, said):
    assert said in usage_error("megatron.py", *args)


@pytest.mark.parametrize("args, said", [
    (["--systems", "dgx-b200"], "--systems 'dgx-b200': 'dgx-b200' has no measurements; "
                                "expected some of dgx-a100, dgx-h100, hgx-h200"),
    (["--tuning", "2.21"], "--tuning '2.21': expected one of measured, 2.18, 2.19, 2.20, 2.23"),
    (["--level", "flit", "--flit-max", "-5"], "--flit-max -5: expected at least 1,024 bytes"),
    (["--flit-max", "4096"], "--flit-max 4096: read with --level flit only"),
])
def test_nccl_tests_refuses_what_no_run_can_use(args, said):
    assert said in usage_error("nccl_tests.py", *args)
