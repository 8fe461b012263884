# C typedefs, constants and the engine's state, shared by every csim module.
# Units are in the names: *_cycles are network-clock cycles, *_t are absolute cycle stamps.
from libc.stdint cimport int8_t, uint8_t, int32_t, int64_t, uint64_t

ctypedef int64_t cycle_t

# channel kinds
cdef enum:
    CH_NET = 0       # router -> router
    CH_INJECT = 1    # NIC -> router (the router's injection input port)
    CH_EJECT = 2     # router -> NIC (the router's ejection output port)

# input-VC states
cdef enum:
    VC_IDLE = 0      # no packet being routed; the front flit, if any, is a head
    VC_ROUTING = 1   # head routed, waiting for an output VC (ready_t = first VA cycle)
    VC_ACTIVE = 2    # output VC held (ready_t = first SA cycle of the head)

# output-VC owner markers (owner >= 0 is the input VC, or the NIC's node, holding it)
cdef enum:
    OVC_FREE = -1
    OVC_TAIL_PENDING = -2   # tail sent, waiting for its credit (wait_for_tail_credit)

# event kinds stored in ev_seq (>= 0 is the flit's sequence number in its packet)
cdef enum:
    EV_CREDIT = -1
    EV_TAIL_CREDIT = -2

# generation modes and processes
cdef enum:
    GEN_NONE = 0
    GEN_SYNTHETIC = 1
    GEN_TRACE = 2
    PROC_BERNOULLI = 0
    PROC_ONOFF = 1
    PAT_PERM = 0
    PAT_UNIFORM = 1

# run() status codes
cdef enum:
    ST_UNTIL = 0       # reached the requested cycle
    ST_DONE = 1        # the stop condition held
    ST_DEADLOCK = 2    # flits buffered and none moved for watchdog_cycles
    ST_BACKLOG = 3     # more packets alive than max_packets (saturated far beyond recovery)
    ST_NOMEM = 4       # an allocation failed
    ST_PROTOCOL = 5    # an internal invariant broke (see counters)

cdef enum:
    STOP_NONE = 0
    STOP_MEASURED = 1  # all measured packets delivered
    STOP_ALL = 2       # nothing left anywhere: every generated packet delivered, no more to come

cdef extern from "_consts.h":
    cycle_t NEVER "CSIM_NEVER"

cdef struct Event:           # a flit arriving (seq >= 0) or a credit returning (seq < 0)
    int32_t ch
    int32_t vc
    int32_t pkt
    int32_t seq

cdef struct Flit:            # one buffer slot
    int32_t pkt
    int32_t seq
    cycle_t arr              # cycle the flit was written into the buffer

cdef struct State:
    # ---- sizes and router parameters
    int32_t n_nodes, n_ch, V, D, n_ivc, n_ep
    int32_t routing_delay, va_delay, sa_delay, st_delay
    int32_t wait_tail
    int32_t n_classes, vpc
    cycle_t now
    cycle_t watchdog_cycles
    int64_t max_packets

    # ---- channels (directed; net, inject and eject)
    int32_t* ch_src
    int32_t* ch_dst
    int8_t* ch_kind
    int32_t* ch_lat
    int64_t* ch_num       # serialisation credit earned per cycle (fixed point)
    int64_t* ch_den       # credit one flit costs (fixed point)
    int64_t* ch_acc       # earned credit, capped at ch_den
    cycle_t* ch_acc_t     # cycle at which ch_acc was last brought up to date
    int32_t* ch_dim
    uint8_t* ch_dateline
    int32_t* ch_local_in  # index of the channel among its destination router's inputs
    int32_t* ch_nbuf      # flits buffered at the channel's downstream input port
    int64_t* ch_flits     # flits sent on the channel, ever
    int32_t* sa_in_ptr    # per input port: round-robin VC pointer
    int32_t* sa_out_ptr   # per output port: round-robin input pointer
    int32_t* out_best     # scratch, -1 between uses
    int32_t* out_best_dist

    # ---- routers
    int32_t* r_in_ptr
    int32_t* r_in_ch
    int32_t* r_nbuf
    int32_t* r_va_wait    # input VCs holding flits but no output VC (need VA)
    int32_t* rt           # [node * n_nodes + dst] -> output channel
    int64_t nbuf_total

    # ---- input VCs (index c * V + v) and their buffers (index ivc * D + slot)
    int32_t* ivc_cnt
    int32_t* ivc_head
    Flit* buf
    int8_t* ivc_state
    cycle_t* ivc_ready
    int32_t* ivc_out_ch
    int32_t* ivc_out_vc
    int32_t* ivc_lo
    int32_t* ivc_hi
    cycle_t* ivc_free_t

    # ---- output VCs (index c * V + v, held at the channel's upstream end)
    int32_t* ovc_owner
    int32_t* ovc_credits
    int32_t* ovc_va_ptr
    int32_t* ovc_best
    int32_t* ovc_best_dist

    # ---- scratch lists
    int32_t* touched

    # ---- event wheel (flit arrivals and credit returns): one growable array per cycle slot
    int32_t wheel_size
    int32_t wheel_now         # now % wheel_size
    Event** wh_buf
    int32_t* wh_len
    int32_t* wh_cap
    int64_t n_events

    # ---- packets, pooled
    int32_t pk_cap, pk_free
    int64_t pk_alive
    int32_t* pk_src
    int32_t* pk_dst
    int32_t* pk_len
    cycle_t* pk_create
    cycle_t* pk_inject
    int32_t* pk_hops
    int32_t* pk_class
    int32_t* pk_dim
    int32_t* pk_next
    int32_t* pk_ej
    int64_t* pk_tag
    uint8_t* pk_meas

    # ---- NICs (index: node), endpoints (index: ep)
    int32_t* ep_node
    int32_t* node_ep
    int32_t* nic_inj_ch
    int32_t* nic_qhead
    int32_t* nic_qtail
    int32_t* nic_qlen
    int32_t* nic_cur
    int32_t* nic_seq
    int32_t* nic_vc
    int32_t* nic_rr
    int64_t nic_busy        # NICs with a queued or partly sent packet

    # ---- generation
    int32_t gen_mode
    cycle_t gen_stop
    int32_t proc, pat_mode, include_self
    double p_inject, p_on, q_on_end, q_off_end, duty
    int32_t* perm
    int32_t* hot
    int32_t n_hot
    double hot_frac
    int32_t n_sizes
    int32_t* size_val
    double* size_cdf
    cycle_t* hp_time
    int32_t* hp_ep
    int32_t hp_n
    cycle_t* on_end
    uint64_t rng[4]
    # trace
    int64_t tr_n, tr_pos
    cycle_t* tr_time
    int32_t* tr_src
    int32_t* tr_dst
    int32_t* tr_len
    cycle_t* tr_deliver
    cycle_t* tr_inject
    int32_t* tr_hops

    # ---- statistics
    cycle_t meas_start, meas_end
    int64_t meas_created, meas_done, meas_created_flits
    int64_t win_ejected_flits
    double occ_sum            # sum over window cycles of packets alive (Little's law)
    double sum_lat, sum_netlat, sum_hops, sum_lat_sq
    int64_t* hist_lat
    int64_t* hist_net
    int64_t hist_cap
    cycle_t max_lat, max_netlat
    int64_t flits_created, flits_injected, flits_ejected, packets_created, packets_done
    int64_t flit_hops
    int64_t bad_eject, buf_overflow, bad_front
    cycle_t last_progress
    cycle_t deadlock_t
