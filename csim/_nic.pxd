# Endpoints: packet generation (synthetic processes and traces), the NIC's source queue and
# injection, and ejection (delivery, latency statistics).
from libc.stdlib cimport realloc
from libc.string cimport memset
from csim._types cimport *
from csim._routes cimport route_next
from csim._rng cimport rng_uniform, rng_below, rng_geometric
from csim._heap cimport heap_push, heap_pop
from csim._iset cimport iset_add, iset_remove
from csim._link cimport link_can_send, link_take, schedule, packet_alloc, packet_free


# ------------------------------------------------------------------ packet creation

cdef inline void nic_activate(State* s, int32_t n) noexcept nogil:
    iset_add(s.act_n, s.act_n_pos, &s.nic_busy, n)


cdef inline void nic_deactivate(State* s, int32_t n) noexcept nogil:
    iset_remove(s.act_n, s.act_n_pos, &s.nic_busy, n)


cdef inline bint nic_idle(State* s, int32_t n) noexcept nogil:
    return s.nic_qlen[n] == 0 and s.nic_sending[n] == 0 and \
        (s.n_ops == 0 or s.nic_msg_cur[n] < 0)


cdef inline int32_t create_packet(State* s, int32_t src, int32_t dst, int32_t length,
                                  int64_t tag) noexcept nogil:
    """Make a packet at node src for node dst and queue it at src's NIC. -1 on failure."""
    cdef int32_t p = packet_alloc(s)
    cdef Packet* pk
    if p < 0:
        return -1
    pk = &s.pk[p]
    pk.dst = dst
    pk.length = length
    pk.create = s.now
    pk.inject = -1
    pk.hops = -1             # route() counts the routers the head is routed at: hops + 1
    pk.cls = 0
    pk.group = -1
    pk.last_order = -1
    pk.ej = 0
    pk.tag = <int32_t>tag
    pk.op = -1
    pk.serial = s.packets_created
    pk.meas = 1 if (s.now >= s.meas_start and s.now < s.meas_end) else 0
    if pk.meas:
        s.meas_created += 1
        s.meas_created_flits += length
    s.flits_created += length
    s.packets_created += 1
    if nic_idle(s, src):
        nic_activate(s, src)
    if s.nic_qtail[src] < 0:
        s.nic_qhead[src] = p
    else:
        s.pk[s.nic_qtail[src]].next = p
    s.nic_qtail[src] = p
    s.nic_qlen[src] += 1
    return p


# ------------------------------------------------------------------ synthetic generation

cdef inline cycle_t next_arrival(State* s, int32_t ep, cycle_t after) noexcept nogil:
    """Cycle of endpoint ep's next packet, strictly after `after`."""
    cdef cycle_t t, on_start
    if s.p_inject <= 0.0:        # (then p_on, p_inject / duty, is 0 too)
        return NEVER
    if s.proc == PROC_BERNOULLI:
        return after + rng_geometric(s.rng, s.p_inject)
    # on/off: Bernoulli(p_on) arrivals while on; on and off periods geometric. The periods
    # are walked one by one, so not past the end of generation (rare arrivals would take
    # the walk far beyond any horizon)
    t = after + rng_geometric(s.rng, s.p_on)
    while t >= s.on_end[ep]:
        on_start = s.on_end[ep] + rng_geometric(s.rng, s.q_off_end)
        if on_start >= s.gen_stop:
            return NEVER
        s.on_end[ep] = on_start + rng_geometric(s.rng, s.q_on_end)
        t = on_start - 1 + rng_geometric(s.rng, s.p_on)
    return t


cdef inline void start_synthetic(State* s, cycle_t start) noexcept nogil:
    cdef int32_t ep
    cdef cycle_t t
    s.hp_n = 0
    for ep in range(s.n_ep):
        if s.proc == PROC_ONOFF:
            if rng_uniform(s.rng) < s.duty:
                s.on_end[ep] = start + rng_geometric(s.rng, s.q_on_end)
            else:
                s.on_end[ep] = start
        t = next_arrival(s, ep, start - 1)
        if t < NEVER:
            heap_push(s.hp_time, s.hp_ep, &s.hp_n, t, ep)


cdef inline int32_t _draw_dest(State* s, int32_t src_ep) noexcept nogil:
    cdef long r
    if s.n_hot > 0 and rng_uniform(s.rng) < s.hot_frac:
        return s.hot[rng_below(s.rng, s.n_hot)]
    if s.pat_mode == PAT_PERM:
        return s.perm[src_ep]
    if s.include_self:
        return <int32_t>rng_below(s.rng, s.n_ep)
    r = rng_below(s.rng, s.n_ep - 1)
    if r >= src_ep:
        r += 1
    return <int32_t>r


cdef inline int32_t _draw_size(State* s) noexcept nogil:
    cdef double u
    cdef int32_t i
    if s.n_sizes == 1:
        return s.size_val[0]
    u = rng_uniform(s.rng)
    for i in range(s.n_sizes - 1):
        if u < s.size_cdf[i]:
            return s.size_val[i]
    return s.size_val[s.n_sizes - 1]


cdef inline cycle_t next_generation(State* s) noexcept nogil:
    """Earliest cycle at which a packet will be created, or NEVER."""
    cdef cycle_t t = NEVER
    if s.gen_mode == GEN_SYNTHETIC and s.hp_n > 0:
        t = s.hp_time[0]
    elif s.gen_mode == GEN_TRACE and s.tr_pos < s.tr_n:
        t = s.tr_time[s.tr_pos]
    if t >= s.gen_stop:
        return NEVER
    return t


cdef inline int generate(State* s) noexcept nogil:
    """Create every packet due this cycle."""
    cdef int32_t ep, dst
    cdef cycle_t t
    if s.now >= s.gen_stop:
        return 0
    if s.gen_mode == GEN_SYNTHETIC:
        while s.hp_n > 0 and s.hp_time[0] <= s.now:
            ep = s.hp_ep[0]
            heap_pop(s.hp_time, s.hp_ep, &s.hp_n)
            dst = _draw_dest(s, ep)
            if create_packet(s, s.ep_node[ep], s.ep_node[dst], _draw_size(s), -1) < 0:
                return -1
            t = next_arrival(s, ep, s.now)
            if t < NEVER:
                heap_push(s.hp_time, s.hp_ep, &s.hp_n, t, ep)
    elif s.gen_mode == GEN_TRACE:
        while s.tr_pos < s.tr_n and s.tr_time[s.tr_pos] <= s.now:
            if create_packet(s, s.tr_src[s.tr_pos], s.tr_dst[s.tr_pos], s.tr_len[s.tr_pos],
                             s.tr_pos) < 0:
                return -1
            s.tr_pos += 1
    return 0


# ------------------------------------------------------------------ injection

cdef inline bint _dst_full(State* s, int32_t n, int32_t dst) noexcept nogil:
    """Are as many of node n's injection channels sending to dst as the first link towards
    it has parallel channels?"""
    cdef int32_t j, c, k = 0
    cdef int32_t first = route_next(&s.rt, n, dst)
    for j in range(s.nic_inj_n[n]):
        c = s.nic_inj_base[n] + j
        if s.ch[c].cur_pkt >= 0 and s.pk[s.ch[c].cur_pkt].dst == dst:
            k += 1
    return k >= s.ch[first].par_n


cdef inline bint _port_free(State* s, int32_t c) noexcept nogil:
    """Has every flit injection channel c sent left its router's input buffer (each of its
    VCs free, with all its credits back)? Its NIC knows this from its credits alone."""
    cdef int32_t k
    cdef OVC* o = &s.ovc[c * s.V]
    for k in range(s.V):
        if o[k].owner != OVC_FREE or o[k].credits != s.D:
            return 0
    return 1


cdef inline int32_t _hop_ports(State* s, int32_t n, int32_t hop) noexcept nogil:
    """Node n's injection channels whose router buffers hold packets for the first hop
    `hop` (a parallel group's first channel)."""
    cdef int32_t j, c, k = 0
    for j in range(s.nic_inj_n[n]):
        c = s.nic_inj_base[n] + j
        if s.inj_hop[c] == hop:
            if _port_free(s, c):
                s.inj_hop[c] = -1
            else:
                k += 1
    return k


cdef inline int32_t _pick_message(State* s, int32_t n, int32_t c) noexcept nogil:
    """Injection per link: the message, in turn from node n's current one, that injection
    channel c may cut its next packet from. A channel whose packets are still in its router's
    input buffers carries packets for their first hop (output link) only, so a packet never
    waits there behind one for another link (head-of-line blocking), and two packets for one
    link alternate between its VCs; an empty channel takes a message whose first hop has
    fewer channels than parallel links. A channel passes over the messages for other links,
    but if one of them, due before its own, has no channel at all, it takes none: it empties
    and then serves that one (a NIC of fewer channels than busy links turns between them).
    The message taken moves to the back of the turn (just before the current one, the others
    keeping their order), so the messages of one link take its packets in turn, as the flow
    level shares a link between them: with the turn passed on from wherever a channel found
    its message, the other channels' cuts would move it on past the same few messages every
    time and leave a link's others waiting. Sets nic_msg_cur/prev to the message; -1 if
    none."""
    cdef int32_t m = s.nic_msg_cur[n]
    cdef int32_t prev = s.nic_msg_prev[n]
    cdef int32_t first = m
    cdef int32_t first_prev = prev
    cdef int32_t hop, mine = -1
    if s.inj_hop[c] >= 0:
        if _port_free(s, c):
            s.inj_hop[c] = -1
        else:
            mine = s.inj_hop[c]
    while True:
        hop = route_next(&s.rt, n, s.op_dst[m])
        if mine >= 0:
            if hop == mine:
                break
            if _hop_ports(s, n, hop) == 0:   # a message due before its own has no channel:
                return -1                    # it stops taking packets, to empty and serve it
        elif _hop_ports(s, n, hop) < s.ch[hop].par_n:
            break
        prev = m
        m = s.msg_next[m]
        if m == first:
            return -1
    if m != first and m != first_prev:    # to the back: out of its place, before `first`
        s.msg_next[prev] = s.msg_next[m]
        s.msg_next[first_prev] = m
        s.msg_next[m] = first
        prev = first_prev
    s.nic_msg_cur[n] = m
    s.nic_msg_prev[n] = prev
    return m


cdef inline int _cut_packet(State* s, int32_t n) noexcept nogil:
    """Queue the next packet of the message whose turn it is at node n's NIC, and pass the
    turn on: concurrent messages (in order: the first message to each destination) share the
    NIC packet by packet (like a DMA engine serving several queues). A NIC with several
    injection channels shared by every link sends no more packets at once to one destination
    than the first link towards it has channels (a message waits its next turn; if every
    message waits, the channel stays idle this cycle); per link, _pick_message has chosen the
    message already. Returns the packet, -1 if none was cut, -2 when out of memory."""
    cdef int32_t m = s.nic_msg_cur[n]
    cdef int32_t prev = s.nic_msg_prev[n]
    cdef int32_t first = m
    cdef int64_t bpp = <int64_t>s.packet_flits_max * s.flit_bytes
    cdef int64_t b
    cdef int32_t p, nx
    if s.nic_inj_n[n] > 1 and not s.nic_per_link:
        if s.nic_cut_blocked[n]:
            return -1
        while _dst_full(s, n, s.op_dst[m]):
            prev = m
            m = s.msg_next[m]
            if m == first:
                s.nic_cut_blocked[n] = 1     # until a packet is sent or a message arrives
                return -1
    b = s.msg_bytes[m] if s.msg_bytes[m] < bpp else bpp
    p = create_packet(s, n, s.op_dst[m], <int32_t>((b + s.flit_bytes - 1) // s.flit_bytes),
                      -1)
    if p < 0:
        return -2
    s.pk[p].op = m
    s.msg_bytes[m] -= b
    if s.msg_bytes[m] == 0:           # fully cut: leave the circle
        nx = s.msg_pnext[m] if s.nic_fifo else -1
        if nx >= 0:                   # the next message to its destination takes its place
            if s.msg_next[m] == m:
                s.msg_next[nx] = nx
                s.nic_msg_cur[n] = nx
                s.nic_msg_prev[n] = nx
            else:
                s.msg_next[prev] = nx
                s.msg_next[nx] = s.msg_next[m]
                s.nic_msg_cur[n] = s.msg_next[m]
                s.nic_msg_prev[n] = nx
        else:
            if s.nic_fifo:
                s.pair_tail[s.op_pair[m]] = -1
            if s.msg_next[m] == m:
                s.nic_msg_cur[n] = -1
            else:
                s.msg_next[prev] = s.msg_next[m]
                s.nic_msg_cur[n] = s.msg_next[m]
                s.nic_msg_prev[n] = prev
    else:
        s.nic_msg_prev[n] = m
        s.nic_msg_cur[n] = s.msg_next[m]
    return p


cdef inline void nic_add_message(State* s, int32_t n, int32_t m) noexcept nogil:
    """Message (send op) m joins node n's NIC, last in turn; in order (nic_fifo), behind the
    messages to its destination the NIC holds, if any: it takes the turn of the one before
    it when that one has been cut into packets, so the NIC sends a destination's messages
    one after another, first in first out, and shares its turns between destinations."""
    cdef int32_t pr
    if s.nic_fifo:
        pr = s.op_pair[m]
        s.msg_pnext[m] = -1
        if s.pair_tail[pr] >= 0:
            s.msg_pnext[s.pair_tail[pr]] = m
            s.pair_tail[pr] = m
            return
        s.pair_tail[pr] = m
    s.nic_cut_blocked[n] = 0
    if nic_idle(s, n):
        nic_activate(s, n)
    if s.nic_msg_cur[n] < 0:
        s.nic_msg_cur[n] = m
        s.nic_msg_prev[n] = m
        s.msg_next[m] = m
    else:
        s.msg_next[s.nic_msg_prev[n]] = m
        s.msg_next[m] = s.nic_msg_cur[n]
        s.nic_msg_prev[n] = m


cdef inline bint _nic_can_start(State* s, int32_t n) noexcept nogil:
    """Could an idle injection channel of node n's NIC take a packet now: one is queued, or a
    message may be cut (cut_blocked is only ever set on NICs with several channels)?"""
    return s.nic_qlen[n] > 0 or (s.n_ops != 0 and s.nic_msg_cur[n] >= 0 and
                                 not s.nic_cut_blocked[n])


cdef inline int _nic_send(State* s, int32_t n, int32_t c) noexcept nogil:
    """Injection channel c of node n's NIC sends at most one flit; an idle channel first takes
    the packet at the head of the source queue and claims a free VC with a credit for it
    (round-robin from the VC after the last one it used). An op graph's NIC of several
    channels injecting per link (nic_per_link) cuts a packet only once the channel has a VC
    and a message may go on it (_pick_message), so no packet waits at the head of the source
    queue for a channel. Returns -1 when out of memory, 1 when such a channel could have
    started a packet but no message may go on it, else 0."""
    cdef Chan* ch = &s.ch[c]
    cdef int32_t V = s.V
    cdef int32_t p, k, i, v, seq
    cdef OVC* o
    p = ch.cur_pkt
    if p < 0:
        if not _nic_can_start(s, n):
            return 0
        v = -1
        k = ch.vc_rr
        for i in range(V):
            o = &s.ovc[c * V + k]
            if o.owner == OVC_FREE and o.credits > 0:
                v = k
                break
            k += 1
            if k == V:
                k = 0
        if s.nic_qlen[n] == 0 and s.nic_per_link and s.nic_inj_n[n] > 1:
            if v < 0 or not link_can_send(s, ch):
                return 0
            if _pick_message(s, n, c) < 0:
                return 1
            p = _cut_packet(s, n)
            if p == -2:
                return -1
            s.inj_hop[c] = route_next(&s.rt, n, s.pk[p].dst)
        else:
            if s.nic_qlen[n] == 0:
                p = _cut_packet(s, n)
                if p == -2:
                    return -1
                if p < 0:
                    return 0
            if v < 0 or not link_can_send(s, ch):
                return 0
        p = s.nic_qhead[n]
        s.nic_qhead[n] = s.pk[p].next
        if s.nic_qhead[n] < 0:
            s.nic_qtail[n] = -1
        s.pk[p].next = -1
        s.nic_qlen[n] -= 1
        s.nic_sending[n] += 1
        ch.cur_pkt = p
        ch.cur_seq = 0
        ch.cur_vc = v
        ch.vc_rr = v + 1 if v + 1 < V else 0
        s.ovc[c * V + v].owner = n
        s.pk[p].inject = s.now
    v = ch.cur_vc
    o = &s.ovc[c * V + v]
    if o.credits <= 0 or not link_can_send(s, ch):
        return 0
    seq = ch.cur_seq
    if schedule(s, ch.fdelay, c, v, p,
                seq | FLIT_TAIL if seq == s.pk[p].length - 1 else seq) != 0:
        return -1
    link_take(s, ch)
    o.credits -= 1
    s.flits_injected += 1
    s.last_progress = s.now
    seq += 1
    if seq == s.pk[p].length:
        o.owner = OVC_TAIL_PENDING if s.wait_tail else OVC_FREE
        ch.cur_pkt = -1
        s.nic_sending[n] -= 1
        s.nic_cut_blocked[n] = 0             # a channel is free: a message may go now
    else:
        ch.cur_seq = seq
    return 0


cdef inline int nic_inject(State* s, int32_t n) noexcept nogil:
    """Node n's NIC: each of its injection channels sends at most one flit. Channels that
    can do nothing this cycle are passed over: an idle one when no packet can start, a busy
    one still serialising its previous flit. Per link, when every idle channel could have
    started a packet but no message may go on it, the NIC waits (nic_cut_blocked) until a
    packet is sent, a message arrives or a channel's router buffers empty."""
    cdef int32_t j, p, r
    cdef int32_t base = s.nic_inj_base[n]
    cdef bint start = _nic_can_start(s, n)
    cdef int32_t idle = 0, missed = 0
    cdef bint changed = 0
    cdef Chan* ch
    for j in range(s.nic_inj_n[n]):
        ch = &s.ch[base + j]
        if ch.cur_pkt < 0:
            if not start:
                continue
            idle += 1
        elif not link_can_send(s, ch):
            continue
        p = ch.cur_pkt
        r = _nic_send(s, n, base + j)
        if r < 0:
            return -1
        missed += r
        if ch.cur_pkt != p:                  # a packet started or ended: look again
            start = _nic_can_start(s, n)
            changed = 1
    if missed and missed == idle and not changed:
        s.nic_cut_blocked[n] = 1             # per link: no idle channel may take a message
                                             # until a channel or a message changes
    if nic_idle(s, n):
        nic_deactivate(s, n)
    return 0


# ------------------------------------------------------------------ ejection

cdef inline int _hist_add(State* s, cycle_t lat, cycle_t net) noexcept nogil:
    cdef int64_t need = (lat if lat > net else net) + 1
    cdef int64_t cap
    cdef void* p
    if need > s.hist_cap:
        cap = s.hist_cap * 2 if s.hist_cap > 0 else 1024
        while cap < need:
            cap *= 2
        p = realloc(s.hist_lat, cap * sizeof(int64_t))
        if p == NULL: return -1
        s.hist_lat = <int64_t*>p
        p = realloc(s.hist_net, cap * sizeof(int64_t))
        if p == NULL: return -1
        s.hist_net = <int64_t*>p
        memset(s.hist_lat + s.hist_cap, 0, (cap - s.hist_cap) * sizeof(int64_t))
        memset(s.hist_net + s.hist_cap, 0, (cap - s.hist_cap) * sizeof(int64_t))
        s.hist_cap = cap
    s.hist_lat[lat] += 1
    s.hist_net[net] += 1
    return 0


cdef inline void nic_count_flit(State* s, int32_t n, Packet* pk, int32_t seq,
                                cycle_t arrive) noexcept nogil:
    """Flit seq (tail mark cleared) of packet pk, for node n's NIC, arrives there at cycle
    `arrive`: check its order and count it."""
    if pk.dst != n or pk.ej != seq:
        s.bad_eject += 1
    pk.ej += 1
    s.flits_ejected += 1
    if arrive >= s.meas_start and arrive < s.meas_end:
        s.win_ejected_flits += 1


cdef inline int nic_receive(State* s, int32_t n, int32_t p, int32_t seq) noexcept nogil:
    """A packet's last flit arrives at node n's NIC: the packet is delivered. (Its other
    flits were counted by nic_count_flit when they left the router: nothing else in the
    simulation depends on when they reach the NIC.)"""
    cdef cycle_t lat, net
    cdef Packet* pk = &s.pk[p]
    nic_count_flit(s, n, pk, seq & ~FLIT_TAIL, s.now)
    s.last_progress = s.now
    s.packets_done += 1
    if pk.op >= 0:
        s.op_left[pk.op] -= 1
        if s.op_left[pk.op] == 0:            # the message is complete: the op finishes
            s.op_done_q[s.op_done_n] = pk.op
            s.op_done_n += 1
    if pk.tag >= 0 and s.tr_deliver != NULL:
        s.tr_deliver[pk.tag] = s.now
        s.tr_inject[pk.tag] = pk.inject
        s.tr_hops[pk.tag] = pk.hops
    if pk.meas:
        lat = s.now - pk.create
        net = s.now - pk.inject
        s.meas_done += 1
        s.sum_lat += lat
        s.sum_lat_sq += <double>lat * lat
        s.sum_netlat += net
        s.sum_hops += pk.hops
        if lat > s.max_lat: s.max_lat = lat
        if net > s.max_netlat: s.max_netlat = net
        if _hist_add(s, lat, net) != 0:
            return -1
    packet_free(s, p)
    return 0
