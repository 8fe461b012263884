"""Job streams on shared servers: allocation policies against their definitions enumerated by
brute force, the queue against hand-made streams, shapes and the cache against simulating
afresh, co-running jobs against max-min fair sharing, and refusals.

Job times here come from small op graphs built in this file (a compute op per NPU, then a ring
all-reduce, per iteration), so that the machinery is checked against closed forms; the
training iterations of real models are the builder of record (pysim.jobs.execute.training)."""
import itertools
import json
import math
import os

import numpy as np
import pytest

import refroutes
from pysim.config import from_dict
from pysim.errors import ConfigError
from pysim.jobs import policies as pol
from pysim.jobs import run_stream
from pysim.jobs.execute import simulate_shapes
from pysim.jobs.servers import load_server
from pysim.jobs.shape import shape
from pysim.jobs.stream import Job, generate, load_jobs, write_jobs
from pysim.workload.collectives import build

def comm_builder(cfg, spec, nodes, graph, prefix, iterations, topo=None):
    """Per iteration: `compute` cycles on every NPU, then a ring all-reduce of `bytes` in the
    order of `nodes` (spec['model'] names a row of MODELS); returns the iteration ends."""
    cycles, nbytes = MODELS[spec["model"]]
    ends, prev = [], []
    for _ in range(iterations):
        c = [graph.compute(n, cycles=cycles, after=prev) for n in nodes]
        last = c
        if len(nodes) > 1 and nbytes:
            lo = len(graph)
            build("all_reduce", "ring", list(nodes), nbytes, 4, graph=graph)
            for i in range(lo, len(graph)):
                if not graph.after[i]:
                    graph.after[i] = list(c)
            last = list(range(lo, len(graph)))
        prev = [graph.delay(0, after=last)]
        ends.append(prev[0])
    return ends


MODELS = {                     # name: (compute cycles per iteration, all-reduce bytes)
    "comm": (0, 4_000_000),
    "mixed": (60_000, 1_000_000),
    "light": (100_000, 200_000),
    "compute": (1_000_000, 0),
}


def server(**jobs):
    over = {f"jobs.{k}": v for k, v in jobs.items()}
    over.setdefault("jobs.models", list(MODELS))
    over.setdefault("jobs.insensitive", ["compute"])
    over.setdefault("jobs.sensitivity", "published")
    return load_server("dgx1-v100", over)


def run(srv, jobs=None, **kw):
    return run_stream(srv, jobs=jobs, builder=comm_builder, **kw)


@pytest.fixture(scope="module")
def dgx():
    return server()


def free_of(n, busy):
    f = np.ones(n, bool)
    f[list(busy)] = False
    return f


# ------------------------------------------------------------------ servers

def test_presets_have_mapas_nvlink_tables():
    """The DGX-1 V100 pairs and widths of MAPA's table (1-based there): 1-4, 1-5, 2-3, 2-6,
    3-4, 5-8, 6-7, 7-8 double, the other eight single, the rest none (PCIe)."""
    s = load_server("dgx-v")
    double = {(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)}
    single = {(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)}
    for i, j in itertools.combinations(range(8), 2):
        want = 50 if (i, j) in double else 25 if (i, j) in single else 0
        assert s.direct_gbps[i, j] == pytest.approx(want)
        assert s.route_gbps[i, j] == pytest.approx(want or 16.0)      # PCIe gen3 x16
    assert s.root == [0, 0, 0, 0, 1, 1, 1, 1]
    for name, n, links, roots in (("dgx-p", 8, 16, 2), ("summit", 6, 6, 2),
                                  ("torus-2d", 16, 32, 4), ("cubemesh-16", 16, 32, 4)):
        s = load_server(name)
        assert s.size == n and len(set(s.root)) == roots
        assert (s.direct_gbps.dense() > 0).sum() == 2 * links
        # every pair without an NVLink is reached over PCIe, never through another GPU
        for i, j in itertools.permutations(range(n), 2):
            inner = [u for u, _ in s.route(i, j)][1:]
            assert all(s.topo.node_kinds[u] in ("switch", "host") for u in inner)
    assert load_server("dgx-p").direct_gbps.dense().max() == pytest.approx(20.0)


def _ref_roots(t, npus):
    """Per NPU, a breadth-first search of its own through nodes that are not NPUs: the
    nearest host (lowest id among the nearest), numbered in order of first appearance."""
    adj = {}
    for a, b in zip(t.ch_src, t.ch_dst):
        adj.setdefault(a, set()).add(b)
    hosts = []
    for s in npus:
        seen, frontier, found = {s}, [s], None
        while frontier and found is None:
            nxt = []
            for u in frontier:
                for v in sorted(adj.get(u, ())):
                    if v not in seen and t.node_kinds[v] != "npu":
                        seen.add(v)
                        nxt.append(v)
            hits = sorted(v for v in nxt if t.node_kinds[v] == "host")
            found = hits[0] if hits else None
            frontier = nxt
        hosts.append(found if found is not None else -1 - s)
    order = {h: k for k, h in enumerate(dict.fromkeys(hosts))}
    return [order[h] for h in hosts]


@pytest.mark.parametrize("topology,table", [
    ({"kind": "torus", "dims": [4, 3, 2]}, lambda t: refroutes.dor_table(t, True)),
    ({"kind": "mesh", "dims": [5, 3]}, lambda t: refroutes.dor_table(t, False)),
    ({"kind": "cluster", **refroutes.CLUSTERS[1]}, refroutes.cluster_table),
    ({"kind": "cluster", **refroutes.CLUSTERS[4]}, refroutes.cluster_table),
])
def test_a_server_routed_by_rule_reads_its_pairs_as_a_table_built_pair_by_pair(topology,
                                                                               table):
    """A server's pair data come from the routes of the pairs asked for, looked up from the
    rule (no table of every pair): every NPU pair's route, its bandwidth (the narrowest link,
    parallel channels summed) and the direct link's equal what a walk of the reference table
    (refroutes: built entry by entry from the routing's definition) gives, and the root
    complexes equal a breadth-first search per NPU."""
    cfg = from_dict({"topology": topology, "network": {"model": "flow"}})
    s = load_server("probe", cfg=cfg)
    t = s.topo
    assert s.routing.rule is not None
    s.routing.tab = None           # (made for the exact deadlock analysis of a small network)
    ref = table(t)
    width = {}
    for c in range(t.n_channels):
        key = (t.ch_src[c], t.ch_dst[c])
        width[key] = width.get(key, 0.0) + t.ch_bytes_per_cycle[c] * cfg.network.clock_ghz
    n = s.size
    want_bw, want_direct = np.zeros((n, n)), np.zeros((n, n))
    for i, j in itertools.permutations(range(n), 2):
        u, d, hops = s.npus[i], s.npus[j], []
        while u != d:
            v = t.ch_dst[ref[u, d]]
            hops.append((u, v))
            u = v
        assert s.route(i, j) == tuple(hops)
        want_bw[i, j] = min(width[h] for h in hops)
        want_direct[i, j] = width.get((s.npus[i], s.npus[j]), 0.0)
    np.testing.assert_allclose(s.route_gbps.dense(), want_bw, rtol=1e-12)
    np.testing.assert_allclose(s.direct_gbps.dense(), want_direct, rtol=1e-12)
    assert s.root == _ref_roots(t, s.npus)
    i = np.array([0, n - 1, 1])                        # arrays: (0, 1), (n - 1, n - 1), (1, 0)
    assert s.route_gbps[i, i[::-1]].tolist() == [want_bw[0, 1], 0.0, want_bw[1, 0]]


def test_shipped_servers_roots_equal_a_search_per_npu():
    for name in ("dgx-v", "dgx-p", "summit", "torus-2d", "cubemesh-16"):
        s = load_server(name)
        assert s.root == _ref_roots(s.topo, s.npus)


@pytest.mark.slow
def test_a_server_of_65536_npus_loads_by_rule_and_refuses_too_many_placements_at_once():
    """A 64x32x32 torus as a server: loaded without a table of every pair; a job of 2 NPUs
    has 2,147,450,880 placements, refused at once naming the key that sets its size."""
    cfg = from_dict({"topology": {"kind": "torus", "dims": [64, 32, 32]},
                     "network": {"model": "flow"}})
    s = load_server("t64k", cfg=cfg)
    assert s.size == 65536 and s.routing.tab is None
    a, b = np.array([0, 5, 65535]), np.array([65535, 70, 1])
    assert s.route_gbps[a, b].tolist() == [s.link_gbps[s.route(0, 65535)[0]]] * 3
    assert len(s.route(0, 65535)) == 1 + 1 + 1        # one hop per dimension, round the wrap
    with pytest.raises(ConfigError, match="2,147,450,880 placements .* on 65,536 NPUs.*jobs.max_npus"):
        pol.Candidates(s, 2, "ring")


# ------------------------------------------------------------------ policies

def test_greedy_gives_a_pair_a_double_nvlink_on_an_idle_dgx(dgx):
    c = pol.Candidates(dgx, 2, "ring")
    i = pol.POLICIES["greedy"](dgx, Job(0, "comm", 2, 10), c, free_of(8, []))
    a, b = c.nodes[i]
    assert dgx.direct_gbps[a, b] == pytest.approx(50.0)
    assert dgx.route(a, b) == ((dgx.npus[a], dgx.npus[b]),)           # the link itself


def test_baseline_on_a_fragmented_dgx_gives_a_pcie_ring(dgx):
    c = pol.Candidates(dgx, 2, "ring")
    free = free_of(8, [0, 2, 3])                  # lowest free: gpu1 and gpu4, no NVLink
    i = pol.POLICIES["baseline"](dgx, Job(0, "comm", 2, 10), c, free)
    a, b = c.nodes[i]
    assert (dgx.names[a], dgx.names[b]) == ("gpu1", "gpu4")
    kinds = [dgx.topo.node_kinds[u] for u, _ in dgx.route(a, b)][1:]
    assert kinds and set(kinds) <= {"switch", "host"}


def test_pcie_ring_is_slower_by_the_ratio_of_bottleneck_bandwidths(dgx):
    """A large all-reduce alone on the double NVLink (50 GB/s) and on the PCIe path (16 GB/s):
    the times are in the ratio 50/16 within 5% (from the simulation)."""
    spec = dict(model="comm", batch=64, algorithm="ring")
    times = {}
    for pair in ([0, 3], [1, 4]):
        sh = shape(dgx, [pair], ["x"])
        times[tuple(pair)] = simulate_shapes(dgx.cfg, sh.topo, [(spec, sh.names[0], 1)],
                                      comm_builder)["ends"][0][0]
    ratio = times[(1, 4)] / times[(0, 3)]
    want = dgx.route_gbps[0, 3] / dgx.route_gbps[1, 4]
    assert want == pytest.approx(50 / 16)
    assert ratio == pytest.approx(want, rel=0.05)


def _brute(server, k, pattern, free):
    """Every placement on free NPUs with its score, bottleneck and the free NVLink bandwidth
    it leaves, from the definitions: rings as node sequences up to rotation and reflection."""
    out = []
    frees = [i for i in range(server.size) if free[i]]
    edges, flows = pol.pattern_edges(pattern, k)
    for nodes in itertools.permutations(frees, k):
        score = sum(server.route_gbps[nodes[a], nodes[b]] for a, b in edges)
        use = {}
        for a, b in flows:
            for h in server.route(nodes[a], nodes[b]):
                use[h] = use.get(h, 0) + 1
        pred = min(min(server.link_gbps[h] / use[h] for h in server.route(nodes[a], nodes[b]))
                   for a, b in flows)
        left = set(frees) - set(nodes)
        keep = sum(server.direct_gbps[i, j] for i, j in itertools.combinations(sorted(left), 2))
        out.append((nodes, score, pred, keep))
    return out


STATES = [(k, busy) for k in (2, 3, 4, 5)
          for busy in ([], [0], [1, 6], [0, 2, 5], [3, 4], [0, 1, 2])
          if 8 - len(busy) >= k]


@pytest.mark.parametrize("k,busy", STATES)
def test_policies_against_their_definitions(dgx, k, busy):
    free = free_of(8, busy)
    c = pol.Candidates(dgx, k, "ring")
    every = _brute(dgx, k, "ring", free)
    best_score = max(e[1] for e in every)
    best_pred = max(e[2] for e in every)
    best_keep = max(e[3] for e in every)
    for name in ("greedy", "preserve"):
        for sensitive in (True, False):
            i = pol.POLICIES[name](dgx, Job(0, "comm", k, 10, sensitive=sensitive), c, free)
            nodes = tuple(int(x) for x in c.nodes[i])
            mine = [e for e in every if e[0] == nodes][0]
            if name == "greedy":
                assert mine[1] == pytest.approx(best_score)
            elif sensitive:
                assert mine[2] == pytest.approx(best_pred)
                top = max(e[1] for e in every if e[2] >= best_pred - 1e-9)
                assert mine[1] == pytest.approx(top)
            else:
                # preserve leaves at least as much free NVLink bandwidth as greedy: the most
                assert mine[3] == pytest.approx(best_keep)
                g = pol.POLICIES["greedy"](dgx, Job(0, "comm", k, 10), c, free)
                gk = [e for e in every if e[0] == tuple(int(x) for x in c.nodes[g])][0][3]
                assert mine[3] >= gk - 1e-9
    # baseline: the k lowest-numbered free NPUs, in their best ring order
    i = pol.POLICIES["baseline"](dgx, Job(0, "comm", k, 10), c, free)
    low = sorted(np.flatnonzero(free)[:k])
    assert sorted(c.nodes[i]) == low
    assert c.score[i] == pytest.approx(max(e[1] for e in every if sorted(e[0]) == low))
    # topo_aware: inside one socket when one has room, else as baseline
    i = pol.POLICIES["topo_aware"](dgx, Job(0, "comm", k, 10), c, free)
    roots = {dgx.root[x] for x in c.nodes[i]}
    room = any(sum(free[x] for x in g) >= k for g in dgx.root_groups())
    assert (len(roots) == 1) == room


def test_preserve_keeps_more_nvlink_than_greedy_somewhere(dgx):
    """The check above is not vacuous: on some state preserve keeps strictly more."""
    gains = []
    for k, busy in STATES:
        free = free_of(8, busy)
        c = pol.Candidates(dgx, k, "ring")
        job = Job(0, "compute", k, 10, sensitive=False)
        p = pol.POLICIES["preserve"](dgx, job, c, free)
        g = pol.POLICIES["greedy"](dgx, job, c, free)
        gains.append(c.preserve(free)[p] - c.preserve(free)[g])
    assert min(gains) >= 0 and max(gains) > 0


def test_policies_are_a_registry_a_user_adds_to(dgx):
    @pol.register("last_free")
    def last_free(server, job, cands, free):
        ok = np.flatnonzero(cands.feasible(free))
        return int(ok[-1]) if ok.size else None
    try:
        srv = server(policies=["baseline", "last_free"])
        jobs = [Job(0, "compute", 2, 3)]
        res = run(srv, jobs).to_dict()
        assert [r["npus"] for r in res["jobs"] if r["policy"] == "last_free"] == \
            [["gpu6", "gpu7"]]
        with pytest.raises(ValueError, match="twice"):
            pol.register("last_free")(last_free)
    finally:
        del pol.POLICIES["last_free"]


# ------------------------------------------------------------------ the queue

def test_fifo_with_head_of_line_blocking():
    """Compute-only jobs (time alone = iterations x 1 ms, exactly) on 8 NPUs: J0 and J1 take
    4 NPUs each at 0; J2 (5 NPUs) waits for both; J3 (2 NPUs, arriving at 1 ms) would fit
    when J0 ends at 10 ms but is blocked behind J2 until 20 ms."""
    jobs = [Job(0, "compute", 4, 10), Job(1, "compute", 4, 20), Job(2, "compute", 5, 5),
            Job(3, "compute", 2, 5, arrival_s=0.001)]
    res = run(server(policies=["baseline"]), jobs).to_dict()
    start = {r["id"]: r["start_s"] for r in res["jobs"]}
    end = {r["id"]: r["end_s"] for r in res["jobs"]}
    assert start == pytest.approx({0: 0.0, 1: 0.0, 2: 0.020, 3: 0.020}, abs=1e-12)
    assert end == pytest.approx({0: 0.010, 1: 0.020, 2: 0.025, 3: 0.025}, abs=1e-12)
    by = {r["id"]: r for r in res["jobs"]}
    assert by[3]["queue_s"] == pytest.approx(0.019)
    pol_ = res["policies"]["baseline"]
    assert pol_["makespan"] == pytest.approx(0.025)
    assert pol_["queue_mean"] == pytest.approx((0 + 0 + 0.020 + 0.019) / 4)
    assert pol_["worst"] == pytest.approx(0.020)


def test_arrivals_after_an_idle_gap():
    jobs = [Job(0, "compute", 2, 2), Job(1, "compute", 8, 1, arrival_s=0.5)]
    res = run(server(policies=["greedy"]), jobs).to_dict()
    by = {r["id"]: r for r in res["jobs"]}
    assert by[1]["start_s"] == pytest.approx(0.5) and by[1]["end_s"] == pytest.approx(0.501)


# ------------------------------------------------------------------ shapes and the cache

def test_shapes_are_isomorphism_classes_and_simulate_like_the_server(dgx):
    """Isomorphic allocations (rank to rank) share a key and a non-isomorphic one does not;
    the cut-out network gives the same cycles as the whole server."""
    keys = {tuple(m): shape(dgx, [m], ["x"]).key for m in
            ([0, 3], [1, 2], [4, 7], [6, 5], [0, 1], [1, 4], [2, 7], [0, 1, 6, 7], [2, 3, 4, 5])}
    assert keys[(0, 3)] == keys[(1, 2)] == keys[(4, 7)] == keys[(6, 5)]
    assert keys[(1, 4)] == keys[(2, 7)]
    assert len({keys[(0, 3)], keys[(0, 1)], keys[(1, 4)], keys[(0, 1, 6, 7)]}) == 4
    spec = dict(model="mixed", batch=64, algorithm="ring")
    for m in ([1, 4], [0, 1, 6, 7], [2, 5, 7]):
        sh = shape(dgx, [m], ["x"])
        a = simulate_shapes(dgx.cfg, sh.topo, [(spec, sh.names[0], 2)], comm_builder)["ends"]
        b = simulate_shapes(dgx.cfg, None, [(spec, sh.names[0], 2)], comm_builder)["ends"]
        assert a == b
    # two jobs together: the order they are given in does not change the key
    x = shape(dgx, [[1, 4], [0, 5]], ["a", "b"])
    y = shape(dgx, [[0, 5], [1, 4]], ["b", "a"])
    assert x.key == y.key and x.names == y.names


def test_cache_gives_what_simulating_afresh_gives(tmp_path):
    """A stream whose jobs reuse shapes: the times with shapes and the cache equal those of
    simulating every job, and every group of jobs running together, on its own allocation
    on the whole server; a second run reads everything from the cache file."""
    from pysim.jobs.cache import Cache
    srv = load_server("dgx1-v100", {"jobs.count": 14, "jobs.models": ["mixed", "light"],
                                    "jobs.insensitive": [], "jobs.min_iterations": 3,
                                    "jobs.max_iterations": 8,
                                    "jobs.policies": ["baseline", "greedy"],
                                    "simulation.seed": 4})
    path = tmp_path / "shapes.sqlite"
    cached = run(srv, cache=Cache(path)).to_dict()
    fresh = run(srv, fresh=True).to_dict()
    assert cached["stats"]["cache_hits"] > 0 and cached["stats"]["together"] > 0
    assert fresh["stats"]["simulations"] > cached["stats"]["simulations"]
    for a, b in zip(cached["jobs"], fresh["jobs"]):
        assert (a["id"], a["policy"], a["npus"]) == (b["id"], b["policy"], b["npus"])
        assert a["exec_s"] == pytest.approx(b["exec_s"], rel=1e-12)
        assert a["start_s"] == pytest.approx(b["start_s"], rel=1e-12, abs=1e-15)
    again = run(srv, cache=Cache(path)).to_dict()
    assert again["stats"]["simulations"] == 0 and again["jobs"] == cached["jobs"]


@pytest.mark.parametrize("count,longest,policies", [
    (6, 3, ["baseline", "preserve"]), pytest.param(10, 6, None, marks=pytest.mark.slow)])
def test_determinism_per_seed(tmp_path, count, longest, policies):
    """The same seed gives the same stream and results in one process and over two workers;
    another seed another stream."""
    def go(seed, workers=1):
        over = {"jobs.count": count, "jobs.models": ["mixed", "light"],
                "jobs.min_iterations": 2, "jobs.max_iterations": longest,
                "simulation.seed": seed}
        if policies:
            over["jobs.policies"] = policies
        srv = load_server("dgx1-v100", over)
        return run(srv, workers=workers).to_dict()
    a, b, c = go(1), go(1, workers=2), go(2)
    assert json.dumps(a["jobs"]) == json.dumps(b["jobs"])
    assert a["policies"] == b["policies"]
    assert a["stream"] != c["stream"]


# ------------------------------------------------------------------ jobs running together

def test_jobs_sharing_pcie_links_share_their_bandwidth(dgx):
    """Two all-reduce jobs on gpu1-gpu4 and gpu0-gpu5 cross the same PCIe switch links and
    QPI in the same directions: max-min fair sharing halves each one's bandwidth, so each is
    slowed 2x (within 5%); two jobs on NVLink pairs share nothing and are not slowed. In the
    stream, the shorter ends at 2x its time alone and the longer then runs alone: its end is
    2 x (the shorter's work) + the rest, as the loop's fluid model says."""
    jobs = [Job(0, "comm", 2, 4), Job(1, "comm", 2, 8)]
    placements = {0: [1, 4], 1: [0, 5]}

    @pol.register("pinned")
    def pinned(server, job, cands, free):
        want = placements[job.id]
        hit = np.flatnonzero((cands.nodes == want).all(axis=1) & cands.feasible(free))
        return int(hit[0]) if hit.size else None
    try:
        res = run(server(policies=["pinned"]), jobs).to_dict()
        placements.update({0: [0, 3], 1: [1, 2]})
        apart = run(server(policies=["pinned"]), jobs).to_dict()
    finally:
        del pol.POLICIES["pinned"]
    by = {r["id"]: r for r in res["jobs"]}
    s = by[0]["slowdown"]
    assert s == pytest.approx(2.0, rel=0.05)
    w0, w1 = by[0]["alone_s"], by[1]["alone_s"]
    assert by[0]["exec_s"] == pytest.approx(s * w0, rel=1e-9)
    assert by[1]["contended_s"] == pytest.approx(s * w0, rel=1e-9)
    # (its own slowdown, measured in the same simulation, equals the first's within noise)
    assert by[1]["exec_s"] == pytest.approx(s * w0 + (w1 - w0), rel=1e-4)
    assert res["stats"]["together"] == 1
    assert all(r["slowdown"] == 1.0 for r in apart["jobs"]) and apart["stats"]["together"] == 0


# ------------------------------------------------------------------ streams and refusals

def test_generator_follows_mapas_parameters():
    srv = load_server("dgx1-v100", {"jobs.count": 600, "jobs.arrivals": "uniform",
                                    "jobs.window_s": 100.0, "simulation.seed": 3,
                                    "jobs.sensitivity": "published"})
    jobs = generate(srv.cfg)
    n = np.array([j.npus for j in jobs])
    assert set(n) == {2, 3, 4, 5} and all(np.bincount(n)[2:] > 100)
    models = {j.model for j in jobs}
    assert models == {"alexnet", "inception_v3", "resnet50", "vgg16", "googlenet", "caffenet"}
    assert all(j.sensitive == (j.model not in ("googlenet", "caffenet")) for j in jobs)
    t = [j.arrival_s for j in jobs]
    assert t == sorted(t) and 0 <= t[0] and t[-1] < 100.0
    it = [j.iterations for j in jobs]
    assert min(it) >= 500 and max(it) <= 2400 and {j.pattern for j in jobs} == {"ring"}
    batch = load_server("dgx1-v100", {"jobs.count": 5})
    assert all(j.arrival_s == 0 for j in generate(batch.cfg))


def test_job_file_round_trip(tmp_path):
    srv = load_server("dgx1-v100", {"jobs.count": 7, "jobs.patterns": ["ring", "clique", "tree"]})
    jobs = generate(srv.cfg)
    write_jobs(jobs, tmp_path / "s.toml")
    assert load_jobs(tmp_path / "s.toml", srv.cfg) == jobs


@pytest.mark.parametrize("text,match", [
    ("", "no jobs"),
    ("[[jobs]]\nmodel = 'comm'\nnpus = 2\n", "missing iterations"),
    ("[[jobs]]\nmodel = 'comm'\nnpus = 0\niterations = 3\n", "npus = 0"),
    ("[[jobs]]\nmodel = 'comm'\nnpus = 2\niterations = 3\npattern = 'star'\n", "pattern"),
    ("[[jobs]]\nmodel = 'comm'\nnpus = 2\niterations = 3\ngpus = 2\n", "unknown field"),
    ("[[jobs]]\nmodel = 'comm'\nnpus = 2\niterations = 3\narrival_s = -1\n", "arrival_s"),
])
def test_bad_job_files(tmp_path, text, match):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_jobs(p, server().cfg)


def test_bad_input():
    with pytest.raises(ConfigError, match="asks for 9 NPUs.*has 8"):
        run(server(), [Job(0, "comm", 9, 3)])
    with pytest.raises(ConfigError, match="unknown policy 'greedyy'.*did you mean 'greedy'"):
        run(server(policies=["greedyy"]), [Job(0, "comm", 2, 3)])
    with pytest.raises(ConfigError, match="empty"):
        run(server(), [])
    with pytest.raises(ConfigError, match="jobs.count = 0"):
        server(count=0)
    with pytest.raises(ConfigError, match="min_npus = 6 > jobs.max_npus = 5"):
        server(min_npus=6)
    with pytest.raises(ConfigError, match="jobs.patterns"):
        server(patterns=["star"])
    with pytest.raises(ConfigError, match="window_s"):
        generate(server(arrivals="uniform").cfg)
    with pytest.raises(ConfigError, match="not a server preset"):
        load_server("dgx-z")
    with pytest.raises(ConfigError, match="1 NPU"):
        _one_npu()


def _one_npu():
    from pysim.config import from_dict
    cfg = from_dict({"topology": {"kind": "graph", "nodes": [
        {"name": "g", "kind": "npu"}, {"name": "h", "kind": "host"}],
        "links": [{"a": "g", "b": "h"}]}})
    return load_server("tiny", cfg=cfg)


def test_unknown_model_is_refused_with_the_zoo():
    from pysim.jobs import execute
    with pytest.raises(ConfigError, match="model 'resnet5' is unknown.*did you mean 'resnet50'"):
        run_stream(server(), [Job(0, "resnet5", 2, 3)], builder=execute.training)


def test_a_job_files_unknown_model_is_refused_naming_the_file(tmp_path):
    """A job file's mistake is reported where it is: the file, the job and the model."""
    path = tmp_path / "stream.toml"
    write_jobs([Job(0, "resnet50", 2, 3), Job(1, "resnet5", 2, 3, arrival_s=1.0)], str(path))
    srv = load_server("dgx1-v100", {"jobs.file": str(path)})
    with pytest.raises(ConfigError, match=f"^{path}: job 1: model 'resnet5' is unknown"):
        run_stream(srv)


# ------------------------------------------------------------------ command line

@pytest.fixture
def cli(monkeypatch):
    from click.testing import CliRunner
    from pysim import cli as cli_mod
    from pysim.jobs import execute
    monkeypatch.setattr(execute, "training", comm_builder)

    def invoke(*args):
        return CliRunner().invoke(cli_mod.main, [str(a) for a in args])
    return invoke


def test_cli_jobs_json_and_plot(cli, tmp_path):
    out, fig, js = tmp_path / "jobs.json", tmp_path / "cdf.png", tmp_path / "stream.toml"
    r = cli("jobs", "dgx1-v100", "--jobs", 6, "--policy", "baseline,greedy,preserve",
            "--seed", 2, "--set", 'jobs.models=["mixed","light"]', "--set",
            "jobs.min_iterations=2", "--set", "jobs.max_iterations=3", "--json", out,
            "--write-jobs", js)
    assert r.exit_code == 0, r.output
    assert "baseline" in r.output and "p75" in r.output and "/ baseline" in r.output
    d = json.loads(out.read_text())
    assert list(d["policies"]) == ["baseline", "greedy", "preserve"]
    for p in d["policies"].values():
        assert {"mean", "p50", "p75", "p95", "worst", "queue_mean", "makespan"} <= set(p)
    assert len(d["jobs"]) == 18
    for j in d["jobs"]:
        assert {"npus", "start_s", "end_s", "exec_s", "score_gbps", "policy"} <= set(j)
        assert j["end_s"] - j["start_s"] == pytest.approx(j["exec_s"])
    assert d["config"]["jobs"]["count"] == 6 and d["seed"] == 2 and d["version"]
    # the stream written out runs again to the same result
    r = cli("jobs", "dgx1-v100", "--job-file", js, "--policy", "baseline,greedy,preserve",
            "--seed", 2, "--json", tmp_path / "again.json")
    assert r.exit_code == 0, r.output
    again = json.loads((tmp_path / "again.json").read_text())
    assert [j["exec_s"] for j in again["jobs"]] == [j["exec_s"] for j in d["jobs"]]
    r = cli("plot", out, "--kind", "jobs", "-o", fig)
    assert r.exit_code == 0, r.output
    assert fig.stat().st_size > 10_000
    r = cli("jobs", "dgx1-v100", "--jobs", 3, "--json", out)
    assert r.exit_code != 0 and "exists" in r.output


@pytest.mark.parametrize("args,match", [
    (("--jobs", 0), "jobs.count = 0"),
    (("--policy", "baseline,fastest"), "unknown policy 'fastest'"),
    (("--set", "jobs.min_npus=9", "--set", "jobs.max_npus=9"), "asks for 9 NPUs"),
    (("--workers", 0), "--workers 0"),
])
def test_cli_jobs_bad_input(cli, args, match):
    r = cli("jobs", "dgx1-v100", *args)
    assert r.exit_code == 1 and match in r.output, r.output


@pytest.mark.parametrize("over,match", [
    ({"jobs.count": 7}, r"jobs.count = 7 is read by a generated stream only: jobs.file = "
                        r"'.*st.toml' gives the jobs \(leave the key out\)"),
    ({"jobs.min_npus": 3}, r"jobs.min_npus = 3 is read by a generated stream only"),
    ({"jobs.models": ["vgg16"]}, r"jobs.models = \['vgg16'\] is read by a generated stream"),
])
def test_a_generated_streams_keys_beside_a_job_file_are_refused(tmp_path, over, match):
    """With a job file, the keys that draw a stream (how many jobs, their sizes, models,
    patterns, iterations, arrivals) have no effect: refused, naming the key and the file."""
    path = tmp_path / "st.toml"
    path.write_text('[[jobs]]\nmodel = "resnet50"\nnpus = 2\niterations = 5\n')
    with pytest.raises(ConfigError, match=match):
        load_server("dgx1-v100", {"jobs.file": str(path), **over})
    assert load_server("dgx1-v100", {"jobs.file": str(path), "jobs.batch_per_npu": 8})


def test_an_arrival_window_without_uniform_arrivals_is_refused():
    with pytest.raises(ConfigError, match=r"jobs.window_s = 1.0 is read only with jobs.arrivals "
                                          r"= 'uniform' \(it is 'batch': every job at time 0\)"):
        load_server("dgx1-v100", {"jobs.window_s": 1.0})
    assert load_server("dgx1-v100", {"jobs.window_s": 1.0, "jobs.arrivals": "uniform"})


def test_a_files_generated_stream_gives_way_to_a_job_file_given_over_it(tmp_path):
    """A config file that draws a stream (jobs.count, arrivals, window_s) run with a job file
    (--job-file, --set jobs.file) or other arrivals (--set jobs.arrivals) given over it: the
    file's keys the new choice does not read are left out, as a file's workload keys are when
    --set workload.kind changes the kind; given as overrides beside it they are still
    refused (above)."""
    st = tmp_path / "st.toml"
    st.write_text('[[jobs]]\nmodel = "resnet50"\nnpus = 2\niterations = 5\n')
    mine = tmp_path / "mine.toml"
    mine.write_text('[topology]\nfile = "dgx1-v100"\n\n[jobs]\ncount = 4\n'
                    'arrivals = "uniform"\nwindow_s = 100.0\nbatch_per_npu = 8\n')
    cfg = load_server(str(mine), {"jobs.file": str(st)}).cfg
    assert cfg.jobs.file == str(st) and cfg.jobs.batch_per_npu == 8
    assert not any(cfg.is_set(f"jobs.{k}") for k in ("count", "arrivals", "window_s"))
    cfg = load_server(str(mine), {"jobs.arrivals": "batch"}).cfg
    assert cfg.jobs.count == 4 and cfg.jobs.arrivals == "batch"
    assert not cfg.is_set("jobs.window_s")
    with pytest.raises(ConfigError, match="jobs.count = 7 is read by a generated stream"):
        load_server(str(mine), {"jobs.file": str(st), "jobs.count": 7})


def test_an_option_and_a_set_of_its_key_are_refused_together(cli):
    r = cli("jobs", "dgx1-v100", "--jobs", 5, "--set", "jobs.count=7")
    assert r.exit_code == 1 and "--jobs 5 and --set jobs.count=7 both set jobs.count" in \
        r.output, r.output


def test_cli_plot_jobs_refuses_other_files(cli, tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"makespan_cycles": 3}))
    r = cli("plot", p, "--kind", "jobs", "-o", tmp_path / "x.png")
    assert r.exit_code == 1 and "not a job stream" in r.output


def test_the_default_stream_models_are_in_the_zoo():
    """MAPA's six networks; CaffeNet has the parameter count of Caffe's
    bvlc_reference_caffenet (60,965,224) and its 256 x 6 x 6 features at 227 x 227."""
    from pysim import models
    srv = load_server("dgx1-v100")
    assert set(srv.cfg.jobs.models) <= set(models.names())
    m = models.get("caffenet")
    assert m.params == 60_965_224
    assert [l.out_shape for l in m.layers if l.name == "pool5"] == [(256, 6, 6)]
    assert m.fwd_flops == pytest.approx(2 * 724e6, rel=0.01)    # 724 M multiply-adds


def test_whole_stream_simulation_agrees_where_nothing_contends():
    """With compute-only jobs nothing is shared, so the event loop's times are exact: one
    simulation of the whole stream (every iteration of every job, the same decisions) gives
    the same starts and ends."""
    from pysim.jobs.whole import compare
    jobs = [Job(0, "compute", 4, 10), Job(1, "compute", 4, 20), Job(2, "compute", 5, 5),
            Job(3, "compute", 2, 5, arrival_s=0.001), Job(4, "compute", 3, 4, arrival_s=0.03)]
    srv = server(policies=["baseline"])
    res = run(srv, jobs)
    for row in compare(srv, jobs, res, comm_builder):
        assert row["whole_start_s"] == pytest.approx(row["loop_start_s"], abs=1e-12)
        assert row["whole_end_s"] == pytest.approx(row["loop_end_s"], abs=1e-12)


def test_event_loop_against_one_simulation_of_the_whole_stream():
    """Three jobs on PCIe paths that cross the same links, starting at different times (so
    contention begins mid-iteration), on the flow-level network: the event loop's execution
    times are within 5% of one simulation of the whole stream; ignoring contention ('apart')
    is off by far more."""
    from pysim.jobs.whole import compare
    jobs = [Job(0, "comm", 2, 6), Job(1, "mixed", 2, 8, arrival_s=0.0003),
            Job(2, "comm", 3, 3, arrival_s=0.0011)]
    placements = {0: [1, 4], 1: [0, 5], 2: [2, 6, 7]}

    @pol.register("pinned3")
    def pinned(server, job, cands, free):
        hit = np.flatnonzero((cands.nodes == placements[job.id]).all(axis=1) &
                             cands.feasible(free))
        return int(hit[0]) if hit.size else None
    try:
        errors = {}
        for corun in ("together", "apart"):
            srv = load_server("dgx1-v100", {"jobs.models": list(MODELS),
                                            "jobs.policies": ["pinned3"], "jobs.corun": corun,
                                            "network.model": "flow"})
            res = run(srv, jobs)
            rows = compare(srv, jobs, res, comm_builder)
            errors[corun] = max(abs(r["error"]) for r in rows)
            if corun == "together":
                assert res.to_dict()["stats"]["together"] >= 2
    finally:
        del pol.POLICIES["pinned3"]
    assert errors["together"] < 0.05
    assert errors["apart"] > 0.3


def test_docs_describe_every_jobs_key_and_option():
    from pysim.config import KEYS
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(here, "docs", "jobs.md")).read()
    for k in KEYS:
        if k.section == "jobs" or k.path == "topology.transit":
            assert f"`{k.path}`" in text or k.path in text, k.path
    for opt in ("--jobs", "--policy", "--seed", "--job-file", "--set", "--json", "--write-jobs",
                "--cache", "--workers", "--scheduler", "--force"):
        assert opt in text, opt


def test_a_stream_on_a_dask_cluster_gives_the_same_result():
    distributed = pytest.importorskip("distributed")
    jobs = [Job(0, "mixed", 2, 3), Job(1, "light", 3, 2), Job(2, "mixed", 4, 2),
            Job(3, "comm", 2, 2, arrival_s=0.0001)]
    srv = server(policies=["baseline", "greedy"])
    local = run(srv, jobs).to_dict()
    with distributed.LocalCluster(n_workers=2, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            remote = run(srv, jobs, scheduler=client).to_dict()
    assert remote["jobs"] == local["jobs"]


def test_a_shape_met_again_is_named_after_its_placement(dgx):
    """(The shapes' networks are built once per server; a second placement of a shape gets
    the network with its own nodes' names.)"""
    a = shape(dgx, [[1, 4]], ["x"])
    b = shape(dgx, [[2, 7]], ["x"])
    assert a.key == b.key
    assert b.topo.node_names[:2] == ["gpu2", "gpu7"] and a.topo.node_names[:2] == ["gpu1", "gpu4"]


def test_training_builder_matches_the_training_workload(dgx):
    """The builder of record: GoogLeNet, data parallel on a double-NVLink pair, batch 32 per
    GPU; the steady-state iteration the jobs see is the training workload's own iteration
    time for the same NPUs (workload.kind = 'training', its last iteration), within 1%; the
    ranks that send are the ring's neighbours."""
    from pysim.jobs.execute import training
    from pysim import simulate
    spec = dict(model="googlenet", batch=64, algorithm="ring")
    sh = shape(dgx, [[0, 3]], [tuple(sorted(spec.items()))], (), [[(0, 1), (1, 0)]])
    res = simulate_shapes(dgx.cfg, sh.topo, [(spec, sh.names[0], 2)], training)
    e = res["ends"][0]
    assert res["pairs"][0] == [(0, 1), (1, 0)]
    ref = simulate(dgx.cfg.with_overrides({
        "workload.kind": "training", "workload.model": "googlenet", "workload.batch": 64,
        "workload.group": ["gpu0", "gpu3"], "workload.ring_order": ["gpu0", "gpu3"],
        "workload.iterations": 2}))
    assert e[1] - e[0] == pytest.approx(ref.to_dict()["iteration_cycles"], rel=0.01)


def test_a_stream_runs_at_the_flow_level_unless_the_level_is_set(tmp_path, cli):
    """A stream needs a simulation per shape and per group of jobs running together (hundreds
    for a thousand jobs), each a few training iterations; it runs them at the flow level
    unless network.model is set, in the server's file or as an override, and says which
    level it ran at."""
    from pysim import systems
    assert load_server("dgx1-v100").cfg.network.model == "flow"
    assert load_server("dgx1-v100", {"network.model": "flit"}).cfg.network.model == "flit"
    text = open(os.path.join(systems.directory(), "dgx1-v100.toml")).read()
    assert "\n[network]\n" in text
    f = tmp_path / "mine.toml"
    f.write_text(text.replace("\n[network]\n", '\n[network]\nmodel = "flit"\n', 1))
    assert load_server(str(f)).cfg.network.model == "flit"
    out = tmp_path / "j.json"
    r = cli("jobs", "dgx1-v100", "--jobs", 3, "--policy", "baseline", "--set",
            'jobs.models=["mixed","light"]', "--set", "jobs.min_iterations=2", "--set",
            "jobs.max_iterations=3", "--json", out)
    assert r.exit_code == 0, r.output
    assert "at the flow level" in r.output
    d = json.loads(out.read_text())
    assert d["config"]["network"]["model"] == "flow" == d["stats"]["network_model"]


def test_every_simulation_of_a_stream_is_counted():
    """The stream's statistics count every simulation it ran, those that derive the jobs'
    bandwidth sensitivity included: with an empty cache each simulation is one new entry of
    it, and the simulated cycles are the entries' cycles summed."""
    from pysim.jobs.cache import Cache
    srv = server(sensitivity="derived", insensitive=[], policies=["baseline", "preserve"])
    jobs = [Job(0, "comm", 2, 10, sensitive=None), Job(1, "mixed", 3, 10, sensitive=None),
            Job(2, "comm", 2, 5, sensitive=None)]
    cache = Cache()
    st = run(srv, jobs, cache=cache).to_dict()["stats"]
    assert st["simulations"] == len(cache.mem) == cache.misses
    assert st["sim_cycles"] == sum(v["cycles"] for v in cache.mem.values())
    assert st["for_sensitivity"] == 4          # two kinds, each on its best and worst shape
    assert "4 for bandwidth sensitivity" in run(srv, jobs).summary()


def test_sensitivity_is_simulated_only_for_a_policy_that_reads_it():
    """The labels are read by preserve alone (policies.LABELLED): a stream under policies
    that do not read them runs none of the best- and worst-placement simulations that derive
    them -- only the loop's own (each job alone on the placement it got, the groups running
    together) -- and leaves the jobs' labels unknown; with preserve the same stream derives
    them (two kinds, each on its best and worst placement)."""
    from pysim.jobs import policies
    from pysim.jobs.cache import Cache
    assert policies.LABELLED == {"preserve"}
    jobs = [Job(0, "comm", 2, 10, sensitive=None), Job(1, "mixed", 3, 10, sensitive=None)]
    for names, derived in ((["baseline"], 0), (["baseline", "greedy", "topo_aware"], 0),
                           (["baseline", "preserve"], 4)):
        srv = server(sensitivity="derived", insensitive=[], policies=names)
        res = run(srv, jobs, cache=Cache()).to_dict()
        st = res["stats"]
        assert st["for_sensitivity"] == derived == 2 * len(st["sensitivity"]), names
        labels = [j["sensitive"] for j in res["stream"]]
        assert all(x is None if not derived else isinstance(x, bool) for x in labels), names


def test_a_stream_at_the_flit_level_says_a_lower_bound_of_its_work_first():
    """At the flit level a stream's simulations are long: before any runs it is given a
    lower bound of their work (each kind of job alone on its best placement, twice where its
    sensitivity is derived for a policy that reads it: not here), which the flit-hops the simulations then move bound from
    above; said as 'at least', with the flow level beside it."""
    from pysim.workload import runtime
    srv = server(sensitivity="derived", insensitive=[], policies=["baseline"])
    flit = load_server("dgx1-v100", {**{f"jobs.{k}": v for k, v in dict(
        models=list(MODELS), insensitive=[], sensitivity="derived",
        policies=["baseline"]).items()}, "network.model": "flit"})
    jobs = [Job(0, "comm", 2, 10, sensitive=None), Job(1, "mixed", 3, 10, sensitive=None),
            Job(2, "comm", 2, 5, sensitive=True)]
    seen = []

    class Progress:
        def __call__(self, done, total):
            seen.append(("done", done))

        def estimate(self, est):
            seen.append(("estimate", est))
    st = run(flit, jobs, progress=Progress()).to_dict()["stats"]
    kind, est = seen[0]
    assert kind == "estimate" and est["least"] and est["simulations"] == 2   # (no labels)
    assert 0 < est["flit_hops"] <= st["flit_hops"]
    line = runtime.describe({**est, "seconds": {"flit": 3600.0, "flow": 1.0}})
    assert line.startswith("estimate: at least 60 min to simulate at the flit level "
                           "(2 simulations, ")
    assert "at the flow level (network.model = 'flow') about 1 s" in line
    seen.clear()
    run(srv, jobs, progress=Progress())          # the flow level: nothing to warn of
    assert all(k == "done" for k, _ in seen)


def test_progress_counts_every_job_as_it_ends():
    """progress(done, total) is called as each job ends, over all policies (not once a policy
    has run its whole stream), done going up by one to the total."""
    srv = server(policies=["baseline", "greedy"], count=5, min_iterations=2,
                 max_iterations=4)
    calls = []
    run(srv, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 10) for i in range(1, 11)]


def test_sensitivity_is_derived_from_the_best_and_worst_placements():
    """Derived labels: a job that only computes takes the same time on every placement
    (sensitivity 0: insensitive); one that only communicates takes longer on its worst
    placement (a PCIe ring across the sockets) than on its best (double NVLinks): sensitive,
    whatever the published labels say; a job file's own label wins; 'published' takes the
    labels of jobs.insensitive."""
    srv = server(**{"sensitivity": "derived", "insensitive": ["comm"]})
    jobs = [Job(0, "comm", 2, 10, sensitive=None), Job(1, "compute", 2, 10, sensitive=None),
            Job(2, "comm", 3, 10, sensitive=False)]
    res = run(srv, jobs=jobs).to_dict()
    label = {j["id"]: j["sensitive"] for j in res["stream"]}
    assert label == {0: True, 1: False, 2: False}
    rows = {(r["model"], r["npus"]): r for r in res["stats"]["sensitivity"]}
    assert rows[("compute", 2)]["sensitivity"] == 0.0
    assert rows[("comm", 2)]["sensitivity"] > 1.0 and not rows[("comm", 2)]["published"]
    assert ("comm", 3) not in rows                  # labelled by its job file
    pub = server(**{"sensitivity": "published", "insensitive": ["comm"]})
    assert [j.sensitive for j in generate(pub.cfg)[:20]] == [
        j.model != "comm" for j in generate(pub.cfg)[:20]]
    with pytest.raises(ConfigError, match="jobs.sensitivity"):
        server(**{"sensitivity": "labels"})


def test_a_server_of_64_npus_and_more_places_jobs_by_index():
    """Placements are checked against the free NPUs by index (no 64-bit masks): on mesh8x8
    (64 NPUs, its mesh links the direct links) the feasible placements of a 2-NPU ring are
    the pairs of free NPUs, and what `preserve` leaves is, by brute force, the direct-link
    bandwidth among the free NPUs outside each placement -- NPU 63 included."""
    s = load_server("mesh8x8")
    assert s.size == 64
    c = pol.Candidates(s, 2, "ring")
    free = np.ones(64, bool)
    free[[0, 9, 27, 62]] = False
    ok = c.feasible(free)
    assert ok.tolist() == [bool(free[a] and free[b]) for a, b in c.nodes]
    direct = s.direct_gbps.dense()
    got = c.preserve(free)
    for k in (0, 100, len(c) - 1, int(np.flatnonzero((c.nodes == 63).any(axis=1))[0])):
        left = free.copy()
        left[c.nodes[k]] = False
        want = sum(direct[i, j] for i, j in itertools.combinations(np.flatnonzero(left), 2))
        assert got[k] == pytest.approx(want)


def test_predicted_bandwidth_is_the_same_in_chunks_of_any_size():
    """_predicted looks the routes up per chunk of placements (bounded memory): chunks of 1,
    7 and all placements give the same bandwidths (rings of 4 and trees of 3 on the DGX-1)."""
    s = load_server("dgx-v")
    for k, pattern in ((4, "ring"), (3, "tree")):
        c = pol.Candidates(s, k, pattern)
        flows = pol.pattern_edges(pattern, k)[1]
        for chunk in (1, 7):
            got = pol._predicted(s, c.nodes, flows, pairs_at_once=chunk * len(flows))
            np.testing.assert_array_equal(got, c.predicted)


@pytest.mark.parametrize("k,pattern", [(3, "ring"), (3, "clique"), (3, "tree")])
def test_placements_on_a_mesh_against_their_definitions(k, pattern):
    """On mesh8x8 (64 NPUs: the routes of every pair looked up at once, and rows of many
    of links, many shared) the placements are every k-set in lexicographic order with its
    orders adjacent, and a sample's score and predicted bandwidth are the definitions':
    the sum of the edges' route bandwidths, the least share of a link among the edges
    crossing it."""
    s = load_server("mesh8x8")
    c = pol.Candidates(s, k, pattern)
    per_set = len(pol.orders(tuple(range(k)), pattern))
    assert len(c) == math.comb(64, k) * per_set
    sets = np.sort(c.nodes, axis=1)[::per_set]
    assert [tuple(x) for x in sets[:3]] + [tuple(sets[-1])] == \
        list(itertools.islice(itertools.combinations(range(64), k), 3)) + \
        [tuple(range(64 - k, 64))]
    assert (c.set_id == np.arange(len(c)) // per_set).all()
    edges, flows = pol.pattern_edges(pattern, k)
    for i in np.random.default_rng(3).integers(len(c), size=60):
        nodes = [int(x) for x in c.nodes[i]]
        assert sorted(nodes) == list(sets[i // per_set])
        score = sum(s.route_gbps[nodes[a], nodes[b]] for a, b in edges)
        use = {}
        for a, b in flows:
            for h in s.route(nodes[a], nodes[b]):
                use[h] = use.get(h, 0) + 1
        pred = min(s.link_gbps[h] / use[h] for a, b in flows for h in s.route(nodes[a],
                                                                              nodes[b]))
        assert c.score[i] == pytest.approx(score, rel=1e-12)
        assert c.predicted[i] == pytest.approx(pred, rel=1e-12)
