# Route lookup: the output channel a packet at node u bound for node d takes, from a table of
# every pair or by a rule (dimension order from coordinates; rows shared by the nodes of a
# kind), so that a large regular network needs no table of n x n entries (see
# pysim/routing.py). Compiled and inline: a router calls it once per head.
from csim._types cimport *


cdef inline int32_t _rt_dor(const Routes* R, int64_t u, int64_t d) noexcept nogil:
    """Dimension order: the lowest dimension where u's and d's coordinates differ; the
    shorter way round where it wraps (at distance k/2: + if u's coordinate is even), + only
    on a ring one way round, else towards d."""
    cdef int32_t i, a = 0, b = 0, k, off, nd = R.nd
    cdef int32_t plus
    for i in range(nd):
        a = R.coords[u * nd + i]
        b = R.coords[d * nd + i]
        if a != b:
            break
    else:
        return -1
    if R.dateline and R.wrap[i]:
        if not R.bidir:
            plus = 1
        else:
            k = R.dims[i]
            off = b - a
            if off < 0:
                off += k
            plus = 2 * off < k or (2 * off == k and (a & 1) == 0)
    else:
        plus = b > a
    return R.chan[(u * nd + i) * 2 + (0 if plus else 1)]


cdef inline int32_t _rt_rows(const Routes* R, int64_t u, int64_t d) noexcept nogil:
    """The node's exception for d if it has one (a binary search), else its row's."""
    cdef int64_t lo = R.exc_ptr[u], hi = R.exc_ptr[u + 1], mid
    cdef int32_t v
    while lo < hi:
        mid = (lo + hi) >> 1
        if R.exc_d[mid] < d:
            lo = mid + 1
        else:
            hi = mid
    if lo < R.exc_ptr[u + 1] and R.exc_d[lo] == d:
        return R.exc_c[lo]
    v = R.vec[<int64_t>R.cls[u] * R.n + d]
    if v < 0:
        return -1
    return v + R.off[u]


cdef inline int32_t route_next(const Routes* R, int64_t u, int64_t d) noexcept nogil:
    """The channel node u takes towards d (-1: none)."""
    cdef int32_t c
    if R.kind == RT_TABLE:
        return R.tab[u * R.n + d]
    if u == d:
        return -1 if R.diag == NULL else R.diag[u]
    if R.kind == RT_DOR:
        c = _rt_dor(R, u, d)
    else:
        c = _rt_rows(R, u, d)
    if c < 0 or R.tmap == NULL:
        return c
    return R.tmap[c]
