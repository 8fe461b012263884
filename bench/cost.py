"""What the engine costs, counted rather than timed (not a test): runs one benchmark case (the
mesh of bench/speed.py, or the large collective of bench/collectives.py, smaller) under
valgrind's cachegrind and prints, for the compiled engine only, the instructions, L1 data-cache
misses and mispredicted branches it executed, and a cycle estimate from them.

    python bench/cost.py mesh [--dims 16x16] [--rate 0.1] [--cycles 2000]
    python bench/cost.py collective [--mb 2]
    python bench/cost.py ... [--json PATH]

Wall time on a shared virtual machine moves by a third from one minute to the next; these counts
do not move (same build, same case, same numbers), so they are what to compare two versions of
csim with. Instructions and mispredicts follow the code; the L1 miss count also follows where
the arrays fall in the cache (set conflicts; they start on 64-byte boundaries): a change as
small as dropping one State field, or running the same case from another script, moved it by
up to 30%, so trust it only for large differences. The estimate is instructions / 4 + 1 per
L1 miss + 14 per mispredict, fitted to an AMD Zen 4 virtual machine on the 16x16 case with two
versions of the engine (it predicts 55.4k and 46.5k CPU cycles per simulated cycle where wall
time gave 53.5-55k and 45.2k): the core retires about four
instructions a cycle and hides most L2 hits, so mispredicted branches weigh far more than
instructions. A yardstick for comparing versions, not a prediction of wall time elsewhere.
Needs valgrind (Debian: apt install valgrind).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from outputs import FORCE, check, write_json

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = """
import sys
sys.path[:0] = [{root!r}, {bench!r}]
import pysim
if {kind!r} == "mesh":
    from speed import mesh_config
    cfg = mesh_config({dims}, {cycles}, {rate})
else:
    from collectives import large_config
    cfg = large_config({mb} << 20)
r = pysim.simulate(cfg).to_dict()
print("CYCLES", r["cycles"] if "cycles" in r else r["makespan_cycles"])
"""


SETUP = ("path_walk", "mark_dependencies")   # compiled too, but they run before the cycles


def engine_counts(annotated: str):
    """Sum cg_annotate's per-function rows that belong to the engine's compiled module, but
    for the set-up walks of the routing tables (theory, deadlock check)."""
    totals = dict(Ir=0, D1mr=0, D1mw=0, Bcm=0, Bim=0)
    header = None
    for line in annotated.splitlines():
        if line.startswith("Events shown:"):
            header = line.split(":", 1)[1].split()
        if "_engine.c:" not in line or header is None or line.startswith("--") or \
                any(name in line for name in SETUP):
            continue
        nums = re.sub(r"\([^)]*\)", "", line).replace(",", "").split()
        vals = [int(x) if x.isdigit() else 0 for x in nums[:len(header)]]
        for name, v in zip(header, vals):
            if name in totals:
                totals[name] += v
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=["mesh", "collective"])
    ap.add_argument("--dims", default="16x16")
    ap.add_argument("--rate", type=float, default=0.1)
    ap.add_argument("--cycles", type=int, default=2000)
    ap.add_argument("--mb", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("cg_annotate") is None:
        sys.exit("bench/cost.py needs valgrind and cg_annotate on PATH")
    check(ap, a.force, [("--json", a.json)])
    root = os.path.dirname(HERE)
    dims = [int(x) for x in a.dims.split("x")]
    code = CHILD.format(root=root, bench=HERE, kind=a.case, cycles=a.cycles, dims=dims,
                        rate=a.rate, mb=a.mb)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        script = os.path.join(tmp, "case.py")    # (a file: cg_annotate reads the command line)
        with open(script, "w") as f:
            f.write(code)
        run = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes",
                              "--branch-sim=yes", f"--cachegrind-out-file={out}",
                              os.path.realpath(sys.executable), script],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"the case failed under valgrind:\n{run.stderr[-2000:]}")
        cycles = int(re.search(r"CYCLES (\d+)", run.stdout).group(1))
        ann = subprocess.run(["cg_annotate", out], capture_output=True, text=True)
        if ann.returncode != 0:
            sys.exit(f"cg_annotate failed: {ann.stderr.strip()}")
        ann = ann.stdout
    t = engine_counts(ann)
    d1 = t["D1mr"] + t["D1mw"]
    br = t["Bcm"] + t["Bim"]
    est = t["Ir"] / 4 + d1 + 14 * br
    row = dict(case=a.case, dims=a.dims if a.case == "mesh" else None,
               rate=a.rate if a.case == "mesh" else None,
               megabytes=a.mb if a.case == "collective" else None, simulated_cycles=cycles,
               instructions=t["Ir"], l1d_misses=d1, mispredicts=br, estimated_cpu_cycles=est,
               per_simulated_cycle=est / cycles)
    print(f"{a.case}: {cycles} simulated cycles; engine: {t['Ir'] / 1e6:.1f} M instructions, "
          f"{d1 / 1e6:.2f} M L1D misses, {br / 1e6:.2f} M mispredicts; "
          f"estimate {est / 1e6:.1f} M CPU cycles ({est / cycles:,.0f} per simulated cycle)")
    if a.json:
        write_json(a.json, row)


if __name__ == "__main__":
    main()
