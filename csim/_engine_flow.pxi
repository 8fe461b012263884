# The flow level's inputs: per op its latencies and (source, destination) pair, per pair
# its route and cap, per resource its capacity (csim/_flow.pxd; an include of
# csim/_engine.pyx); and max_min_rates, the flow solver on hand-made routes.

cdef _set_flow(Engine self, int64_t n_ops, dict flow):
    """The flow level's arrays (see Engine.set_graph's `flow`), checked."""
    cdef State* s = &self.s
    cdef int32_t c, h, p, r, hmax = 1
    lat = np.asarray(flow["latency"], dtype=np.int64)
    lat_full = np.asarray(flow["latency_full"], dtype=np.int64)
    lat_whole = np.asarray(flow["latency_whole"], dtype=np.int64)
    pair = np.asarray(flow["pair"], dtype=np.int32)
    psrc = np.asarray(flow["pair_src"], dtype=np.int32)
    pdst = np.asarray(flow["pair_dst"], dtype=np.int32)
    pcap = np.asarray(flow["pair_cap"], dtype=np.int32)
    cap_bytes = np.asarray(flow["cap_bytes"], dtype=np.float64)
    cap_lanes = np.asarray(flow["cap_lanes"], dtype=np.int32)
    n_pairs = psrc.size
    if any(a.size != n_ops for a in (lat, lat_full, lat_whole, pair)):
        raise ValueError("flow: latency, latency_full, latency_whole and pair need one "
                         "entry per op")
    if pdst.size != n_pairs or pcap.size != n_pairs:
        raise ValueError("flow: pair_src, pair_dst and pair_cap differ in length")
    if cap_lanes.size != cap_bytes.size or (cap_lanes < 1).any() or \
            not (cap_bytes > 0).all():
        raise ValueError("flow: per cap resource, cap_bytes > 0 and cap_lanes >= 1")
    if n_pairs and (pcap.max() >= s.n_ch + cap_bytes.size or
                    ((pcap >= 0) & (pcap < s.n_ch)).any()):
        raise ValueError("flow: pair_cap names no cap resource")
    vc_res = flow.get("vc_res")
    vc_base = int(flow.get("vc_res_base", s.n_ch + cap_bytes.size))
    if vc_res is not None:
        vc_res = np.asarray(vc_res, dtype=np.int32)
        if vc_res.size != s.n_ch * s.n_classes or \
                ((vc_res >= 0) & ((vc_res < vc_base) |
                                  (vc_res >= s.n_ch + cap_bytes.size))).any():
            raise ValueError("flow: vc_res needs n_ch * n_classes entries, each -1 or a "
                             "resource from vc_res_base on")
    # The solver's resources are numbered densely: a channel group's is its place among the
    # groups by first channel (ch_res), then the caps and the VC classes' follow in the order
    # given (the ids given, channel ids and n_ch + k, less the lanes that are not a group's
    # first: the order, and so every tie the solver breaks by resource, is the same). A
    # cluster of 65,536 GPUs has 4.85 M channels in 0.66 M groups.
    # (in C, a lane at a time, no array per lane but ch_res: a lane's first is at or before
    # it, numbered already)
    s.ch_res = <int32_t*>_ptr(self._own("ch_res", None, np.int32, 0, s.n_ch))
    cdef int32_t n_grp = 0
    for c in range(s.n_ch):
        if s.ch_base[c] == c:
            s.ch_res[c] = n_grp
            n_grp += 1
        elif 0 <= s.ch_base[c] < c:
            s.ch_res[c] = s.ch_res[s.ch_base[c]]
        else:
            raise ValueError("ch_par_base: a channel's first lane after it, or none")
    shift = s.n_ch - n_grp
    pcap = np.where(pcap >= 0, pcap - shift, -1).astype(np.int32)
    if vc_res is not None:
        first = self._arr["ch_base"][:s.n_ch] == np.arange(s.n_ch, dtype=np.int32)
        vc_res = vc_res.reshape(s.n_ch, s.n_classes)[first].reshape(-1)
        vc_res = np.where(vc_res >= 0, vc_res - shift, -1).astype(np.int32)
        vc_base -= shift
    kind = self._arr["op_kind"][:n_ops]
    size = self._arr["op_size"][:n_ops]
    sends = np.flatnonzero((kind == OP_SEND) & (size > 0))
    if sends.size and ((pair[sends] < 0).any() or (pair[sends] >= n_pairs).any()):
        raise ValueError("flow: a send's pair is out of range")
    if sends.size and ((psrc[pair[sends]] != self._arr["op_node"][sends]).any() or
                       (pdst[pair[sends]] != self._arr["op_dst"][sends]).any()):
        raise ValueError("flow: a send's pair has other ends")
    n_res = n_grp + cap_bytes.size
    # (written in place, in C: a cluster of 65,536 GPUs has 4.85 M channels)
    rs = self._own("rs_cap", None, np.float64, 0, n_res)
    lanes = self._own("rs_lanes", None, np.int32, 0, n_res)
    s.rs_cap = <double*>_ptr(rs)
    s.rs_lanes = <int32_t*>_ptr(lanes)
    num, den = self._ch_args[2], self._ch_args[3]
    cdef const int64_t[::1] v_num = num
    cdef const int64_t[::1] v_den = den
    for c in range(s.n_ch):
        if s.ch_base[c] == c:
            r = s.ch_res[c]
            s.rs_lanes[r] = s.ch_par_n[c]
            s.rs_cap[r] = s.ch_par_n[c] * <double>v_num[c] * s.flit_bytes / v_den[c]
    rs[n_grp:n_res] = cap_bytes
    lanes[n_grp:n_res] = cap_lanes
    inj = flow.get("nic_inj_bytes")
    if inj is not None:            # NICs whose channels packets hold below their rate
        inj = np.asarray(inj, dtype=np.float64)
        if inj.size != s.n_nodes or not (inj >= 0).all():
            raise ValueError("flow: nic_inj_bytes needs one entry >= 0 per node")
        held = np.flatnonzero(inj > 0)
        held_res = self._arr["ch_res"][:s.n_ch][self._arr["nic_inj_base"][held]]
        rs[held_res] = np.minimum(rs[held_res], inj[held])
    if rs.max(initial=0) > 2.0 ** 60:       # (the solver's fixed-point sums)
        raise ValueError(f"flow: a resource of {rs.max():g} bytes per cycle; at most 2^60")
    s.rs_head = <int32_t*>_ptr(self._own("rs_head", None, np.int32, -1, n_res))
    s.rs_n = <int32_t*>_ptr(self._own("rs_n", None, np.int32, 0, n_res))
    s.rs_bytes = <double*>_ptr(self._own("rs_bytes", None, np.float64, 0, n_res))
    s.rs_dirty = <int32_t*>_ptr(self._own("rs_dirty", None, np.int32, 0, n_res))
    s.rs_isdirty = <uint8_t*>_ptr(self._own("rs_isdirty", None, np.uint8, 0, n_res))
    s.rs_queue = <int32_t*>_ptr(self._own("rs_queue", None, np.int32, 0, n_res))
    s.rq_key = <double*>_ptr(self._own("rq_key", None, np.float64, 0, n_res))
    s.rq_res = <int32_t*>_ptr(self._own("rq_res", None, np.int32, 0, n_res))
    s.op_lat = <int64_t*>_ptr(self._own("op_lat", lat, np.int64))
    s.op_lat_full = <int64_t*>_ptr(self._own("op_lat_full", lat_full, np.int64))
    s.op_lat_whole = <int64_t*>_ptr(self._own("op_lat_whole", lat_whole, np.int64))
    s.op_pair = <int32_t*>_ptr(self._own("op_pair", pair, np.int32))
    s.pr = <Pair*>_ptr(self._own("pairs", None, np.uint8, 0, n_pairs * sizeof(Pair)))
    _pairs_init(s.pr, n_pairs)
    s.comp = <int32_t*>_ptr(self._own("comp", None, np.int32, 0, n_pairs))
    s.dh_time = <cycle_t*>_ptr(self._own("dh_time", None, np.int64, 0, n_pairs))
    s.dh_pair = <int32_t*>_ptr(self._own("dh_pair", None, np.int32, 0, n_pairs))
    if vc_res is not None:
        s.vc_res = <int32_t*>_ptr(self._own("vc_res", vc_res, np.int32))
        s.vc_res_base = vc_base
    cdef const int32_t[::1] v_psrc = psrc if n_pairs else np.zeros(1, np.int32)
    cdef const int32_t[::1] v_pdst = pdst if n_pairs else np.zeros(1, np.int32)
    cdef const int32_t[::1] v_pcap = pcap if n_pairs else np.zeros(1, np.int32)
    for p in range(n_pairs):                 # the longest route: the entries' stride
        s.pr[p].src = v_psrc[p]
        s.pr[p].dst = v_pdst[p]
        s.pr[p].cap = v_pcap[p]
        if not (0 <= v_psrc[p] < s.n_nodes and 0 <= v_pdst[p] < s.n_nodes):
            raise ValueError(f"flow: pair {p}: node out of range")
        h = flow_route(s, v_psrc[p], v_pdst[p], v_pcap[p], NULL)
        if h < 0:
            raise ValueError(f"no route from node {v_psrc[p]} to node {v_pdst[p]}")
        if h > hmax:
            hmax = h
    _flow_free(s)
    _res_init(s, self._own("rs", None, np.uint8, 0, n_res * sizeof(Res) + 64), s.rs_cap, n_res)
    s.hmax = hmax
    s.n_pairs = n_pairs
    s.flow_mode = 1
    self._mode = GEN_NONE


cdef str _flow_audit(State* s):
    """What the solver keeps per resource, checked against its pairs: the fixed-point sum of
    rate x flows (exactly), the heap by rate (ordered, its top the highest rate), the list
    of the pairs whose bottleneck it is (each there once, no rate below its bound). None if
    all hold, else what does not."""
    cdef int32_t r, p, i, e, c, count
    cdef int64_t x
    cdef i128 used
    cdef double top
    for r in range(s.n_res):
        used = 0
        top = 0.0
        count = 0
        x = s.rs_head[r]
        while x >= 0:
            p = s.fe_pair[x]
            used += s.pr[p].ufx * s.pr[p].n
            if s.pr[p].urate != s.pr[p].rate or s.pr[p].ufx != _fx(s.pr[p].rate):
                return f"pair {p}: its rate is not the one its resources hold"
            if s.pr[p].rate > top:
                top = s.pr[p].rate
            if s.fe_hpos[x] >= s.rs[r].hn or s.rs[r].hp[s.fe_hpos[x]] != x or \
                    s.fe_key[x] != s.pr[p].rate:
                return f"resource {r}: entry {x} is not in its heap at its rate"
            count += 1
            x = s.fe_next[x]
        if used != s.rs[r].used:
            return f"resource {r}: sum {_unfx(s.rs[r].used)}, its pairs {_unfx(used)}"
        if count != s.rs[r].hn:
            return f"resource {r}: {s.rs[r].hn} entries in its heap, {count} on it"
        for i in range(1, s.rs[r].hn):
            if _rh_above(s, s.rs[r].hp[i], s.rs[r].hp[(i - 1) >> 1]):
                return f"resource {r}: its heap is out of order at {i}"
        if s.rs[r].top != top or (s.rs[r].hn > 0 and s.fe_key[s.rs[r].hp[0]] != top):
            return f"resource {r}: heap top {s.rs[r].top}, highest rate {top}"
        p = s.rs[r].bhead
        c = -1
        while p >= 0:
            if s.pr[p].bott != r or s.pr[p].bprev != c or s.pr[p].n == 0:
                return f"resource {r}: pair {p} is on its bottleneck list wrongly"
            if s.pr[p].rate < s.rs[r].bmin:
                return f"resource {r}: pair {p}'s rate {s.pr[p].rate} is below the bound"
            c = p
            p = s.pr[p].bnext
    for p in range(s.n_pairs):
        if s.pr[p].n > 0 and s.pr[p].bott < 0:
            return f"pair {p} has flows and no bottleneck"
    return None


def max_min_rates(route_ptr, route_res, capacity, weights=None, full=False, audit=False):
    """Max-min fair rates by the flow level's own code (csim/_flow.pxd): pair i takes the
    resources route_res[route_ptr[i]:route_ptr[i + 1]] (each at most once), resource r has
    capacity[r] > 0. weights None: one flow per pair, the rates returned. Else a (steps,
    pairs) array of flows per pair (0: none): after each step the rates are recomputed as the
    engine recomputes them (incrementally, from the pairs that changed), and returned as a
    (steps, pairs) array (0 where a pair has no flow) with the solver's counters. full: each
    step recomputes the whole components that changed instead (progressive filling from
    scratch), to compare. audit: after each step, what the solver keeps per resource is
    checked against its pairs (an AssertionError says what does not hold). For tests and for
    checking the solver by hand."""
    cdef State s
    cdef int32_t f, k, t, rlen
    cdef int32_t[::1] resv
    ptr = np.ascontiguousarray(route_ptr, dtype=np.int64)
    res = np.ascontiguousarray(route_res, dtype=np.int32)
    cap = np.ascontiguousarray(capacity, dtype=np.float64)
    n_f = ptr.size - 1
    R = cap.size
    if n_f < 0 or ptr[0] != 0 or ptr[ptr.size - 1] != res.size or (np.diff(ptr) < 1).any():
        raise ValueError("route_ptr: every flow needs at least one resource")
    if res.size and (res.min() < 0 or res.max() >= R):
        raise ValueError("route_res: resource out of range")
    if not ((cap > 0) & (cap <= 2.0 ** 60)).all():
        raise ValueError("capacity must be > 0 and at most 2^60 (bytes per cycle)")
    for f in range(n_f):
        if np.unique(res[ptr[f]:ptr[f + 1]]).size != ptr[f + 1] - ptr[f]:
            raise ValueError(f"flow {f} takes a resource twice")
    steps = np.ones((1, n_f), np.int32) if weights is None else \
        np.ascontiguousarray(weights, dtype=np.int32)
    if steps.ndim != 2 or steps.shape[1] != n_f or (steps < 0).any():
        raise ValueError("weights: a (steps, pairs) array of flows per pair, each >= 0")
    keep = dict(head=np.full(R, -1, np.int32), n=np.zeros(R, np.int32),
                dirty=np.zeros(R, np.int32), isdirty=np.zeros(R, np.uint8),
                queue=np.zeros(R, np.int32), key=np.zeros(R), rres=np.zeros(R, np.int32),
                res=np.zeros(max(R, 1) * sizeof(Res) + 64, np.uint8),
                pairs=np.zeros(max(n_f, 1) * sizeof(Pair), np.uint8),
                comp=np.zeros(max(n_f, 1), np.int32), dh_time=np.zeros(max(n_f, 1), np.int64),
                dh_pair=np.zeros(max(n_f, 1), np.int32))
    resv = res if res.size else np.zeros(1, np.int32)
    _flow_null(&s)
    s.now = 0
    s.rs_cap = <double*>_ptr(cap)
    s.rs_head = <int32_t*>_ptr(keep["head"])
    _res_init(&s, keep["res"], s.rs_cap, R)
    s.rs_n = <int32_t*>_ptr(keep["n"])
    s.rs_dirty = <int32_t*>_ptr(keep["dirty"])
    s.rs_isdirty = <uint8_t*>_ptr(keep["isdirty"])
    s.rs_queue = <int32_t*>_ptr(keep["queue"])
    s.rq_key = <double*>_ptr(keep["key"])
    s.rq_res = <int32_t*>_ptr(keep["rres"])
    s.pr = <Pair*>_ptr(keep["pairs"])
    s.vc_res = NULL
    s.vc_res_base = 0x7FFFFFFF
    s.comp = <int32_t*>_ptr(keep["comp"])
    s.dh_time = <cycle_t*>_ptr(keep["dh_time"])
    s.dh_pair = <int32_t*>_ptr(keep["dh_pair"])
    s.n_pairs = n_f
    s.hmax = max(1, int(np.diff(ptr).max(initial=1)))
    _pairs_init(s.pr, n_f)
    out = np.zeros((steps.shape[0], n_f))
    try:
        while s.fl_cap < n_f:
            if flow_grow(&s) != 0:
                raise MemoryError()
        for t in range(steps.shape[0]):
            for f in range(n_f):
                rlen = <int32_t>(ptr[f + 1] - ptr[f])
                if pair_weigh(&s, f, steps[t, f], &resv[ptr[f]], rlen) != 0:
                    raise MemoryError()
            if full:
                for f in range(s.n_pdirty):
                    s.pr[s.comp[f]].dirty = 0
                s.n_pdirty = 0
                _rates_full(&s, -1)
            else:
                flow_rates(&s)
            if audit:
                what = _flow_audit(&s)
                if what is not None:
                    raise AssertionError(f"step {t}: {what}")
            for f in range(n_f):
                out[t, f] = s.pr[f].rate if s.pr[f].n > 0 else 0.0
        if weights is None:
            return out[0]
        return out, dict(recomputations=s.recomputes, pairs_recomputed=s.pairs_recomputed,
                         fallbacks=s.solver_fallbacks, rounds=s.solver_rounds,
                         pairs_changed=s.pairs_changed, work=s.solver_work,
                         full_work=s.solver_full_work)
    finally:
        _flow_free(&s)
