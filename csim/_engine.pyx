# The cycle engine. Owns the state arrays (numpy, kept alive here) and the pooled C arrays;
# run() steps cycles without the GIL and touches no Python object.
cimport numpy as cnp
import numpy as np
from cpython.exc cimport PyErr_CheckSignals
from libc.stdlib cimport calloc, free
from libc.math cimport INFINITY, fabs
from posix.time cimport clock_gettime, timespec, CLOCK_THREAD_CPUTIME_ID
from time import perf_counter
from csim._types cimport *
from csim._rng cimport rng_seed
from csim._link cimport packet_free
from csim._nic cimport generate, nic_inject, nic_receive, next_generation, start_synthetic
from csim._router cimport buffer_write, vc_allocate, sw_allocate, va_join, sa_join
from csim._dag cimport start_op, finish_op, ops_due, next_op_event
from csim._flow cimport flow_rates, flow_next, flow_drains, flow_route, flow_grow, slot_alloc, \
    pair_link

cnp.import_array()

cdef extern from *:
    const int CSIM_DEBUG_FLAG "CSIM_DEBUG"

BUILD = {"debug": bool(CSIM_DEBUG_FLAG), "cython_directives": "boundscheck=%s" % bool(CSIM_DEBUG_FLAG)}

NEVER_CYCLE = 0x3FFFFFFFFFFFFFFF
from csim.limits import MAX_PACKET_FLITS, MAX_VCS    # checked against the compiled constants
if MAX_PACKET_FLITS != FLIT_TAIL - 1:
    raise ImportError(f"csim.limits.MAX_PACKET_FLITS = {MAX_PACKET_FLITS}, but csim._engine was "
                      f"compiled with FLIT_TAIL - 1 = {FLIT_TAIL - 1}: rebuild the extension")
if MAX_VCS != 8 * sizeof(uint64_t):
    raise ImportError(f"csim.limits.MAX_VCS = {MAX_VCS}: a port's VCs are the bits of one "
                      f"64-bit mask word")
from csim import limits as _limits
if (_limits.OP_UNHOLD, _limits.OP_ROOF_MEM, _limits.OP_HOLD, _limits.N_UNITS) != \
        (OP_UNHOLD, OP_ROOF_MEM, OP_HOLD, N_UNITS):
    raise ImportError("csim.limits' op kinds or unit count differ from those csim._engine was "
                      "compiled with: rebuild the extension")
STATUS = {ST_UNTIL: "until", ST_DONE: "done", ST_DEADLOCK: "deadlock",
          ST_BACKLOG: "backlog", ST_NOMEM: "nomem", ST_PROTOCOL: "protocol"}
STOP = {"none": STOP_NONE, "measured": STOP_MEASURED, "all": STOP_ALL}


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


cdef int _run(State* s, cycle_t until, int stop) noexcept nogil:
    cdef cycle_t t
    cdef int64_t i, k
    cdef int32_t r, w
    cdef uint64_t m
    while s.now < until:
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
                if not s.sa_by_vc:
                    if unlikely(sw_allocate(s, r, 0) != 0):
                        return ST_NOMEM
                elif unlikely(sw_allocate(s, r, 1) != 0):
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


cdef int _run_flow(State* s, cycle_t until) noexcept nogil:
    """The flow level's loop: from event to event (an op finishing, a flow's last byte
    carried), recomputing rates where flows started or ended, until `until` (exclusive) or
    every op has finished."""
    cdef cycle_t t
    cdef timespec a, b
    while True:
        if s.n_dirty:                    # (the solver's CPU time, where it has work)
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
    s.sl_pair = NULL
    s.fl_cap = 0
    s.fl_free = -1
    s.fl_alive = 0
    s.sl_cap = 0
    s.sl_free = -1
    s.dh_n = 0
    s.n_dirty = 0
    s.n_res = 0
    s.n_pairs = 0
    s.hmax = 1
    s.stamp = 0
    s.flows_started = s.recomputes = s.pairs_recomputed = 0
    s.flow_events = s.solver_ns = 0


cdef void _flow_free(State* s) noexcept:
    free(s.fl)
    free(s.fe_res)
    free(s.fe_next)
    free(s.fe_prev)
    free(s.sl_pair)
    _flow_null(s)


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


cdef class Engine:
    """One simulated network. Build it with the arrays pysim.network compiles.

    Parameters (all in a dict `net`): n_nodes, vcs, buffer_flits, routing_delay,
    vc_alloc_delay, sw_alloc_delay, st_delay, injection_delay (a NIC's choice of a flit to
    its entering the injection channel), wait_for_tail_credit, n_classes,
    watchdog_cycles, max_packets, and per channel ch_src, ch_dst, ch_kind, ch_lat_cycles,
    ch_num, ch_den (flit serialisation as integer credit earned per cycle / cost per flit),
    ch_group, ch_order (VC classes, see _router.route), ch_out_idx (a channel's index among
    its router's outputs: the switch allocator's round-robin order over them), va_own_index and
    sa_by_vc (the allocators' input arbiters, see _router), node_pos (None, or per node its
    position in each VC-class group), entry_class, tie_k, ch_rev and tie_seed (see
    _router.route and State); rt (n_nodes * n_nodes output channel per (node, destination));
    ep_node (endpoint index -> node), nic_inj_base and nic_inj_n (node -> its injection
    channels, contiguous ids), ch_par_n (a parallel group's members have consecutive ids, and
    rt names the first).
    """
    cdef State s
    cdef list _keep
    cdef dict _arr
    cdef int _mode

    def __cinit__(self):
        self.s.wh = NULL
        self.s.wheel_size = 0
        self.s.pk = NULL
        self.s.hist_lat = NULL
        self.s.hist_net = NULL
        _flow_null(&self.s)

    def __dealloc__(self):
        cdef int32_t i
        if self.s.wh != NULL:
            for i in range(self.s.wheel_size):
                free(self.s.wh[i].ev)
            free(self.s.wh)
        free(self.s.pk)
        free(self.s.hist_lat)
        free(self.s.hist_net)
        _flow_free(&self.s)

    def _own(self, name, values, dtype, fill=None, size=None):
        """Keep a contiguous numpy array alive for the engine's lifetime; return it. Its data
        starts on a 64-byte boundary, so records of 64 and 128 bytes (IVC, Chan) each sit in
        whole cache lines whatever the allocator returns (numpy's arrays sometimes start 16
        bytes past one)."""
        if values is None:
            a = np.full(max(int(size), 1), fill, dtype=dtype)
        else:
            a = np.ascontiguousarray(values, dtype=dtype)
            if a.size == 0:
                a = np.zeros(1, dtype=dtype)
        raw = np.empty(a.nbytes + 64, dtype=np.uint8)
        off = -raw.ctypes.data % 64
        aligned = raw[off:off + a.nbytes].view(a.dtype)
        aligned[...] = a.reshape(-1)
        a = aligned
        self._keep.append(a)
        self._arr[name] = a
        return a

    def __init__(self, dict net):
        cdef State* s = &self.s
        self._keep = []
        self._arr = {}
        self._mode = GEN_NONE
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
        s.va_own_index = 1 if net["va_own_index"] else 0
        s.sa_by_vc = 1 if net["sa_by_vc"] else 0
        inj_delay = int(net["injection_delay"])
        if inj_delay < 0:
            raise ValueError("injection_delay must be >= 0")
        s.n_classes = int(net["n_classes"])
        if not 1 <= s.n_classes <= V:
            raise ValueError("need 1 <= n_classes <= vcs")
        k = np.arange(s.n_classes + 1) * V // s.n_classes
        s.class_lo = <int32_t*>_ptr(self._own("class_lo", k[:-1], np.int32))
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
        r_nout = np.zeros(n, dtype=np.int32)
        np.maximum.at(r_nout, ch_src[ch_kind != CH_INJECT], out_idx[ch_kind != CH_INJECT] + 1)
        s.r_nout = <int32_t*>_ptr(self._own("r_nout", np.maximum(r_nout, 1), np.int32))

        # router input ports: channels that end at a router (net and inject), in channel order
        has_buf = ch_kind != CH_EJECT
        order = np.flatnonzero(has_buf)
        order = order[np.argsort(ch_dst[order], kind="stable")]
        counts = np.bincount(ch_dst[order], minlength=n)
        r_in_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=r_in_ptr[1:])
        local = np.full(C, -1, dtype=np.int32)
        local[order] = np.arange(order.size, dtype=np.int32) - r_in_ptr[ch_dst[order]]
        s.r_in_ptr = <int32_t*>_ptr(self._own("r_in_ptr", r_in_ptr, np.int32))
        s.r_in_ch = <int32_t*>_ptr(self._own("r_in_ch", order, np.int32))
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
        s.va_list = <int32_t*>_ptr(self._own("va_list", None, np.int32, -1, C * V))
        s.va_pos = <int32_t*>_ptr(self._own("va_pos", None, np.int32, -1, C * V))
        s.act_r_words = (n + 63) // 64
        s.act_r = <uint64_t*>_ptr(self._own("act_r", None, np.uint64, 0, max(s.act_r_words, 1)))
        s.va_r = <uint64_t*>_ptr(self._own("va_r", None, np.uint64, 0, max(s.act_r_words, 1)))
        s.r_va_wake = <cycle_t*>_ptr(self._own("r_va_wake", None, np.int64, NEVER_CYCLE, n))
        rt = np.asarray(net["rt"], dtype=np.int32).reshape(-1)
        if rt.size != n * n:
            raise ValueError("rt must have n_nodes * n_nodes entries")
        s.rt = <int32_t*>_ptr(self._own("rt", rt, np.int32))
        s.nbuf_total = 0
        s.ch_base = <int32_t*>_ptr(self._own("ch_base", net.get("ch_par_base", np.arange(C)),
                                             np.int32))
        s.vc_res = NULL
        s.vc_res_base = 0x7FFFFFFF

        cdef int64_t i
        s.ch = <Chan*>_ptr(self._own("ch", None, np.uint8, 0, C * sizeof(Chan)))
        for i in range(C):
            s.ch[i].src = ch_src[i]
            s.ch[i].dst = ch_dst[i]
            s.ch[i].kind = ch_kind[i]
            s.ch[i].fdelay = lat[i] + (inj_delay if ch_kind[i] == CH_INJECT else
                                       s.sa_delay + s.st_delay)
            s.ch[i].cdelay = lat[i] + s.sa_delay
            s.ch[i].num = num[i]
            s.ch[i].den = den[i]
            s.ch[i].acc = den[i]
            s.ch[i].acc_t = 0
            s.ch[i].next_ok = 0
            s.ch[i].full_rate = 1 if num[i] >= den[i] else 0
            s.ch[i].gap_k = 1
            s.ch[i].gap_thr = 0
            if num[i] < den[i]:          # k = ceil((den - acc) / num) for acc in [0, num)
                s.ch[i].gap_k = -(-den[i] // num[i])
                s.ch[i].gap_thr = den[i] - (s.ch[i].gap_k - 1) * num[i]
            s.ch[i].group = group[i]
            s.ch[i].order = order_[i]
            s.ch[i].flits = 0
            s.ch[i].sa_in_ptr = 0
            s.ch[i].sa_in_optr = 0
            s.ch[i].out_idx = out_idx[i] if ch_kind[i] != CH_INJECT else 0
            s.ch[i].sa_out_ptr = 0
            s.ch[i].out_best = -1
            s.ch[i].out_best_dist = 0
            s.ch[i].par_n = par_n[i]
            s.ch[i].cur_pkt = -1
            s.ch[i].cur_seq = 0
            s.ch[i].cur_vc = 0
            s.ch[i].vc_rr = 0

        nivc = C * V
        s.buf = <Flit*>_ptr(self._own("buf", None, np.uint8, 0, nivc * D * sizeof(Flit)))
        assert sizeof(IVC) == 64 and sizeof(Chan) == 128   # (cache lines; see _types.pxd)
        s.ivc = <IVC*>_ptr(self._own("ivc", None, np.uint8, 0, nivc * sizeof(IVC)))
        s.ovc = <OVC*>_ptr(self._own("ovc", None, np.uint8, 0, nivc * sizeof(OVC)))
        cdef int64_t bit
        for i in range(nivc):
            s.ivc[i].cnt = 0
            s.ivc[i].head = 0
            s.ivc[i].out_ch = -1
            s.ivc[i].va_in_ptr = 0
            s.ivc[i].flits = 0
            s.ivc[i].out_vc = -1
            s.ivc[i].out_ov = -1
            s.ivc[i].mw = -1
            s.ivc[i].mb = 0
            s.ivc[i].r = ch_dst[i // V]
            s.ivc[i].c = i // V
            s.ivc[i].v = i % V
            if ch_kind[i // V] != CH_EJECT:
                bit = local[i // V] * Vp + i % V
                s.ivc[i].mw = r_mw[ch_dst[i // V]] + bit // 64
                s.ivc[i].mb = bit % 64
            s.ivc[i].lo = 0
            s.ivc[i].hi = 0
            s.ivc[i].state = VC_IDLE
            s.ivc[i].ready = 0
            s.ivc[i].free_t = 0
            s.ovc[i].owner = OVC_FREE
            s.ovc[i].credits = EJECT_CREDITS if ch_kind[i // V] == CH_EJECT else D
            s.ovc[i].va_ptr = 0
            s.ovc[i].best = -1
        s.va_best_dist = <int32_t*>_ptr(self._own("va_best_dist", None, np.int32, 0, nivc))
        # timers span the longest pipeline delay a head can wait on
        s.tm_size = 1
        while s.tm_size <= max(s.routing_delay + 1, s.va_delay):
            s.tm_size *= 2
        s.tm_va = <int32_t*>_ptr(self._own("tm_va", None, np.int32, -1, s.tm_size))
        s.tm_sa = <int32_t*>_ptr(self._own("tm_sa", None, np.int32, -1, s.tm_size))
        s.tm_next = <int32_t*>_ptr(self._own("tm_next", None, np.int32, -1, nivc))
        s.touched = <int32_t*>_ptr(self._own("touched", None, np.int32, 0, max(nivc, C)))

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

    # ------------------------------------------------------------------ workloads

    def set_synthetic(self, *, uint64_t seed, str process, double p_inject, double p_on,
                      double q_on_end, double q_off_end, double duty, str pattern,
                      bint include_self, perm, hot, double hot_frac, sizes, size_cdf,
                      cycle_t start=0, stop=None):
        """Synthetic injection: per-endpoint Bernoulli or on/off arrivals, destinations drawn
        from a permutation or uniformly (optionally with a hotspot mixture)."""
        cdef State* s = &self.s
        s.gen_mode = GEN_SYNTHETIC
        self._mode = GEN_SYNTHETIC
        rng_seed(s.rng, seed)
        s.proc = PROC_ONOFF if process == "onoff" else PROC_BERNOULLI
        s.p_inject = p_inject
        s.p_on = p_on
        s.q_on_end = q_on_end
        s.q_off_end = q_off_end
        s.duty = duty
        s.pat_mode = PAT_PERM if pattern == "perm" else PAT_UNIFORM
        s.include_self = include_self
        s.perm = <int32_t*>_ptr(self._own("perm", perm, np.int32))
        hot_a = self._own("hot", hot, np.int32)
        s.hot = <int32_t*>_ptr(hot_a)
        s.n_hot = len(hot)
        s.hot_frac = hot_frac
        _check_lengths(sizes)
        sz = self._own("size_val", sizes, np.int32)
        s.size_val = <int32_t*>_ptr(sz)
        s.size_cdf = <double*>_ptr(self._own("size_cdf", size_cdf, np.float64))
        s.n_sizes = len(sizes)
        s.gen_stop = NEVER if stop is None else int(stop)
        s.hp_time = <cycle_t*>_ptr(self._own("hp_time", None, np.int64, 0, s.n_ep))
        s.hp_ep = <int32_t*>_ptr(self._own("hp_ep", None, np.int32, 0, s.n_ep))
        s.on_end = <cycle_t*>_ptr(self._own("on_end", None, np.int64, 0, s.n_ep))
        start_synthetic(s, start)

    def set_trace(self, times, src, dst, lengths):
        """Inject an explicit list of packets (creation cycle, source node, destination node,
        length in flits), sorted by creation cycle. Delivery cycles are recorded per packet."""
        cdef State* s = &self.s
        t = np.asarray(times, dtype=np.int64)
        if t.size and np.any(np.diff(t) < 0):
            raise ValueError("trace times must be sorted")
        _check_lengths(lengths)
        if t.size >= 2 ** 31:
            raise ValueError("a trace holds at most 2^31 - 1 packets")
        s.gen_mode = GEN_TRACE
        self._mode = GEN_TRACE
        s.tr_n = t.size
        s.tr_pos = 0
        s.tr_time = <cycle_t*>_ptr(self._own("tr_time", t, np.int64))
        s.tr_src = <int32_t*>_ptr(self._own("tr_src", src, np.int32))
        s.tr_dst = <int32_t*>_ptr(self._own("tr_dst", dst, np.int32))
        s.tr_len = <int32_t*>_ptr(self._own("tr_len", lengths, np.int32))
        s.tr_deliver = <cycle_t*>_ptr(self._own("tr_deliver", None, np.int64, -1, t.size))
        s.tr_inject = <cycle_t*>_ptr(self._own("tr_inject", None, np.int64, -1, t.size))
        s.tr_hops = <int32_t*>_ptr(self._own("tr_hops", None, np.int32, -1, t.size))

    def set_graph(self, kind, node, dst, size, deps, succ_ptr, succ, int packet_flits,
                  int flit_bytes, unit=None, flow=None, sms=None, comm_hbm=None,
                  share=None):
        """An op graph (see csim/_dag.pxd): per op its kind (0 compute, 1 send, 2 delay), node
        (send: source), dst, size (cycles, or bytes for a send), number of dependencies, and
        successors as CSR. Ops without dependencies start at the current cycle.

        flow: None (sends go through the flit-level network) or a dict that makes them flows
        (csim/_flow.pxd): per op `latency`, `latency_full` and `latency_whole` (a send's
        zero-load latency of its last packet, of a full packet and of one packet as long as
        the message, in cycles) and `pair` (its (source, destination) pair); per pair
        `pair_src`, `pair_dst` and `pair_cap` (its cap resource, -1 for none); per resource
        beyond the channels (numbered from the channel count on: the pairs' caps, then the VC
        classes') `cap_bytes` (bytes per cycle) and `cap_lanes` (packets at once); optionally
        `vc_res` ([channel * n_classes + class]: the resource of a class of one VC on a
        group's first channel, or -1) and `vc_res_base` (the first such resource).

        sms: per node, its compute units (0, the default: not modelled; an NPU-run
        collective's hold op takes some of them, and the compute unit then runs at the rest's
        share of peak); comm_hbm: per node, communication's memory budget as a fraction of
        its memory bandwidth (default 1); share: per op, what a memory transfer's op (unit 6)
        can use of its node's memory bandwidth, a fraction in (0, 1] (default 1)."""
        cdef State* s = &self.s
        cdef int32_t op
        _check_lengths([packet_flits])
        k = np.asarray(kind, dtype=np.int8)
        n_ops = k.size
        s.n_ops = n_ops
        s.ops_done = 0
        s.op_kind = <int8_t*>_ptr(self._own("op_kind", k, np.int8))
        s.op_node = <int32_t*>_ptr(self._own("op_node", node, np.int32))
        s.op_dst = <int32_t*>_ptr(self._own("op_dst", dst, np.int32))
        s.op_size = <int64_t*>_ptr(self._own("op_size", size, np.int64))
        s.op_deps = <int32_t*>_ptr(self._own("op_deps", np.array(deps, np.int32), np.int32))
        s.succ_ptr = <int64_t*>_ptr(self._own("succ_ptr", succ_ptr, np.int64))
        s.succ = <int32_t*>_ptr(self._own("succ", succ, np.int32))
        s.op_start = <cycle_t*>_ptr(self._own("op_start", None, np.int64, -1, n_ops))
        s.op_finish = <cycle_t*>_ptr(self._own("op_finish", None, np.int64, -1, n_ops))
        s.op_left = <int64_t*>_ptr(self._own("op_left", None, np.int64, 0, n_ops))
        s.op_next = <int32_t*>_ptr(self._own("op_next", None, np.int32, -1, n_ops))
        s.op_done_q = <int32_t*>_ptr(self._own("op_done_q", None, np.int32, -1, n_ops))
        s.oh_time = <cycle_t*>_ptr(self._own("oh_time", None, np.int64, 0, n_ops))
        s.oh_op = <int32_t*>_ptr(self._own("oh_op", None, np.int32, 0, n_ops))
        s.op_unit = <int8_t*>_ptr(self._own("op_unit", np.zeros(n_ops, np.int8) if unit is None
                                            else unit, np.int8))
        s.cq_head = <int32_t*>_ptr(self._own("cq_head", None, np.int32, -1, s.n_nodes * N_UNITS))
        s.cq_tail = <int32_t*>_ptr(self._own("cq_tail", None, np.int32, -1, s.n_nodes * N_UNITS))
        s.node_busy = <uint8_t*>_ptr(self._own("node_busy", None, np.uint8, 0,
                                               s.n_nodes * N_UNITS))
        nu = s.n_nodes * N_UNITS
        s.u_op = <int32_t*>_ptr(self._own("u_op", None, np.int32, -1, nu))
        s.u_work = <double*>_ptr(self._own("u_work", None, np.float64, 0.0, nu))
        s.u_t0 = <cycle_t*>_ptr(self._own("u_t0", None, np.int64, 0, nu))
        s.u_rate = <double*>_ptr(self._own("u_rate", None, np.float64, 1.0, nu))
        s.uh_time = <cycle_t*>_ptr(self._own("uh_time", None, np.int64, 0, nu))
        s.uh_unit = <int32_t*>_ptr(self._own("uh_unit", None, np.int32, -1, nu))
        s.uh_pos = <int32_t*>_ptr(self._own("uh_pos", None, np.int32, -1, nu))
        s.uh_n = 0
        sms_a = np.zeros(s.n_nodes, np.int32) if sms is None else np.asarray(sms, np.int32)
        cap_a = np.ones(s.n_nodes) if comm_hbm is None else np.asarray(comm_hbm, np.float64)
        if sms_a.size != s.n_nodes or cap_a.size != s.n_nodes or (sms_a < 0).any() or \
                not (cap_a > 0).all():
            raise ValueError("sms and comm_hbm need one entry per node, sms >= 0 and "
                             "comm_hbm > 0")
        s.sm_total = <int32_t*>_ptr(self._own("sm_total", sms_a, np.int32))
        s.sm_held = <int32_t*>_ptr(self._own("sm_held", None, np.int32, 0, s.n_nodes))
        s.comm_cap = <double*>_ptr(self._own("comm_cap", cap_a, np.float64))
        share_a = np.ones(n_ops) if share is None else np.asarray(share, np.float64)
        if share_a.size != n_ops or not ((share_a > 0) & (share_a <= 1)).all():
            raise ValueError("share needs one entry per op, each in (0, 1]")
        s.op_share = <double*>_ptr(self._own("op_share", share_a, np.float64))
        s.xfer_dem = <double*>_ptr(self._own("xfer_dem", None, np.float64, 0.0, s.n_nodes))
        s.msg_bytes = <int64_t*>_ptr(self._own("msg_bytes", None, np.int64, 0, n_ops))
        s.msg_next = <int32_t*>_ptr(self._own("msg_next", None, np.int32, -1, n_ops))

        s.packet_flits_max = packet_flits
        s.flit_bytes = flit_bytes
        s.oh_n = 0
        s.op_done_n = 0
        if flow is not None:
            self._set_flow(n_ops, flow)
        for op in range(n_ops):
            if s.op_deps[op] == 0:
                if start_op(s, op) != 0:
                    raise MemoryError()

    def _set_flow(self, int64_t n_ops, dict flow):
        cdef State* s = &self.s
        cdef int32_t c, h, p, hmax = 1
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
        kind = self._arr["op_kind"][:n_ops]
        size = self._arr["op_size"][:n_ops]
        sends = np.flatnonzero((kind == OP_SEND) & (size > 0))
        if sends.size and ((pair[sends] < 0).any() or (pair[sends] >= n_pairs).any()):
            raise ValueError("flow: a send's pair is out of range")
        if sends.size and ((psrc[pair[sends]] != self._arr["op_node"][sends]).any() or
                           (pdst[pair[sends]] != self._arr["op_dst"][sends]).any()):
            raise ValueError("flow: a send's pair has other ends")
        n_res = s.n_ch + cap_bytes.size
        rs = np.zeros(n_res, np.float64)
        lanes = np.ones(n_res, np.int32)
        for c in range(s.n_ch):
            lanes[c] = s.ch[c].par_n
            if self._arr["ch_base"][c] == c:
                rs[c] = s.ch[c].par_n * <double>s.ch[c].num * s.flit_bytes / s.ch[c].den
        rs[s.n_ch:] = cap_bytes
        lanes[s.n_ch:] = cap_lanes
        s.rs_cap = <double*>_ptr(self._own("rs_cap", rs, np.float64))
        s.rs_lanes = <int32_t*>_ptr(self._own("rs_lanes", lanes, np.int32))
        s.rs_head = <int32_t*>_ptr(self._own("rs_head", None, np.int32, -1, n_res))
        s.rs_n = <int32_t*>_ptr(self._own("rs_n", None, np.int32, 0, n_res))
        s.rs_bytes = <double*>_ptr(self._own("rs_bytes", None, np.float64, 0, n_res))
        s.rs_left = <double*>_ptr(self._own("rs_left", None, np.float64, 0, n_res))
        s.rs_unf = <int32_t*>_ptr(self._own("rs_unf", None, np.int32, 0, n_res))
        s.rs_mark = <int64_t*>_ptr(self._own("rs_mark", None, np.int64, 0, n_res))
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
        for p in range(n_pairs):                 # the longest route: the entries' stride
            s.pr[p].src = psrc[p]
            s.pr[p].dst = pdst[p]
            s.pr[p].cap = pcap[p]
            if not (0 <= psrc[p] < s.n_nodes and 0 <= pdst[p] < s.n_nodes):
                raise ValueError(f"flow: pair {p}: node out of range")
            h = flow_route(s, psrc[p], pdst[p], pcap[p], NULL)
            if h < 0:
                raise ValueError(f"no route from node {psrc[p]} to node {pdst[p]}")
            if h > hmax:
                hmax = h
        _flow_free(s)
        s.hmax = hmax
        s.n_res = n_res
        s.n_pairs = n_pairs
        s.flow_mode = 1
        self._mode = GEN_NONE

    def op_times(self):
        """Per op: (start cycle, finish cycle), -1 where it has not happened."""
        n = self.s.n_ops
        return self._arr["op_start"][:n].copy(), self._arr["op_finish"][:n].copy()

    def set_window(self, cycle_t start, cycle_t end):
        """Packets created in [start, end) are measured; flits ejected in it are accepted."""
        self.s.meas_start = start
        self.s.meas_end = end

    def stop_generation(self, cycle_t at):
        self.s.gen_stop = at

    # ------------------------------------------------------------------ running

    def run(self, cycle_t until, str stop="none", progress=None):
        """Step cycles until `until` (exclusive) or the stop condition; return the status.

        The cycles run without the GIL in slices of about a tenth of a second, and pending
        signals are handled between slices, so Ctrl-C stops a long run (KeyboardInterrupt)
        with the engine at a cycle boundary; `progress`, if given, is called with the cycle
        reached after each slice. A slice ends like any call with an earlier `until`, so
        slicing changes nothing in the simulation."""
        cdef int code = STOP[stop]
        cdef int st = ST_UNTIL
        cdef cycle_t step = 4096, end
        cdef double t0, dt
        while True:
            end = until if until - self.s.now <= step else self.s.now + step
            t0 = perf_counter()
            with nogil:
                if self.s.flow_mode:
                    st = _run_flow(&self.s, end)
                else:
                    st = _run(&self.s, end, code)
            if st != ST_UNTIL or self.s.now >= until:
                return STATUS[st]
            PyErr_CheckSignals()
            if progress is not None:
                progress(self.s.now)
            dt = perf_counter() - t0       # the next slice: about 0.1 s at this pace
            if dt < 0.025:
                step = min(step * 4, <cycle_t>1 << 30)
            elif dt > 0.2:
                step = max(step // 2, 64)

    @property
    def now(self):
        return self.s.now

    # ------------------------------------------------------------------ reading results

    def counters(self):
        """Totals so far. flits_ejected counts a packet's last flit when it reaches the NIC and
        its other flits when they leave the last router (their arrival is never an event);
        win_ejected_flits counts flits by their arrival cycle either way."""
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
            unsent_flits=self._unsent_flits(), last_progress=s.last_progress,
            cycles_skipped=s.skipped,
            deadlock_cycle=s.deadlock_t, flows_started=s.flows_started,
            flows_alive=s.fl_alive, rate_recomputations=s.recomputes,
            pairs_recomputed=s.pairs_recomputed, flow_events=s.flow_events,
            solver_seconds=s.solver_ns * 1e-9)

    cdef int64_t _unsent_flits(self):
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
        for c in range(s.n_ch):
            if s.ch[c].kind == CH_INJECT and s.ch[c].cur_pkt >= 0:
                total += s.pk[s.ch[c].cur_pkt].length - s.ch[c].cur_seq
        return total

    def channel_flits(self):
        """Flits sent on each channel since the start (a copy)."""
        cdef int32_t c
        out = np.zeros(self.s.n_ch, dtype=np.int64)
        if self.s.flow_mode:         # a group's wire bytes, shared evenly by its channels
            base = self._arr["ch_base"]
            for c in range(self.s.n_ch):
                out[c] = <int64_t>(self.s.rs_bytes[base[c]] / self.s.flit_bytes /
                                   self.s.ch[c].par_n + 0.5)
            return out
        for c in range(self.s.n_ch):
            out[c] = self.s.ch[c].flits
        return out

    def vc_flits(self):
        """Flits written into each input VC's buffer since the start: (channels, vcs), a
        network or injection channel's VCs at its downstream router (0 for ejection
        channels)."""
        cdef int64_t i
        out = np.zeros(self.s.n_ivc, dtype=np.int64)
        for i in range(self.s.n_ivc):
            out[i] = self.s.ivc[i].flits
        return out.reshape(self.s.n_ch, self.s.V)

    def latency_histograms(self):
        """Counts of measured packets by packet latency and by network latency (cycles)."""
        cdef State* s = &self.s
        cdef int64_t n = s.hist_cap
        cdef int64_t i
        lat = np.zeros(n, dtype=np.int64)
        net = np.zeros(n, dtype=np.int64)
        for i in range(n):
            lat[i] = s.hist_lat[i]
            net[i] = s.hist_net[i]
        return lat, net

    def trace_results(self):
        """Per trace packet: tail delivery cycle, head injection cycle, router hops (-1 if
        not delivered)."""
        n = self.s.tr_n
        return (self._arr["tr_deliver"][:n].copy(), self._arr["tr_inject"][:n].copy(),
                self._arr["tr_hops"][:n].copy())

    def snapshot(self):
        """The buffer, VC and credit state, and everything in flight, as numpy arrays."""
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


cdef inline bint _not_faster(const int64_t[::1] num, const int64_t[::1] den, int64_t a,
                             int64_t b) noexcept nogil:
    """Channel a carries at most as many flits per cycle as channel b (num / den each)."""
    return num[a] * den[b] <= num[b] * den[a]


def path_walk(const int32_t[::1] rt, int64_t n, const int32_t[::1] ch_dst,
              const int32_t[::1] ch_lat, const int64_t[::1] num, const int64_t[::1] den,
              const int32_t[::1] inj_ch, const int32_t[::1] ej_ch,
              const int64_t[::1] src, const int64_t[::1] dst):
    """Walk the routing table rt ([node * n + dst] -> channel) for pairs (src[i], dst[i]).

    Returns per pair: router-to-router hops, the sum of their latencies, the slowest channel
    on the path with the NIC channels (num / den flits per cycle; the last of equals), and
    the number of routers after it (0 if it is the ejection channel). A path shares its tail
    with every path to the same destination: the tails are kept while consecutive pairs have
    one destination, so pairs grouped by destination cost O(1) each, not O(hops)."""
    cdef int64_t m = src.shape[0], i, u, v, d, cur = -1, gen = 0, sp, c, w, ej
    if dst.shape[0] != m:
        raise ValueError("src and dst differ in length")
    if rt.shape[0] != n * n:
        raise ValueError(f"rt has {rt.shape[0]} entries for {n} nodes")
    hops = np.zeros(m, np.int64)
    lat = np.zeros(m, np.int64)
    worst = np.zeros(m, np.int64)
    after = np.zeros(m, np.int64)
    cdef int64_t[::1] o_h = hops, o_l = lat, o_w = worst, o_a = after
    # per node, for the current destination: hops and latency to it, the slowest router
    # channel on the way (-1: none) and the channels after that one; valid where stamp is gen
    memo = np.zeros((5, max(n, 1)), np.int64)
    cdef int64_t[:, ::1] mm = memo
    cdef int64_t[::1] m_h = mm[0], m_l = mm[1], m_w = mm[2], m_k = mm[3], stamp = mm[4]
    stack_a = np.zeros(max(n, 1) + 1, np.int64)
    cdef int64_t[::1] stack = stack_a
    for i in range(m):
        u = src[i]
        d = dst[i]
        if not (0 <= u < n and 0 <= d < n):
            raise ValueError(f"pair {i}: node out of range")
        if d != cur:                     # a new destination: forget the old tails
            cur = d
            gen += 1
            stamp[d] = gen
            m_h[d] = 0
            m_l[d] = 0
            m_w[d] = -1
            m_k[d] = 0
        sp = 0
        v = u
        while stamp[v] != gen:           # down to a node whose tail is known
            if sp > n:
                raise ValueError(f"routing loop from node {u} to node {d}")
            stack[sp] = v
            sp += 1
            c = rt[v * n + d]
            if c < 0:
                raise ValueError(f"no route from node {v} to node {d}")
            v = ch_dst[c]
        while sp > 0:                    # and back up, each node from the one after it
            sp -= 1
            u = stack[sp]
            c = rt[u * n + d]
            v = ch_dst[c]
            m_h[u] = m_h[v] + 1
            m_l[u] = m_l[v] + ch_lat[c]
            w = m_w[v]
            if w >= 0 and _not_faster(num, den, w, c):
                m_w[u] = w               # a later channel is as slow or slower
                m_k[u] = m_k[v]
            else:
                m_w[u] = c
                m_k[u] = m_h[v]
            stamp[u] = gen
        u = src[i]
        o_h[i] = m_h[u]
        o_l[i] = m_l[u]
        w = m_w[u]
        c = inj_ch[u]
        if w >= 0 and _not_faster(num, den, w, c):
            o_a[i] = m_k[u] + 1          # routers after it: the channels after it, + 1
        else:
            w = c                        # the injection channel: every router is after it
            o_a[i] = m_h[u] + 1
        ej = ej_ch[d]
        if _not_faster(num, den, ej, w):
            w = ej
            o_a[i] = 0
        o_w[i] = w
    return hops, lat, worst, after


def mark_dependencies(const int32_t[::1] rt, int64_t n, const int32_t[::1] ch_dst,
                      const int64_t[::1] first, const int64_t[::1] lo, uint8_t[::1] seen,
                      rt_next=None):
    """For destination-based routes rt ([node * n + dst] -> channel), mark every channel
    dependency (c1, c2): a route takes c1 into node v, then c2 out of it. c2 is one of v's
    out-channels, lo[c2] its index among them, and first[c1] where c1's marks start in
    seen (one per out-channel of the node c1 enters). With rt_next, c2 is read from that
    table instead (routes that may take either table's channel at every node)."""
    cdef const int32_t[::1] rt2 = rt if rt_next is None else rt_next
    cdef int64_t u, d, v, c1, c2, row
    if rt2.shape[0] != rt.shape[0]:
        raise ValueError("rt_next differs in size from rt")
    for u in range(n):
        row = u * n
        for d in range(n):
            c1 = rt[row + d]
            if c1 < 0:
                continue
            v = ch_dst[c1]
            if v == d:
                continue
            c2 = rt2[v * n + d]
            if c2 >= 0:
                seen[first[c1] + lo[c2]] = 1


cdef inline void _heap_push(double* hk, int64_t* hv, int64_t* size, double k,
                            int64_t v) noexcept nogil:
    cdef int64_t i = size[0], p
    size[0] += 1
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] <= k:
            break
        hk[i] = hk[p]
        hv[i] = hv[p]
        i = p
    hk[i] = k
    hv[i] = v


cdef inline void _heap_pop(double* hk, int64_t* hv, int64_t* size) noexcept nogil:
    cdef int64_t n = size[0] - 1, i = 0, c
    cdef double k = hk[n]
    cdef int64_t v = hv[n]
    size[0] = n
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= k:
            break
        hk[i] = hk[c]
        hv[i] = hv[c]
        i = c
    if n > 0:
        hk[i] = k
        hv[i] = v


def next_hops(int64_t n, const int64_t[::1] in_ptr, const int32_t[::1] in_src,
              const double[::1] in_w, const int32_t[::1] in_ch, const int64_t[::1] out_ptr, const int32_t[::1] out_dst,
              const int32_t[::1] out_ch, const double[::1] out_w,
              const uint8_t[::1] is_dest, bint unit, int32_t[::1] table,
              const uint8_t[::1] passes):
    """Shortest-path next hops towards every destination d with is_dest[d]: table[u * n + d]
    (filled in; -1 elsewhere) is the channel u takes towards d. The channels entering each
    node are in_ptr / in_src (their source) / in_w (their weight), by channel id; those
    leaving it out_ptr / out_dst / out_ch / out_w, by next node then channel id (in_ch,
    out_ch: the channel ids).

    From each destination, a breadth-first search (unit weights: it stops once every node is
    reached) or Dijkstra's (binary heap) over the reversed channels gives every node's
    distance; then u takes the first of its out-channels on a shortest path (dist[v] + w =
    dist[u], to 1e-9) -- with unit weights, a node one hop away takes its lowest channel to d
    at once. O(nodes x channels) at worst, without the GIL. Returns (d, u) of the first node u
    that cannot reach a destination d, or None. A route passes only through nodes with
    passes[node] (it may start at any node and ends at d)."""
    cdef int64_t d, u, v, i, head, tail, hn, reached
    cdef int64_t bad_d = -1, bad_u = -1
    cdef double du, nd
    if table.shape[0] != n * n:
        raise ValueError("table has the wrong size")
    dist_a = np.empty(max(n, 1), np.float64)
    queue_a = np.empty(max(n, 1), np.int64)
    direct_a = np.full(max(n, 1), -1, np.int32)
    hk_a = np.empty(max(in_src.shape[0], 1) + 1, np.float64)
    hv_a = np.empty(max(in_src.shape[0], 1) + 1, np.int64)
    cdef double[::1] dist = dist_a
    cdef int64_t[::1] queue = queue_a
    cdef int32_t[::1] direct = direct_a
    cdef double[::1] hk = hk_a
    cdef int64_t[::1] hv = hv_a
    cdef int64_t d0, d1
    for d0 in range(0, n, 64):
        PyErr_CheckSignals()                 # (Ctrl-C: KeyboardInterrupt between searches)
        d1 = min(n, d0 + 64)
        with nogil:
            for d in range(d0, d1):
                if not is_dest[d]:
                    continue
                for u in range(n):
                    dist[u] = INFINITY
                dist[d] = 0.0
                reached = 1
                if unit:
                    head = 0
                    tail = 1
                    queue[0] = d
                    while head < tail and reached < n:
                        u = queue[head]
                        head += 1
                        if u != d and not passes[u]:
                            continue             # (a node that forwards nothing ends no path)
                        du = dist[u] + 1.0
                        for i in range(in_ptr[u], in_ptr[u + 1]):
                            v = in_src[i]
                            if dist[v] == INFINITY:
                                dist[v] = du
                                queue[tail] = v
                                tail += 1
                                reached += 1
                else:
                    hn = 0
                    _heap_push(&hk[0], &hv[0], &hn, 0.0, d)
                    while hn > 0:
                        du = hk[0]
                        u = hv[0]
                        _heap_pop(&hk[0], &hv[0], &hn)
                        if du > dist[u] or (u != d and not passes[u]):
                            continue
                        for i in range(in_ptr[u], in_ptr[u + 1]):
                            v = in_src[i]
                            nd = du + in_w[i]
                            if nd < dist[v] - 1e-12:
                                dist[v] = nd
                                _heap_push(&hk[0], &hv[0], &hn, nd, v)
                if unit:                     # the lowest channel into d from each neighbour
                    for i in range(in_ptr[d], in_ptr[d + 1]):
                        if direct[in_src[i]] < 0:
                            direct[in_src[i]] = <int32_t>i
                for u in range(n):
                    if u == d or dist[u] == INFINITY:
                        if u != d and is_dest[u] and bad_d < 0:
                            bad_d = d
                            bad_u = u
                        continue
                    if unit and dist[u] == 1.0:
                        table[u * n + d] = in_ch[direct[u]]
                        continue
                    for i in range(out_ptr[u], out_ptr[u + 1]):
                        if out_dst[i] != d and not passes[out_dst[i]]:
                            continue
                        if fabs(dist[out_dst[i]] + out_w[i] - dist[u]) <= 1e-9:
                            table[u * n + d] = out_ch[i]
                            break
                if unit:
                    for i in range(in_ptr[d], in_ptr[d + 1]):
                        direct[in_src[i]] = -1
    if bad_d >= 0:
        return int(bad_d), int(bad_u)
    return None


def dfs_order(int64_t n, const int64_t[::1] ptr, const int64_t[::1] adj):
    """Depth-first search of a directed graph (vertices 0..n-1, successors adj[ptr[u]:
    ptr[u + 1]]), roots and successors in increasing order. Returns (postorder, cycle): the
    vertices in postorder, and the vertices of the first cycle met (a back edge closed by
    the path on the stack), or None if the graph is acyclic."""
    post_a = np.empty(max(n, 1), np.int64)
    color_a = np.zeros(max(n, 1), np.int8)        # 0 new, 1 on the stack, 2 done
    parent_a = np.full(max(n, 1), -1, np.int64)
    stack_a = np.empty(max(n, 1), np.int64)
    pos_a = np.empty(max(n, 1), np.int64)
    cdef int64_t[::1] post = post_a, parent = parent_a, stack = stack_a, pos = pos_a
    cdef int8_t[::1] color = color_a
    cdef int64_t root, u, v, sp, np_ = 0, cyc_u = -1, cyc_v = -1
    with nogil:
        for root in range(n):
            if color[root]:
                continue
            color[root] = 1
            stack[0] = root
            pos[0] = ptr[root]
            sp = 1
            while sp > 0:
                u = stack[sp - 1]
                if pos[sp - 1] < ptr[u + 1]:
                    v = adj[pos[sp - 1]]
                    pos[sp - 1] += 1
                    if color[v] == 0:
                        color[v] = 1
                        parent[v] = u
                        stack[sp] = v
                        pos[sp] = ptr[v]
                        sp += 1
                    elif color[v] == 1 and cyc_u < 0:
                        cyc_u = u
                        cyc_v = v
                else:
                    color[u] = 2
                    post[np_] = u
                    np_ += 1
                    sp -= 1
    cycle = None
    if cyc_u >= 0:                  # (no negative indices here: wraparound is off)
        u = cyc_u
        cycle = [int(u)]
        while u != cyc_v:
            u = parent[u]
            cycle.append(int(u))
        cycle.reverse()
    return post_a[:n], cycle


cdef int _class_walk(const int32_t[::1] rt, const int32_t[::1] alt, int64_t n,
                     const int64_t[::1] eps, const int32_t[::1] ch_dst,
                     const int64_t[::1] group, const int64_t[::1] order,
                     const int32_t[::1] pos, int64_t G, const int64_t[::1] first,
                     const int64_t[::1] lo, int64_t kb, uint8_t[::1] seen,
                     int64_t[::1] stamp, int64_t[:, ::1] stk, int64_t d_lo,
                     int64_t d_hi) noexcept nogil:
    cdef int64_t di, si, d, s, cur, c, ca, prev, cls, nc, grp, last, steps, sp
    cdef int64_t depth = stk.shape[0]
    for di in range(d_lo, d_hi):
        d = eps[di]
        for si in range(eps.shape[0]):
            s = eps[si]
            if s == d:
                continue
            # a stack of routes to follow: (node, channel to take or -1, previous channel,
            # its class, group, order, hops); a node where alt differs from rt (a tie) pushes
            # the other way
            stk[0, 0] = s
            stk[0, 1] = -1
            stk[0, 2] = -1
            stk[0, 3] = 0
            stk[0, 4] = -1
            stk[0, 5] = -1
            stk[0, 6] = 0
            sp = 1
            while sp > 0:
                sp -= 1
                cur = stk[sp, 0]
                c = stk[sp, 1]
                prev = stk[sp, 2]
                cls = stk[sp, 3]
                grp = stk[sp, 4]
                last = stk[sp, 5]
                steps = stk[sp, 6]
                while cur != d:
                    if c < 0:
                        c = rt[cur * n + d]
                        if c < 0:
                            return 2
                        ca = alt[cur * n + d]
                        if ca != c:
                            if sp == depth:
                                return 3
                            stk[sp, 0] = cur
                            stk[sp, 1] = ca
                            stk[sp, 2] = prev
                            stk[sp, 3] = cls
                            stk[sp, 4] = grp
                            stk[sp, 5] = last
                            stk[sp, 6] = steps
                            sp += 1
                    if grp == group[c]:
                        nc = cls + (1 if order[c] < last else 0)
                    elif G > 0:
                        nc = 1 if pos[cur * G + group[c]] > pos[d * G + group[c]] else 0
                    else:
                        nc = 0
                    if nc >= kb:
                        return 1
                    if prev >= 0:
                        seen[((first[prev] + lo[c]) * kb + cls) * kb + nc] = 1
                    if stamp[c * kb + nc] == d + 1:
                        break
                    stamp[c * kb + nc] = d + 1
                    prev = c
                    cls = nc
                    grp = group[c]
                    last = order[c]
                    cur = ch_dst[c]
                    c = -1
                    steps += 1
                    if steps > n:
                        return 3
    return 0


def mark_class_dependencies(const int32_t[::1] rt, int64_t n, const int64_t[::1] eps,
                            const int32_t[::1] ch_dst, const int64_t[::1] group,
                            const int64_t[::1] order, const int64_t[::1] first,
                            const int64_t[::1] lo, int64_t kb, uint8_t[::1] seen,
                            const int32_t[::1] alt, const int32_t[::1] pos, int64_t G):
    """Follow every endpoint-to-endpoint route of rt ([node * n + dst] -> channel) with its VC
    class -- on a group's first channel class 0, or with G > 0 groups of node positions
    (pos[node * G + group]) class 1 where the node is above the destination; one more
    whenever a channel of lower order than the one before in the same group is taken -- and
    mark each dependency (c1 in class k1, then c2 in class k2):
    seen[((first[c1] + lo[c2]) * kb + k1) * kb + k2]. Where alt ([node * n + dst], the same
    shape; rt itself if routes have no choice) differs from rt, a route goes both ways (random
    ties). A route that reaches a (channel, class) already followed towards the same
    destination stops there: what follows was marked then. So O(destinations x (endpoints +
    channels x classes)), not O(pairs x hops). Returns 0, or 1 if a class reaches kb (call
    again with more), 2 if a route ends before its destination, 3 if routes loop."""
    cdef int st = 0
    cdef int64_t d0, d1, m = eps.shape[0]
    if alt.shape[0] != rt.shape[0] or (G > 0 and pos.shape[0] != n * G):
        raise ValueError("alt and pos must match rt and n")
    stamp_a = np.zeros(max(ch_dst.shape[0] * kb, 1), np.int64)
    cdef int64_t[::1] stamp = stamp_a
    stk_a = np.zeros((n + 2, 7), np.int64)
    cdef int64_t[:, ::1] stk = stk_a
    for d0 in range(0, m, 64):
        PyErr_CheckSignals()          # (Ctrl-C: KeyboardInterrupt between destinations)
        d1 = min(m, d0 + 64)
        with nogil:
            st = _class_walk(rt, alt, n, eps, ch_dst, group, order, pos, G, first, lo, kb,
                             seen, stamp, stk, d0, d1)
        if st != 0:
            return st
    return st


def max_min_rates(route_ptr, route_res, capacity):
    """Max-min fair rates by the flow level's own code (csim/_flow.pxd): flow i takes the
    resources route_res[route_ptr[i]:route_ptr[i + 1]] (each at most once), resource r has
    capacity[r] > 0. For tests and for checking the solver by hand."""
    cdef State s
    cdef int32_t f, k
    ptr = np.ascontiguousarray(route_ptr, dtype=np.int64)
    res = np.ascontiguousarray(route_res, dtype=np.int32)
    cap = np.ascontiguousarray(capacity, dtype=np.float64)
    n_f = ptr.size - 1
    R = cap.size
    if n_f < 0 or ptr[0] != 0 or ptr[ptr.size - 1] != res.size or (np.diff(ptr) < 1).any():
        raise ValueError("route_ptr: every flow needs at least one resource")
    if res.size and (res.min() < 0 or res.max() >= R):
        raise ValueError("route_res: resource out of range")
    if not (cap > 0).all():
        raise ValueError("capacity must be > 0")
    for f in range(n_f):
        if np.unique(res[ptr[f]:ptr[f + 1]]).size != ptr[f + 1] - ptr[f]:
            raise ValueError(f"flow {f} takes a resource twice")
    keep = dict(head=np.full(R, -1, np.int32), n=np.zeros(R, np.int32),
                left=np.zeros(R), unf=np.zeros(R, np.int32), mark=np.zeros(R, np.int64),
                dirty=np.zeros(R, np.int32), isdirty=np.zeros(R, np.uint8),
                queue=np.zeros(R, np.int32), key=np.zeros(R), rres=np.zeros(R, np.int32),
                pairs=np.zeros(max(n_f, 1) * sizeof(Pair), np.uint8),
                comp=np.zeros(max(n_f, 1), np.int32), dh_time=np.zeros(max(n_f, 1), np.int64),
                dh_pair=np.zeros(max(n_f, 1), np.int32))
    _flow_null(&s)
    s.now = 0
    s.n_res = R
    s.rs_cap = <double*>_ptr(cap)
    s.rs_head = <int32_t*>_ptr(keep["head"])
    s.rs_n = <int32_t*>_ptr(keep["n"])
    s.rs_left = <double*>_ptr(keep["left"])
    s.rs_unf = <int32_t*>_ptr(keep["unf"])
    s.rs_mark = <int64_t*>_ptr(keep["mark"])
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
    try:
        while s.fl_cap < n_f:
            if flow_grow(&s) != 0:
                raise MemoryError()
        for f in range(n_f):                     # each flow its own pair
            s.pr[f].slot = slot_alloc(&s, f)
            if s.pr[f].slot < 0:
                raise MemoryError()
            s.pr[f].rlen = <int32_t>(ptr[f + 1] - ptr[f])
            s.pr[f].n = 1
            s.pr[f].root = f
            s.fl[f].v = 1.0
            s.fl[f].op = f
            for k in range(s.pr[f].rlen):
                s.fe_res[<int64_t>s.pr[f].slot * s.hmax + k] = res[ptr[f] + k]
                s.rs_n[res[ptr[f] + k]] += 1
                if not s.rs_isdirty[res[ptr[f] + k]]:
                    s.rs_isdirty[res[ptr[f] + k]] = 1
                    s.rs_dirty[s.n_dirty] = res[ptr[f] + k]
                    s.n_dirty += 1
            pair_link(&s, f)
        flow_rates(&s)
        out = np.zeros(n_f)
        for f in range(n_f):
            out[f] = s.pr[f].rate
        return out
    finally:
        _flow_free(&s)
