"""The collective algorithms by name, the bound of the ops each expands into (counted before
building), and `build`, which adds one collective to an op graph."""
from __future__ import annotations

import array

from pysim.errors import ConfigError
from pysim.workload import graph as graph_module
from pysim.workload import nccl, nccl_graph
from pysim.workload.collectives.builder import OFFLOAD_PIECES_IN_SRAM, _Builder
from pysim.workload.collectives.direct import direct
from pysim.workload.collectives.halving_doubling import halving_doubling
from pysim.workload.collectives.hierarchical import hierarchical
from pysim.workload.collectives.order import HIERARCHICAL, _at_least_two
from pysim.workload.collectives.ring import ring, ring_pipeline
from pysim.workload.collectives.tree import tree
from pysim.workload.graph import GraphError, OpGraph


ALGORITHMS = {
    "ring": (lambda b, c: ring_pipeline(b, c) if c in ("broadcast", "reduce") else ring(b, c),
             {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"}),
    "bidir_ring": (lambda b, c: ring(b, c, bidirectional=True),
                   {"all_reduce", "reduce_scatter", "all_gather"}),
    "direct": (direct, {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                        "broadcast", "reduce"}),
    "halving_doubling": (halving_doubling, {"all_reduce", "reduce_scatter", "all_gather"}),
    "tree": (tree, {"all_reduce"}),
    "hierarchical": (None, {"all_reduce"}),
    "bidir_hierarchical": (None, {"all_reduce"}),
    "nccl": (None, nccl.SUPPORTED),    # (pysim/workload/nccl_graph.py: needs the machine)
}


FORMS = ("steps", "streams")
STREAMED = {"all_reduce", "reduce_scatter", "all_gather"}     # by the ring algorithms


def streamed(collective, algorithm, engine, in_flight=0, chunks=1):
    """Whether build(form='streams') makes this collective as streams (ring and bidir_ring
    reduce-scatter, all-gather and all-reduce of one chunk, and NCCL's rings
    (pysim.workload.nccl), without an offload engine or a window of chunks in flight); the
    others are made step by step in either form. A ring's stream of one chunk times the
    steps to within 1% (tests/test_streams.py); of several, each chunk's stream sends all its
    steps before it reduces any, so the chunks no longer pipeline the reductions of one
    behind the transfers of another (a ring all-reduce of 4 chunks on 8 NPUs: 4-19% slower
    than its steps), and they are built step by step."""
    return (collective in STREAMED and engine in (None, "npu") and not in_flight and
            (algorithm == "nccl" or (algorithm in ("ring", "bidir_ring") and chunks == 1)))


def ops_bound(collective, algorithm, p, chunks, engine=None, dims=None, pieces=1,
              form="steps", nbytes=None, machine=None, order=None, nccl_settings=None):
    """An upper bound of the engine ops a collective expands into, counted before building
    any (so that a graph too large is refused at once, not after minutes of building): per
    chunk, the sends, reductions and receptions of each algorithm -- exactly without an
    endpoint model and on the NPU (_engine_ops); on the offload engine each reduction in two
    parts (the bulk as a message arrives, its last packet's worth after it) and per piece a
    load and a store per node, `pieces` the pieces the engine cuts a chunk into. As streams
    (form = 'streams', where `streamed`), exactly: per chunk, direction and rank a send (two
    ops on the NPU), a reduction (three on the NPU) where the collective reduces, a reception
    (one on the NPU, none without an endpoint model) where it gathers, and a delay. NCCL's
    collectives (pysim.workload.nccl_graph.ops_bound) are bounded tighter given nbytes, and
    counted from NCCL's plan given also the machine and the ranks (plus a take and a free
    of its SMs per rank on the NPU)."""
    if algorithm == "nccl":
        f = form if streamed(collective, algorithm, engine) else "steps"
        if nbytes is not None and machine is not None and order is not None:
            return nccl_graph.plan_ops(collective, nbytes, nccl_settings or {}, machine,
                                       order, f) \
                + (2 * p if engine == "npu" else 0)
        return nccl_graph.ops_bound(collective, p, nccl.MAX_CHANNELS, nbytes, f)
    if form == "streams" and streamed(collective, algorithm, engine, 0, chunks):
        S, R, V = (2, 3, 1) if engine == "npu" else (1, 1, 0)
        per = S + 1 + (R if collective != "all_gather" else 0) + \
            (V if collective != "reduce_scatter" else 0)
        return chunks * p * per * (2 if algorithm == "bidir_ring" else 1)
    if engine in (None, "npu") and algorithm not in HIERARCHICAL:
        return chunks * _engine_ops(collective, algorithm, p, engine)
    log = max(1, (p - 1).bit_length())
    ring = {"reduce_scatter": 2, "all_gather": 1, "all_reduce": 3}
    if algorithm in ("ring", "bidir_ring") and collective in ring:
        per = ring[collective] * (p - 1) * p * (2 if algorithm == "bidir_ring" else 1)
    elif algorithm == "ring":                   # broadcast, reduce: a pipeline
        per = 2 * (p - 1)
    elif algorithm == "direct":
        per = {"all_to_all": 1, "broadcast": 0, "reduce": 0}.get(
            collective, ring.get(collective, 3)) * p * (p - 1) + 2 * (p - 1) + \
            (p if collective == "all_reduce" else 0)
    elif algorithm == "halving_doubling":
        per = ring.get(collective, 3) * p * log
    elif algorithm == "tree":
        per = 6 * (p - 1)
    elif algorithm in HIERARCHICAL and dims:
        per = 3 * p * sum(int(k) - 1 for k in dims)
    else:
        per = 3 * p * p
    joins = 0
    if algorithm == "bidir_hierarchical":       # both ways, and a join per node
        per, joins = 2 * per, p
    if engine == "npu":
        per *= 3
    elif engine == "offload":
        return chunks * pieces * (2 * per + 2 * p + joins)
    return chunks * (per + joins)


def _engine_ops(collective, algorithm, p, engine):
    """The engine ops of one chunk of a collective without an offload engine, exactly (each
    half of a chunk taken as not empty): a send is one op (two on the NPU: its HBM read
    first), a reduction one (three on the NPU: its HBM traffic, its cores, their join), a
    reception none (one on the NPU: its HBM write); the direct all-reduce's join of each
    block's reductions one."""
    S, R, V = (2, 3, 1) if engine == "npu" else (1, 1, 0)
    rs, ag = S + R, S + V
    per = {"all_reduce": rs + ag, "reduce_scatter": rs, "all_gather": ag,
           "all_to_all": ag, "broadcast": ag, "reduce": rs}[collective]
    steps = max(1, (p - 1).bit_length())
    if algorithm in ("ring", "bidir_ring") and collective not in ("broadcast", "reduce"):
        return per * (p - 1) * p * (2 if algorithm == "bidir_ring" else 1)
    if algorithm == "ring" or (algorithm == "direct" and collective in ("broadcast",
                                                                         "reduce")):
        return per * (p - 1)
    if algorithm == "direct":                    # an all-reduce's joins: one per block
        return per * (p - 1) * p + (p if collective == "all_reduce" else 0)
    if algorithm == "halving_doubling":
        return per * steps * p
    return 2 * per * (p - 1)                     # tree: two trees, up and down


def build(collective, algorithm, order, nbytes, chunks=1, reduce_bytes_per_cycle=None,
          engine=None, sram_bytes=None, graph=None, chunks_in_flight=0, dims=None,
          grain=512, after=None, done=None, sram_state=None,
          sram_pieces=OFFLOAD_PIECES_IN_SRAM, units=None, streams=None, machine=None,
          nccl_settings=None, form="steps", built=None, peers=0):
    """The op graph of one collective over the nodes `order` (names, in ring order); added
    to `graph` if given (so that other ops can run beside it).

    after: {node name: [op ids]}, what each participant's part waits for (its data being
    ready; default: nothing). done: a dict, filled with {node name: op id} of an op that
    finishes when the participant's part of the collective is complete. sram_state: the
    offload engines' SRAM occupancy, shared by the collectives of one graph (an empty
    tuple of two dicts to start; by default each collective has the SRAM to itself).
    units: {node name: compute units} the collective holds at each participant from its
    start there to its end (an NPU-run collective: pysim.workload.endpoint). streams: (state,
    n), the collectives of one group in the order issued: each participant's part waits for the
    end of its part of the collective issued n before on the same group (state: a dict
    shared by the collectives of one graph).
    machine, nccl_settings: for algorithm 'nccl', the cluster (Topology.cluster) and
    {algorithm, protocol, channels} (workload.nccl_*).
    form: 'steps' (an op per send, reduction and reception of every step of every chunk) or
    'streams' (workload.collective_form: where `streamed`, per chunk and rank one stream to
    its ring neighbour carrying all its steps, pysim.workload.collectives.ring).
    built: the participants whose parts are built (default all): the others are taken to
    run as their ring neighbours do (symmetric ranks, workload.parallel.tp_ranks = 'one'):
    where the collective is the same at every rank but for a rotation of the ring (ring,
    bidirectional ring and direct; NCCL's ring inside a node; not the tree or
    halving-doubling; without an offload engine or a window of chunks: `symmetric` checks),
    each built participant's ops are its own part, whatever waited on another rank's op
    waiting on its own op of the same place in its part; elsewhere every part is built,
    each participant after `after` of its own.
    peers: an all-to-all's peers in flight per side (workload.all_to_all_peers; 0: all)."""
    if form not in FORMS:
        raise ConfigError(f"workload.collective_form = {form!r}: expected one of "
                          f"{', '.join(FORMS)}")
    if not streamed(collective, algorithm, engine, chunks_in_flight, chunks):
        form = "steps"
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"workload.algorithm = {algorithm!r}: known: "
                          f"{', '.join(sorted(ALGORITHMS))}")
    fn, supported = ALGORITHMS[algorithm]
    if collective not in supported:
        raise ConfigError(f"workload.algorithm = {algorithm!r} does not implement "
                          f"workload.collective = {collective!r} (it does: "
                          f"{', '.join(sorted(supported))})")
    _at_least_two(order)
    if len(set(order)) != len(order):
        raise ConfigError("workload.group names a node twice")
    if nbytes < 0 or chunks < 1:          # (0 bytes: a training layer with nothing to send)
        raise ConfigError(f"workload.bytes = {nbytes}, workload.chunks = {chunks}: expected "
                          f"workload.bytes >= 0 and workload.chunks >= 1")
    pieces = 1
    if engine == "offload" and sram_bytes is not None:
        piece = max(1, sram_bytes // sram_pieces)
        pieces = max(1, -(-(-(-int(nbytes) // chunks)) // piece))
    ops = ops_bound(collective, algorithm, len(order), chunks, engine, dims, pieces, form,
                    nbytes, machine, order, nccl_settings)
    limit = graph_module.MAX_OPS
    if ops > limit and algorithm == "nccl":      # (NCCL's chunks are its own: not chunks)
        _, algo, proto, _ = nccl.plan(collective, nbytes, nccl_settings or {}, machine, order)
        raise GraphError(f"workload.algorithm = 'nccl': {collective} of {nbytes:,} bytes over "
                         f"{len(order)} participants by NCCL's {algo} in {proto} makes up to "
                         f"{ops:,} ops, more than the {limit:,} ops a graph may have (NCCL's "
                         f"ring with workload.collective_form = 'streams' makes fewer: "
                         f"workload.nccl_algorithm = 'ring'; or fewer participants)")
    if ops > limit:
        raise GraphError(f"workload.chunks = {chunks}: {collective} by {algorithm} over "
                         f"{len(order)} participants makes up to {ops:,} ops, more than the "
                         f"{limit:,} ops a graph may have (fewer chunks or participants make "
                         f"fewer)")
    idx = {n: i for i, n in enumerate(order)}
    start = {idx[n]: list(ops) for n, ops in (after or {}).items() if n in idx}
    g = graph if graph is not None else OpGraph()
    lo = len(g)                        # (the collective's ops: their steps may stream)
    if built is not None and set(built) != set(order):
        t = symmetric(collective, algorithm, order, nbytes, chunks, reduce_bytes_per_cycle,
                      engine, chunks_in_flight, grain, units, form, machine, nccl_settings,
                      peers)
        if t is not None:
            add_parts(t, g, order, built, after, {} if done is None else done, streams)
            return g
    group = None                       # the group's streams: {member: its last ends}
    if streams is not None:            # in the order issued, on the group's streams
        state, n_streams = streams
        group = state.setdefault(tuple(sorted(order)), {})    # (one lookup per collective)
        for n in order:
            prev = group.get(n, ())
            if len(prev) >= n_streams:
                start.setdefault(idx[n], []).append(prev[-n_streams])
    if units and algorithm == "nccl":  # an NCCL kernel holds an SM per channel it runs
        ch = nccl.plan(collective, nbytes, nccl_settings or {}, machine, order)[3]
        units = {n: ch for n, k in units.items() if k}
    if units:                          # the units held from the start to the end
        took = [n for n in order if units.get(n)]
        first = g.add_ops(["take_units"] * len(took), took, [None] * len(took),
                          [int(units[n]) for n in took],
                          [list(start.get(idx[n], [])) for n in took])
        for k, n in enumerate(took):
            start[idx[n]] = [first + k]
    b = _Builder(order, nbytes, chunks, reduce_bytes_per_cycle, engine, sram_bytes, graph,
                 chunks_in_flight, grain, start, sram_state, sram_pieces, form, peers)
    b.g = g
    if algorithm in HIERARCHICAL:
        if dims is None:
            raise ConfigError(f"workload.algorithm = {algorithm!r} needs a topology with "
                              f"dimensions (a torus or mesh)")
        hierarchical(b, collective, dims, algorithm == "bidir_hierarchical")
    elif algorithm == "nccl":
        nccl_graph.build(b, collective, nccl_settings or {}, machine)
    else:
        fn(b, collective)
    if done is not None or units or streams is not None:
        done = {} if done is None else done
        held = [bool(units and units.get(n)) for n in order]     # freed, or a join
        first = b.g.add_ops(["free_units" if h else "delay" for h in held],
                            [n if h else None for n, h in zip(order, held)],
                            [None] * len(order),
                            [int(units[n]) if h else 0 for n, h in zip(order, held)],
                            [list(b.node_last.get(i) or b.start.get(i, ()))
                             for i in range(len(order))])
        for i, n in enumerate(order):
            done[n] = first + i
            if streams is not None:
                prev = group.setdefault(n, [])
                prev.append(done[n])
                del prev[:-streams[1]]
    b.g.allow_streams(lo, len(b.g))
    return b.g


class _Part:
    """One participant's part of a collective that is the same at every participant but for
    a rotation of the ring: per op its kind, node (its own, or none), the ring offset of its
    destination, size and dependencies (places in the part, or -1: what the part waits
    for), the step latencies among them, and the place of the op ending the part."""

    def __init__(self, kind, own, dst, size, after, latencies, end):
        self.kind, self.own, self.dst, self.size, self.after = kind, own, dst, size, after
        self.latencies, self.end = latencies, end
        # as columns (OpGraph's): codes, sizes, the dependencies flat (-1: the start)
        self.codes = array.array("b", [graph_module.OP_CODES[k] for k in kind])
        self.sizes = array.array("q", size)
        self.flat = [d for deps in after for d in deps]
        self.lens = [len(deps) for deps in after]
        self.waits = [-1 in deps for deps in after]         # (-1 at most once: a set)

    def add(self, g, order, q, start, ids=None):
        """Add the part of participant q (a place in order) to g, after `start`; returns
        the id of its ending op. ids: g's node ids of order (OpGraph._nid), where known."""
        p, base = len(order), len(g)
        me = order[q]
        bad = [x for x in start if not (type(x) is int and 0 <= x < base)]
        if bad:
            raise GraphError(f"dependency {bad[0]!r} of {me}'s part: no such op (an op can "
                             f"only depend on ops given before it)")
        if ids is None:
            ids = [g._nid(x) for x in order]
        mine = ids[q]
        L = len(start)
        if L == 1:
            s0 = start[0]
            flat, lens = [base + d if d >= 0 else s0 for d in self.flat], self.lens
        else:
            flat = [x for d in self.flat for x in ((base + d,) if d >= 0 else start)]
            lens = [n + (L - 1) * w for n, w in zip(self.lens, self.waits)]
        g._add_columns(self.codes, [mine if o else -1 for o in self.own],
                       [-1 if d is None else ids[(q + d) % p] for d in self.dst], self.sizes,
                       flat, lens)
        g.latencies.extend((base + k, order[(q + a) % p], order[(q + c) % p], steps)
                           for k, a, c, steps in self.latencies)
        return base + self.end


_PARTS = {}


def add_parts(part, g, order, built, after, done, streams=None):
    """Add the _Part `part` of each participant of `built` (names in `order`) to g, each
    after after[name] (and, with streams (state, n), the end of its part of the collective
    issued n before on the same group, as `build` orders them); done[name] receives the op
    ending it."""
    group = None
    if streams is not None:
        group = streams[0].setdefault(tuple(sorted(order)), {})
    at = {n: i for i, n in enumerate(order)}
    built = set(built)
    ids = [g._nid(x) for x in order]
    lo = len(g)                        # (the parts' ops: their steps may stream)
    for n in (m for m in order if m in built):
        start = list((after or {}).get(n, ()))
        if group is not None:
            prev = group.get(n, ())
            if len(prev) >= streams[1]:
                start.append(prev[-streams[1]])
        done[n] = part.add(g, order, at[n], start, ids)
        if group is not None:
            prev = group.setdefault(n, [])
            prev.append(done[n])
            del prev[:-streams[1]]
    g.allow_streams(lo, len(g))


def symmetric(collective, algorithm, order, nbytes, chunks, reduce_bpc, engine, in_flight,
              grain, units, form, machine=None, nccl_settings=None, peers=0):
    """The _Part every participant of the collective runs, where it is the same at every
    one but for a rotation of the ring (the op kinds, destinations and dependencies of each
    participant's part those of the others shifted round the ring; sizes may differ by a
    byte of an uneven split, the first participant's taken); None where it is not. Made once
    per shape, from the collective built whole among stand-in nodes, and checked there: each
    participant's ops, by their depth in the graph, are the first's turned round the ring."""
    p = len(order)
    held = {units.get(n) for n in order} if units else {None}
    if algorithm in HIERARCHICAL or engine not in (None, "npu") or in_flight or \
            len(held) != 1:
        return None
    u = held.pop()
    # (NCCL's plan depends on where the ranks are: its parts are made per group)
    key = (collective, algorithm, tuple(order) if algorithm == "nccl" else p, int(nbytes),
           chunks, reduce_bpc, engine, grain, u, form, peers,
           repr(sorted((k, v) for k, v in (nccl_settings or {}).items() if k != "chosen")))
    if key in _PARTS:
        return _PARTS[key]
    names = list(order)
    g = OpGraph()
    marks = [g.delay(0) for _ in range(p)]
    done = {}
    build(collective, algorithm, names, nbytes, chunks, reduce_bpc, engine, None, g, 0, None,
          grain, after={n: [marks[i]] for i, n in enumerate(names)}, done=done,
          units={n: u for n in names} if u else None, form=form, machine=machine,
          nccl_settings=nccl_settings, peers=peers)
    rank = {n: i for i, n in enumerate(names)}
    of = [rank.get(x, -1) for x in g.node]
    for k, _, d, _ in g.latencies:
        of[k] = rank[d]
    for n, k in done.items():
        of[k] = rank[n]
    # a node-less op (a delay, a join) is the participant's whose ops alone it waits for,
    # else whose ops alone wait for it
    mark = {k: i for i, k in enumerate(marks)}
    for k in range(p, len(g)):
        if of[k] == -1:
            who = {mark[a] if a in mark else of[a] for a in g.after[k]}
            if len(who) == 1 and -1 not in who:
                of[k] = who.pop()
    if -1 in of:
        succ = {}
        for k in range(p, len(g)):
            for a in g.after[k]:
                succ.setdefault(a, []).append(k)
        for k in range(len(g) - 1, p - 1, -1):
            if of[k] == -1:
                who = {of[x] for x in succ.get(k, ())}
                if len(who) == 1 and -1 not in who:
                    of[k] = who.pop()
    for i, k in enumerate(marks):
        of[k] = -2
    if any(r == -1 for r in of):
        _PARTS[key] = None
        return None
    # each participant's ops in the order of their depth in the graph (the longest chain of
    # dependencies before them: alike at every participant where the graph is symmetric),
    # then their kind and destination, then as built
    depth = [0] * len(g)
    for k in range(p, len(g)):
        depth[k] = 1 + max((depth[a] for a in g.after[k]), default=-1)
    place, ops = [0] * len(g), [[] for _ in range(p)]
    for k in range(p, len(g)):
        ops[of[k]].append(k)
    for r in range(p):
        ops[r].sort(key=lambda k: (depth[k], g.kind[k],
                                   -1 if g.dst[k] is None else (rank[g.dst[k]] - r) % p, k))
        for q, k in enumerate(ops[r]):
            place[k] = q
    lat = {k: (rank[a], rank[c], s) for k, a, c, s in g.latencies}

    def shape(r):
        """Participant r's part, its ranks relative to r."""
        out = []
        for k in ops[r]:
            d = g.dst[k]
            deps = tuple(sorted({(-1, -1) if of[a] == -2 else ((of[a] - r) % p, place[a])
                                 for a in g.after[k]}))
            la = lat.get(k)
            out.append((g.kind[k], g.node[k] is not None,
                        None if d is None else (rank[d] - r) % p, deps,
                        None if la is None else ((la[0] - r) % p, (la[1] - r) % p, la[2])))
        return out

    mine = shape(0)
    # the part as the first participant's ops were built (the order ops that become ready
    # at once queue for a unit in), each waiting on its own op of the place the op it
    # waited on has at its own participant
    built = sorted(ops[0])
    at = {place[k]: x for x, k in enumerate(built)}
    after = [sorted({-1 if d[1] < 0 else at[d[1]] for d in mine[place[k]][3]})
             for k in built]
    if any(shape(r) != mine for r in range(1, p)) or \
            any(a >= x for x, deps in enumerate(after) for a in deps):
        _PARTS[key] = None
        return None
    part = _Part([g.kind[k] for k in built], [g.node[k] is not None for k in built],
                 [mine[place[k]][2] for k in built], [g.size[k] for k in built], after,
                 [(x, *mine[place[k]][4]) for x, k in enumerate(built)
                  if mine[place[k]][4] is not None],
                 at[place[done[names[0]]]])
    _PARTS[key] = part
    return part


def bus_factor(collective, p):
    """nccl-tests convention: busbw = algbw x factor."""
    if collective == "all_reduce":
        return 2 * (p - 1) / p
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return (p - 1) / p
    return 1.0
