"""Memory transfers (an op graph's mem_write and mem_read) as the engine's primitive ops.

A transfer between an NPU's (or a host's) own memory and a memory node or a host's DRAM has
three parts: the source's memory unit reads the bytes, the network carries them, the
target's memory (a memory node's controller, with its access latency; a host's memory unit)
stores them; a read runs the other way after a request.

- **Flit level** (packets are real): the transfer moves in pieces of
  workload.mem_piece_bytes, each read, sent and stored in turn, so that the three parts
  overlap piece by piece as a DMA engine streams them.
- **Flow level**: the network part is one message (one flow, sharing the links max-min
  fairly with every other flow); the two memory sides start with it, each in pieces of
  workload.mem_piece_bytes on its memory unit (so that other ops' memory traffic interleaves
  with them as at the flit level), at most SIDE_PIECES of them (larger ones past that), and
  the transfer is done when all three are, plus the target's access latency (a
  read: its request's trip and the access latency come first). A transfer of S bytes whose
  narrowest part is a link of B bytes per cycle takes S / B cycles plus the route's and the
  access latency.

A side that moves the bytes through an NPU's HBM or a host's DRAM is a DMA engine's: it runs
on the node's transfer unit (csim/_dag.pxd's unit 6), which shares the memory max-min fairly
with compute's and communication's traffic, taking at most what the transfer's route can
carry (`shares`: the narrowest of the NICs and links on the way, as a fraction of the node's
memory bandwidth) while the others want the memory, and whatever they leave.

`expand` adds a transfer's primitives through the compiler's `prim` and returns its first
and last; `engine_ops` counts them before anything is built.
"""
from __future__ import annotations

import numpy as np

from pysim.network import nic_bandwidths
from pysim.routing import path

SIDE_PIECES = 64           # flow level: at most this many pieces on each memory side
UNIT = 6                   # the node's transfer unit (csim/_dag.pxd)


def _side(total, piece, flow):
    """The sizes the memory sides move in: pieces of `piece`; at the flow level, past
    SIDE_PIECES of them, SIDE_PIECES of equal size."""
    if flow and total > SIDE_PIECES * piece:
        q, r = divmod(total, SIDE_PIECES)
        return [q + (1 if j < r else 0) for j in range(SIDE_PIECES)]
    return [min(piece, total - o) for o in range(0, total, piece)] or [0]


def engine_ops(kind, total, piece, flow):
    """How many primitive ops a transfer of `total` bytes expands into."""
    if flow:
        return 2 * len(_side(total, piece, True)) + 2 + (kind == "mem_read")
    return 3 * max(1, -(-total // piece)) + (kind == "mem_read")


def expand(prim, kind, a, m, total, deps, *, own_cycles, target_cycles, latency, m_unit,
           piece, flow, request_bytes):
    """Primitives of one transfer between node a (its transfer unit) and node m (unit m_unit,
    `latency` cycles of access on its first piece); own_cycles(b) and target_cycles(b) give
    each side's cycles for b bytes. prim(kind, node, dst, size, deps, unit) adds one; a
    memory side's op names the other end as its dst (`shares` finds its route by it)."""
    sides = _side(total, piece, flow)
    if flow:
        start = deps
        if kind == "mem_read":      # the request, then the target's access latency
            req = prim("send", a, m, request_bytes, deps)
            start = [prim("delay", -1, -1, latency, [req])]
        net = prim("send", m, a, total, start) if kind == "mem_read" else \
            prim("send", a, m, total, start)
        own = tgt = None
        for b in sides:
            own = prim("compute", a, m, own_cycles(b), start if own is None else [own], UNIT)
            tgt = prim("compute", m, a, target_cycles(b), start if tgt is None else [tgt],
                       m_unit)
        # a write is stored the target's access latency after its last bytes arrive
        done = prim("delay", -1, -1, latency if kind == "mem_write" else 0, [net, own, tgt])
        return (req if kind == "mem_read" else net), done
    if kind == "mem_write":
        first = rd = snd = acc = None
        for j, b in enumerate(sides):         # pieces leave in order, one after another
            rd = prim("compute", a, m, own_cycles(b), deps if rd is None else [rd], UNIT)
            snd = prim("send", a, m, b, [rd] + ([snd] if snd is not None else []))
            acc = prim("compute", m, a, (latency if j == 0 else 0) + target_cycles(b),
                       [snd] + ([acc] if acc is not None else []), m_unit)
            first = rd if first is None else first
        return first, acc
    req = prim("send", a, m, request_bytes, deps)
    acc = wr = None
    for j, b in enumerate(sides):
        acc = prim("compute", m, a, (latency if j == 0 else 0) + target_cycles(b),
                   [req] + ([acc] if acc is not None else []), m_unit)
        back = prim("send", m, a, b, [acc]) if b else acc
        wr = prim("compute", a, m, own_cycles(b), [back] + ([wr] if wr is not None else []),
                  UNIT)
    return req, wr


def route_bandwidth(network, cfg, a, b):
    """Bytes per cycle the route from node a to node b carries at most: the narrowest of a's
    NIC injection, b's ejection and the links on the way (parallel links between two nodes
    together)."""
    topo = network.topo
    inj, ej = nic_bandwidths(topo, cfg)
    bw = min(inj[a], ej[b])
    if a == b:
        return bw
    src = np.asarray(topo.ch_src, np.int64)
    dst = np.asarray(topo.ch_dst, np.int64)
    bpc = np.asarray(topo.ch_bytes_per_cycle, float)
    for c in path(topo, network.routing, a, b):
        u, v = src[c], dst[c]
        bw = min(bw, float(bpc[(src == u) & (dst == v)].sum()))    # parallel links together
    return bw


def shares(network, cfg, arrays, memory_bpc):
    """Per op of the compiled graph `arrays`: what a transfer's memory side (an op on the
    transfer unit) can use of its node's memory, memory_bpc[node] bytes per cycle: the
    wider way of its route to or from its other end (dst), as a fraction in (0, 1]; 1 for
    every other op. None if the graph has no such op."""
    ops = np.flatnonzero(np.asarray(arrays["unit"]) == UNIT)
    if ops.size == 0:
        return None
    out = np.ones(np.asarray(arrays["kind"]).size, np.float64)
    node, dst = np.asarray(arrays["node"]), np.asarray(arrays["dst"])
    seen = {}
    for i in ops:
        a, b = int(node[i]), int(dst[i])
        if (a, b) not in seen:
            bw = max(route_bandwidth(network, cfg, a, b), route_bandwidth(network, cfg, b, a))
            seen[(a, b)] = min(1.0, max(bw / memory_bpc[a], 1e-9))
        out[i] = seen[(a, b)]
    return out
