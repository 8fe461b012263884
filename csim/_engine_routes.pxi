# Route analysis over routing tables, in C for large systems: path walks, channel
# dependencies (the deadlock check), shortest-path next hops, cycle search (pysim.routing
# calls these; an include of csim/_engine.pyx).

cdef inline bint _not_faster(const int64_t[::1] num, const int64_t[::1] den, int64_t a,
                             int64_t b) noexcept nogil:
    """Channel a carries at most as many flits per cycle as channel b (num / den each)."""
    return num[a] * den[b] <= num[b] * den[a]


def path_walk(rt, int64_t n, const int32_t[::1] ch_dst,
              const int32_t[::1] ch_lat, const int64_t[::1] num, const int64_t[::1] den,
              const int32_t[::1] inj_ch, const int32_t[::1] ej_ch,
              const int64_t[::1] src, const int64_t[::1] dst):
    """Walk the routes rt (a RouteRule, or a table [node * n + dst] -> channel) for pairs
    (src[i], dst[i]).

    Returns per pair: router-to-router hops, the sum of their latencies, the slowest channel
    on the path with the NIC channels (num / den flits per cycle; the last of equals), and
    the number of routers after it (0 if it is the ejection channel). A path shares its tail
    with every path to the same destination: the tails are kept while consecutive pairs have
    one destination, so pairs grouped by destination cost O(1) each, not O(hops)."""
    cdef int64_t m = src.shape[0], i, u, v, d, cur = -1, gen = 0, sp, c, w, ej
    if dst.shape[0] != m:
        raise ValueError("src and dst differ in length")
    if not isinstance(rt, RouteRule):
        rt = RouteRule({"kind": "table", "n": n, "tab": rt})
    if rt.n != n:
        raise ValueError(f"the routes are of {rt.n} nodes, not {n}")
    cdef Routes R = _routes_of(rt)
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
            c = route_next(&R, v, d)
            if c < 0:
                raise ValueError(f"no route from node {v} to node {d}")
            v = ch_dst[c]
        while sp > 0:                    # and back up, each node from the one after it
            sp -= 1
            u = stack[sp]
            c = route_next(&R, u, d)
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


ROUTE_KINDS = {"table": RT_TABLE, "dor": RT_DOR, "rows": RT_ROWS}


cdef class RouteRule:
    """Routes as csim's routers look them up (csim/_routes.pxd): a table of every (node,
    destination) pair, or a rule. Made from a dict (pysim.routing.Rule.arrays): kind ('table',
    'dor' or 'rows'), n, and the kind's arrays -- table: tab (n * n); dor: dims, wrap, coords
    (n x nd), chan (n x nd x 2), bidir, dateline; rows: cls, off (per node), vec (rows x n),
    exc_ptr (n + 1), exc_d, exc_c -- and optionally tmap (per channel of the rule, the channel
    returned) and diag (per node, what [node, node] gives). Keeps its arrays alive."""
    cdef Routes R
    cdef dict _a
    cdef dict _spec
    cdef public str kind

    def __init__(self, dict spec):
        cdef int64_t n = int(spec["n"])
        self._a = {}
        self._spec = dict(spec)
        self.kind = spec["kind"]
        if self.kind not in ROUTE_KINDS:
            raise ValueError(f"route kind {self.kind!r}: expected one of {list(ROUTE_KINDS)}")
        self.R.kind = ROUTE_KINDS[self.kind]
        self.R.n = n
        self.R.tab = self.R.dims = self.R.wrap = self.R.coords = self.R.chan = NULL
        self.R.cls = self.R.off = self.R.vec = self.R.exc_d = self.R.exc_c = NULL
        self.R.exc_ptr = NULL
        self.R.tmap = self.R.diag = NULL
        self.R.nd = 0
        self.R.bidir = 1
        self.R.dateline = 0
        if self.R.kind == RT_TABLE:
            self.R.tab = self._i32("tab", spec, n * n)
        elif self.R.kind == RT_DOR:
            dims = np.asarray(spec["dims"], np.int32).reshape(-1)
            self.R.nd = dims.size
            self.R.dims = self._i32("dims", spec, dims.size)
            self.R.wrap = self._i32("wrap", spec, dims.size)
            self.R.coords = self._i32("coords", spec, n * dims.size)
            self.R.chan = self._i32("chan", spec, n * dims.size * 2)
            self.R.bidir = 1 if spec["bidir"] else 0
            self.R.dateline = 1 if spec["dateline"] else 0
        else:
            cls = self._i32("cls", spec, n)
            self.R.cls = cls
            self.R.off = self._i32("off", spec, n)
            rows = int(np.max(np.asarray(spec["cls"]))) + 1 if n else 0
            self.R.vec = self._i32("vec", spec, rows * n)
            a = np.ascontiguousarray(spec["exc_ptr"], np.int64)
            if a.size != n + 1 or (n and (a[0] != 0 or (np.diff(a) < 0).any())):
                raise ValueError("exc_ptr: expected n + 1 ascending offsets from 0")
            self._a["exc_ptr"] = a
            self.R.exc_ptr = <int64_t*>_ptr(a)
            self.R.exc_d = self._i32("exc_d", spec, int(a[-1]) if n else 0)
            self.R.exc_c = self._i32("exc_c", spec, int(a[-1]) if n else 0)
        if spec.get("tmap") is not None:
            self.R.tmap = self._i32("tmap", spec, -1)
        if spec.get("diag") is not None:
            self.R.diag = self._i32("diag", spec, n)

    cdef int32_t* _i32(self, str name, dict spec, int64_t size) except NULL:
        a = np.ascontiguousarray(spec[name], np.int32).reshape(-1)
        if size >= 0 and a.size != size:
            raise ValueError(f"route {name}: {a.size} entries, expected {size}")
        if a.size == 0:
            a = np.zeros(1, np.int32)
        self._a[name] = a
        return <int32_t*>_ptr(a)

    def __reduce__(self):
        return (RouteRule, (self._spec,))

    @property
    def n(self):
        return int(self.R.n)

    def arrays(self):
        """The arrays it was made from (as int32 / int64, contiguous)."""
        return dict(self._a)

    def next(self, src, dst):
        """The channel each src[i] takes towards dst[i] (-1: none)."""
        s_a = np.ascontiguousarray(src, np.int64).reshape(-1)
        d_a = np.ascontiguousarray(dst, np.int64).reshape(-1)
        if s_a.size != d_a.size:
            raise ValueError("src and dst differ in length")
        if s_a.size and (min(s_a.min(), d_a.min()) < 0 or max(s_a.max(), d_a.max()) >= self.R.n):
            raise ValueError("a node out of range")
        out_a = np.empty(s_a.size, np.int32)
        cdef const int64_t[::1] s = s_a
        cdef const int64_t[::1] d = d_a
        cdef int32_t[::1] out = out_a
        cdef int64_t i
        with nogil:
            for i in range(s.shape[0]):
                out[i] = route_next(&self.R, s[i], d[i])
        return out_a

    def rows(self, int64_t lo, int64_t hi):
        """The dense table's rows lo .. hi - 1, (hi - lo) x n int32."""
        lo = max(lo, 0)
        hi = min(hi, self.R.n)
        out_a = np.empty((max(hi - lo, 0), self.R.n), np.int32)
        cdef int32_t[:, ::1] out = out_a
        cdef int64_t u, d
        with nogil:
            for u in range(lo, hi):
                for d in range(self.R.n):
                    out[u - lo, d] = route_next(&self.R, u, d)
        return out_a


cdef Routes _routes_of(RouteRule r):
    return r.R
