# An unordered set of ids with O(1) add and remove: the members packed in items[0:count],
# and pos[x] = where x sits (-1 when absent). Removing moves the last member into the hole,
# so a walk from the end can remove the member it is at. Used for the active routers, the
# active NICs and each router's input VCs awaiting VC allocation.
from csim._types cimport int32_t


cdef inline void iset_add(int32_t* items, int32_t* pos, int32_t* count,
                          int32_t x) noexcept nogil:
    pos[x] = count[0]
    items[count[0]] = x
    count[0] += 1


cdef inline void iset_remove(int32_t* items, int32_t* pos, int32_t* count,
                             int32_t x) noexcept nogil:
    cdef int32_t i = pos[x]
    cdef int32_t last = items[count[0] - 1]
    items[i] = last
    pos[last] = i
    pos[x] = -1
    count[0] -= 1
