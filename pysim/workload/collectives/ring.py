"""Ring collectives: reduce-scatter, all-gather and all-reduce around a ring (one way or both
ways, each chunk halved), and broadcast and reduce as a pipeline along it."""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.workload.collectives import builder
from pysim.workload.collectives.builder import _Bulk, _emitter, _flush, _split


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


def _ring_streams(b, collective, bidirectional):
    """ring() as streams (build(form='streams')): per chunk, direction and rank i, one send
    to its neighbour j of every byte i sends in all the steps, at j one reduction of the
    reduce-scatter's bytes and one reception of the all-gather's, each after the send
    (taking it as it arrives where the NPU runs them), and a delay of the latency of the
    steps the stream stands for (OpGraph.step_latency: steps - 1 one-flit latencies of the
    route); a rank's part ends when that delay and its own stream have. Where the steps are
    alike (a symmetric ring, nothing else on its links) the stream and what takes it at j
    are the steps' critical path summed, and the makespan is that of
    the steps to within a few cycles per step (rounding of each step's ops, the flow level's
    per-message latency); sharing links with other traffic, a stream keeps its rate through
    the collective where the steps would pause between messages."""
    if collective not in ("all_reduce", "reduce_scatter", "all_gather"):
        raise ConfigError(f"workload.algorithm = 'ring' does not do {collective}")
    k = _Bulk(b)
    p = b.p
    rs, ag = collective != "all_gather", collective != "reduce_scatter"
    steps = (p - 1) * (rs + ag)
    for size in b.chunk_sizes():
        b.begin_chunk(size)
        halves = [(size, +1)] if not bidirectional else \
            list(zip(_split(size, 2), (+1, -1)))
        for part, direction in halves:
            if part == 0:
                continue
            blocks = _split(part, p)
            # rank i sends, over the steps, every block but one: in the reduce-scatter all
            # but block i + dir, in the all-gather all but block i + 2 dir (_ring_bulk)
            red = [part - blocks[(i + direction) % p] if rs else 0 for i in range(p)]
            gat = [part - blocks[(i + 2 * direction) % p] if ag else 0 for i in range(p)]
            sends = [k.send(i, (i + direction) % p, red[i] + gat[i], []) for i in range(p)]
            for i in range(p):
                j = (i + direction) % p
                # j's reduction and its reception each take the stream as it arrives (on
                # the NPU through its memory: compile.stream_sources); the rank's part ends
                # after both
                ends = ([k.reduce(j, red[i], [sends[i]])] if rs else []) + \
                    ([k.received(j, gat[i], sends[i])] if ag else [])
                b.last_at[j] = k.latency(i, j, steps - 1, ends + [sends[j]])
        b.end_chunk()
    k.flush()


def ring(b, collective, bidirectional=False):
    if b.form == "streams" and _Bulk.applies(b):
        return _ring_streams(b, collective, bidirectional)
    if _Bulk.applies(b) and builder.BULK:
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
