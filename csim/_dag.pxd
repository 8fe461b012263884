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
# How a send is carried is the one thing the network model changes: at the flit level its
# packets go through the NIC, routers and links (and the op finishes when the engine sees its
# last tail delivered, through op_done_q); at the flow level it is a flow (csim/_flow.pxd)
# whose op finishes, on the op heap, its zero-load latency after its last byte is carried.
# Everything else here -- dependencies, the units and their queues -- is the same for both.
from csim._types cimport *
from csim._nic cimport nic_add_message
from csim._flow cimport flow_start
from csim._heap cimport heap_push, heap_pop


cdef inline cycle_t next_op_event(State* s) noexcept nogil:
    return s.oh_time[0] if s.oh_n > 0 else NEVER


cdef inline int _start_compute(State* s, int32_t op) noexcept nogil:
    cdef int32_t n = s.op_node[op] * N_UNITS + s.op_unit[op]
    s.node_busy[n] = 1
    s.op_start[op] = s.now
    heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now + s.op_size[op], op)
    return 0


cdef inline int start_op(State* s, int32_t op) noexcept nogil:
    """An op whose dependencies have all finished (now) begins, or queues for its node."""
    cdef int32_t n
    cdef int64_t left, bytes_per_packet
    cdef int8_t kind = s.op_kind[op]
    if kind == OP_COMPUTE:
        n = s.op_node[op] * N_UNITS + s.op_unit[op]
        if s.node_busy[n]:
            s.op_next[op] = -1
            if s.cq_tail[n] < 0:
                s.cq_head[n] = op
            else:
                s.op_next[s.cq_tail[n]] = op
            s.cq_tail[n] = op
            return 0
        return _start_compute(s, op)
    s.op_start[op] = s.now
    if kind == OP_DELAY:
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now + s.op_size[op], op)
        return 0
    # send
    left = s.op_size[op]
    if left == 0:
        heap_push(s.oh_time, s.oh_op, &s.oh_n, s.now, op)   # an empty message: delivered now
        return 0
    if s.flow_mode:
        return flow_start(s, op)
    # flit level: the message joins the source NIC, which cuts it into packets as it goes
    bytes_per_packet = <int64_t>s.packet_flits_max * s.flit_bytes
    s.op_left[op] = (left + bytes_per_packet - 1) // bytes_per_packet
    s.msg_bytes[op] = left
    nic_add_message(s, s.op_node[op], op)
    return 0


cdef inline int finish_op(State* s, int32_t op) noexcept nogil:
    """op finished now: free its node (compute) and start the successors it was the last
    dependency of."""
    cdef int64_t k
    cdef int32_t n, nxt, q
    s.op_finish[op] = s.now
    s.ops_done += 1
    if s.op_kind[op] == OP_COMPUTE:
        n = s.op_node[op] * N_UNITS + s.op_unit[op]
        s.node_busy[n] = 0
        q = s.cq_head[n]
        if q >= 0:
            s.cq_head[n] = s.op_next[q]
            if s.cq_head[n] < 0:
                s.cq_tail[n] = -1
            if _start_compute(s, q) != 0:
                return -1
    for k in range(s.succ_ptr[op], s.succ_ptr[op + 1]):
        nxt = s.succ[k]
        s.op_deps[nxt] -= 1
        if s.op_deps[nxt] == 0:
            if start_op(s, nxt) != 0:
                return -1
    return 0


cdef inline int ops_due(State* s) noexcept nogil:
    """Finish every compute and delay op due this cycle."""
    cdef int32_t op
    while s.oh_n > 0 and s.oh_time[0] <= s.now:
        op = s.oh_op[0]
        heap_pop(s.oh_time, s.oh_op, &s.oh_n)
        if finish_op(s, op) != 0:
            return -1
    return 0
