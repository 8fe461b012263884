# The engine's state set up from the network arrays (pysim.engine.NetworkArrays checks
# them first): channels, routers' input VCs and allocators, NICs, the event wheel and
# the counters (an include of csim/_engine.pyx).

def _check_lengths(lengths):
    """Packets of 1 .. 2^30 - 1 flits (a flit's position and its tail mark share an int32)."""
    a = np.asarray(lengths, dtype=np.int64)
    if a.size and (a.min() < 1 or a.max() > MAX_PACKET_FLITS):
        raise ValueError(f"packet lengths must be 1 .. {MAX_PACKET_FLITS} flits")


cdef inline void* _ptr(object a):
    return cnp.PyArray_DATA(<cnp.ndarray>a)


cdef void _flow_null(State* s) noexcept:
    """The flow level's pooled arrays, before any is allocated."""
    s.flow_mode = 0
    s.fl = NULL
    s.fe_res = NULL
    s.fe_next = NULL
    s.fe_prev = NULL
    s.fe_hpos = NULL
    s.fe_key = NULL
    s.fe_anext = NULL
    s.fe_pair = NULL
    s.sl_pair = NULL
    s.fl_cap = 0
    s.fl_free = -1
    s.fl_alive = 0
    s.sl_cap = 0
    s.sl_free = -1
    s.dh_n = 0
    s.n_dirty = 0
    s.n_pdirty = 0
    s.active_entries = 0
    s.n_res = 0
    s.n_pairs = 0
    s.hmax = 1
    s.stamp = 0
    s.flows_started = s.recomputes = s.pairs_recomputed = 0
    s.flow_events = s.solver_ns = s.solver_fallbacks = 0
    s.solver_rounds = s.solver_work = s.pairs_changed = s.solver_full_work = 0


cdef void _flow_free(State* s) noexcept:
    cdef int32_t r
    free(s.fl)
    free(s.fe_res)
    free(s.fe_next)
    free(s.fe_prev)
    free(s.fe_hpos)
    free(s.fe_key)
    free(s.fe_anext)
    free(s.fe_pair)
    free(s.sl_pair)
    for r in range(s.n_res):          # (n_res is 0 until _res_init has set s.rs up)
        free(s.rs[r].hp)
    _flow_null(s)


cdef Res* _res_init(State* s, object buf, const double* cap, int32_t n_res):
    """The resources' solver state in buf (a uint8 array of n_res * sizeof(Res) + 64
    bytes, kept alive by the caller), from their capacities; s.n_res is set."""
    cdef int32_t r
    cdef Res* rs = <Res*>(<char*>_ptr(buf) + ((64 - (<intptr_t>_ptr(buf) & 63)) & 63))
    for r in range(n_res):
        rs[r].used = 0
        rs[r].cap = cap[r]
        rs[r].top = rs[r].bmin = rs[r].fixed = rs[r].left = 0.0
        rs[r].bhead = rs[r].ahead = -1
        rs[r].hn = rs[r].hcap = rs[r].unf = 0
        rs[r].mark = 0
        rs[r].hp = NULL
    s.rs = rs
    s.n_res = n_res
    return rs


cdef void _pairs_init(Pair* pr, int32_t n) noexcept:
    cdef int32_t i
    for i in range(n):
        pr[i].service = pr[i].rate = pr[i].solo = 0.0
        pr[i].t_upd = 0
        pr[i].mark = 0
        pr[i].n = pr[i].rlen = 0
        pr[i].root = pr[i].slot = pr[i].hpos = -1
        pr[i].m = 1
        pr[i].frozen = 0
        pr[i].stream = 0
        pr[i].dirty = 0
        pr[i].bott = pr[i].bnext = pr[i].bprev = -1
        pr[i].urate = pr[i].prev = 0.0
        pr[i].ufx = 0
        pr[i].queued = 0
        pr[i].vtail = 0.0


cdef _setup_vcs(Engine self):
    """The VCs' state, made once, when a flit-level run first needs it."""
    cdef State* s = &self.s
    _setup_chans(self)
    if s.ivc != NULL:
        return
    ch_src, ch_dst, ch_kind, out_idx, r_in_ptr, r_mw, Vp = self._vc_args
    cdef int64_t C = s.n_ch, V = s.V, D = s.D, i
    n = s.n_nodes
    # a router's outputs, and its input ports' channels (net and inject) in channel order
    r_nout = np.zeros(n, dtype=np.int32)
    np.maximum.at(r_nout, ch_src[ch_kind != CH_INJECT], out_idx[ch_kind != CH_INJECT] + 1)
    s.r_nout = <int32_t*>_ptr(self._own("r_nout", np.maximum(r_nout, 1), np.int32))
    order = np.flatnonzero(ch_kind != CH_EJECT)
    order = order[np.argsort(ch_dst[order], kind="stable")]
    local = np.full(C, -1, dtype=np.int32)
    local[order] = np.arange(order.size, dtype=np.int32) - r_in_ptr[ch_dst[order]]
    s.r_in_ch = <int32_t*>_ptr(self._own("r_in_ch", order, np.int32))
    s.inj_hop = <int32_t*>_ptr(self._own("inj_hop", None, np.int32, -1, C))
    cdef const int32_t[::1] v_dst = ch_dst
    cdef const int8_t[::1] v_kind = ch_kind
    nivc = C * V
    s.buf = <Flit*>_ptr(self._own("buf", None, np.uint8, 0, nivc * D * sizeof(Flit)))
    assert sizeof(IVC) == 64 and sizeof(Chan) == 128   # (cache lines; see _types.pxd)
    s.ivc = <IVC*>_ptr(self._own("ivc", None, np.uint8, 0, nivc * sizeof(IVC)))
    s.ovc = <OVC*>_ptr(self._own("ovc", None, np.uint8, 0, nivc * sizeof(OVC)))
    cdef int64_t bit, nv = nivc, cv
    cdef const int32_t[::1] v_local = local
    cdef const int32_t[::1] v_mw = r_mw
    cdef int32_t c_D = D, c_Vp = Vp, c_V = V
    for i in range(nv):
        cv = i // c_V
        s.ivc[i].cnt = 0
        s.ivc[i].head = 0
        s.ivc[i].out_ch = -1
        s.ivc[i].va_in_ptr = 0
        s.ivc[i].flits = 0
        s.ivc[i].out_vc = -1
        s.ivc[i].out_ov = -1
        s.ivc[i].mw = -1
        s.ivc[i].mb = 0
        s.ivc[i].r = v_dst[cv]
        s.ivc[i].c = cv
        s.ivc[i].v = i - cv * c_V
        if v_kind[cv] != CH_EJECT:
            bit = v_local[cv] * c_Vp + i - cv * c_V
            s.ivc[i].mw = v_mw[v_dst[cv]] + bit // 64
            s.ivc[i].mb = bit % 64
        s.ivc[i].lo = 0
        s.ivc[i].hi = 0
        s.ivc[i].state = VC_IDLE
        s.ivc[i].ready = 0
        s.ivc[i].free_t = 0
        s.ovc[i].owner = OVC_FREE
        s.ovc[i].credits = EJECT_CREDITS if v_kind[cv] == CH_EJECT else c_D
        s.ovc[i].va_ptr = 0
        s.ovc[i].best = -1
    s.va_list = <int32_t*>_ptr(self._own("va_list", None, np.int32, -1, nivc))
    s.va_pos = <int32_t*>_ptr(self._own("va_pos", None, np.int32, -1, nivc))
    s.va_best_dist = <int32_t*>_ptr(self._own("va_best_dist", None, np.int32, 0, nivc))
    s.tm_next = <int32_t*>_ptr(self._own("tm_next", None, np.int32, -1, nivc))
    s.touched = <int32_t*>_ptr(self._own("touched", None, np.int32, 0, max(nivc, C)))



cdef _setup_chans(Engine self):
    """The channels' records (State.ch), made once, when a flit-level run first needs them."""
    cdef State* s = &self.s
    if s.ch != NULL:
        return
    ch_src, lat, num, den, out_idx, inj_delay = self._ch_args
    cdef int64_t C = s.n_ch
    # (typed views: the loops below run in C, a channel at a time -- millions on a cluster
    # of 16,384 GPUs)
    cdef const int32_t[::1] v_src = ch_src
    cdef const int32_t[::1] v_dst = self._arr["ch_dst"]
    cdef const int8_t[::1] v_kind = self._arr["ch_kind"]
    cdef const int32_t[::1] v_lat = lat
    cdef const int64_t[::1] v_num = num
    cdef const int64_t[::1] v_den = den
    cdef const int32_t[::1] v_group = self._arr["ch_group"]
    cdef const int32_t[::1] v_order = self._arr["ch_order"]
    cdef const int32_t[::1] v_par_n = self._arr["ch_par_n"]
    cdef const int32_t[::1] v_out_idx = out_idx
    cdef int32_t c_inj_delay = inj_delay
    cdef int64_t i
    s.ch = <Chan*>_ptr(self._own("ch", None, np.uint8, 0, C * sizeof(Chan)))
    for i in range(C):
        s.ch[i].src = v_src[i]
        s.ch[i].dst = v_dst[i]
        s.ch[i].kind = v_kind[i]
        s.ch[i].fdelay = v_lat[i] + (c_inj_delay if v_kind[i] == CH_INJECT else
                                   s.sa_delay + s.st_delay)
        s.ch[i].cdelay = v_lat[i] + s.sa_delay
        s.ch[i].num = v_num[i]
        s.ch[i].den = v_den[i]
        s.ch[i].acc = v_den[i]
        s.ch[i].acc_t = 0
        s.ch[i].next_ok = 0
        s.ch[i].full_rate = 1 if v_num[i] >= v_den[i] else 0
        s.ch[i].gap_k = 1
        s.ch[i].gap_thr = 0
        if v_num[i] < v_den[i]:          # k = ceil((den - acc) / num) for acc in [0, num)
            s.ch[i].gap_k = (v_den[i] + v_num[i] - 1) // v_num[i]     # (ceil; both > 0)
            s.ch[i].gap_thr = v_den[i] - (s.ch[i].gap_k - 1) * v_num[i]
        s.ch[i].group = v_group[i]
        s.ch[i].order = v_order[i]
        s.ch[i].flits = 0
        s.ch[i].sa_in_ptr = 0
        s.ch[i].sa_in_optr = 0
        s.ch[i].out_idx = v_out_idx[i] if v_kind[i] != CH_INJECT else 0
        s.ch[i].sa_out_ptr = 0
        s.ch[i].out_best = -1
        s.ch[i].out_best_dist = 0
        s.ch[i].par_n = v_par_n[i]
        s.ch[i].cur_pkt = -1
        s.ch[i].cur_seq = 0
        s.ch[i].cur_vc = 0
        s.ch[i].vc_rr = 0


cdef _setup_network(Engine self, dict net):
    """Engine.__init__: every State field from `net` (see Engine's docstring)."""
    cdef State* s = &self.s
    n = int(net["n_nodes"])
    V = int(net["vcs"])
    D = int(net["buffer_flits"])
    ch_src = np.asarray(net["ch_src"], dtype=np.int32)
    ch_dst = np.asarray(net["ch_dst"], dtype=np.int32)
    ch_kind = np.asarray(net["ch_kind"], dtype=np.int8)
    C = ch_src.size
    s.n_nodes = n
    s.n_ch = C
    s.V = V
    s.D = D
    s.n_ivc = C * V
    s.routing_delay = int(net["routing_delay"])
    s.va_delay = int(net["vc_alloc_delay"])
    s.sa_delay = int(net["sw_alloc_delay"])
    s.st_delay = int(net["st_delay"])
    s.wait_tail = 1 if net["wait_for_tail_credit"] else 0
    s.va_arbiter = int(net["va_arbiter"])
    s.sa_arbiter = int(net["sa_arbiter"])
    if s.va_arbiter not in (VA_ROUND_ROBIN, VA_OWN_INDEX) or \
            s.sa_arbiter not in (SA_OUTPUTS, SA_VCS):
        raise ValueError("va_arbiter / sa_arbiter: no such arbiter (see csim.limits)")
    inj_delay = int(net["injection_delay"])
    if inj_delay < 0:
        raise ValueError("injection_delay must be >= 0")
    s.n_classes = int(net["n_classes"])
    if not 1 <= s.n_classes <= V:
        raise ValueError("need 1 <= n_classes <= vcs")
    k = np.arange(s.n_classes + 1) * V // s.n_classes
    s.class_lo = <int32_t*>_ptr(self._own("class_lo", k[:s.n_classes], np.int32))
    s.class_hi = <int32_t*>_ptr(self._own("class_hi", k[1:], np.int32))
    pos = net["node_pos"]
    pos = np.zeros((n, 0), np.int32) if pos is None else np.asarray(pos, np.int32)
    if pos.ndim != 2 or pos.shape[0] != n:
        raise ValueError("node_pos: one row of positions per node")
    s.pos_groups = pos.shape[1]
    s.node_pos = <int32_t*>_ptr(self._own("node_pos", pos.reshape(-1), np.int32))
    s.entry_cls = 1 if net["entry_class"] else 0
    if s.entry_cls and not s.pos_groups:
        raise ValueError("entry classes need node positions")
    s.tie_k = NULL
    s.ch_rev = NULL
    s.tie_seed = <uint64_t>int(net["tie_seed"])
    if net["tie_k"] is not None:
        tk = np.asarray(net["tie_k"], np.int32)
        if not s.pos_groups or tk.size != s.pos_groups:
            raise ValueError("tie_k: one entry per group with node positions")
        s.tie_k = <int32_t*>_ptr(self._own("tie_k", tk, np.int32))
        s.ch_rev = <int32_t*>_ptr(self._own("ch_rev", net["ch_rev"], np.int32))
    s.watchdog_cycles = int(net["watchdog_cycles"])
    s.max_packets = int(net["max_packets"])
    s.now = 0

    lat = np.asarray(net["ch_lat_cycles"], dtype=np.int32)
    num = np.asarray(net["ch_num"], dtype=np.int64)
    den = np.asarray(net["ch_den"], dtype=np.int64)
    group = np.asarray(net["ch_group"], dtype=np.int32)
    if s.pos_groups and np.any(group[ch_kind == CH_NET] >= s.pos_groups):
        raise ValueError("a channel's group has no column in node_pos")
    order_ = np.asarray(net["ch_order"], dtype=np.int32)
    par_n = np.asarray(net["ch_par_n"], dtype=np.int32)
    out_idx = np.asarray(net["ch_out_idx"], dtype=np.int32)
    if out_idx.size != C or (C and out_idx.min() < 0):
        raise ValueError("ch_out_idx: one index >= 0 per channel")
    # (a router's outputs (r_nout) and its input ports' channels (r_in_ch) are the flit
    # level's, made with its VCs: _setup_vcs)
    s.r_nout = NULL
    s.r_in_ch = NULL

    # router input ports: channels that end at a router (net and inject), in channel order
    counts = np.bincount(ch_dst[ch_kind != CH_EJECT], minlength=n)
    r_in_ptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=r_in_ptr[1:])
    s.r_in_ptr = <int32_t*>_ptr(self._own("r_in_ptr", r_in_ptr, np.int32))
    s.r_nbuf = <int32_t*>_ptr(self._own("r_nbuf", None, np.int32, 0, n))
    if not 1 <= V <= MAX_VCS:
        raise ValueError(f"vcs must be 1 .. {MAX_VCS}")
    Vp = 1
    while Vp < V:
        Vp *= 2
    s.Vp = Vp
    s.vshift = Vp.bit_length() - 1
    s.vpmask = (1 << Vp) - 1 if Vp < 64 else 0xFFFFFFFFFFFFFFFF
    r_mw = np.zeros(n + 1, dtype=np.int32)
    np.cumsum((counts * Vp + 63) // 64, out=r_mw[1:])
    s.r_mw = <int32_t*>_ptr(self._own("r_mw", r_mw, np.int32))
    s.sa_mask = <uint64_t*>_ptr(self._own("sa_mask", None, np.uint64, 0, max(int(r_mw[n]), 1)))
    s.r_va_wait = <int32_t*>_ptr(self._own("r_va_wait", None, np.int32, 0, n))
    s.r_wake = <cycle_t*>_ptr(self._own("r_wake", None, np.int64, 0, n))
    s.act_r_words = (n + 63) // 64
    s.act_r = <uint64_t*>_ptr(self._own("act_r", None, np.uint64, 0, max(s.act_r_words, 1)))
    s.va_r = <uint64_t*>_ptr(self._own("va_r", None, np.uint64, 0, max(s.act_r_words, 1)))
    s.r_va_wake = <cycle_t*>_ptr(self._own("r_va_wake", None, np.int64, NEVER_CYCLE, n))
    if net.get("route") is not None:     # a rule (no table of every pair)
        rule = net["route"]
        if not isinstance(rule, RouteRule) or rule.n != n:
            raise ValueError("route must be a RouteRule of n_nodes nodes")
    else:                                 # the table, kept as given where it can be
        rt = np.asarray(net["rt"], dtype=np.int32).reshape(-1)
        if rt.size != n * n:
            raise ValueError("rt must have n_nodes * n_nodes entries")
        rule = RouteRule({"kind": "table", "n": n, "tab": rt})
    self._keep.append(rule)
    s.rt = _routes_of(rule)
    s.nbuf_total = 0
    s.ch_base = <int32_t*>_ptr(self._own("ch_base", net.get("ch_par_base", np.arange(C)),
                                         np.int32, share=True))
    s.ch_res = NULL
    s.vc_res = NULL
    s.vc_res_base = 0x7FFFFFFF

    # the channels' records (128 bytes each: what switch allocation, links and NICs keep per
    # channel) are made when a flit-level run first needs them (_setup_chans): the flow level
    # reads a channel's kind, ends, VC-class group and order and lanes only, from these
    # columns (4.85 M channels on a cluster of 65,536 GPUs: 620 MB of records)
    s.ch = NULL
    s.ch_kind = <int8_t*>_ptr(self._own("ch_kind", ch_kind, np.int8, share=True))
    s.ch_dst = <int32_t*>_ptr(self._own("ch_dst", ch_dst, np.int32, share=True))
    s.ch_group = <int32_t*>_ptr(self._own("ch_group", group, np.int32, share=True))
    s.ch_order = <int32_t*>_ptr(self._own("ch_order", order_, np.int32, share=True))
    s.ch_par_n = <int32_t*>_ptr(self._own("ch_par_n", par_n, np.int32, share=True))
    self._ch_args = (ch_src, lat, num, den, out_idx, inj_delay)

    # the VCs' state (buffers, input and output VCs, VC allocation's lists, timers: a few
    # hundred bytes a channel) is made when a flit-level run first needs it (_setup_vcs): the
    # flow level has none
    s.buf = NULL
    s.ivc = NULL
    s.ovc = NULL
    s.va_list = NULL
    s.va_pos = NULL
    s.va_best_dist = NULL
    s.tm_next = NULL
    s.touched = NULL
    self._vc_args = (ch_src, ch_dst, ch_kind, out_idx, r_in_ptr, r_mw, Vp)
    s.tm_size = 1
    while s.tm_size <= max(s.routing_delay + 1, s.va_delay):
        s.tm_size *= 2
    s.tm_va = <int32_t*>_ptr(self._own("tm_va", None, np.int32, -1, s.tm_size))
    s.tm_sa = <int32_t*>_ptr(self._own("tm_sa", None, np.int32, -1, s.tm_size))

    # the wheel spans the longest delay an event can be scheduled with
    maxdelay = int(lat.max(initial=1)) + max(s.sa_delay + s.st_delay, inj_delay) + 1
    s.wheel_size = 1
    while s.wheel_size <= maxdelay:
        s.wheel_size *= 2
    s.wheel_now = 0
    s.wh = <Slot*>calloc(s.wheel_size, sizeof(Slot))
    s.n_events = 0
    if s.wh == NULL:
        raise MemoryError()
    s.pk_cap = 0
    s.pk_free = -1
    s.pk_alive = 0

    ep_node = np.asarray(net["ep_node"], dtype=np.int32)
    s.n_ep = ep_node.size
    s.ep_node = <int32_t*>_ptr(self._own("ep_node", ep_node, np.int32))
    s.nic_inj_base = <int32_t*>_ptr(self._own("nic_inj_base", net["nic_inj_base"], np.int32))
    s.nic_inj_n = <int32_t*>_ptr(self._own("nic_inj_n", net["nic_inj_n"], np.int32))
    s.nic_qhead = <int32_t*>_ptr(self._own("nic_qhead", None, np.int32, -1, n))
    s.nic_qtail = <int32_t*>_ptr(self._own("nic_qtail", None, np.int32, -1, n))
    s.nic_qlen = <int32_t*>_ptr(self._own("nic_qlen", None, np.int32, 0, n))
    s.nic_sending = <int32_t*>_ptr(self._own("nic_sending", None, np.int32, 0, n))
    s.act_n = <int32_t*>_ptr(self._own("act_n", None, np.int32, -1, n))
    s.nic_msg_cur = <int32_t*>_ptr(self._own("nic_msg_cur", None, np.int32, -1, n))
    s.nic_msg_prev = <int32_t*>_ptr(self._own("nic_msg_prev", None, np.int32, -1, n))
    s.nic_cut_blocked = <uint8_t*>_ptr(self._own("nic_cut_blocked", None, np.uint8, 0, n))
    s.act_n_pos = <int32_t*>_ptr(self._own("act_n_pos", None, np.int32, -1, n))
    s.inj_hop = NULL                  # (per channel: the flit level's, _setup_vcs)
    s.nic_per_link = 0
    s.nic_busy = 0

    s.gen_mode = GEN_NONE
    s.gen_stop = NEVER
    s.n_ops = 0
    s.ops_done = 0
    s.oh_n = 0
    s.uh_n = 0
    s.op_done_n = 0
    s.n_hot = 0
    s.n_sizes = 0
    s.hp_n = 0
    s.tr_n = 0
    s.tr_pos = 0
    s.tr_deliver = NULL
    s.tr_inject = NULL
    s.tr_hops = NULL
    s.meas_start = 0
    s.meas_end = NEVER
    s.meas_created = s.meas_done = s.meas_created_flits = 0
    s.win_ejected_flits = 0
    s.occ_sum = 0.0
    s.sum_lat = s.sum_netlat = s.sum_hops = s.sum_lat_sq = 0.0
    s.hist_cap = 0
    s.max_lat = s.max_netlat = 0
    s.flits_created = s.flits_injected = s.flits_ejected = 0
    s.packets_created = s.packets_done = s.flit_hops = 0
    s.bad_eject = s.buf_overflow = s.bad_front = s.bad_class = 0
    s.last_progress = 0
    s.skipped = 0
    s.deadlock_t = -1
    rng_seed(s.rng, 0)
