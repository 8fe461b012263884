# Links: exact fractional serialisation, and the event wheel that carries flits and credits
# with each link's latency. Also the pooled allocators for events and packets.
from libc.stdlib cimport realloc
from csim._types cimport *


cdef inline int64_t link_credit(State* s, int32_t c) noexcept nogil:
    """Serialisation credit channel c holds at s.now (brought up to date lazily).

    A channel earns ch_num per cycle and a flit costs ch_den. While flits keep coming the
    credit is carried exactly, so a backlogged channel sends exactly num/den flits per cycle
    on average. Credit is not banked across idle time: once it reaches one flit plus one
    cycle's earnings (the channel could have sent a cycle ago and did not), it restarts at
    one flit.
    """
    cdef cycle_t dt = s.now - s.ch_acc_t[c]
    cdef int64_t den = s.ch_den[c]
    cdef int64_t num = s.ch_num[c]
    if dt > 0:
        if dt > den:           # num >= 1, so acc + dt * num > den + num
            s.ch_acc[c] = den
        else:
            s.ch_acc[c] += dt * num
            if s.ch_acc[c] >= den + num:
                s.ch_acc[c] = den
        s.ch_acc_t[c] = s.now
    return s.ch_acc[c]


cdef inline bint link_can_send(State* s, int32_t c) noexcept nogil:
    return link_credit(s, c) >= s.ch_den[c]


cdef inline void link_take(State* s, int32_t c) noexcept nogil:
    s.ch_acc[c] -= s.ch_den[c]
    s.ch_flits[c] += 1


cdef inline int schedule(State* s, cycle_t delay, int32_t c, int32_t vc, int32_t pkt,
                         int32_t seq) noexcept nogil:
    """Queue an event `delay` cycles from now (1 <= delay < wheel_size). FIFO per cycle."""
    cdef int32_t slot = s.wheel_now + <int32_t>delay
    cdef int32_t cap
    cdef Event* e
    cdef void* p
    if slot >= s.wheel_size:
        slot -= s.wheel_size
    if s.wh_len[slot] == s.wh_cap[slot]:
        cap = s.wh_cap[slot] * 2 if s.wh_cap[slot] > 0 else 64
        p = realloc(s.wh_buf[slot], cap * sizeof(Event))
        if p == NULL:
            return -1
        s.wh_buf[slot] = <Event*>p
        s.wh_cap[slot] = cap
    e = s.wh_buf[slot] + s.wh_len[slot]
    e.ch = c
    e.vc = vc
    e.pkt = pkt
    e.seq = seq
    s.wh_len[slot] += 1
    s.n_events += 1
    return 0


cdef inline int _grow_packets(State* s) noexcept nogil:
    cdef int32_t old = s.pk_cap
    cdef int32_t cap = old * 2 if old > 0 else 1024
    cdef int32_t i
    cdef void* p
    p = realloc(s.pk_src, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_src = <int32_t*>p
    p = realloc(s.pk_dst, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_dst = <int32_t*>p
    p = realloc(s.pk_len, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_len = <int32_t*>p
    p = realloc(s.pk_create, cap * sizeof(cycle_t))
    if p == NULL: return -1
    s.pk_create = <cycle_t*>p
    p = realloc(s.pk_inject, cap * sizeof(cycle_t))
    if p == NULL: return -1
    s.pk_inject = <cycle_t*>p
    p = realloc(s.pk_hops, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_hops = <int32_t*>p
    p = realloc(s.pk_class, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_class = <int32_t*>p
    p = realloc(s.pk_dim, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_dim = <int32_t*>p
    p = realloc(s.pk_next, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_next = <int32_t*>p
    p = realloc(s.pk_ej, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.pk_ej = <int32_t*>p
    p = realloc(s.pk_tag, cap * sizeof(int64_t))
    if p == NULL: return -1
    s.pk_tag = <int64_t*>p
    p = realloc(s.pk_meas, cap * sizeof(uint8_t))
    if p == NULL: return -1
    s.pk_meas = <uint8_t*>p
    for i in range(old, cap - 1):
        s.pk_next[i] = i + 1
    s.pk_next[cap - 1] = s.pk_free
    s.pk_free = old
    s.pk_cap = cap
    return 0


cdef inline int32_t packet_alloc(State* s) noexcept nogil:
    cdef int32_t p
    if s.pk_free < 0:
        if _grow_packets(s) != 0:
            return -1
    p = s.pk_free
    s.pk_free = s.pk_next[p]
    s.pk_next[p] = -1
    s.pk_alive += 1
    return p


cdef inline void packet_free(State* s, int32_t p) noexcept nogil:
    s.pk_next[p] = s.pk_free
    s.pk_free = p
    s.pk_alive -= 1
