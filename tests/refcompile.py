"""The op-by-op expansion of an op graph into csim's primitives, kept as the reference
that pysim.workload.compile's array expansion must equal primitive for primitive
(tests/test_bulk.py)."""
import math
import warnings

import numpy as np

from pysim.config import PysimWarning
from pysim.workload.graph import (GATE_UNIT, KINDS, MAX_SLICES, REQUEST_BYTES, GraphError,
                                  _ceil, _check_expansion, capacities, check_holds,
                                  compute_params, engine_params, memory_params,
                                  topological_order)


def compile_graph_by_op(g, topo, cfg=None):
    """Check the graph against the topology and turn it into csim's arrays.

    Memory ops move in pieces of workload.mem_piece_bytes so that reading, transfer and
    storing overlap. A write of b bytes from an NPU (or host) to a memory node (or a host's
    DRAM) is, per piece, a read of the piece from the source's own memory (its memory unit,
    at its HBM or DRAM bandwidth), a send to the target, and the target's access of piece /
    bandwidth cycles (a memory node's controller, its one unit, also paying the access
    latency on the first piece; a host's memory unit); a read is a request send, then per
    piece the target's access, a send back and the write into the reader's memory. Pieces
    go in order. A memory op starts with its first piece and finishes with its last. Memory
    nodes cannot run compute ops. Holds (`OpGraph.hold`) that are never freed and add up to
    more than a device's capacity are an error naming it (the exact check, from the ops'
    times, follows the run: `memory_usage`).
    Returns the arrays and, per op of `g`, its (first, last) primitive op."""
    index = {name: i for i, name in enumerate(topo.node_names)}

    def node_id(name, i, what, kinds=None):
        if not isinstance(name, str):
            raise GraphError(f"op {g.label(i)}: {what} = {name!r}: expected a node name (a "
                             f"string)")
        if name not in index:
            known = ", ".join(topo.node_names[:8]) + (" ..." if topo.n_nodes > 8 else "")
            raise GraphError(f"op {g.label(i)}: {what} = {name!r}: no node of that name "
                             f"(nodes: {known})")
        n = index[name]
        kind = topo.node_kinds[n]
        if kind == "switch":
            raise GraphError(f"op {g.label(i)}: {what} = {name!r} is a switch, which has no "
                             f"compute unit or NIC")
        if kinds and kind not in kinds:
            raise GraphError(f"op {g.label(i)}: {what} = {name!r} is a {kind} node; expected "
                             f"{' or '.join(kinds)}")
        return n

    if len(g) == 0:
        raise GraphError("the op graph is empty")
    mem = memory_params(topo, cfg)
    cparams = compute_params(topo, cfg)          # (once: each walks every node)
    eparams = engine_params(topo, cfg)
    clock = cfg.network.clock_ghz if cfg is not None else 1.0
    piece = cfg.workload.mem_piece_bytes if cfg is not None else 65536
    kind, node, dst, size, after, unit = [], [], [], [], [], []
    slice_cycles = cfg.workload.slice_cycles if cfg is not None else 1000
    span = [None] * len(g)              # per op of g: (first primitive, last primitive)
    isolated = {}                       # roofline ops: their time alone
    companions = []                     # roofline ops' memory companions
    stored, read = {}, {}               # per memory node or host: bytes written, bytes read
    caps = capacities(topo, cfg)

    def prim(k, n, d, s, deps, u=0):
        kind.append(KINDS[k])
        unit.append(u)
        node.append(n)
        dst.append(d)
        size.append(int(s))
        after.append(sorted(set(deps)) if len(deps) > 1 else list(deps))
        return len(kind) - 1

    _check_expansion(g, topo, cparams, piece, slice_cycles, node_id, clock)
    for i in (topological_order(g) if g._forward else range(len(g))):
        k = g.kind[i]
        deps = [span[d][1] for d in g.after[i]]
        if k == "compute" and g.work[i] is None:
            n = node_id(g.node[i], i, "node", ("npu", "host"))
            p = prim("compute", n, -1, g.size[i], deps)
            span[i] = (p, p)
        elif k == "compute":
            # roofline: slices of at most slice_cycles, each a compute part on the compute
            # unit beside a memory part on the memory unit (csim/_dag.pxd runs the slices)
            n = node_id(g.node[i], i, "node", ("npu", "host"))
            flops_pc, bytes_pc = cparams[n]
            flops, nbytes, peak = g.work[i]
            if peak is not None:
                flops_pc = peak / (clock * 1e9)
            C = _ceil(flops, flops_pc)
            H = _ceil(nbytes, bytes_pc)
            isolated[i] = max(C, H)
            S = max(1, -(-max(C, H) // slice_cycles))
            if S > MAX_SLICES:
                raise GraphError(f"op {g.label(i)}: {max(C, H):,} cycles on "
                                 f"{g.node[i]!r} is {S:,} slices of workload.slice_cycles = "
                                 f"{slice_cycles}; expected at most {MAX_SLICES:,} (raise "
                                 f"workload.slice_cycles)")
            p = prim("roofline", n, S, C, deps, 0)
            companions.append(prim("roofline_mem", n, -1, H, [], 1))
            span[i] = (p, p)
        elif k == "reduce_npu":
            n = node_id(g.node[i], i, "node", ("npu",))
            _, bytes_pc = cparams[n]
            mem_ = prim("compute", n, -1, _ceil(4 * g.size[i], bytes_pc), deps, 1)
            red = prim("compute", n, -1, _ceil(g.size[i], eparams[n][2]), deps, 0)
            p = prim("delay", -1, -1, 0, [mem_, red])
            span[i] = (mem_, p)
        elif k == "reduce_offload":
            n = node_id(g.node[i], i, "node", ("npu",))
            p = prim("compute", n, -1, _ceil(g.size[i], eparams[n][0]), deps, 2)
            span[i] = (p, p)
        elif k in ("memory", "engine"):
            n = node_id(g.node[i], i, "node", ("npu",) if k == "engine" else ("npu", "host"))
            flops_pc, bytes_pc = cparams[n]
            rate = bytes_pc if k == "memory" else eparams[n][0]
            p = prim("compute", n, -1, _ceil(g.size[i], rate), deps, 1 if k == "memory" else 2)
            span[i] = (p, p)
        elif k == "delay":
            p = prim("delay", -1, -1, g.size[i], deps)
            span[i] = (p, p)
        elif k in ("acquire", "release"):
            n = node_id(g.node[i], i, "node")
            p = prim(k, n, -1, g.size[i], deps, GATE_UNIT)
            span[i] = (p, p)
        elif k == "send":
            a, b = node_id(g.node[i], i, "src"), node_id(g.dst[i], i, "dst")
            if a == b:
                raise GraphError(f"op {g.label(i)}: a send from {g.node[i]!r} to itself")
            p = prim("send", a, b, g.size[i], deps)
            span[i] = (p, p)
        else:
            a = node_id(g.node[i], i, "npu", ("npu", "host"))
            m = node_id(g.dst[i], i, "mem", ("mem", "host"))
            if a == m:
                raise GraphError(f"op {g.label(i)}: {g.node[i]!r} reading or writing its own "
                                 f"memory is a compute op with bytes, not a {k}")
            own_bpc = cparams[a][1]              # the NPU's HBM (the host's DRAM) bandwidth
            if topo.node_kinds[m] == "mem":
                bpc, lat, _ = mem[m]
                m_unit = 0                    # the memory node's controller
            else:
                bpc, lat, m_unit = cparams[m][1], 0, 1     # the host's memory unit
            total = g.size[i]
            pieces = [min(piece, total - o) for o in range(0, total, piece)] or [0]
            if k == "mem_write":
                stored[m] = stored.get(m, 0) + total
                first = rd = snd = acc = None
                for j, b in enumerate(pieces):       # pieces leave in order, one after another
                    rd = prim("compute", a, -1, _ceil(b, own_bpc),
                              deps if rd is None else [rd], 1)
                    snd = prim("send", a, m, b, [rd] + ([snd] if snd is not None else []))
                    acc = prim("compute", m, -1, (lat if j == 0 else 0) + _ceil(b, bpc),
                               [snd] + ([acc] if acc is not None else []), m_unit)
                    first = rd if first is None else first
                span[i] = (first, acc)
            else:
                read[m] = read.get(m, 0) + total
                if total > caps[m]:
                    raise GraphError(f"op {g.label(i)}: reading {total} bytes from "
                                     f"{topo.node_names[m]}, more than its capacity of "
                                     f"{caps[m]} bytes")
                req = prim("send", a, m, REQUEST_BYTES, deps)
                acc = wr = None
                for j, b in enumerate(pieces):
                    acc = prim("compute", m, -1, (lat if j == 0 else 0) + _ceil(b, bpc),
                               [req] + ([acc] if acc is not None else []), m_unit)
                    back = prim("send", m, a, b, [acc]) if b else acc
                    wr = prim("compute", a, -1, _ceil(b, own_bpc),
                              [back] + ([wr] if wr is not None else []), 1)
                span[i] = (req, wr)
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
    arrays = dict(kind=np.array(kind, np.int8), unit=np.array(unit, np.int8),
                  node=np.array(node, np.int32),
                  dst=np.array(dst, np.int32), size=np.array(size, np.int64),
                  deps=deps_n, succ_ptr=succ_ptr, succ=succ)
    arrays["isolated"] = isolated
    return arrays, span
