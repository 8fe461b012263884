"""pysim beside BookSim2 on the same configurations (not a test): latency against offered load,
saturation throughput and simulated cycles per second, medians over seeds, both simulators run
interleaved so that machine load hits them alike. Prints a table and writes JSON and a figure
(both simulators' latency-load curves, one panel per case).

    BOOKSIM=/path/to/booksim python bench/vs_booksim.py [--seeds 3] [--cases mesh8x8-uniform-1 ...]
        [--quick] [--no-speed] [--out bench/results/vs_booksim.json]
        [--fig bench/results/vs_booksim.png]
    python bench/vs_booksim.py --departures [NAME ...]     (pysim alone: its options)

BOOKSIM names a BookSim2 binary (https://github.com/booksim/booksim2). Without it the script
says how to build one and exits. Nothing of BookSim is shipped here: the script writes a
BookSim configuration file for each run, from the same parameters as the pysim one.
--departures needs no BookSim: it measures, the same way, pysim with each of its options that
depart from BookSim's model (and with BookSim's tie rule) against pysim's defaults.

The model, both sides: an input-queued router with 2 VCs of 8 flits, 1-cycle route computation,
VC allocation, switch allocation and crossbar, one-iteration separable input-first allocators,
VCs reallocated once a tail has left, credits back with the link latency (BookSim's
credit_delay 0), dimension-order routing, 1-cycle NIC channels; mesh links of 1 cycle, ring and
torus links of 2 (BookSim lays its torus out folded); Bernoulli injection at a rate in flits per
node per cycle (BookSim: injection_rate_uses_flits), uniform traffic including the source
itself. Ties at distance k/2 on a ring: BookSim breaks them at random, pysim by default by the
parity of the coordinate (topology.tie_break; docs/booksim.md).

Measurement: BookSim's latency mode with one warm-up period of 2,000 cycles and five measured
periods (its stopping thresholds set to 0, so that it runs all of them), then its drain of the
measured packets; pysim warms up 2,000 cycles and measures 10,000, then drains. Saturation
throughput: the highest offered load a simulator carries (accepted within 3% of offered, the
median of the seeds; BookSim's throughput mode, 4,000 cycles of warm-up and 4,000 measured;
pysim alike), bracketed by a sweep and narrowed by bisection (see saturation()). The
latency-load points are fractions of BookSim's saturation throughput. Speed: the 16x16 mesh
at 0.1 and the 32x32 mesh at 0.05, 4-flit packets, each simulator's own cycles per second of
simulation (BookSim: simulated cycles / its 'Total run time'; pysim: cycles / engine seconds)
and by the wall time of the whole process.
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

from outputs import FORCE, check, quiet_worker, write_figure, write_json

HERE = os.path.dirname(os.path.abspath(__file__))

BUILD_HELP = """\
bench/vs_booksim.py compares pysim with BookSim2 and needs a BookSim binary: set BOOKSIM to
its path. To build one (any directory outside this repository): clone BookSim2's public
repository (github.com/booksim/booksim2; the comparison in docs/booksim.md used its commit
28f4329), install a C++ compiler, flex and bison (Debian: apt-get install g++ flex bison),
and run make in its src directory, which leaves the binary src/booksim. Then:

    BOOKSIM=/path/to/booksim2/src/booksim python bench/vs_booksim.py
"""

# name -> (topology, pysim topology table, traffic pattern, packet flits)
CASES = {
    "mesh8x8-uniform-1": ("mesh", {"kind": "mesh", "dims": [8, 8]}, "uniform", 1),
    "mesh8x8-uniform-4": ("mesh", {"kind": "mesh", "dims": [8, 8]}, "uniform", 4),
    "mesh8x8-transpose-1": ("mesh", {"kind": "mesh", "dims": [8, 8]}, "transpose", 1),
    "mesh8x8-bitcomp-4": ("mesh", {"kind": "mesh", "dims": [8, 8]}, "bitcomp", 4),
    "mesh16x16-uniform-4": ("mesh", {"kind": "mesh", "dims": [16, 16]}, "uniform", 4),
    "ring16-uniform-1": ("torus", {"kind": "ring", "size": 16, "link_latency_ns": 2.0},
                         "uniform", 1),
    "torus4x4-uniform-1": ("torus", {"kind": "torus", "dims": [4, 4], "link_latency_ns": 2.0},
                           "uniform", 1),
}
FRACTIONS = (0.05, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)   # of BookSim's saturation throughput
QUICK_FRACTIONS = (0.05, 0.5, 0.8)
SPEED = {"mesh16x16": ([16, 16], 0.1), "mesh32x32": ([32, 32], 0.05)}

WARMUP, PERIOD, PERIODS = 2000, 2000, 5           # latency runs
SAT_PERIOD = 4000                                 # saturation runs: warm-up, then measured


def dims_of(topo):
    return topo["dims"] if "dims" in topo else [topo["size"]]


# ------------------------------------------------------------------ BookSim

def booksim_config(case, rate, seed, mode, cycles=None):
    """The BookSim configuration text for one run. mode: 'latency', 'throughput' or 'speed'
    (a fixed number of cycles, warm-up included, then the drain)."""
    kind, topo, pattern, flits = CASES[case] if isinstance(case, str) else case
    dims = dims_of(topo)
    lines = {
        "topology": kind, "k": dims[0], "n": len(dims), "routing_function": "dim_order",
        "num_vcs": 2, "vc_buf_size": 8, "wait_for_tail_credit": 0,
        "vc_allocator": "separable_input_first", "sw_allocator": "separable_input_first",
        "alloc_iters": 1, "credit_delay": 0, "routing_delay": 1, "vc_alloc_delay": 1,
        "sw_alloc_delay": 1, "st_prepare_delay": 0, "st_final_delay": 1,
        "traffic": pattern, "packet_size": flits, "injection_rate": rate,
        "injection_rate_uses_flits": 1, "injection_process": "bernoulli", "seed": seed,
    }
    if mode == "latency":
        lines.update(sim_type="latency", warmup_periods=1, sample_period=PERIOD,
                     max_samples=1 + PERIODS, stopping_thres=0.0, acc_stopping_thres=0.0,
                     latency_thres=1000.0)
    elif mode == "throughput":
        lines.update(sim_type="throughput", warmup_periods=1, sample_period=SAT_PERIOD,
                     max_samples=2, stopping_thres=0.0, acc_stopping_thres=0.0)
    else:                              # speed: warm-up and one measured period of `cycles`
        lines.update(sim_type="latency", warmup_periods=1, sample_period=cycles // 2,
                     max_samples=2, stopping_thres=0.0, acc_stopping_thres=0.0,
                     latency_thres=1e9)
    return "".join(f"{k} = {v};\n" for k, v in lines.items())


def run_booksim(binary, text):
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        t = time.perf_counter()
        p = subprocess.run([binary, path], capture_output=True, text=True)
        wall = time.perf_counter() - t
    finally:
        os.unlink(path)
    out = p.stdout

    def grab(pattern, default=math.nan):
        m = re.findall(pattern, out)
        return float(m[-1]) if m else default
    aborted = "exceeded" in out and "Aborting" in out
    return dict(latency=math.nan if aborted else grab(r"Packet latency average = ([\d.e+-]+)"),
                accepted=grab(r"Accepted flit rate average\s*= ([\d.e+-]+)"),
                offered=grab(r"Injected flit rate average\s*= ([\d.e+-]+)"),
                cycles=grab(r"Time taken is (\d+) cycles"),
                run_seconds=grab(r"Total run time ([\d.e+-]+)"), wall_seconds=wall,
                saturated=aborted, ok=p.returncode == 0)


# ------------------------------------------------------------------ pysim

PYSIM_CHILD = """
import json, sys, time
t = time.perf_counter()
sys.path.insert(0, {root!r})
import pysim
r = pysim.simulate(pysim.from_dict(json.loads(sys.argv[1])))
print(json.dumps(dict(latency=r.avg_packet_latency, accepted=r.accepted_rate,
                      offered=r.offered_rate, cycles=r.cycles, run_seconds=r.run_seconds,
                      saturated=r.saturated, zero_load=r.zero_load_latency,
                      inside_seconds=time.perf_counter() - t)))
"""


def pysim_config(case, rate, seed, mode, cycles=None):
    kind, topo, pattern, flits = CASES[case] if isinstance(case, str) else case
    if mode == "latency":
        sim = {"warmup_cycles": WARMUP, "measure_cycles": PERIOD * PERIODS,
               "drain_cycles": 50000}
    elif mode == "throughput":
        sim = {"warmup_cycles": SAT_PERIOD, "measure_cycles": SAT_PERIOD, "drain_cycles": 0}
    else:
        sim = {"warmup_cycles": cycles // 2, "measure_cycles": cycles // 2,
               "drain_cycles": 50000}
    return {"simulation": dict(sim, seed=seed), "topology": topo,
            "network": {"vcs": 2, "vc_buffer_flits": 8},
            "traffic": {"pattern": pattern, "injection_rate": rate, "packet_flits": flits}}


def run_pysim(cfg):
    code = PYSIM_CHILD.format(root=os.path.dirname(HERE))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, json.dumps(cfg)], capture_output=True,
                       text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"pysim failed on {cfg}:\n{p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall_seconds"] = wall
    r["ok"] = True
    return r


# ------------------------------------------------------------------ the comparison

def booksim_runner(binary):
    return lambda case, rate, seed, mode, cycles=None: run_booksim(
        binary, booksim_config(case, rate, seed, mode, cycles))


def pysim_runner(overrides=None):
    """pysim, with {section: {key: value}} overrides (a departure from BookSim's model)."""
    def run(case, rate, seed, mode, cycles=None):
        cfg = pysim_config(case, rate, seed, mode, cycles)
        for section, values in (overrides or {}).items():
            cfg[section] = dict(cfg.get(section, {}), **values)
        return run_pysim(cfg)
    return run


def median(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(xs) if xs else math.nan


def both(runners, case, rate, seeds, mode, cycles=None):
    """Run the two simulators (runners: name -> run function) alternately, seed by seed; per
    simulator the runs and the medians of latency and accepted rate."""
    runs = {name: [] for name in runners}
    for seed in seeds:
        for name, run in runners.items():
            runs[name].append(run(case, rate, seed, mode, cycles))
    out = {}
    for sim, rs in runs.items():
        sat = sum(bool(r["saturated"]) for r in rs) > len(rs) / 2
        out[sim] = dict(latency=math.nan if sat else median([r["latency"] for r in rs]),
                        accepted=median([r["accepted"] for r in rs]), saturated=sat, runs=rs)
    return out


def pct(a, b):
    return 100.0 * (b - a) / a if a and not math.isnan(a) and not math.isnan(b) else math.nan


MARGIN = 0.03        # a load is carried when the accepted rate is within 3% of it


def saturation(runners, case, seeds, log):
    """Saturation throughput of each simulator: the highest offered load it carries, i.e.
    whose accepted rate (median over seeds, throughput mode) is within MARGIN of it. (Not the
    highest accepted rate: past saturation a network may carry less -- a 16-node ring offered
    1 flit/node/cycle carries half its peak -- or more, its unloaded flows growing while
    others starve: under transpose traffic an 8x8 mesh accepts twice the load it carries.)
    A geometric sweep with the first seed brackets it for each simulator (loads x1.3 apart),
    then five bisection steps with every seed narrow the bracket to under 1%."""
    names = list(runners)
    bracket = {}
    sweep = []
    lo = {sim: 0.0 for sim in names}
    rate = 0.02
    while len(bracket) < len(names):
        todo = {sim: runners[sim] for sim in names if sim not in bracket}
        r = both(todo, case, rate, seeds[:1], "throughput")
        sweep.append(dict(rate=rate, **{sim: r[sim]["accepted"] for sim in todo}))
        for sim in todo:
            if r[sim]["accepted"] >= (1 - MARGIN) * rate:
                lo[sim] = rate
            else:
                bracket[sim] = (lo[sim], rate)
        if rate >= 1.0:
            for sim in names:
                bracket.setdefault(sim, (1.0, 1.0))
            break
        rate = min(1.0, round(rate * 1.3, 4))
    out = {"coarse": sweep, "bisection": []}
    best = {}
    for sim in names:
        a, b = bracket[sim]
        for _ in range(5 if b > a else 0):
            mid = round((a + b) / 2, 5)
            r = both({sim: runners[sim]}, case, mid, seeds, "throughput")[sim]
            carried = r["accepted"] >= (1 - MARGIN) * mid
            out["bisection"].append(dict(sim=sim, rate=mid, accepted=r["accepted"],
                                         carried=carried, runs=r["runs"]))
            a, b = (mid, b) if carried else (a, mid)
        best[sim] = a
    out["throughput"] = best
    a, b = names
    log(f"{case}: saturation throughput {a} {best[a]:.4f}, {b} {best[b]:.4f} "
        f"({pct(best[a], best[b]):+.1f}%)")
    return out


def compare_case(runners, case, seeds, fractions, log):
    """Saturation throughput, then latency at fractions of the first simulator's."""
    a, b = list(runners)
    res = dict(case=case, simulators=[a, b],
               model=dict(zip(("booksim_topology", "topology", "pattern", "packet_flits"),
                              CASES[case])))
    sat = saturation(runners, case, seeds, log)
    res["saturation"] = sat["throughput"]
    res["saturation_search"] = {k: v for k, v in sat.items() if k != "throughput"}
    points = []
    for f in fractions:
        rate = round(f * res["saturation"][a], 4)
        r = both(runners, case, rate, seeds, "latency")
        points.append(dict(fraction=f, rate=rate, **{sim: r[sim]["latency"] for sim in (a, b)},
                           **{sim + "_saturated": r[sim]["saturated"] for sim in (a, b)},
                           runs={k: v["runs"] for k, v in r.items()}))
        log(f"  {rate:.4f} ({f:.2f} of {a}'s saturation): latency {a} {points[-1][a]:.2f}, "
            f"{b} {points[-1][b]:.2f} ({pct(points[-1][a], points[-1][b]):+.1f}%)")
    res["points"] = points
    return res


def speed(binary, seeds, repeat, log):
    rows = []
    for name, (dims, rate) in SPEED.items():
        case = ("mesh", {"kind": "mesh", "dims": dims}, "uniform", 4)
        cycles = 4000 if dims[0] <= 16 else 2000
        bs, py = [], []
        for k in range(repeat):
            seed = seeds[k % len(seeds)]
            bs.append(run_booksim(binary, booksim_config(case, rate, seed, "speed", cycles)))
            py.append(run_pysim(pysim_config(case, rate, seed, "speed", cycles)))
        b_cps = median([r["cycles"] / r["run_seconds"] for r in bs])
        p_cps = median([r["cycles"] / r["run_seconds"] for r in py])
        b_wall = median([r["cycles"] / r["wall_seconds"] for r in bs])
        p_wall = median([r["cycles"] / r["wall_seconds"] for r in py])
        rows.append(dict(case=name, rate=rate, cycles=cycles,
                         booksim_cycles_per_second=b_cps, pysim_cycles_per_second=p_cps,
                         ratio_engine=p_cps / b_cps,
                         booksim_cycles_per_wall_second=b_wall,
                         pysim_cycles_per_wall_second=p_wall, ratio_wall=p_wall / b_wall,
                         runs=dict(booksim=bs, pysim=py)))
        log(f"speed {name} at {rate}: BookSim {b_cps:,.0f} cycles/s, pysim {p_cps:,.0f} "
            f"(x{p_cps / b_cps:.1f}); whole process: x{p_wall / b_wall:.1f}")
    return rows


def table(results, speed_rows):
    if not results:
        a, b = "BookSim", "pysim"
    else:
        a, b = results[0]["simulators"]
    lines = [f"| case | measure | {a} | {b} | difference |", "|---|---|---|---|---|"]
    for r in results:
        s = r["saturation"]
        for p in r["points"]:
            x = "saturated" if p[a + "_saturated"] else f"{p[a]:.2f}"
            y = "saturated" if p[b + "_saturated"] else f"{p[b]:.2f}"
            lines.append(f"| {r['case']} | latency at {p['rate']:.3f} ({p['fraction']:.2f} sat) "
                         f"| {x} | {y} | {pct(p[a], p[b]):+.1f}% |")
        lines.append(f"| {r['case']} | saturation throughput | {s[a]:.4f} | "
                     f"{s[b]:.4f} | {pct(s[a], s[b]):+.1f}% |")
    for row in speed_rows:
        lines.append(f"| {row['case']} at {row['rate']} | simulated cycles/s (engine) | "
                     f"{row['booksim_cycles_per_second']:,.0f} | "
                     f"{row['pysim_cycles_per_second']:,.0f} | x{row['ratio_engine']:.1f} |")
        lines.append(f"| {row['case']} at {row['rate']} | simulated cycles/s (process) | "
                     f"{row['booksim_cycles_per_wall_second']:,.0f} | "
                     f"{row['pysim_cycles_per_wall_second']:,.0f} | x{row['ratio_wall']:.1f} |")
    return "\n".join(lines)


def figure(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(results)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, r in zip(axes.flat, results):
        a, b = r["simulators"]
        x = [p["rate"] for p in r["points"]]
        ax.plot(x, [p[a] for p in r["points"]], "o", ms=7, mfc="none", color="k", label=a)
        ax.plot(x, [p[b] for p in r["points"]], "-x", color="tab:blue", label=b)
        for sim, style, color in ((a, ":", "k"), (b, "--", "tab:blue")):
            ax.axvline(r["saturation"][sim], ls=style, color=color, lw=1)
        ax.set_title(r["case"], fontsize=10)
        ax.set_xlabel("offered load (flits/node/cycle)")
        ax.set_ylabel("packet latency (cycles)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("Latency against offered load, medians over seeds "
                 "(vertical lines: saturation throughput)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _one_case(binary, case, seeds, fractions):
    """One case against BookSim (a function of its arguments alone: --jobs runs it in a
    worker process)."""
    runners = {"BookSim": booksim_runner(binary), "pysim": pysim_runner()}
    return compare_case(runners, case, seeds, fractions, lambda m: print(m, flush=True))


# pysim's options, measured against its defaults (BookSim's model, but for the tie rule:
# there 'random' is BookSim's): name -> (overrides, cases)
DEPARTURES = {
    "injection_delay=0": ({"network": {"injection_delay": 0}}, ["mesh8x8-uniform-1"]),
    "va_input_arbiter=own_index": ({"network": {"va_input_arbiter": "own_index"}},
                                   ["mesh8x8-uniform-1", "mesh8x8-uniform-4"]),
    "sa_input_arbiter=vcs": ({"network": {"sa_input_arbiter": "vcs"}},
                             ["mesh8x8-uniform-1", "mesh8x8-uniform-4"]),
    "own_index+vcs": ({"network": {"va_input_arbiter": "own_index",
                                   "sa_input_arbiter": "vcs"}},
                      ["mesh8x8-uniform-1", "mesh8x8-uniform-4", "mesh8x8-transpose-1"]),
    "dateline=crossing": ({"topology": {"dateline": "crossing"}},
                          ["ring16-uniform-1", "torus4x4-uniform-1"]),
    "tie_break=random": ({"topology": {"tie_break": "random"}},
                         ["ring16-uniform-1", "torus4x4-uniform-1"]),
    "dateline=fewest": ({"topology": {"dateline": "fewest"}}, ["torus4x4-uniform-1"]),
}


def departures(seeds, fractions, names, log):
    """pysim with each option against pysim with its defaults (no BookSim needed)."""
    results = []
    for name in names:
        over, cases = DEPARTURES[name]
        for case in cases:
            r = compare_case({"default": pysim_runner(), name: pysim_runner(over)}, case,
                             seeds, fractions, log)
            r["departure"] = name
            results.append(r)
    return results, departure_table(results)


def departure_table(results):
    rows = ["| option | case | measure | pysim's defaults | with the option | difference |",
            "|---|---|---|---|---|---|"]
    for r in results:
        name, case, s = r["departure"], r["case"], r["saturation"]
        for p in r["points"]:
            rows.append(f"| {name} | {case} | latency at {p['rate']:.3f} "
                        f"({p['fraction']:.2f} sat) | {p['default']:.2f} | {p[name]:.2f} | "
                        f"{pct(p['default'], p[name]):+.1f}% |")
        rows.append(f"| {name} | {case} | saturation throughput | {s['default']:.4f} | "
                    f"{s[name]:.4f} | {pct(s['default'], s[name]):+.1f}% |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", choices=sorted(CASES), default=list(CASES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="three loads per case, one seed: a smoke run")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--speed-repeat", type=int, default=5)
    ap.add_argument("--departures", nargs="*", choices=sorted(DEPARTURES), default=None,
                    help="instead of BookSim: pysim with each of these options (all if none "
                         "named) against pysim's defaults")
    ap.add_argument("--jobs", type=int, default=1,
                    help="cases run in this many processes at once (each case's runs stay "
                         "interleaved)")
    ap.add_argument("--from-json", default=None, metavar="PATH",
                    help="print the table and draw the figure of a results file written "
                         "before, and run nothing")
    ap.add_argument("--out", default=None, help="JSON (default bench/results/vs_booksim.json, "
                                                "or departures.json)")
    ap.add_argument("--fig", default=None, help="figure (default bench/results/vs_booksim.png)")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    seeds = list(range(1, 2 if a.quick else a.seeds + 1))
    fractions = QUICK_FRACTIONS if a.quick else FRACTIONS
    t0 = time.perf_counter()
    import pysim
    meta = dict(version=pysim.__version__, python=platform.python_version(),
                machine=platform.machine(), seeds=seeds)
    if a.from_json:
        check(ap, a.force, [("--fig", a.fig)], inputs=[("--from-json's file", a.from_json)])
        with open(a.from_json) as f:
            doc = json.load(f)
        if doc.get("benchmark") == "vs_booksim departures":
            print(departure_table(doc["cases"]))
            return 0
        print(table(doc["cases"], doc.get("speed", [])))
        if a.fig and doc["cases"]:
            write_figure(a.fig, lambda name: figure(doc["cases"], name))
            print(f"written {a.fig}")
        return 0
    if a.departures is not None:
        out = a.out or os.path.join(HERE, "results", "departures.json")
        check(ap, a.force, [("--out", out)])
        results, text = departures(seeds, fractions, a.departures or list(DEPARTURES), print)
        print()
        print(text)
        doc = dict(benchmark="vs_booksim departures", wall_seconds=time.perf_counter() - t0,
                   cases=results, **meta)
    else:
        binary = os.environ.get("BOOKSIM")
        if not binary:
            print(BUILD_HELP)
            return 0
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            sys.exit(f"BOOKSIM = {binary!r}: not an executable file")
        out = a.out or os.path.join(HERE, "results", "vs_booksim.json")
        fig = a.fig or os.path.join(HERE, "results", "vs_booksim.png")
        check(ap, a.force, [("--out", out), ("--fig", fig)],
              inputs=[("BookSim's binary", binary)])
        if a.jobs > 1 and len(a.cases) > 1:
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(a.jobs, initializer=quiet_worker) as pool:
                results = list(pool.map(_one_case, [binary] * len(a.cases), a.cases,
                                        [seeds] * len(a.cases), [fractions] * len(a.cases)))
        else:
            results = [_one_case(binary, c, seeds, fractions) for c in a.cases]
        speed_rows = [] if a.no_speed else speed(binary, seeds,
                                                 1 if a.quick else a.speed_repeat, print)
        print()
        print(table(results, speed_rows))
        doc = dict(benchmark="vs_booksim", booksim=binary, wall_seconds=time.perf_counter() - t0,
                   cases=results, speed=speed_rows, **meta)
        if results:
            write_figure(fig, lambda name: figure(results, name))
            print(f"written {fig}")
    write_json(out, doc, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
