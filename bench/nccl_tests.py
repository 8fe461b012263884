"""nccl-tests' all-reduce bus bandwidth on one DGX A100 and one DGX H100, against published
measurements across message sizes (tests/data/nccl_tests_allreduce.json: each system's source
is in the file).

pysim runs `workload.algorithm = "nccl"` (pysim/workload/nccl.py) at the flow level on the
shipped dgx-a100 and dgx-h100 (with NVLink SHARP, topology.nvls = true), with the algorithm
the measurement forced (NCCL_ALGO: ring on the A100, NVLS on the H100-class nodes) and the
protocol the tuning model of the NCCL release measured picks per size (--tuning), and
reports per size the published and simulated bus
bandwidth, their ratio, the protocol and channels, and per system the geometric mean of
|error| and the largest. `--level flit` runs the cycle-level network instead (up to
--flit-max bytes). Prints a Markdown table; --json writes the rows with provenance.

The measurements time nccl-tests' loop, not the collective alone: one host thread launches
each all-reduce on all 8 GPUs (`-g 8`), `-n` times, and divides the host's elapsed time by
`-n`. Where the host's launch of an iteration is priced by a published measurement (HOST_US),
the reported time is the loop's (harness_us: the slower of the host and the GPUs paces it);
elsewhere, and with --harness none, it is pysim's collective alone.

    python bench/nccl_tests.py [--systems dgx-a100,dgx-h100,hgx-h200] [--tuning measured]
                               [--harness nccl-tests|none] [--json FILE]
"""
import argparse
import json
import math
import os
import sys
import time

from outputs import FORCE, check, write_json

import pysim
import pysim.workload.nccl

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "nccl_tests_allreduce.json")
SETTINGS = {"dgx-a100": {}, "dgx-h100": {"topology.nvls": True}}
# The NCCL release each measurement ran (its source, in the data file): its tuning model picks
# the protocol (workload.nccl_tuning; --tuning measured)
MEASURED_RELEASE = {"dgx-a100": "2.18", "dgx-h100": "2.18", "hgx-h200": "2.20"}
# The host's time to launch one all-reduce on one GPU from the thread that drives them all
# (nccl-tests -g): a fixed part and a part per channel the collective runs, in us. NCCL walks
# the group's communicators one after another on the calling thread (src/group.cc,
# doLaunches: per GPU cudaSetDevice, ncclLaunchPrepare's stream dependencies, uploadWork's
# one ncclWork per channel into the host-side work FIFO, the kernel launch, src/enqueue.cc,
# 2.18.5). Priced on an 8 x A100-SXM4-80GB NVSwitch server measured both ways (one thread for
# the 8 GPUs, and a process per GPU, the same NCCL: tests/data/nccl_tests_harness_a100.json):
# from 8 bytes to 1 MiB, where the one-thread run is slower, the host's time per iteration,
# the one-thread time less the GPUs' share (harness_us), is 37.86 + 0.576 x channels us for 8
# GPUs, within 2.1% at every size (the least-squares line over NCCL's channels per size, 1 to
# 24; tests/test_nccl_harness.py re-derives it). No such pair of runs is published for an
# H100 host, so the H100-class rows are the collective alone.
HOST_US = {"dgx-a100": {"launch": 4.732, "per_channel": 0.0720}}


def run(system, nbytes, algorithm="auto", protocol="auto", level="flow", tuning="2.23"):
    cfg = pysim.load(system, {"workload.kind": "collective", "workload.collective": "all_reduce",
                              "workload.algorithm": "nccl", "workload.bytes": int(nbytes),
                              "workload.nccl_algorithm": algorithm,
                              "workload.nccl_protocol": protocol,
                              "workload.nccl_tuning": tuning,
                              "network.model": level, **SETTINGS[system]})
    t = time.perf_counter()
    d = pysim.simulate(cfg).to_dict()
    return dict(busbw_gbps=d["busbw_gbps"], time_us=d["collective_cycles"] /
                cfg.network.clock_ghz / 1e3, algorithm=d["nccl_algorithm"],
                protocol=d["nccl_protocol"], channels=d.get("nccl_channels"),
                wall_s=round(time.perf_counter() - t, 3))


def host_us(system, gpus, channels):
    """The host's time per nccl-tests iteration launching one all-reduce of `channels`
    channels on each of `gpus` GPUs from one thread (HOST_US), or None where unpriced."""
    h = HOST_US.get(system)
    if h is None:
        return None
    return gpus * (h["launch"] + h["per_channel"] * channels)


def harness_us(gpu_us, host, iters):
    """nccl-tests' time per iteration (src/common.cu, BenchTime): the host enqueues `iters`
    iterations, each `host` us of launches, then waits for the GPUs, each iteration `gpu_us`
    on them, and divides the elapsed time by `iters`. Iteration i starts on the GPUs once
    both its launch and iteration i-1 are done, so the slower of the two paces the loop and
    the other shows once: max + min / iters."""
    return max(gpu_us, host) + min(gpu_us, host) / iters


def published_time_us(nbytes, busbw, p=8):
    """The measured time: nccl-tests' busbw = bytes / time x 2 (p - 1) / p."""
    return nbytes * 2 * (p - 1) / p / (busbw * 1e3)


def compare(name, data, level="flow", flit_max=None, tuning="measured", harness=None):
    """Per size, pysim's all-reduce against the measurement. `harness` ({"gpus_per_thread",
    "iters"}, the measurement's nccl-tests options) adds the host's launches where priced."""
    system = data.get("system", name)
    release = MEASURED_RELEASE[name] if tuning == "measured" else tuning
    rows = []
    for nbytes, pub in zip(data["bytes"], data["busbw_gbps"]):
        if level == "flit" and flit_max and nbytes > flit_max:
            continue
        r = run(system, nbytes, data.get("nccl_algorithm", "auto"), level=level,
                tuning=release)
        host = (host_us(name, harness["gpus_per_thread"], r["channels"]) if harness
                else None)
        t = r["time_us"] if host is None else harness_us(r["time_us"], host,
                                                            harness["iters"])
        busbw = r["busbw_gbps"] * r["time_us"] / t     # the same bytes over the loop's time
        rows.append(dict(system=name, level=level, tuning=release, bytes=nbytes,
                         published_busbw_gbps=pub,
                         published_time_us=round(published_time_us(nbytes, pub), 2),
                         simulated_busbw_gbps=round(busbw, 3),
                         error=round(busbw / pub - 1, 4),
                         collective_us=round(r["time_us"], 3),
                         host_us=None if host is None else round(host, 3),
                         time_us=round(t, 3), **{k: r[k] for k in
                                                 ("algorithm", "protocol", "channels",
                                                  "wall_s")}))
    return rows


def summary(rows):
    err = [abs(math.log(1 + r["error"])) for r in rows]
    return dict(geomean_abs_error=math.exp(sum(err) / len(err)) - 1,
                max_abs_error=max(abs(r["error"]) for r in rows))


def check_options(ap, a, data):
    """A usage error (ap.error) naming the option, its value and what is expected, before
    any run: systems the measurements do not have, a release NCCL's tuning model does not
    know, --flit-max without --level flit or below every measured size."""
    known = list(data["systems"])
    for system in a.systems.split(","):
        if system not in known:
            ap.error(f"--systems {a.systems!r}: {system!r} has no measurements; expected "
                     f"some of {', '.join(known)}, comma-separated")
    releases = ("measured",) + pysim.workload.nccl.TUNING_RELEASES
    if a.tuning not in releases:
        ap.error(f"--tuning {a.tuning!r}: expected one of {', '.join(releases)}")
    if a.flit_max is not None and a.level != "flit":
        ap.error(f"--flit-max {a.flit_max}: read with --level flit only (the flow level runs "
                 f"every size)")
    if a.flit_max is None:
        a.flit_max = 1 << 22
    least = min(min(data["systems"][s]["bytes"]) for s in a.systems.split(","))
    if a.flit_max < least:
        ap.error(f"--flit-max {a.flit_max}: expected at least {least:,} bytes, the smallest "
                 f"size measured (else nothing runs)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", default="dgx-a100,dgx-h100,hgx-h200")
    ap.add_argument("--level", choices=("flow", "flit"), default="flow")
    ap.add_argument("--flit-max", type=int, default=None,
                    help="--level flit: the largest size run (bytes; default 4 MiB)")
    ap.add_argument("--tuning", default="measured",
                    help="workload.nccl_tuning: 'measured' (default: the release each "
                         "measurement ran, 2.18 or 2.20) or a release (2.18, 2.20, 2.23)")
    ap.add_argument("--harness", choices=("nccl-tests", "none"), default="nccl-tests",
                    help="nccl-tests (default): the measurement's loop, with the host's "
                         "launches where priced; none: pysim's collective alone")
    ap.add_argument("--json")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    with open(DATA) as f:
        data = json.load(f)
    check_options(ap, a, data)
    check(ap, a.force, [("--json", a.json)], inputs=[("the measurements file", DATA)])
    harness = data["harness"] if a.harness == "nccl-tests" else None
    out = {}
    for system in a.systems.split(","):
        rows = compare(system, data["systems"][system], a.level, a.flit_max, a.tuning,
                       harness)
        s = summary(rows)
        out[system] = dict(rows=rows, **s, source=data["systems"][system]["source"],
                           harness=a.harness)
        print(f"\n{system} ({a.level}, NCCL {rows[0]['tuning']}'s tuning, harness "
              f"{a.harness}): geomean |error| {s['geomean_abs_error']:.1%}, max "
              f"{s['max_abs_error']:.1%}\n")
        print("| bytes | published busbw GB/s (time µs) | pysim busbw GB/s (time µs) | error "
              "| collective µs, host µs | algorithm / protocol, channels |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            host = "-" if r["host_us"] is None else f"{r['host_us']:.1f}"
            print(f"| {r['bytes']:,} | {r['published_busbw_gbps']:.2f} "
                  f"({r['published_time_us']:.1f}) | {r['simulated_busbw_gbps']:.2f} "
                  f"({r['time_us']:.1f}) | {r['error']:+.1%} | "
                  f"{r['collective_us']:.1f}, {host} | "
                  f"{r['algorithm']} / {r['protocol']}, {r['channels']} |")
    if a.json:
        sys.path.insert(0, HERE)
        from provenance import provenance
        write_json(a.json, {"systems": out, "provenance": provenance()})


if __name__ == "__main__":
    main()
