"""Chakra execution traces (pysim/workload/chakra.py): a graph written by pysim and read back
runs to the same cycle (collectives at the flit level, training iterations with tensor and
pipeline parallelism at the flow level, through the command line); a trace made by hand with
Chakra's own fields runs as its closed form; the schema's version pinned; refusals."""
import json
import os

import pytest

pytest.importorskip("google.protobuf")

from click.testing import CliRunner  # noqa: E402
from pysim.cli import run as cli_run  # noqa: E402

from pysim import load  # noqa: E402
from pysim.cli import main  # noqa: E402
from pysim.config import ConfigError  # noqa: E402
from pysim.sim import simulate  # noqa: E402
from pysim.topology import build as build_topology  # noqa: E402
from pysim.workload import chakra  # noqa: E402
from pysim.workload.collectives import collective_graph  # noqa: E402
from pysim.workload.graph import OpGraph, run_graph  # noqa: E402
from pysim.workload.training import training_graph  # noqa: E402

TP_PP = {"workload.kind": "training", "workload.model": "transformer", "workload.batch": 8,
         "network.model": "flow",
         "workload.model_params": {"layers": 2, "hidden": 256, "heads": 4, "seq": 64},
         "workload.parallel": {"tp": 2, "pp": 2, "micro_batches": 2}}


def same_run(cfg, g, tmp_path):
    topo = build_topology(cfg)
    a = run_graph(cfg, g)
    chakra.write(g, topo, tmp_path / "t", cfg.network.clock_ghz)
    g2 = chakra.read(str(tmp_path / "t"), topo, OpGraph(), cfg)
    b = run_graph(cfg, g2)
    assert len(g2) == len(g)
    assert b.makespan_cycles == a.makespan_cycles
    # every op at the same times (numbered in another order: by rank, not as built)
    assert sorted((o["kind"], o["node"], o["dst"] or "", o["start"], o["finish"]) for o in b.ops) \
        == sorted((o["kind"], o["node"], o["dst"] or "", o["start"], o["finish"]) for o in a.ops)


def test_a_collective_written_and_read_back_runs_to_the_same_cycle(tmp_path):
    cfg = load("ring8", {"workload.kind": "collective", "workload.chunks": 2})
    same_run(cfg, collective_graph(cfg, build_topology(cfg))[0], tmp_path)


@pytest.mark.parametrize("system,over", [
    ("dgx-a100", TP_PP),
    ("dgx1-v100", {"workload.kind": "training", "workload.model": "alexnet",
                   "workload.batch": 64, "workload.chunks": 1, "network.model": "flow"})])
def test_a_training_iteration_written_and_read_back_runs_to_the_same_cycle(system, over,
                                                                           tmp_path):
    cfg = load(system, over)
    same_run(cfg, training_graph(cfg, build_topology(cfg))[0], tmp_path)


def test_export_and_run_a_trace_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sets = [x for k, v in TP_PP.items() for x in ("--set", f"{k}={_toml(v)}")]
    r = CliRunner().invoke(main, ["run", "dgx-a100", *sets, "--export-chakra", "tr",
                                  "--json", "a.json"])
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir("tr")) == [f"pysim.{i}.et" for i in range(8)]
    r = CliRunner().invoke(main, ["run", "dgx-a100", "--set", "workload.kind=training",
                                  "--set", "workload.model=tr", "--set", "network.model=flow",
                                  "--json", "b.json"])
    assert r.exit_code == 0, r.output
    a, b = (json.load(open(f)) for f in ("a.json", "b.json"))
    assert a["makespan_cycles"] == b["makespan_cycles"]
    # the trace's result runs again from another folder: its config names the folder the run
    # found in the current one (it wrote 'tr', found nowhere else)
    assert b["config"]["workload"]["model"] == str(tmp_path / "tr")
    os.mkdir("elsewhere")
    monkeypatch.chdir(tmp_path / "elsewhere")
    r = CliRunner().invoke(main, ["run", str(tmp_path / "b.json"), "--json", "c.json"])
    assert r.exit_code == 0, r.output
    assert json.load(open("c.json"))["makespan_cycles"] == b["makespan_cycles"]


def _toml(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    return json.dumps(v) if isinstance(v, str) else str(v)


def _write_trace(folder, ranks, version=chakra.SCHEMA_VERSION):
    """A trace by hand: ranks = [[(type, {attr: value}, deps, duration_micros)], ...]."""
    S = chakra.schema()
    os.makedirs(folder, exist_ok=True)
    for r, nodes in enumerate(ranks):
        with open(os.path.join(folder, f"w.{r}.et"), "wb") as f:
            msgs = [S["GlobalMetadata"](version=version)]
            for i, (t, attrs, deps, dur) in enumerate(nodes):
                nd = S["Node"](id=i, name=f"n{i}", type=chakra.NODE_TYPES.index(t),
                               duration_micros=dur)
                nd.data_deps.extend(deps)
                for k, v in attrs.items():
                    chakra._attr(nd, k, v)
                msgs.append(nd)
            for m in msgs:
                b = m.SerializeToString()
                f.write(chakra._varint(len(b)) + b)


def test_a_trace_made_with_chakras_own_fields_runs_as_its_closed_form(tmp_path):
    """Rank 0 computes 5 us then sends 1 MB to rank 1, which computes 3 us after it: the
    compute and the message (as it runs alone) add up. Eight ranks' all-reduce nodes are one
    all-reduce, which takes what the collective workload takes."""
    over = {"workload.kind": "training", "workload.algorithm": "ring", "workload.chunks": 1,
            "network.model": "flow"}
    send = {"comm_src": 0, "comm_dst": 1, "comm_size": 1 << 20, "comm_tag": 7}
    _write_trace(tmp_path / "a", [[("COMP_NODE", {}, [], 5), ("COMM_SEND_NODE", send, [0], 0)],
                                  [("COMM_RECV_NODE", send, [], 0), ("COMP_NODE", {}, [0], 3)]])
    got = simulate(load("switch8", {**over, "workload.model": str(tmp_path / "a")}))
    alone = OpGraph()
    alone.send("npu0", "npu1", 1 << 20)
    cfg = load("switch8", over)
    assert got.makespan_cycles == 5000 + run_graph(cfg, alone).makespan_cycles + 3000
    coll = ("COMM_COLL_NODE", {"comm_type": 0, "comm_size": 8 << 20}, [], 0)
    _write_trace(tmp_path / "b", [[coll]] * 8)
    got = simulate(load("switch8", {**over, "workload.model": str(tmp_path / "b")}))
    ar = simulate(load("switch8", {**over, "workload.kind": "collective",
                                   "workload.bytes": 8 << 20}))
    assert got.makespan_cycles == ar.makespan_cycles


def test_the_schema_version_is_pinned_and_bad_traces_are_refused(tmp_path):
    cfg = load("switch8", {"workload.kind": "training", "workload.model": str(tmp_path / "v"),
                           "network.model": "flow"})
    _write_trace(tmp_path / "v", [[("COMP_NODE", {}, [], 1)]], version="0.0.3")
    with pytest.raises(ConfigError, match=r"version '0.0.3'; pysim reads version '0.0.4'"):
        simulate(cfg)
    (tmp_path / "v" / "w.0.et").write_bytes(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
    with pytest.raises(ConfigError, match="not a Chakra trace"):
        simulate(cfg)
    _write_trace(tmp_path / "v", [[("COMP_NODE", {}, [], 1)]] * 3)
    os.remove(tmp_path / "v" / "w.1.et")
    with pytest.raises(ConfigError, match=r"ranks \[1\] have no file"):
        simulate(cfg)
    _write_trace(tmp_path / "v", [[("COMM_SEND_NODE", {"comm_src": 0, "comm_dst": 1,
                                                       "comm_size": 8, "comm_tag": 1}, [], 0)],
                                  [("COMP_NODE", {}, [], 1)]])
    os.remove(tmp_path / "v" / "w.2.et")
    with pytest.raises(ConfigError, match="can never run"):
        simulate(cfg)


def test_a_wait_across_ranks_other_than_a_message_is_refused_at_export(tmp_path):
    cfg = load("switch8")
    g = OpGraph()
    a = g.compute("npu0", 10)
    g.compute("npu1", 10, after=[a])
    with pytest.raises(ConfigError, match="other than through a message"):
        chakra.write(g, build_topology(cfg), tmp_path / "x")


def test_one_replica_built_is_refused_before_the_run_naming_the_key(tmp_path, monkeypatch):
    """workload.parallel.replicas = 'one' has the other replicas' parts of its collectives
    wait on replica 0's ops, which a trace cannot hold: refused before the run (it was
    refused after the whole run, naming two ops and no key), and nothing written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_run, "simulate", lambda *a, **k: pytest.fail("it ran"))
    r = CliRunner().invoke(main, ["run", "dgx-a100", "--set", "workload.kind=training",
                                  "--set", "workload.model=gpt2", "--set", "workload.batch=16",
                                  "--set", "network.model=flow", "--set",
                                  "workload.parallel.replicas=one", "--export-chakra", "tr",
                                  "--json", "r.json"])
    assert r.exit_code == 1 and "--export-chakra: workload.parallel.replicas = 'one' builds " \
        "data-parallel replica 0's passes only" in r.output and "expected replicas = 'all'" \
        in r.output, r.output
    assert not os.path.exists("tr") and not os.path.exists("r.json")


def test_a_trace_refuses_the_training_keys_it_does_not_read(tmp_path):
    """A trace gives each rank's work, messages and collectives: every key a training run of
    a model reads that the trace does not (the model's shape, parallelism, batch,
    iterations, memory plan, the collectives' grouping) is refused, naming it; those it reads
    run."""
    from pysim.schema import KEY_MAP, read_by
    from pysim.workload.training.reads import TRACE_READS
    coll = ("COMM_COLL_NODE", {"comm_type": 0, "comm_size": 1 << 16}, [], 0)
    _write_trace(tmp_path / "t", [[("COMP_NODE", {}, [], 1), coll]] * 8)
    over = {"workload.kind": "training", "workload.model": str(tmp_path / "t"),
            "network.model": "flow"}
    given = {"workload.batch": 64, "workload.iterations": 3, "workload.precision": "fp16",
             "workload.parallel": {"dp": 8}, "workload.model_params": {"layers": 2},
             "workload.memory.policy": "offload", "workload.bucket_mb": 1.0,
             "workload.overlap": False, "workload.group": ["npu0", "npu1"],
             "workload.ring_order": [f"npu{i}" for i in range(8)],
             "workload.chunks_in_flight": 1, "workload.astra_scheduling": "FIFO"}
    unread = read_by("workload.kind", "training") - set(TRACE_READS)
    assert set(given) - {"workload.memory.policy"} <= unread
    for path, v in given.items():
        with pytest.raises(ConfigError, match=rf"{path} = .* is not read with a Chakra trace"):
            simulate(load("switch8", {**over, path: v}))
    for path in ("workload.algorithm", "workload.chunks", "workload.packet_flits"):
        assert path in TRACE_READS and path in KEY_MAP
    assert simulate(load("switch8", {**over, "workload.algorithm": "direct",
                                     "workload.chunks": 2})).makespan_cycles > 0


def test_export_keeps_an_existing_trace_and_the_json_unless_asked(tmp_path, monkeypatch):
    """--export-chakra into a folder holding .et files is refused before the run unless
    --force, which replaces the old trace whole (no stale ranks left); a folder that cannot
    be made is refused before the run, and the --json result is never lost to it."""
    monkeypatch.chdir(tmp_path)
    ring = ["run", "ring8", "--set", "workload.kind=collective", "--set",
            "workload.bytes=4096", "-q"]
    os.mkdir("tr")
    for name in ("pysim.0.et", "pysim.9.et"):
        with open(os.path.join("tr", name), "w") as f:
            f.write("mine")
    r = CliRunner().invoke(main, [*ring, "--export-chakra", "tr"])
    assert r.exit_code == 1 and "--force" in r.output and "tr" in r.output, r.output
    assert open(os.path.join("tr", "pysim.0.et")).read() == "mine"
    r = CliRunner().invoke(main, [*ring, "--export-chakra", "tr", "--force"])
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir("tr")) == [f"pysim.{i}.et" for i in range(8)]
    with open("afile", "w") as f:
        f.write("x")
    r = CliRunner().invoke(main, [*ring, "--export-chakra", os.path.join("afile", "tr"),
                                  "--json", "r.json"])
    assert r.exit_code == 1 and "is not a directory" in r.output, r.output  # (before the run)
    assert not os.path.exists("r.json")


def test_a_bad_node_is_named_with_its_file(tmp_path):
    """A node whose values pysim refuses (a negative message size, a duration past the
    cycle limit) is named with its file and id; two nodes of one id on a rank are refused
    (a dependency on that id would be ambiguous)."""
    cfg = {"workload.kind": "training", "network.model": "flow"}
    send = {"comm_src": 0, "comm_dst": 1, "comm_size": -5, "comm_tag": 1}
    _write_trace(tmp_path / "neg", [[("COMM_SEND_NODE", send, [], 0)],
                                    [("COMM_RECV_NODE", send, [], 0)]])
    _write_trace(tmp_path / "long", [[("COMP_NODE", {}, [], 2 ** 62)]])
    for name, what in (("neg", r"w\.[01]\.et: node 0 \(COMM_(SEND|RECV)_NODE\): bytes = -5"),
                       ("long", r"w\.0\.et: node 0 \(COMP_NODE\): cycles = ")):
        with pytest.raises(ConfigError, match=what):
            simulate(load("dgx-a100", {**cfg, "workload.model": str(tmp_path / name)}))
    S = chakra.schema()
    os.makedirs(tmp_path / "dup")
    with open(tmp_path / "dup" / "w.0.et", "wb") as f:
        for m in [S["GlobalMetadata"](version=chakra.SCHEMA_VERSION)] + [
                S["Node"](id=3, name=f"n{i}", type=chakra.NODE_TYPES.index("COMP_NODE"),
                          duration_micros=5) for i in range(2)]:
            b = m.SerializeToString()
            f.write(chakra._varint(len(b)) + b)
    with pytest.raises(ConfigError, match=r"w\.0\.et: node id 3 is given to 2 nodes"):
        simulate(load("dgx-a100", {**cfg, "workload.model": str(tmp_path / "dup")}))
