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
        c["simulation"] = {"seed": c["simulation"]["seed"]}   # (the window is synthetic's)
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
        table, fields = rng.choice([("npu", ["tflops", "hbm_gbps", "offload_sram_mb",
                                             "preset"]),
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
    """The key on the smallest run that reads it: synthetic traffic on a mesh, a collective,
    a training run (a tiny transformer at the flow level; with a memory node and a host for
    workload.memory), or a job stream of two jobs."""
    import warnings
    from pysim import jobs as pj
    from pysim.schema import read_by
    section, key = path.split(".", 1)      # (a sub-table key: "memory.policy", flat)
    base = {"simulation": {"warmup_cycles": 0, "measure_cycles": 100, "drain_cycles": 300},
            "topology": {"kind": "mesh", "dims": [2, 2]}}
    if section == "workload" and path in read_by("workload.kind", "collective"):
        base["workload"] = {"kind": "collective", "bytes": 256}
        base.pop("simulation")
    elif section == "workload" and path in read_by("workload.kind", "training"):
        base = {"topology": {"kind": "graph", "nodes": [
                    {"name": "g0"}, {"name": "g1"}, {"name": "m0", "kind": "mem"},
                    {"name": "h0", "kind": "host"}],
                    "links": [{"a": "g0", "b": "g1"}, {"a": "g0", "b": "m0"},
                              {"a": "g1", "b": "m0"}, {"a": "m0", "b": "h0"}]},
                "network": {"model": "flow"},
                "workload": {"kind": "training", "model": "transformer", "batch": 4,
                             "iterations": 1, "model_params": TINY["transformer"]}}
        if key.startswith("memory.") and key != "memory.policy":
            base["workload"]["memory.policy"] = "offload+compression" if "compress" in key \
                else "offload"
    base.setdefault(section, {})[key] = value
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = from_dict(base)
            if section == "jobs":
                over = {"jobs.count": 2, "jobs.max_npus": 2, "jobs.min_iterations": 2,
                        "jobs.max_iterations": 3, "jobs.sim_iterations": 2,
                        "jobs.corun_iterations": 2, "jobs.batch_per_npu": 1}
                over = {k: v for k, v in over.items() if k != path}
                pj.run_stream(pj.load_server("dgx1-v100", {"network.model": "flow",
                                                           path: value, **over}), workers=1)
            else:
                simulate(cfg)
    except ConfigError as e:
        assert str(e) and len(str(e)) < 2000


# ------------------------------------------------ training, memory plans, model files, jobs
# The same net over the newer surfaces: seeded random training runs (a small model, a few
# NPUs, the flow level) with parallel plans, precisions and memory plans, a weird value
# somewhere now and then; random ASTRA-sim and ONNX files; random job streams. Each either
# runs or is refused with a ConfigError (a ModelError is one). A fixed number of seeds per
# run of the suite (the budget), the same every run.
TRAINING_BUDGET = 24
MODEL_FILE_BUDGET = 24
JOBS_BUDGET = 8

TINY = {"transformer": {"layers": 2, "hidden": 64, "heads": 4, "seq": 16, "vocab": 128},
        "gpt_moe": {"layers": 2, "hidden": 64, "heads": 4, "seq": 16, "vocab": 128,
                    "experts": 4},
        "dlrm": {"tables": [1000, 5000, 200], "dim": 16, "bottom": [32, 16], "top": [32, 1]},
        "resnet50": {"image": 32}}
MEMORY = {"offload": {"prefetch_layers": [0, 1, 3], "layers": ["all", "conv", "dynamic"]},
          "lms": {"swapout_threshold": [-1, 0, 4], "swapin_ahead": [-1, 2],
                  "min_bytes": [0, 4096]},
          "recompute": {"segments": [0, 1, 2, 3]},
          "karma": {"min_bytes": [0, 4096], "host_update": [True, False]},
          "none": {}, "offload+compression": {"compress_gbps": [50.0, 1e-3]}}


def random_training(rng):
    model = rng.choice(sorted(TINY))
    n = rng.choice([2, 4])
    with_memory = {"kind": "graph", "nodes": [{"name": f"g{i}"} for i in range(n)] +
                   [{"name": "m0", "kind": "mem"}, {"name": "h0", "kind": "host"}],
                   "links": [{"a": f"g{i}", "b": f"g{(i + 1) % n}"} for i in range(n)] +
                   [{"a": f"g{i}", "b": "m0"} for i in range(n)] + [{"a": "m0", "b": "h0"}]}
    topo = rng.choice([{"kind": "ring", "size": n}, {"kind": "fully_connected", "size": n},
                       with_memory])
    w = {"kind": "training", "model": model, "model_params": dict(TINY[model]),
         "batch": rng.choice([4, 8, 16]), "iterations": 1}
    par = {}
    for field, values in (("tp", [1, 2]), ("pp", [1, 2]), ("micro_batches", [1, 2, 4]),
                          ("zero", [0, 1, 3]), ("sp", [True, False]),
                          ("schedule", ["gpipe", "1f1b"])):
        if rng.random() < 0.3:
            par[field] = rng.choice(values)
    if par:
        w["parallel"] = par
    for key, values in (("precision", ["fp32", "fp16", "mixed", "bf16", "amp"]),
                        ("optimizer", ["sgd", "adam"]), ("bucket_mb", [0.5, 25.0]),
                        ("overlap", [True, False]), ("compute", ["roofline", "kernels"]),
                        ("attention", ["unfused", "flash"]), ("algorithm", ["ring", "tree"])):
        if rng.random() < 0.25:
            w[key] = rng.choice(values)
    if rng.random() < 0.5:
        topo = with_memory                   # (a memory plan needs somewhere to put bytes)
        policy = rng.choice(sorted(MEMORY))
        mem = {"policy": policy}
        for field, values in MEMORY[policy].items():
            if rng.random() < 0.5:
                mem[field] = rng.choice(values)
        w["memory"] = mem
    if rng.random() < 0.2:
        topo["npu"] = {"hbm_gb": rng.choice([0.001, 0.05, 16.0])}
    if w.get("compute") == "kernels":
        topo["npu"] = {"preset": "a100"}
    cfg = {"topology": topo, "network": {"model": "flow"}, "workload": w}
    if rng.random() < 0.4:                   # a weird value somewhere
        where = rng.choice([w, w.get("parallel") or w, w.get("memory") or w,
                            w["model_params"] or w])
        where[rng.choice(sorted(where))] = rng.choice(WEIRD)
    return cfg


@pytest.mark.parametrize("seed", range(TRAINING_BUDGET))
def test_a_random_training_run_runs_or_is_refused_clearly(seed):
    import warnings
    cfg = random_training(random.Random(3000 + seed))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = simulate(from_dict(cfg))
    except ConfigError as e:
        assert str(e) and "Traceback" not in str(e) and len(str(e)) < 2000
        return
    t = r.training
    assert t["iteration_cycles"] > 0
    # the breakdown adds up: compute, exposed communication, memory stalls and the rest
    assert t["compute_cycles"] + t["exposed_comm_cycles"] + t["memory_stall_cycles"] + \
        t["other_cycles"] == t["iteration_cycles"]


ASTRA_WORDS = ["DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_TRANSFORMER", "1", "2", "-1",
               "0", "100", "NONE", "ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL",
               "1e400", "nan", "x", "\u0661\u0660", "1_000", "99999999999999999999", "\t",
               "model_parallel_NPU_group:", "layer"]


def random_astra(rng):
    lines = [rng.choice(ASTRA_WORDS[:4]) + rng.choice(["", " model_parallel_NPU_group: 2"]),
             str(rng.choice([1, 2, 0, -1, 3]))]
    for i in range(rng.randint(0, 3)):
        row = [f"l{i}", "-1", "100", "NONE", "0", "120", "NONE", "0", "140", "ALLREDUCE",
               "4096", "10"]
        for _ in range(rng.randint(0, 2)):
            row[rng.randrange(len(row))] = rng.choice(ASTRA_WORDS)
        if rng.random() < 0.2:
            row = row[:rng.randrange(len(row))]
        lines.append(rng.choice([" ", "\t"]).join(row))
    return "\n".join(lines) + rng.choice(["\n", "", "\n\n\x00"])


def random_onnx(rng, path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    ops = ["Relu", "MatMul", "Add", "Gemm", "Conv", "Softmax", "Reshape", "NoSuchOp",
           "LayerNormalization", "Transpose"]
    width = rng.choice([4, 16])
    shape = rng.choice([[1, width], ["N", width], [0, width], ["seq", width], [1, -3]])
    inits, nodes, x = [], [], "x"
    for i in range(rng.randint(0, 4)):
        op = rng.choice(ops)
        ins = [x]
        if op in ("MatMul", "Gemm", "Add", "Conv"):
            dims = rng.choice([[width, width], [width], [width, width, 3, 3], [7]])
            inits.append(TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=dims))
            ins.append(f"w{i}")
        if op == "Reshape":
            inits.append(helper.make_tensor(f"s{i}", TensorProto.INT64, [2],
                                            [1, rng.choice([-1, width, 10 ** 12])]))
            ins.append(f"s{i}")
        nodes.append(helper.make_node(op, ins, [f"t{i}"], name=f"n{i}"))
        x = f"t{i}"
    graph = helper.make_graph(nodes, "r", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                                                        None)], inits)
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid(
        "", rng.choice([13, 17, 999]))]).SerializeToString()
    if rng.random() < 0.2:                   # damaged
        data = data[:rng.randrange(max(1, len(data)))]
    path.write_bytes(data)


@pytest.mark.parametrize("seed", range(MODEL_FILE_BUDGET))
def test_a_random_model_file_is_read_or_refused_clearly(seed, tmp_path):
    from pysim import models
    rng = random.Random(4000 + seed)
    if seed % 2:
        path = tmp_path / "w.txt"
        path.write_text(random_astra(rng), encoding="utf-8")
    else:
        path = tmp_path / "m.onnx"
        random_onnx(rng, path)
    params = rng.choice([{}, {"seq": rng.choice([8, 0, 2 ** 63, "x"])}])
    try:
        m = models.load(str(path), **params)
    except ConfigError as e:                 # (models.ModelError is one)
        assert str(e) and "Traceback" not in str(e)
        return
    assert m.layers and all(math.isfinite(l.fwd_flops) and l.fwd_flops >= 0
                            for l in m.layers)


def random_jobs(rng):
    jobs = {"count": rng.choice([2, 4]), "min_npus": 2, "max_npus": rng.choice([2, 4]),
            "models": rng.sample(["alexnet", "resnet50", "googlenet"], 2),
            "min_iterations": 2, "max_iterations": rng.choice([3, 5]),
            "sim_iterations": 2, "corun_iterations": 2,
            "policies": rng.sample(["baseline", "topo_aware", "greedy", "preserve"], 2),
            "batch_per_npu": rng.choice([1, 8])}
    for key, values in (("arrivals", ["batch", "uniform", "poisson"]),
                        ("window_s", [0.001, 1.0]), ("patterns", [["ring"], ["clique"]]),
                        ("sensitivity", ["derived", "list"]), ("corun", ["together",
                                                                          "alone"])):
        if rng.random() < 0.3:
            jobs[key] = rng.choice(values)
    if rng.random() < 0.5:
        jobs[rng.choice(sorted(jobs))] = rng.choice(WEIRD)
    return jobs


@pytest.mark.parametrize("seed", range(JOBS_BUDGET))
def test_a_random_job_stream_runs_or_is_refused_clearly(seed):
    import warnings
    from pysim import jobs as pj
    jobs = random_jobs(random.Random(5000 + seed))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pj.load_server("dgx1-v100", {"network.model": "flow",
                                                   **{f"jobs.{k}": v for k, v in jobs.items()}})
            r = pj.run_stream(server, workers=1)
    except ConfigError as e:
        assert str(e) and "Traceback" not in str(e) and len(str(e)) < 2000
        return
    d = r.to_dict()
    assert d["policies"]
