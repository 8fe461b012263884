"""An op graph compiled into csim's arrays, as array work (numpy), not op by op.

`compile_graph(g, topo, cfg)` (re-exported by pysim.workload.graph, which documents the
semantics) expands each op of `g` into a fixed number of csim primitives -- one for most
kinds, two for a roofline compute op (it and its memory companion), three for a reduction
on the NPU -- so the primitives of every op are laid out by a cumulative sum of those counts
and filled kind by kind with vectorised arithmetic; the dependencies become one array of
(from, to) edges, deduplicated and sorted into the successor lists (CSR) csim takes. A graph
with memory ops (mem_write, mem_read) is expanded op by op instead (pysim.workload.graph).

The primitives come out in the order the ops are taken (id order, or a topological order
where `depend` made an op wait for a later one), each op's in a fixed order, exactly as an op
by op expansion would make them.
"""
from __future__ import annotations

import heapq
import math
import warnings

import numpy as np

from pysim.errors import GraphError, PysimWarning
from pysim import theory
from pysim.schema import MAX_INT
from pysim.workload import transfer
from pysim.workload.endpoint import endpoint_arrays
from pysim.workload.holds import capacities, check_holds

# the kinds of an OpGraph's ops, as codes (a compute op given flops/bytes is ROOFLINE)
OP_CODES = {"compute": 0, "send": 1, "delay": 2, "memory": 3, "engine": 4, "reduce_npu": 5,
            "reduce_offload": 6, "acquire": 7, "release": 8, "mem_write": 9, "mem_read": 10,
            "take_units": 12, "free_units": 13}
ROOFLINE = 11
KIND_OF = [None] * (ROOFLINE + 3)          # an op's code -> its kind's name
for _k, _c in OP_CODES.items():
    KIND_OF[_c] = _k
KIND_OF[ROOFLINE] = "compute"
# primitives per op of each code (memory ops are expanded op by op: pysim.workload.graph)
_COUNT = np.array([1, 1, 1, 1, 1, 3, 1, 1, 1, 0, 0, 2, 1, 1], np.int64)
NODE_KIND = {"npu": 0, "mem": 1, "host": 2, "switch": 3}
COMM_RECV_UNIT = 7       # communication's memory for what it receives (csim/_dag.pxd)


def stream_sources(code, nid, size, lens, flat, allowed=None, owner=None):
    """Per op, the op whose data it takes as it comes (a stream, csim/_dag.pxd), or -1:
    - a send whose one dependency is a memory op of its bytes at its source (the read of
      what it sends) is sent as it is read;
    - a reduction on the NPU (reduce_npu) that depends on a send of at least its bytes
      reduces the message as it arrives (its first such dependency);
    - a memory op whose one dependency is a send of at least its bytes (the write of a
      received block) writes it as it arrives.
    (The send need not go to the op's node: a collective's part built for one rank alone,
    collectives.symmetric, has its own send stand for its neighbour's.)
    So an NPU-run collective's step reads, sends, reduces and forwards its block piece by
    piece, as an NCCL kernel's slices go, with the ops of store-and-forward. The
    dependency stays in the graph (its exports, its counts); only how it is run changes.
    allowed: per op, whether it may stream (OpGraph.stream_mask: the ops of collectives, as
    their builders made them); an op and its source must both be (None: every op).
    owner: per dependency in flat its op, where made already."""
    n = len(code)
    out = np.full(n, -1, np.int64)
    if not n or not len(flat):
        return out
    if owner is None:
        owner = np.repeat(np.arange(n, dtype=np.int64), lens)
    send, mem, red = OP_CODES["send"], OP_CODES["memory"], OP_CODES["reduce_npu"]
    # (only dependencies between ops that may stream, of an op of those kinds: few)
    may = np.isin(code, (send, mem, red))
    if allowed is not None:
        may &= allowed
    cand = may[owner]
    if allowed is not None:
        cand &= allowed[flat]
    at = np.flatnonzero(cand)
    owner, flat = owner[at], flat[at]
    co, cd = code[owner], code[flat]
    one = lens[owner] == 1
    fits = (size[flat] == size[owner]) & (size[owner] > 0)
    within = (size[flat] >= size[owner]) & (size[owner] > 0)
    hit = (fits & (co == send) & one & (cd == mem) & (nid[flat] == nid[owner])) | \
        (within & ((co == red) | ((co == mem) & one)) & (cd == send))
    at = np.flatnonzero(hit)[::-1]          # (the first of an op's wins)
    out[owner[at]] = flat[at]
    return out


def engine_ops(g):
    """The csim primitives g's ops expand into (memory ops, expanded op by op, not counted)."""
    return int(_COUNT[np.frombuffer(g._code, np.int8)].sum()) if len(g) else 0


def node_ids(g, index, cols=None):
    """The topology's ids (`index`: name -> id) of the nodes and destinations of g's ops
    (g.arrays(), or `cols` where made already): two int64 arrays, -1 for none or a name not
    in index."""
    cols = g.arrays() if cols is None else cols
    table = np.array([index.get(x, -1) if isinstance(x, str) else -1 for x in g._nodes] +
                     [-1], np.int64)             # (id -1, no node: the last entry)
    return table[cols["node"]], table[cols["dst"]]


def _ceil_v(b, bpc):
    """Vectorised pysim.workload.graph._ceil: cycles to move b at bpc per cycle (b, bpc
    arrays); returns (cycles, the index of the first that passes MAX_INT or -1)."""
    b = np.asarray(b, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        c = b / bpc - 1e-9
    c = np.where(b == 0, 0.0, c)
    bad = ~(c <= MAX_INT)
    first = int(np.argmax(bad)) if bad.any() else -1
    c = np.where(bad, 0.0, c)
    return np.ceil(c).astype(np.int64), first


def compile_arrays(g, topo, cfg, h):
    """The body of compile_graph: `h` is pysim.workload.graph, whose per-op helpers (the
    node check, _ceil, the parameter tables, MAX_OPS) raise the errors, so that
    they are exactly its messages."""
    index = {name: i for i, name in enumerate(topo.node_names)}
    nkind = np.array([NODE_KIND[k] for k in topo.node_kinds], np.int8)
    node_id = h._node_checker(g, topo, index)
    if len(g) == 0:
        raise GraphError("the op graph is empty")
    cparams = h.compute_params(topo, cfg)          # (once: each walks every node)
    eparams = h.engine_params(topo, cfg)
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    ends = endpoint_arrays(cfg, topo, lambda i: cparams[i][1] * 1e9 * clock)
    flow = cfg is not None and cfg.network.model == "flow"
    KINDS, MAX_SLICES = h.KINDS, h.MAX_SLICES
    piece = cfg.workload.mem_piece_bytes if cfg is not None else 65536
    slice_cycles = cfg.workload.slice_cycles if cfg is not None else 0

    n = len(g)
    cols = g.arrays()
    code, lens, flat, size = cols["code"], np.diff(cols["dep_ptr"]), cols["dep"], cols["size"]
    nid, did = node_ids(g, index, cols)
    order = (np.asarray(topological_order(g), np.int64) if g._forward
             else np.arange(n, dtype=np.int64))

    # ---- validity, per op: the first bad op (in the order taken) raises its own error
    N = len(topo.node_names)
    flops_pc = np.zeros(N)
    bytes_pc = np.ones(N)
    if cparams:
        at = np.fromiter(cparams.keys(), np.int64, len(cparams))
        v = np.array(list(cparams.values()), np.float64).reshape(-1, 2)
        flops_pc[at], bytes_pc[at] = v[:, 0], v[:, 1]
    e_off = np.ones(N)
    e_red = np.ones(N)
    if eparams:
        at = np.fromiter(eparams.keys(), np.int64, len(eparams))
        v = np.array([(x[0], x[2]) for x in eparams.values()], np.float64)
        e_off[at], e_red[at] = v[:, 0], v[:, 1] * ends["reduce_fraction"][at]
    kn = np.where(nid >= 0, nkind[np.maximum(nid, 0)], -1)
    kd = np.where(did >= 0, nkind[np.maximum(did, 0)], -1)
    npu_host = (kn == 0) | (kn == 2)
    npu_only = kn == 0
    any_end = (kn >= 0) & (kn != 3)
    ok = np.ones(n, bool)
    for c in (0, 3, ROOFLINE):
        ok &= (code != c) | npu_host
    for c in (4, 5, 6, 12, 13):
        ok &= (code != c) | npu_only
    for c in (7, 8):
        ok &= (code != c) | any_end
    ok &= (code != 1) | (any_end & (kd >= 0) & (kd != 3) & (nid != did))
    memop = (code == 9) | (code == 10)
    ok &= ~memop | (npu_host & ((kd == 1) | (kd == 2)) & (nid != did))

    # roofline: compute and memory cycles, slices
    rl = np.flatnonzero(code == ROOFLINE)
    C = H = S = np.zeros(0, np.int64)
    if len(rl):
        _, fl, by, pk = g.roofline()          # (its ops: rl, in op order)
        by = by.astype(np.float64)
        rn = np.maximum(nid[rl], 0)
        fpc = np.where(np.isnan(pk), flops_pc[rn], pk / (clock * 1e9))
        C, bad_c = _ceil_v(fl, fpc)
        H, bad_h = _ceil_v(by, bytes_pc[rn])
        for bad in (bad_c, bad_h):
            if bad >= 0:
                ok[rl[bad]] = False
        S = (np.maximum(1, -(-np.maximum(C, H) // slice_cycles)) if slice_cycles else
             np.ones(len(rl), np.int64))
        ok[rl[S > MAX_SLICES]] = False

    # the engine ops the graph expands into, counted before any is built (past the limit,
    # the op-by-op count names the op that expands most and the key that sets it)
    mem_sizes = size[memop]
    expand = int(np.count_nonzero(~memop)) + len(rl) + 2 * int(np.count_nonzero(code == 5))
    if len(rl):
        if slice_cycles:
            with np.errstate(divide="ignore", invalid="ignore"):
                slices = np.ceil(np.minimum(np.nan_to_num(np.maximum(fl / fpc,
                                                                     by / bytes_pc[rn]),
                                                          nan=0.0), 1e30) / slice_cycles)
            expand += int(np.where(slices <= MAX_SLICES, 0, slices - 2).sum())
    expand += int((3 * np.maximum(1, -(-mem_sizes // piece))).sum()) + \
        int(np.count_nonzero(code == 10))
    if expand > h.MAX_OPS:
        check_expansion(g, topo, cparams, piece, slice_cycles, node_id, clock, h, flow)

    # simple kinds' cycles (validity of the rate: the error names it)
    cyc = np.zeros(n, np.int64)
    red_mem = np.zeros(0, np.int64)
    for c, rate in ((3, bytes_pc), (4, e_off), (6, e_off)):
        ids = np.flatnonzero(code == c)
        if len(ids):
            cyc[ids], bad = _ceil_v(size[ids], rate[np.maximum(nid[ids], 0)])
            if bad >= 0:
                ok[ids[bad]] = False
    rn_ids = np.flatnonzero(code == 5)
    if len(rn_ids):
        r = np.maximum(nid[rn_ids], 0)
        red_mem, bad1 = _ceil_v(4 * size[rn_ids], bytes_pc[r])
        cyc[rn_ids], bad2 = _ceil_v(size[rn_ids], e_red[r])
        for bad in (bad1, bad2):
            if bad >= 0:
                ok[rn_ids[bad]] = False

    if not ok.all() or memop.any():
        # the op-by-op checks of the first bad op raise its error; memory ops are checked
        # (and expanded) one by one below
        bad_pos = np.flatnonzero(~ok[order])
        if len(bad_pos):
            _raise_for(g, int(order[bad_pos[0]]), h, node_id, cparams, eparams, clock,
                       slice_cycles)

    # ---- layout: primitives per op, in the order taken
    cnt = _COUNT[code]
    mem_ids = np.flatnonzero(memop)
    pieces_of = {}
    for i in mem_ids.tolist():
        total = int(size[i])
        np_ = max(1, -(-total // piece))
        pieces_of[i] = np_
        cnt[i] = 3 * np_ if code[i] == 9 else (1 + 3 * np_ if total else 3)
    first = np.empty(n, np.int64)
    first[order] = np.concatenate([[0], np.cumsum(cnt[order])[:-1]]) if n else []
    P = int(cnt.sum())
    last = first + cnt - 1
    last[code == ROOFLINE] -= 1      # (its memory companion is started by it)
    last[code == 10] = -1            # set below
    kind = np.full(P, KINDS["compute"], np.int8)
    unit = np.zeros(P, np.int8)
    pnode = np.full(P, -1, np.int32)
    pdst = np.full(P, -1, np.int32)
    psize = np.zeros(P, np.int64)
    src_e, dst_e = [], []            # internal edges (from, to)

    def put(ids, k, node_, dst_, size_, u, off=0):
        at = first[ids] + off
        kind[at] = KINDS[k]
        unit[at] = u
        pnode[at] = node_
        pdst[at] = dst_
        psize[at] = size_

    for c, k, u in ((0, "compute", 0), (3, "compute", h.COMM_MEM_UNIT), (4, "compute", 2),
                    (6, "compute", 2), (2, "delay", 0), (7, "acquire", h.GATE_UNIT),
                    (8, "release", h.GATE_UNIT), (1, "send", 0),
                    (12, "take_units", h.HELD_UNIT), (13, "free_units", h.HELD_UNIT)):
        ids = np.flatnonzero(code == c)
        if not len(ids):
            continue
        nd = -1 if c == 2 else nid[ids]
        ds = did[ids] if c == 1 else -1
        sz = size[ids] if c in (0, 2, 7, 8, 1, 12, 13) else cyc[ids]
        put(ids, k, nd, ds, sz, u)
    isolated = np.full(n, -1, np.int64)
    companions = np.zeros(0, np.int64)
    if len(rl):
        put(rl, "roofline", nid[rl], S, C, 0)
        put(rl, "roofline_mem", nid[rl], -1, H, 1, off=1)
        isolated[rl] = np.maximum(C, H)
        companions = first[rl] + 1
    if len(rn_ids):
        # on the units the collective holds, through communication's memory share
        put(rn_ids, "compute", nid[rn_ids], -1, red_mem, COMM_RECV_UNIT)
        put(rn_ids, "compute", nid[rn_ids], -1, cyc[rn_ids], h.HELD_UNIT, off=1)
        put(rn_ids, "delay", -1, -1, 0, 0, off=2)
        src_e += [first[rn_ids], first[rn_ids] + 1]
        dst_e += [first[rn_ids] + 2, first[rn_ids] + 2]

    check_holds(g, topo, cfg)            # (after the ops: their nodes are named first)

    # ---- dependencies: an op's dependencies finish before its first primitive starts
    # (a reduction on the NPU: before both its parts)
    # (a stream's dependency: its source's first primitive to its own, in stream_src)
    owner = np.repeat(np.arange(n, dtype=np.int64), lens)
    strm = stream_sources(code, nid, size, lens, flat, g.stream_mask(), owner)
    keep = strm[owner] != flat
    owner_k, flat_k = owner[keep], flat[keep]
    dep_last = last[flat_k]
    src_e.append(dep_last)
    dst_e.append(first[owner_k])
    two = code[owner_k] == 5
    if two.any():
        src_e.append(dep_last[two])
        dst_e.append(first[owner_k[two]] + 1)
    stream_src, tail = _stream_prims(strm, code, first, size, psize, cfg)
    unit[first[(strm >= 0) & (code == 3)]] = COMM_RECV_UNIT
    src = np.concatenate(src_e) if src_e else np.zeros(0, np.int64)
    dst = np.concatenate(dst_e) if dst_e else np.zeros(0, np.int64)
    # (nearly in order already: the stable sort's merge of runs is much faster here)
    key = np.sort(dst * P + src, kind="stable")   # by (to, from), deduplicated
    if key.size:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    dst, src = key // P, key % P
    deps_n = np.bincount(dst, minlength=P).astype(np.int32)
    deps_n[companions] = 1                  # started by their roofline op, never by deps
    if stream_src is not None:
        deps_n += stream_src >= 0
    succ = (np.sort(src * P + dst, kind="stable") % P).astype(np.int32)   # by (from, to)
    succ_ptr = np.zeros(P + 1, np.int64)
    succ_ptr[1:] = np.cumsum(np.bincount(src, minlength=P))
    arrays = dict(kind=kind, unit=unit, node=pnode, dst=pdst, size=psize, deps=deps_n,
                  succ_ptr=succ_ptr, succ=succ, isolated=isolated, sms=ends["sms"],
                  comm_hbm=ends["comm_hbm"], stream_src=stream_src, tail=tail)
    span = np.stack([first, last], axis=1)
    return arrays, span


def packet_bytes(cfg):
    """The bytes of a full packet of an op graph's messages (a stream's piece)."""
    return (cfg.workload.packet_flits * cfg.network.flit_bytes if cfg is not None
            else 16 * 32)


def _stream_prims(strm, code, first, size, psize, cfg):
    """The streams among the primitives (csim/_dag.pxd) from the graph ops' (strm, from
    stream_sources): per primitive its source primitive or -1, and its tail -- a unit op's
    work on the last packet of the message it takes (its cycles in proportion); a send's
    is set with the network (resolve_latencies). (None, None) where no op streams."""
    on = np.flatnonzero(strm >= 0)
    if not len(on):
        return None, None
    P = len(psize)
    src = np.full(P, -1, np.int32)
    tail = np.zeros(P, np.int64)
    prod = first[strm[on]]
    frac = np.minimum(1.0, packet_bytes(cfg) / np.maximum(size[strm[on]], 1))
    for off, which in ((0, np.ones(len(on), bool)), (1, code[on] == 5)):
        at = first[on[which]] + off
        src[at] = prod[which]
        tail[at] = np.ceil(psize[at] * frac[which]).astype(np.int64)
    tail[first[on[code[on] == 1]]] = 0
    return src, tail


def send_tails(network, cfg, arrays):
    """Set the tail of each send that streams its data in the compiled arrays: the
    zero-load latency of its last packet (at most a full one) on its route."""
    src = arrays.get("stream_src")
    if src is None:
        return
    kind = arrays["kind"]
    snd = np.flatnonzero((src >= 0) & (kind == 1))
    if not len(snd):
        return
    flit = cfg.network.flit_bytes if cfg is not None else 32
    last = np.minimum(arrays["size"][snd], packet_bytes(cfg))
    flits = np.maximum(1, -(-last // flit)).astype(np.int64)
    arrays["tail"][snd] = zero_load(network, cfg, arrays["node"][snd].astype(np.int64),
                                    arrays["dst"][snd].astype(np.int64), flits)


def zero_load(network, cfg, src, dst, flits):
    """theory.zero_load_latency of each (src, dst, flits), each distinct triple walked once
    (an iteration's sends and steps go between few pairs), as an int64 array."""
    if not len(src):
        return np.zeros(0, np.int64)
    src, dst, flits = (np.asarray(x, np.int64) for x in (src, dst, flits))
    n, f = int(max(src.max(), dst.max())) + 1, int(flits.max()) + 1
    u, inv = np.unique((src * n + dst) * f + flits, return_inverse=True)
    t0 = np.asarray(theory.zero_load_latency(network, cfg, u // f // n, u // f % n, u % f),
                    np.int64)
    return t0[inv.reshape(-1)]


def slices_of(cycles, slice_cycles):
    """The slices a roofline op of `cycles` runs in: of at most slice_cycles each, or one
    (slice_cycles = 0, the default: compute and memory parts progress together)."""
    return max(1, -(-cycles // slice_cycles)) if slice_cycles else 1


ROOF_FLOPS = "the node's TFLOP/s (its tflops, its preset's, or its efficiency)"
ROOF_BYTES = "the node's memory bandwidth (its hbm_gbps or dram_gbps)"


def _roof_rates(g, i, n, cparams, clock):
    """A roofline op's FLOPs and bytes per cycle on node n: the node's, or its own peak
    (g.work[i][2], FLOP/s) in place of the node's FLOPs."""
    flops_pc, bytes_pc = cparams[n]
    peak = g.work[i][2]
    return (flops_pc if peak is None else peak / (clock * 1e9)), bytes_pc


def _roof_cycles(g, i, h, flops_pc, bytes_pc):
    """(compute cycles, memory cycles) of roofline op i, refused past MAX_INT naming the op,
    its node and the field (h._ceil's refusal knows neither)."""
    flops, nbytes, _ = g.work[i]
    out = []
    for field, b, pc, rate in (("flops", flops, flops_pc, ROOF_FLOPS),
                               ("bytes", nbytes, bytes_pc, ROOF_BYTES)):
        try:
            out.append(h._ceil(b, pc, rate))
        except h.GraphError:
            raise h.GraphError(f"op {g.label(i)} on {g.node[i]!r}: {field} = {b:g} at {pc:g} "
                               f"per cycle takes more than {h.MAX_INT:,} cycles; expected less "
                               f"work or a faster node ({rate})") from None
    return out


def _raise_for(g, i, h, node_id, cparams, eparams, clock, slice_cycles):
    """Raise the error op i's own checks raise (its nodes, its rates, its slices)."""
    GraphError = h.GraphError
    k = g.kind[i]
    if k == "compute":
        n = node_id(g.node[i], i, "node", ("npu", "host"))
        if g.work[i] is None:
            return
        C, H = _roof_cycles(g, i, h, *_roof_rates(g, i, n, cparams, clock))
        S = slices_of(max(C, H), slice_cycles)
        if S > h.MAX_SLICES:
            raise GraphError(f"op {g.label(i)}: {max(C, H):,} cycles on "
                             f"{g.node[i]!r} is {S:,} slices of workload.slice_cycles = "
                             f"{slice_cycles}; expected at most {h.MAX_SLICES:,} (raise "
                             f"workload.slice_cycles)")
    elif k == "reduce_npu":
        n = node_id(g.node[i], i, "node", ("npu",))
        h._ceil(4 * g.size[i], cparams[n][1])
        h._ceil(g.size[i], eparams[n][2])        # (before the share of the held units)
    elif k in ("take_units", "free_units"):
        node_id(g.node[i], i, "node", ("npu",))
    elif k == "reduce_offload":
        n = node_id(g.node[i], i, "node", ("npu",))
        h._ceil(g.size[i], eparams[n][0])
    elif k in ("memory", "engine"):
        n = node_id(g.node[i], i, "node", ("npu",) if k == "engine" else ("npu", "host"))
        h._ceil(g.size[i], cparams[n][1] if k == "memory" else eparams[n][0])
    elif k in ("acquire", "release"):
        node_id(g.node[i], i, "node")
    elif k == "send":
        a, b = node_id(g.node[i], i, "src"), node_id(g.dst[i], i, "dst")
        if a == b:
            raise GraphError(f"op {g.label(i)}: a send from {g.node[i]!r} to itself")
    elif k in ("mem_write", "mem_read"):
        a = node_id(g.node[i], i, "npu", ("npu", "host"))
        m = node_id(g.dst[i], i, "mem", ("mem", "host"))
        if a == m:
            raise GraphError(f"op {g.label(i)}: {g.node[i]!r} reading or writing its own "
                             f"memory is a compute op with bytes, not a {k}")


def compile_by_op(g, topo, cfg, h):
    """compile_graph op by op (the expansion of graphs with memory ops).

    Memory ops (mem_write, mem_read) become a read from the source's own memory (its
    memory unit, at its HBM or DRAM bandwidth), the network's part and the target's access
    (a memory node's controller, paying its access latency; a host's memory unit):
    at the flit level in pieces of workload.mem_piece_bytes, at the flow level as one flow
    (pysim.workload.transfer). Memory nodes cannot run compute ops. Holds (`OpGraph.hold`) that are never freed and add up to
    more than a device's capacity are an error naming it (the exact check, from the ops'
    times, follows the run: `memory_usage`).
    Returns the arrays and, per op of `g`, its (first, last) primitive op."""
    index = {name: i for i, name in enumerate(topo.node_names)}
    node_id = h._node_checker(g, topo, index)

    if len(g) == 0:
        raise GraphError("the op graph is empty")
    mem = h.memory_params(topo, cfg)
    cparams = h.compute_params(topo, cfg)          # (once: each walks every node)
    eparams = h.engine_params(topo, cfg)
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    ends = endpoint_arrays(cfg, topo, lambda i: cparams[i][1] * 1e9 * clock)
    piece = cfg.workload.mem_piece_bytes if cfg is not None else 65536
    flow = cfg is not None and cfg.network.model == "flow"    # a transfer is one flow
    kind, node, dst, size, after, unit = [], [], [], [], [], []
    slice_cycles = cfg.workload.slice_cycles if cfg is not None else 0
    span = [None] * len(g)              # per op of g: (first primitive, last primitive)
    isolated = {}                       # roofline ops: their time alone
    companions = []                     # roofline ops' memory companions
    stored, read = {}, {}               # per memory node or host: bytes written, bytes read
    caps = capacities(topo, cfg)

    def prim(k, n, d, s, deps, u=0):
        kind.append(h.KINDS[k])
        unit.append(u)
        node.append(n)
        dst.append(d)
        size.append(int(s))
        after.append(sorted(set(deps)) if len(deps) > 1 else list(deps))
        return len(kind) - 1

    check_expansion(g, topo, cparams, piece, slice_cycles, node_id, clock, h, flow)
    kinds, nodes, dsts, sizes = list(g.kind), list(g.node), list(g.dst), list(g.size)
    cols = g.arrays()
    ptr, dep = cols["dep_ptr"].tolist(), cols["dep"].tolist()
    nid, _ = node_ids(g, index, cols)
    strm = stream_sources(cols["code"], nid, cols["size"], np.diff(cols["dep_ptr"]),
                          cols["dep"], g.stream_mask()).tolist()
    streams = {}                        # primitive -> the primitive whose data it streams
    for i in (topological_order(g) if g._forward else range(len(g))):
        k = kinds[i]
        deps = [span[d][1] for d in dep[ptr[i]:ptr[i + 1]] if d != strm[i]]
        if k == "compute" and g.work[i] is None:
            n = node_id(nodes[i], i, "node", ("npu", "host"))
            p = prim("compute", n, -1, sizes[i], deps)
            span[i] = (p, p)
        elif k == "compute":
            # roofline: slices of at most slice_cycles, each a compute part on the compute
            # unit beside a memory part on the memory unit (csim/_dag.pxd runs the slices)
            n = node_id(nodes[i], i, "node", ("npu", "host"))
            C, H = _roof_cycles(g, i, h, *_roof_rates(g, i, n, cparams, clock))
            isolated[i] = max(C, H)
            S = slices_of(max(C, H), slice_cycles)
            if S > h.MAX_SLICES:
                raise GraphError(f"op {g.label(i)}: {max(C, H):,} cycles on "
                                 f"{nodes[i]!r} is {S:,} slices of workload.slice_cycles = "
                                 f"{slice_cycles}; expected at most {h.MAX_SLICES:,} (raise "
                                 f"workload.slice_cycles)")
            p = prim("roofline", n, S, C, deps, 0)
            companions.append(prim("roofline_mem", n, -1, H, [], 1))
            span[i] = (p, p)
        elif k == "reduce_npu":
            n = node_id(nodes[i], i, "node", ("npu",))
            _, bytes_pc = cparams[n]
            # on the units the collective holds, through communication's memory share
            mem_ = prim("compute", n, -1, h._ceil(4 * sizes[i], bytes_pc), deps,
                        COMM_RECV_UNIT)
            rate = eparams[n][2] * ends["reduce_fraction"][n]
            red = prim("compute", n, -1, h._ceil(sizes[i], rate), deps, h.HELD_UNIT)
            p = prim("delay", -1, -1, 0, [mem_, red])
            span[i] = (mem_, p)
            if strm[i] >= 0:
                streams[mem_] = streams[red] = span[strm[i]][0]
        elif k == "reduce_offload":
            n = node_id(nodes[i], i, "node", ("npu",))
            p = prim("compute", n, -1, h._ceil(sizes[i], eparams[n][0]), deps, 2)
            span[i] = (p, p)
        elif k in ("memory", "engine"):
            n = node_id(nodes[i], i, "node", ("npu",) if k == "engine" else ("npu", "host"))
            flops_pc, bytes_pc = cparams[n]
            rate = bytes_pc if k == "memory" else eparams[n][0]
            p = prim("compute", n, -1, h._ceil(sizes[i], rate), deps,
                     (COMM_RECV_UNIT if strm[i] >= 0 else h.COMM_MEM_UNIT) if k == "memory"
                     else 2)
            span[i] = (p, p)
            if strm[i] >= 0:
                streams[p] = span[strm[i]][0]
        elif k == "delay":
            p = prim("delay", -1, -1, sizes[i], deps)
            span[i] = (p, p)
        elif k in ("take_units", "free_units"):
            n = node_id(nodes[i], i, "node", ("npu",))
            p = prim(k, n, -1, sizes[i], deps, h.HELD_UNIT)
            span[i] = (p, p)
        elif k in ("acquire", "release"):
            n = node_id(nodes[i], i, "node")
            p = prim(k, n, -1, sizes[i], deps, h.GATE_UNIT)
            span[i] = (p, p)
        elif k == "send":
            a, b = node_id(nodes[i], i, "src"), node_id(dsts[i], i, "dst")
            if a == b:
                raise GraphError(f"op {g.label(i)}: a send from {nodes[i]!r} to itself")
            p = prim("send", a, b, sizes[i], deps)
            span[i] = (p, p)
            if strm[i] >= 0:
                streams[p] = span[strm[i]][0]
        else:
            a = node_id(nodes[i], i, "npu", ("npu", "host"))
            m = node_id(dsts[i], i, "mem", ("mem", "host"))
            if a == m:
                raise GraphError(f"op {g.label(i)}: {nodes[i]!r} reading or writing its own "
                                 f"memory is a compute op with bytes, not a {k}")
            own_bpc = cparams[a][1]              # the NPU's HBM (the host's DRAM) bandwidth
            if topo.node_kinds[m] == "mem":
                bpc, lat, _ = mem[m]
                m_unit = 0                    # the memory node's controller
            else:
                bpc, lat, m_unit = cparams[m][1], 0, transfer.UNIT   # the host's DRAM
            total = sizes[i]
            if k == "mem_write":
                stored[m] = stored.get(m, 0) + total
            else:
                read[m] = read.get(m, 0) + total
                if total > caps[m]:
                    raise GraphError(f"op {g.label(i)}: reading {total} bytes from "
                                     f"{topo.node_names[m]}, more than its capacity of "
                                     f"{caps[m]} bytes")
            span[i] = transfer.expand(
                prim, k, a, m, total, deps, own_cycles=lambda b: h._ceil(b, own_bpc),
                target_cycles=lambda b: h._ceil(b, bpc), latency=lat, m_unit=m_unit,
                piece=piece, flow=flow, request_bytes=h.REQUEST_BYTES)
    for m, b in read.items():
        if b > stored.get(m, 0):
            where = "memory node" if topo.node_kinds[m] == "mem" else "host"
            warnings.warn(PysimWarning(
                f"the op graph reads {b:,} bytes from {where} {topo.node_names[m]} and "
                f"writes {stored.get(m, 0):,} there: what no op writes is taken to be there "
                f"from the start"), stacklevel=2)
    check_holds(g, topo, cfg)            # (after the ops: their nodes are named first)
    n_ops = len(kind)
    succ_lists = [[] for _ in range(n_ops)]
    for i, a in enumerate(after):
        for d in a:
            succ_lists[d].append(i)
    succ_ptr = np.zeros(n_ops + 1, np.int64)
    succ_ptr[1:] = np.cumsum([len(s) for s in succ_lists])
    succ = np.array([x for s in succ_lists for x in sorted(s)], np.int32)
    # the ops of g were taken in a topological order, so the primitives have no cycles
    deps_n = np.array([len(a) for a in after], np.int32)
    deps_n[companions] = 1                  # started by their roofline op, never by deps
    stream_src = tail = None
    if streams:                             # (as _stream_prims)
        stream_src = np.full(n_ops, -1, np.int32)
        tail = np.zeros(n_ops, np.int64)
        pb = packet_bytes(cfg)
        for c, p in streams.items():
            stream_src[c] = p
            deps_n[c] += 1
            if kind[c] != h.KINDS["send"]:
                tail[c] = math.ceil(size[c] * min(1.0, pb / max(size[p], 1)))
    arrays = dict(kind=np.array(kind, np.int8), unit=np.array(unit, np.int8),
                  node=np.array(node, np.int32),
                  dst=np.array(dst, np.int32), size=np.array(size, np.int64),
                  deps=deps_n, succ_ptr=succ_ptr, succ=succ)
    arrays["isolated"] = isolated
    arrays["stream_src"], arrays["tail"] = stream_src, tail
    arrays["sms"], arrays["comm_hbm"] = ends["sms"], ends["comm_hbm"]
    arrays["memory_bpc"] = [cparams[n][1] if n in cparams else 0.0 for n in range(topo.n_nodes)]
    return arrays, span


def topological_order(g):
    """The ops of g in an order where every op comes after its dependencies (Kahn's
    algorithm, lowest id first among the ready); a cycle of dependencies is an error naming
    ops on it."""
    n = len(g)
    a = g.arrays()
    ptr, dep = a["dep_ptr"], a["dep"]
    lens = np.diff(ptr)
    by_dep = np.argsort(dep, kind="stable")
    succ = np.repeat(np.arange(n, dtype=np.int64), lens)[by_dep].tolist()
    sptr = np.concatenate([[0], np.cumsum(np.bincount(dep, minlength=n))]).tolist()
    deps = lens.tolist()
    ready = [i for i in range(n) if deps[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in succ[sptr[i]:sptr[i + 1]]:
            deps[j] -= 1
            if deps[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < n:
        stuck = [g.label(i) for i in np.flatnonzero(np.array(deps) > 0)[:5]]
        raise GraphError(f"the op graph has a cycle of dependencies (ops waiting on each "
                         f"other include {', '.join(stuck)})")
    return order


def check_expansion(g, topo, cparams, piece, slice_cycles, node_id, clock, h, flow=False):
    """Count, before building any, the engine's ops the graph's ops expand into -- a memory
    op's pieces (three ops each), a roofline op (two, csim running its slices; past
    MAX_SLICES slices, as many as its slices), a reduction on the NPU (three) -- and refuse
    more than MAX_OPS, naming the op that expands most and the key that sets its expansion
    (a 10 MB write in 1-byte pieces is 30 million engine ops)."""
    total, worst, worst_i = 0, -1, -1
    kinds, sizes = list(g.kind), list(g.size)
    for i in range(len(g)):
        k = kinds[i]
        if k in ("mem_write", "mem_read"):
            n = transfer.engine_ops(k, sizes[i], piece, flow)
        elif k == "compute" and g.work[i] is not None:
            # a roofline op and its memory companion; csim runs its slices, at most
            # MAX_SLICES of them (more are counted as ops, so that they are refused here)
            flops, nbytes, _ = g.work[i]
            flops_pc, bytes_pc = _roof_rates(g, i, node_id(g.node[i], i, "node",
                                                           ("npu", "host")), cparams, clock)
            cycles = max(flops / flops_pc, nbytes / bytes_pc)      # (may be inf)
            slices = (int(math.ceil(min(cycles, 1e30) / slice_cycles)) if slice_cycles
                      else 1)
            n = 2 if slices <= h.MAX_SLICES else slices
        elif k == "reduce_npu":
            n = 3
        else:
            n = 1
        total += n
        if n > worst:
            worst, worst_i = n, i
    if total <= h.MAX_OPS:
        return
    k = g.kind[worst_i]
    if k in ("mem_write", "mem_read") and not flow:
        why = (f"{g.size[worst_i]:,} bytes in pieces of workload.mem_piece_bytes = {piece} "
               f"at the flit level (raise it, or run at the flow level, network.model = "
               f"'flow', where a transfer is one flow)")
    elif k == "compute" and worst > h.MAX_OPS:
        # one op alone passes the limit: no slice length mends it; its rate is what is off
        flops, nbytes, _ = g.work[worst_i]
        flops_pc, bytes_pc = _roof_rates(g, worst_i, node_id(g.node[worst_i], worst_i, "node",
                                                             ("npu", "host")), cparams, clock)
        by_flops = flops / flops_pc >= nbytes / bytes_pc
        rate = (f"{flops:.4g} FLOPs at {flops_pc * clock / 1e3:.4g} TFLOP/s (the node's "
                f"tflops, its preset's or its efficiency)" if by_flops else
                f"{nbytes:.4g} bytes at {bytes_pc * clock:.4g} GB/s (the node's hbm_gbps or "
                f"dram_gbps)")
        why = f"it takes {min(max(flops / flops_pc, nbytes / bytes_pc), 1e300):.4g} cycles " \
              f"({rate}: a rate that small, or work that large, is the cause), its slices " \
              f"of workload.slice_cycles = {slice_cycles} that many"
    elif k == "compute":
        why = f"its slices of workload.slice_cycles = {slice_cycles} (raise it)"
    else:
        why = "the graph's ops themselves"
    raise GraphError(f"the op graph expands into {total:,} engine ops, more than "
                     f"{h.MAX_OPS:,}; "
                     f"op {g.label(worst_i)} alone into up to {worst:,}: {why}")
