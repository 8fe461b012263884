# Input-queued virtual-channel routers: buffer write, route computation (table lookup with
# VC classes), separable input-first round-robin VC and switch allocation, switch traversal.
#
# Timing of one head flit at one router, all in cycles (see README, "Router pipeline"):
#   arrives (buffer written) at a; VC allocation from a + routing_delay (or from the cycle after
#   the VC's previous tail left, if later); once allocated at cycle g, switch allocation from
#   g + vc_alloc_delay; granted at cycle c, it reaches the next buffer at
#   c + sw_alloc_delay + st_delay + link latency. Body flits skip route and VC allocation.
#   The buffer slot's credit reaches the upstream router at c + sw_alloc_delay + link latency.
from csim._types cimport *
from csim._link cimport link_can_send, link_take, schedule


cdef inline void buffer_write(State* s, int32_t c, int32_t v, int32_t pkt,
                              int32_t seq) noexcept nogil:
    cdef int32_t ivc = c * s.V + v
    cdef int32_t slot
    if s.ivc_cnt[ivc] >= s.D:
        s.buf_overflow += 1
        return
    slot = s.ivc_head[ivc] + s.ivc_cnt[ivc]
    if slot >= s.D:
        slot -= s.D
    slot += ivc * s.D
    if s.ivc_cnt[ivc] == 0 and s.ivc_state[ivc] != VC_ACTIVE:
        s.r_va_wait[s.ch_dst[c]] += 1
    s.buf[slot].pkt = pkt
    s.buf[slot].seq = seq
    s.buf[slot].arr = s.now
    s.ivc_cnt[ivc] += 1
    s.ch_nbuf[c] += 1
    s.r_nbuf[s.ch_dst[c]] += 1
    s.nbuf_total += 1


cdef inline void route(State* s, int32_t r, int32_t ivc, int32_t p) noexcept nogil:
    """Route computation for packet p's head at router r: output channel and VC class."""
    cdef int32_t oc = s.rt[<int64_t>r * s.n_nodes + s.pk_dst[p]]
    cdef int32_t cls
    s.ivc_out_ch[ivc] = oc
    if s.ch_kind[oc] == CH_EJECT:
        s.ivc_lo[ivc] = 0
        s.ivc_hi[ivc] = s.V
        return
    if s.ch_dim[oc] != s.pk_dim[p]:
        cls = 0
        s.pk_dim[p] = s.ch_dim[oc]
    else:
        cls = s.pk_class[p]
    if s.ch_dateline[oc]:
        cls += 1
    if cls >= s.n_classes:
        cls = s.n_classes - 1
    s.pk_class[p] = cls
    s.ivc_lo[ivc] = cls * s.vpc
    s.ivc_hi[ivc] = cls * s.vpc + s.vpc


cdef inline void vc_allocate(State* s, int32_t r) noexcept nogil:
    cdef int32_t V = s.V
    cdef int32_t i, c, v, ivc, front, p, lo, n, k, o, ovc, dist, j, ntouched = 0
    cdef cycle_t ready
    # requests: each routed head asks for one free output VC of its class
    for i in range(s.r_in_ptr[r], s.r_in_ptr[r + 1]):
        c = s.r_in_ch[i]
        if s.ch_nbuf[c] == 0:
            continue
        for v in range(V):
            ivc = c * V + v
            if s.ivc_cnt[ivc] == 0 or s.ivc_state[ivc] == VC_ACTIVE:
                continue
            front = ivc * s.D + s.ivc_head[ivc]
            if s.ivc_state[ivc] == VC_IDLE:
                if s.buf[front].seq != 0:
                    s.bad_front += 1
                    continue
                p = s.buf[front].pkt
                route(s, r, ivc, p)
                ready = s.buf[front].arr
                if s.ivc_free_t[ivc] > ready:
                    ready = s.ivc_free_t[ivc]
                s.ivc_ready[ivc] = ready + s.routing_delay
                s.ivc_state[ivc] = VC_ROUTING
            if s.ivc_ready[ivc] > s.now:
                continue
            o = s.ivc_out_ch[ivc]
            lo = s.ivc_lo[ivc]
            n = s.ivc_hi[ivc] - lo
            j = 0 if n == 1 else ivc % n       # first candidate: lo + (ivc + k) mod n
            for k in range(n):
                ovc = o * V + lo + j
                j += 1
                if j == n:
                    j = 0
                if s.ovc_owner[ovc] == OVC_FREE:
                    dist = ivc - s.ovc_va_ptr[ovc]
                    if dist < 0:
                        dist += s.n_ivc
                    if s.ovc_best[ovc] < 0:
                        s.touched[ntouched] = ovc
                        ntouched += 1
                        s.ovc_best[ovc] = ivc
                        s.ovc_best_dist[ovc] = dist
                    elif dist < s.ovc_best_dist[ovc]:
                        s.ovc_best[ovc] = ivc
                        s.ovc_best_dist[ovc] = dist
                    break
    # grants: each requested output VC goes to the requester next in round-robin order
    for k in range(ntouched):
        ovc = s.touched[k]
        ivc = s.ovc_best[ovc]
        s.ovc_best[ovc] = -1
        s.ovc_owner[ovc] = ivc
        s.ovc_va_ptr[ovc] = ivc + 1 if ivc + 1 < s.n_ivc else 0
        s.ivc_out_vc[ivc] = ovc - s.ivc_out_ch[ivc] * V
        s.ivc_state[ivc] = VC_ACTIVE
        s.r_va_wait[r] -= 1
        s.ivc_ready[ivc] = s.now + s.va_delay


cdef inline int sw_allocate(State* s, int32_t r) noexcept nogil:
    cdef int32_t V = s.V
    cdef int32_t base = s.r_in_ptr[r]
    cdef int32_t nin = s.r_in_ptr[r + 1] - base
    cdef int32_t i, c, k, v, ivc, front, o, ovc, dist, ntouched = 0, seq, p, up
    # stage 1: every input port picks one ready VC (round robin); it requests that VC's output
    for i in range(base, base + nin):
        c = s.r_in_ch[i]
        if s.ch_nbuf[c] == 0:
            continue
        v = s.sa_in_ptr[c] - 1
        for k in range(V):
            v += 1
            if v == V:
                v = 0
            ivc = c * V + v
            if s.ivc_cnt[ivc] == 0 or s.ivc_state[ivc] != VC_ACTIVE:
                continue
            front = ivc * s.D + s.ivc_head[ivc]
            if s.buf[front].seq == 0 and s.ivc_ready[ivc] > s.now:
                continue
            o = s.ivc_out_ch[ivc]
            if s.ch_kind[o] != CH_EJECT and s.ovc_credits[o * V + s.ivc_out_vc[ivc]] <= 0:
                continue
            if not link_can_send(s, o):
                continue
            dist = i - base - s.sa_out_ptr[o]
            if dist < 0:
                dist += nin
            if s.out_best[o] < 0:
                s.touched[ntouched] = o
                ntouched += 1
                s.out_best[o] = ivc
                s.out_best_dist[o] = dist
            elif dist < s.out_best_dist[o]:
                s.out_best[o] = ivc
                s.out_best_dist[o] = dist
            break
    # stage 2: every requested output grants one input; the winner traverses the switch
    for k in range(ntouched):
        o = s.touched[k]
        ivc = s.out_best[o]
        s.out_best[o] = -1
        c = ivc // V
        v = ivc - c * V
        front = ivc * s.D + s.ivc_head[ivc]
        p = s.buf[front].pkt
        seq = s.buf[front].seq
        s.ivc_head[ivc] += 1
        if s.ivc_head[ivc] == s.D:
            s.ivc_head[ivc] = 0
        s.ivc_cnt[ivc] -= 1
        s.ch_nbuf[c] -= 1
        s.r_nbuf[r] -= 1
        s.nbuf_total -= 1
        s.sa_in_ptr[c] = v + 1 if v + 1 < V else 0
        s.sa_out_ptr[o] = s.ch_local_in[c] + 1 if s.ch_local_in[c] + 1 < nin else 0
        ovc = o * V + s.ivc_out_vc[ivc]
        link_take(s, o)
        if s.ch_kind[o] != CH_EJECT:
            s.ovc_credits[ovc] -= 1
            s.flit_hops += 1
            if seq == 0:
                s.pk_hops[p] += 1
        if schedule(s, s.sa_delay + s.st_delay + s.ch_lat[o], o, s.ivc_out_vc[ivc], p, seq) != 0:
            return -1
        up = EV_TAIL_CREDIT if (seq == s.pk_len[p] - 1 and s.wait_tail) else EV_CREDIT
        if schedule(s, s.sa_delay + s.ch_lat[c], c, v, -1, up) != 0:
            return -1
        if seq == s.pk_len[p] - 1:
            s.ovc_owner[ovc] = OVC_TAIL_PENDING if (s.wait_tail and s.ch_kind[o] != CH_EJECT) \
                else OVC_FREE
            s.ivc_state[ivc] = VC_IDLE
            s.ivc_free_t[ivc] = s.now + 1
            if s.ivc_cnt[ivc] > 0:
                s.r_va_wait[r] += 1
        s.last_progress = s.now
    return 0
