# The op scheduler for workload graphs: compute, send and delay ops with dependencies.
#
# An op starts the cycle its last dependency finishes (ops without dependencies at cycle 0):
# a compute-like op when its unit of its node (compute, memory or collectives engine) is free
# (one op at a time per unit, in the order
# they became ready), a delay at once, a send by handing its message to the source NIC, which
# cuts it into packets of at most packet_flits flits as its injection channels take them,
# serving its messages in turn. A compute or delay op finishes `size` cycles after it starts;
# a send when the tail of its last packet is delivered. No Python runs per op.
#
# A roofline op (OP_ROOF, with its memory companion OP_ROOF_MEM as the next op id) computes
# for size[op] cycles and moves data for size[op + 1] cycles of its node's memory unit, in
# dst[op] slices: slice k is a compute part on the compute unit beside a memory part on the
# memory unit (each queued for its unit like any op), and slice k + 1 starts when both parts
# of slice k have finished. Cycles are dealt to the slices evenly, the first slices taking
# the remainder, so alone the op takes max(compute, memory) cycles exactly. It starts when its
# first part starts and finishes with its last slice; its companion never starts on its own
# (one dependency that no op releases) and shares its times.
#
# Units run their op at a rate (a fraction of full speed), so an op's `size` is its cycles at
# full rate: the compute unit (0) at (units - held) / units while NPU-run collectives hold some
# of the node's compute units (OP_HOLD / OP_UNHOLD change sm_held). Three units move data
# through the node's memory (HBM), and share it max-min fairly (water-filling) among those
# running an op, each taking at most what it can use:
# - unit 1, compute's traffic (roofline memory parts): a part whose compute part runs beside
#   it can use what keeps pace with that compute part (its work left over the compute part's
#   time left), else the whole memory;
# - units 5 and 7, communication's (collectives' copies and reductions: 5 what is sent, 7 what
#   is received), together at most the budget comm_cap, in equal parts among their busy
#   lanes. Each has two lanes (5 and 8, 7 and 9) with one queue: an op streamed (a stream
#   or a stream's source: an NPU-run step's read, reduction or write, done piece by piece as
#   an NCCL kernel's slices are) may run on either, so two of them run at once, as the two
#   directions of a bidirectional ring run on channels of their own in an NCCL kernel;
#   other ops (copies stored and forwarded whole) run on the first lane, one at a time;
# - unit 6, memory transfers' (a DMA engine streaming to or from a memory node or a host): at
#   most the sum of op_share over the transfers it serves (the op it runs and those queued
#   for it, in turn: it serves them all at once by pieces), op_share being what the
#   transfer's route can carry, as a fraction of the node's memory bandwidth.
# What no unit can use (their demands met) goes in equal parts to units 1 and 6 (data that
# runs ahead of its compute or of its network costs no one), never past a budget. A rate
# changes only when the held units change, a memory unit starts or ends an op, a transfer
# queues, or a roofline op's compute part starts or ends beside its memory part; then the
# running op's work left is recomputed and its finish moved in an indexed heap of the units'
# finishes (uh_*), which ops_due merges with the op heap in (cycle, op id) order.
#
# A stream (op_src): an op may take its source's data as it comes, as an NCCL kernel's
# slices or a NIC's DMA do, instead of after it. Such an op counts its source as done for
# starting when the source starts; it cannot finish before its source has. A unit op runs
# its bulk (size - op_tail cycles) from then, gives its unit up if the bulk is done before
# the source is, and takes its unit again for its tail (op_tail cycles: its work on the last
# packet of data) when the source finishes, ahead of the ops waiting there and of a bulk
# running there (which resumes after it: a bulk runs ahead of its data, a tail is on the
# critical path; a bulk that ends after its source runs its tail at once, before the ops
# queued there); a send whose source finishes after its
# last byte has arrived finishes op_tail cycles (the zero-load latency of one packet) after
# its source. So a step of store-and-forward becomes a pipeline: the data is read, sent,
# reduced and forwarded piece by piece, the step taking its slowest stage plus a piece's
# time per stage, with no more ops and no event per piece.
#
# A gate (a node's unit 3) orders work that no single op spans, as a scheduler's queue does:
# an acquire op (OP_ACQUIRE, its size its priority) waits until the gate is free, takes it
# and finishes at once, so its successors run while the gate stays taken; a release op
# (OP_RELEASE) frees it, and the waiting acquire of highest priority takes it (the first
# to wait among equals).
#
# How a send is carried is the one thing the network model changes: at the flit level its
# packets go through the NIC, routers and links (and the op finishes when the engine sees its
# last tail delivered, through op_done_q); at the flow level it is a flow (csim/_flow.pxd)
# whose op finishes, on the op heap, its zero-load latency after its last byte is carried.
# Everything else here -- dependencies, the units and their queues -- is the same for both.
from csim._types cimport *
from csim._nic cimport nic_add_message
from csim._flow cimport flow_start
from csim._heap cimport heap_push, heap_pop


cdef inline bint _uh_less(State* s, int32_t a, int32_t b) noexcept nogil:
    """Unit a's finish comes before unit b's (ties to the lower op id, as in the op heap)."""
    cdef cycle_t ta = s.uh_time[a], tb = s.uh_time[b]
    return ta < tb or (ta == tb and s.u_op[s.uh_unit[a]] < s.u_op[s.uh_unit[b]])


cdef inline void _uh_swap(State* s, int32_t a, int32_t b) noexcept nogil:
    cdef cycle_t t = s.uh_time[a]
    cdef int32_t u = s.uh_unit[a]
    s.uh_time[a] = s.uh_time[b]
    s.uh_unit[a] = s.uh_unit[b]
    s.uh_time[b] = t
    s.uh_unit[b] = u
    s.uh_pos[s.uh_unit[a]] = a
    s.uh_pos[s.uh_unit[b]] = b


cdef inline void _uh_fix(State* s, int32_t i) noexcept nogil:
    """Restore the heap order around place i after its key changed."""
    cdef int32_t p, c
    while i > 0:
        p = (i - 1) >> 1
        if not _uh_less(s, i, p):
            break
        _uh_swap(s, i, p)
        i = p
    while True:
        c = 2 * i + 1
        if c >= s.uh_n:
            break
        if c + 1 < s.uh_n and _uh_less(s, c + 1, c):
            c += 1
        if not _uh_less(s, c, i):
            break
        _uh_swap(s, i, c)
        i = c


cdef inline void _uh_set(State* s, int32_t n, cycle_t t) noexcept nogil:
    """Unit n's running op finishes at t (inserted, or moved)."""
    cdef int32_t i = s.uh_pos[n]
    if i < 0:
        i = s.uh_n
        s.uh_n += 1
        s.uh_unit[i] = n
        s.uh_pos[n] = i
    s.uh_time[i] = t
    _uh_fix(s, i)


cdef inline void _uh_remove(State* s, int32_t n) noexcept nogil:
    cdef int32_t i = s.uh_pos[n]
    cdef int32_t last = s.uh_n - 1
    if i < 0:
        return
    if i != last:
        _uh_swap(s, i, last)
    s.uh_n -= 1
    s.uh_pos[n] = -1
    if i < s.uh_n:
        _uh_fix(s, i)


cdef inline cycle_t next_op_event(State* s) noexcept nogil:
    cdef cycle_t t = s.oh_time[0] if s.oh_n > 0 else NEVER
    if s.uh_n > 0 and s.uh_time[0] < t:
        return s.uh_time[0]
    return t


cdef inline int64_t _part(int64_t total, int64_t k, int64_t slices) noexcept nogil:
    """Slice k's share of `total` cycles dealt over `slices` slices."""
    return total // slices + (1 if k < total % slices else 0)


cdef inline cycle_t _due(State* s, int32_t n) noexcept nogil:
    """When unit n's running op finishes at its present rate."""
    cdef double c = s.u_work[n] / s.u_rate[n] - 1e-9
    cdef cycle_t d = <cycle_t>c
    if d < c:
        d += 1
    return s.u_t0[n] + (d if d > 0 else 0)


cdef inline void _set_rate(State* s, int32_t n, double rate) noexcept nogil:
    """Unit n runs at `rate` of full speed from now: its running op's finish moves."""
    if rate == s.u_rate[n]:
        return
    if s.u_op[n] >= 0:
        s.u_work[n] -= (s.now - s.u_t0[n]) * s.u_rate[n]
        if s.u_work[n] < 0:
            s.u_work[n] = 0
        s.u_t0[n] = s.now
        s.u_rate[n] = rate
        _uh_set(s, n, _due(s, n))
    else:
        s.u_rate[n] = rate


cdef inline double _left(State* s, int32_t n) noexcept nogil:
    """Unit n's running op's work left now (cycles at full rate)."""
    cdef double w = s.u_work[n] - (s.now - s.u_t0[n]) * s.u_rate[n]
    return w if w > 0 else 0.0


cdef inline double _roof_demand(State* s, int32_t n, double rc) noexcept nogil:
    """What the memory part running on unit n (a node's unit 1) can use: enough to keep pace
    with its compute part if that runs now beside it at rate rc (its work left over the
    compute part's time left), else the whole memory."""
    cdef int32_t op = s.u_op[n]
    cdef double wc, wm
    if s.op_kind[op] != OP_ROOF_MEM or s.u_op[n - 1] != op - 1 or rc <= 0:
        return 1.0
    wc = _left(s, n - 1)
    wm = _left(s, n)
    if wc <= 0 or wm <= 0:
        return 1.0
    wc = wm * rc / wc
    if wc < 1e-6:                      # (a demand is never nothing: every rate stays > 0)
        return 1e-6
    return wc if wc < 1.0 else 1.0


cdef inline int32_t _home(int32_t u) noexcept nogil:
    """The unit whose queue unit u's ops wait in (a second lane's: its first lane's)."""
    if u == SEND_LANE2:
        return 5
    if u == RECV_LANE2:
        return RECV_UNIT
    return u


cdef inline int32_t _lane2(int32_t u) noexcept nogil:
    """The second lane of unit u (its home unit), or -1 if it has one lane."""
    if u == 5:
        return SEND_LANE2
    if u == RECV_UNIT:
        return RECV_LANE2
    return -1


cdef inline bint _streamed(State* s, int32_t op) noexcept nogil:
    """op takes or gives its data as it comes (a stream or a stream's source): it may run
    on a second lane."""
    return s.op_src != NULL and (s.op_src[op] >= 0 or s.ssucc_ptr[op + 1] > s.ssucc_ptr[op])


cdef inline void _node_rates(State* s, int32_t node) noexcept nogil:
    """The rates of a node's compute unit and of its memory units, after its held compute
    units, its busy memory units or their demands changed: compute at (units - held) / units
    of peak; the memory shared max-min fairly among compute's traffic (unit 1),
    communication's (units 5 and 7 as one, in equal parts between them) and transfers' (unit
    6), each at most what it can use (see the top of this file), what is left over going in
    equal parts to the busy units of compute's traffic and of transfers."""
    cdef int32_t n = node * N_UNITS
    cdef int32_t k = s.sm_total[node]
    cdef int32_t h = s.sm_held[node]
    cdef double d[3]
    cdef double g[3]
    cdef int32_t u[3]
    cdef int32_t i, j, m = 0, left, soft = 0
    cdef double cap = 1.0, share, t, rc = 1.0, wc, wm
    cdef bint c5 = s.u_op[n + 5] >= 0, c7 = s.u_op[n + RECV_UNIT] >= 0
    cdef bint c8 = s.u_op[n + SEND_LANE2] >= 0, c9 = s.u_op[n + RECV_LANE2] >= 0
    cdef int32_t lanes = c5 + c7 + c8 + c9
    if k > 0:
        if h >= k:
            h = k - 1
        rc = (<double>(k - h)) / k
    if s.u_op[n + 1] >= 0:
        u[m] = 1
        d[m] = _roof_demand(s, n + 1, rc)
        m += 1
    if lanes:
        u[m] = 5
        d[m] = s.comm_cap[node] if s.comm_cap[node] < 1.0 else 1.0
        m += 1
    if s.u_op[n + 6] >= 0:
        u[m] = 6
        t = s.xfer_dem[node]           # (at least the running op's: sums drift in the last bit)
        if t < s.op_share[s.u_op[n + 6]]:
            t = s.op_share[s.u_op[n + 6]]
        d[m] = t if t < 1.0 else 1.0
        m += 1
    for i in range(m):                 # by demand, least first (three at most)
        for j in range(i + 1, m):
            if d[j] < d[i]:
                t = d[i]
                d[i] = d[j]
                d[j] = t
                left = u[i]
                u[i] = u[j]
                u[j] = left
    for i in range(m):                 # water-filling
        share = cap / (m - i)
        g[i] = d[i] if d[i] < share else share
        cap -= g[i]
        if u[i] != 5:
            soft += 1
    if cap > 1e-12 and soft > 0:       # what none of them can use: to compute's and transfers'
        share = cap / soft
        for i in range(m):
            if u[i] != 5:
                g[i] += share
    for i in range(m):
        if u[i] == 1 and g[i] < d[i] and s.u_op[n] >= 0 and s.u_op[n] == s.u_op[n + 1] - 1:
            # a roofline op's memory part given less than keeps pace with its compute part:
            # the compute part goes no faster than its data comes (they end together)
            wc = _left(s, n)
            wm = _left(s, n + 1)
            if wc > 0 and wm > 0 and g[i] * wc / wm < rc:
                rc = g[i] * wc / wm
                if rc < 1e-6:
                    rc = 1e-6
        if u[i] == 5:                  # communication's: its busy lanes in equal parts
            t = g[i] / lanes
            if c5:
                _set_rate(s, n + 5, t)
            if c7:
                _set_rate(s, n + RECV_UNIT, t)
            if c8:
                _set_rate(s, n + SEND_LANE2, t)
            if c9:
                _set_rate(s, n + RECV_LANE2, t)
        else:
            _set_rate(s, n + u[i], g[i])
    _set_rate(s, n, rc)
    if s.u_op[n + 1] < 0:
        s.u_rate[n + 1] = 1.0
    if not c5:
        s.u_rate[n + 5] = 1.0
    if s.u_op[n + 6] < 0:
        s.u_rate[n + 6] = 1.0
    if not c7:
        s.u_rate[n + RECV_UNIT] = 1.0
    if not c8:
        s.u_rate[n + SEND_LANE2] = 1.0
    if not c9:
        s.u_rate[n + RECV_LANE2] = 1.0


cdef inline int _start_compute(State* s, int32_t op) noexcept nogil:
    cdef int32_t n = s.op_node[op] * N_UNITS + s.op_unit[op]
    cdef int32_t r
    cdef int64_t dur = s.op_size[op]
    cdef int8_t kind = s.op_kind[op]
    cdef bint first = 0                # (its start, not its tail's or its bulk's return)
    s.node_busy[n] = 1
    if kind == OP_COMPUTE:
        if s.op_src != NULL and s.op_src[op] >= 0:     # a stream (see the top of this file)
            if s.op_wait[op] == 3:
                dur = s.op_tail[op]                     # its tail, its source finished
            elif s.op_wait[op] == 4:                    # its bulk again, after a tail
                s.op_wait[op] = 1
                dur = s.op_left[op]
            else:
                s.op_start[op] = s.now
                first = 1
                if s.op_finish[s.op_src[op]] < 0:      # its bulk, as its source's data comes
                    s.op_wait[op] = 1
                    dur = dur - s.op_tail[op] if dur > s.op_tail[op] else 0
        else:
            s.op_start[op] = s.now
            first = 1
    else:                              # a part of a roofline op's current slice
        r = op if kind == OP_ROOF else op - 1
        dur = _part(s.op_size[op], s.op_left[r], s.op_dst[r])
        if s.op_start[r] < 0:
            s.op_start[r] = s.now
            s.op_start[r + 1] = s.now
    s.u_op[n] = op
    s.u_work[n] = <double>dur
    s.u_t0[n] = s.now
    if s.op_unit[op] == 1 or s.op_unit[op] >= 5 or \
            (kind == OP_ROOF and s.u_op[n + 1] == op + 1):   # (its memory part's demand)
        _node_rates(s, s.op_node[op])
    _uh_set(s, n, _due(s, n))
    if first and s.ssucc_ptr != NULL and s.ssucc_ptr[op + 1] > s.ssucc_ptr[op]:
        return _stream_started(s, op)
    return 0


cdef inline int _queue_part(State* s, int32_t op) noexcept nogil:
    """A compute-like op (or roofline part) takes its unit (a free lane of it) now, or
    queues for it."""
    cdef int32_t h = _home(s.op_unit[op])
    cdef int32_t b = _lane2(h)
    cdef int32_t n = s.op_node[op] * N_UNITS + h
    if s.op_unit[op] == XFER_UNIT:     # a transfer's demand counts from when it waits
        s.xfer_dem[s.op_node[op]] += s.op_share[op]
    s.op_unit[op] = <int8_t>h
    if s.node_busy[n] and b >= 0 and not s.node_busy[n - h + b] and _streamed(s, op):
        s.op_unit[op] = <int8_t>b      # its unit's second lane
        return _start_compute(s, op)
    if s.node_busy[n]:
        s.op_next[op] = -1
        if s.cq_tail[n] < 0:
            s.cq_head[n] = op
        else:
            s.op_next[s.cq_tail[n]] = op
        s.cq_tail[n] = op
        if s.op_unit[op] == XFER_UNIT:
            _node_rates(s, s.op_node[op])
        return 0
    return _start_compute(s, op)


cdef inline void _grant(State* s, int32_t op) noexcept nogil:
    """Acquire op takes its gate now and finishes this cycle."""
    s.node_busy[s.op_node[op] * N_UNITS + s.op_unit[op]] = 1
    s.op_start[op] = s.now
    heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now, op)


cdef inline int _acquire(State* s, int32_t op) noexcept nogil:
    """Acquire op takes its gate, or waits for it behind the waiting acquires of higher or
    equal priority."""
    cdef int32_t n = s.op_node[op] * N_UNITS + s.op_unit[op]
    cdef int32_t q, prev = -1
    if not s.node_busy[n]:
        _grant(s, op)
        return 0
    q = s.cq_head[n]
    while q >= 0 and s.op_size[q] >= s.op_size[op]:
        prev = q
        q = s.op_next[q]
    s.op_next[op] = q
    if prev < 0:
        s.cq_head[n] = op
    else:
        s.op_next[prev] = op
    if q < 0:
        s.cq_tail[n] = op
    return 0


cdef inline void _release(State* s, int32_t op) noexcept nogil:
    """Release op frees its gate for the first waiting acquire, and finishes this cycle."""
    cdef int32_t n = s.op_node[op] * N_UNITS + s.op_unit[op]
    cdef int32_t q = s.cq_head[n]
    s.node_busy[n] = 0
    if q >= 0:
        s.cq_head[n] = s.op_next[q]
        if s.cq_head[n] < 0:
            s.cq_tail[n] = -1
        _grant(s, q)
    s.op_start[op] = s.now
    heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now, op)


cdef inline int _roof_slice(State* s, int32_t r) noexcept nogil:
    """Start the current slice of roofline op r: its compute part, its memory part, or both
    (a slice with neither is a compute part of no cycles)."""
    cdef int64_t k = s.op_left[r]
    cdef int64_t c = _part(s.op_size[r], k, s.op_dst[r])
    cdef int64_t h = _part(s.op_size[r + 1], k, s.op_dst[r])
    s.op_left[r + 1] = (1 if (c or not h) else 0) + (1 if h else 0)   # parts pending
    if c or not h:
        if _queue_part(s, r) != 0:
            return -1
    if h:
        if _queue_part(s, r + 1) != 0:
            return -1
    return 0


cdef inline int start_op(State* s, int32_t op) noexcept nogil:
    """An op whose dependencies have all finished (now) begins, or queues for its node."""
    cdef int32_t n
    cdef int64_t left, bytes_per_packet
    cdef int8_t kind = s.op_kind[op]
    if kind == OP_COMPUTE:
        return _queue_part(s, op)
    if kind == OP_ROOF:
        s.op_left[op] = 0
        return _roof_slice(s, op)
    if kind == OP_ACQUIRE:
        return _acquire(s, op)
    if kind == OP_RELEASE:
        _release(s, op)
        return 0
    s.op_start[op] = s.now
    if kind == OP_HOLD or kind == OP_UNHOLD:
        s.sm_held[s.op_node[op]] += s.op_size[op] if kind == OP_HOLD else -s.op_size[op]
        _node_rates(s, s.op_node[op])
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now, op)
        return 0
    if kind == OP_DELAY:
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now + s.op_size[op], op)
        return 0
    # send
    left = s.op_size[op]
    if left == 0:
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now, op)   # an empty message: delivered now
    elif s.flow_mode:
        if flow_start(s, op) != 0:
            return -1
    else:
        # flit level: the message joins the source NIC, which cuts it into packets as it goes
        bytes_per_packet = <int64_t>s.packet_flits_max * s.flit_bytes
        s.op_left[op] = (left + bytes_per_packet - 1) // bytes_per_packet
        s.msg_bytes[op] = left
        nic_add_message(s, s.op_node[op], op)
    if s.ssucc_ptr != NULL and s.ssucc_ptr[op + 1] > s.ssucc_ptr[op]:
        return _stream_started(s, op)
    return 0


cdef inline int _wake(State* s, int64_t* ptr, int32_t* ops, int32_t op) noexcept nogil:
    """The ops listed for op (ops[ptr[op]:ptr[op + 1]]) count it as done; those left with
    no dependency start."""
    cdef int64_t k
    cdef int32_t c
    for k in range(ptr[op], ptr[op + 1]):
        c = ops[k]
        s.op_deps[c] -= 1
        if s.op_deps[c] == 0:
            if start_op(s, c) != 0:
                return -1
    return 0


cdef inline int _stream_started(State* s, int32_t op) noexcept nogil:
    """op started now: the ops streaming its data count it as done for starting. Depth
    first, as a recursion through start_op would go, but on a stack of its own (sstk_*): a
    stream that starts one that starts another ... (a message forwarded on along 100,000
    nodes) would overflow the C stack. A call made while the stack is walked (start_op of
    a stream's op) pushes its op; the outermost call walks."""
    cdef int64_t k
    cdef int32_t c, top
    cdef bint outer = s.sstk_n == 0
    s.sstk_op[s.sstk_n] = op
    s.sstk_k[s.sstk_n] = s.ssucc_ptr[op]
    s.sstk_n += 1
    if not outer:
        return 0
    while s.sstk_n > 0:
        top = s.sstk_n - 1
        k = s.sstk_k[top]
        if k == s.ssucc_ptr[s.sstk_op[top] + 1]:
            s.sstk_n = top
            continue
        s.sstk_k[top] = k + 1
        c = s.ssucc[k]
        s.op_deps[c] -= 1
        if s.op_deps[c] == 0:
            if start_op(s, c) != 0:
                s.sstk_n = 0
                return -1
    return 0


cdef inline int _tail(State* s, int32_t c) noexcept nogil:
    """Unit op c's tail, its source finished: it runs now, ahead of every op waiting for
    its unit, and a bulk running there (which runs ahead of its own data) gives the unit up
    to it, to resume after it (the last packet of data that has all arrived goes before
    work on data still arriving)."""
    cdef int32_t h = _home(s.op_unit[c])
    cdef int32_t base = s.op_node[c] * N_UNITS
    cdef int32_t n = base + h          # (where its unit's queue is)
    cdef int32_t lane[2]
    cdef int32_t r, i, m
    cdef double w
    s.op_wait[c] = 3
    lane[0] = h
    lane[1] = _lane2(h)
    m = 2 if lane[1] >= 0 else 1       # (c is a stream: it may take either lane)
    for i in range(m):                 # a free lane
        if not s.node_busy[base + lane[i]]:
            s.op_unit[c] = <int8_t>lane[i]
            return _start_compute(s, c)
    for i in range(m):                 # a lane running a bulk
        r = s.u_op[base + lane[i]]
        if r >= 0 and s.op_kind[r] == OP_COMPUTE and s.op_src[r] >= 0 and \
                s.op_wait[r] == 1:
            w = _left(s, base + lane[i])   # the bulk's work left, kept for its return
            s.op_left[r] = <int64_t>w + (1 if w > <int64_t>w else 0)
            s.op_wait[r] = 4
            s.node_busy[base + lane[i]] = 0
            s.u_op[base + lane[i]] = -1
            _uh_remove(s, base + lane[i])
            s.op_unit[r] = <int8_t>h
            s.op_next[r] = s.cq_head[n]
            s.cq_head[n] = r
            if s.cq_tail[n] < 0:
                s.cq_tail[n] = r
            s.op_unit[c] = <int8_t>lane[i]
            return _start_compute(s, c)
    s.op_unit[c] = <int8_t>h
    s.op_next[c] = s.cq_head[n]        # first in the queue
    s.cq_head[n] = c
    if s.cq_tail[n] < 0:
        s.cq_tail[n] = c
    return 0


cdef inline int _stream_done(State* s, int32_t op) noexcept nogil:
    """op finished now: the ops streaming its data that wait for it take their tails (a
    unit op's first, _tail; a send finishes op_tail cycles on)."""
    cdef int64_t k
    cdef int32_t c
    for k in range(s.ssucc_ptr[op], s.ssucc_ptr[op + 1]):
        c = s.ssucc[k]
        if s.op_wait[c] != 2:
            continue
        if s.op_kind[c] == OP_SEND:
            s.op_wait[c] = 3
            heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now + s.op_tail[c], c)
        elif _tail(s, c) != 0:
            return -1
    return 0


cdef inline int finish_op(State* s, int32_t op) noexcept nogil:
    """op finished now: free its node (compute) and start the successors it was the last
    dependency of."""
    cdef int32_t n, q, r, h
    cdef int8_t kind = s.op_kind[op]
    if kind != OP_COMPUTE and kind != OP_ROOF and kind != OP_ROOF_MEM:
        if kind == OP_SEND and s.op_src != NULL and s.op_src[op] >= 0 and \
                s.op_finish[s.op_src[op]] < 0:
            s.op_wait[op] = 2          # its data all sent before its source has it all
            return 0
        s.op_finish[op] = s.now
        s.ops_done += 1
    else:
        n = s.op_node[op] * N_UNITS + s.op_unit[op]     # (its lane)
        s.node_busy[n] = 0
        s.u_op[n] = -1
        _uh_remove(s, n)
        h = s.op_node[op] * N_UNITS + _home(s.op_unit[op])   # (its unit's queue)
        if s.op_unit[op] == XFER_UNIT:
            s.xfer_dem[s.op_node[op]] -= s.op_share[op]
        if kind == OP_COMPUTE and s.op_src != NULL and s.op_src[op] >= 0 and \
                s.op_wait[op] == 1 and s.op_finish[s.op_src[op]] >= 0:
            return _tail(s, op)        # a bulk done after its source: its tail at once,
                                       # before the ops queued for the unit
        q = s.cq_head[h]
        if q >= 0 and h != n and not _streamed(s, q):
            q = -1                     # (a second lane: it waits for the first)
        if q >= 0:
            s.cq_head[h] = s.op_next[q]
            if s.cq_head[h] < 0:
                s.cq_tail[h] = -1
            s.op_unit[q] = s.op_unit[op]
            if _start_compute(s, q) != 0:
                return -1
        elif s.op_unit[op] == 1 or s.op_unit[op] >= 5:
            _node_rates(s, s.op_node[op])
        if kind == OP_ROOF and s.u_op[n + 1] == op + 1:   # its memory part, alone now
            _node_rates(s, s.op_node[op])
        if kind == OP_COMPUTE and s.op_src != NULL and s.op_src[op] >= 0 and \
                s.op_wait[op] == 1:    # a stream's bulk done before its source: the unit
            s.op_wait[op] = 2          # given up, its tail when its source finishes
            return 0
        if kind == OP_COMPUTE:
            s.op_finish[op] = s.now
            s.ops_done += 1
        else:                          # a part of a roofline op's slice
            r = op if kind == OP_ROOF else op - 1
            s.op_left[r + 1] -= 1
            if s.op_left[r + 1] > 0:
                return 0
            s.op_left[r] += 1
            if s.op_left[r] < s.op_dst[r]:
                return _roof_slice(s, r)
            s.op_finish[r] = s.now
            s.op_finish[r + 1] = s.now
            s.ops_done += 2
            op = r
    if s.ssucc_ptr != NULL and s.ssucc_ptr[op + 1] > s.ssucc_ptr[op]:
        if _stream_done(s, op) != 0:
            return -1
    return _wake(s, s.succ_ptr, s.succ, op)


cdef inline int ops_due(State* s) noexcept nogil:
    """Finish every op due this cycle, in (cycle, op id) order: the units' running ops and
    the delays and flows of the op heap."""
    cdef int32_t op, u
    cdef cycle_t tu
    while True:
        if s.uh_n > 0 and s.uh_time[0] <= s.now:
            u = s.uh_unit[0]
            tu = s.uh_time[0]
            if s.oh_n > 0 and (s.oh_time[0] < tu or
                               (s.oh_time[0] == tu and s.oh_op[0] < s.u_op[u])):
                op = s.oh_op[0]
                heap_pop(s.oh_time, s.oh_op, &s.oh_n)
            else:
                op = s.u_op[u]
        elif s.oh_n > 0 and s.oh_time[0] <= s.now:
            op = s.oh_op[0]
            heap_pop(s.oh_time, s.oh_op, &s.oh_n)
        else:
            return 0
        if finish_op(s, op) != 0:
            return -1
