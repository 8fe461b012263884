"""OpGraph's columns (typed arrays, dependencies as CSR) against a reference model: every op
also recorded in plain Python lists as it is added (kind, node, dst, size, dependencies, name,
work), the way the graph kept its ops op by op. The graph read back, op by op (`g.kind`,
`g.after`, ...) and as arrays (`g.arrays()`, `g.roofline()`), must equal the lists, whatever
way the ops came in: one by one, in bulk (`add_ops`), a collective's part instanced again
(`_Part.add`), dependencies added later (`depend`, `start_after`, assignment)."""
import math

import numpy as np
import pytest

from pysim.errors import GraphError
from pysim.workload import OpGraph
from pysim.workload import collectives as coll
from pysim.workload.compile import KIND_OF, OP_CODES, ROOFLINE

NPUS = [f"n{i}" for i in range(6)]


class Reference:
    """The ops as lists, one entry per op."""

    def __init__(self):
        self.kind, self.node, self.dst, self.size, self.after = [], [], [], [], []
        self.names, self.work = [], []
        self.holds = []

    def add(self, kind, node, dst, size, after, name=None, work=None):
        self.kind.append(kind)
        self.node.append(node)
        self.dst.append(dst)
        self.size.append(size)
        self.after.append(list(after))
        self.names.append(name)
        self.work.append(work)


def assert_same(g, ref):
    assert len(g) == len(ref.kind)
    for f in ("kind", "node", "dst", "size", "after", "names", "work"):
        assert list(getattr(g, f)) == getattr(ref, f), f
        assert [getattr(g, f)[i] for i in range(len(g))] == getattr(ref, f), f
    assert list(g.holds) == ref.holds
    a = g.arrays()
    names = g.node_names + [None]
    h = g.hold_arrays()
    assert [[names[d], b, (at, af), (e, ef) if e >= 0 else None, w] for d, b, at, af, e, ef, w
            in zip(h["dev"], h["bytes"].tolist(), h["at"].tolist(), h["at_finish"].tolist(),
                   h["end"].tolist(), h["end_finish"].tolist(), h["what"])] == ref.holds
    assert [KIND_OF[c] for c in a["code"]] == ref.kind
    assert [names[i] for i in a["node"]] == ref.node
    assert [names[i] for i in a["dst"]] == ref.dst
    assert a["size"].tolist() == ref.size
    ptr, dep = a["dep_ptr"], a["dep"]
    assert [dep[ptr[i]:ptr[i + 1]].tolist() for i in range(len(g))] == ref.after
    ops, flops, nbytes, peak = g.roofline()
    roof = [i for i, w in enumerate(ref.work) if w is not None]
    assert ops.tolist() == roof == np.flatnonzero(a["code"] == ROOFLINE).tolist()
    assert [(f, b, None if math.isnan(p) else p)
            for f, b, p in zip(flops.tolist(), nbytes.tolist(), peak.tolist())] == \
        [ref.work[i] for i in roof]


@pytest.mark.parametrize("seed", range(4))
def test_the_columns_read_back_as_the_ops_were_added(seed):
    rng = np.random.default_rng(seed)
    g, ref = OpGraph(), Reference()
    for i in range(400):
        n = len(g)
        if i % 37 == 36:                  # read back midway too
            assert_same(g, ref)
        after = sorted(set(rng.integers(0, n, rng.integers(0, 4)).tolist())) if n else []
        a, b = (str(x) for x in rng.choice(NPUS, 2, replace=False))
        size = int(rng.integers(0, 1 << 40))
        k = int(rng.integers(0, 10))
        name = f"op {i}" if rng.random() < 0.3 else None
        if k == 0:
            g.compute(a, size, after=after, name=name)
            ref.add("compute", a, None, size, after, name)
        elif k == 1:
            f, peak = float(rng.random() * 1e12), (None if rng.random() < 0.5 else 1e14)
            g.compute(a, flops=f, bytes=size, after=after, name=name, peak_flops=peak)
            ref.add("compute", a, None, -1, after, name, (f, size, peak))
        elif k == 2:
            g.send(a, b, size, after=after, name=name)
            ref.add("send", a, b, size, after, name)
        elif k == 3:
            g.delay(size, after=after, name=name)
            ref.add("delay", None, None, size, after, name)
        elif k == 4:
            engine = "npu" if rng.random() < 0.5 else "offload"
            g.reduce(a, size, engine, after=after, name=name)
            ref.add("reduce_" + engine, a, None, size, after, name)
        elif k == 5:
            g.take_units(a, 3, after=after, name=name)
            ref.add("take_units", a, None, 3, after, name)
        elif k == 6:                      # a few ops in bulk, each after the one before
            m = int(rng.integers(1, 90))          # (few: checked in Python; many: arrays)
            kinds = [["send", "delay", "memory"][j % 3] for j in range(m)]
            nodes = [None if x == "delay" else a for x in kinds]
            dsts = [b if x == "send" else None for x in kinds]
            sizes = rng.integers(0, 1 << 30, m).tolist()
            deps = [after] + [[n + j] for j in range(m - 1)]
            assert g.add_ops(kinds, nodes, dsts, sizes, deps) == n
            for j in range(m):
                ref.add(kinds[j], nodes[j], dsts[j], sizes[j], deps[j])
        elif k == 7 and n > 2:            # a dependency on an op added later, or earlier
            x, y = (int(v) for v in rng.choice(n, 2, replace=False))
            g.arrays()                    # (made before the change: made again after it)
            g.depend(x, y)
            if y not in ref.after[x]:
                ref.after[x].append(y)
            a = g.arrays()
            assert a["dep"][a["dep_ptr"][x]:a["dep_ptr"][x + 1]].tolist() == ref.after[x]
        elif k == 8 and n:
            x = int(rng.integers(0, n))
            g.arrays()
            g.after[x] = [d for d in ref.after[x] if d != 0] + ([0] if x else [])
            ref.after[x] = [d for d in ref.after[x] if d != 0] + ([0] if x else [])
            a = g.arrays()
            assert a["dep"][a["dep_ptr"][x]:a["dep_ptr"][x + 1]].tolist() == ref.after[x]
        elif k == 9 and n:                # memory held from an op, perhaps freed at another
            at, edge = int(rng.integers(0, n)), ("start", "finish")[i % 2]
            h = g.hold(a, size, at, edge, what=name)
            assert h == len(ref.holds)
            ref.holds.append([a, size, (at, edge == "finish"), None, name])
            free = [x for x, v in enumerate(ref.holds) if v[3] is None]
            if rng.random() < 0.7:
                x = free[int(rng.integers(0, len(free)))]
                g.free(x, n - 1, edge)
                ref.holds[x][3] = (n - 1, edge == "finish")
    first = len(g)
    for j in range(5):                    # a sub-graph started after an op
        g.delay(j, after=[first + j - 1] if j % 2 else None)
        ref.add("delay", None, None, j, [first + j - 1] if j % 2 else [])
    g.start_after(3, first)
    for i in range(first, len(g)):
        if not ref.after[i] and i != 3:
            ref.after[i] = [3]
    roof = [i for i, w in enumerate(ref.work) if w is not None]
    if roof:                              # a roofline op's work changed (a memory plan)
        g.work[roof[0]] = (0.0, 0, ref.work[roof[0]][2])
        ref.work[roof[0]] = (0.0, 0, ref.work[roof[0]][2])
    assert_same(g, ref)


def test_an_op_index_from_the_end_is_that_op_and_one_past_the_ops_is_refused():
    """g.after and g.work assigned at index -1 change the last op, as a list's would;
    an index past the ops is an IndexError, not a dependency kept for no op."""
    g = OpGraph()
    g.compute("n0", flops=1.0, bytes=8)
    g.compute("n0", 5)
    g.compute("n1", flops=2.0, bytes=16)
    g.after[-1] = [0]
    g.work[-1] = (3.0, 24, None)
    assert list(g.after) == [[], [], [0]]
    assert list(g.work) == [(1.0, 8, None), None, (3.0, 24, None)]
    ptr, dep = g.arrays()["dep_ptr"], g.arrays()["dep"]
    assert ptr.tolist() == [0, 0, 0, 1] and dep.tolist() == [0]
    for bad in (3, -4):
        with pytest.raises(IndexError):
            g.after[bad] = [0]
        with pytest.raises(IndexError):
            g.work[bad] = (1.0, 0, None)
    assert list(g.after) == [[], [], [0]]


def test_an_op_whose_work_is_refused_is_not_kept():
    g = OpGraph()
    g.compute("n0", 5, name="a")
    with pytest.raises(GraphError, match="flops"):
        g.compute("n1", flops=-1.0, name="b")
    assert len(g) == 1 and list(g.kind) == ["compute"] and g.roofline()[0].size == 0
    g.compute("n1", flops=1.0, name="b")         # (the name is free again)
    assert list(g.names) == ["a", "b"] and g.work[1] == (1.0, 0, None)


@pytest.mark.parametrize("algorithm,collective,form", [
    ("ring", "all_reduce", "steps"), ("ring", "all_gather", "streams"),
    ("bidir_ring", "reduce_scatter", "steps"), ("direct", "all_to_all", "steps"),
    ("ring", "all_reduce", "streams")])
@pytest.mark.parametrize("starts", [0, 1, 2])
def test_a_part_instanced_as_columns_equals_its_ops_added_as_lists(algorithm, collective,
                                                                   form, starts):
    """_Part.add (codes, node ids and dependencies offset as columns) against the part's ops
    spelled out op by op, as lists, and added through add_ops."""
    order = [f"n{i}" for i in (3, 0, 5, 1, 4, 2)]
    part = coll.registry.symmetric(collective, algorithm, order, 3 << 20, 2, None, "npu", 0,
                                   512, {n: 8 for n in order}, form)
    assert part is not None
    g, ref = OpGraph(), OpGraph()
    for x in (g, ref):
        for n in NPUS:
            x.compute(n, 10)
    p = len(order)
    for q in range(p):
        start = list(range(q, q + starts))
        base = len(g)
        end = part.add(g, order, q, start)
        assert end == base + part.end
        ref.add_ops(part.kind, [order[q] if o else None for o in part.own],
                    [None if d is None else order[(q + d) % p] for d in part.dst], part.size,
                    [[x for d in deps for x in ((base + d,) if d >= 0 else start)]
                     for deps in part.after])
    for f in ("kind", "node", "dst", "size", "after", "names", "work"):
        assert getattr(g, f) == getattr(ref, f), f
    for f, v in g.arrays().items():
        if f not in ("node", "dst"):
            assert np.array_equal(v, ref.arrays()[f]), f
    assert set(KIND_OF[c] for c in g.arrays()["code"]) <= set(OP_CODES)


@pytest.mark.parametrize("n", [5, 64, 65, 400])
def test_the_reports_union_of_intervals_is_the_cells_they_cover(n):
    """pysim.workload.training.report._union (in Python for a few intervals, as arrays for
    many) against the cells of [start, end) covered, read back as maximal runs."""
    from pysim.workload.training.report import _union
    rng = np.random.default_rng(n)
    starts = rng.integers(0, 3 * n, n)
    iv = list(zip(starts.tolist(), (starts + rng.integers(-3, 12, n)).tolist()))
    cells = np.zeros(3 * n + 20, bool)
    for a, b in iv:
        cells[a:max(a, b)] = True
    edges = np.flatnonzero(np.diff(np.concatenate([[0], cells.astype(np.int8), [0]])))
    assert _union(iv) == [[int(a), int(b)] for a, b in zip(edges[::2], edges[1::2])]


def _runs(cells):
    edges = np.flatnonzero(np.diff(np.concatenate([[0], cells.astype(np.int8), [0]])))
    return [[int(a), int(b)] for a, b in zip(edges[::2], edges[1::2])]


@pytest.mark.parametrize("n", [5, 100, 300, 2000])
def test_the_reports_difference_and_clip_of_intervals_are_the_cells_they_cover(n):
    """report._minus and _clip (in Python for a few intervals, as arrays for many) against
    the cells covered by one list and not the other, and those within [lo, hi)."""
    from pysim.workload.training.report import _clip, _minus, _union
    rng = np.random.default_rng(n)
    width = 6 * n

    def some():
        s = rng.integers(0, width, n)
        return _union(list(zip(s.tolist(), (s + rng.integers(1, 8, n)).tolist())))

    def cells(iv):
        c = np.zeros(width + 20, bool)
        for a, b in iv:
            c[a:b] = True
        return c
    iv, cut = some(), some()
    assert _minus(iv, cut) == _runs(cells(iv) & ~cells(cut))
    assert _minus(iv, []) == _runs(cells(iv))
    assert _minus([], cut) == []
    lo, hi = width // 5, width // 2
    window = np.zeros(width + 20, bool)
    window[lo:hi] = True
    assert _clip(iv, lo, hi) == _runs(cells(iv) & window)


def test_dependencies_read_back_refuse_changes_in_place():
    """g.after[i] is a copy: appending to it would change nothing in the graph, so it refuses;
    depend() and assignment change the graph."""
    g = OpGraph()
    a, b, c = g.compute("n0", 1), g.compute("n1", 1), g.compute("n2", 1)
    deps = g.after[c]
    for change in (lambda: deps.append(a), lambda: deps.extend([a]), lambda: deps.insert(0, a),
                   lambda: deps.__iadd__([a])):
        with pytest.raises(GraphError, match=r"graph.after\[2\].*copy"):
            change()
    assert g.after[c] == [] and deps + [a] == [a]
    g.depend(c, a)
    g.after[b] = [a]
    assert g.after[c] == [a] and g.after[b] == [a]
