"""A slow, plain-Python reference model of the router/link pipeline csim implements.

Written for clarity, not speed: objects per VC, per-cycle loops over everything, no lazy
updates, no event wheel, no idle skipping. It takes the same compiled network arrays and an
explicit packet list and returns each packet's tail delivery cycle, which must equal csim's.

The pipeline (docs/model.md, "Router pipeline"), per cycle t, in this order:
 1. flits and credits due at t arrive (flit into its input-VC buffer, or into the NIC);
 2. packets created at t join their NIC's source queue;
 3. every NIC (node order) sends at most one flit: a new packet first claims a free injection
    VC with a credit (round-robin from the VC after the last one it used); a flit sent at t
    enters the NIC-router channel at t + injection_delay;
 4. every router (node order): VC allocation, then switch allocation.
Every channel earns num/den flits of serialisation credit per cycle and a flit costs one;
credit that reaches one flit plus one cycle's earnings (an idle cycle) restarts at one flit.
"""
from collections import defaultdict, deque

from csim.limits import SW_ARBITERS, VC_ARBITERS

NET, INJ, EJ = 0, 1, 2
IDLE, ROUTING, ACTIVE = 0, 1, 2
FREE, TAIL_PENDING = -1, -2


class InputVC:
    def __init__(self):
        self.buf = deque()          # (pkt, seq, arrival cycle)
        self.state = IDLE
        self.ready = 0
        self.out_ch = -1
        self.out_vc = -1
        self.lo = self.hi = 0
        self.free_t = 0


class Packet:
    def __init__(self, idx, t, src, dst, length):
        self.idx, self.create, self.src, self.dst, self.len = idx, t, src, dst, length
        self.cls, self.group, self.last_order = 0, -1, -1
        self.hops, self.inject, self.ejected = 0, -1, 0


def coin(serial, group, seed):
    """A packet's coin at a tie in a group (splitmix64's finaliser of the three): True sends
    it the other way. Exactly csim's _router.tie_minus."""
    m = (1 << 64) - 1
    z = (serial * 0x9E3779B97F4A7C15 + group * 0xD1B54A32D192ED03 + seed) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return bool(z >> 63)


def offer(grants, resource, dist, c, v):
    """Separable round-robin allocation: a resource keeps the requester (input VC c, v) whose
    distance after its round-robin pointer is smallest; resources are granted in the order
    they were first requested (a dict keeps it)."""
    if resource not in grants or dist < grants[resource][0]:
        grants[resource] = (dist, c, v)


def simulate(a, packets, max_cycles=200000, hops=False):
    """a: Network.arrays; packets: list of (time, src, dst, length). -> delivery cycles (and,
    with hops=True, each packet's router-to-router hops as a second list)."""
    n = a["n_nodes"]
    V, D = a["vcs"], a["buffer_flits"]
    R, VA, SA, ST = a["routing_delay"], a["vc_alloc_delay"], a["sw_alloc_delay"], a["st_delay"]
    I = a["injection_delay"]
    own_index = a["va_arbiter"] == VC_ARBITERS["own_index"]
    by_vc = a["sa_arbiter"] == SW_ARBITERS["vcs"]
    wait_tail = bool(a["wait_for_tail_credit"])
    n_classes = a["n_classes"]
    class_lo = [k * V // n_classes for k in range(n_classes)]
    class_hi = [(k + 1) * V // n_classes for k in range(n_classes)]
    kind = [int(x) for x in a["ch_kind"]]
    dst = [int(x) for x in a["ch_dst"]]
    lat = [int(x) for x in a["ch_lat_cycles"]]
    num = [int(x) for x in a["ch_num"]]
    den = [int(x) for x in a["ch_den"]]
    group = [int(x) for x in a["ch_group"]]
    ch_order = [int(x) for x in a["ch_order"]]
    rt = [int(x) for x in a.table()]
    inj_base = [int(x) for x in a["nic_inj_base"]]
    inj_n = [int(x) for x in a["nic_inj_n"]]
    [int(x) for x in a["ch_par_base"]]
    par_n = [int(x) for x in a["ch_par_n"]]
    src_of = [int(x) for x in a["ch_src"]]
    out_idx = [int(x) for x in a["ch_out_idx"]]
    pos = None if a["node_pos"] is None else [[int(x) for x in row] for row in a["node_pos"]]
    entry_class = bool(a["entry_class"])
    tie_k = None if a["tie_k"] is None else [int(x) for x in a["tie_k"]]
    ch_rev = None if a["ch_rev"] is None else [int(x) for x in a["ch_rev"]]
    tie_seed = int(a["tie_seed"])
    C = len(kind)
    n_ivc = C * V

    # inputs of each router, ordered by channel id
    inputs = [[c for c in range(C) if kind[c] != EJ and dst[c] == r] for r in range(n)]
    local = {c: i for r in range(n) for i, c in enumerate(inputs[r])}
    # outputs of each router (network and ejection channels), counted for the switch
    # allocator's round robin over them
    n_out = [max([out_idx[c] + 1 for c in range(C) if kind[c] != INJ and src_of[c] == r],
                 default=1) for r in range(n)]
    ivc = {(c, v): InputVC() for c in range(C) if kind[c] != EJ for v in range(V)}
    owner = {(c, v): FREE for c in range(C) for v in range(V)}
    credits = {(c, v): (0 if kind[c] == EJ else D) for c in range(C) for v in range(V)}
    va_ptr = defaultdict(int)
    va_in_ptr = defaultdict(int)     # input VC -> output VC index (ch * V + vc) it asks from
    sa_in_ptr = defaultdict(int)
    sa_in_optr = defaultdict(int)    # input port -> round-robin pointer over outputs
    sa_out_ptr = defaultdict(int)
    acc = [den[c] for c in range(C)]
    events = defaultdict(list)       # cycle -> [("flit", c, v, pkt, seq) | ("credit", c, v, tail)]

    pk = [Packet(i, *p) for i, p in enumerate(packets)]
    pending = sorted(pk, key=lambda p: (p.create, p.idx))
    for serial, p in enumerate(pending):
        p.serial = serial
    queue = [deque() for _ in range(n)]
    cur = {}                         # injection channel -> [packet, next seq, vc]
    vc_rr = defaultdict(int)         # injection channel -> next VC to try
    deliver = [-1] * len(pk)
    done = 0
    gi = 0
    t = 0
    while done < len(pk):
        if t > max_cycles:
            raise RuntimeError("reference model did not finish")
        # serialisation credit earned this cycle
        if t > 0:
            for c in range(C):
                acc[c] += num[c]
                if acc[c] >= den[c] + num[c]:     # idle for a cycle: no banking
                    acc[c] = den[c]
        # 1. arrivals
        for ev in events.pop(t, []):
            if ev[0] == "flit":
                _, c, v, p, seq = ev
                if kind[c] == EJ:
                    assert p.dst == dst[c] and p.ejected == seq
                    p.ejected += 1
                    if seq == p.len - 1:
                        deliver[p.idx] = t
                        done += 1
                else:
                    q = ivc[(c, v)]
                    assert len(q.buf) < D, "buffer overflow"
                    q.buf.append((p, seq, t))
            else:
                _, c, v, tail = ev
                credits[(c, v)] += 1
                if tail:
                    owner[(c, v)] = FREE
        # 2. packet creation
        while gi < len(pending) and pending[gi].create <= t:
            p = pending[gi]
            queue[p.src].append(p)
            gi += 1
        # 3. NIC injection: each injection channel sends at most one flit
        for node in range(n):
            for c in range(inj_base[node], inj_base[node] + inj_n[node]):
                if cur.get(c) is None:
                    if not queue[node]:
                        continue
                    v = None
                    for k in range(V):
                        cand = (vc_rr[c] + k) % V
                        if owner[(c, cand)] == FREE and credits[(c, cand)] > 0:
                            v = cand
                            break
                    if v is None or acc[c] < den[c]:
                        continue
                    p = queue[node].popleft()
                    cur[c] = [p, 0, v]
                    vc_rr[c] = (v + 1) % V
                    owner[(c, v)] = node
                    p.inject = t
                p, seq, v = cur[c]
                if credits[(c, v)] <= 0 or acc[c] < den[c]:
                    continue
                events[t + I + lat[c]].append(("flit", c, v, p, seq))
                acc[c] -= den[c]
                credits[(c, v)] -= 1
                if seq + 1 == p.len:
                    owner[(c, v)] = TAIL_PENDING if wait_tail else FREE
                    cur[c] = None
                else:
                    cur[c][1] = seq + 1
        # 4. routers
        for r in range(n):
            if not any(ivc[(c, v)].buf for c in inputs[r] for v in range(V)):
                continue
            # VC allocation: requests
            best = {}                    # output VC -> (distance, c, v) of its best requester
            for c in inputs[r]:
                for v in range(V):
                    q = ivc[(c, v)]
                    if not q.buf or q.state == ACTIVE:
                        continue
                    p, seq, arr = q.buf[0]
                    if q.state == IDLE:
                        assert seq == 0, "non-head flit at the front of an idle VC"
                        o = rt[r * n + p.dst]     # a parallel group's first channel
                        q.out_ch = o
                        if kind[o] == EJ:
                            q.lo, q.hi = 0, V
                        else:
                            # class 0 entering a group (with entry classes, 1 where this
                            # router's position is above the destination's); next class on
                            # a drop in order
                            if group[o] != p.group:
                                g = group[o]
                                # random ties: at distance k/2 on a ring of even k, the
                                # packet's coin may send it the other way
                                if tie_k is not None and tie_k[g] and \
                                        (pos[p.dst][g] - pos[r][g]) % tie_k[g] * 2 == tie_k[g] \
                                        and coin(p.serial, g, tie_seed):
                                    o = ch_rev[o]
                                    q.out_ch = o
                                cls = int(pos[r][g] > pos[p.dst][g]) if entry_class else 0
                            else:
                                cls = p.cls + (1 if ch_order[o] < p.last_order else 0)
                            assert cls < n_classes, "more VC classes than routing.py allowed"
                            p.group, p.last_order, p.cls = group[o], ch_order[o], cls
                            q.lo, q.hi = class_lo[cls], class_hi[cls]
                        q.ready = max(arr, q.free_t) + R
                        q.state = ROUTING
                    if q.ready > t:
                        continue
                    me = c * V + v
                    span = q.hi - q.lo
                    # the member of the output's parallel group with a free VC of the
                    # class where the fewest VCs carry other inputs' packets (ties: in turn
                    # from the packet's creation order); in it, the first free VC of the
                    # class from `me`
                    npar = par_n[q.out_ch]
                    member, fewest = None, V + 1
                    # an input port already holding a VC of a parallel group asks after the
                    # other ports (it sends one flit a cycle for all the members it holds)
                    mine = npar > 1 and any(owner[(q.out_ch + m, k)] >= 0 and
                                            owner[(q.out_ch + m, k)] // V == c
                                            for m in range(npar) for k in range(V))
                    for mi in range(npar):
                        cand = q.out_ch + (p.serial + mi) % npar
                        held = sum(owner[(cand, k)] >= 0 and owner[(cand, k)] // V != c
                                   for k in range(V))
                        free = any(owner[(cand, k)] == FREE for k in range(q.lo, q.hi))
                        if free and held < fewest:
                            member, fewest = cand, held
                    chosen = None
                    if member is not None:
                        # the first VC tried: the one at the input VC's own index, or the
                        # input VC's round-robin pointer if it is one of the class's VCs of
                        # this member, else the class's first
                        if own_index:
                            first = me
                        else:
                            first = va_in_ptr[(c, v)] - (member * V + q.lo)
                            first = first if 0 <= first < span else 0
                        for k in range(span):
                            ov = q.lo + (first + k) % span
                            if owner[(member, ov)] == FREE:
                                chosen = (member, ov)
                                break
                    if chosen:
                        key = chosen
                        d = (me - va_ptr[key]) % n_ivc + (n_ivc if mine else 0)
                        offer(best, key, d, c, v)
            for key, (_, c, v) in best.items():
                q = ivc[(c, v)]
                owner[key] = c * V + v
                va_in_ptr[(c, v)] = key[0] * V + key[1] + 1
                va_ptr[key] = (c * V + v + 1) % n_ivc
                q.out_ch = key[0]
                q.out_vc = key[1]
                q.state = ACTIVE
                q.ready = t + VA
            # switch allocation
            nin = len(inputs[r])
            req = {}                     # output channel -> (distance, c, v)
            for i, c in enumerate(inputs[r]):
                # the port's ready VCs, in round-robin order from its VC pointer
                ready = []
                for k in range(V):
                    v = (sa_in_ptr[c] + k) % V
                    q = ivc[(c, v)]
                    if not q.buf or q.state != ACTIVE:
                        continue
                    p, seq, arr = q.buf[0]
                    if seq == 0 and q.ready > t:
                        continue
                    o = q.out_ch
                    if kind[o] != EJ and credits[(o, q.out_vc)] <= 0:
                        continue
                    if acc[o] < den[o]:
                        continue
                    ready.append(v)
                if not ready:
                    continue
                if by_vc:                # the first of them
                    v = ready[0]
                else:                    # per output the first; of those, the output nearest
                    v = min(ready, key=lambda v: ((out_idx[ivc[(c, v)].out_ch] -
                                                   sa_in_optr[c]) % n_out[r], ready.index(v)))
                o = ivc[(c, v)].out_ch
                offer(req, o, (i - sa_out_ptr[o]) % nin, c, v)
            for o, (_, c, v) in req.items():
                q = ivc[(c, v)]
                p, seq, arr = q.buf.popleft()
                sa_in_ptr[c] = (v + 1) % V
                sa_out_ptr[o] = (local[c] + 1) % nin
                sa_in_optr[c] = (out_idx[o] + 1) % n_out[r]
                acc[o] -= den[o]
                if kind[o] != EJ:
                    credits[(o, q.out_vc)] -= 1
                    if seq == 0:
                        p.hops += 1
                events[t + SA + ST + lat[o]].append(("flit", o, q.out_vc, p, seq))
                tail = seq == p.len - 1
                events[t + SA + lat[c]].append(("credit", c, v, tail and wait_tail))
                if tail:
                    owner[(o, q.out_vc)] = TAIL_PENDING if (wait_tail and kind[o] != EJ) \
                        else FREE
                    q.state = IDLE
                    q.free_t = t + 1
        t += 1
    return (deliver, [p.hops for p in pk]) if hops else deliver
