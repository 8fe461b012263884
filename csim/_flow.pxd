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
# Rates are recomputed when flows start or end, once per cycle at which something changed,
# and only in the connected components (flows linked by shared resources) that changed: the
# rates of other components cannot move. Within a component, progressive filling: every
# unfrozen flow's rate rises together until a resource is full; its unfrozen flows freeze at
# that level; repeat. A heap of resources by fair share (capacity left / unfrozen flows)
# finds the next full one; a resource's share only rises as other flows freeze, so stale
# entries are re-pushed when popped.
#
# A message of b bytes is n packets of P flits, the last of L, W wire bytes (N flits) in all.
# Alone at the flit level, on a route whose bottleneck (the least capacity, R bytes per cycle)
# is one channel, its packets follow each other through it flit after flit (with VCs to spare
# they interleave there, which changes which flit is last but not when the last one crosses),
# and it arrives as one packet of N flits would: T0(N), the zero-load latency of pysim.theory
# (given per op in op_lat_whole). Where the bottleneck is m parallel channels, packets cross it
# m at a time, each at R / m: rounds of m packets, the last round's longest packet paying its
# own zero-load latency (op_lat_full for a full packet, op_lat for the last):
# T0(L') + ceil(((n - 1) // m) * P * F * m / R). Here the W bytes drain at the max-min rate and
# the op finishes `lat` cycles after the last byte is carried, lat chosen so that a lone
# message takes exactly that time: lat = T_alone - ceil(W / R) (never below 0). No Python runs
# per flow or event.
from libc.math cimport ceil
from libc.stdlib cimport realloc
from csim._types cimport *
from csim._heap cimport heap_push


cdef inline cycle_t ceil_cycles(double x) noexcept nogil:
    """ceil(x) for x >= 0, forgiving the rounding of a division that should be whole."""
    cdef double y = x - 1e-9 - 1e-12 * x
    return <cycle_t>ceil(y) if y > 0 else 0


# ------------------------------------------------------------------ the flow pool

cdef inline int flow_grow(State* s) noexcept nogil:
    """Double the flow slots (and every per-slot array with them)."""
    cdef int32_t cap = s.fl_cap * 2 if s.fl_cap > 0 else 64
    cdef int32_t i
    cdef int64_t ne = <int64_t>cap * s.hmax
    cdef void* p
    p = realloc(s.fl, cap * sizeof(Flow))
    if p == NULL: return -1
    s.fl = <Flow*>p
    p = realloc(s.fe_res, ne * sizeof(int32_t))
    if p == NULL: return -1
    s.fe_res = <int32_t*>p
    p = realloc(s.fe_next, ne * sizeof(int32_t))
    if p == NULL: return -1
    s.fe_next = <int32_t*>p
    p = realloc(s.fe_prev, ne * sizeof(int32_t))
    if p == NULL: return -1
    s.fe_prev = <int32_t*>p
    p = realloc(s.comp, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.comp = <int32_t*>p
    p = realloc(s.dh_time, cap * sizeof(cycle_t))
    if p == NULL: return -1
    s.dh_time = <cycle_t*>p
    p = realloc(s.dh_slot, cap * sizeof(int32_t))
    if p == NULL: return -1
    s.dh_slot = <int32_t*>p
    for i in range(s.fl_cap, cap):
        s.fl[i].nxt = i + 1 if i + 1 < cap else s.fl_free
        s.fl[i].mark = 0
        s.fl[i].hpos = -1
    s.fl_free = s.fl_cap
    s.fl_cap = cap
    return 0


cdef inline int32_t flow_alloc(State* s) noexcept nogil:
    cdef int32_t f
    if s.fl_free < 0 and flow_grow(s) != 0:
        return -1
    f = s.fl_free
    s.fl_free = s.fl[f].nxt
    s.fl_alive += 1
    return f


cdef inline void _dirty(State* s, int32_t r) noexcept nogil:
    if not s.rs_isdirty[r]:
        s.rs_isdirty[r] = 1
        s.rs_dirty[s.n_dirty] = r
        s.n_dirty += 1


cdef inline void flow_link(State* s, int32_t f) noexcept nogil:
    """Put flow f (its route in fe_res) on each of its resources' lists."""
    cdef int32_t k, r, e
    cdef int32_t base = f * s.hmax
    for k in range(s.fl[f].rlen):
        e = base + k
        r = s.fe_res[e]
        s.fe_prev[e] = -1
        s.fe_next[e] = s.rs_head[r]
        if s.rs_head[r] >= 0:
            s.fe_prev[s.rs_head[r]] = e
        s.rs_head[r] = e
        s.rs_n[r] += 1
        _dirty(s, r)


cdef inline void flow_unlink(State* s, int32_t f) noexcept nogil:
    cdef int32_t k, r, e
    cdef int32_t base = f * s.hmax
    for k in range(s.fl[f].rlen):
        e = base + k
        r = s.fe_res[e]
        if s.fe_prev[e] >= 0:
            s.fe_next[s.fe_prev[e]] = s.fe_next[e]
        else:
            s.rs_head[r] = s.fe_next[e]
        if s.fe_next[e] >= 0:
            s.fe_prev[s.fe_next[e]] = s.fe_prev[e]
        s.rs_n[r] -= 1
        _dirty(s, r)


# ------------------------------------------------------------------ the drain heap
# (cycle, slot) ordered by cycle, then slot; positions kept in Flow.hpos for updates

cdef inline bint _dh_less(State* s, int32_t i, int32_t j) noexcept nogil:
    return s.dh_time[i] < s.dh_time[j] or (s.dh_time[i] == s.dh_time[j] and
                                           s.dh_slot[i] < s.dh_slot[j])


cdef inline void _dh_swap(State* s, int32_t i, int32_t j) noexcept nogil:
    cdef cycle_t t = s.dh_time[i]
    cdef int32_t f = s.dh_slot[i]
    s.dh_time[i] = s.dh_time[j]
    s.dh_slot[i] = s.dh_slot[j]
    s.dh_time[j] = t
    s.dh_slot[j] = f
    s.fl[s.dh_slot[i]].hpos = i
    s.fl[s.dh_slot[j]].hpos = j


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


cdef inline void dh_set(State* s, int32_t f, cycle_t t) noexcept nogil:
    """Flow f's last byte is carried at cycle t (insert, or move it in the heap)."""
    cdef int32_t i = s.fl[f].hpos
    if i < 0:
        i = s.dh_n
        s.dh_n += 1
        s.dh_slot[i] = f
        s.fl[f].hpos = i
    s.dh_time[i] = t
    _dh_sift(s, i)


cdef inline void _dh_pop(State* s) noexcept nogil:
    cdef int32_t f = s.dh_slot[0]
    s.dh_n -= 1
    if s.dh_n > 0:
        s.dh_time[0] = s.dh_time[s.dh_n]
        s.dh_slot[0] = s.dh_slot[s.dh_n]
        s.fl[s.dh_slot[0]].hpos = 0
        _dh_sift(s, 0)
    s.fl[f].hpos = -1


cdef inline cycle_t flow_next(State* s) noexcept nogil:
    return s.dh_time[0] if s.dh_n > 0 else NEVER


# ------------------------------------------------------------------ starting and ending flows

cdef inline int32_t flow_route(State* s, int32_t src, int32_t dst, int32_t cap_res,
                               int32_t* out) noexcept nogil:
    """Write the resources of src's message to dst into out (if not NULL): its NIC's
    injection group, its (source, destination) cap if any, the channel groups rt takes, the
    destination's ejection group. Returns how many, or -1 if rt has no route (or loops)."""
    cdef int32_t k = 0, v = src, c, steps = 0
    cdef int64_t n = s.n_nodes
    if out != NULL:
        out[k] = s.ch_base[s.nic_inj_base[src]]
    k += 1
    if cap_res >= 0:
        if out != NULL:
            out[k] = cap_res
        k += 1
    while True:
        c = s.rt[v * n + dst]
        if c < 0 or steps > s.n_nodes:
            return -1
        if out != NULL:
            out[k] = s.ch_base[c]
        k += 1
        steps += 1
        if s.ch[c].kind == CH_EJECT:
            return k
        v = s.ch[c].dst


cdef inline int flow_start(State* s, int32_t op) noexcept nogil:
    """Send op (bytes > 0) starts now: a flow on its route; rates are recomputed before the
    next event."""
    cdef int64_t F = s.flit_bytes
    cdef int64_t bpp = <int64_t>s.packet_flits_max * F
    cdef int64_t b = s.op_size[op]
    cdef int64_t rest = b % bpp
    cdef int64_t last = (rest + F - 1) // F if rest else s.packet_flits_max
    cdef int64_t flits = (b // bpp) * s.packet_flits_max + (rest + F - 1) // F
    cdef int64_t packets = (b + bpp - 1) // bpp
    cdef int64_t rounds, in_last
    cdef double wire = <double>(flits * F)
    cdef double solo = 0.0
    cdef int32_t f = flow_alloc(s)
    cdef int32_t k, n, r, m = 1
    cdef cycle_t lat, t0
    if f < 0:
        return -1
    n = flow_route(s, s.op_node[op], s.op_dst[op], s.op_cap[op], s.fe_res + <int64_t>f * s.hmax)
    s.fl[f].rlen = n
    for k in range(n):
        r = s.fe_res[<int64_t>f * s.hmax + k]
        if k == 0 or s.rs_cap[r] < solo or (s.rs_cap[r] == solo and s.rs_lanes[r] < m):
            solo = s.rs_cap[r]              # the bottleneck, and how many channels it has
            m = s.rs_lanes[r]
        s.rs_bytes[r] += wire
    if m == 1:
        lat = s.op_lat_whole[op] - ceil_cycles(wire / solo)
    else:
        rounds = (packets - 1) // m         # rounds of m packets before the last
        in_last = packets - rounds * m
        t0 = s.op_lat_full[op] if in_last >= 2 else s.op_lat[op]
        lat = t0 + ceil_cycles(<double>(rounds * m * bpp) / solo) - ceil_cycles(wire / solo)
    s.fl[f].lat = lat if lat > 0 else 0
    s.fl[f].op = op
    s.fl[f].rem = wire
    s.fl[f].rate = 0.0
    s.fl[f].t_upd = s.now
    s.fl[f].hpos = -1
    # router-to-router channels: the route less the NIC groups and the cap
    s.flit_hops += flits * (n - 2 - (1 if s.op_cap[op] >= 0 else 0))
    s.flows_started += 1
    flow_link(s, f)
    dh_set(s, f, NEVER)          # (its rate, and so its drain, come with the recomputation)
    return 0


cdef inline void flow_drains(State* s) noexcept nogil:
    """Flows whose last byte is carried by now leave their resources; their ops finish `lat`
    cycles later (on the op heap, as compute and delay ops do)."""
    cdef int32_t f, op
    cdef int64_t bpp = <int64_t>s.packet_flits_max * s.flit_bytes
    while s.dh_n > 0 and s.dh_time[0] <= s.now:
        f = s.dh_slot[0]
        _dh_pop(s)
        op = s.fl[f].op
        flow_unlink(s, f)
        s.packets_done += (s.op_size[op] + bpp - 1) // bpp
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now + s.fl[f].lat, op)
        s.fl[f].nxt = s.fl_free
        s.fl_free = f
        s.fl_alive -= 1


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


cdef inline void _rq_pop(State* s, int32_t* n) noexcept nogil:
    cdef int32_t m = n[0] - 1, i = 0, c
    cdef double key = s.rq_key[m]
    cdef int32_t r = s.rq_res[m]
    n[0] = m
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
    if m > 0:
        s.rq_key[i] = key
        s.rq_res[i] = r


cdef inline void flow_rates(State* s) noexcept nogil:
    """Recompute the rates of every component holding a resource whose flows changed, by
    progressive filling, and the cycles at which their flows' last bytes are carried."""
    cdef int64_t st
    cdef int32_t i, k, r, q, e, f, nq = 0, head = 0, ncomp = 0, nh = 0, base
    cdef double share, cur, dt
    cdef Flow* fp
    if s.n_dirty == 0:
        return
    s.stamp += 1
    st = s.stamp
    for i in range(s.n_dirty):
        r = s.rs_dirty[i]
        s.rs_isdirty[r] = 0
        if s.rs_n[r] > 0 and s.rs_mark[r] != st:
            s.rs_mark[r] = st
            s.rs_queue[nq] = r
            nq += 1
    s.n_dirty = 0
    # the components: resources and flows reachable from the changed resources
    while head < nq:
        r = s.rs_queue[head]
        head += 1
        e = s.rs_head[r]
        while e >= 0:
            f = e // s.hmax
            if s.fl[f].mark != st:
                s.fl[f].mark = st
                s.comp[ncomp] = f
                ncomp += 1
                base = f * s.hmax
                for k in range(s.fl[f].rlen):
                    q = s.fe_res[base + k]
                    if s.rs_mark[q] != st:
                        s.rs_mark[q] = st
                        s.rs_queue[nq] = q
                        nq += 1
            e = s.fe_next[e]
    if ncomp == 0:
        return
    for i in range(ncomp):
        fp = &s.fl[s.comp[i]]
        dt = <double>(s.now - fp.t_upd)
        fp.rem -= fp.rate * dt
        if fp.rem < 0.0:
            fp.rem = 0.0
        fp.t_upd = s.now
        fp.frozen = 0
    for i in range(nq):
        r = s.rs_queue[i]
        s.rs_left[r] = s.rs_cap[r]
        s.rs_unf[r] = s.rs_n[r]
        _rq_push(s, &nh, s.rs_cap[r] / s.rs_n[r], r)
    # progressive filling
    while nh > 0:
        r = s.rq_res[0]
        share = s.rq_key[0]
        _rq_pop(s, &nh)
        if s.rs_unf[r] == 0:
            continue
        cur = s.rs_left[r] / s.rs_unf[r]
        if cur > share * (1.0 + 1e-12):     # others froze since: its share rose
            _rq_push(s, &nh, cur, r)
            continue
        if cur < 0.0:
            cur = 0.0
        e = s.rs_head[r]
        while e >= 0:
            f = e // s.hmax
            fp = &s.fl[f]
            if not fp.frozen:
                fp.frozen = 1
                fp.rate = cur
                base = f * s.hmax
                for k in range(fp.rlen):
                    q = s.fe_res[base + k]
                    s.rs_left[q] -= cur
                    s.rs_unf[q] -= 1
            e = s.fe_next[e]
    for i in range(ncomp):
        f = s.comp[i]
        fp = &s.fl[f]
        if fp.rate > 0.0:
            dh_set(s, f, s.now + ceil_cycles(fp.rem / fp.rate))
        else:                                # (capacities are > 0: cannot happen)
            dh_set(s, f, NEVER)
    s.recomputes += 1
    s.flows_recomputed += ncomp
