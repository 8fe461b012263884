# What the engine reports: counters, per-channel and per-VC flits, latency histograms, a
# trace's per-packet results and a snapshot of the state (an include of csim/_engine.pyx).


cdef _counters(Engine self):
    cdef State* s = &self.s
    return dict(
        now=s.now, flits_created=s.flits_created, flits_injected=s.flits_injected,
        flits_ejected=s.flits_ejected, packets_created=s.packets_created,
        packets_done=s.packets_done, packets_alive=s.pk_alive, flit_hops=s.flit_hops,
        meas_created=s.meas_created, meas_done=s.meas_done,
        meas_created_flits=s.meas_created_flits, win_ejected_flits=s.win_ejected_flits,
        occupancy_sum=s.occ_sum,
        sum_lat=s.sum_lat, sum_lat_sq=s.sum_lat_sq, sum_netlat=s.sum_netlat,
        sum_hops=s.sum_hops, max_lat=s.max_lat, max_netlat=s.max_netlat,
        bad_eject=s.bad_eject, buf_overflow=s.buf_overflow, bad_front=s.bad_front,
        bad_class=s.bad_class,
        events_pending=s.n_events, flits_buffered=s.nbuf_total,
        unsent_flits=_unsent_flits(self), last_progress=s.last_progress,
        cycles_skipped=s.skipped,
        deadlock_cycle=s.deadlock_t, flows_started=s.flows_started,
        flows_alive=s.fl_alive, rate_recomputations=s.recomputes,
        pairs_recomputed=s.pairs_recomputed, flow_events=s.flow_events,
        solver_seconds=s.solver_ns * 1e-9, solver_fallbacks=s.solver_fallbacks,
        solver_rounds=s.solver_rounds, solver_work=s.solver_work,
        solver_full_work=s.solver_full_work,
        pairs_changed=s.pairs_changed)


cdef int64_t _unsent_flits(Engine self):
    cdef State* s = &self.s
    cdef int64_t total = 0
    cdef int32_t n, p, c, k
    for n in range(s.n_nodes):
        p = s.nic_qhead[n]
        while p >= 0:
            total += s.pk[p].length
            p = s.pk[p].next
    for k in range(s.n_ops):
        if s.op_kind[k] == OP_SEND and s.op_start[k] >= 0 and s.msg_bytes[k] > 0:
            total += (s.msg_bytes[k] + s.flit_bytes - 1) // s.flit_bytes
    for c in range(s.n_ch if s.ch != NULL else 0):      # (no records: nothing sent)
        if s.ch[c].kind == CH_INJECT and s.ch[c].cur_pkt >= 0:
            total += s.pk[s.ch[c].cur_pkt].length - s.ch[c].cur_seq
    return total


cdef _channel_flits(Engine self, at=None):
    cdef int32_t c
    cdef int64_t i, m
    if at is None:
        out = np.zeros(self.s.n_ch, dtype=np.int64)
        m = self.s.n_ch
    else:
        idx = np.ascontiguousarray(at, dtype=np.int32).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.s.n_ch):
            raise ValueError("channel_flits(at): a channel out of range")
        out = np.zeros(idx.size, dtype=np.int64)
        m = idx.size
    cdef const int32_t[::1] v_at = idx if at is not None and m else None
    cdef int64_t[::1] v_out = out        # (typed: a loop in C over millions of channels)
    if self.s.flow_mode:         # a group's wire bytes, shared evenly by its channels
        for i in range(m):
            c = v_at[i] if v_at is not None else <int32_t>i
            v_out[i] = <int64_t>(self.s.rs_bytes[self.s.ch_res[c]] / self.s.flit_bytes /
                                 self.s.ch_par_n[c] + 0.5)
        return out
    if self.s.ch == NULL:                # (no records: none sent)
        return out
    for i in range(m):
        c = v_at[i] if v_at is not None else <int32_t>i
        v_out[i] = self.s.ch[c].flits
    return out


cdef _channel_owed(Engine self, cycle_t t, bint start):
    """Per channel, the cycles of serialisation past cycle t of the flits it has sent: a
    channel slower than a flit per cycle is busy with a flit until its credit is back to a flit,
    at the exact (fractional) time acc_t + (den - acc) / num; 0 for full-rate channels and at
    the flow level (whose bytes never run ahead of a link's rate). With `start` (t opens a
    window), a channel whose credit came back to a flit in the cycle before t (next_ok == t)
    gives that time - t (in (-1, 0]): a flit sent at t carries the credit over, and its
    serialisation began that much before t."""
    cdef int32_t c
    cdef Chan* ch
    cdef double end
    out = np.zeros(self.s.n_ch, dtype=np.float64)
    cdef double[::1] v_out = out
    if self.s.flow_mode or self.s.ch == NULL:
        return out
    for c in range(self.s.n_ch):
        ch = &self.s.ch[c]
        if ch.full_rate or ch.flits == 0:
            continue
        end = <double>ch.acc_t + <double>(ch.den - ch.acc) / <double>ch.num
        if end > t or (start and ch.next_ok == t):
            v_out[c] = end - t
    return out


cdef _vc_flits(Engine self):
    cdef int64_t i
    out = np.zeros(self.s.n_ivc, dtype=np.int64)
    cdef int64_t[::1] v_out = out
    if self.s.ivc == NULL:             # (no VC state: the flow level, or nothing run)
        return out.reshape(self.s.n_ch, self.s.V)
    for i in range(self.s.n_ivc):
        v_out[i] = self.s.ivc[i].flits
    return out.reshape(self.s.n_ch, self.s.V)


cdef _latency_histograms(Engine self):
    cdef State* s = &self.s
    cdef int64_t n = s.hist_cap
    cdef int64_t i
    lat = np.zeros(n, dtype=np.int64)
    net = np.zeros(n, dtype=np.int64)
    for i in range(n):
        lat[i] = s.hist_lat[i]
        net[i] = s.hist_net[i]
    return lat, net


cdef _trace_results(Engine self):
    n = self.s.tr_n
    return (self._arr["tr_deliver"][:n].copy(), self._arr["tr_inject"][:n].copy(),
            self._arr["tr_hops"][:n].copy())


cdef _snapshot(Engine self):
    cdef State* s = &self.s
    cdef int32_t slot, k, m = 0
    cdef int64_t i, nbuf = <int64_t>s.n_ivc * s.D
    cdef Event* ev
    ne = s.n_events
    events = np.zeros((ne, 5), dtype=np.int64)   # cycle, channel, vc, pkt, seq
    for i in range(s.wheel_size):
        slot = (s.wheel_now + i) % s.wheel_size
        ev = s.wh[slot].ev
        for k in range(s.wh[slot].len):
            events[m, 0] = s.now + i
            events[m, 1] = ev[k].ch
            events[m, 2] = ev[k].vc if ev[k].vc >= 0 else 0    # to a NIC: any VC
            events[m, 3] = ev[k].pkt
            events[m, 4] = ev[k].seq & ~FLIT_TAIL if ev[k].seq >= 0 else ev[k].seq
            m += 1
    buf_pkt = np.zeros(nbuf, dtype=np.int32)
    buf_seq = np.zeros(nbuf, dtype=np.int32)
    for i in range(nbuf):
        buf_pkt[i] = s.buf[i].pkt
        buf_seq[i] = s.buf[i].seq & ~FLIT_TAIL
    nivc = s.n_ivc
    cols = {name: np.zeros(nivc, dtype=np.int64) for name in
            ("ivc_cnt", "ivc_state", "ivc_out_ch", "ivc_out_vc", "ivc_head",
             "ovc_owner", "ovc_credits")}
    for i in range(nivc):
        cols["ivc_cnt"][i] = s.ivc[i].cnt
        cols["ivc_state"][i] = s.ivc[i].state
        cols["ivc_out_ch"][i] = s.ivc[i].out_ch
        cols["ivc_out_vc"][i] = s.ivc[i].out_vc
        cols["ivc_head"][i] = s.ivc[i].head
        cols["ovc_owner"][i] = s.ovc[i].owner
        cols["ovc_credits"][i] = s.ovc[i].credits if s.ch[i // s.V].kind != CH_EJECT else 0
    return dict(
        vcs=s.V, buffer_flits=s.D, buf_pkt=buf_pkt, buf_seq=buf_seq, events=events[:m],
        nic_qlen=self._arr["nic_qlen"][:s.n_nodes].copy(),
        **cols)
