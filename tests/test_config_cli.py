"""Bad input gets a clear error naming the key, the value and what was expected; the CLI
runs real simulations and never overwrites a file without being asked."""
import copy
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import ROOT, TOPOLOGIES, interruptible, make_cfg
from pysim import config
from pysim.cli import main
from pysim.config import from_dict, load
from pysim.errors import ConfigError
from pysim.network import compile_network
from pysim.sim import DeadlockError, run_packets, simulate
from pysim.workload import OpGraph, run_graph


@pytest.mark.parametrize("raw,fragments", [
    ({"traffic": {"injection_rat": 0.1}},
     ["unknown key traffic.injection_rat", "did you mean 'injection_rate'"]),
    ({"trafic": {}}, ["unknown section [trafic]", "did you mean 'traffic'"]),
    ({"network": {"vcs": "two"}}, ["network.vcs = 'two'", "expected an integer"]),
    ({"network": {"vcs": 2.5}}, ["network.vcs = 2.5", "expected an integer"]),
    ({"network": {"vcs": 0}}, ["network.vcs = 0", "expected an integer in 1 .. 64"]),
    ({"network": {"vcs": 65}}, ["network.vcs = 65", "expected an integer in 1 .. 64"]),
    ({"traffic": {"packet_flits": [4, 2 ** 30]}},
     ["traffic.packet_flits = [4, 1073741824]", "1 .. 1073741823"]),
    ({"workload": {"packet_flits": 0}}, ["workload.packet_flits = 0", "1 .. 1073741823"]),
    ({"traffic": {"injection_rate": -0.1}}, ["traffic.injection_rate = -0.1", ">= 0"]),
    ({"traffic": {"injection_rate": True}}, ["traffic.injection_rate = True", "a number"]),
    ({"topology": {"kind": "hypercube"}}, ["topology.kind = 'hypercube'", "known: cluster, fully_connected, graph, mesh, ring, switch, torus"]),
    ({"traffic": {"pattern": "unifrom"}}, ["traffic.pattern = 'unifrom'", "did you mean 'uniform'"]),
    ({"topology": {"dims": []}}, ["topology.dims = []", "non-empty list"]),
    ({"traffic": {"packet_flits": [4, 8], "packet_weights": [1.0]}},
     ["traffic.packet_weights", "expected 2 weights"]),
    ({"traffic": {"hotspot_fraction": 1.5}}, ["traffic.hotspot_fraction = 1.5", "[0, 1]"]),
    # None (from the Python API or JSON) for a key with a default, and integers past what the
    # engine's 64-bit cycle stamps hold: refused at the key
    ({"simulation": {"drain_cycles": None}},
     ["simulation.drain_cycles = None", "expected an integer", "for its default, 50000"]),
    ({"topology": {"dims": None}}, ["topology.dims = None", "a list of integers"]),
    ({"simulation": {"measure_cycles": 2 ** 63}},
     ["simulation.measure_cycles = 9223372036854775808", "at most 1,000,000,000,000,000"]),
    ({"topology": {"size": 2 ** 63}}, ["topology.size = 9223372036854775808", "at most"]),
    ({"simulation": {"seed": 2 ** 64}}, ["simulation.seed = 18446744073709551616",
                                         "at most 18,446,744,073,709,551,615"]),
    ({"network": {"sw_alloc_delay": 10 ** 9}},
     ["network.sw_alloc_delay = 1000000000", "1 .. 1,000,000"]),
    # the per-kind tables were not checked at all: a typo was ignored, a string or a zero
    # failed inside the collective's arithmetic
    ({"topology": {"npu": {"tflop": 50.0}}},
     ["topology.npu.tflop: unknown field", "did you mean 'tflops'"]),
    ({"topology": {"npu": {"hbm_gbps": 0.0}}},
     ["topology.npu.hbm_gbps = 0.0", "a finite number > 0"]),
    ({"topology": {"mem": {"gbps": "fast"}}}, ["topology.mem.gbps = 'fast'"]),
    ({"topology": {"host": {"tflops": float("inf")}}}, ["topology.host.tflops = inf"]),
    # [topology.nic] is checked by the same code, one table per node kind
    ({"topology": {"nic": {"switch": {"injection_gbps": 5.0}}}},
     ["topology.nic.switch: unknown node kind 'switch'", "expected one of npu, mem, host"]),
    ({"topology": {"nic": {"mem": 5.0}}}, ["topology.nic.mem = 5.0: expected a table"]),
    ({"topology": {"nic": {"npu": {"injection_gpbs": 5.0}}}},
     ["topology.nic.npu.injection_gpbs: unknown field", "did you mean 'injection_gbps'"]),
    ({"topology": {"nic": {"npu": {"ejection_gbps": -1.0}}}},
     ["topology.nic.npu.ejection_gbps = -1.0: expected a finite number > 0"]),
    # a release typed as a number (--set workload.nccl_tuning=2.20 reads 2.2): the name quoted
    ({"workload": {"nccl_tuning": 2.2}},
     ["workload.nccl_tuning = 2.2: expected a string", "\"2.20\" in quotes",
      "--set 'workload.nccl_tuning=\"2.20\"'"]),
])
def test_bad_values_name_key_value_and_expectation(raw, fragments):
    with pytest.raises(ConfigError) as e:
        from_dict(raw)
    for f in fragments:
        assert f in str(e.value)


@pytest.mark.parametrize("raw,fragments", [
    ({"topology": {"kind": "ring", "dims": [4, 4]}},
     ["topology.dims is not used by topology.kind = 'ring'"]),
    ({"topology": {"kind": "torus", "dims": [6, 6]}, "network": {"vcs": 1}},
     ["network.vcs = 1", "needs 2 VC classes", "cycle", "n0_0->n1_0", "network.vcs >= 2"]),
    ({"traffic": {"injection_rate": 1.5}}, ["traffic.injection_rate = 1.5", "injection bandwidth"]),
    ({"traffic": {"pattern": "bitrev"}, "topology": {"kind": "mesh", "dims": [3, 3]}},
     ["'bitrev'", "power-of-two"]),
    ({"traffic": {"pattern": "transpose"}, "topology": {"kind": "mesh", "dims": [4, 2]}},
     ["'transpose'", "square", "got dims [4, 2]"]),
    ({"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "m", "kind": "mem"}],
                   "links": [{"a": "a", "b": "m"}]}, "workload": {"kind": "collective"}},
     ["workload.group = ['a']", "at least 2 participants"]),
    ({"topology": {"kind": "switch", "size": 4}, "workload": {"kind": "collective",
                                                            "group": []}},
     ["workload.group = []", "at least 2 participants"]),
    ({"topology": {"kind": "graph", "nodes": [{"name": "a", "capacity_gb": 4.0}, {"name": "b"}],
                   "links": [{"a": "a", "b": "b"}]}},
     ["topology.nodes[0]: capacity_gb: only for memory nodes", "this node's kind is 'npu'"]),
    ({"traffic": {"pattern": "hotspot", "hotspot_nodes": [99]}}, ["hotspot_nodes", "99"]),
    ({"traffic": {"hotspot_nodes": [1]}}, ["only used by traffic.pattern = 'hotspot'"]),
    ({"traffic": {"process": "onoff", "injection_rate": 0.9, "packet_flits": 1}},
     ["on/off bursts", "0.9"]),
    # sizes: found by fuzzing (an IndexError, and a build that ran for hours)
    ({"topology": {"kind": "torus", "dims": [1]}}, ["topology.dims = [1]", "at least 2"]),
    ({"topology": {"kind": "mesh", "dims": [1, 1]}}, ["topology.dims = [1, 1]", "1 node"]),
    ({"topology": {"kind": "mesh", "dims": [1024, 1024]}},
     ["topology.dims = [1024, 1024]", "1,048,576 nodes", "at most 262,144"]),
    ({"topology": {"kind": "switch", "size": 300000}},
     ["topology.size = 300000", "300,001 nodes", "at most 262,144"]),
    ({"topology": {"kind": "fully_connected", "size": 3000}},
     ["topology.size = 3000", "8,997,000 channels", "at most 4,000,000"]),
    ({"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"}],
                   "links": [{"a": "a", "b": "b", "count": 10 ** 12}]}},
     ["topology.links", "2,000,000,000,000 channels"]),
    # links, NICs and the watchdog (fuzzing: a NIC of 2^63 GB/s built lanes for ever, a link
    # latency of 2^63 ns overflowed, a stage delay past the watchdog reported deadlock)
    ({"network": {"injection_gbps": 9.2e18}},
     ["NIC of n0_0 (injection)", "2.88e+17 flits per cycle", "at most 1,024",
      "network.injection_gbps = 9.2e+18"]),
    ({"topology": {"link_gbps": 40000.0}},
     ["link n0_0->n1_0", "1,250 flits per cycle", "topology.link_gbps = 40000"]),
    # a hostile value named by its key, its flit count short (not 300 digits)
    ({"topology": {"link_gbps": 1e300}},
     ["link n0_0->n1_0: 1e+300 GB/s is 3.13e+298 flits per cycle", "at most 1,024",
      "(topology.link_gbps = 1e+300: raise network.flit_bytes"]),
    ({"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"}],
                   "links": [{"a": "a", "b": "b", "gbps": 1e300}]}},
     ["link a->b", "(topology.links[0].gbps = 1e+300: raise"]),
    # the key that set the link is named, not a generic wording
    ({"topology": {"kind": "mesh", "dims": [4, 4], "dim_link_gbps": [1.0, 1e300]}},
     ["link n0_0->n0_1", "(topology.dim_link_gbps[1] = 1e+300: raise"]),
    ({"topology": {"kind": "cluster", "node": "dgx-a100", "node_count": 2,
                   "fabric_gbps": 1e9}}, ["(topology.fabric_gbps = 1e+09: raise"]),
    ({"topology": {"kind": "cluster", "node": "dgx-a100", "node_count": 2,
                   "nvlink_gbps": 1e9}}, ["link gpu0->nvswitch0", "(topology.nvlink_gbps = 1e+09"]),
    ({"topology": {"kind": "cluster", "node": "dgx-a100", "node_count": 2,
                   "fabric_latency_ns": 1e12}},
     ["latency 1,000,000,000,000 cycles", "(topology.fabric_latency_ns = 1e+12)"]),
    ({"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"}],
                   "links": [{"a": "a", "b": "b", "latency_cycles": 10 ** 7}]}},
     ["link a->b: latency 10,000,000 cycles", "(topology.links[0].latency_cycles = 1e+07)"]),
    ({"topology": {"link_latency_ns": 1e300}},
     ["link n0_0->n1_0: latency 1e+300 cycles", "(topology.link_latency_ns = 1e+300)"]),
    ({"topology": {"link_latency_ns": 9.2e18}},
     ["link n0_0->n1_0", "latency 9,200,000,000,000,000,000 cycles", "at most 1,000,000"]),
    ({"network": {"nic_latency_ns": 2e6}}, ["network.nic_latency_ns = 2e+06", "2,000,000 cycles"]),
    # bandwidths too small to simulate: the key that set them, named
    ({"topology": {"link_gbps": 1e-300}},
     ["GB/s takes 3.2e+301 cycles a flit of 32 bytes", "at most 4,194,304",
      "(topology.link_gbps = 1e-300)"]),
    ({"topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"}],
                   "links": [{"a": "a", "b": "b", "gbps": 1e-6}]}},
     ["1e-06 GB/s takes 33,554,432 cycles a flit", "(topology.links[0].gbps = 1e-06)"]),
    ({"network": {"injection_gbps": 1e-300}},
     ["NIC of n0_0 (injection): 1e-300 GB/s takes", "(network.injection_gbps = 1e-300)"]),
    # latencies past any float once in cycles: the key that set them and the clock, named
    ({"network": {"clock_ghz": 1e10}, "topology": {"link_latency_ns": 1e300}},
     ["link n0_0->n1_0: latency past any float (in cycles); expected at most 1,000,000",
      "(topology.link_latency_ns = 1e+300 at network.clock_ghz = 1e+10)"]),
    ({"network": {"clock_ghz": 1e10},
      "topology": {"kind": "graph", "nodes": [{"name": "a"}, {"name": "b"}],
                   "links": [{"a": "a", "b": "b", "latency_ns": 1e300}]}},
     ["link a->b: latency past any float", "(topology.links[0].latency_ns = 1e+300 at "
                                           "network.clock_ghz = 1e+10)"]),
    ({"network": {"clock_ghz": 1e10, "nic_latency_ns": 1e300}},
     ["NIC of n0_0 (injection): latency past any float",
      "(network.nic_latency_ns = 1e+300 at network.clock_ghz = 1e+10)"]),
    ({"network": {"clock_ghz": 1e300}, "topology": {"link_latency_ns": 20.0}},
     ["latency 2e+301 cycles", "(topology.link_latency_ns = 20 at network.clock_ghz = 1e+300)"]),
    ({"network": {"clock_ghz": 1e10},
      "topology": {"kind": "cluster", "node": "dgx-a100", "node_count": 2,
                   "nvlink_latency_ns": 1e300}},
     ["the NVLinks (GPU-NVSwitch): latency past any float",
      "(topology.nvlink_latency_ns = 1e+300 at network.clock_ghz = 1e+10)"]),
    ({"network": {"clock_ghz": 1e10},
      "topology": {"kind": "cluster", "node": "dgx-a100", "node_count": 2}},
     ["the NVLinks (GPU-NVSwitch): latency 1,000,000,000,000 cycles",
      "(topology.nvlink_latency_ns, dgx-a100's 100 ns, at network.clock_ghz = 1e+10)"]),
    # a collective of 10^5 chunks built ops for minutes and gigabytes
    ({"topology": {"kind": "ring", "size": 8}, "workload": {"kind": "collective",
                                                          "chunks": 10 ** 8}},
     ["workload.chunks = 100000000", "8 participants", "10,000,000 ops"]),
    ({"network": {"vc_buffer_flits": 10 ** 9}},     # (5 TiB of buffers: refused, not a MemoryError)
     ["network.vc_buffer_flits = 1000000000", "network.vcs = 2", "352 channels",
      "5,245.2 GiB of buffers", "at most 4 GiB"]),
])
def test_bad_combinations_are_refused_before_running(raw, fragments):
    with pytest.raises(ConfigError) as e:
        simulate(from_dict(raw))
    for f in fragments:
        assert f in str(e.value)


@pytest.mark.parametrize("mem,key", [({"latency_ns": 1e20}, "topology.mem.latency_ns = 1e+20"),
                                     ({"latency_ns": 1e300}, "topology.mem.latency_ns = 1e+300")])
def test_a_memory_latency_past_the_limit_is_refused_naming_its_key(tmp_path, mem, key):
    """A memory node's latency in cycles past 10^15 (an int64 overflowed) is refused naming
    the key, not an OverflowError."""
    (tmp_path / "ops.toml").write_text('[[ops]]\nkind = "mem_write"\nnpu = "a"\nmem = "m"\n'
                                       'bytes = 4096\n')
    cfg = from_dict({"topology": {"kind": "graph", "mem": mem,
                                  "nodes": [{"name": "a"}, {"name": "m", "kind": "mem"}],
                                  "links": [{"a": "a", "b": "m"}]},
                     "workload": {"kind": "graph", "file": str(tmp_path / "ops.toml")}})
    with pytest.raises(ConfigError, match=rf"memory node m: latency .* cycles; expected at "
                                          rf"most 1,000,000,000,000,000 \({re.escape(key)}\)"):
        simulate(cfg)


def test_files_and_overrides(tmp_path):
    with pytest.raises(ConfigError, match="config file: no such file"):
        load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[network\nvcs = 2")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(bad)
    # found by trying: a binary file and a directory named as the topology file were a
    # UnicodeDecodeError and an IsADirectoryError
    bad.write_bytes(b"\x7fELF\x02\x01\x01\x00\xd0\xd0\xff")
    with pytest.raises(ConfigError, match="not valid TOML \\(not UTF-8 text\\)"):
        load(bad)
    bad.write_text(f"[topology]\nfile = {str(tmp_path)!r}\n")
    with pytest.raises(ConfigError, match="is a directory, not a TOML file"):
        load(bad)
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        config.parse_override("traffic.injection_rate")
    assert config.parse_override("traffic.injection_rate=0.2") == ("traffic.injection_rate", 0.2)
    assert config.parse_override("traffic.pattern=transpose") == ("traffic.pattern", "transpose")
    cfg = load(os.path.join(TOPOLOGIES, "mesh8x8.toml"), {"traffic.injection_rate": 0.3})
    assert cfg.traffic.injection_rate == 0.3
    assert cfg.topology.dims == [8, 8]


def test_a_field_inside_a_table_key_can_be_overridden_alone():
    """--set topology.nic.npu.injection_gbps=400 changes that field and keeps the table's
    others (the file's ejection_gbps, the host entry); --set and sweeps take such paths."""
    path = os.path.join(TOPOLOGIES, "dgx1-v100.toml")
    base = load(path)
    cfg = load(path, {"topology.nic.npu.injection_gbps": 400.0, "topology.npu.tflops": 50.0})
    want = copy.deepcopy(base.topology.nic)
    want["npu"]["injection_gbps"] = 400.0
    assert cfg.topology.nic == want and cfg.topology.npu == {"preset": "v100", "tflops": 50.0}
    assert base.with_overrides({"topology.nic.host.ejection_gbps": 8.0}).topology.nic == \
        {"npu": base.topology.nic["npu"], "host": dict(base.topology.nic["host"],
                                                         ejection_gbps=8.0)}
    assert base.topology.nic == load(path).topology.nic          # the base is not touched
    with pytest.raises(ConfigError, match="topology.dims is not a table of fields"):
        load(path, {"topology.dims.x": 1})
    with pytest.raises(ConfigError, match="topology.npu.tflop: unknown field"):
        load(path, {"topology.npu.tflop": 1.0})
    import importlib
    sw = importlib.import_module("pysim.sweep")
    assert sw.expand({"topology.npu.tflops": [50.0, 100.0]}) == \
        [{"topology.npu.tflops": 50.0}, {"topology.npu.tflops": 100.0}]
    assert sw.resolve(sw.base_config(path), {"topology.npu.hbm_gbps": 450.0}).topology.npu == \
        {"preset": "v100", "hbm_gbps": 450.0}


def test_simulate_takes_a_config_a_path_or_a_dict():
    """The same run three ways (an AttributeError on 'workload' for a path or a dict before);
    anything else is a TypeError that says what simulate takes."""
    raw = {"topology": {"kind": "mesh", "dims": [4, 4]},
           "simulation": {"warmup_cycles": 100, "measure_cycles": 400, "drain_cycles": 2000}}
    want = simulate(from_dict(raw)).to_dict()
    assert simulate(raw).to_dict()["avg_packet_latency"] == want["avg_packet_latency"]
    path = os.path.join(TOPOLOGIES, "ring8.toml")
    short = {"simulation.measure_cycles": 400}
    assert simulate(load(path, short)).avg_packet_latency == \
        simulate(load(path).with_overrides(short)).avg_packet_latency
    assert simulate(path).config["topology"] == load(path).to_dict()["topology"]
    with pytest.raises(TypeError, match="takes a Config, a path to a TOML file or a dict"):
        simulate(None)


def test_deadlock_is_reported_not_hung():
    """A ring whose dateline is removed (all traffic in one VC class) deadlocks under a
    heavy tornado-like load; the watchdog stops the run and names the routers."""
    cfg = make_cfg(topology={"kind": "ring", "size": 4, "bidirectional": False},
                   network={"vc_buffer_flits": 2}, simulation={"watchdog_cycles": 300})
    net = compile_network(cfg)
    net.arrays["ch_order"][:] = 0          # no drop in order: every packet stays in class 0
    n = 4
    P = 200
    src = np.arange(P) % n
    dst = (src + 3) % n
    with pytest.raises(DeadlockError) as e:
        run_packets(cfg, np.zeros(P, int), src, dst, np.full(P, 8), network=net)
    msg = str(e.value)
    assert "deadlock" in msg and "router n" in msg and "credits 0" in msg


@pytest.mark.parametrize("rate", [0.0, 1e-12])
def test_onoff_at_no_or_vanishing_load_ends(rate):
    """On/off bursts at rate 0 (an on period would never see an arrival) or 1e-12 (the next
    arrival lies ~1e13 cycles away) must not walk burst periods for ever while setting up.
    Run in a child process so that a regression fails here instead of hanging the suite; the
    oracle: nothing offered, nothing accepted."""
    code = (f"import json, sys; sys.path[:0] = [{ROOT!r}]; "
            "from conftest import make_cfg; from pysim.sim import simulate; "
            f"r = simulate(make_cfg(traffic={{'process': 'onoff', 'injection_rate': {rate}}}, "
            "simulation={'warmup_cycles': 100, 'measure_cycles': 500, 'drain_cycles': 500})); "
            "print(json.dumps([r.offered_rate, r.accepted_rate, r.packets_measured]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(__file__),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == [0.0, 0.0, 0]


def run_cli(args):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_cli_run_writes_json_with_the_documented_keys(tmp_path):
    out = tmp_path / "r.json"
    cfg = os.path.join(TOPOLOGIES, "mesh8x8.toml")
    res = run_cli(["run", cfg, "--set", "traffic.injection_rate=0.05",
                   "--set", "simulation.measure_cycles=2000", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "accepted load" in res.output and "saturated" in res.output
    d = json.loads(out.read_text())
    for key in ["avg_packet_latency", "avg_network_latency", "p99_packet_latency",
                "accepted_rate", "offered_rate", "avg_hops", "saturated", "cycles",
                "wall_seconds", "cycles_per_second", "flit_hops_per_second", "links", "config"]:
        assert key in d
    assert d["config"]["traffic"]["injection_rate"] == 0.05
    assert d["seed"] == 1 and d["version"]
    assert len(d["links"]) == 224 and {"src", "dst", "flits", "utilisation"} <= set(d["links"][0])
    assert d["offered_rate"] == pytest.approx(0.05, rel=0.1)
    # never overwrite without being asked
    before = out.read_text()
    res = CliRunner().invoke(main, ["run", cfg, "--json", str(out)])
    assert res.exit_code != 0 and "--force" in res.output
    assert out.read_text() == before
    res = run_cli(["run", cfg, "--set", "simulation.measure_cycles=500", "--json", str(out),
                   "--force", "-q"])
    assert res.exit_code == 0 and res.output == ""
    assert json.loads(out.read_text())["measure_cycles"] == 500


def test_cli_errors_are_clear(tmp_path):
    cfg = os.path.join(TOPOLOGIES, "mesh8x8.toml")
    res = CliRunner().invoke(main, ["run", cfg, "--set", "network.vcs=0"])
    assert res.exit_code != 0
    assert "network.vcs = 0" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["run", str(tmp_path / "nope.toml")])
    assert res.exit_code != 0 and "no such file" in res.output
    res = CliRunner().invoke(main, ["run", cfg, "--set", "bogus"])
    assert res.exit_code != 0 and "KEY=VALUE" in res.output


@pytest.mark.parametrize("sets,words", [
    (["network.vcs=2", "network.vcs=4"],
     ["--set network.vcs is given twice", "2, then 4", "give it once"]),
    (["topology.npu.hbm_gbps=100", "topology.npu={tflops=5}"],
     ["--set topology.npu = {'tflops': 5} replaces the whole table",
      "topology.npu.hbm_gbps = 100 given before it"]),
])
def test_a_key_set_twice_is_refused_naming_both_values(sets, words):
    """The last of two --set of one key won without a word; a whole table set after one of
    its fields dropped the field."""
    args = ["run", "ring8"] + [a for s in sets for a in ("--set", s)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    for w in words:
        assert w in res.output, res.output
    # (a field after its table is set in it, keeping the table's others)
    cfg = load("ring8", [("topology.npu", {"tflops": 5, "hbm_gbps": 9}),
                         ("topology.npu.tflops", 7)])
    assert (cfg.topology.npu["tflops"], cfg.topology.npu["hbm_gbps"]) == (7, 9)


def test_pairs_from_python_naming_one_key_twice_are_refused():
    with pytest.raises(ConfigError, match=r"load\(\): overrides give network.vcs twice "
                                          r"\(2, then 4\)"):
        load("ring8", [("network.vcs", 2), ("network.vcs", 4)])
    with pytest.raises(ConfigError, match=r"with_overrides\(\): overrides give "
                                          r"traffic.injection_rate twice"):
        load("ring8").with_overrides([("traffic.injection_rate", 0.1),
                                      ("traffic.injection_rate", 0.2)])


def test_ctrl_c_stops_a_long_run():
    """The engine runs without the GIL and returns between slices of the run to let Ctrl-C
    in: the command stops at once, says so and exits 130. A window of 10^15 cycles is said
    to take centuries before it starts (stderr is not a terminal: no progress line)."""
    import signal
    import time
    code = (f"import sys; sys.path[:0] = [{ROOT!r}]; from pysim.cli import main; "
            "print('ready', flush=True); "
            f"main(['run', {os.path.join(TOPOLOGIES, 'mesh8x8.toml')!r}, '--set', "
            "'simulation.measure_cycles=1000000000000000'])")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    assert p.stdout.readline().strip() == "ready"      # imported (however slow the machine)
    time.sleep(1.0)                        # compiled (8x8: ~0.05 s) and into the window
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 130 and "interrupted" in err, err[-2000:]
    assert re.search(r"estimate: about [\d,]+ years to simulate 1,000,000,000,002,000 "
                     r"cycles \(simulation.warmup_cycles \+ measure_cycles\) of synthetic "
                     r"traffic", err), err[-2000:]


def test_progress_is_reported_between_slices_and_changes_nothing(capsys):
    """simulate(progress=...) is called with rising cycles up to the run's last possible
    cycle, and the result is the one without it; the CLI's terminal line shows and clears."""
    raw = {"topology": {"kind": "mesh", "dims": [4, 4]},
           "simulation": {"warmup_cycles": 1000, "measure_cycles": 30000, "drain_cycles": 5000}}
    calls = []
    with_p = simulate(raw, progress=lambda now, last: calls.append((now, last))).to_dict()
    plain = simulate(raw).to_dict()
    assert calls and all(last == 36000 for _, last in calls)
    seen = [now for now, _ in calls]
    assert seen == sorted(seen) and 0 < seen[0] and seen[-1] <= with_p["cycles"]
    for k in ("wall_seconds", "run_seconds", "cycles_per_second", "flit_hops_per_second"):
        with_p.pop(k, None), plain.pop(k, None)
    assert with_p == plain
    from pysim.cli import Ticker as _Ticker
    t = _Ticker()
    t(500, 5000)                                   # within the first second: nothing
    t.t0 -= 5
    t(1234, 5000)
    t.clear()
    err = capsys.readouterr().err
    assert "cycle 500" not in err and "\rcycle 1,234 of at most 5,000, 5 s" in err
    assert err.endswith("\r")


LONG = "simulation.measure_cycles=50000000"


@pytest.mark.parametrize("args", [
    ["run", "{cfg}", "--set", LONG, "--json", "{missing}/r.json"],
    ["run", "{cfg}", "--set", LONG, "--trace", "{missing}/t.json"],
    ["sweep", "{cfg}", "--param", LONG, "--db", "{missing}/r.sqlite", "-q", "-j", "1"],
])
def test_an_output_that_cannot_be_written_stops_the_command_first(tmp_path, args):
    """--json into a directory that does not exist stops the command before the run (the mesh
    runs 50,000 cycles of measurement; the error comes before any of them), not after it with
    the result lost."""
    cfg = os.path.join(TOPOLOGIES, "mesh8x8.toml")
    missing = tmp_path / "no" / "such"
    args = [a.format(cfg=cfg, missing=missing) for a in args]
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"no directory {missing}" in res.output


@pytest.mark.parametrize("name", sorted(os.listdir(TOPOLOGIES)))
def test_every_shipped_topology_runs(name):
    cfg = load(os.path.join(TOPOLOGIES, name),
               {"simulation.warmup_cycles": 200, "simulation.measure_cycles": 500,
                "traffic.injection_rate": 0.01})
    if cfg.workload.kind != "synthetic":    # (the clusters of thousands of GPUs run a
        cfg = load(os.path.join(TOPOLOGIES, name), {"topology.node_count": 2,   # collective
                                                    "workload.bytes": 1 << 16})  # at scale)
        assert simulate(cfg).to_dict()["busbw_gbps"] > 0
        return
    r = simulate(cfg)
    assert r.packets_delivered == r.packets_measured > 0


def test_a_training_run_past_a_network_limit_is_refused_before_building(monkeypatch):
    """A network past a limit (its VC buffers) is refused before the training graph is
    built (a 16,384-NPU plan built its graph for minutes first)."""
    from pysim.workload.training import builder

    def never(*a, **k):
        raise AssertionError("the graph was built")
    monkeypatch.setattr(builder, "training_graph", never)
    import pysim.workload.training as training
    monkeypatch.setattr(training, "training_graph", never)
    raw = {"topology": {"kind": "ring", "size": 8},
           "workload": {"kind": "training", "model": "resnet50", "batch": 8},
           "network": {"vc_buffer_flits": 10 ** 9}}
    with pytest.raises(ConfigError, match="on 32 channels: 476.8 GiB of buffers"):
        simulate(from_dict(raw))


def test_a_missing_model_file_typed_on_the_command_line_is_named_where_it_was_looked_for(
        tmp_path, monkeypatch):
    """workload.model given as an override is relative to the current folder: a file that is
    not there is reported at that path, not at the shipped system's folder."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["run", "dgx1-v100", "--set", "workload.kind=training",
                                  "--set", "network.model=flow", "--set",
                                  "workload.model=nosuch.txt"])
    assert r.exit_code == 1, r.output
    assert f"{os.path.join(str(tmp_path), 'nosuch.txt')} does not exist" in r.output, r.output


@pytest.mark.parametrize("args", [
    ["run", "ring8", "--set", "workload.kind=collective", "--json", "o.json", "--trace",
     "./o.json"],
    ["run", "ring8", "--set", "workload.kind=collective", "--json", "o.json",
     "--export-chakra", "o.json"],
    ["topo", "ring8", "--json", "o.svg", "--draw", "o.svg"],
    ["jobs", "dgx1-v100", "--jobs", "1", "--json", "o.json", "--cache", "o.json"],
])
def test_two_outputs_naming_one_file_are_refused_first(tmp_path, monkeypatch, args):
    """Two output options naming one file: refused before any work, naming both options
    (the second write would have replaced the first, after the run)."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "both name" in res.output, res.output
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name, text", [("c.json", '{"network": {"vcs": 2}}'),
                                        ("c.yaml", "network:\n  vcs: 2\n")])
def test_a_json_or_yaml_config_is_told_that_configs_are_toml(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"not valid TOML.*pysim reads TOML files only"):
        load(str(path))


def test_synthetic_traffic_at_the_flow_level_names_every_kind_the_flow_model_runs():
    with pytest.raises(ConfigError, match="'graph', 'collective' or 'training'"):
        simulate(load("ring8", {"network.model": "flow"}))
    simulate(load("ring8", {"network.model": "flow", "workload.kind": "training",
                            "workload.model": "alexnet", "workload.batch": 8,
                            "workload.iterations": 1}))


@pytest.mark.parametrize("args, key", [
    (["run", "ring8", "--set", "simulation.measure_cycles=500", "--json", "-"], "config"),
    (["run", "ring8", "--set", "workload.kind=collective", "--trace", "-"], "traceEvents"),
    (["topo", "ring8", "--json", "-"], "diameter"),
])
def test_dash_writes_the_json_to_stdout_and_the_summary_to_stderr(tmp_path, monkeypatch, args,
                                                                 key):
    """`--json -` is standard output (the convention), holding the JSON alone: the summary
    goes to stderr; no file named `-` is made."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert key in json.loads(r.stdout)
    assert "seed" in r.stderr or "diameter" in r.stderr      # (the summary, the description)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, fragment", [
    (["run", "ring8", "--set", "workload.kind=collective", "--export-chakra", "-"],
     "--export-chakra -: a folder of trace files cannot go to standard output"),
    (["topo", "ring8", "--draw", "-"], "--draw -: a figure cannot go to standard output"),
    (["plot", "r.sqlite", "--kind", "latency-load", "-o", "-"],
     "-o -: a figure cannot go to standard output"),
    (["jobs", "dgx1-v100", "--jobs", "1", "--cache", "-"], "--cache -: a database"),
    (["sweep", "ring8", "--param", "traffic.injection_rate=0.1", "--db", "-"],
     "--db -: a database"),
    (["run", "ring8", "--json", "-", "--trace", "-"],
     "--json and --trace both name - (standard output)"),
])
def test_dash_is_refused_where_the_output_is_not_json_or_csv(tmp_path, monkeypatch, args,
                                                             fragment):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and fragment in r.output, r.output
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args", [
    ["run", "ring8", "--set", "simulation.measure_cycles=500", "--json", "-"],
    ["topo", "ring8", "--json", "-"],
    ["systems"],
])
def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path, args):
    """`pysim run ring8 --json - | head`: the reader closing the pipe ends the command as a
    Unix filter ends (status 141 = 128 + SIGPIPE, nothing printed), and the cut result is not
    kept in a temporary file (an 'error: ... kept in /tmp/...' and status 1 before)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "pysim", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    p.stdout.close()                          # the reader is gone before anything is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141, err
    assert "error" not in err.lower() and "Traceback" not in err, err
    assert os.listdir(tmp_path) == []


def test_two_files_on_one_topology_are_told_apart_by_their_system_name(tmp_path):
    """Results carry the system's name (`_system`, pysim results' `system` column): a file of
    the user's own adds its name to the topology's, so two files on one topology (ring8 with
    2 and with 4 VCs) are told apart; a shipped system, and a config from Python, keep the
    topology's name alone."""
    names = {}
    for f, vcs in (("a.toml", 2), ("b.toml", 4)):
        (tmp_path / f).write_text(f'[topology]\nfile = "ring8"\n[network]\nvcs = {vcs}\n'
                                  f'[simulation]\nmeasure_cycles = 200\nwarmup_cycles = 0\n')
        names[f] = simulate(load(str(tmp_path / f))).to_dict()["config"]["_system"]
    assert names == {"a.toml": "ring8 (a.toml)", "b.toml": "ring8 (b.toml)"}
    quick = {"simulation.measure_cycles": 200, "simulation.warmup_cycles": 0}
    assert simulate(load("ring8", quick)).to_dict()["config"]["_system"] == "ring8"
    (tmp_path / "ring8.toml").write_text((tmp_path / "a.toml").read_text())
    assert simulate(load(str(tmp_path / "ring8.toml"))).to_dict()["config"]["_system"] == \
        "ring8"                                  # (the file is named as its topology)
    raw = {"topology": {"kind": "ring", "size": 8}, "simulation": {"measure_cycles": 200}}
    assert simulate(from_dict(raw)).to_dict()["config"]["_system"] == "ring8"


@pytest.mark.parametrize("model", ["flit", "flow"])
def test_a_slice_of_the_run_is_bounded_by_its_work_not_its_cycles(model):
    """The engine returns between slices to let Ctrl-C in and to report progress. A slice
    is measured in work: idle cycles jumped over cost nothing, so 10^10 cycles of compute
    on an idle network are a few slices (one per 65,536 cycles would be 152,588 returns
    to Python, 0.2 s of CPU per 10^10 cycles with the command line's progress line), and
    at the flit level a slice after them steps at most 65,536 busy cycles (the traffic
    after an idle phase does not run as one long slice). The result is the same with
    slices and without progress."""
    cfg = load("ring8", {"network.model": model})
    g = OpGraph()
    idle = 10 ** 10
    a = g.compute("n0", idle)                 # idle network: skipped cycles
    g.send("n0", "n4", 16 << 20, after=[a])
    seen = []
    res = run_graph(cfg, g, progress=lambda now, last: seen.append(now)).to_dict()
    assert res["makespan_cycles"] == run_graph(cfg, g).to_dict()["makespan_cycles"]
    assert res["makespan_cycles"] > idle + 65536 * 3 or model == "flow"
    assert sum(1 for t in seen if t <= idle) <= 3, len(seen)
    if model == "flit":                       # (the send's cycles are stepped: busy)
        busy = np.diff([idle] + [t for t in seen if t > idle])
        assert len(busy) >= 3 and busy.max() <= 65536, busy


def test_numpy_values_from_python_are_taken_as_the_numbers_they_are():
    """A config built in Python with numpy values (np.int64(8), np.array([4, 4]),
    np.float32, np.bool_) reads as TOML's numbers, lists and booleans, and the result is
    JSON; np.int64(8) was refused as 'expected an integer'."""
    cfg = from_dict({"topology": {"kind": "mesh", "dims": np.array([4, 4])},
                     "simulation": {"measure_cycles": np.int32(200)},
                     "network": {"wait_for_tail_credit": np.bool_(True)},
                     "traffic": {"injection_rate": np.float32(0.1)}})
    assert cfg.topology.dims == [4, 4] and type(cfg.topology.dims[0]) is int
    assert type(cfg.simulation.measure_cycles) is int and cfg.network.wait_for_tail_credit is True
    json.dumps(simulate(cfg).to_dict())
    assert load("ring8").with_overrides({"topology.size": np.int64(6)}).topology.size == 6
    with pytest.raises(ConfigError, match=r"topology\.size = 0"):
        from_dict({"topology": {"kind": "ring", "size": np.int64(0)}})


@pytest.mark.parametrize("args", [
    ["run", "ring8", "-q", "--json"],
    ["run", "ring8", "-q", "--set", "workload.kind=collective", "--trace"],
    ["run", "ring8", "-q", "--set", "workload.kind=collective", "--export-chakra"],
    ["topo", "ring8", "--json"],
    ["topo", "ring8", "--draw"],
    ["sweep", "ring8", "--param", "traffic.injection_rate=0.05", "-q", "--db"],
    ["results", "x.sqlite", "--csv"],
    ["jobs", "dgx1-v100", "--jobs", "2", "-q", "--json"],
    ["jobs", "dgx1-v100", "--jobs", "2", "-q", "--write-jobs"],
    ["jobs", "dgx1-v100", "--jobs", "2", "-q", "--cache"],
])
def test_an_empty_output_name_is_refused_not_taken_for_none(tmp_path, monkeypatch, args):
    """`--json "$OUT"` with OUT unset: the run went ahead and wrote nothing, exit status 0."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args + [""])
    assert res.exit_code == 2 and "'': an empty name; expected a file or folder name" in \
        res.output, res.output
    assert os.listdir(tmp_path) == []


def test_more_channels_than_the_engine_numbers_are_refused_at_either_level(monkeypatch):
    """The engine's channel ids are 32-bit: a network of more lanes than that is refused
    before it is built, at the flow level too (which has no VC buffers to refuse it for).
    The limit is lowered here to a ring of 8's 32 lanes: its 16 links and its 8 NICs'
    two ends, each of one flit a cycle."""
    import pysim.network as network
    monkeypatch.setattr(network, "MAX_CHANNELS", 31)
    for model in ("flit", "flow"):
        raw = {"topology": {"kind": "ring", "size": 8}, "network": {"model": model},
               "workload": {"kind": "collective", "collective": "all_reduce",
                            "bytes": 65536}}
        with pytest.raises(ConfigError, match="make 32 channels .*expected at most 31"):
            simulate(from_dict(raw))
    monkeypatch.setattr(network, "MAX_CHANNELS", 32)
    simulate(from_dict(raw))
