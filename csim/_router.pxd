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
from csim._routes cimport route_next
from csim._link cimport link_can_send, link_take, schedule
from csim._iset cimport iset_add, iset_remove
from csim._nic cimport nic_count_flit


cdef inline void router_activate(State* s, int32_t r) noexcept nogil:
    s.act_r[r >> 6] |= (<uint64_t>1) << (r & 63)


cdef inline void router_deactivate(State* s, int32_t r) noexcept nogil:
    s.act_r[r >> 6] &= ~((<uint64_t>1) << (r & 63))


cdef inline void va_wait_add(State* s, int32_t r, int32_t iv) noexcept nogil:
    """Router r's input VCs awaiting VC allocation live at va_list[r_in_ptr[r] * V ...]; the
    router is in the va_r bitmap while there are any."""
    iset_add(s.va_list + s.r_in_ptr[r] * s.V, s.va_pos, &s.r_va_wait[r], iv)
    s.va_r[r >> 6] |= (<uint64_t>1) << (r & 63)


cdef inline void va_wait_remove(State* s, int32_t r, int32_t iv) noexcept nogil:
    iset_remove(s.va_list + s.r_in_ptr[r] * s.V, s.va_pos, &s.r_va_wait[r], iv)
    s.va_r[r >> 6] &= ~((<uint64_t>(s.r_va_wait[r] == 0)) << (r & 63))


cdef inline void sa_cand_set(State* s, IVC* q) noexcept nogil:
    """q holds flits and an output VC, its head ready: a switch candidate if that output VC
    has a credit (else the credit's return makes it one)."""
    s.sa_mask[q.mw] |= (<uint64_t>(s.ovc[q.out_ov].credits > 0)) << q.mb


cdef inline void va_join(State* s, int32_t r, int32_t iv) noexcept nogil:
    """Input VC iv's routed head is ready for VC allocation at router r: it asks this cycle."""
    va_wait_add(s, r, iv)
    s.r_va_wake[r] = s.now


cdef inline void sa_join(State* s, IVC* q) noexcept nogil:
    """q's front flit is ready for switch allocation: a candidate if its output VC has a
    credit; its router allocates this cycle."""
    sa_cand_set(s, q)
    s.r_wake[q.r] = s.now


cdef inline void sa_cand_clear(State* s, IVC* q) noexcept nogil:
    s.sa_mask[q.mw] &= ~((<uint64_t>1) << q.mb)


cdef inline bint tie_minus(uint64_t serial, int32_t group, uint64_t seed) noexcept nogil:
    """The coin of packet `serial` at a tie in `group`: a hash of the three (splitmix64's
    finaliser), so that it is the same whenever the packet is routed (tests/refmodel.py
    draws it alike)."""
    cdef uint64_t z = serial * <uint64_t>0x9E3779B97F4A7C15 + \
        (<uint64_t>group) * <uint64_t>0xD1B54A32D192ED03 + seed
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    z = z ^ (z >> 31)
    return <bint>(z >> 63)


cdef inline void route(State* s, int32_t r, IVC* q, int32_t p) noexcept nogil:
    """Route computation for packet p's head at router r: output channel and VC class.

    VC classes: a packet is in class 0 on the first channel of a group (a dimension of a
    torus, or the whole of an arbitrary graph) -- or in class 1 if entry classes are on and
    this router's position in the group is above the destination's (BookSim's dateline
    classes) -- and
    moves to the next class whenever it takes a channel of lower order than the previous one,
    so its (class, order) only increases within a group: routing.py checks that the
    channel-dependency graph over (channel, class) of the actual routes is acyclic and computes
    how many classes they need. Where ties are random, a packet entering a ring group at
    distance k/2 from its destination takes the reverse of the table's channel if its coin
    says so."""
    cdef Packet* pk = &s.pk[p]
    cdef int32_t oc = route_next(&s.rt, r, pk.dst)
    cdef Chan* o = &s.ch[oc]
    cdef int32_t cls, k, d
    pk.hops += 1                 # a head is routed once at every router on its path
    q.out_ch = oc                # a parallel group's first channel: VA picks the member
    if o.kind == CH_EJECT:
        q.lo = 0
        q.hi = <int16_t>s.V
        return
    if o.group != pk.group:
        if s.tie_k != NULL and s.tie_k[o.group]:     # random ties: at distance k/2, either way
            k = s.tie_k[o.group]
            d = s.node_pos[pk.dst * s.pos_groups + o.group] - \
                s.node_pos[r * s.pos_groups + o.group]
            d += k & -(d < 0)
            if 2 * d == k and tie_minus(<uint64_t>pk.serial, o.group, s.tie_seed):
                oc = s.ch_rev[oc]
                o = &s.ch[oc]
                q.out_ch = oc
        cls = 0
        if s.entry_cls:
            cls = s.node_pos[r * s.pos_groups + o.group] > \
                s.node_pos[pk.dst * s.pos_groups + o.group]
        pk.group = o.group
    else:
        cls = pk.cls
        if o.order < pk.last_order:
            cls += 1
    pk.last_order = o.order
    if cls >= s.n_classes:        # routing.py proves this cannot happen; count it if it does
        cls = s.n_classes - 1
        s.bad_class += 1
    pk.cls = <int8_t>cls
    q.lo = <int16_t>s.class_lo[cls]
    q.hi = <int16_t>s.class_hi[cls]


cdef inline void timer_add(State* s, int32_t* wheel, cycle_t t, int32_t iv) noexcept nogil:
    """Input VC iv's head is due at cycle t (now < t < now + tm_size) on this timer wheel."""
    cdef int32_t k = <int32_t>(t & (s.tm_size - 1))
    s.tm_next[iv] = wheel[k]
    wheel[k] = iv


cdef inline void route_head(State* s, int32_t r, int32_t iv, IVC* q) noexcept nogil:
    """Input VC iv (q) is idle with a packet at its front, which arrived there now or, behind
    a tail, earlier: route the packet's head, which may ask for a VC from routing_delay after
    now or after the VC's previous tail left, whichever is later; then it joins VC allocation,
    at once or by a timer. A front flit that is not a head is a protocol error (counted; the
    run stops)."""
    cdef Flit* f = &s.buf[iv * s.D + q.head]
    if unlikely(f.seq & ~FLIT_TAIL != 0):
        s.bad_front += 1
        return
    route(s, r, q, f.pkt)
    q.ready = max(s.now, q.free_t) + s.routing_delay
    q.state = VC_ROUTING
    if q.ready <= s.now:
        va_join(s, r, iv)
    else:
        timer_add(s, s.tm_va, q.ready, iv)


cdef inline void buffer_write(State* s, int32_t c, int32_t v, int32_t pkt,
                              int32_t seq) noexcept nogil:
    """A flit arrives in input VC v of channel c. Only a flit that arrives at the front of its
    VC can let the router do something new: a flit of a packet holding an output VC becomes a
    switch candidate and wakes the router; a head of an idle VC is routed (route_head)."""
    cdef int32_t iv = c * s.V + v
    cdef IVC* q = &s.ivc[iv]
    cdef int32_t slot
    cdef int32_t r = q.r
    if unlikely(q.cnt >= s.D):
        s.buf_overflow += 1
        return
    slot = q.head + q.cnt
    if slot >= s.D:
        slot -= s.D
    slot += iv * s.D
    s.buf[slot].pkt = pkt
    s.buf[slot].seq = seq
    q.cnt += 1
    q.flits += 1
    if q.cnt == 1:
        if q.state == VC_ACTIVE:
            sa_join(s, q)
        else:
            route_head(s, r, iv, q)
    if s.r_nbuf[r] == 0:
        router_activate(s, r)
    s.r_nbuf[r] += 1
    s.nbuf_total += 1


cdef inline cycle_t vc_allocate(State* s, int32_t r) noexcept nogil:
    """Separable input-first VC allocation at router r (requests, then round-robin grants)
    among its routed heads whose routing delay is over (timers add them to the list then).
    Returns now + 1 if a request lost (it asks again), else NEVER (heads joining, a VC freed
    at this router or by a returning tail credit, set r_va_wake)."""
    cdef int32_t V = s.V
    cdef int32_t i, base, iv, lo, n, k, j, ov, dist, ntouched = 0, nreq = 0
    cdef int32_t npar, m, mi, mch, fewest, held, free, civ, mine
    cdef cycle_t wake = NEVER
    cdef IVC* q
    cdef OVC* o
    # the order of requests does not matter: each output VC keeps its best requester
    base = s.r_in_ptr[r] * V
    for i in range(base, base + s.r_va_wait[r]):
        iv = s.va_list[i]
        q = &s.ivc[iv]
        lo = q.lo
        n = q.hi - lo
        # among the members of the output's parallel group (usually one), the one with a free
        # VC of the class where the fewest VCs carry packets of other inputs (so streams keep
        # to their own channel; ties: in turn from the packet's creation order); in it, the
        # class's VCs lo + (iv + k) mod n, k = 0..n-1. An input port that holds a VC of the
        # group already asks with lower priority than ports that do not: it can send only one
        # flit a cycle, so a second member would serve it less than it would another port
        mch = q.out_ch
        npar = s.ch[q.out_ch].par_n
        mine = 0
        if npar > 1:
            m = <int32_t>(s.pk[s.buf[iv * s.D + q.head].pkt].serial % npar)
            mch = -1
            fewest = V + 1
            civ = iv - q.v                 # this input channel's first VC
            for mi in range(npar):
                held = 0                 # VCs carrying another input's packet right now
                free = 0
                for k in range(V):
                    o = &s.ovc[(q.out_ch + m) * V + k]
                    if o.owner >= 0:
                        if <uint32_t>(o.owner - civ) >= <uint32_t>V:
                            held += 1
                        else:
                            mine = 1     # this input port holds a VC of the group already
                    elif o.owner == OVC_FREE and lo <= k < lo + n:
                        free += 1
                if free and held < fewest:
                    fewest = held
                    mch = q.out_ch + m
                m += 1
                if m == npar:
                    m = 0
            if mch < 0:
                continue                 # nothing free: a freed VC wakes the router
        # the first VC tried: the input VC's round-robin pointer, if it falls among the
        # class's VCs of this member (BookSim's input-first separable allocator, whose input
        # arbiter turns over every output VC), else the class's first; or, with
        # VA_OWN_INDEX, the VC at the input VC's own index
        if n == 1:
            j = 0
        elif s.va_arbiter == VA_OWN_INDEX:
            j = iv % n
        else:
            j = q.va_in_ptr - (mch * V + lo)
            if <uint32_t>j >= <uint32_t>n:
                j = 0
        for k in range(n):
            ov = mch * V + lo + j
            j += 1
            if j == n:
                j = 0
            o = &s.ovc[ov]
            if o.owner == OVC_FREE:
                nreq += 1
                dist = iv - o.va_ptr
                dist += s.n_ivc & -(dist < 0)
                if mine:                 # a port holding a member already asks after the
                    dist += s.n_ivc      # others (it sends one flit a cycle for both)
                if o.best < 0:
                    s.touched[ntouched] = ov
                    ntouched += 1
                    o.best = iv
                    s.va_best_dist[ov] = dist
                elif dist < s.va_best_dist[ov]:
                    o.best = iv
                    s.va_best_dist[ov] = dist
                break
    for k in range(ntouched):
        ov = s.touched[k]
        o = &s.ovc[ov]
        iv = o.best
        o.best = -1
        o.owner = iv
        o.va_ptr = iv + 1 if iv + 1 < s.n_ivc else 0
        q = &s.ivc[iv]
        q.out_ch = ov // V           # the member of the group it got
        q.out_ov = ov
        q.out_vc = <int8_t>(ov - q.out_ch * V)
        q.va_in_ptr = ov + 1
        q.state = VC_ACTIVE
        q.ready = s.now + s.va_delay
        if s.va_delay == 0:
            sa_join(s, q)
        else:
            timer_add(s, s.tm_sa, q.ready, iv)
        va_wait_remove(s, r, iv)
    if nreq > ntouched:          # some requests lost: retry next cycle
        wake = s.now + 1
    return wake


cdef inline int sw_allocate(State* s, int32_t r, const int arbiter) noexcept nogil:
    """Separable input-first switch allocation at router r; winners traverse the switch.
    Sets r_wake[r]: the earliest cycle at which it could grant again by itself (arrivals,
    timers and returning credits wake it earlier)."""
    cdef int32_t V = s.V
    cdef int32_t base = s.r_in_ptr[r]
    cdef int32_t nin = s.r_in_ptr[r + 1] - base
    cdef int32_t w0 = s.r_mw[r]
    cdef int32_t w, b, pb, i, c, k, v, iv, oc, dist, ntouched = 0, seq, p
    cdef int32_t nout = s.r_nout[r]
    cdef int32_t best, best_od, best_oc = 0, od
    cdef int32_t moved = 0, hops = 0
    cdef cycle_t wake = NEVER
    cdef uint64_t m, pm, hi, rr
    cdef Chan* ch
    cdef Chan* o
    cdef IVC* q
    cdef OVC* up
    cdef Flit* f
    # stage 1: every input port requests one output for one of its ready VCs (candidates:
    # VCs holding an output VC and flits, bits of sa_mask). BookSim's separable allocator:
    # the VC nearest after the port's VC pointer for each output asked for, and among those
    # outputs the one nearest after the port's output pointer; with SA_VCS: the ready VC
    # nearest after the VC pointer, whatever its output
    for w in range(w0, s.r_mw[r + 1]):
        m = s.sa_mask[w]
        while m:
            b = ctz64(m)
            pb = b & ~(s.Vp - 1)         # the port's first bit in this word
            pm = (m >> pb) & s.vpmask
            m &= ~(s.vpmask << pb)
            i = base + ((((w - w0) << 6) + pb) >> s.vshift)
            c = s.r_in_ch[i]
            ch = &s.ch[c]
            rr = (~(<uint64_t>0)) << ch.sa_in_ptr
            best = -1
            if arbiter == SA_VCS or pm & (pm - 1) == 0:  # the first ready VC (or the only candidate)
                while pm:
                    hi = pm & rr         # the first VC at or after the pointer, else the first
                    v = ctz64(hi if hi else pm)
                    pm &= ~((<uint64_t>1) << v)
                    iv = c * V + v
                    oc = s.ivc[iv].out_ch
                    o = &s.ch[oc]
                    if unlikely(not link_can_send(s, o)):
                        if o.next_ok < wake:
                            wake = o.next_ok
                        continue
                    wake = s.now + 1
                    best = iv
                    best_oc = oc
                    break
            else:                        # of the ready VCs, in VC order from the pointer, the
                best_od = nout           # first whose output is nearest the output pointer
                while pm:
                    hi = pm & rr
                    v = ctz64(hi if hi else pm)
                    pm &= ~((<uint64_t>1) << v)
                    iv = c * V + v
                    oc = s.ivc[iv].out_ch
                    o = &s.ch[oc]
                    if unlikely(not link_can_send(s, o)):
                        if o.next_ok < wake:
                            wake = o.next_ok
                        continue
                    wake = s.now + 1
                    od = o.out_idx - ch.sa_in_optr   # (the pointer may be nout: read as 0)
                    od += nout & -(od < 0)
                    if od < best_od:
                        best_od = od
                        best = iv
                        best_oc = oc
            if best < 0:
                continue
            o = &s.ch[best_oc]
            dist = i - base - o.sa_out_ptr
            dist += nin & -(dist < 0)
            if o.out_best < 0:
                s.touched[ntouched] = best_oc
                ntouched += 1
            elif dist >= o.out_best_dist:
                continue
            o.out_best = best
            o.out_best_dist = dist
            o.out_best_in = i - base
    # stage 2: every requested output grants one input; the winner traverses the switch
    for k in range(ntouched):
        oc = s.touched[k]
        o = &s.ch[oc]
        iv = o.out_best
        o.out_best = -1
        i = o.out_best_in
        q = &s.ivc[iv]
        c = q.c
        v = q.v
        ch = &s.ch[c]
        f = &s.buf[iv * s.D + q.head]
        p = f.pkt
        seq = f.seq
        q.head += 1
        if q.head == s.D:
            q.head = 0
        q.cnt -= 1
        moved += 1
        ch.sa_in_ptr = v + 1 if v + 1 < V else 0
        if arbiter == SA_OUTPUTS:
            ch.sa_in_optr = o.out_idx + 1
        o.sa_out_ptr = i + 1 if i + 1 < nin else 0
        link_take(s, o)
        if o.kind != CH_EJECT:
            s.ovc[q.out_ov].credits -= 1
            hops += 1
            if unlikely(schedule(s, o.fdelay, oc, q.out_vc, p, seq) != 0):
                return -1
        elif seq & FLIT_TAIL:    # only a packet's last flit travels to the NIC as an event
            if unlikely(schedule(s, o.fdelay, oc, -1, p, seq) != 0):
                return -1
        else:
            nic_count_flit(s, o.dst, &s.pk[p], seq, s.now + o.fdelay)
        # the buffer slot's credit, due upstream in cdelay cycles. The upstream end spends at
        # most one credit of this VC per cycle, so if it holds at least cdelay now, it cannot
        # run out before this one is due: then the credit is added at once (no event; nothing
        # can tell the difference). A tail credit that frees the VC always travels.
        up = &s.ovc[iv]
        if up.credits >= ch.cdelay and not (s.wait_tail and seq & FLIT_TAIL):
            up.credits += 1
        elif schedule(s, ch.cdelay, c, v, -1,
                      EV_TAIL_CREDIT if seq & FLIT_TAIL and s.wait_tail else EV_CREDIT) != 0:
            return -1
        if seq & FLIT_TAIL:
            if ch.kind == CH_INJECT:     # its NIC may find the channel empty: it looks again
                s.nic_cut_blocked[ch.src] = 0
            if s.wait_tail and o.kind != CH_EJECT:
                s.ovc[q.out_ov].owner = OVC_TAIL_PENDING
            else:                        # the output VC is free from next cycle on
                s.ovc[q.out_ov].owner = OVC_FREE
                s.r_va_wake[r] = min(s.r_va_wake[r], s.now + 1)
            q.state = VC_IDLE
            q.free_t = s.now + 1
            sa_cand_clear(s, q)
            if q.cnt > 0:                # the next packet's head is at the front
                route_head(s, r, iv, q)
        else:                            # a candidate no more if empty or out of credits
            s.sa_mask[q.mw] &= ~((<uint64_t>((q.cnt == 0) | (s.ovc[q.out_ov].credits == 0)))
                                 << q.mb)
    if moved:
        s.r_nbuf[r] -= moved
        s.nbuf_total -= moved
        s.flit_hops += hops
        s.last_progress = s.now
    s.r_wake[r] = wake
    if s.r_nbuf[r] == 0:
        router_deactivate(s, r)
    return 0
