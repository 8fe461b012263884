"""How long pysim's guards take (not a test): refusals that must come before anything large is
built, and set-ups that must stay linear in the system's size. The test suite checks what each
of these does (the error and its message, the result); this benchmark times them. Prints the
wall time of each case and writes JSON with provenance.

    python bench/guards.py [--out bench/results/guards.json] [--only NAME]

Cases (each in a fresh process, so that one's memory does not slow the next):
  dense_compile      compile fully_connected of 400 nodes (159,600 channels)
  dense_describe     `pysim topo --json` of fully_connected of 300 nodes
  op_pieces          refuse a 10 MB memory write in 1-byte pieces (workload.mem_piece_bytes)
  op_slices          refuse a roofline op of 10^12 1-cycle slices (workload.slice_cycles)
  big_collective     refuse a direct all-to-all over 1,024 NPUs in 10 chunks
  big_switch         refuse a switch of 16,383 NPUs (the deadlock check's bound)
  million_slices     run a roofline op of 10^6 1-cycle slices (inside the engine)
  random_configs     run or refuse 48 random configurations (tests/test_random_configs.py's)
"""
import argparse
import json
import os
import sys
import tempfile
import time

from outputs import FORCE, check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _graph_cfg(tmp, ops, **workload):
    path = os.path.join(tmp, "ops.toml")
    with open(path, "w") as f:
        f.write(f'[[ops]]\nname = "big"\n{ops}\n')
    return {"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "m", "kind": "mem"}],
                         "links": [{"a": "a", "b": "m"}]},
            "workload": {"kind": "graph", "file": path, **workload}}


def _refused(cfg):
    import pysim
    try:
        pysim.simulate(pysim.from_dict(cfg))
    except pysim.ConfigError as e:
        return str(e)[:120]
    raise AssertionError("expected a refusal")


def case(name):
    """Run one case; returns what it produced (a message, a count)."""
    import pysim
    tmp = tempfile.mkdtemp(prefix="pysim-guards-")
    if name == "dense_compile":
        from pysim.network import compile_network
        net = compile_network(pysim.from_dict({"topology": {"kind": "fully_connected",
                                                            "size": 400}}))
        return f"{len(net.ch_kind):,} engine channels"
    if name == "dense_describe":
        from pysim.cli import main
        path = os.path.join(tmp, "c.toml")
        with open(path, "w") as f:
            f.write('[topology]\nkind = "fully_connected"\nsize = 300\n')
        try:
            main(["topo", path, "--json", os.path.join(tmp, "d.json")])
        except SystemExit as e:
            if e.code:
                raise
        return "described"
    if name == "op_pieces":
        return _refused(_graph_cfg(tmp, 'kind = "mem_write"\nnpu = "a"\nmem = "m"\n'
                                        'bytes = 10000000', mem_piece_bytes=1))
    if name == "op_slices":
        return _refused(_graph_cfg(tmp, 'kind = "compute"\nnode = "a"\nflops = 1e17',
                                   slice_cycles=1))
    if name == "big_collective":
        return _refused({"topology": {"kind": "mesh", "dims": [32, 32]},
                         "workload": {"kind": "collective", "algorithm": "direct",
                                      "collective": "all_to_all", "chunks": 10}})
    if name == "big_switch":
        return _refused({"topology": {"kind": "switch", "size": 16383}})
    if name == "million_slices":
        r = pysim.simulate(pysim.from_dict(_graph_cfg(
            tmp, 'kind = "compute"\nnode = "a"\nflops = 1e11', slice_cycles=1)))
        return f"finished at cycle {r.ops[0]['finish']:,}"
    if name == "random_configs":
        import random
        import warnings
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from test_random_configs import random_config
        slowest = 0.0
        for seed in range(48):
            cfg = random_config(random.Random(seed))
            t = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pysim.simulate(pysim.from_dict(cfg))
            except (pysim.ConfigError, pysim.SimulationError):
                pass
            slowest = max(slowest, time.perf_counter() - t)
        return f"slowest {slowest:.2f} s"
    raise SystemExit(f"unknown case {name!r}")


CASES = ["dense_compile", "dense_describe", "op_pieces", "op_slices", "big_collective",
         "big_switch", "million_slices", "random_configs"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "guards.json"))
    ap.add_argument("--only", choices=CASES)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    if a.child:
        import resource
        t = time.perf_counter()
        what = case(a.child)
        print(json.dumps(dict(case=a.child, wall_seconds=time.perf_counter() - t, what=what,
                              peak_memory_mb=resource.getrusage(
                                  resource.RUSAGE_SELF).ru_maxrss / 1e3)))
        return
    check(ap, a.force, [("--out", a.out)])
    sys.path.insert(0, HERE)
    from provenance import child, provenance, write_rows
    started = provenance()
    rows = []
    for name in [a.only] if a.only else CASES:
        row = child(__file__, "--child", name, cwd=ROOT)
        rows.append(row)
        print(f"{name:>16}: {row['wall_seconds']:7.2f} s  peak {row['peak_memory_mb']:7.1f} MB"
              f"  {row['what']}")
    write_rows(a.out, "guards", started, rows)


if __name__ == "__main__":
    main()
