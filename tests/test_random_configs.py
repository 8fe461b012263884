"""Bad input gets a clear error, never another exception: seeded random configurations, valid
and not (a value somewhere replaced by a wrong type, a sign, a huge or non-finite number, None),
either run or are refused with a ConfigError. The generator is the one that found the defects
named in test_config_cli.py (there in a longer run); here it is a regression net, kept small."""
import datetime
import math
import os
import random

import pytest

from pysim import ConfigError, from_dict, simulate

WEIRD = [0, -1, 0.0, 2 ** 63, 1e300, float("inf"), float("nan"), "x", True, None, [], {},
         [1, "a"],
         # the classes a hostile pass found: integers no float holds, non-finite numbers in
         # lists, names that are not names (unhashable), tiny positive numbers
         10 ** 400, -10 ** 400, [float("inf"), 1.0], [1.0, float("nan")], [10 ** 400, 1],
         [1e308, 1e308], ["a"], {"a": 1}, [["x"]], 1e-300, 5e-324]


def random_config(rng):
    c = {"simulation": {"warmup_cycles": rng.choice([0, 50]), "measure_cycles": 200,
                        "drain_cycles": 400, "seed": rng.randrange(1000)}}
    kind = rng.choice(["mesh", "torus", "ring", "switch", "fully_connected", "graph"])
    topo = {"kind": kind}
    if kind in ("mesh", "torus"):
        topo["dims"] = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
    elif kind != "graph":
        topo["size"] = rng.randint(1, 8)
    else:
        names = [f"n{i}" for i in range(rng.randint(2, 5))]
        topo["nodes"] = [{"name": a, "kind": rng.choice(["npu", "mem", "host", "switch"])}
                         for a in names]
        topo["links"] = [{"a": names[i], "b": names[rng.randrange(i)]}
                         for i in range(1, len(names))]
        if rng.random() < 0.5:
            topo["links"][0].update(count=rng.randint(1, 3), gbps=rng.choice([8.0, 50.0]),
                                    latency_cycles=rng.randint(1, 9))
    if rng.random() < 0.3:
        topo["link_gbps"] = rng.choice([8.0, 16.0, 64.0, 10.7])
    c["topology"] = topo
    c["network"] = {k: rng.randint(0, 3) for k in ("routing_delay", "vc_alloc_delay",
                                                  "st_delay") if rng.random() < 0.3}
    if rng.random() < 0.4:
        c["network"].update(vcs=rng.randint(1, 4), vc_buffer_flits=rng.randint(1, 8))
    if rng.random() < 0.3:
        c["workload"] = {"kind": "collective", "bytes": rng.choice([64, 4096, 65536]),
                         "collective": rng.choice(["all_reduce", "all_gather", "broadcast"]),
                         "algorithm": rng.choice(["ring", "direct", "tree"]),
                         "chunks": rng.randint(1, 4)}
    else:
        c["traffic"] = {"pattern": rng.choice(["uniform", "transpose", "bitcomp", "tornado",
                                               "neighbor", "shuffle"]),
                        "injection_rate": rng.choice([0.0, 0.05, 0.3]),
                        "process": rng.choice(["bernoulli", "onoff"]),
                        "packet_flits": rng.choice([1, 4, [2, 6]])}
    if rng.random() < 0.5:
        section = rng.choice([s for s in c if c[s]])
        c[section][rng.choice(list(c[section]))] = rng.choice(WEIRD)
    if rng.random() < 0.3:
        _deep_weird(rng, c)
    return c


def _deep_weird(rng, c):
    """A weird value one level deeper: a field of a graph's node or link, or of a table of
    defaults ([topology.npu], [topology.nic.npu], ...), where names and numbers are read."""
    topo = c["topology"]
    if topo.get("kind") == "graph" and rng.random() < 0.6:
        entry = rng.choice(topo["nodes"] + topo["links"])
        field = rng.choice(list(entry) + ["gbps", "latency_ns", "count", "injection_gbps"])
        entry[field] = rng.choice(WEIRD)
    else:
        table, fields = rng.choice([("npu", ["tflops", "hbm_gbps", "offload_sram_mb"]),
                                    ("mem", ["gbps", "capacity_gb"]),
                                    ("nic", ["npu"])])
        value = rng.choice(WEIRD)
        topo[table] = {rng.choice(fields): value if table != "nic" else
                       {"injection_gbps": value}}


def random_op_graph(rng, tmp_path):
    """An op-graph config whose ops may expand hugely (memory pieces of a byte, roofline
    slices of a cycle, collectives of many chunks), with weird values here and there: it
    must run quickly or be refused before building."""
    names = ["a", "b", "m"]
    cfg = {"simulation": {"seed": rng.randrange(100)},
           "topology": {"kind": "graph",
                        "nodes": [{"name": "a"}, {"name": "b"}, {"name": "m", "kind": "mem"}],
                        "links": [{"a": "a", "b": "b"}, {"a": "b", "b": "m"}]},
           "workload": {"kind": "graph", "file": str(tmp_path / "ops.toml"),
                        "mem_piece_bytes": rng.choice([1, 4096, 65536]),
                        "slice_cycles": rng.choice([1, 1000])}}
    ops = []
    for i in range(rng.randint(1, 4)):
        kind = rng.choice(["mem_write", "mem_read", "compute", "send", "delay"])
        size = rng.choice([64, 4096, 10 ** 6] if kind in ("send", "delay") else
                          [64, 4096, 10 ** 7])     # (a gigabyte really sent takes seconds)
        op = {"kind": kind, "name": f"o{i}"}
        if kind in ("mem_write", "mem_read"):
            op.update(npu=rng.choice(["a", "b"]), mem="m", bytes=size)
        elif kind == "compute":
            op.update(node=rng.choice(["a", "b"]),
                      **({"flops": float(size) * 1e6} if rng.random() < 0.5 else
                         {"cycles": size}))
        elif kind == "send":
            op.update(src="a", dst="b", bytes=size)
        else:
            op.update(cycles=size)
        if rng.random() < 0.3:
            op[rng.choice(list(op))] = rng.choice(WEIRD + names)
        ops.append(op)
    return cfg, ops


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(v, "nan" if v != v else repr(v))
    if isinstance(v, (int, str)):
        return repr(v).replace("'", '"') if isinstance(v, str) else str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    return '""'          # (None: TOML has none; an empty string is as wrong)


@pytest.mark.parametrize("seed", range(60))
def test_a_random_config_runs_or_is_refused_clearly(seed):
    cfg = random_config(random.Random(seed))
    try:
        r = simulate(from_dict(cfg)).to_dict()
    except ConfigError as e:
        msg = str(e)
        assert msg and "Traceback" not in msg and "np.int64" not in msg
        return
    for k in ("avg_packet_latency", "collective_cycles"):
        if k in r and r.get("packets_delivered", 1):
            assert math.isfinite(r[k]) and r[k] > 0


@pytest.mark.parametrize("seed", range(40))
def test_a_random_op_graph_runs_or_is_refused_before_building(seed, tmp_path):
    """(bench/guards.py times random configurations.)"""
    import warnings
    rng = random.Random(1000 + seed)
    cfg, ops = random_op_graph(rng, tmp_path)
    (tmp_path / "ops.toml").write_text("".join(
        "[[ops]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in op.items())
        for op in ops))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            simulate(from_dict(cfg))
    except ConfigError as e:
        assert str(e) and "Traceback" not in str(e)


@pytest.mark.parametrize("seed", range(12))
def test_random_configs_with_an_output_in_a_read_only_place(seed, place_for_outputs):
    """Whatever the config, an output that cannot be written is refused before the run (or
    the config is refused first): exit 1 with a message, never a traceback or a lost run."""
    from test_reliability import invoke_unprivileged
    rng = random.Random(2000 + seed)
    cfg = random_config(rng)
    text = ""
    for section, body in cfg.items():
        scalars = {k: v for k, v in body.items() if not isinstance(v, list) or
                   not v or not isinstance(v[0], dict)}
        text += f"[{section}]\n" + "".join(f"{k} = {toml_value(v)}\n"
                                           for k, v in scalars.items())
        for k, v in body.items():
            if k not in scalars:
                text += "".join(f"[[{section}.{k}]]\n" + "".join(
                    f"{f} = {toml_value(x)}\n" for f, x in e.items()) for e in v)
    with open(os.path.join(place_for_outputs, f"c{seed}.toml"), "w") as f:
        f.write(text)
    cmd, opt = rng.choice([("run", "--json"), ("run", "--trace"), ("topo", "--json"),
                           ("topo", "--draw")])
    out = "ro/x.png" if opt == "--draw" else "ro/x.json"
    code, output = invoke_unprivileged([cmd, f"c{seed}.toml", opt, out], place_for_outputs)
    assert code == 1, output
    assert "Traceback" not in output
    assert "cannot write ro/x" in output or "configuration error" in output, output
    assert "result written" not in output


@pytest.fixture
def place_for_outputs():
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="pysim-rand-")
    os.chmod(d, 0o755)
    os.mkdir(os.path.join(d, "ro"))
    os.chmod(os.path.join(d, "ro"), 0o555)
    yield d
    os.chmod(os.path.join(d, "ro"), 0o755)
    shutil.rmtree(d, ignore_errors=True)


def _every_key_every_weird_value():
    from pysim.schema import KEYS
    for key in KEYS:
        if key.path in ("workload.file", "topology.file"):
            continue                    # (paths: test_reliability covers what they name)
        for i, v in enumerate(WEIRD):
            yield pytest.param(key.path, v, id=f"{key.path}-{i}")


# Every key given every weird value is a few thousand cases: each run of the suite takes
# FUZZ_BUDGET of them, drawn with FUZZ_SEED (by default the UTC date's ordinal, so the sample
# turns over from day to day; PYSIM_FUZZ_SEED repeats a day's, PYSIM_FUZZ_BUDGET=0 takes all).
# The slow tier runs them all.
ALL_CASES = list(_every_key_every_weird_value())
FUZZ_SEED = int(os.environ.get("PYSIM_FUZZ_SEED",
                               datetime.datetime.now(datetime.timezone.utc).date().toordinal()))
FUZZ_BUDGET = int(os.environ.get("PYSIM_FUZZ_BUDGET", 200)) or len(ALL_CASES)
SAMPLE = random.Random(FUZZ_SEED).sample(ALL_CASES, min(FUZZ_BUDGET, len(ALL_CASES)))


@pytest.mark.parametrize("path,value", SAMPLE)
def test_every_key_given_every_weird_value_runs_or_is_refused_clearly(path, value):
    """Systematically, not by chance: each declared key set alone to each weird value, on a
    small mesh (and a collective for workload keys), with a short run; a sample of the cases
    in each run of the suite (see FUZZ_SEED), every case in the slow tier."""
    _one_key_one_value(path, value)


@pytest.mark.slow
@pytest.mark.parametrize("path,value", ALL_CASES)
def test_every_key_given_every_weird_value_all_cases(path, value):
    _one_key_one_value(path, value)


def _one_key_one_value(path, value):
    import warnings
    section, key = path.split(".", 1)      # (a sub-table key: "memory.policy", flat)
    base = {"simulation": {"warmup_cycles": 0, "measure_cycles": 100, "drain_cycles": 300},
            "topology": {"kind": "mesh", "dims": [2, 2]}}
    if section == "workload":
        base["workload"] = {"kind": "collective", "bytes": 256}
        base.pop("simulation")
    base.setdefault(section, {})[key] = value
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            simulate(from_dict(base))
    except ConfigError as e:
        assert str(e) and len(str(e)) < 2000
