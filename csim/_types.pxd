# C typedefs, constants and the engine's state, shared by every csim module.
# Units are in the names: *_cycles are network-clock cycles, *_t are absolute cycle stamps.
from libc.stdint cimport int8_t, uint8_t, int16_t, int32_t, uint32_t, int64_t, uint64_t

ctypedef int64_t cycle_t

cdef extern from *:
    ctypedef long long i128 "__int128"   # fixed-point sums of the flow solver (2^-64 units)

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

# the allocators' input arbiters, by name in csim.limits (VC_ARBITERS, SW_ARBITERS)
cdef enum:
    VA_ROUND_ROBIN = 0   # VC allocation: a head asks from its input VC's round-robin pointer
    VA_OWN_INDEX = 1     #   (BookSim's), or from its input VC's own index
cdef enum:
    SA_OUTPUTS = 0       # switch allocation: an input port's arbiter turns over the router's
    SA_VCS = 1           #   outputs (BookSim's), or over its VCs

# generation modes and processes
cdef enum:
    GEN_NONE = 0
    GEN_SYNTHETIC = 1
    GEN_TRACE = 2
    OP_COMPUTE = 0           # op kinds of an op graph
    OP_SEND = 1
    OP_DELAY = 2
    OP_ROOF = 3              # a roofline op, run in slices: its compute parts (unit 0) ...
    OP_ROOF_MEM = 4          # ... and, as the next op id, its memory parts (unit 1)
    OP_ACQUIRE = 5           # takes a gate (a unit held until a release), by priority
    OP_RELEASE = 6           # frees a gate
    OP_HOLD = 7              # a collective takes `size` of its NPU's compute units (SMs) ...
    OP_UNHOLD = 8            # ... and gives them back
    N_UNITS = 10             # per node: 0 compute, 1 memory (HBM), 2 collectives engine,
                             # 3 a gate (a queue that orders work: see _dag.pxd),
                             # 4 the compute units held by NPU-run collectives,
                             # 5 communication's share of the memory (HBM): what it sends,
                             # 6 memory transfers' share of it (DMA to and from memory nodes),
                             # 7 communication's share for what it receives (beside unit 5,
                             #   the two within one budget),
                             # 8 and 9 the second lanes of units 5 and 7 (one queue each
                             #   with its first lane: see _dag.pxd)
    XFER_UNIT = 6
    RECV_UNIT = 7
    SEND_LANE2 = 8
    RECV_LANE2 = 9
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
    int32_t FLIT_TAIL "CSIM_FLIT_TAIL"  # set in a flit's seq when it is its packet's last
    int32_t EJECT_CREDITS "CSIM_EJECT_CREDITS"   # an ejection VC never runs out of credits
    int32_t ctz64 "CSIM_CTZ64"(uint64_t x) nogil  # index of the lowest set bit (x != 0)
    bint unlikely "CSIM_UNLIKELY"(bint x) nogil   # x, hinted false (errors, rare paths)

cdef struct Event:           # a flit arriving (seq >= 0) or a credit returning (seq < 0)
    int32_t ch
    int32_t vc               # (-1 for a flit reaching its NIC)
    int32_t pkt
    int32_t seq

cdef struct Slot:            # the event wheel's bucket for one cycle
    Event* ev
    int32_t len
    int32_t cap


cdef struct Flit:            # one buffer slot
    int32_t pkt
    int32_t seq              # position in its packet, | FLIT_TAIL on the last flit

cdef struct Chan:            # a directed channel: its link, and both of its ports (128 bytes;
                             # what switch allocation touches is in the first 64)
    cycle_t next_ok          # first cycle at which the serialisation credit is back to a flit
    int64_t flits            # flits sent, ever
    int32_t cdelay           # a buffer slot freed downstream to its credit upstream, cycles
    int32_t sa_out_ptr       # output port: round-robin input pointer
    int32_t out_best         # scratch (-1 between uses): switch allocation winner,
    int32_t out_best_dist    #   its round-robin distance
    int32_t out_best_in      #   and its input port (index among the router's inputs)
    int32_t fdelay           # switch allocation to the flit's arrival downstream, cycles
    int32_t out_idx          # output port: its index among its router's outputs
    int32_t sa_in_optr       # input port: round-robin pointer over the router's outputs
    int32_t dst              # downstream router (or NIC's node)
    int32_t par_n            # parallel channels with the same ends (consecutive ids)
    int8_t kind
    int8_t full_rate         # at least one flit per cycle: no serialisation credit kept
    int8_t sa_in_ptr         # input port: round-robin VC pointer
    int8_t cur_vc            # injection channels: the VC of the packet being sent
    int32_t src              # upstream router (or NIC's node)
    int32_t gap_k            # slower channels: from a send to the next, gap_k cycles, or
                             #   gap_k - 1 when the credit left is at least gap_thr
    int32_t group            # VC-class group (a dimension); entering a new group -> class 0
                             #   (or 1, by the nodes' positions in it: State.node_pos)
    int32_t order            # VC-class order: taking a channel of lower order -> next class
    int32_t cur_pkt          # injection channels: packet being sent (-1: none),
    int32_t cur_seq          #   its next flit,
    int32_t vc_rr            #   and the round-robin pointer for the next packet's VC
    int64_t gap_thr          #   (see gap_k)
    int64_t num              # serialisation credit earned per cycle (fixed point)
    int64_t den              # credit one flit costs (fixed point)
    int64_t acc              # credit held
    cycle_t acc_t            # cycle at which acc was last brought up to date

cdef struct IVC:             # an input virtual channel and its buffer's bookkeeping (64 B)
    int32_t cnt
    int32_t head             # buffer slot of the front flit
    int32_t out_ch           # the output VC it holds (VC_ACTIVE): its channel,
    int32_t out_ov           #   and its index out_ch * V + out_vc
    int32_t mw               # its bit in the router's switch-allocation candidates: word
    int32_t r                # (the router it belongs to)
    int32_t c                # (its channel,
    int8_t v                 #  and its VC on it)
    int8_t out_vc            # the output VC it holds, on out_ch
    int8_t mb                # bit mb of sa_mask[mw]
    int8_t state
    int16_t lo, hi           # VC range of the packet's class on out_ch
    int32_t va_in_ptr        # VC allocation: round-robin pointer over output VCs (an index
                             #   out_ch * V + vc; the one after the last granted)
    cycle_t ready            # VC_ROUTING: first VA cycle; VC_ACTIVE: head's first SA cycle
    cycle_t free_t           # cycle after the previous tail left
    int64_t flits            # flits written into its buffer, ever

cdef struct OVC:             # an output virtual channel, held at the channel's upstream end
    int32_t owner
    int32_t credits
    int32_t va_ptr
    int32_t best             # scratch (-1 between uses): VC allocation winner (its round-robin
                             #   distance in State.va_best_dist; OVC stays 16 bytes)

cdef struct Packet:           # 64 bytes: one cache line
    int32_t dst, length
    int32_t hops, group, last_order   # hops: router-to-router channels taken (by the head)
    int8_t cls               # VC class (< n_classes <= 64)
    uint8_t meas             # created in the measurement window
    int64_t serial           # creation order: picks among parallel channels
    int32_t next             # source-queue / free-list link
    int32_t ej               # flits ejected so far
    int32_t tag              # trace index, or -1
    int32_t op               # the send op it belongs to, or -1
    cycle_t create, inject

cdef struct Flow:            # a message in flight at the flow level (csim/_flow.pxd)
    double v                 # its pair's per-flow service at which its last byte is carried
    cycle_t lat              # cycles from then to its op's finish
    int32_t op               # its send op
    int32_t left, right      # its pair's leftist heap of flows, by v (then op)
    int32_t rank             #   (the heap's null-path length)
    int32_t nxt              # free-list link


cdef struct Pair:            # the messages in flight from one source to one destination
    double service           # bytes carried per flow since the pair last became active
    double rate              # bytes per cycle per flow: its max-min fair share
    double solo              # a flow's rate alone on the route: its least capacity
    cycle_t t_upd            # cycle at which service was last brought up to date
    int64_t mark             # recomputation stamp (in the component being recomputed)
    int32_t src, dst, cap    # ends, and its (source, destination) cap resource or -1
    int32_t n                # flows (the pair's weight on each of its resources)
    int32_t root             # heap of its flows (-1: none)
    int32_t slot             # its route's slot while it has flows (-1: none)
    int32_t rlen             # resources on its route (entries slot * hmax ...)
    int32_t m                # channels of its bottleneck (packets that cross it at once)
    int8_t stream            # its bottleneck is a VC class of one VC (packets one at a time)
    double lane              # its slowest channel's rate (a group's capacity over its lanes)
    int32_t hpos             # position in the drain heap (-1: not in it)
    int8_t frozen            # progressive filling: rate fixed
    int8_t dirty             # its flows changed since the last recomputation
    int32_t bott             # the resource its rate was fixed at (its bottleneck), or -1
    int32_t queued           # its flows (n: those sharing its rate; 1 when served in order)
    double prev              # its rate before the recomputation under way
    double urate             # the rate its resources' sums and heaps hold for it,
    i128 ufx                 #   and in fixed point
    int32_t bnext, bprev     # its resource of bottleneck's list of pairs (Pair.bott)
    double vtail             # in order: the service at which its last flow is done


cdef struct Res:             # the flow solver's state of a resource (128 bytes: two cache
    i128 used                #   lines, those a check reads in the first): the sum of its
    double cap               #   pairs' rate x flows in fixed point; its capacity (bytes per
    double top               #   cycle); the highest rate on it (its heap's top);
    double bmin              # a bound below the rates of the pairs whose bottleneck it is;
    double fixed             # scratch: the rate the recomputation fixed its pairs at, or -1;
    int32_t bhead            # the first pair whose bottleneck it is (-1: none);
    int32_t hn               # the entries in its heap;
    int32_t ahead            # scratch: first route entry of a pair being recomputed;
    int32_t unf              # scratch of the recomputation: flows not yet frozen,
    double left              #   capacity not yet given,
    int64_t mark             #   the stamp of the recomputation that reached it;
    int32_t* hp              # its max-heap of route entries by rate (malloc'd),
    int32_t hcap             #   and its room
    int32_t pad0
    int64_t pad1, pad2, pad3


cdef enum:
    RT_TABLE = 0     # routes: a table of every (node, destination) pair
    RT_DOR = 1       # dimension order on a mesh, ring or torus, from the nodes' coordinates
    RT_ROWS = 2      # a shared row per kind of node plus the node's offset, and exceptions


cdef struct Routes:          # how a router finds its output channel (csim/_routes.pxd)
    int32_t kind             # RT_TABLE, RT_DOR or RT_ROWS
    int64_t n                # nodes
    int32_t* tab             # RT_TABLE: [node * n + dst]
    int32_t nd               # RT_DOR: dimensions; per dimension its size and whether it has
    int32_t* dims            #   wrap-around links; per node its coordinates [node * nd + dim]
    int32_t* wrap            #   and its channels [(node * nd + dim) * 2 + (0: +, 1: -)]
    int32_t* coords
    int32_t* chan
    int32_t bidir            #   links both ways (else + only, round the ring)
    int32_t dateline         #   the shorter way round where a dimension wraps (else the
                             #   sign of the difference)
    int32_t* cls             # RT_ROWS: per node its row, vec[cls[node] * n + dst] + off[node]
    int32_t* off             #   (a row's -1: no route), unless [node, dst] is among the
    int32_t* vec             #   node's exceptions exc_d[exc_ptr[node] .. exc_ptr[node + 1]]
    int64_t* exc_ptr         #   (ascending), whose channel is exc_c at the same index
    int32_t* exc_d
    int32_t* exc_c
    int32_t* tmap            # RT_DOR, RT_ROWS: the channel returned for a rule's (NULL: it)
    int32_t* diag            # RT_DOR, RT_ROWS: per node, what [node, node] gives (NULL: -1)


cdef struct State:
    # ---- sizes and router parameters
    int32_t n_nodes, n_ch, V, D, n_ivc, n_ep
    int32_t routing_delay, va_delay, sa_delay, st_delay
    int32_t wait_tail
    int32_t va_arbiter       # VC allocation's input arbiter: VA_ROUND_ROBIN, VA_OWN_INDEX
    int32_t sa_arbiter       # switch allocation's input arbiter: SA_OUTPUTS, SA_VCS
    int32_t n_classes
    int32_t* class_lo        # VCs [class_lo[k], class_hi[k]) belong to class k
    int32_t* class_hi
    int32_t pos_groups       # > 0: nodes have a position in each of this many groups,
    int32_t* node_pos        #   node_pos[node * pos_groups + group]
    int32_t entry_cls        # a packet enters a group in class 1 where the router's position
                             #   is above its destination's (else class 0)
    int32_t* tie_k           # NULL, or per group: k > 0 if it is a ring of k (even) nodes on
                             #   which a packet at distance k/2 goes either way, at random
    int32_t* ch_rev          #   (then: per channel, the one leaving its router the other way
    uint64_t tie_seed        #   in its group; and the seed of the choice)
    cycle_t now
    cycle_t watchdog_cycles
    int64_t max_packets

    Chan* ch                 # per channel (made when a flit-level run first needs it:
                             #   Engine._setup_chans; NULL until then, and at the flow level)
    int8_t* ch_kind          # per channel, as columns (the network's arrays, shared): what
    int32_t* ch_dst          #   the flow level reads of a channel where it keeps no Chan
    int32_t* ch_group
    int32_t* ch_order
    int32_t* ch_par_n
    IVC* ivc
    OVC* ovc
    Flit* buf                # [ivc * D + slot]

    # ---- routers
    int32_t* r_in_ptr
    int32_t* r_in_ch
    int32_t* r_nbuf
    int32_t* r_nout          # outputs of each router (out_idx < r_nout)
    int32_t Vp, vshift       # V rounded up to a power of two, and its log2
    uint64_t vpmask          # Vp low bits set
    uint64_t* sa_mask        # switch allocation candidates: input VCs holding flits and an
    int32_t* r_mw            #   output VC with a credit, the head's VC allocation delay over:
                             #   router r's words r_mw[r] .. r_mw[r + 1] - 1, input port k's
                             #   VCs at bits k * Vp ... of them
    int32_t* r_va_wait       # input VCs holding flits but no output VC (need VA): count
    int32_t* va_list         # ... and which: router r's at va_list[r_in_ptr[r] * V ...]
    int32_t* va_pos          # position of an input VC in va_list, or -1
    cycle_t* r_wake          # earliest cycle at which the router's switch allocation can grant
    Routes rt                # (node, destination) -> output channel (csim/_routes.pxd)
    int64_t nbuf_total
    uint64_t* act_r          # routers with buffered flits: a bitmap (bit r % 64 of word
    int32_t act_r_words      #   r // 64), walked in router order, as the channel arrays are
    uint64_t* va_r           # routers with input VCs awaiting VC allocation: a bitmap, alike
    cycle_t* r_va_wake       # per router: earliest cycle at which VC allocation could grant
                             #   (heads joined, an output VC freed, or a request lost)
    # timers: a routed head joins VC allocation, and a head with an output VC joins switch
    # allocation, at the cycle its pipeline delay ends (so neither allocator meets heads
    # that are not ready yet). Per cycle slot, a list of input VCs linked through tm_next
    # (an input VC waits on at most one timer at a time); -1 ends a list
    int32_t tm_size          # a power of two, above the longest delay
    int32_t* tm_va           # [tm_size]: heads that join VC allocation at that cycle
    int32_t* tm_sa           # [tm_size]: heads that become switch candidates at that cycle
    int32_t* tm_next         # [n_ivc]

    int32_t* touched         # scratch list
    int32_t* va_best_dist    # per output VC: scratch, the VC allocation winner's distance

    # ---- event wheel (flit arrivals and credit returns): one growable array per cycle slot
    int32_t wheel_size       # a power of two
    int32_t wheel_now        # now % wheel_size
    Slot* wh
    int64_t n_events         # events on the wheel (kept per event: the idle check asks
                             #   every cycle, and summing the slots cost sparse runs 20%)

    # ---- packets, pooled
    Packet* pk
    int32_t pk_cap, pk_free
    int64_t pk_alive

    # ---- NICs (index: node), endpoints (index: ep)
    int32_t* ep_node
    int32_t* nic_inj_base    # a NIC's injection channels: nic_inj_base .. + nic_inj_n - 1
    int32_t* nic_inj_n
    int32_t* nic_qhead
    int32_t* nic_qtail
    int32_t* nic_qlen
    int32_t* nic_sending     # injection channels with a packet under way
    int32_t* act_n           # NICs with a queued or partly sent packet (unordered)
    int32_t* act_n_pos
    int32_t nic_busy

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

    # ---- op graph (csim/_dag.pxd)
    int32_t n_ops
    int64_t ops_done
    int8_t* op_kind
    int32_t* op_node         # compute: the node; send: the source
    int32_t* op_dst
    int64_t* op_size         # compute, delay: cycles; send: bytes
    int32_t* op_deps         # dependencies not yet finished
    int64_t* succ_ptr        # successors, CSR
    int32_t* succ
    cycle_t* op_start
    cycle_t* op_finish
    int64_t* op_left         # send: packets not yet delivered
    int32_t* op_next         # per-node compute queue links
    int8_t* op_unit          # compute-like ops: which of the node's units they occupy
    int32_t* cq_head         # per (node, unit): queue of ready ops waiting for the unit
    int32_t* cq_tail
    uint8_t* node_busy       # per (node, unit): the unit is running an op
    int32_t* u_op            # per (node, unit): the op it runs (-1: none)
    double* u_work           # per (node, unit): cycles of work left at full rate, as of u_t0
    cycle_t* u_t0
    double* u_rate           # per (node, unit): the fraction of full rate it runs at now
    cycle_t* uh_time         # indexed heap of (finish cycle, op) of the running units
    int32_t* uh_unit
    int32_t* uh_pos          # per (node, unit): its place in that heap (-1: absent)
    int32_t uh_n
    int32_t* sm_total        # per node: compute units (SMs; 0: not modelled)
    int32_t* sm_held         # per node: units held by active NPU-run collectives
    double* comm_cap         # per node: communication's memory budget, a fraction of HBM
    double* op_share         # per op: what a transfer's route carries, a fraction of its
                             # node's memory bandwidth (unit 6's ops; see _dag.pxd)
    double* xfer_dem         # per node: op_share summed over unit 6's running and queued ops
    int32_t* op_src          # per op: the op whose data it streams (-1: none); NULL: no streams
    int64_t* ssucc_ptr       # per op: the ops that stream its data, CSR (NULL: no streams)
    int32_t* ssucc
    int64_t* op_tail         # per streaming op: its work after its source finishes (a unit
                             #   op's cycles at full rate; a send's cycles)
    uint8_t* op_wait         # per streaming op: 0, 1 running its bulk, 2 waiting for its
                             #   source, 3 its tail queued or running, 4 its bulk queued
                             #   again after another op's tail took the unit from it
    int32_t* sstk_op         # streams started depth first (_dag.pxd, _stream_started): per
    int64_t* sstk_k          #   level its op and its next stream successor's index in ssucc
    int32_t sstk_n           #   (levels in use; 0: none is walked)
    cycle_t* oh_time         # heap of (finish cycle, op) for delay ops and flows
    int32_t* oh_op
    int32_t oh_n
    int32_t packet_flits_max
    int32_t flit_bytes
    int32_t* op_done_q       # sends whose last packet arrived this cycle
    int32_t op_done_n
    int64_t* msg_bytes       # send: bytes not yet cut into packets
    int32_t* msg_next        # a NIC's messages being sent: a circular list, served in turn
    int32_t* nic_msg_cur     # per node: the message whose turn it is (-1: none)
    int32_t* nic_msg_prev    # per node: the one before it in the circle
    uint8_t* nic_cut_blocked # per node: no message could be cut, and nothing changed since
    int32_t nic_fifo         # 1: a NIC sends its messages to one destination in order
    int32_t nic_per_link     # 1: an op graph's NIC of several channels injects per link: a
                             #   channel carries packets for one first hop at a time
    int32_t* inj_hop         # per channel: an injection channel's first hop (a parallel
                             #   group's first channel) while its packets are in the router's
                             #   buffers (-1: none, or not yet seen to be empty)
    int32_t* msg_pnext       # in order: the message after this one to the same destination
    int32_t* pair_tail       # in order, per (source, destination) pair: its last message

    # ---- flow-level network (csim/_flow.pxd): sends carried as flows instead of packets
    int32_t flow_mode
    int32_t n_res            # resources: channel groups (numbered in the order of their
    double* rs_cap           #   first channels: ch_res), then the NIC caps per (source,
                             #   destination), then the VC classes'; bytes per cycle
    int32_t* rs_lanes        # per resource: channels (packets it carries at once)
    int32_t* rs_head         # per resource: its first route entry (-1: no flow)
    Res* rs                  # per resource: the solver's state of it (csim/_flow.pxd)
    int32_t* rs_n            # flows on it
    double* rs_bytes         # wire bytes carried (counted when a flow starts)
    int32_t* rs_dirty        # resources whose flows changed since the last recomputation
    uint8_t* rs_isdirty
    int32_t n_dirty
    int32_t* rs_queue        # scratch: breadth-first walk of a component
    double* rq_key           # scratch: heap of (fair share, resource) of progressive filling
    int32_t* rq_res
    int32_t* op_pair         # per send op: its (source, destination) pair
    int64_t* op_lat          # per send op: zero-load latency of its last packet (cycles),
    int64_t* op_lat_full     #   of a full packet,
    int64_t* op_lat_whole    #   and of one packet as long as the whole message
    int32_t* ch_base         # per channel: the first channel of its parallel group
    int32_t* ch_res          # per channel: its group's resource (flow level)
    int32_t* vc_res          # [group's resource * n_classes + class]: the resource of
                             #   a class of one VC on that group (see pysim/flow.py), or -1
    int32_t vc_res_base      # resources from this id on are such
    Pair* pr                 # per pair
    int32_t n_pairs
    int32_t hmax             # longest route (resources), the stride of the entries
    Flow* fl                 # flows (messages in flight), pooled (realloc'd)
    int32_t fl_cap, fl_free, fl_alive
    int32_t* fe_res          # route entries [slot * hmax + k]: the resource, and its links
    int32_t* fe_next         #   in the resource's list of entries (realloc'd with the slots)
    int32_t* fe_prev
    int32_t* fe_hpos         #   its place in the resource's heap by rate,
    double* fe_key           #   the rate it has there,
    int32_t* fe_anext        #   the next entry of a pair being recomputed (Res.ahead),
    int32_t* fe_pair         #   and its pair
    int32_t* sl_pair         # per route slot: the pair holding it, or the next free slot
    int32_t sl_cap, sl_free
    int32_t* comp            # the pairs whose flows changed (n_pdirty of them), then
                             #   scratch: the pairs being recomputed
    int32_t n_pdirty
    int64_t solver_fallbacks # recomputations that fell back to the whole component
    int64_t solver_rounds    # incremental recomputations: rounds of filling and checking
    int64_t solver_work      # route entries the recomputations visited
    int64_t solver_full_work # ... of them, by fillings of whole components (fallbacks)
    int64_t pairs_changed    # recomputed pairs whose rate moved (by more than 1e-9 of it)
    int64_t active_entries   # route entries of the pairs with flows (their resources)
    cycle_t* dh_time         # drain heap: (cycle the next of its flows has its last byte
    int32_t* dh_pair         #   carried, pair), indexed by Pair.hpos
    int32_t dh_n
    int64_t stamp
    int64_t flows_started, recomputes, pairs_recomputed
    int64_t flow_events, solver_ns   # flow level: events; CPU time in the max-min solver

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
    int64_t bad_eject, buf_overflow, bad_front, bad_class
    cycle_t last_progress
    cycle_t skipped          # cycles jumped over with nothing in flight
    cycle_t deadlock_t
