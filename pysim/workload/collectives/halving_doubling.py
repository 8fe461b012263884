"""Recursive halving (reduce-scatter) and doubling (all-gather) over a power-of-two group."""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.workload.collectives.builder import _emitter, _flush, _split


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
