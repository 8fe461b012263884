# A binary min-heap of (cycle, id) pairs in two parallel arrays; ties go to the lower id, so
# the order of events at one cycle is deterministic. Used for packet generation (per
# endpoint) and op finishes (per op).
from csim._types cimport cycle_t, int32_t


cdef inline void heap_push(cycle_t* time, int32_t* ids, int32_t* n, cycle_t t,
                           int32_t v) noexcept nogil:
    cdef int32_t i = n[0]
    cdef int32_t parent
    n[0] += 1
    while i > 0:
        parent = (i - 1) >> 1
        if time[parent] < t or (time[parent] == t and ids[parent] < v):
            break
        time[i] = time[parent]
        ids[i] = ids[parent]
        i = parent
    time[i] = t
    ids[i] = v


cdef inline void heap_pop(cycle_t* time, int32_t* ids, int32_t* n) noexcept nogil:
    """Remove the top (time[0], ids[0])."""
    cdef int32_t m = n[0] - 1
    cdef cycle_t t = time[m]
    cdef int32_t v = ids[m]
    cdef int32_t i = 0
    cdef int32_t child
    n[0] = m
    while True:
        child = 2 * i + 1
        if child >= m:
            break
        if child + 1 < m and (time[child + 1] < time[child] or
                              (time[child + 1] == time[child] and ids[child + 1] < ids[child])):
            child += 1
        if t < time[child] or (t == time[child] and v < ids[child]):
            break
        time[i] = time[child]
        ids[i] = ids[child]
        i = child
    if m > 0:
        time[i] = t
        ids[i] = v
