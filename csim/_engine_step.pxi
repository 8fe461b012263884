# The flit level's cycle loop and the flow level's event loop: C over the State, no GIL,
# no Python object (an include of csim/_engine.pyx).

cdef inline void _deliver(State* s) noexcept nogil:
    """Process every event due this cycle: flit arrivals and credit returns."""
    cdef Slot* sl = &s.wh[s.wheel_now]
    cdef int32_t k, n = sl.len
    cdef Event* ev = sl.ev
    cdef int32_t flits = 0
    cdef OVC* o
    cdef IVC* q
    sl.len = 0
    s.n_events -= n
    for k in range(n):
        if ev[k].seq >= 0:
            if ev[k].vc >= 0:
                buffer_write(s, ev[k].ch, ev[k].vc, ev[k].pkt, ev[k].seq)
                flits += 1
            else:                        # a flit reaching its NIC carries no VC
                nic_receive(s, s.ch[ev[k].ch].dst, ev[k].pkt, ev[k].seq)
        else:
            # a credit can unblock the upstream router only if the VC had none (the input VC
            # holding it becomes a switch candidate again, if it has flits and its head is
            # ready), or if it frees the VC (its tail's credit): only then is the router woken
            o = &s.ovc[ev[k].ch * s.V + ev[k].vc]
            o.credits += 1
            if s.ch[ev[k].ch].kind != CH_NET:
                if ev[k].seq == EV_TAIL_CREDIT:  # (an injection channel: its NIC looks)
                    o.owner = OVC_FREE
                if o.credits == s.D:             # (it may have emptied)
                    s.nic_cut_blocked[s.ch[ev[k].ch].src] = 0
            elif ev[k].seq == EV_TAIL_CREDIT:
                o.owner = OVC_FREE
                s.r_va_wake[s.ch[ev[k].ch].src] = s.now
            elif o.credits == 1 and o.owner >= 0:
                q = &s.ivc[o.owner]
                if q.state == VC_ACTIVE and q.cnt > 0 and q.ready <= s.now:
                    sa_join(s, q)
    if flits:
        s.last_progress = s.now


cdef inline void _timers(State* s) noexcept nogil:
    """Heads whose routing delay ends this cycle join VC allocation; heads whose VC
    allocation delay ends become switch candidates. Either wakes the router."""
    cdef int32_t k = <int32_t>(s.now & (s.tm_size - 1))
    cdef int32_t iv, nxt
    iv = s.tm_va[k]
    s.tm_va[k] = -1
    while iv >= 0:
        nxt = s.tm_next[iv]
        va_join(s, s.ivc[iv].r, iv)
        iv = nxt
    iv = s.tm_sa[k]
    s.tm_sa[k] = -1
    while iv >= 0:
        nxt = s.tm_next[iv]
        sa_join(s, &s.ivc[iv])
        iv = nxt


cdef int _run(State* s, cycle_t until, int stop, cycle_t work) noexcept nogil:
    """Step cycles until `until` (exclusive), the stop condition, or `work` cycles stepped
    (idle cycles jumped over do not count: a call's cost is its stepped cycles)."""
    cdef cycle_t t
    cdef int64_t i, k
    cdef int32_t r, w
    cdef uint64_t m
    cdef cycle_t stepped_end = s.now - s.skipped + work
    while s.now < until:
        if s.now - s.skipped >= stepped_end:
            return ST_UNTIL
        if stop == STOP_MEASURED and s.meas_done == s.meas_created and s.now >= s.meas_end:
            return ST_DONE
        if stop == STOP_ALL and s.pk_alive == 0 and next_generation(s) == NEVER and \
                s.ops_done == s.n_ops:
            return ST_DONE
        if s.nbuf_total == 0 and s.nic_busy == 0 and s.n_events == 0:
            # nothing in flight: jump to the next packet creation or op finish
            t = next_generation(s)
            if next_op_event(s) < t:
                t = next_op_event(s)
            if t > s.now:
                if t >= until:
                    s.skipped += until - s.now
                    s.now = until
                    s.wheel_now = <int32_t>(until & (s.wheel_size - 1))
                    s.last_progress = until
                    break
                s.skipped += t - s.now
                s.now = t
                s.wheel_now = <int32_t>(t & (s.wheel_size - 1))
            s.last_progress = s.now
        _deliver(s)
        _timers(s)
        if s.n_ops:
            for k in range(s.op_done_n):
                if finish_op(s, s.op_done_q[k]) != 0:
                    return ST_NOMEM
            s.op_done_n = 0
            if ops_due(s) != 0:
                return ST_NOMEM
        if generate(s) != 0:
            return ST_NOMEM
        # active NICs, walked from the end: an entry removed while being processed is
        # replaced by one already processed. Within a cycle NICs and routers do not interact.
        i = s.nic_busy - 1
        while i >= 0:
            if nic_inject(s, s.act_n[i]) != 0:
                return ST_NOMEM
            i -= 1
        # routers, in router order (a router's input channels, VCs and buffers are
        # contiguous, so the walks go through memory in order): VC allocation at those with
        # heads waiting for it, then switch allocation at those with buffered flits, each
        # only where it could grant something (r_va_wake, r_wake). Routers do not interact
        # within a cycle (what one does reaches another by an event, or as a credit it cannot
        # run short of before its due cycle), so the two walks do what allocating both at
        # each router in turn would, without asking at every router whether heads wait. A
        # word is read once: a router leaving a set while it is processed is no matter
        for w in range(s.act_r_words):
            m = s.va_r[w]
            while m:
                r = (w << 6) + ctz64(m)
                m &= m - 1
                if s.r_va_wake[r] <= s.now:
                    s.r_va_wake[r] = vc_allocate(s, r)
        for w in range(s.act_r_words):
            m = s.act_r[w]
            while m:
                r = (w << 6) + ctz64(m)
                m &= m - 1
                if s.r_wake[r] > s.now:
                    continue
                # (the allocator's input arbiter as a constant: each call site compiles to
                # its own copy, without the other's work)
                if s.sa_arbiter == SA_OUTPUTS:
                    if unlikely(sw_allocate(s, r, SA_OUTPUTS) != 0):
                        return ST_NOMEM
                elif unlikely(sw_allocate(s, r, SA_VCS) != 0):
                    return ST_NOMEM
        if unlikely(s.buf_overflow or s.bad_front or s.bad_eject or s.bad_class):
            return ST_PROTOCOL
        if unlikely(s.pk_alive > s.max_packets):
            return ST_BACKLOG
        if s.now >= s.meas_start and s.now < s.meas_end:
            s.occ_sum += s.pk_alive
        if (s.nbuf_total > 0 or s.nic_busy > 0) and \
                s.now - s.last_progress >= s.watchdog_cycles:
            s.deadlock_t = s.now
            return ST_DEADLOCK
        s.now += 1
        s.wheel_now = (s.wheel_now + 1) & (s.wheel_size - 1)
    return ST_UNTIL


cdef int _run_flow(State* s, cycle_t until, int64_t work) noexcept nogil:
    """The flow level's loop: from event to event (an op finishing, a flow's last byte
    carried), recomputing rates where flows started or ended, until `until` (exclusive),
    `work` events, or every op has finished."""
    cdef cycle_t t
    cdef timespec a, b
    cdef int64_t events_end = s.flow_events + work
    while True:
        if s.flow_events >= events_end:
            return ST_UNTIL
        if s.n_dirty or s.n_pdirty:      # (the solver's CPU time, where it has work)
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a)
            flow_rates(s)
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b)
            s.solver_ns += (b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec)
        if s.ops_done == s.n_ops:
            return ST_DONE
        t = next_op_event(s)
        if flow_next(s) < t:
            t = flow_next(s)
        if t >= until:
            if until > s.now:
                s.now = until
            return ST_UNTIL
        if t > s.now:
            s.now = t
        s.flow_events += 1
        flow_drains(s)
        if ops_due(s) != 0:
            return ST_NOMEM
