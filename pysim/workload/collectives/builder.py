"""The builder every collective algorithm adds its ops through (one op at a time, with the
endpoint models: none, the NPU's own cores, an offload engine), and its bulk twin (_Bulk),
which gathers the same ops as columns and adds them to the graph at once."""
from __future__ import annotations

import math

from pysim.errors import ConfigError
from pysim.schema import MAX_INT
from pysim.workload.graph import OpGraph

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
                 sram_pieces=OFFLOAD_PIECES_IN_SRAM, form="steps", peers=0):
        self.g = graph if graph is not None else OpGraph()
        self.form = form                # 'steps' or 'streams' (build)
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
        self.peers = peers              # all-to-all: peers in flight per side (0: all)

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

    def join(self, after):
        """An op of no time that finishes when every op of `after` has (a join point: ops
        that wait for all of them wait for it alone)."""
        return self.g.delay(0, after=list(after))

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
        self.latencies = []
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

    def join(self, after):
        """An op of no time after every op of `after` (_Builder.join)."""
        return self._op("delay", None, None, 0, list(after))

    def latency(self, a, c, steps, after):
        """A delay of `steps` one-flit latencies from participant a to c
        (OpGraph.step_latency)."""
        b = self.b
        op = self._op("delay", None, None, 0, after)
        self.latencies.append((op, b.order[a], b.order[c], int(steps)))
        return op

    def flush(self):
        self.b.g.add_ops(self.kind, self.node, self.dst, self.size, self.after)
        self.b.g.latencies.extend(self.latencies)


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
