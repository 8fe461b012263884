"""Direct collectives: every participant sends each other one its share at once."""
from __future__ import annotations

from pysim.workload.collectives.builder import _emitter, _flush, _split


def direct(b, collective):
    """Each node sends every other node its share at once. Node i's messages are issued to
    i + 1, i + 2, ... in turn, so at any moment the nodes send to a permutation of each other
    rather than all to the same one.

    An all-to-all keeps at most b.peers messages in flight per side (0: all at once): a
    node's messages, chunk by chunk and in each to i + 1, i + 2, ..., form one sequence, and
    its m-th starts once its (m - peers)-th has been received and its receiver has received
    its own (m - peers)-th, so each node sends to at most `peers` nodes and receives from at
    most `peers` at once (NCCL's grouped sends and receives go through the peers in that
    order, src/init.cc's p2p schedule)."""
    e = _emitter(b)
    p = b.p
    w = b.peers if collective == "all_to_all" and 0 < b.peers < b.C * (p - 1) else 0
    got = {}                          # (place in the sequence, sender): its reception
    for c, size in enumerate(b.chunk_sizes()):
        b.begin_chunk(size)
        blocks = _split(size, p)
        if collective == "all_to_all":
            for k in range(1, p):
                m = c * (p - 1) + k - 1       # the messages' place in their senders' sequence
                back = (m - w) % (p - 1) + 1  # the round of the one `w` before it
                for i in range(p):
                    j = (i + k) % p
                    after = [got[m - w, i], got[m - w, (j - back) % p]] if w and m >= w \
                        else []
                    r = e.received(j, blocks[j], e.send(i, j, blocks[j], after))
                    if w:
                        got[m, i] = r
                if w and m >= w:              # (no later message waits for these)
                    for i in range(p):
                        del got[m - w, i]
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
        if collective == "all_reduce":         # block j is reduced: one op joins its
            owned = {j: [e.join(owned[j])] for j in range(p)}   # reductions, so that the
            # p - 1 sends of it wait for one op each, not p - 1 (p^3 dependencies in all)
        if collective in ("all_reduce", "all_gather"):
            for k in range(1, p):
                for j in range(p):
                    i = (j + k) % p
                    e.received(i, blocks[j], e.send(j, i, blocks[j], owned[j]))
        b.end_chunk()
    _flush(e)
