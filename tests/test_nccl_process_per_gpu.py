"""NCCL's ring on one DGX A100 from 8 MiB up, against nccl-tests run with a process per GPU
(tests/data/nccl_tests_harness_a100.json: one 8 x A100-SXM4-80GB NVSwitch server measured with
one thread driving the 8 GPUs, `-g 8`, and with a process per GPU, the same NCCL). Azure's
ND A100 v4 figures (one thread) are 17-24% slower than pysim at 32-128 MiB; with a process per
GPU the same sizes take NCCL's own step latency and the links' rate, so pysim holds them
(docs/clusters.md, "8-256 MiB: one thread driving the 8 GPUs")."""
import json
import os
import sys

import pytest

from pysim import load
from pysim.sim import simulate
from pysim.workload import nccl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import nccl_tests as bench  # noqa: E402  (bench/ is not a package)

MIB = 1 << 20


def measured():
    with open(os.path.join(HERE, "data", "nccl_tests_harness_a100.json")) as f:
        d = json.load(f)
    return (d, dict(zip(d["bytes"], d["process_per_gpu_in_place_us"])),
            dict(zip(d["bytes"], d["one_thread_in_place_us"])))


def ring_us(nbytes, tuning="2.23"):
    """pysim's all-reduce ring on the dgx-a100 at the flow level (us) and its protocol."""
    cfg = load("dgx-a100", {"workload.kind": "collective", "workload.collective": "all_reduce",
                            "workload.algorithm": "nccl", "workload.bytes": nbytes,
                            "workload.nccl_algorithm": "ring", "workload.nccl_tuning": tuning,
                            "network.model": "flow"})
    d = simulate(cfg).to_dict()
    return d["collective_cycles"] / cfg.network.clock_ghz / 1e3, d["nccl_protocol"]


@pytest.mark.parametrize("nbytes", [32 * MIB, 64 * MIB, 128 * MIB, 256 * MIB, 1 << 30,
                                    1 << 32])
def test_the_simple_ring_takes_a_process_per_gpus_time(nbytes):
    """From 32 MiB to 4 GiB (Simple in every release's choice) pysim's ring is within 9% of
    the process-per-GPU time, never more than 1% slower: NCCL's 3.4 us a slice-step and the
    links' 240 GB/s (the measurement: 2.6-8.4% slower at 64-256 MiB, 0.5% faster at 4 GiB)."""
    _, per, _ = measured()
    t, proto = ring_us(nbytes)
    assert proto == "Simple"
    assert -0.09 < t / per[nbytes] - 1 < 0.01, (nbytes, t, per[nbytes])


def test_the_process_per_gpu_times_are_nccls_step_latency_and_the_links():
    """The process-per-GPU times from 32 to 256 MiB (one loop of NCCL's Simple ring on 24
    channels: 2 (p - 1) steps of two slices, each half a rank's chunk, 28 slice-steps in
    series after NCCL's base latency) by least squares: the cost of a slice-step beyond its
    bytes within 10% of NCCL's Simple ring step latency, and the 24 channels' rate within 10%
    of NCCL's NVLink data rate (12 links x 20 GB/s). The one-thread times of the same
    machine are not so (over 5 us a slice-step): their excess is the harness's."""
    d, per, one = measured()
    p, ch = d["gpus"], nccl.NCCL_CHANNELS
    sizes = [32 * MIB, 64 * MIB, 128 * MIB, 256 * MIB]
    for n in sizes:
        assert n < ch * p * nccl.CHUNK_BYTES["Simple"]          # one loop
        assert nccl.run_channels("all_reduce", n, "ring", "Simple", p) == ch
    steps = 2 * (p - 1) * 2
    base = nccl.BASE_US[("ring", "Simple")]

    def fit(times):
        xs = [n / (ch * p) / 2 for n in sizes]                  # bytes a slice, per channel
        ys = [(times[n] - base) / steps for n in sizes]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        return my - b * mx, ch / (b * 1e3)                      # us, GB/s over the channels

    step, rate = fit(per)
    assert step == pytest.approx(nccl.STEP_US["nvlink"][("ring", "Simple")], rel=0.10)
    assert rate == pytest.approx(12 * 20.0, rel=0.10)
    assert fit(one)[0] > 5.0


def test_one_threads_slowdown_at_8_to_256_mib_is_not_the_hosts_launches():
    """From 8 to 256 MiB the one-thread run is 8-26% slower than a process per GPU on the
    same machine, while the loop's closed form with the host's launches priced
    (bench/nccl_tests.py: harness_us, HOST_US) adds under 3 us to the GPUs' time there: the
    slowdown is on the GPUs' side and not modelled (docs/clusters.md). From 1 GiB the two
    runs agree within 1%."""
    d, per, one = measured()
    for n in [8 * MIB << k for k in range(6)]:
        host = bench.host_us("dgx-a100", d["gpus"], nccl.NCCL_CHANNELS)
        assert bench.harness_us(per[n], host, d["iters"]) - per[n] < 3.0
        assert 0.07 < one[n] / per[n] - 1 < 0.27, n
    for n in (1 << 30, 1 << 31, 1 << 32):
        assert abs(one[n] / per[n] - 1) < 0.01, n
