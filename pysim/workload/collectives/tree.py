"""All-reduce on a double binary tree (the second tree the first mirrored)."""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.workload.collectives.builder import _emitter, _flush, _split


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
