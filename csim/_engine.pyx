# The cycle engine. Owns the state arrays (numpy, kept alive here) and the pooled C arrays;
# run() steps cycles without the GIL and touches no Python object. This file holds the Engine
# class (the boundary pysim.engine drives); its code is included from one file per concern,
# all compiled into this one module (see the includes at the end).
cimport numpy as cnp
import numpy as np
from cpython.exc cimport PyErr_CheckSignals
from libc.stdlib cimport calloc, free
from libc.stdint cimport intptr_t
from libc.math cimport INFINITY, fabs
from posix.time cimport clock_gettime, timespec, CLOCK_THREAD_CPUTIME_ID
from time import perf_counter
from csim._types cimport *
from csim._routes cimport route_next
from csim._rng cimport rng_seed
from csim._link cimport packet_free
from csim._nic cimport generate, nic_inject, nic_receive, next_generation, start_synthetic
from csim._router cimport buffer_write, vc_allocate, sw_allocate, va_join, sa_join
from csim._dag cimport start_op, finish_op, ops_due, next_op_event
from csim._flow cimport pair_dirty, pair_weigh, flow_rates, flow_next, flow_drains, flow_route, flow_grow, slot_alloc, \
    pair_link, _rates_full, _fx, _unfx, _rh_above

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
if _limits.VC_ARBITERS != {"round_robin": VA_ROUND_ROBIN, "own_index": VA_OWN_INDEX} or \
        _limits.SW_ARBITERS != {"outputs": SA_OUTPUTS, "vcs": SA_VCS}:
    raise ImportError("csim.limits' arbiters differ from those csim._engine was compiled "
                      "with: rebuild the extension")
STATUS = {ST_UNTIL: "until", ST_DONE: "done", ST_DEADLOCK: "deadlock",
          ST_BACKLOG: "backlog", ST_NOMEM: "nomem", ST_PROTOCOL: "protocol"}
STOP = {"none": STOP_NONE, "measured": STOP_MEASURED, "all": STOP_ALL}


cdef class Engine:
    """One simulated network. Build it with the arrays pysim.network compiles.

    Parameters (all in a dict `net`): n_nodes, vcs, buffer_flits, routing_delay,
    vc_alloc_delay, sw_alloc_delay, st_delay, injection_delay (a NIC's choice of a flit to
    its entering the injection channel), wait_for_tail_credit, n_classes,
    watchdog_cycles, max_packets, and per channel ch_src, ch_dst, ch_kind, ch_lat_cycles,
    ch_num, ch_den (flit serialisation as integer credit earned per cycle / cost per flit),
    ch_group, ch_order (VC classes, see _router.route), ch_out_idx (a channel's index among
    its router's outputs: the switch allocator's round-robin order over them), va_arbiter and
    sa_arbiter (the allocators' input arbiters, VA_* and SA_* of _types.pxd), node_pos (None, or per node its
    position in each VC-class group), entry_class, tie_k, ch_rev and tie_seed (see
    _router.route and State); rt (n_nodes * n_nodes output channel per (node, destination)),
    or instead a rule, route (a csim RouteRule: csim/_routes.pxd);
    ep_node (endpoint index -> node), nic_inj_base and nic_inj_n (node -> its injection
    channels, contiguous ids), ch_par_n (a parallel group's members have consecutive ids, and
    rt names the first).
    """
    cdef State s
    cdef list _keep
    cdef dict _arr
    cdef int _mode
    cdef tuple _vc_args
    cdef tuple _ch_args

    def __cinit__(self):
        self.s.wh = NULL
        self.s.ch = NULL
        self.s.wheel_size = 0
        self.s.pk = NULL
        self.s.hist_lat = NULL
        self.s.hist_net = NULL
        self.s.nic_fifo = 0
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

    def _own(self, name, values, dtype, fill=None, size=None, share=False):
        """Keep a contiguous numpy array alive for the engine's lifetime; return it. Its data
        starts on a 64-byte boundary, so records of 64 and 128 bytes (IVC, Chan) each sit in
        whole cache lines whatever the allocator returns (numpy's arrays sometimes start 16
        bytes past one). share: a table the engine only reads (the route table, an entry per
        pair of nodes: 1.5 GB at 16,384 GPUs), kept as given where it is contiguous and of
        the dtype already, not copied."""
        if values is None:               # (zeroed by the allocator, page by page as used:
            dt = np.dtype(dtype)         # the flow level never touches most of a channel's)
            nbytes = max(int(size), 1) * dt.itemsize
            raw = np.zeros(nbytes + 64, dtype=np.uint8)
            off = -raw.ctypes.data % 64
            a = raw[off:off + nbytes].view(dt)
            if fill:
                a.fill(fill)
            self._keep.append(a)
            self._arr[name] = a
            return a
        a = np.ascontiguousarray(values, dtype=dtype)
        if a.size == 0:
            a = np.zeros(1, dtype=dtype)
        elif share and a.flags.aligned:
            self._keep.append(a)
            self._arr[name] = a
            return a
        raw = np.empty(a.nbytes + 64, dtype=np.uint8)
        off = -raw.ctypes.data % 64
        aligned = raw[off:off + a.nbytes].view(a.dtype)
        aligned[...] = a.reshape(-1)
        a = aligned
        self._keep.append(a)
        self._arr[name] = a
        return a

    def __init__(self, dict net):
        self._keep = []
        self._arr = {}
        self._mode = GEN_NONE
        _setup_network(self, net)

    # ------------------------------------------------------------------ workloads

    def set_synthetic(self, *, uint64_t seed, str process, double p_inject, double p_on,
                      double q_on_end, double q_off_end, double duty, str pattern,
                      bint include_self, perm, hot, double hot_frac, sizes, size_cdf,
                      cycle_t start=0, stop=None):
        """Synthetic injection: per-endpoint Bernoulli or on/off arrivals, destinations drawn
        from a permutation or uniformly (optionally with a hotspot mixture)."""
        cdef State* s = &self.s
        _setup_vcs(self)
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
        _setup_vcs(self)
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
                  share=None, int nic_fifo=1, stream_src=None, tail=None,
                  int nic_per_link=0):
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
        can use of its node's memory bandwidth, a fraction in (0, 1] (default 1).

        nic_fifo: 1 (the default): a NIC sends its messages to one destination first in
        first out, one after another (at the flow level: a pair's flows drain in order, the
        pair weighing one flow), and shares its turns between destinations; 0: every message
        it holds takes its turn, packet by packet (flows of a pair share its rate).

        stream_src: per op, the op whose data it streams (csim/_dag.pxd), or -1 (None: no
        op does); such an op is not among its source's successors (succ) but counts it in
        `deps`, done when the source starts; tail: per op, a streaming op's work after its
        source finishes (a unit op's cycles at full rate; a send's cycles).

        nic_per_link: 0 (the default): a NIC's injection channels take the next packet in
        turn whatever its link; 1: a NIC of several injection channels gives each channel to
        one output link (first hop) at a time, while the router's buffers hold its packets
        (see csim/_nic.pxd, _pick_message), where there are at least two VCs. The flow level
        has no injection channels."""
        if flow is None:
            _setup_vcs(self)
        _set_graph(self, kind, node, dst, size, deps, succ_ptr, succ, packet_flits, flit_bytes,
                   unit, flow, sms, comm_hbm, share, nic_fifo, stream_src, tail, nic_per_link)

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
        reached after each slice. A slice is measured in work, not in simulated time: at
        the flit level the cycles stepped (at most 65,536; idle cycles jumped over are
        free), at the flow level the events (at most 4,096); so a long idle phase is one
        slice, and the slice after it does not grow with the idle cycles before it. A
        slice ends like any call with an earlier `until`, so slicing changes nothing in
        the simulation."""
        cdef int code = STOP[stop]
        cdef int st = ST_UNTIL
        cdef int64_t step = 4096 if not self.s.flow_mode else 64
        cdef double t0, dt
        if not self.s.flow_mode:
            _setup_vcs(self)
        while True:
            t0 = perf_counter()
            with nogil:
                if self.s.flow_mode:
                    st = _run_flow(&self.s, until, step)
                else:
                    st = _run(&self.s, until, code, step)
            if st != ST_UNTIL or self.s.now >= until:
                return STATUS[st]
            PyErr_CheckSignals()
            if progress is not None:
                progress(self.s.now)
            dt = perf_counter() - t0       # the next slice: about 0.1 s at this pace
            if dt < 0.025:
                step = min(step * 4, (<int64_t>1 << 12) if self.s.flow_mode else
                           (<int64_t>1 << 16))
            elif dt > 0.2:
                step = max(step // 2, 1 if self.s.flow_mode else 64)

    @property
    def now(self):
        return self.s.now

    # ------------------------------------------------------------------ reading results

    def counters(self):
        """Totals so far. flits_ejected counts a packet's last flit when it reaches the NIC and
        its other flits when they leave the last router (their arrival is never an event);
        win_ejected_flits counts flits by their arrival cycle either way."""
        return _counters(self)

    def channel_flits(self, at=None):
        """Flits sent on each channel since the start (a copy); with `at`, on those channels
        alone, in that order."""
        return _channel_flits(self, at)

    def channel_owed(self, t, start=False):
        """Per channel (float64): cycles of the serialisation of flits already sent that lie
        after cycle t (0 for full-rate channels and at the flow level); with `start`, for a
        window opening at t (see _channel_owed)."""
        return _channel_owed(self, t, start)

    def vc_flits(self):
        """Flits written into each input VC's buffer since the start: (channels, vcs), a
        network or injection channel's VCs at its downstream router (0 for ejection
        channels)."""
        return _vc_flits(self)

    def latency_histograms(self):
        """Counts of measured packets by packet latency and by network latency (cycles)."""
        return _latency_histograms(self)

    def trace_results(self):
        """Per trace packet: tail delivery cycle, head injection cycle, router hops (-1 if
        not delivered)."""
        return _trace_results(self)

    def snapshot(self):
        """The buffer, VC and credit state, and everything in flight, as numpy arrays."""
        _setup_vcs(self)
        return _snapshot(self)



include "_engine_setup.pxi"
include "_engine_step.pxi"
include "_engine_ops.pxi"
include "_engine_flow.pxi"
include "_engine_stats.pxi"
include "_engine_routes.pxi"
