"""Memory as a resource of op graphs: holds taken and freed at ops' edges, each device's
occupancy and peak computed from the ops' times (against a per-cycle sweep written here),
memory nodes and host DRAM that free space, remote reads and writes timed by the slowest
stage, forward dependencies, and the errors that name the device."""
import numpy as np
import pytest

from conftest import make_cfg
from pysim.workload import GraphError, OpGraph, run_graph
from pysim.workload.graph import load_graph


def system(cap_gb=1.0, hbm_gb=1.0, dram_gb=1.0, host_link=16.0, mem_link=32.0):
    """npu -- m (memory node, 32 GB/s link), npu -- h (host, 16 GB/s link)."""
    nodes = [{"name": "npu", "kind": "npu", "hbm_gb": hbm_gb},
             {"name": "m", "kind": "mem", "mem_gbps": 200.0, "mem_latency_ns": 40.0,
              "capacity_gb": cap_gb},
             {"name": "h", "kind": "host", "dram_gb": dram_gb, "dram_gbps": 200.0}]
    links = [{"a": "npu", "b": "m", "gbps": mem_link}, {"a": "npu", "b": "h", "gbps": host_link}]
    return make_cfg(topology={"kind": "graph", "nodes": nodes, "links": links},
                    network={"vcs": 4, "vc_buffer_flits": 16},
                    workload={"packet_flits": 16, "mem_piece_bytes": 32768})


def sweep_peak(holds, start, finish, end):
    """The reference: occupancy cycle by cycle, a hold counted on [take, free) (released
    before taken at the same cycle), max over the run."""
    level = np.zeros(end + 2, np.int64)
    for b, (op, fin), free in holds:
        t0 = finish[op] if fin else start[op]
        t1 = end + 1 if free is None else (finish[free[0]] if free[1] else start[free[0]])
        level[t0:max(t0, t1)] += b
    return int(level.max())


@pytest.mark.parametrize("seed", range(5))
def test_peak_is_the_largest_sum_of_live_holds(seed):
    """Random chains of compute ops on one NPU with random holds: the peak and the timeline
    equal a cycle-by-cycle sweep of the same holds."""
    rng = np.random.default_rng(seed)
    g = OpGraph()
    ops = []
    for i in range(30):
        after = [ops[-1]] if ops and rng.random() < 0.7 else []
        ops.append(g.compute("npu", int(rng.integers(0, 50)), after))
    holds = []
    for _ in range(40):
        a, b = sorted(rng.integers(0, len(ops), 2))
        nb = int(rng.integers(1, 10**6))
        ea, eb = rng.random() < 0.5, rng.random() < 0.5
        h = g.hold("npu", nb, ops[a], "finish" if ea else "start", what=f"t{a}")
        free = None
        if rng.random() < 0.8:
            g.free(h, ops[b], "finish" if eb else "start")
            free = (ops[b], eb)
        holds.append((nb, (ops[a], ea), free))
    r = run_graph(system(hbm_gb=1.0), g)
    start = [op["start"] for op in r.ops]
    finish = [op["finish"] for op in r.ops]
    peak = sweep_peak(holds, start, finish, r.makespan_cycles)
    dev = r.memory["devices"]["npu"]
    assert dev["peak_bytes"] == peak
    assert dev["capacity_bytes"] == 10**9
    # the timeline is the sweep, sampled where it changes
    tl = r.memory["timeline"]["npu"]
    level = np.zeros(r.makespan_cycles + 2, np.int64)
    for b, (op, fin), free in holds:
        t0 = finish[op] if fin else start[op]
        t1 = r.makespan_cycles + 1 if free is None else (finish[free[0]] if free[1]
                                                          else start[free[0]])
        level[t0:max(t0, t1)] += b
    for (t, v), nxt in zip(tl, tl[1:] + [[r.makespan_cycles + 1, None]]):
        assert (level[t:nxt[0]] == v).all()


def test_over_capacity_names_the_device_bytes_and_capacity():
    g = OpGraph()
    a = g.compute("npu", 100)
    b = g.compute("npu", 100, after=[a])
    h1 = g.hold("npu", 600_000_000, a, what="stash of a")
    g.hold("npu", 500_000_000, b, what="stash of b")
    g.free(h1, b)
    g.free(1, b, "finish")
    g.compute("npu", 10, after=[b])
    with pytest.raises(GraphError, match=r"npu: 1,100,000,000 bytes held at once \(cycle 100\), "
                                         r"past its capacity of 1,000,000,000 bytes \(largest "
                                         r"held then: stash of a 600,000,000, stash of b "
                                         r"500,000,000\)"):
        run_graph(system(hbm_gb=1.0), g)
    r = run_graph(system(hbm_gb=1.0), g, check_memory=False)
    assert r.memory["devices"]["npu"]["peak_bytes"] == 1_100_000_000
    # released at the cycle the other is taken: they never add up
    g = OpGraph()
    a = g.compute("npu", 100)
    b = g.compute("npu", 100, after=[a])
    g.free(g.hold("npu", 600_000_000, a), a)
    g.free(g.hold("npu", 600_000_000, b), b)
    assert run_graph(system(hbm_gb=1.0), g).memory["devices"]["npu"]["peak_bytes"] == 600_000_000


def test_a_memory_node_frees_space():
    """Two writes of 600 kB to a 1 MB memory node: refused while the first is kept (before
    the run: it is never freed), accepted when a read of the first frees it before the
    second write starts; every byte is freed by the end."""
    N = 600_000
    g = OpGraph()
    w1 = g.mem_write("npu", "m", N, name="w1")
    g.mem_write("npu", "m", N, after=[w1], name="w2")
    with pytest.raises(GraphError, match="op w2: holding 600000 bytes at m passes its "
                                         "capacity of 1000000 bytes"):
        run_graph(system(cap_gb=0.001), g)
    g = OpGraph()
    w1 = g.mem_write("npu", "m", N, name="w1")
    r1 = g.mem_read("npu", "m", N, after=[w1], name="r1")
    g.free(g.space(w1), r1)
    w2 = g.mem_write("npu", "m", N, after=[r1], name="w2")
    r2 = g.mem_read("npu", "m", N, after=[w2], name="r2")
    g.free(g.space(w2), r2)
    r = run_graph(system(cap_gb=0.001), g)
    m = r.memory["devices"]["m"]
    assert m["peak_bytes"] == N and m["end_bytes"] == 0
    assert m["offloaded_bytes"] == 2 * N and m["prefetched_bytes"] == 2 * N
    npu = r.memory["devices"]["npu"]
    assert npu["offloaded_bytes"] == 2 * N and npu["capacity_bytes"] == 10**9
    # the second write waits for the first's read, which frees its space
    assert r.ops[2]["start"] >= r.ops[1]["finish"]


def test_host_dram_over_the_host_link(tmp_path):
    """A write of 8 MiB to the host's DRAM over a 16 GB/s link and a read back: each takes
    the bytes over the link (the slowest stage) plus one piece at the faster stages (HBM
    900 GB/s, DRAM 200 GB/s) and the latencies; the host's capacity is counted."""
    N, piece = 8 << 20, 32768
    p = tmp_path / "ops.toml"
    p.write_text('[[ops]]\nname = "w"\nkind = "mem_write"\nnpu = "npu"\nmem = "h"\n'
                 f'bytes = {N}\nfree_after = "r"\n'
                 '[[ops]]\nname = "r"\nkind = "mem_read"\nnpu = "npu"\nmem = "h"\n'
                 f'bytes = {N}\nafter = ["w"]\n')
    g = load_graph(p)
    r = run_graph(system(), g)
    ideal = N / 16.0 + piece / 200.0 + piece / 900.0
    for op in r.ops:
        t = op["finish"] - op["start"]
        assert ideal <= t <= ideal * 1.02 + 100, (op["kind"], t, ideal)
    h = r.memory["devices"]["h"]
    assert h["peak_bytes"] == N and h["end_bytes"] == 0 and h["capacity_bytes"] == 10**9
    # a read larger than the host's DRAM is refused before the run; two writes that fit
    # alone but are held at once, after it
    with pytest.raises(GraphError, match="op r: reading 8388608 bytes from h, more than its "
                                         "capacity of 1000000 bytes"):
        run_graph(system(dram_gb=0.001), g)
    g = OpGraph()
    w1 = g.mem_write("npu", "h", 600_000, name="w1")
    w2 = g.mem_write("npu", "h", 600_000, after=[w1], name="w2")
    for w in (w1, w2):
        g.free(g.space(w), g.mem_read("npu", "h", 600_000, after=[w2]))
    with pytest.raises(GraphError, match=r"h: 1,200,000 bytes held at once \(cycle [\d,]+\), "
                                         r"past its capacity of 1,000,000 bytes \(largest "
                                         r"held then: op w1 600,000, op w2 600,000\)"):
        run_graph(system(dram_gb=0.001), g)


def test_forward_dependencies_and_cycles():
    """depend() may point at an op added later: the graph runs in dependency order."""
    g = OpGraph()
    a = g.compute("npu", 100, name="a")
    b = g.compute("npu", 50, name="b")
    g.depend(a, b)                    # a waits for b, added after it
    r = run_graph(system(), g)
    assert [(o["start"], o["finish"]) for o in r.ops] == [(50, 150), (0, 50)]
    g.depend(b, a)
    with pytest.raises(GraphError, match="cycle of dependencies"):
        run_graph(system(), g)
    with pytest.raises(GraphError, match="cannot depend on itself"):
        g.depend(a, a)


def test_bad_holds_are_refused():
    g = OpGraph()
    a = g.compute("npu", 10)
    with pytest.raises(GraphError, match="edge = 'end'"):
        g.hold("npu", 10, a, "end")
    h = g.hold("nowhere", 10, a, what="x")
    with pytest.raises(GraphError, match="x: memory held at 'nowhere', no node of that name"):
        run_graph(system(), g)
    g.free(h, a)
    with pytest.raises(GraphError, match="freed twice"):
        g.free(h, a)
    with pytest.raises(GraphError, match="holds no space"):
        g.space(a)
