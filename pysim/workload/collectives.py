"""Collectives expanded into op graphs (sends and reductions with dependencies).

Every participant holds N bytes. A collective is split into `chunks` independent pieces that
pipeline through the steps; within a chunk, the algorithms are the textbook ones:

- ring: p - 1 steps around a ring (reduce-scatter, all-gather; all-reduce = both);
- bidir_ring: each chunk halved, one half around the ring each way;
- direct: every node sends each other node its share at once;
- halving_doubling: recursive halving (reduce-scatter) and doubling (all-gather), p = 2^k;
- broadcast (from the first participant) and reduce (to it): a pipeline along the ring, or
  direct sends.

A reduction of b bytes at a node is a compute op of ceil(b / reduce_bytes_per_cycle) cycles
on that node (0 when the reduction rate is not modelled); the next step's send of that data
depends on it. With an endpoint model (engine 'npu' or 'offload') the reductions and the
memory traffic are those of the NPU's cores or of its collectives offload engine, which
streams the data through its SRAM in pieces and reduces messages as they arrive (_Builder).
Collectives registered here: see ALGORITHMS.
"""
from __future__ import annotations

import math

import numpy as np

from pysim.errors import ConfigError
from pysim.schema import MAX_INT, NONNEG, POS, Key, declare
from pysim.topology import build as build_topology
from pysim.workload import graph as graph_module
from pysim.workload import nccl
from pysim.workload.base import COLLECTIVE_KEYS, OP_GRAPH_KEYS, register
from pysim.workload.endpoint import held_units, streams as comm_streams
from pysim.workload.graph import GraphError, OpGraph, engine_params, run_graph
from pysim.workload.result import op_times

OFFLOAD_PIECES_IN_SRAM = 16   # default: the offload engine streams pieces of SRAM / this
BULK = True                   # gather ops in bulk where _Bulk applies (False: one by one)

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
               "reduce")


class _Builder:
    """Adds a collective's ops to an op graph. engine: None (reductions at reduce_bpc, no
    endpoint model), 'npu' (the NPU's own cores, through HBM) or 'offload' (a collectives
    engine beside the NPU).

    The data is cut into `chunks` pieces that pipeline through the algorithm's steps. The
    offload engine streams the data through its SRAM: each chunk is cut further into pieces
    of at most SRAM / sram_pieces bytes ([topology.npu] offload_pieces, default 16), each
    piece loaded from HBM into the SRAM
    before its first step at a node and stored back after its last, and a node loads a piece
    only when the bytes of the pieces it holds (loaded, not yet stored) leave room for it:
    the SRAM bounds the bytes in flight, and the pieces of one chunk pipeline through the
    steps like chunks do."""

    def __init__(self, order, nbytes, chunks, reduce_bpc, engine=None, sram_bytes=None,
                 graph=None, in_flight=0, grain=512, start=None, sram_state=None,
                 sram_pieces=OFFLOAD_PIECES_IN_SRAM):
        self.g = graph if graph is not None else OpGraph()
        self.order = list(order)
        self.p = len(order)
        self.N = int(nbytes)
        self.C = int(chunks)
        self.reduce_bpc = reduce_bpc
        self.engine = engine
        self.sram = sram_bytes
        self.loads = {}                 # offload: per node, the load of this piece's input
        self.last_at = {}               # per node: its latest op in this piece
        self.chunk_bytes = 0            # bytes of the piece being built
        # offload: per node name, [bytes, store op] of the pieces its SRAM holds, and their
        # bytes (shared by the collectives of one graph when sram_state is given)
        self.held, self.held_bytes = sram_state if sram_state is not None else ({}, {})
        self.start = start or {}        # per participant: what its first ops wait for
        self.node_last = {}             # per participant: the last ops of each piece there
        self.in_flight = in_flight      # at most this many chunks under way per node (0: all)
        self.ends = []                  # per piece: {node: its last op in the piece}
        self.chunk_of = []              # per piece: the chunk it belongs to
        self.last_piece = {}            # per chunk: its last piece
        self.io = True                  # offload: load inputs and store results here
        self.grain = grain              # offload: the bytes reduced after a message arrives
        self.sram_pieces = sram_pieces  # offload: pieces of SRAM / this

    def _note(self, node, op):
        self.last_at[node] = op
        return op

    def _streams(self):
        return self.engine == "offload" and self.io

    def send(self, a, b, nbytes, after):
        after = list(after)
        if not after:                   # a first step: the participant's data is ready
            after = list(self.start.get(a, ()))
            c = self.chunk_of[len(self.ends)] - self.in_flight if self.in_flight else -1
            if c >= 0:                  # the window of chunks in flight
                prev = self.ends[self.last_piece[c]].get(a)
                if prev is not None:
                    after.append(prev)
        if self.engine == "npu":        # what is sent is read from HBM first
            after = [self.g.memory(self.order[a], int(nbytes), after=after)]
        elif self._streams():
            after.append(self._load(a))     # the piece's input is in the SRAM
        return self.g.send(self.order[a], self.order[b], int(nbytes), after=after)

    def _load(self, a):
        """The load of this piece's input at node a into its engine's SRAM: after the stores
        of the oldest pieces it holds, as many as must leave to make room."""
        if a not in self.loads:
            deps = list(self.start.get(a, ()))
            if self.sram is not None:
                name = self.order[a]
                held = self.held.setdefault(name, [])
                self.held_bytes.setdefault(name, 0)
                while held and self.held_bytes[name] + self.chunk_bytes > self.sram:
                    nb, store = held.pop(0)
                    self.held_bytes[name] -= nb
                    deps.append(store)
            self.loads[a] = self.g.memory(self.order[a], self.chunk_bytes, after=deps)
        return self.loads[a]

    def reduce(self, node, nbytes, after):
        """The received block is reduced into the local one."""
        n = self.order[node]
        after = list(after) + list(self.start.get(node, ()))   # the local data is ready
        if self.engine in ("npu", "offload"):
            # npu: the received block is written to HBM, read back with the local block, the
            # result written (it is read again when sent), the cores reduce it; offload: the
            # engine reduces it in its SRAM (OpGraph.reduce), with the local block loaded
            if self.engine == "offload":
                return self._note(node, self._stream_reduce(node, int(nbytes), after))
            return self._note(node, self.g.reduce(n, int(nbytes), self.engine, after=after))
        cycles = 0 if not self.reduce_bpc else nbytes / self.reduce_bpc
        if not cycles <= MAX_INT:
            raise ConfigError(f"workload.reduce_gbps: reducing {nbytes:,} bytes at "
                              f"{self.reduce_bpc:g} bytes per cycle takes more than "
                              f"{MAX_INT:,} cycles")
        cycles = math.ceil(cycles)
        return self._note(node, self.g.compute(n, cycles, after=after))

    def _stream_reduce(self, node, nbytes, after):
        """The offload engine reduces a message as it arrives: the bulk of the work (all but
        the last packet's worth) may run from the moment the message starts, on the engine,
        and the last packet's worth after the message has arrived. So the reduction finishes
        one packet's reduction after the data, or when the engine has done it all if the
        engine is slower than the data arrives. `after` is [the send]."""
        g, n = self.g, self.order[node]
        snd = after[0]
        early = list(g.after[snd]) + ([self._load(node)] if self._streams() else [])
        last = min(nbytes, self.grain)
        bulk = g.reduce(n, nbytes - last, "offload", after=early)
        return g.reduce(n, last, "offload", after=list(after) + [bulk])

    def received(self, node, nbytes, snd):
        """A block received without reduction (all-gather): on the NPU it is written to HBM
        before it can be forwarded."""
        if self.engine == "npu":
            return self._note(node, self.g.memory(self.order[node], int(nbytes), after=[snd]))
        return self._note(node, snd)

    def begin_chunk(self, size):
        self.loads, self.last_at, self.chunk_bytes = {}, {}, size

    def end_chunk(self):
        self.last_piece[self.chunk_of[len(self.ends)]] = len(self.ends)
        self.ends.append(dict(self.last_at))
        for i, op in self.last_at.items():
            self.node_last.setdefault(i, []).append(op)
        if self._streams():             # each node stores its share of the result
            for i in sorted(self.last_at):
                st = self.g.memory(self.order[i], self.chunk_bytes, after=[self.last_at[i]])
                self.node_last[i].append(st)
                if self.sram is not None:
                    name = self.order[i]
                    self.held.setdefault(name, []).append([self.chunk_bytes, st])
                    self.held_bytes[name] = self.held_bytes.get(name, 0) + self.chunk_bytes

    def chunk_sizes(self):
        """The sizes of the pieces to build, in order: the chunks, each cut (offload engine)
        into pieces of at most SRAM / sram_pieces bytes."""
        sizes = _split(self.N, self.C)
        piece = None
        if self._streams() and self.sram is not None:
            piece = max(1, self.sram // self.sram_pieces)
        out, self.chunk_of = [], []
        for c, s in enumerate(sizes):
            n = 1 if piece is None else max(1, -(-s // piece))
            out += _split(s, n)
            self.chunk_of += [c] * n
        return out


def _split(total, parts):
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# ------------------------------------------------------------------ ring

def _ring_reduce_scatter(b, size, direction, after_all, done):
    """One chunk of `size` bytes around the ring (direction +1 or -1). done[i] collects, per
    node, the op after which its block is fully reduced."""
    p = b.p
    blocks = _split(size, p)
    # step s: node i sends block (i - s*dir) mod p to node i + dir, which reduces it
    # what node i's next send waits for: the same for all, or per node (a dict)
    last = {i: list(after_all[i] if isinstance(after_all, dict) else after_all)
            for i in range(p)}
    for s in range(p - 1):
        new = {}
        for i in range(p):
            j = (i + direction) % p
            blk = (i - s * direction) % p
            snd = b.send(i, j, blocks[blk], last[i])
            red = b.reduce(j, blocks[blk], [snd])
            new[j] = [red]
        last = new
    for i in range(p):
        done[i] = last[i]
    return blocks


def _ring_all_gather(b, size, direction, start, fin):
    """All-gather of one chunk around the ring: node i starts owning block (i + dir) mod p
    (the one a ring reduce-scatter leaves it); start[i] = what its first send waits for.
    fin[i] is set to what its last receive was."""
    p = b.p
    blocks = _split(size, p)
    last = {i: list(start[i]) for i in range(p)}
    for s in range(p - 1):
        new = {}
        for i in range(p):
            j = (i + direction) % p
            blk = (i + direction - s * direction) % p
            snd = b.send(i, j, blocks[blk], last[i])
            new[j] = [b.received(j, blocks[blk], snd)]
        last = new
    for i in range(p):
        fin[i] = last[i]


class _Bulk:
    """The ops of a collective gathered as columns and added to the graph at once
    (OpGraph.add_ops), for the endpoint models whose ops are one per send, reduction and
    reception (none, and the NPU's own cores) and no window of chunks in flight: the same
    ops, in the same order, with the same dependencies as _Builder's methods make one by
    one. Ids are known before the ops are added (the graph's length plus the ops
    gathered)."""

    def __init__(self, b):
        self.b = b
        self.base = len(b.g)
        self.kind, self.node, self.dst, self.size, self.after = [], [], [], [], []
        self.npu = b.engine == "npu"

    @staticmethod
    def applies(b):
        return b.engine in (None, "npu") and not b.in_flight

    def _op(self, kind, node, dst, size, after):
        self.kind.append(kind)
        self.node.append(node)
        self.dst.append(dst)
        self.size.append(size)
        self.after.append(after)
        return self.base + len(self.kind) - 1

    def send(self, a, c, nbytes, after):
        b = self.b
        after = list(after) or list(b.start.get(a, ()))
        if self.npu:                    # what is sent is read from HBM first
            after = [self._op("memory", b.order[a], None, nbytes, after)]
        return self._op("send", b.order[a], b.order[c], nbytes, after)

    def reduce(self, node, nbytes, after):
        b = self.b
        after = list(after) + list(b.start.get(node, ()))
        if self.npu:
            op = self._op("reduce_npu", b.order[node], None, nbytes, after)
        else:
            op = self._op("compute", b.order[node], None, _reduce_cycles(b, nbytes), after)
        b.last_at[node] = op
        return op

    def received(self, node, nbytes, snd):
        b = self.b
        if self.npu:
            snd = self._op("memory", b.order[node], None, nbytes, [snd])
        b.last_at[node] = snd
        return snd

    def flush(self):
        self.b.g.add_ops(self.kind, self.node, self.dst, self.size, self.after)


def _emitter(b):
    """Where an algorithm's sends, reductions and receptions go: gathered in bulk where
    _Bulk applies, else the builder, one op at a time."""
    return _Bulk(b) if BULK and _Bulk.applies(b) else b


def _flush(e):
    if isinstance(e, _Bulk):
        e.flush()


def _reduce_cycles(b, nbytes):
    cycles = 0 if not b.reduce_bpc else nbytes / b.reduce_bpc
    if not cycles <= MAX_INT:
        raise ConfigError(f"workload.reduce_gbps: reducing {nbytes:,} bytes at "
                          f"{b.reduce_bpc:g} bytes per cycle takes more than "
                          f"{MAX_INT:,} cycles")
    return math.ceil(cycles)


def _ring_bulk(b, collective, bidirectional):
    """ring(), its ops gathered in bulk (_Bulk)."""
    if collective not in ("all_reduce", "reduce_scatter", "all_gather"):
        raise ConfigError(f"workload.algorithm = 'ring' does not do {collective}")
    k = _Bulk(b)
    p = b.p
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        halves = [(size, +1)] if not bidirectional else \
            list(zip(_split(size, 2), (+1, -1)))
        for part, direction in halves:
            if part == 0:
                continue
            blocks = _split(part, p)
            last = [[] for _ in range(p)]
            if collective != "all_gather":
                for s in range(p - 1):          # reduce-scatter (_ring_reduce_scatter)
                    new = [None] * p
                    for i in range(p):
                        j = (i + direction) % p
                        nb = blocks[(i - s * direction) % p]
                        new[j] = [k.reduce(j, nb, [k.send(i, j, nb, last[i])])]
                    last = new
            if collective != "reduce_scatter":
                for s in range(p - 1):          # all-gather (_ring_all_gather)
                    new = [None] * p
                    for i in range(p):
                        j = (i + direction) % p
                        nb = blocks[(i + direction - s * direction) % p]
                        new[j] = [k.received(j, nb, k.send(i, j, nb, last[i]))]
                    last = new
        b.end_chunk()
    k.flush()


def ring(b, collective, bidirectional=False):
    if _Bulk.applies(b) and BULK:
        return _ring_bulk(b, collective, bidirectional)
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        halves = [(size, +1)] if not bidirectional else \
            list(zip(_split(size, 2), (+1, -1)))
        for part, direction in halves:
            if part == 0:
                continue
            if collective in ("all_reduce", "reduce_scatter"):
                done = {}
                _ring_reduce_scatter(b, part, direction, [], done)
                if collective == "all_reduce":
                    _ring_all_gather(b, part, direction, done, {})
            elif collective == "all_gather":
                _ring_all_gather(b, part, direction, {i: [] for i in range(b.p)}, {})
            else:
                raise ConfigError(f"workload.algorithm = 'ring' does not do {collective}")
        b.end_chunk()


def ring_pipeline(b, collective):
    """broadcast from order[0] along the ring, or reduce to order[0] against it: each chunk
    moves one hop at a time, a node forwarding (or reducing and forwarding) a chunk as soon
    as it has it and has sent the chunk before, so chunks pipeline: the last arrives after
    (chunks + p - 2) chunk-times."""
    e = _emitter(b)
    p = b.p
    sent = {}                           # per node: its send of the previous chunk
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        after = []
        hops = range(p - 1) if collective == "broadcast" else range(p - 1, 0, -1)
        for i in hops:
            j = i + 1 if collective == "broadcast" else i - 1
            snd = e.send(i, j, size, after + ([sent[i]] if i in sent else []))
            sent[i] = snd
            after = [e.received(j, size, snd) if collective == "broadcast"
                     else e.reduce(j, size, [snd])]
        b.end_chunk()
    _flush(e)


# ------------------------------------------------------------------ direct

def direct(b, collective):
    """Each node sends every other node its share at once. Node i's messages are issued to
    i + 1, i + 2, ... in turn, so at any moment the nodes send to a permutation of each other
    rather than all to the same one."""
    e = _emitter(b)
    p = b.p
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        blocks = _split(size, p)
        if collective == "all_to_all":
            for k in range(1, p):
                for i in range(p):
                    j = (i + k) % p
                    e.received(j, blocks[j], e.send(i, j, blocks[j], []))
            b.end_chunk()
            continue
        if collective == "broadcast":            # the root sends everyone the chunk
            for j in range(1, p):
                e.received(j, size, e.send(0, j, size, []))
            b.end_chunk()
            continue
        if collective == "reduce":               # everyone sends the root its chunk
            for k in range(1, p):
                e.reduce(0, size, [e.send(k, 0, size, [])])
            b.end_chunk()
            continue
        owned = {j: [] for j in range(p)}
        if collective in ("all_reduce", "reduce_scatter"):
            for k in range(1, p):          # everyone sends node j its block j; j reduces
                for i in range(p):
                    j = (i + k) % p
                    snd = e.send(i, j, blocks[j], [])
                    owned[j].append(e.reduce(j, blocks[j], [snd]))
        if collective in ("all_reduce", "all_gather"):
            for k in range(1, p):
                for j in range(p):
                    i = (j + k) % p
                    e.received(i, blocks[j], e.send(j, i, blocks[j], owned[j]))
        b.end_chunk()
    _flush(e)


# ------------------------------------------------------------------ halving-doubling

def halving_doubling(b, collective):
    e = _emitter(b)
    p = b.p
    if p & (p - 1):
        raise ConfigError(f"workload.algorithm = 'halving_doubling' needs a power-of-two "
                          f"number of participants, got {p}")
    steps = p.bit_length() - 1
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        last = {i: [] for i in range(p)}
        held = {i: size for i in range(p)}
        if collective in ("all_reduce", "reduce_scatter"):
            for k in range(steps):            # recursive halving: partner at distance p/2^(k+1)
                d = p >> (k + 1)
                new = {}
                for i in range(p):
                    j = i ^ d
                    half = held[i] // 2 if i < j else held[i] - held[i] // 2
                    snd = e.send(i, j, held[i] - half, last[i])
                    new.setdefault(j, []).append(e.reduce(j, held[i] - half, [snd]))
                for i in range(p):
                    j = i ^ d
                    held[i] = held[i] // 2 if i < j else held[i] - held[i] // 2
                last = new
        if collective in ("all_reduce", "all_gather"):
            if collective == "all_gather":
                held = {i: _split(size, p)[i] for i in range(p)}
            for k in reversed(range(steps)):  # recursive doubling
                d = p >> (k + 1)
                new = {}
                for i in range(p):
                    j = i ^ d
                    snd = e.send(i, j, held[i], last[i])
                    new.setdefault(j, []).append(e.received(j, held[i], snd))
                grown = {i: held[i] + held[i ^ d] for i in range(p)}
                held, last = grown, new
        elif collective not in ("reduce_scatter",):
            raise ConfigError(f"workload.algorithm = 'halving_doubling' does not do "
                              f"{collective}")
        b.end_chunk()
    _flush(e)


# ------------------------------------------------------------------ double binary tree

def _tree_parent(i, p, mirrored):
    """Parent of participant i in a heap-shaped binary tree over 0..p-1 (or over the mirrored
    ranks p-1-i), -1 for the root."""
    x = p - 1 - i if mirrored else i
    if x == 0:
        return -1
    px = (x - 1) // 2
    return p - 1 - px if mirrored else px


def tree(b, collective):
    """All-reduce on two binary trees (NCCL's double binary tree): each carries half the
    data; the second is the first mirrored, so a node that is a leaf of one is interior in
    the other. Chunks are reduced up to the root, each node reducing its children's data
    into its own before passing it on, and broadcast back down; a node sends chunk c on a
    link only after chunk c - 1, so the chunks pipeline."""
    e = _emitter(b)
    if collective != "all_reduce":
        raise ConfigError("workload.algorithm = 'tree' does all_reduce only")
    p = b.p
    up_sent, down_sent = {}, {}
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        for t, part in enumerate(_split(size, 2)):
            if part == 0:
                continue
            mirrored = t == 1
            parent = {i: _tree_parent(i, p, mirrored) for i in range(p)}
            children = {i: [j for j in range(p) if parent[j] == i] for i in range(p)}
            depth = {}
            for i in range(p):
                d, x = 0, i
                while parent[x] >= 0:
                    x, d = parent[x], d + 1
                depth[i] = d
            reduced = {}
            for i in sorted(range(p), key=lambda i: -depth[i]):    # leaves first, upwards
                mine = [reduced[c] for c in children[i]]
                if parent[i] >= 0:
                    key = (t, i)
                    snd = e.send(i, parent[i], part, mine + ([up_sent[key]] if key in up_sent
                                                             else []))
                    up_sent[key] = snd
                    reduced[i] = e.reduce(parent[i], part, [snd])
                else:
                    root = i
            have = {root: [reduced[c] for c in children[root]]}
            for i in sorted(range(p), key=lambda i: depth[i]):      # root first, downwards
                for c in children[i]:
                    key = (t, i, c)
                    snd = e.send(i, c, part, have[i] + ([down_sent[key]] if key in down_sent
                                                        else []))
                    down_sent[key] = snd
                    have[c] = [e.received(c, part, snd)]
        b.end_chunk()
    _flush(e)


# ------------------------------------------------------------------ hierarchical

def hierarchical(b, collective, dims):
    """All-reduce on a multi-dimensional topology (participants in coordinate order, dims =
    sizes, dimension 0 innermost): reduce-scatter along dimensions 0 .. n-2 in turn (each
    ring of a dimension works on the shard the previous dimensions left), all-reduce along
    the last, all-gather back along n-2 .. 0. A node's work in one phase waits for its last
    op of the previous phase; rings use the + direction."""
    if collective != "all_reduce":
        raise ConfigError("workload.algorithm = 'hierarchical' does all_reduce only")
    p = b.p
    if int(np.prod(dims)) != p or len(dims) < 2:
        raise ConfigError(f"workload.algorithm = 'hierarchical' needs the participants to "
                          f"fill a topology of two or more dimensions, got {p} nodes for "
                          f"dims {list(dims)}")
    strides = np.cumprod([1] + list(dims[:-1]))
    coord = [tuple((i // strides[d]) % dims[d] for d in range(len(dims))) for i in range(p)]

    def rings(d):
        """Lists of participant indices forming the rings of dimension d, by coordinate."""
        groups = {}
        for i in range(p):
            key = tuple(c for e, c in enumerate(coord[i]) if e != d)
            groups.setdefault(key, []).append(i)
        return [sorted(g, key=lambda i: coord[i][d]) for _, g in sorted(groups.items())]

    def sub(members):
        s = _Builder([b.order[i] for i in members], 0, 1, b.reduce_bpc, b.engine, b.sram,
                     b.g, grain=b.grain, sram_pieces=b.sram_pieces)
        s.io = False
        return s

    def phase(d, shard, op):
        """Run op (reduce-scatter, all-gather, or both) on every ring of dimension d, each
        node starting from `ready` and leaving there what its last step was."""
        for ring_ in rings(d):
            s = sub(ring_)
            start = {k: ready[m] for k, m in enumerate(ring_)}
            if op in ("rs", "ar"):
                done = {}
                _ring_reduce_scatter(s, shard, +1, start, done)
                start = done
            if op in ("ag", "ar"):
                fin = {}
                _ring_all_gather(s, shard, +1, start, fin)
                start = fin
            for k, m in enumerate(ring_):
                ready[m] = start[k]

    n = len(dims)
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        ready = {i: ([b._load(i)] if b.engine == "offload" else list(b.start.get(i, ())))
                 for i in range(p)}
        shard = size
        for d in range(n - 1):                               # reduce-scatter inward
            phase(d, shard, "rs")
            shard = -(-shard // dims[d])
        phase(n - 1, shard, "ar")                            # all-reduce on the last
        for d in range(n - 2, -1, -1):                       # all-gather back
            shard = shard * dims[d]
            phase(d, shard, "ag")
        for i in range(p):
            if ready[i]:
                b.last_at[i] = ready[i][-1]
        b.end_chunk()


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
    "nccl": (None, nccl.SUPPORTED),            # (pysim/workload/nccl.py: needs the machine)
}


def ops_bound(collective, algorithm, p, chunks, engine=None, dims=None, pieces=1):
    """An upper bound of the engine ops a collective expands into, counted before building
    any (so that a graph too large is refused at once, not after minutes of building): per
    chunk, the sends, reductions and receptions of each algorithm -- exactly without an
    endpoint model and on the NPU (_engine_ops); on the offload engine each reduction in two
    parts (the bulk as a message arrives, its last packet's worth after it) and per piece a
    load and a store per node, `pieces` the pieces the engine cuts a chunk into."""
    if engine in (None, "npu") and algorithm != "hierarchical":
        return chunks * _engine_ops(collective, algorithm, p, engine)
    log = max(1, (p - 1).bit_length())
    ring = {"reduce_scatter": 2, "all_gather": 1, "all_reduce": 3}
    if algorithm in ("ring", "bidir_ring") and collective in ring:
        per = ring[collective] * (p - 1) * p * (2 if algorithm == "bidir_ring" else 1)
    elif algorithm == "ring":                   # broadcast, reduce: a pipeline
        per = 2 * (p - 1)
    elif algorithm == "direct":
        per = {"all_to_all": 1, "broadcast": 0, "reduce": 0}.get(
            collective, ring.get(collective, 3)) * p * (p - 1) + 2 * (p - 1)
    elif algorithm == "halving_doubling":
        per = ring.get(collective, 3) * p * log
    elif algorithm == "tree":
        per = 6 * (p - 1)
    elif algorithm == "hierarchical" and dims:
        per = 3 * p * sum(int(k) - 1 for k in dims)
    elif algorithm == "nccl":
        return nccl.ops_bound(collective, p, min(p, 64))
    else:
        per = 3 * p * p
    if engine == "npu":
        per *= 3
    elif engine == "offload":
        return chunks * pieces * (2 * per + 2 * p)
    return chunks * per


def _engine_ops(collective, algorithm, p, engine):
    """The engine ops of one chunk of a collective without an offload engine, exactly (each
    half of a chunk taken as not empty): a send is one op (two on the NPU: its HBM read
    first), a reduction one (three on the NPU: its HBM traffic, its cores, their join), a
    reception none (one on the NPU: its HBM write)."""
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
    if algorithm == "direct":
        return per * (p - 1) * p
    if algorithm == "halving_doubling":
        return per * steps * p
    return 2 * per * (p - 1)                     # tree: two trees, up and down


def build(collective, algorithm, order, nbytes, chunks=1, reduce_bytes_per_cycle=None,
          engine=None, sram_bytes=None, graph=None, chunks_in_flight=0, dims=None,
          grain=512, after=None, done=None, sram_state=None,
          sram_pieces=OFFLOAD_PIECES_IN_SRAM, units=None, streams=None, machine=None,
          nccl_settings=None):
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
    {algorithm, protocol, channels} (workload.nccl_*)."""
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
    ops = ops_bound(collective, algorithm, len(order), chunks, engine, dims, pieces)
    limit = graph_module.MAX_OPS
    if ops > limit:
        raise GraphError(f"workload.chunks = {chunks}: {collective} by {algorithm} over "
                         f"{len(order)} participants makes up to {ops:,} ops, more than the "
                         f"{limit:,} ops a graph may have (fewer chunks or participants make "
                         f"fewer)")
    idx = {n: i for i, n in enumerate(order)}
    start = {idx[n]: list(ops) for n, ops in (after or {}).items() if n in idx}
    g = graph if graph is not None else OpGraph()
    key = tuple(sorted(order))
    if streams is not None:            # in the order issued, on the group's streams
        state, n_streams = streams
        for n in order:
            prev = state.get((key, n), ())
            if len(prev) >= n_streams:
                start.setdefault(idx[n], []).append(prev[-n_streams])
    if units:                          # the units held from the start to the end
        for n in order:
            if units.get(n):
                start[idx[n]] = [g.take_units(n, units[n], after=start.get(idx[n], []))]
    b = _Builder(order, nbytes, chunks, reduce_bytes_per_cycle, engine, sram_bytes, graph,
                 chunks_in_flight, grain, start, sram_state, sram_pieces)
    b.g = g
    if algorithm == "hierarchical":
        if dims is None:
            raise ConfigError("workload.algorithm = 'hierarchical' needs a topology with "
                              "dimensions (a torus or mesh)")
        hierarchical(b, collective, dims)
    elif algorithm == "nccl":
        nccl.build(b, collective, nccl_settings or {}, machine)
    else:
        fn(b, collective)
    if done is not None or units or streams is not None:
        done = {} if done is None else done
        for i, n in enumerate(order):
            last = b.node_last.get(i) or list(b.start.get(i, ()))
            if units and units.get(n):
                done[n] = b.g.free_units(n, units[n], after=last)
            else:
                done[n] = b.g.delay(0, after=last)
            if streams is not None:
                prev = streams[0].setdefault((key, n), [])
                prev.append(done[n])
                del prev[:-streams[1]]
    return b.g


def bus_factor(collective, p):
    """nccl-tests convention: busbw = algbw x factor."""
    if collective == "all_reduce":
        return 2 * (p - 1) / p
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return (p - 1) / p
    return 1.0


# ------------------------------------------------------------------ running one

def participants(cfg, topo):
    names = topo.node_names
    group = cfg.workload.group
    if group is None:
        npus = [n for n, k in zip(names, topo.node_kinds) if k == "npu"]
        group = npus or [n for n, k in zip(names, topo.node_kinds) if k == "host"]
    index = {n: i for i, n in enumerate(names)}
    for n in group:
        if n not in index:
            raise ConfigError(f"workload.group: {n!r} is not a node of {topo.name}")
        kind = topo.node_kinds[index[n]]
        if kind in ("switch", "mem"):
            raise ConfigError(f"workload.group: {n!r} is a {'memory node' if kind == 'mem' else kind}"
                              f"; a collective runs among NPUs and hosts (nodes that compute)")
    _at_least_two(group)
    return list(group)


def _at_least_two(group):
    if len(group) < 2:
        raise ConfigError(f"workload.group = {list(group)}: a collective needs at least 2 "
                          f"participants (by default every NPU takes part, or every host "
                          f"if there is no NPU)")


def _snake(dims):
    """Every point of a grid of sizes `dims`, consecutive ones one step apart in one
    coordinate (a reflected mixed-radix Gray code, first coordinate fastest)."""
    if not dims:
        return [()]
    rest = _snake(dims[1:])
    out = []
    for j, r in enumerate(rest):
        xs = range(dims[0]) if j % 2 == 0 else range(dims[0] - 1, -1, -1)
        out.extend((x,) + r for x in xs)
    return out


def grid_cycle(topo):
    """A Hamiltonian cycle of a mesh or torus through neighbour links, as node indices, or
    None: pick a dimension a of size >= 2 whose complement has an even number of points; the
    'rows' are those points in snake order; go out along each row at coordinate a = 1 .. k-1
    (alternating direction) and come back along a = 0. (A torus needs no wrap link for it;
    the bottleneck of any Hamiltonian cycle of a grid is its narrowest dimension anyway.)"""
    if topo.coords is None or not topo.dims:
        return None
    dims = list(topo.dims)
    for a in range(len(dims)):
        others = dims[:a] + dims[a + 1:]
        if dims[a] < 2 or int(np.prod(others)) % 2:
            continue
        rows = _snake(others)
        if len(rows) < 2:
            continue
        pos = {tuple(int(x) for x in c): i for i, c in enumerate(topo.coords)}

        def node(x, row):
            return pos[tuple(row[:a]) + (x,) + tuple(row[a:])]
        path = []
        for j, row in enumerate(rows):
            xs = range(1, dims[a]) if j % 2 == 0 else range(dims[a] - 1, 0, -1)
            path.extend(node(x, row) for x in xs)
        path.extend(node(0, row) for row in reversed(rows))
        return path
    return None


def ring_order(cfg, topo, group):
    """The ring the collective uses: workload.ring_order, else a Hamiltonian cycle through
    direct links (up to 16 participants: found by search, widest bottleneck first, then lowest
    names; more: on a mesh or torus where every node takes part, grid_cycle), else the
    group's order."""
    if cfg.workload.ring_order is not None:
        order = list(cfg.workload.ring_order)
        if sorted(order) != sorted(group):
            raise ConfigError(f"workload.ring_order = {order}: expected the participants "
                              f"{group} in some order")
        return order
    idx = {n: i for i, n in enumerate(topo.node_names)}
    bw = {}
    for c in range(topo.n_channels):
        key = (topo.ch_src[c], topo.ch_dst[c])
        bw[key] = bw.get(key, 0.0) + topo.ch_bytes_per_cycle[c]
    ids = [idx[n] for n in group]
    p = len(ids)
    if p > 16:
        cycle = grid_cycle(topo) if sorted(ids) == list(range(topo.n_nodes)) else None
        if cycle is not None and all(bw.get((a, b), 0.0) > 0
                                     for a, b in zip(cycle, cycle[1:] + cycle[:1])):
            return [topo.node_names[i] for i in cycle]
        return list(group)
    best = [None, -1.0]

    def extend(path, used, bottleneck, budget):
        if budget[0] <= 0:
            return
        budget[0] -= 1
        if len(path) == p:
            back = bw.get((path[-1], path[0]), 0.0)
            if back > 0 and min(bottleneck, back) > best[1]:
                best[0], best[1] = list(path), min(bottleneck, back)
            return
        cands = [v for v in ids if v not in used and bw.get((path[-1], v), 0.0) > 0]
        cands.sort(key=lambda v: (-bw[(path[-1], v)], v))
        for v in cands:
            b = min(bottleneck, bw[(path[-1], v)])
            if b <= best[1]:
                continue
            used.add(v)
            path.append(v)
            extend(path, used, b, budget)
            path.pop()
            used.discard(v)

    extend([ids[0]], {ids[0]}, float("inf"), [200000])
    if best[0] is None:
        return list(group)
    return [topo.node_names[i] for i in best[0]]


RING_ALGORITHMS = ("ring", "bidir_ring")


def check_offload_sram(topo, cfg, npus, nbytes=None, chunks=None):
    """The offload engine streams a chunk through its SRAM in pieces of SRAM / offload_pieces:
    an SRAM that cannot hold a piece of one byte holds nothing (a ConfigError naming
    offload_sram_mb)."""
    eparams = engine_params(topo, cfg)
    idx = {n: i for i, n in enumerate(topo.node_names)}
    for n in npus:
        _, sram, _, pieces = eparams[idx[n]]
        if sram < pieces:
            what = (f"a chunk of {-(-nbytes // chunks):,} bytes (workload.bytes = {nbytes} / "
                    f"workload.chunks = {chunks})" if nbytes is not None else "the data")
            raise ConfigError(
                f"workload.engine = 'offload': {what} does not fit in the engine's SRAM of "
                f"{sram:,} bytes ([topology.npu] offload_sram_mb) even in pieces of one byte "
                f"(it streams pieces of SRAM / offload_pieces = {pieces}); raise the SRAM")


def collective_graph(cfg, topo, graph=None):
    """The op graph of the configured collective (workload.*), and what describes it."""
    group = participants(cfg, topo)
    w = cfg.workload
    # ranks: along the ring for the ring algorithms (a ring through direct links), else in
    # the participants' order (on a mesh or torus, coordinate order: halving-doubling's
    # partners then differ in one coordinate; on a DGX-1, node order pairs NVLink peers),
    # unless workload.ring_order says
    if w.algorithm in RING_ALGORITHMS or w.ring_order is not None:
        order = ring_order(cfg, topo, group)
    else:
        order = list(group)
    clock = cfg.network.clock_ghz
    reduce_bpc = None if w.reduce_gbps is None else w.reduce_gbps / clock
    sram, pieces = None, OFFLOAD_PIECES_IN_SRAM
    if w.engine is not None:
        idx = {n: i for i, n in enumerate(topo.node_names)}
        kinds = {topo.node_kinds[idx[n]] for n in order}
        if kinds != {"npu"}:
            raise ConfigError(f"workload.engine = {w.engine!r}: the participants must all be "
                              f"NPUs, got {', '.join(sorted(kinds))}")
        sram, pieces = engine_params(topo, cfg)[idx[order[0]]][1::2]
        if w.engine == "offload":
            check_offload_sram(topo, cfg, order, w.bytes, w.chunks)
        for n in order:                                  # the data must fit in HBM
            own = topo.node_mem[idx[n]] if topo.node_mem else {}
            cap = own.get("hbm_gb", (cfg.topology.npu or {}).get("hbm_gb", 32.0)) * 1e9
            if w.bytes > cap:
                raise ConfigError(f"workload.bytes = {w.bytes}: more than the HBM of {n} "
                                  f"({cap:.0f} bytes)")
    dims = None
    if w.algorithm == "hierarchical":
        if topo.coords is None or len(topo.dims) < 2:
            raise ConfigError("workload.algorithm = 'hierarchical' needs a topology with two "
                              "or more dimensions (a torus or mesh)")
        if sorted(order) != sorted(topo.node_names):
            raise ConfigError("workload.algorithm = 'hierarchical' runs over every node of "
                              "the topology (leave workload.group unset)")
        order = list(topo.node_names)          # coordinate order, dimension 0 innermost
        dims = list(topo.dims)
    chosen = {}
    g = build(w.collective, w.algorithm, order, w.bytes, w.chunks, reduce_bpc, w.engine,
              sram, graph, w.chunks_in_flight, dims, w.packet_flits * cfg.network.flit_bytes,
              sram_pieces=pieces, units=held_units(cfg, topo, w.engine),
              **nccl_args(cfg, topo, chosen))
    return g, dict(collective=w.collective, algorithm=w.algorithm, bytes=w.bytes,
                   chunks=w.chunks, engine=w.engine, participants=group, order=order,
                   **chosen)


def nccl_args(cfg, topo, chosen=None):
    """build()'s machine and nccl_settings for workload.algorithm = 'nccl' (else {});
    `chosen`, if given, receives the algorithm and protocol NCCL's model picked."""
    w = cfg.workload
    if w.algorithm != "nccl":
        return {}
    settings = dict(algorithm=w.nccl_algorithm, protocol=w.nccl_protocol,
                    channels=w.nccl_channels, chosen=chosen)
    return dict(machine=getattr(topo, "cluster", None), nccl_settings=settings)


def endpoint_report(graph, result, order, clock_ghz):
    """Per participant: HBM bytes moved for communication, network bytes sent, their ratio,
    the achieved send bandwidth, and how much longer its roofline compute ops took than
    alone."""
    t = max(result.makespan_cycles, 1)
    rows = {}
    for n in order:
        rows[n] = dict(hbm_bytes=0, network_bytes=0, compute_slowdown_cycles=0)
    for k, node, size in zip(graph.kind, graph.node, graph.size):
        if node in rows and k == "memory":
            rows[node]["hbm_bytes"] += size
        elif node in rows and k == "reduce_npu":      # see OpGraph.reduce
            rows[node]["hbm_bytes"] += 4 * size
        elif node in rows and k == "send":
            rows[node]["network_bytes"] += size
    start, finish = op_times(result.ops)
    for i, (k, node, w) in enumerate(zip(graph.kind, graph.node, graph.work)):
        if k == "compute" and w is not None and node in rows:
            iso = result.ops[i]["isolated_cycles"]
            rows[node]["compute_slowdown_cycles"] += int(finish[i] - start[i]) - iso
    for r in rows.values():
        r["hbm_bytes_per_network_byte"] = r["hbm_bytes"] / r["network_bytes"] \
            if r["network_bytes"] else 0.0
        r["network_gbps"] = r["network_bytes"] * clock_ghz / t
    return rows


@register("collective", traces=True,
          reads=("workload.collective", "workload.bytes") + COLLECTIVE_KEYS + OP_GRAPH_KEYS)
def run_collective(cfg, progress=None):
    """Expand workload.* into an op graph, run it, and report collective time and bandwidth,
    and per NPU its HBM traffic per network byte."""
    topo = build_topology(cfg)                  # (run_graph compiles the network, routes and all)
    graph, meta = collective_graph(cfg, topo)
    result = run_graph(cfg, graph, progress=progress)
    cycles = result.makespan_cycles
    p = len(meta["order"])
    w = cfg.workload
    algbw = w.bytes * cfg.network.clock_ghz / cycles if cycles else float("nan")
    per_npu = endpoint_report(graph, result, meta["order"], cfg.network.clock_ghz)
    result.collective = dict(
        **meta, collective_cycles=cycles,
        collective_seconds=cycles / (cfg.network.clock_ghz * 1e9),
        algbw_gbps=algbw, busbw_gbps=algbw * bus_factor(w.collective, p), per_npu=per_npu)
    return result


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "collective", "str", "all_reduce", "-",
        "Collective: all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce "
        "(the root is the first participant).", None,
        lambda: ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                 "reduce"]),
    Key("workload", "algorithm", "str", "ring", "-",
        "Collective algorithm: ring, bidir_ring, direct, halving_doubling, tree (double "
        "binary tree), hierarchical, nccl (as NCCL runs it on a cluster: "
        "pysim/workload/nccl.py).", None, lambda: list(ALGORITHMS)),
    Key("workload", "bytes", "int", 1048576, "bytes", "Collective: bytes per participant.",
        (lambda x: x > 0, "an integer >= 1 (a collective of no data has no time or bandwidth)")),
    Key("workload", "chunks", "int", 4, "-",
        "Collective: pieces the data is split into, pipelined through the steps.", POS),
    Key("workload", "chunks_in_flight", "int", 0, "-",
        "Collective: at most this many chunks under way at a node at once (0: no bound).",
        NONNEG),
    Key("workload", "group", "strs", None, "node names",
        "Collective participants, NPUs or hosts (default: every NPU, or every host if there "
        "is none); training: the NPUs used, in rank order (default: every NPU).",
        None),
    Key("workload", "ring_order", "strs", None, "node names",
        "Ring order of the participants, and their ranks for every algorithm (default: ring "
        "algorithms go round a ring over direct links if the topology has one, widest first, "
        "else node order; the others rank in workload.group order).", None),
    Key("workload", "reduce_gbps", "float", None, "GB/s",
        "Reduction throughput at each node (default: reductions take no time).", POS),
    Key("workload", "engine", "str", None, "-",
        "Collectives: where reductions run: 'npu' (its cores, through HBM) or 'offload' (a "
        "collectives engine); default: not modelled, reductions at workload.reduce_gbps "
        "(training: default 'npu').",
        None, lambda: ["npu", "offload"]),
)
