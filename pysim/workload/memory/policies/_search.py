"""A binary search the planning policies share."""


def _largest(ok, lo, hi):
    """The largest x in [lo, hi] with ok(x), by binary search (ok assumed monotone, true
    below some point); None if not even ok(lo)."""
    if not ok(lo):
        return None
    while lo < hi:
        m = (lo + hi + 1) // 2
        if ok(m):
            lo = m
        else:
            hi = m - 1
    return lo
