# The flow-level network: each send is one flow along the route the flit level takes, and
# flows share every resource on their routes max-min fairly.
#
# Resources are the channel groups of the compiled network (a parallel group is one resource
# whose capacity is the sum of its members'; the table rt names a group by its first channel,
# and a NIC's injection and ejection channels are groups too), plus, where it binds, a cap per
# (source, destination) pair: a NIC sends no more packets at once to one destination than the
# first link towards it has channels, each on one injection channel. Capacities are in bytes
# per cycle; a flow's volume is its wire bytes (whole flits: the last flit of a packet is sent
# whole), so a lone flow drains at the rate the flit level serialises its flits.
#
# Flows of one (source, destination) pair take the same route, so max-min fairness gives them
# the same rate: the solver works on pairs, each weighing as many flows as it has, and a pair
# keeps its flows in a heap by the per-flow service (bytes carried per flow since the pair
# became active) at which each is done. So an event costs the pairs in its component, not the
# flows: a memory node's read pieces waiting in its NIC are one pair.
#
# Rates are recomputed when flows start or end, once per cycle at which something changed,
# and only in the connected components (pairs linked by shared resources) that changed: the
# rates of other components cannot move. Within a component, progressive filling: every
# unfrozen flow's rate rises together until a resource is full; its unfrozen pairs freeze at
# that level; repeat. A heap of resources by fair share (capacity left / unfrozen flows)
# finds the next full one; a resource's share only rises as other flows freeze, so stale
# entries are re-pushed when popped.
#
# Where a VC class has one VC on a channel, a packet of that class waits, at the channel's
# upstream router, until its predecessor's tail has left and then for VC allocation, so the
# channel's packets of that class cannot follow each other back to back: the pair (channel
# group, class) is a resource too, of the rate such a stream reaches at the flit level
# (pysim/flow.py measures it on a two-hop line).
#
# A message of b bytes is n packets of P flits, the last of L, W wire bytes (N flits) in all.
# Alone at the flit level, on a route whose bottleneck (the least capacity, R bytes per cycle)
# is one channel, its packets follow each other through it flit after flit (with VCs to spare
# they interleave there, which changes which flit is last but not when the last one crosses),
# and it arrives as one packet of N flits would: T0(N), the zero-load latency of pysim.theory
# (given per op in op_lat_whole). Where a channel further on is slower than that one channel
# (a lane of a group of several), the packets spread over the lanes and the last one, sent
# (n - 1) P F / R after the first, arrives T0(L) later (R the bottleneck's rate: a NIC whose
# packets overfill a VC buffer ahead of slower lanes has its injection resource's capacity
# set to the rate its channels keep at the flit level, pysim/flow.py's injection_period).
# Where the bottleneck is m parallel channels, packets cross it m at a time, each at R / m:
# rounds of m packets, the last round's longest packet paying its own zero-load latency
# (op_lat_full for a full packet, op_lat for the last):
# T0(L') + ceil(((n - 1) // m) * P * F * m / R); so too, with m its channels, where it is a
# class of one VC (packets one at a time, at its stream's period). Here the W bytes drain at
# the max-min rate and the op finishes `lat` cycles after the last byte is carried, lat chosen
# so that a lone message takes exactly that time: lat = T_alone - ceil(W / R) (never below 0).
# No Python runs per flow or event.
from libc.math cimport ceil, fabs
from libc.stdlib cimport realloc
from csim._types cimport *
from csim._routes cimport route_next
from csim._heap cimport heap_push

cdef extern from *:
    void __builtin_prefetch(const void* p) noexcept nogil


cdef inline cycle_t ceil_cycles(double x) noexcept nogil:
    """ceil(x) for x >= 0, forgiving the rounding of a division that should be whole."""
    cdef double y = x - 1e-9 - 1e-12 * x
    return <cycle_t>ceil(y) if y > 0 else 0


# ------------------------------------------------------------------ pools

cdef inline int flow_grow(State* s) noexcept nogil:
    """Double the flow slots."""
    cdef int32_t cap = s.fl_cap * 2 if s.fl_cap > 0 else 64
    cdef int32_t i
    cdef void* p = realloc(s.fl, cap * sizeof(Flow))
    if p == NULL:
        return -1
    s.fl = <Flow*>p
    for i in range(s.fl_cap, cap):
        s.fl[i].nxt = i + 1 if i + 1 < cap else s.fl_free
    s.fl_free = s.fl_cap
    s.fl_cap = cap
    return 0


cdef inline int _grow_i32(int32_t** a, int64_t n) noexcept nogil:
    """Reallocate *a to n entries (its contents kept); -1 if memory runs out (*a unchanged)."""
    cdef void* p = realloc(a[0], n * sizeof(int32_t))
    if p == NULL:
        return -1
    a[0] = <int32_t*>p
    return 0


cdef inline int slot_grow(State* s) noexcept nogil:
    """Double the route slots (hmax entries each)."""
    cdef int32_t cap = s.sl_cap * 2 if s.sl_cap > 0 else 64
    cdef int32_t i
    cdef int64_t ne = <int64_t>cap * s.hmax
    if (_grow_i32(&s.fe_res, ne) or _grow_i32(&s.fe_next, ne) or _grow_i32(&s.fe_prev, ne)
            or _grow_i32(&s.fe_hpos, ne) or _grow_i32(&s.fe_anext, ne)
            or _grow_i32(&s.fe_pair, ne) or _grow_i32(&s.sl_pair, cap)):
        return -1
    cdef void* p = realloc(s.fe_key, ne * sizeof(double))
    if p == NULL: return -1
    s.fe_key = <double*>p
    for i in range(s.sl_cap, cap):       # free slots: sl_pair holds -2 - (next free slot)
        s.sl_pair[i] = -2 - (i + 1 if i + 1 < cap else s.sl_free)
    s.sl_free = s.sl_cap
    s.sl_cap = cap
    return 0


cdef inline void _dirty(State* s, int32_t r) noexcept nogil:
    if not s.rs_isdirty[r]:
        s.rs_isdirty[r] = 1
        s.rs_dirty[s.n_dirty] = r
        s.n_dirty += 1


cdef inline void pair_dirty(State* s, int32_t p) noexcept nogil:
    """Pair p's flows changed: its rate is recomputed before the next event."""
    if not s.pr[p].dirty:
        s.pr[p].dirty = 1
        s.comp[s.n_pdirty] = p
        s.n_pdirty += 1


# ------------------------------------------------------------------ what the solver keeps per resource
# Besides its list of route entries, a resource keeps the sum of its pairs' rates (times their
# flows) in fixed point (units of 2^-64 bytes per cycle, a 128-bit integer: adding and taking
# away a pair's share cancels exactly, so the sum never drifts), a max-heap of its entries by
# their pair's rate, and the list of the pairs whose bottleneck it is (Pair.bott) with a bound
# below their rates. The solver reads a resource's used capacity, its highest rate and the
# pairs above a rate from these without walking its entries.

DEF FX_ONE = 18446744073709551616.0      # 2^64


cdef inline i128 _fx(double x) noexcept nogil:
    return <i128>(x * FX_ONE)


cdef inline double _unfx(i128 x) noexcept nogil:
    return <double>x / FX_ONE


cdef inline bint _rh_above(State* s, int32_t a, int32_t b) noexcept nogil:
    return s.fe_key[a] > s.fe_key[b] or (s.fe_key[a] == s.fe_key[b] and a < b)


cdef inline void _rh_sift(State* s, int32_t r, int32_t i) noexcept nogil:
    """Entry at place i of resource r's heap moves to its place."""
    cdef int32_t* h = s.rs[r].hp
    cdef int32_t n = s.rs[r].hn, e = h[i], par, c, i0 = i
    while i > 0:
        par = (i - 1) >> 1
        if not _rh_above(s, e, h[par]):
            break
        h[i] = h[par]
        s.fe_hpos[h[i]] = i
        i = par
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _rh_above(s, h[c + 1], h[c]):
            c += 1
        if not _rh_above(s, h[c], e):
            break
        h[i] = h[c]
        s.fe_hpos[h[i]] = i
        i = c
    h[i] = e
    s.fe_hpos[e] = i
    if i == 0 or i0 == 0:
        s.rs[r].top = s.fe_key[h[0]]


cdef inline int _rh_insert(State* s, int32_t r, int32_t e) noexcept nogil:
    cdef int32_t cap
    cdef void* q
    if s.rs[r].hn == s.rs[r].hcap:
        cap = 2 * s.rs[r].hcap if s.rs[r].hcap > 0 else 4
        q = realloc(s.rs[r].hp, cap * sizeof(int32_t))
        if q == NULL:
            return -1
        s.rs[r].hp = <int32_t*>q
        s.rs[r].hcap = cap
    s.rs[r].hp[s.rs[r].hn] = e
    s.rs[r].hn += 1
    _rh_sift(s, r, s.rs[r].hn - 1)
    return 0


cdef inline void _rh_remove(State* s, int32_t r, int32_t e) noexcept nogil:
    cdef int32_t i = s.fe_hpos[e]
    s.rs[r].hn -= 1
    if i < s.rs[r].hn:
        s.rs[r].hp[i] = s.rs[r].hp[s.rs[r].hn]
        s.fe_hpos[s.rs[r].hp[i]] = i
        _rh_sift(s, r, i)
    elif s.rs[r].hn == 0:
        s.rs[r].top = 0.0


cdef inline void _bott_unset(State* s, int32_t p) noexcept nogil:
    cdef Pair* q = &s.pr[p]
    if q.bott < 0:
        return
    if q.bprev >= 0:
        s.pr[q.bprev].bnext = q.bnext
    else:
        s.rs[q.bott].bhead = q.bnext
    if q.bnext >= 0:
        s.pr[q.bnext].bprev = q.bprev
    q.bott = -1


cdef inline void _bott_set(State* s, int32_t p, int32_t r, double rate) noexcept nogil:
    """Pair p's rate is fixed at resource r, at rate."""
    cdef Pair* q = &s.pr[p]
    if q.bott != r:
        _bott_unset(s, p)
        if s.rs[r].bhead < 0:
            s.rs[r].bmin = rate
        q.bott = r
        q.bprev = -1
        q.bnext = s.rs[r].bhead
        if q.bnext >= 0:
            s.pr[q.bnext].bprev = p
        s.rs[r].bhead = p
    if rate < s.rs[r].bmin:
        s.rs[r].bmin = rate


cdef inline int64_t _rate_apply(State* s, int32_t p) noexcept nogil:
    """Pair p's resources' sums and heaps take its new rate. Returns the entries moved."""
    cdef Pair* q = &s.pr[p]
    cdef int32_t k, r
    cdef int64_t e, base
    cdef i128 d, u
    if q.rate == q.urate:
        return 0
    u = _fx(q.rate)
    d = (u - q.ufx) * q.n
    base = <int64_t>q.slot * s.hmax
    for k in range(q.rlen):
        e = base + k
        r = s.fe_res[e]
        s.rs[r].used += d
        s.fe_key[e] = q.rate
        _rh_sift(s, r, s.fe_hpos[e])
    q.urate = q.rate
    q.ufx = u
    return q.rlen


cdef inline int pair_link(State* s, int32_t p) noexcept nogil:
    """Pair p (its route in fe_res of its slot, rlen set, no flows counted on its
    resources yet) joins its resources' lists and heaps, at rate 0."""
    cdef int32_t k, r
    cdef int64_t e, base = <int64_t>s.pr[p].slot * s.hmax
    s.active_entries += s.pr[p].rlen
    s.pr[p].rate = s.pr[p].urate = 0.0
    s.pr[p].ufx = 0
    for k in range(s.pr[p].rlen):
        e = base + k
        r = s.fe_res[e]
        s.fe_prev[e] = -1
        s.fe_next[e] = s.rs_head[r]
        if s.rs_head[r] >= 0:
            s.fe_prev[s.rs_head[r]] = <int32_t>e
        s.rs_head[r] = <int32_t>e
        s.fe_pair[e] = p
        s.fe_key[e] = 0.0
        if _rh_insert(s, r, <int32_t>e) != 0:
            return -1
    return 0


cdef inline void _pair_unlink(State* s, int32_t p) noexcept nogil:
    """Pair p (its flows no longer counted on its resources) leaves them."""
    cdef int32_t k, r
    cdef int64_t e, base = <int64_t>s.pr[p].slot * s.hmax
    s.active_entries -= s.pr[p].rlen
    _bott_unset(s, p)
    s.pr[p].urate = 0.0
    s.pr[p].ufx = 0
    for k in range(s.pr[p].rlen):
        e = base + k
        r = s.fe_res[e]
        if s.fe_prev[e] >= 0:
            s.fe_next[s.fe_prev[e]] = s.fe_next[e]
        else:
            s.rs_head[r] = s.fe_next[e]
        if s.fe_next[e] >= 0:
            s.fe_prev[s.fe_next[e]] = s.fe_prev[e]
        _rh_remove(s, r, <int32_t>e)


cdef inline int32_t slot_alloc(State* s, int32_t p) noexcept nogil:
    cdef int32_t sl
    if s.sl_free < 0 and slot_grow(s) != 0:
        return -1
    sl = s.sl_free
    s.sl_free = -2 - s.sl_pair[sl]
    s.sl_pair[sl] = p
    return sl


cdef inline void _slot_free(State* s, int32_t sl) noexcept nogil:
    s.sl_pair[sl] = -2 - s.sl_free
    s.sl_free = sl


# ------------------------------------------------------------------ a pair's heap of flows
# leftist heap: the right spine of a heap of n flows is at most log2(n + 1) long, so the
# merge's recursion is shallow

cdef inline bint _fl_before(Flow* fl, int32_t a, int32_t b) noexcept nogil:
    return fl[a].v < fl[b].v or (fl[a].v == fl[b].v and fl[a].op < fl[b].op)


cdef inline int32_t _lh_rank(Flow* fl, int32_t a) noexcept nogil:
    return fl[a].rank if a >= 0 else 0


cdef inline int32_t lh_merge(Flow* fl, int32_t a, int32_t b) noexcept nogil:
    cdef int32_t t
    if a < 0:
        return b
    if b < 0:
        return a
    if _fl_before(fl, b, a):
        t = a
        a = b
        b = t
    fl[a].right = lh_merge(fl, fl[a].right, b)
    if _lh_rank(fl, fl[a].left) < _lh_rank(fl, fl[a].right):
        t = fl[a].left
        fl[a].left = fl[a].right
        fl[a].right = t
    fl[a].rank = _lh_rank(fl, fl[a].right) + 1
    return a


# ------------------------------------------------------------------ the drain heap
# (cycle, pair) ordered by cycle, then pair; positions kept in Pair.hpos for updates

cdef inline bint _dh_less(State* s, int32_t i, int32_t j) noexcept nogil:
    return s.dh_time[i] < s.dh_time[j] or (s.dh_time[i] == s.dh_time[j] and
                                           s.dh_pair[i] < s.dh_pair[j])


cdef inline void _dh_swap(State* s, int32_t i, int32_t j) noexcept nogil:
    cdef cycle_t t = s.dh_time[i]
    cdef int32_t p = s.dh_pair[i]
    s.dh_time[i] = s.dh_time[j]
    s.dh_pair[i] = s.dh_pair[j]
    s.dh_time[j] = t
    s.dh_pair[j] = p
    s.pr[s.dh_pair[i]].hpos = i
    s.pr[s.dh_pair[j]].hpos = j


cdef inline void _dh_sift(State* s, int32_t i) noexcept nogil:
    cdef int32_t p, c
    while i > 0:
        p = (i - 1) >> 1
        if not _dh_less(s, i, p):
            break
        _dh_swap(s, i, p)
        i = p
    while True:
        c = 2 * i + 1
        if c >= s.dh_n:
            break
        if c + 1 < s.dh_n and _dh_less(s, c + 1, c):
            c += 1
        if not _dh_less(s, c, i):
            break
        _dh_swap(s, i, c)
        i = c


cdef inline void dh_set(State* s, int32_t p, cycle_t t) noexcept nogil:
    """Pair p's next flow has its last byte carried at cycle t (insert, or move it)."""
    cdef int32_t i = s.pr[p].hpos
    if i < 0:
        i = s.dh_n
        s.dh_n += 1
        s.dh_pair[i] = p
        s.pr[p].hpos = i
    s.dh_time[i] = t
    _dh_sift(s, i)


cdef inline void _dh_pop(State* s) noexcept nogil:
    cdef int32_t p = s.dh_pair[0]
    s.dh_n -= 1
    if s.dh_n > 0:
        s.dh_time[0] = s.dh_time[s.dh_n]
        s.dh_pair[0] = s.dh_pair[s.dh_n]
        s.pr[s.dh_pair[0]].hpos = 0
        _dh_sift(s, 0)
    s.pr[p].hpos = -1


cdef inline cycle_t flow_next(State* s) noexcept nogil:
    return s.dh_time[0] if s.dh_n > 0 else NEVER


cdef inline void _dh_schedule(State* s, int32_t p) noexcept nogil:
    """Pair p's drain time from its service, rate and the first flow of its heap."""
    cdef Pair* q = &s.pr[p]
    cdef double left = s.fl[q.root].v - q.service
    if left < 0.0:
        left = 0.0
    if q.rate > 0.0:
        dh_set(s, p, s.now + ceil_cycles(left / q.rate))
    else:                                    # (capacities are > 0: cannot happen)
        dh_set(s, p, NEVER)


# ------------------------------------------------------------------ starting and ending flows

cdef inline int32_t flow_route(State* s, int32_t src, int32_t dst, int32_t cap_res,
                               int32_t* out) noexcept nogil:
    """Write the resources of src's messages to dst into out (if not NULL): its NIC's
    injection group, the (source, destination) cap if any, the channel groups rt takes (each
    followed by the resource of its VC class if that class has one VC there: the class as
    csim/_router.pxd's route() assigns it), the destination's ejection group. Returns how
    many, or -1 if rt has no route (or loops)."""
    cdef int32_t k = 0, v = src, c, steps = 0, grp = -1, cls = 0, last_order = -1, x
    cdef int64_t n = s.n_nodes
    if out != NULL:
        out[k] = s.ch_res[s.nic_inj_base[src]]
    k += 1
    if cap_res >= 0:
        if out != NULL:
            out[k] = cap_res
        k += 1
    while True:
        c = route_next(&s.rt, v, dst)
        if c < 0 or steps > s.n_nodes:
            return -1
        if out != NULL:
            out[k] = s.ch_res[c]
        k += 1
        steps += 1
        if s.ch_kind[c] == CH_EJECT:
            return k
        if s.ch_group[c] != grp:
            cls = 0
            grp = s.ch_group[c]
        elif s.ch_order[c] < last_order:
            cls += 1
        last_order = s.ch_order[c]
        if cls >= s.n_classes:
            cls = s.n_classes - 1
        if s.vc_res != NULL:
            x = s.vc_res[<int64_t>s.ch_res[c] * s.n_classes + cls]
            if x >= 0:
                if out != NULL:
                    out[k] = x
                k += 1
        v = s.ch_dst[c]


cdef inline int _pair_activate(State* s, int32_t p) noexcept nogil:
    """Pair p gets its first flow: a route slot, its route, its place on its resources."""
    cdef Pair* q = &s.pr[p]
    cdef int32_t sl = slot_alloc(s, p)
    cdef int32_t k, r
    cdef int64_t base
    if sl < 0:
        return -1
    q.slot = sl
    base = <int64_t>sl * s.hmax
    q.rlen = flow_route(s, q.src, q.dst, q.cap, s.fe_res + base)
    q.solo = 0.0
    q.m = 1
    q.stream = 0
    q.lane = 0.0
    for k in range(q.rlen):
        r = s.fe_res[base + k]
        if k == 0 or s.rs_cap[r] < q.solo or (s.rs_cap[r] == q.solo and s.rs_lanes[r] < q.m):
            q.solo = s.rs_cap[r]             # the bottleneck, and how many channels it has
            q.m = s.rs_lanes[r]
            q.stream = r >= s.vc_res_base    # (a class of one VC: packets one at a time)
        if r < s.vc_res_base and s.rs_lanes[r] > 0 and \
                (q.lane == 0.0 or s.rs_cap[r] / s.rs_lanes[r] < q.lane):
            q.lane = s.rs_cap[r] / s.rs_lanes[r]     # the slowest channel (a lane of a group)
    q.service = 0.0
    q.vtail = 0.0
    q.rate = 0.0
    q.t_upd = s.now
    q.root = -1
    q.n = 0
    q.queued = 0
    return pair_link(s, p)


cdef inline int flow_start(State* s, int32_t op) noexcept nogil:
    """Send op (bytes > 0) starts now: a flow of its pair; rates are recomputed before the
    next event."""
    cdef int32_t p = s.op_pair[op]
    cdef Pair* q = &s.pr[p]
    cdef int64_t F = s.flit_bytes
    cdef int64_t bpp = <int64_t>s.packet_flits_max * F
    cdef int64_t b = s.op_size[op]
    cdef int64_t rest = b % bpp
    cdef int64_t flits = (b // bpp) * s.packet_flits_max + (rest + F - 1) // F
    cdef int64_t packets = (b + bpp - 1) // bpp
    cdef int64_t rounds, in_last, base
    cdef double wire = <double>(flits * F)
    cdef int32_t f, k, r
    cdef cycle_t lat, t0
    cdef bint weigh
    cdef i128 u
    if q.queued == 0:
        if _pair_activate(s, p) != 0:
            return -1
    else:
        q.service += q.rate * <double>(s.now - q.t_upd)
        q.t_upd = s.now
    if s.fl_free < 0 and flow_grow(s) != 0:
        return -1
    f = s.fl_free
    s.fl_free = s.fl[f].nxt
    s.fl_alive += 1
    if q.m == 1 and not q.stream and q.solo <= q.lane * (1 + 1e-9):
        lat = s.op_lat_whole[op] - ceil_cycles(wire / q.solo)
    else:
        # (with m = 1 and no stream, the bottleneck is one channel faster than a lane further
        # on, a group of several lanes, each slower: the packets spread over the lanes, so the
        # message's flits pass at the bottleneck's rate, not at the lane's as one packet of N
        # flits would, and the last packet arrives its own zero-load latency after it leaves:
        # rounds of one packet, T0(L) + (n - 1) P F / R)
        rounds = (packets - 1) // q.m         # rounds of m packets before the last
        in_last = packets - rounds * q.m
        t0 = s.op_lat_full[op] if in_last >= 2 else s.op_lat[op]
        lat = t0 + ceil_cycles(<double>(rounds * q.m * bpp) / q.solo) - \
            ceil_cycles(wire / q.solo)
    s.fl[f].lat = lat if lat > 0 else 0
    s.fl[f].op = op
    if s.nic_fifo:              # in order: done when the pair has carried it and those before
        if q.vtail < q.service:
            q.vtail = q.service
        q.vtail += wire
        s.fl[f].v = q.vtail
    else:
        s.fl[f].v = q.service + wire
    s.fl[f].left = -1
    s.fl[f].right = -1
    s.fl[f].rank = 1
    q.root = lh_merge(s.fl, q.root, f)
    q.queued += 1
    weigh = not s.nic_fifo or q.queued == 1     # (in order, the pair weighs one flow)
    if weigh:
        q.n += 1
    base = <int64_t>q.slot * s.hmax
    u = q.ufx
    for k in range(q.rlen):
        r = s.fe_res[base + k]
        s.rs_bytes[r] += wire
        if weigh:
            s.rs_n[r] += 1
            s.rs[r].used += u
            _dirty(s, r)
    # router-to-router channels: the route less the NIC groups and the cap
    s.flit_hops += flits * (q.rlen - 2 - (1 if q.cap >= 0 else 0))
    s.flows_started += 1
    if weigh:
        pair_dirty(s, p)
    if q.hpos < 0:
        dh_set(s, p, NEVER)      # (its rate, and so its drain, come with the recomputation)
    return 0


cdef inline int flow_drains(State* s) noexcept nogil:
    """Flows whose last byte is carried by now leave their resources; their ops finish `lat`
    cycles later (on the op heap, as compute and delay ops do)."""
    cdef int32_t p, f, op, k, r
    cdef int64_t base
    cdef int64_t bpp = <int64_t>s.packet_flits_max * s.flit_bytes
    cdef Pair* q
    cdef bint weigh
    cdef i128 u
    while s.dh_n > 0 and s.dh_time[0] <= s.now:
        p = s.dh_pair[0]
        q = &s.pr[p]
        q.service += q.rate * <double>(s.now - q.t_upd)
        q.t_upd = s.now
        f = q.root
        q.root = lh_merge(s.fl, s.fl[f].left, s.fl[f].right)
        q.queued -= 1
        weigh = not s.nic_fifo or q.queued == 0
        if weigh:
            q.n -= 1
        op = s.fl[f].op
        s.packets_done += (s.op_size[op] + bpp - 1) // bpp
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now + s.fl[f].lat, op)
        s.fl[f].nxt = s.fl_free
        s.fl_free = f
        s.fl_alive -= 1
        base = <int64_t>q.slot * s.hmax
        if weigh:
            u = q.ufx
            for k in range(q.rlen):
                r = s.fe_res[base + k]
                s.rs_n[r] -= 1
                s.rs[r].used -= u
                _dirty(s, r)
        if q.queued == 0:
            _dh_pop(s)
            _pair_unlink(s, p)
            _slot_free(s, q.slot)
            q.slot = -1
        else:                     # its next flow, at the rate it has until recomputed
            _dh_schedule(s, p)
            if weigh:
                pair_dirty(s, p)
    return 0


cdef inline void _dh_remove(State* s, int32_t p) noexcept nogil:
    cdef int32_t i = s.pr[p].hpos
    if i < 0:
        return
    s.dh_n -= 1
    if i < s.dh_n:
        s.dh_time[i] = s.dh_time[s.dh_n]
        s.dh_pair[i] = s.dh_pair[s.dh_n]
        s.pr[s.dh_pair[i]].hpos = i
        _dh_sift(s, i)
    s.pr[p].hpos = -1


cdef inline int pair_weigh(State* s, int32_t p, int32_t w, int32_t* route,
                           int32_t rlen) noexcept nogil:
    """Pair p (route[:rlen] its resources) has w flows from now on (0: none), a flow with
    one byte to go at its head: the solver alone, for max_min_rates."""
    cdef Pair* q = &s.pr[p]
    cdef int32_t k, r, d = w - q.n
    cdef int64_t base
    cdef i128 u
    if d == 0:
        return 0
    if q.n == 0:
        q.slot = slot_alloc(s, p)
        if q.slot < 0:
            return -1
        base = <int64_t>q.slot * s.hmax
        for k in range(rlen):
            s.fe_res[base + k] = route[k]
        q.rlen = rlen
        q.root = p
        s.fl[p].v = 1.0
        s.fl[p].left = s.fl[p].right = -1
        if pair_link(s, p) != 0:
            return -1
    base = <int64_t>q.slot * s.hmax
    u = q.ufx * d
    for k in range(q.rlen):
        r = s.fe_res[base + k]
        s.rs_n[r] += d
        s.rs[r].used += u
        _dirty(s, r)
    q.n = w
    if w == 0:
        _dh_remove(s, p)
        _pair_unlink(s, p)
        _slot_free(s, q.slot)
        q.slot = -1
        q.rate = 0.0
    else:
        pair_dirty(s, p)
    return 0


# ------------------------------------------------------------------ max-min fair rates

cdef inline void _rq_push(State* s, int32_t* n, double key, int32_t r) noexcept nogil:
    cdef int32_t i = n[0], p
    n[0] += 1
    while i > 0:
        p = (i - 1) >> 1
        if s.rq_key[p] < key or (s.rq_key[p] == key and s.rq_res[p] < r):
            break
        s.rq_key[i] = s.rq_key[p]
        s.rq_res[i] = s.rq_res[p]
        i = p
    s.rq_key[i] = key
    s.rq_res[i] = r


cdef inline void _rq_down(State* s, int32_t m, int32_t i, double key, int32_t r) noexcept nogil:
    """(key, r) goes to place i of the heap of m entries or below."""
    cdef int32_t c
    while True:
        c = 2 * i + 1
        if c >= m:
            break
        if c + 1 < m and (s.rq_key[c + 1] < s.rq_key[c] or
                          (s.rq_key[c + 1] == s.rq_key[c] and s.rq_res[c + 1] < s.rq_res[c])):
            c += 1
        if key < s.rq_key[c] or (key == s.rq_key[c] and r < s.rq_res[c]):
            break
        s.rq_key[i] = s.rq_key[c]
        s.rq_res[i] = s.rq_res[c]
        i = c
    s.rq_key[i] = key
    s.rq_res[i] = r


cdef inline void _rq_heapify(State* s, int32_t n) noexcept nogil:
    """The n entries written at rq_key, rq_res made a heap (bottom up)."""
    cdef int32_t i
    for i in range(n // 2 - 1, -1, -1):
        _rq_down(s, n, i, s.rq_key[i], s.rq_res[i])


cdef inline void _rq_pop(State* s, int32_t* n) noexcept nogil:
    cdef int32_t m = n[0] - 1
    n[0] = m
    if m > 0:
        _rq_down(s, m, 0, s.rq_key[m], s.rq_res[m])


cdef inline void _count_changed(State* s, int32_t n) noexcept nogil:
    """Of the n pairs recomputed (listed in comp), count those whose rate moved."""
    cdef int32_t i
    cdef Pair* pp
    for i in range(n):
        pp = &s.pr[s.comp[i]]
        if fabs(pp.rate - pp.prev) > 1e-9 * (pp.rate if pp.rate > pp.prev else pp.prev):
            s.pairs_changed += 1


cdef inline void _rates_full(State* s, int64_t kept) noexcept nogil:
    """Recompute the rates of every component holding a resource whose flows changed (the
    dirty resources), by progressive filling, and when each of their pairs' next flow has its
    last byte carried. kept: the stamp of the pairs whose rate before the recomputation is
    in Pair.prev already (an incremental attempt's), or -1."""
    cdef int64_t st, base, e, work = 0
    cdef int32_t i, k, r, q, p, nq = 0, head = 0, ncomp = 0, nh = 0, unf
    cdef double share, cur
    cdef Pair* pp
    if s.n_dirty == 0:
        return
    s.stamp += 1
    st = s.stamp
    for i in range(s.n_dirty):
        r = s.rs_dirty[i]
        s.rs_isdirty[r] = 0
        if s.rs_n[r] > 0 and s.rs[r].mark != st:
            s.rs[r].mark = st
            s.rs_queue[nq] = r
            nq += 1
    s.n_dirty = 0
    # the components: resources and pairs reachable from the changed resources
    while head < nq:
        r = s.rs_queue[head]
        head += 1
        e = s.rs_head[r]
        while e >= 0:
            p = s.fe_pair[e]
            pp = &s.pr[p]
            work += 1
            if pp.mark != st:
                if pp.mark != kept:
                    pp.prev = pp.rate
                pp.mark = st
                s.comp[ncomp] = p
                ncomp += 1
                base = <int64_t>pp.slot * s.hmax
                for k in range(pp.rlen):
                    q = s.fe_res[base + k]
                    if s.rs[q].mark != st:
                        s.rs[q].mark = st
                        s.rs_queue[nq] = q
                        nq += 1
            e = s.fe_next[e]
    if ncomp == 0:
        return
    for i in range(ncomp):
        pp = &s.pr[s.comp[i]]
        pp.service += pp.rate * <double>(s.now - pp.t_upd)
        pp.t_upd = s.now
        pp.frozen = 0
    for i in range(nq):
        r = s.rs_queue[i]
        s.rs[r].left = s.rs_cap[r]
        s.rs[r].unf = s.rs_n[r]
        _rq_push(s, &nh, s.rs_cap[r] / s.rs_n[r], r)
    # progressive filling, until every pair is frozen
    unf = ncomp
    while nh > 0 and unf > 0:
        r = s.rq_res[0]
        share = s.rq_key[0]
        _rq_pop(s, &nh)
        if s.rs[r].unf == 0:
            continue
        cur = s.rs[r].left / s.rs[r].unf
        if cur > share * (1.0 + 1e-12):     # others froze since: its share rose
            _rq_push(s, &nh, cur, r)
            continue
        if cur < 0.0:
            cur = 0.0
        e = s.rs_head[r]
        while e >= 0:
            p = s.fe_pair[e]
            pp = &s.pr[p]
            if not pp.frozen:
                pp.frozen = 1
                unf -= 1
                pp.rate = cur
                _bott_set(s, p, r, cur)
                base = <int64_t>pp.slot * s.hmax
                for k in range(pp.rlen):
                    q = s.fe_res[base + k]
                    s.rs[q].left -= cur * pp.n
                    s.rs[q].unf -= pp.n
                work += pp.rlen
            e = s.fe_next[e]
            work += 1
    for i in range(ncomp):
        work += _rate_apply(s, s.comp[i])
        _dh_schedule(s, s.comp[i])
    s.pairs_recomputed += ncomp
    s.solver_work += work
    s.solver_full_work += work
    _count_changed(s, ncomp)


# ------------------------------------------------------------------ incremental recomputation
# Max-min fair rates are the feasible rates in which every pair has a bottleneck: a full
# resource on its route on which no pair has a higher rate (Bertsekas and Gallager, Data
# Networks, 6.5.2), and they are unique. So a change need not recompute a whole component:
# the pairs whose flows changed (the set A) are recomputed by progressive filling over what
# the others leave of each resource, the others keep their rates, and the result is checked
# on every resource A touches or whose flows changed (the set T): a pair outside A whose
# bottleneck (the resource it was last fixed at, Pair.bott) is in T keeps it only if that
# resource is still full and no pair on it has more; a pair of A fixed at a resource needs
# every pair there to have no more than it. Pairs that fail join A, and A is recomputed,
# until nothing fails: then every pair has a bottleneck (those outside T kept theirs: nothing
# on them changed), so the rates are the max-min fair ones.
#
# A round costs the route entries of A, not the entries of the resources they cross: what the
# pairs outside A leave of a resource is its fixed-point sum less A's shares (A's entries on
# each resource of T are listed from rs_ahead), whether it is full is its sum, its highest
# rate is its heap's top, the pairs above the rate A was fixed at are a walk down its heap
# that stops below that rate, and the pairs whose bottleneck it is are its own list, walked
# only where the resource is no longer full or its highest rate rose above the bound on
# theirs. So an event costs the pairs whose rates it recomputes, each by the length of its
# route (and a logarithm, for the heaps), not its component. A change that spreads far
# falls back to progressive filling over the whole component, once its rounds have visited
# three times as many route entries as the active pairs have.

DEF INC_TOL = 1e-9


cdef inline void _inc_join(State* s, int32_t p, int64_t st, int32_t* na, int32_t* nt) noexcept nogil:
    """Pair p joins A (its service brought up to date; its entries listed on its resources)
    and its resources join T."""
    cdef Pair* pp = &s.pr[p]
    cdef int64_t base = <int64_t>pp.slot * s.hmax
    cdef int32_t k, r
    pp.mark = st
    pp.prev = pp.rate
    pp.service += pp.rate * <double>(s.now - pp.t_upd)
    pp.t_upd = s.now
    s.comp[na[0]] = p
    na[0] += 1
    for k in range(pp.rlen):
        r = s.fe_res[base + k]
        if s.rs[r].mark != st:
            s.rs[r].mark = st
            s.rs[r].ahead = -1
            s.rs_queue[nt[0]] = r
            nt[0] += 1
        s.fe_anext[base + k] = s.rs[r].ahead
        s.rs[r].ahead = <int32_t>(base + k)


cdef inline int64_t _inc_fill(State* s, int32_t na, int32_t nt, int64_t st) noexcept nogil:
    """Progressive filling of the pairs of A over what the pairs outside A leave of the
    resources of T; their rates then go into the sums and heaps. Returns the route entries
    it visited."""
    cdef int32_t i, k, r, q, p, nh = 0, unf
    cdef int64_t e, base, work = 0
    cdef double share, cur
    cdef i128 others
    cdef Pair* pp
    for i in range(nt):
        if i + 8 < nt:
            __builtin_prefetch(&s.rs[s.rs_queue[i + 8]])
        r = s.rs_queue[i]
        others = s.rs[r].used
        s.rs[r].unf = 0
        s.rs[r].fixed = -1.0
        e = s.rs[r].ahead
        while e >= 0:
            pp = &s.pr[s.fe_pair[e]]
            s.rs[r].unf += pp.n
            others -= pp.ufx * pp.n
            e = s.fe_anext[e]
            work += 1
        s.rs[r].left = s.rs[r].cap - _unfx(others)
        if s.rs[r].unf > 0:              # (made a heap below)
            s.rq_key[nh] = s.rs[r].left / s.rs[r].unf
            s.rq_res[nh] = r
            nh += 1
    _rq_heapify(s, nh)
    for i in range(na):
        s.pr[s.comp[i]].frozen = 0
    unf = na
    while nh > 0 and unf > 0:             # until every pair of A is frozen
        r = s.rq_res[0]
        share = s.rq_key[0]
        _rq_pop(s, &nh)
        if s.rs[r].unf == 0:
            continue
        cur = s.rs[r].left / s.rs[r].unf
        if cur > share * (1.0 + 1e-12) and cur > share + 1e-300:   # its share rose
            _rq_push(s, &nh, cur, r)
            continue
        if cur < 0.0:
            cur = 0.0
        s.rs[r].fixed = cur
        e = s.rs[r].ahead
        while e >= 0:
            p = s.fe_pair[e]
            pp = &s.pr[p]
            if not pp.frozen:
                pp.frozen = 1
                unf -= 1
                pp.rate = cur
                _bott_set(s, p, r, cur)
                base = <int64_t>pp.slot * s.hmax
                for k in range(pp.rlen):
                    q = s.fe_res[base + k]
                    s.rs[q].left -= cur * pp.n
                    s.rs[q].unf -= pp.n
                work += pp.rlen
            e = s.fe_anext[e]
            work += 1
    for i in range(na):
        work += _rate_apply(s, s.comp[i])
    return work


cdef inline int32_t _inc_above(State* s, int32_t r, int32_t i, double x, int64_t st,
                               int32_t* na, int32_t* nt, int64_t* work) noexcept nogil:
    """The pairs outside A at or below place i of resource r's heap whose rate is above x
    join A. Returns how many."""
    cdef int32_t e, p, added = 0
    if i >= s.rs[r].hn:
        return 0
    e = s.rs[r].hp[i]
    if not s.fe_key[e] > x:
        return 0
    work[0] += 1
    p = s.fe_pair[e]
    if s.pr[p].mark != st:
        _inc_join(s, p, st, na, nt)
        added = 1
    return added + _inc_above(s, r, 2 * i + 1, x, st, na, nt, work) + \
        _inc_above(s, r, 2 * i + 2, x, st, na, nt, work)


cdef inline int32_t _inc_check(State* s, int32_t* na, int32_t* nt, int64_t st,
                               int64_t* work) noexcept nogil:
    """The certificates on the resources of T (see above); pairs outside A that fail join
    it. Returns how many joined; adds the route entries it visited to work."""
    cdef int32_t i, r, p, nx, added = 0, n0 = nt[0]
    cdef double top, fixed, low
    cdef bint full
    cdef Pair* pp
    for i in range(n0):
        if i + 8 < n0:
            __builtin_prefetch(&s.rs[s.rs_queue[i + 8]])
        r = s.rs_queue[i]
        work[0] += 1
        full = _unfx(s.rs[r].used) >= s.rs[r].cap * (1.0 - INC_TOL)
        top = s.rs[r].top
        fixed = s.rs[r].fixed     # the rate A's pairs fixed at r have (-1: none)
        if fixed >= 0.0:
            added += _inc_above(s, r, 0, fixed * (1.0 + INC_TOL) + 1e-12, st, na, nt, work)
        if s.rs[r].bhead >= 0 and (not full or top * (1.0 - INC_TOL) > s.rs[r].bmin):
            low = top
            p = s.rs[r].bhead
            while p >= 0:
                pp = &s.pr[p]
                nx = pp.bnext
                work[0] += 1
                if pp.mark != st and (not full or pp.rate < top * (1.0 - INC_TOL)):
                    _inc_join(s, p, st, na, nt)
                    added += 1
                if pp.rate < low:
                    low = pp.rate
                p = nx
            s.rs[r].bmin = low
    return added


cdef inline void flow_rates(State* s) noexcept nogil:
    """Recompute the rates where flows started or ended (incrementally, see above), and when
    each recomputed pair's next flow has its last byte carried."""
    cdef int64_t st
    cdef int32_t i, r, p, n, na = 0, nt = 0
    cdef int64_t work = 0
    if s.n_dirty == 0 and s.n_pdirty == 0:
        return
    s.stamp += 1
    st = s.stamp
    for i in range(s.n_dirty):           # T: the resources whose flows changed ...
        r = s.rs_dirty[i]
        s.rs_isdirty[r] = 0
        if s.rs_n[r] > 0 and s.rs[r].mark != st:
            s.rs[r].mark = st
            s.rs[r].ahead = -1
            s.rs_queue[nt] = r
            nt += 1
    s.n_dirty = 0
    n = s.n_pdirty                       # ... and A: the pairs whose flows changed (listed
    s.n_pdirty = 0                       # in comp; A overwrites the list behind its reading)
    for i in range(n):
        p = s.comp[i]
        s.pr[p].dirty = 0
        if s.pr[p].n > 0:
            _inc_join(s, p, st, &na, &nt)
    if nt == 0:
        return
    s.recomputes += 1
    while True:
        s.solver_rounds += 1
        work += _inc_fill(s, na, nt, st)
        if _inc_check(s, &na, &nt, st, &work) == 0:
            break
        if work > 3 * s.active_entries:  # spreads far: the whole component
            s.solver_fallbacks += 1
            s.solver_work += work
            for i in range(nt):
                _dirty(s, s.rs_queue[i])
            _rates_full(s, st)
            return
    for i in range(na):
        _dh_schedule(s, s.comp[i])
    s.pairs_recomputed += na
    s.solver_work += work
    _count_changed(s, na)
