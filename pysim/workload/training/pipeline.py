"""Pipeline schedules: the order a stage runs its micro-batches' forward and backward
passes in."""
from __future__ import annotations

SCHEDULES = ("1f1b", "gpipe")


def schedule(kind, s, pp, m):
    """The order stage s runs its micro-batches' forward ('F', mb) and backward ('B', mb)
    passes in: GPipe all forwards then all backwards; 1F1B (PipeDream-Flush, as Megatron-LM
    runs it) pp - s - 1 forwards to warm up, then one forward and one backward in turn, then
    the remaining backwards."""
    if kind == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(pp - s - 1, m)
    seq = [("F", j) for j in range(warm)]
    for j in range(m - warm):
        seq += [("F", warm + j), ("B", j)]
    seq += [("B", j) for j in range(m - warm, m)]
    return seq
