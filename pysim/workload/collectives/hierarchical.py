"""All-reduce over the dimensions of a torus or mesh: rings of each dimension in turn."""
from __future__ import annotations

import numpy as np

from pysim.errors import ConfigError
from pysim.workload.collectives.builder import _Builder, _split
from pysim.workload.collectives.ring import _ring_all_gather, _ring_reduce_scatter


def hierarchical(b, collective, dims, bidirectional=False):
    """All-reduce on a multi-dimensional topology (participants in coordinate order, dims =
    sizes, dimension 0 innermost): reduce-scatter along dimensions 0 .. n-2 in turn (each
    ring of a dimension works on the shard the previous dimensions left), all-reduce along
    the last, all-gather back along n-2 .. 0. A node's work in one phase waits for its last
    op of the previous phase; rings use the + direction, or, bidirectional
    ('bidir_hierarchical'), each shard halved, one half around each ring each way (as
    bidir_ring), a node's next phase waiting for both halves (joined at the end of a chunk
    by an op of no time)."""
    name = "bidir_hierarchical" if bidirectional else "hierarchical"
    if collective != "all_reduce":
        raise ConfigError(f"workload.algorithm = '{name}' does all_reduce only")
    p = b.p
    if int(np.prod(dims)) != p or len(dims) < 2:
        raise ConfigError(f"workload.algorithm = '{name}' needs the participants to "
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
        halves = [(shard, +1)] if not bidirectional else \
            [(h, d_) for h, d_ in zip(_split(shard, 2), (+1, -1)) if h]
        for ring_ in rings(d):
            ends = {k: [] for k in range(len(ring_))}
            for part, direction in halves:
                s = sub(ring_)
                start = {k: ready[m] for k, m in enumerate(ring_)}
                if op in ("rs", "ar"):
                    done = {}
                    _ring_reduce_scatter(s, part, direction, start, done)
                    start = done
                if op in ("ag", "ar"):
                    fin = {}
                    _ring_all_gather(s, part, direction, start, fin)
                    start = fin
                for k in ends:
                    ends[k] += start[k]
            for k, m in enumerate(ring_):
                ready[m] = ends[k]

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
                b.last_at[i] = ready[i][-1] if len(ready[i]) == 1 else b.join(ready[i])
        b.end_chunk()
