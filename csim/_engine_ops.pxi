# An op graph's arrays into the State, and its first ops started (csim/_dag.pxd runs
# them; an include of csim/_engine.pyx).

cdef _set_graph(Engine self, kind, node, dst, size, deps, succ_ptr, succ, int packet_flits,
                int flit_bytes, unit, flow, sms, comm_hbm, share, int nic_fifo=1, stream_src=None,
                tail=None, int nic_per_link=0):
    cdef State* s = &self.s
    cdef int32_t op
    # (the graph's kinds, nodes, sizes and successors are only read: kept as given)
    _check_lengths([packet_flits])
    k = np.asarray(kind, dtype=np.int8)
    n_ops = k.size
    s.n_ops = n_ops
    s.ops_done = 0
    s.op_kind = <int8_t*>_ptr(self._own("op_kind", k, np.int8, share=True))
    s.op_node = <int32_t*>_ptr(self._own("op_node", node, np.int32, share=True))
    s.op_dst = <int32_t*>_ptr(self._own("op_dst", dst, np.int32, share=True))
    s.op_size = <int64_t*>_ptr(self._own("op_size", size, np.int64, share=True))
    s.op_deps = <int32_t*>_ptr(self._own("op_deps", np.array(deps, np.int32), np.int32))
    s.succ_ptr = <int64_t*>_ptr(self._own("succ_ptr", succ_ptr, np.int64, share=True))
    s.succ = <int32_t*>_ptr(self._own("succ", succ, np.int32, share=True))
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
    s.op_src = NULL
    s.ssucc_ptr = NULL
    if stream_src is not None:       # streams (csim/_dag.pxd): per op its source, or -1
        src_a = np.asarray(stream_src, np.int32)
        tail_a = np.zeros(n_ops, np.int64) if tail is None else np.asarray(tail, np.int64)
        if src_a.size != n_ops or tail_a.size != n_ops or (src_a >= n_ops).any() or \
                (src_a < -1).any() or (tail_a < 0).any():
            raise ValueError("stream_src needs one entry per op, each an op id or -1, and "
                             "tail one per op, each >= 0")
        if (src_a >= 0).any():
            cons = np.flatnonzero(src_a >= 0).astype(np.int32)
            prod = src_a[cons]
            o = np.argsort(prod, kind="stable")
            sp = np.zeros(n_ops + 1, np.int64)
            sp[1:] = np.cumsum(np.bincount(prod, minlength=n_ops))
            s.op_src = <int32_t*>_ptr(self._own("op_src", src_a, np.int32))
            s.ssucc_ptr = <int64_t*>_ptr(self._own("ssucc_ptr", sp, np.int64))
            s.ssucc = <int32_t*>_ptr(self._own("ssucc", cons[o], np.int32))
            s.op_tail = <int64_t*>_ptr(self._own("op_tail", tail_a, np.int64))
            s.op_wait = <uint8_t*>_ptr(self._own("op_wait", None, np.uint8, 0, n_ops))
            # (a level per op at most: each starts once)
            s.sstk_op = <int32_t*>_ptr(self._own("sstk_op", None, np.int32, -1, n_ops + 1))
            s.sstk_k = <int64_t*>_ptr(self._own("sstk_k", None, np.int64, 0, n_ops + 1))
            s.sstk_n = 0
    s.msg_bytes = <int64_t*>_ptr(self._own("msg_bytes", None, np.int64, 0, n_ops))
    s.msg_next = <int32_t*>_ptr(self._own("msg_next", None, np.int32, -1, n_ops))

    s.nic_fifo = 1 if nic_fifo else 0
    # (per link needs two VCs a channel: with one, a link's next packet would wait in the
    # channel's VC behind the previous one, where shared channels hand it over from another)
    s.nic_per_link = 1 if nic_per_link and s.V >= 2 else 0
    if s.nic_fifo and flow is None:  # the flit level's NICs: each pair's messages in order
        snd = np.flatnonzero(k == OP_SEND)
        pair = np.full(n_ops, -1, np.int32)
        n_pairs = 0
        if snd.size:
            key = np.asarray(node, np.int64)[snd] * s.n_nodes + \
                np.asarray(dst, np.int64)[snd]
            uniq, inv = np.unique(key, return_inverse=True)
            pair[snd] = inv.reshape(-1)
            n_pairs = uniq.size
        s.op_pair = <int32_t*>_ptr(self._own("op_pair", pair, np.int32))
        s.pair_tail = <int32_t*>_ptr(self._own("pair_tail", None, np.int32, -1,
                                               max(n_pairs, 1)))
        s.msg_pnext = <int32_t*>_ptr(self._own("msg_pnext", None, np.int32, -1, n_ops))
    s.packet_flits_max = packet_flits
    s.flit_bytes = flit_bytes
    s.oh_n = 0
    s.op_done_n = 0
    if flow is not None:
        _set_flow(self, n_ops, flow)
    # (the ops ready at the start, taken before any starts: a stream's op becomes ready as
    # its source starts, and is started then)
    for op in np.flatnonzero(np.asarray(deps) == 0).tolist():
        if start_op(s, op) != 0:
            raise MemoryError()
