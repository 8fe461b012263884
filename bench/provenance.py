"""What a benchmark's JSON says about where and when it ran: the UTC date, the commit (and
whether the work tree had changes), Python, the CPU model, the cores and the load average when
it started (other work on the machine slows every wall time)."""
import datetime
import json
import os
import platform
import subprocess
import sys

import outputs


def _git(*args):
    try:
        return subprocess.run(["git", *args], cwd=os.path.dirname(os.path.abspath(__file__)),
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def provenance():
    import pysim
    return dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                commit=_git("rev-parse", "HEAD"), dirty=bool(_git("status", "--porcelain")),
                version=pysim.__version__, python=platform.python_version(),
                machine=platform.machine(), cpu=_cpu(), cores=os.cpu_count(),
                load_average=list(os.getloadavg()) if hasattr(os, "getloadavg") else None)


def child(script, *args, cwd=None):
    """Run `script` (a benchmark, with its --child arguments) in a fresh Python process, so
    that its peak memory is its own; return the JSON of its last line of output."""
    out = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                         check=True, cwd=cwd)
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_rows(path, benchmark, started, rows):
    """Write a benchmark's rows as JSON with their provenance (`started`: provenance() as the
    runs began; the load average at the end is added), and say where."""
    write_json(path, dict(benchmark=benchmark, **started,
                          load_average_end=provenance()["load_average"], rows=rows))


def write_json(path, doc, **dump):
    """Write `doc` as JSON to `path` (a bare file name included: its folder is made if
    missing), whole or not at all, and say where (outputs.write_json)."""
    outputs.write_json(path, doc, **dump)
