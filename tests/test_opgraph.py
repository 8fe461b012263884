"""Op graphs executed inside csim: exact timing of compute, delay and send ops, dependency
semantics on random DAGs, sends timed exactly as the network delivers their packets, errors,
and the CLI with a trace."""
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import TOPOLOGIES, make_cfg
from pysim.cli import main
from pysim.config import load
from pysim.errors import ConfigError
from pysim.network import compile_network
from pysim.sim import run_packets, simulate
from pysim.workload import GraphError, OpGraph, load_graph, run_graph

MESH = dict(topology={"kind": "mesh", "dims": [4, 4]})


def test_compute_send_compute_chain_has_the_closed_form_time():
    """compute(100) at n0_0, a 1-packet message of L flits to n3_2, compute(50) there:
    100 + T0 + 50, T0 = 1 + 1 + (H + 1) * 4 + H + 1 + (L - 1) on unit links, H = 5 (the NIC's
    injection delay, its channel, the routers, the links, the ejection channel, the tail)."""
    cfg = make_cfg(**MESH, workload={"packet_flits": 8})
    L = 5
    g = OpGraph()
    a = g.compute("n0_0", 100)
    b = g.send("n0_0", "n3_2", L * 32, after=[a])
    g.compute("n3_2", 50, after=[b])
    r = run_graph(cfg, g)
    H = 5
    t0 = 1 + 1 + (H + 1) * 4 + H + 1 + (L - 1)
    assert [(op["start"], op["finish"]) for op in r.ops] == \
        [(0, 100), (100, 100 + t0), (100 + t0, 150 + t0)]
    assert r.makespan_cycles == 150 + t0 and r.packets == 1


@pytest.mark.parametrize("seed", range(6))
def test_random_dags_respect_dependencies_and_node_compute_units(seed):
    rng = np.random.default_rng(seed)
    cfg = make_cfg(**MESH, workload={"packet_flits": 4})
    names = compile_network(cfg).topo.node_names
    g = OpGraph()
    for i in range(60):
        after = sorted(set(rng.integers(0, i, rng.integers(0, 3)).tolist())) if i else []
        k = rng.choice(["compute", "compute", "send", "delay"])
        if k == "compute":
            g.compute(str(rng.choice(names)), int(rng.integers(0, 200)), after)
        elif k == "delay":
            g.delay(int(rng.integers(0, 100)), after)
        else:
            s, d = rng.choice(len(names), 2, replace=False)
            g.send(names[s], names[d], int(rng.integers(0, 4000)), after)
    r = run_graph(cfg, g)
    ops = r.ops
    for i, op in enumerate(ops):
        ready = max([ops[d]["finish"] for d in g.after[i]], default=0)
        assert op["start"] >= ready
        if op["kind"] in ("compute", "delay"):
            assert op["finish"] - op["start"] == op["size"]
        if op["kind"] in ("send", "delay"):
            assert op["start"] == ready            # nothing to wait for but dependencies
        if op["kind"] == "send" and op["size"] == 0:
            assert op["finish"] == op["start"]
    by_node = {}
    for i, op in enumerate(ops):
        if op["kind"] == "compute":
            by_node.setdefault(op["node"], []).append((op["start"], op["finish"], i))
    for node, spans in by_node.items():
        spans.sort()
        for (s0, f0, _), (s1, f1, i1) in zip(spans, spans[1:]):
            assert s1 >= f0                         # one compute op at a time per node
        for s, f, i in spans:                       # a compute op waits only for its node
            ready = max([ops[d]["finish"] for d in g.after[i]], default=0)
            assert s == ready or any(f0 == s for _, f0, _ in spans)
    assert run_graph(cfg, g).ops == ops             # deterministic


def test_a_send_finishes_when_the_network_delivers_its_last_packet():
    """The same packets injected as a trace at cycle 0 (csim's trace mode matches the
    reference model) arrive when the op graph says the send finished. (Ties by parity: with
    random ties a packet's way at a tie follows its creation order, which the two modes do not
    share.)"""
    cfg = make_cfg(topology={"kind": "torus", "dims": [4, 4], "tie_break": "parity"},
                   workload={"packet_flits": 6})
    g = OpGraph()
    # one message per source: its NIC sends its packets back to back, as a trace would
    sends = [g.send("n0_0", "n2_3", 1000), g.send("n1_1", "n2_3", 333),
             g.send("n3_3", "n3_0", 64)]
    r = run_graph(cfg, g)
    net = compile_network(cfg)
    names = net.topo.node_names
    times, src, dst, length, owner = [], [], [], [], []
    for i in sends:
        left = g.size[i]
        while left > 0:
            flits = -(-min(left, 6 * 32) // 32)
            times.append(0)
            src.append(names.index(g.node[i]))
            dst.append(names.index(g.dst[i]))
            length.append(flits)
            owner.append(i)
            left -= 6 * 32
    _, _, deliver, _, _ = run_packets(cfg, times, src, dst, length, network=net)
    for i in sends:
        assert r.ops[i]["finish"] == max(d for d, o in zip(deliver, owner) if o == i)


def test_a_large_message_moves_at_the_link_bandwidth():
    """1 MiB over one link of one flit per cycle (32 B at 1 GHz) takes 32768 cycles plus the
    pipeline: within 0.5% (enough VCs and VC reuse after the tail, 16-flit packets)."""
    cfg = make_cfg(topology={"kind": "mesh", "dims": [2]},
                   network={"vcs": 4, "wait_for_tail_credit": False, "vc_buffer_flits": 16},
                   workload={"packet_flits": 16})
    g = OpGraph()
    g.send("n0", "n1", 1 << 20)
    r = run_graph(cfg, g)
    assert 32768 <= r.makespan_cycles <= 32768 * 1.005


@pytest.mark.parametrize("build,fragment", [
    (lambda g: g.compute("nowhere", 5), "'nowhere': no node of that name"),
    (lambda g: g.send("n0_0", "n0_0", 5), "a send from 'n0_0' to itself"),
    (lambda g: g.compute("n0_0", -1), "cycles = -1"),
    (lambda g: g.compute("n0_0", 5, after=["later"]), "'later': no op of that name"),
    (lambda g: g.compute("n0_0", 5, after=[7]), "dependency 7: no such op"),
    # found by trying: an unnamed op printed "op : cycles = ...", a float count was refused
    # only if not whole, a petaflop-sized op built 10^22 slices for ever
    (lambda g: g.compute("n0_0", 1.5), "cycles = 1.5: expected an integer >= 0"),
    (lambda g: g.send("n0_0", "n1_1", 10 ** 20, name="big"),
     "op 'big': bytes = 100000000000000000000: expected at most 1,000,000,000,000,000"),
    (lambda g: g.compute("n0_0", flops=1e30), "takes more than 1,000,000,000,000,000 "
                                               "cycles"),
    # the op and its field named, not only "1e+30 at 100000 per cycle"
    (lambda g: g.compute("n0_0", flops=1e30, name="huge"),
     "op huge on 'n0_0': flops = 1e+30 at 100000 per cycle takes more than "
     "1,000,000,000,000,000 cycles; expected less work or a faster node (the node's TFLOP/s"),
])
def test_bad_graphs_are_refused(build, fragment):
    g = OpGraph()
    with pytest.raises(GraphError) as e:
        build(g)
        run_graph(make_cfg(**MESH), g)
    assert fragment in str(e.value) and "op :" not in str(e.value)


def test_too_many_slices_are_refused():
    """10^12 cycles in slices of 1000 are 10^9 slices, past the limit; whole (the default)
    the op is one."""
    g = OpGraph()
    g.compute("n0_0", flops=1e17)             # 10^12 cycles at 10^5 FLOPs a cycle
    with pytest.raises(GraphError, match="slices of workload.slice_cycles = 1000"):
        run_graph(make_cfg(**MESH, workload={"slice_cycles": 1000}), g)


def test_graphs_are_bounded_and_names_found_at_once(monkeypatch):
    """At most MAX_OPS ops (a collective of 10^5 chunks built ops for minutes and gigabytes);
    dependencies by name are looked up in a table (a list search made a file of 10^5 named
    ops quadratic)."""
    from pysim.workload import graph
    monkeypatch.setattr(graph, "MAX_OPS", 1000)
    g = OpGraph()
    for i in range(1000):
        g.delay(1, name=f"d{i}", after=[f"d{i - 1}"] if i else None)
    assert g.after[999] == [998]
    with pytest.raises(GraphError, match="passes 1,000 ops"):
        g.delay(1)
    cfg = make_cfg(topology={"kind": "ring", "size": 8},
                   workload={"kind": "collective", "chunks": 100})
    with pytest.raises(GraphError, match="makes up to 16,800 ops, more than the 1,000"):
        simulate(cfg)


@pytest.mark.parametrize("ops,said", [
    ('[[ops]]\nname = "a"\nkind = "delay"\ncycles = 5\n'
     '[[ops]]\nkind = "delay"\ncycles = 7\nafter = "a"', None),  # one bare dependency: 5 + 7
    ("ops = []", "no ops; expected at least one [[ops]] table"),
    ("ops = [1, 2]", "expected an array of tables [[ops]]"),
    ('[[ops]]\nname = 5\nkind = "delay"\ncycles = 5', "ops[0]: name = 5: expected a string"),
    ('[[ops]]\nkind = "delay"\ncycles = 5\nafter = {x = 1}', "after = {'x': 1}: expected a list"),
    ('[[ops]]\nkind = "delay"\ncycles = 5\nafter = [0]',
     "dependency 0: no such op (an op can only depend on ops given before it)"),
    ('[[ops]]\nkind = "compute"\nnode = "n0_0"\ncycle = 5',
     "unknown field(s) cycle for a compute op (it takes after, bytes, cycles, flops, name, node)"),
    # a misspelt array of ops is not dropped without a word
    ('[[ops]]\nkind = "delay"\ncycles = 5\n[[op]]\nkind = "delay"\ncycles = 7',
     "unknown table or key 'op' (did you mean 'ops'?); an op-graph file holds [[ops]] only"),
])
def test_op_files_read_or_refused_clearly(tmp_path, ops, said):
    (tmp_path / "ops.toml").write_text(ops)
    (tmp_path / "c.toml").write_text('[topology]\nkind = "mesh"\ndims = [2, 2]\n'
                                     '[workload]\nkind = "graph"\nfile = "ops.toml"\n')
    cfg = load(tmp_path / "c.toml")
    if said is None:
        assert simulate(cfg).makespan_cycles == 12
        return
    with pytest.raises(GraphError) as e:
        simulate(cfg)
    assert said in str(e.value)


def test_switches_have_no_compute_unit():
    g = OpGraph()
    g.compute("sw0", 5)
    with pytest.raises(GraphError, match="is a switch"):
        run_graph(make_cfg(topology={"kind": "switch", "size": 4}), g)


def test_graph_file_and_cli_with_trace(tmp_path):
    ops = tmp_path / "ops.toml"
    ops.write_text('''
[[ops]]
name = "fwd"
kind = "compute"
node = "gpu0"
cycles = 2000

[[ops]]
name = "grad"
kind = "send"
src = "gpu0"
dst = "gpu5"
bytes = 65536
after = ["fwd"]

[[ops]]
name = "upd"
kind = "compute"
node = "gpu5"
cycles = 700
after = ["grad"]
''')
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[topology]\nfile = "{os.path.join(TOPOLOGIES, "dgx1-v100.toml")}"\n'
                   f'[network]\nvc_buffer_flits = 128\nwait_for_tail_credit = false\n'
                   f'clock_ghz = 2.0\n'
                   f'[workload]\nkind = "graph"\nfile = "ops.toml"\n')
    out, trace = tmp_path / "r.json", tmp_path / "t.json"
    res = CliRunner().invoke(main, ["run", str(cfg), "--json", str(out), "--trace", str(trace)])
    assert res.exit_code == 0, res.output
    assert "makespan" in res.output
    d = json.loads(out.read_text())
    t = json.loads(trace.read_text())
    assert d["ops"][0]["finish"] == 2000 and d["ops"][2]["start"] == d["ops"][1]["finish"]
    # the trace format's ts and dur are microseconds: at 2 GHz the 2000-cycle op lasts 1 us
    # (cycles there would show a 1 ns cycle as 1 us in Perfetto); cycles in args
    spans = {e["name"]: e for e in t["traceEvents"] if e["ph"] == "X"}
    assert spans["fwd"]["ts"] == 0 and spans["fwd"]["dur"] == pytest.approx(1.0, abs=1e-12)
    for op in d["ops"]:
        e = spans[op["name"]]
        assert e["ts"] == pytest.approx(op["start"] / 2000, abs=1e-9)
        assert e["dur"] == pytest.approx((op["finish"] - op["start"]) / 2000, abs=1e-9)
        assert e["args"]["start_cycle"] == op["start"]
        assert e["args"]["cycles"] == op["finish"] - op["start"]
    # what a trace viewer needs: every complete event has a name, integer pid and tid, and
    # numbers for ts and dur; every pid is named by a metadata event
    named = {e["pid"] for e in t["traceEvents"] if e.get("name") == "process_name"}
    for e in spans.values():
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["pid"] in named
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    # provenance, as the --json result has it: the resolved config, the seed, the version
    assert t["otherData"]["config"] == d["config"] and t["otherData"]["seed"] == d["seed"] \
        and t["otherData"]["version"] == d["version"]
    png = tmp_path / "t.png"
    res = CliRunner().invoke(main, ["plot", str(trace), "--kind", "timeline", "-o", str(png)])
    assert res.exit_code == 0 and png.stat().st_size > 5000
    bad = tmp_path / "bad.toml"
    bad.write_text('[[ops]]\nkind = "compute"\nnode = "gpu0"\n')
    with pytest.raises(GraphError, match="needs cycles, or flops"):
        load_graph(bad)
    res = CliRunner().invoke(main, ["run", os.path.join(TOPOLOGIES, "mesh8x8.toml"),
                                    "--trace", str(tmp_path / "x.json")])
    assert res.exit_code != 0 and "has no ops to trace" in res.output


def mem_system(mem_gbps):
    nodes = [{"name": "npu", "kind": "npu"},
             {"name": "m", "kind": "mem", "mem_gbps": mem_gbps, "mem_latency_ns": 40.0,
              "capacity_gb": 0.004}]
    return make_cfg(topology={"kind": "graph", "nodes": nodes,
                              "links": [{"a": "npu", "b": "m", "gbps": 32.0}]},
                    network={"vcs": 4, "wait_for_tail_credit": False, "vc_buffer_flits": 16},
                    workload={"packet_flits": 16, "mem_piece_bytes": 32768})


@pytest.mark.parametrize("mem_gbps", [16.0, 64.0])
def test_memory_node_write_then_read_takes_the_bandwidth_time(mem_gbps):
    """A write then a read of 1 MiB through a 32 GB/s link to a memory node of mem_gbps and
    40 ns access latency: each takes bytes / min(link, memory) plus one piece at the faster
    rate and the latencies (1 GHz: GB/s = bytes/cycle)."""
    N, piece = 1 << 20, 32768
    g = OpGraph()
    w = g.mem_write("npu", "m", N)
    g.mem_read("npu", "m", N, after=[w])
    r = run_graph(mem_system(mem_gbps), g)
    slow, fast = min(32.0, mem_gbps), max(32.0, mem_gbps)
    ideal = N / slow + piece / fast + 40
    for op in r.ops:
        t = op["finish"] - op["start"]
        assert ideal <= t <= ideal * 1.02 + 60, (op["kind"], t, ideal)


def test_writing_past_a_memory_nodes_capacity_is_refused():
    g = OpGraph()
    g.mem_write("npu", "m", 3_000_000, name="a")
    g.mem_write("npu", "m", 3_000_000, name="b")
    with pytest.raises(GraphError, match="op b: holding 3000000 bytes at m passes its "
                                         "capacity of 4000000 bytes \\(6000000 held there"):
        run_graph(mem_system(16.0), g)
    g = OpGraph()
    g.compute("m", 10)
    with pytest.raises(GraphError, match="is a mem node"):
        run_graph(mem_system(16.0), g)


def test_compute_ops_timed_by_the_roofline():
    """cycles = max(ceil(flops / peak), ceil(bytes / bandwidth)), per node kind and node."""
    nodes = [{"name": "a", "kind": "npu"}, {"name": "b", "kind": "npu", "tflops": 50.0,
                                            "hbm_gbps": 400.0},
             {"name": "h", "kind": "host"}]
    links = [{"a": "a", "b": "b"}, {"a": "b", "b": "h"}]
    cfg = make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links,
                             "npu": {"tflops": 200.0, "hbm_gbps": 1000.0},
                             "host": {"tflops": 1.0, "dram_gbps": 64.0}},
                   network={"clock_ghz": 2.0})
    g = OpGraph()
    a = g.compute("a", flops=10**9, bytes=10**6)     # 1e9 / 1e5 per cycle = 10000 cycles
    g.compute("a", flops=10**6, bytes=10**8, after=[a])   # 1e8 / 500 per cycle = 200000
    g.compute("b", flops=10**9 + 1, bytes=0)         # 1e9+1 / 25000 per cycle -> 40001
    g.compute("h", bytes=3200)                       # 3200 / 32 bytes per cycle = 100
    g.compute("h", flops=2.5e6, bytes=32e2)          # as TOML writes them: 2.5e6 / 500 = 5000
    r = run_graph(cfg, g)
    assert [op["finish"] - op["start"] for op in r.ops] == [10000, 200000, 40001, 100, 5000]
    # at the same time on one node, a compute-bound and a memory-bound op overlap (each
    # uses the unit the other leaves idle) but a second memory stream slows the first
    g = OpGraph()
    g.compute("a", flops=10**9, bytes=10**6, name="cpu-bound")
    g.compute("a", flops=10**6, bytes=10**7, name="mem-bound")
    r = run_graph(cfg, g)
    assert max(op["finish"] for op in r.ops) < 10000 + 20000
    g = OpGraph()
    g.compute("a", flops=10**6, bytes=10**7)
    g.memory("a", 10**7)
    r = run_graph(cfg, g)
    assert r.ops[0]["finish"] - r.ops[0]["start"] > 20000 * 1.3
    with pytest.raises(GraphError, match="not both"):
        OpGraph().compute("a", 5, flops=3)
    with pytest.raises(GraphError, match="needs cycles, or flops"):
        OpGraph().compute("a")
    bad = make_cfg(topology={"kind": "graph", "links": [{"a": "h", "b": "x"}],
                             "nodes": [{"name": "h", "kind": "host", "hbm_gbps": 1.0},
                                       {"name": "x"}]})
    with pytest.raises(ConfigError, match="hbm_gbps: not for a node of kind 'host' "
                                          "\\(it takes dram_gb, dram_gbps, tflops\\)"):
        compile_network(bad)


def test_reduce_ops_on_the_npu_and_on_the_offload_engine():
    """reduce(b) on the NPU: 4b of HBM traffic beside b / reduce_gbps on the compute unit,
    whichever is longer; on the offload engine: b / offload_gbps on the engine alone."""
    nodes = [{"name": "a", "kind": "npu", "hbm_gbps": 100.0, "reduce_gbps": 50.0,
              "offload_gbps": 200.0}, {"name": "b", "kind": "npu"}]
    cfg = make_cfg(topology={"kind": "graph", "nodes": nodes, "links": [{"a": "a", "b": "b"}]})
    g = OpGraph()
    r1 = g.reduce("a", 10000, "npu")              # max(40000 / 100, 10000 / 50) = 400
    g.reduce("a", 10000, "offload", after=[r1])   # 10000 / 200 = 50
    g.compute("a", 70, after=[r1])                # the compute unit is free again after r1
    r = run_graph(cfg, g)
    assert [op["finish"] - op["start"] for op in r.ops] == [400, 50, 70]
    assert r.ops[1]["start"] == r.ops[2]["start"] == 400     # different units, in parallel
    with pytest.raises(GraphError, match="expected 'npu' or 'offload'"):
        g.reduce("a", 5, "gpu")


@pytest.mark.parametrize("slice_cycles", [0, 1000])
def test_roofline_slices_share_the_memory_with_communication_exactly(slice_cycles):
    """The sharing rule, cycle for cycle, for a roofline op run whole (slice_cycles = 0, the
    default: its compute and memory parts progress together) and in slices of 1000 cycles
    (each a compute part beside a memory part, the next slice when both are done): the same
    times. Communication's memory traffic (OpGraph.memory) shares the memory with the
    memory parts max-min fairly, each taking at most what it can use (a memory part: what
    keeps pace with its compute part; no budget on a node without modelled compute units).
    Memory-bound (4000 memory cycles, no compute) beside a 500-cycle memory op at 0: both can
    use it all, so both run at half rate until the op ends at 1000 (slice 0 then has 500
    left): slice 0 ends at 1500, slices 1-3 take [1500, 4500).
    Compute-bound (4 slices of 1000 compute, 100 memory) beside a 2000-cycle memory op: each
    memory part can use only 100 / 1000 of the memory (it keeps pace with its compute part),
    so the op runs at 0.9 throughout: 2000 / 0.9, ending at 2223 (an even split would end it
    at 2300); the roofline op is never slowed past its compute: done at 4000.
    Memory short of the pace (4000 compute, 3000 memory cycles: it needs 0.75 of the memory)
    beside a 1500-cycle memory op: each gets half until the op ends at 3000, so the compute
    goes no faster than its data, 0.5 x 4000 / 3000 (in slices: 1000 compute, 750 memory, two
    slices of 1500); then 1500 memory and 2000 compute cycles are left, alone: done at 5000
    (compute running ahead of its data would end it at 4500)."""
    cfg = make_cfg(topology={"kind": "ring", "size": 2, "npu": {"tflops": 1.0,
                                                              "hbm_gbps": 1.0}},
                   workload={"slice_cycles": slice_cycles})
    g = OpGraph()
    g.compute("n0", bytes=4000)
    g.memory("n0", 500)
    r = run_graph(cfg, g)
    assert [(op["start"], op["finish"]) for op in r.ops] == [(0, 4500), (0, 1000)]
    g = OpGraph()
    g.compute("n0", flops=4000 * 1000, bytes=400)        # 1 TFLOP/s = 1000 FLOPs/cycle
    g.memory("n0", 2000)
    r = run_graph(cfg, g)
    assert [(op["start"], op["finish"]) for op in r.ops] == [(0, 4000), (0, 2223)]
    assert r.ops[0]["isolated_cycles"] == 4000
    g = OpGraph()
    g.compute("n0", flops=4000 * 1000, bytes=3000)
    g.memory("n0", 1500)
    r = run_graph(cfg, g)
    assert [(op["start"], op["finish"]) for op in r.ops] == [(0, 5000), (0, 3000)]
    # a per-op peak: 3.5e6 FLOPs at 2 TFLOP/s = 1750 cycles, whatever the node's own peak
    g = OpGraph()
    g.compute("n1", flops=3.5e6, peak_flops=2e12)
    assert run_graph(cfg, g).ops[0]["finish"] == 1750
    with pytest.raises(GraphError, match="peak_flops = -1"):
        OpGraph().compute("n1", flops=1, peak_flops=-1)


@pytest.mark.parametrize("net", ["flit", "flow"])
def test_ops_outside_collectives_start_when_their_dependency_finishes(net):
    """Streams (a reception written or reduced as it arrives) are a collective's way of
    running its steps; an op graph's own ops keep the rule that an op starts the cycle its
    last dependency finishes, even in the shapes a collective's step would stream (a write
    or a reduction after a send of its bytes, a send after a read of its bytes). The same
    shapes given to allow_streams do stream: they start before the send finishes."""
    cfg = load("ring8", {"network.model": net})

    def build(allow):
        g = OpGraph()
        s = g.send("n0", "n1", 1 << 20)
        w = g.memory("n1", 1 << 20, after=[s])
        r = g.reduce("n1", 1 << 20, after=[s])
        rd = g.memory("n2", 1 << 16)
        s2 = g.send("n2", "n3", 1 << 16, after=[rd])
        if allow:
            g.allow_streams(0, len(g))
        return g, (s, w, r, rd, s2)

    g, (s, w, r, rd, s2) = build(False)
    ops = run_graph(cfg, g).ops
    assert ops[w]["start"] == ops[r]["start"] == ops[s]["finish"] > 0
    assert ops[s2]["start"] == ops[rd]["finish"] > 0
    g, (s, w, r, rd, s2) = build(True)
    ops = run_graph(cfg, g).ops
    assert ops[w]["start"] < ops[s]["finish"] and ops[r]["start"] < ops[s]["finish"]
    assert ops[s2]["start"] < ops[rd]["finish"]


def test_allow_streams_refuses_a_range_past_the_ops():
    g = OpGraph()
    g.compute("n0", 1)
    with pytest.raises(GraphError, match=r"allow_streams\(0, 2\)"):
        g.allow_streams(0, 2)
