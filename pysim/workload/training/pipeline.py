"""Pipeline schedules: the order a stage runs its micro-batches' forward and backward
passes in.

A stage's schedule is a list of (pass, micro-batch, chunk): pass 'F' or 'B', chunk the model
chunk (0 unless the schedule is interleaved). With `v` model chunks per stage (Narayanan et
al., SC21, section 2.2.2), the model is cut into pp x v virtual stages and stage s holds
virtual stages s, s + pp, ..., s + (v - 1) pp; chunk c of stage s is virtual stage c pp + s.
"""
from __future__ import annotations

SCHEDULES = ("1f1b", "gpipe")


def schedule(kind, s, pp, m, v=1):
    """Stage s's order of passes. GPipe: all forwards, then all backwards. 1F1B
    (PipeDream-Flush, as Megatron-LM runs it): pp - s - 1 forwards to warm up, then one
    forward and one backward in turn, then the remaining backwards. Interleaved 1F1B (v > 1):
    micro-batches go through the chunks in groups of pp (forward: chunk 0 of micro-batches
    0..pp-1, then chunk 1 of the same, ...; backward in the reverse chunk order), with
    (pp - s - 1) x 2 + (v - 1) x pp forwards to warm up."""
    if v == 1:
        if kind == "gpipe":
            return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
        warm = min(pp - s - 1, m)
        seq = [("F", j, 0) for j in range(warm)]
        for j in range(m - warm):
            seq += [("F", warm + j, 0), ("B", j, 0)]
        seq += [("B", j, 0) for j in range(m - warm, m)]
        return seq
    total = m * v

    def unit(k, backward):
        group, within = divmod(k, pp * v)
        chunk = within // pp
        if backward:
            chunk = v - 1 - chunk
        return group * pp + within % pp, chunk

    fwd = [("F",) + unit(k, False) for k in range(total)]
    bwd = [("B",) + unit(k, True) for k in range(total)]
    if kind == "gpipe":
        return fwd + bwd
    warm = min((pp - s - 1) * 2 + (v - 1) * pp, total)
    seq = fwd[:warm]
    for k in range(total - warm):
        seq += [fwd[warm + k], bwd[k]]
    seq += bwd[total - warm:]
    return seq


def bubble_fraction(pp, m, v=1):
    """The pipeline bubble of (interleaved) 1F1B over the ideal time, (pp - 1) / (m v)
    (Narayanan et al., SC21, sections 2.2.1-2.2.2)."""
    return (pp - 1) / (m * v)
