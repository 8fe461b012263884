# Links: exact fractional serialisation, and the event wheel that carries flits and credits
# with each link's latency. Also the pooled allocator for packets.
from libc.stdlib cimport realloc
from csim._types cimport *


# Serialisation of a channel slower than one flit per cycle: it earns num credit per cycle
# and a flit costs den. While flits keep coming the credit is carried exactly, so a
# backlogged channel sends exactly num/den flits per cycle on average; credit is not banked
# across idle time: once it reaches one flit plus one cycle's earnings (the channel could have
# sent a cycle ago and did not), it restarts at one flit. After a send at cycle t leaving
# credit acc (in [0, num)), the credit is back to a flit at next_ok = t + ceil((den - acc) / num)
# and it is capped from next_ok + 1 on, so a send at cycle u >= next_ok leaves
# acc + (u - t) * num - den if u == next_ok, else 0.

cdef inline bint link_can_send(State* s, Chan* ch) noexcept nogil:
    """A channel of at least one flit per cycle can always send: its users (one switch output,
    one NIC lane) send at most one flit per cycle on it, so its credit is not kept. A slower
    one can from next_ok on."""
    return ch.full_rate or s.now >= ch.next_ok


cdef inline void link_take(State* s, Chan* ch) noexcept nogil:
    """A flit leaves on the channel this cycle (link_can_send said it may)."""
    if not ch.full_rate:
        if s.now == ch.next_ok:
            ch.acc = ch.acc + (s.now - ch.acc_t) * ch.num - ch.den
        else:                    # idle since it could send: the credit restarted at a flit
            ch.acc = 0
        ch.acc_t = s.now
        # ceil((den - acc) / num) is gap_k or gap_k - 1 (precomputed: no division here)
        ch.next_ok = s.now + ch.gap_k - (ch.acc >= ch.gap_thr)
    ch.flits += 1


cdef inline int wheel_grow(Slot* sl) noexcept nogil:
    """Double a wheel slot's capacity (rare: slots keep what they grew to)."""
    cdef int32_t cap = sl.cap * 2 if sl.cap > 0 else 64
    cdef void* p = realloc(sl.ev, cap * sizeof(Event))
    if p == NULL:
        return -1
    sl.ev = <Event*>p
    sl.cap = cap
    return 0


cdef inline int schedule(State* s, cycle_t delay, int32_t c, int32_t vc, int32_t pkt,
                         int32_t seq) noexcept nogil:
    """Queue an event `delay` cycles from now (1 <= delay < wheel_size). FIFO per cycle."""
    cdef Slot* sl = &s.wh[(s.wheel_now + <int32_t>delay) & (s.wheel_size - 1)]
    cdef Event* e
    if unlikely(sl.len == sl.cap) and wheel_grow(sl) != 0:
        return -1
    e = sl.ev + sl.len
    e.ch = c
    e.vc = vc
    e.pkt = pkt
    e.seq = seq
    sl.len += 1
    s.n_events += 1
    return 0


cdef inline int32_t packet_alloc(State* s) noexcept nogil:
    cdef int32_t p, i, cap
    cdef void* mem
    if s.pk_free < 0:
        cap = s.pk_cap * 2 if s.pk_cap > 0 else 1024
        mem = realloc(s.pk, cap * sizeof(Packet))
        if mem == NULL:
            return -1
        s.pk = <Packet*>mem
        for i in range(s.pk_cap, cap - 1):
            s.pk[i].next = i + 1
        s.pk[cap - 1].next = -1
        s.pk_free = s.pk_cap
        s.pk_cap = cap
    p = s.pk_free
    s.pk_free = s.pk[p].next
    s.pk[p].next = -1
    s.pk_alive += 1
    return p


cdef inline void packet_free(State* s, int32_t p) noexcept nogil:
    s.pk[p].next = s.pk_free
    s.pk_free = p
    s.pk_alive -= 1
