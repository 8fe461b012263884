"""Collectives expanded into op graphs (sends and reductions with dependencies).

Every participant holds N bytes. A collective is split into `chunks` independent pieces that
pipeline through the steps; within a chunk, the algorithms are the textbook ones:

- ring: p - 1 steps around a ring (reduce-scatter, all-gather; all-reduce = both);
- bidir_ring: each chunk halved, one half around the ring each way;
- hierarchical (on a torus or mesh): the rings of each dimension in turn, one way;
  bidir_hierarchical: each dimension's shard halved, one half around its rings each way;
- direct: every node sends each other node its share at once;
- halving_doubling: recursive halving (reduce-scatter) and doubling (all-gather), p = 2^k;
- broadcast (from the first participant) and reduce (to it): a pipeline along the ring, or
  direct sends.

A reduction of b bytes at a node is a compute op of ceil(b / reduce_bytes_per_cycle) cycles
on that node (0 when the reduction rate is not modelled); the next step's send of that data
depends on it. With an endpoint model (engine 'npu' or 'offload') the reductions and the
memory traffic are those of the NPU's cores or of its collectives offload engine, which
streams the data through its SRAM in pieces and reduces messages as they arrive (_Builder).
Collectives registered here: see ALGORITHMS.
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.schema import KEY_MAP, NONNEG, POS, Key, declare
from pysim.topology import build as build_topology
from pysim.workload.base import COLLECTIVE_KEYS, OP_GRAPH_KEYS, register
from pysim.workload.endpoint import held_units, streams as comm_streams  # noqa: F401
from pysim.workload.graph import engine_params, run_graph
from pysim.workload.result import op_times
from pysim.workload.collectives.builder import (  # noqa: F401
    COLLECTIVES, OFFLOAD_PIECES_IN_SRAM, _Builder, _Bulk, _split)
from pysim.workload.collectives.direct import direct  # noqa: F401
from pysim.workload.collectives.halving_doubling import halving_doubling  # noqa: F401
from pysim.workload.collectives.hierarchical import hierarchical  # noqa: F401
from pysim.workload.collectives.order import (  # noqa: F401
    HIERARCHICAL, RING_ALGORITHMS, _at_least_two, _snake, grid_cycle, participants,
    ring_order)
from pysim.workload.collectives.registry import (  # noqa: F401
    ALGORITHMS, _engine_ops, add_parts, build, bus_factor, ops_bound, symmetric)
from pysim.workload.collectives.ring import ring, ring_pipeline  # noqa: F401
from pysim.workload.collectives.tree import _tree_parent, tree  # noqa: F401


def check_offload_sram(topo, cfg, npus, nbytes=None, chunks=None):
    """The offload engine streams a chunk through its SRAM in pieces of SRAM / offload_pieces:
    an SRAM that cannot hold a piece of one byte holds nothing (a ConfigError naming
    offload_sram_mb)."""
    eparams = engine_params(topo, cfg)
    idx = {n: i for i, n in enumerate(topo.node_names)}
    for n in npus:
        _, sram, _, pieces = eparams[idx[n]]
        if sram < pieces:
            what = (f"a chunk of {-(-nbytes // chunks):,} bytes (workload.bytes = {nbytes} / "
                    f"workload.chunks = {chunks})" if nbytes is not None else "the data")
            raise ConfigError(
                f"workload.engine = 'offload': {what} does not fit in the engine's SRAM of "
                f"{sram:,} bytes ([topology.npu] offload_sram_mb) even in pieces of one byte "
                f"(it streams pieces of SRAM / offload_pieces = {pieces}); raise the SRAM")


def collective_graph(cfg, topo, graph=None):
    """The op graph of the configured collective (workload.*), and what describes it."""
    group = participants(cfg, topo)
    w = cfg.workload
    # ranks: along the ring for the ring algorithms (a ring through direct links), else in
    # the participants' order (on a mesh or torus, coordinate order: halving-doubling's
    # partners then differ in one coordinate; on a DGX-1, node order pairs NVLink peers),
    # unless workload.ring_order says
    if w.algorithm in RING_ALGORITHMS or w.ring_order is not None:
        order = ring_order(cfg, topo, group)
    else:
        order = list(group)
    clock = cfg.network.clock_ghz
    reduce_bpc = None if w.reduce_gbps is None else w.reduce_gbps / clock
    sram, pieces = None, OFFLOAD_PIECES_IN_SRAM
    if w.engine is not None:
        idx = {n: i for i, n in enumerate(topo.node_names)}
        kinds = {topo.node_kinds[idx[n]] for n in order}
        if kinds != {"npu"}:
            raise ConfigError(f"workload.engine = {w.engine!r}: the participants must all be "
                              f"NPUs, got {', '.join(sorted(kinds))}")
        sram, pieces = engine_params(topo, cfg)[idx[order[0]]][1::2]
        if w.engine == "offload":
            check_offload_sram(topo, cfg, order, w.bytes, w.chunks)
        for n in order:                                  # the data must fit in HBM
            own = topo.node_mem[idx[n]] if topo.node_mem else {}
            cap = own.get("hbm_gb", (cfg.topology.npu or {}).get("hbm_gb", 32.0)) * 1e9
            if w.bytes > cap:
                raise ConfigError(f"workload.bytes = {w.bytes}: more than the HBM of {n} "
                                  f"({cap:.0f} bytes)")
    dims = None
    if w.algorithm in HIERARCHICAL:
        if topo.coords is None or len(topo.dims) < 2:
            raise ConfigError(f"workload.algorithm = {w.algorithm!r} needs a topology with "
                              f"two or more dimensions (a torus or mesh)")
        if sorted(order) != sorted(topo.node_names):
            raise ConfigError(f"workload.algorithm = {w.algorithm!r} runs over every node of "
                              f"the topology (leave workload.group unset)")
        order = list(topo.node_names)          # coordinate order, dimension 0 innermost
        dims = list(topo.dims)
    chosen = {}
    if w.collective != "all_to_all" and cfg.is_set("workload.all_to_all_peers"):
        raise ConfigError(f"workload.all_to_all_peers = {w.all_to_all_peers!r} is read by "
                          f"workload.collective = 'all_to_all' only, not {w.collective!r} "
                          f"(leave it out)")
    g = build(w.collective, w.algorithm, order, w.bytes, w.chunks, reduce_bpc, w.engine,
              sram, graph, w.chunks_in_flight, dims, w.packet_flits * cfg.network.flit_bytes,
              sram_pieces=pieces, units=held_units(cfg, topo, w.engine),
              form=w.collective_form, peers=w.all_to_all_peers,
              **nccl_args(cfg, topo, chosen))
    return g, dict(collective=w.collective, algorithm=w.algorithm, bytes=w.bytes,
                   chunks=w.chunks, engine=w.engine, participants=group, order=order,
                   **chosen)


NCCL_KEYS = ("nccl_algorithm", "nccl_protocol", "nccl_channels", "nccl_tuning")


# the collective keys NCCL's algorithms leave unread, and why
NCCL_IDLE = {
    "chunks": "NCCL's loops, chunks and slices are its own (pysim/workload/nccl.py)",
    "chunks_in_flight": "NCCL's pipeline of slices is its own",
    "reduce_gbps": "the reductions of NCCL's algorithms take no time here (their "
                   "arithmetic is not modelled)",
}


def check_nccl_reads(cfg):
    """Refuse a collective key set, away from its default, that workload.algorithm = 'nccl'
    does not read, naming it, its value and why (a key typed, or one a file holds beside its
    own algorithm: not a file's key that an override to 'nccl' leaves idle)."""
    w = cfg.workload
    given = list(NCCL_IDLE.items())
    if w.engine == "offload":
        given.append(("engine", "NCCL's kernels run on the GPUs' own SMs (workload.engine = "
                                "'npu', or unset)"))
    for k, why in given:
        path = f"workload.{k}"
        if cfg.is_set(path) and getattr(w, k) != KEY_MAP[path].default and \
                (path in cfg.typed or "workload.algorithm" not in cfg.typed):
            raise ConfigError(f"{path} = {getattr(w, k)!r} is not read by workload.algorithm "
                              f"= 'nccl': {why}; leave it out")


def nccl_args(cfg, topo, chosen=None):
    """build()'s machine and nccl_settings for workload.algorithm = 'nccl' (else {});
    `chosen`, if given, receives the algorithm and protocol NCCL's model picked."""
    w = cfg.workload
    if w.algorithm != "nccl":
        for k in NCCL_KEYS:                # (set, and read by nothing: refused, not ignored)
            if cfg.is_set(f"workload.{k}"):
                raise ConfigError(f"workload.{k} = {getattr(w, k)!r} is read by workload."
                                  f"algorithm = 'nccl' only, not {w.algorithm!r} (set "
                                  f"workload.algorithm = 'nccl', or leave workload.{k} out)")
        return {}
    check_nccl_reads(cfg)
    # channels at most: workload.nccl_channels, else the SMs an NPU-run collective may hold
    # (workload.comm_sms, when set), else NCCL's default
    most = w.nccl_channels or (getattr(w, "comm_sms", None) if w.engine == "npu" else None)
    settings = dict(algorithm=w.nccl_algorithm, protocol=w.nccl_protocol,
                    channels=most or 0, chosen=chosen, tuning=w.nccl_tuning)
    return dict(machine=getattr(topo, "cluster", None), nccl_settings=settings)


def endpoint_report(graph, result, order, clock_ghz):
    """Per participant: HBM bytes moved for communication, network bytes sent, their ratio,
    the achieved send bandwidth, and how much longer its roofline compute ops took than
    alone."""
    t = max(result.makespan_cycles, 1)
    rows = {}
    for n in order:
        rows[n] = dict(hbm_bytes=0, network_bytes=0, compute_slowdown_cycles=0)
    for k, node, size in zip(graph.kind, graph.node, graph.size):
        if node in rows and k == "memory":
            rows[node]["hbm_bytes"] += size
        elif node in rows and k == "reduce_npu":      # see OpGraph.reduce
            rows[node]["hbm_bytes"] += 4 * size
        elif node in rows and k == "send":
            rows[node]["network_bytes"] += size
    start, finish = op_times(result.ops)
    for i, (k, node, w) in enumerate(zip(graph.kind, graph.node, graph.work)):
        if k == "compute" and w is not None and node in rows:
            iso = result.ops[i]["isolated_cycles"]
            rows[node]["compute_slowdown_cycles"] += int(finish[i] - start[i]) - iso
    for r in rows.values():
        r["hbm_bytes_per_network_byte"] = r["hbm_bytes"] / r["network_bytes"] \
            if r["network_bytes"] else 0.0
        r["network_gbps"] = r["network_bytes"] * clock_ghz / t
    return rows


@register("collective", traces=True,
          reads=("workload.collective", "workload.bytes") + COLLECTIVE_KEYS + OP_GRAPH_KEYS)
def run_collective(cfg, progress=None):
    """Expand workload.* into an op graph, run it, and report collective time and bandwidth,
    and per NPU its HBM traffic per network byte."""
    topo = build_topology(cfg)                  # (run_graph compiles the network, routes and all)
    graph, meta = collective_graph(cfg, topo)
    result = run_graph(cfg, graph, progress=progress)
    cycles = result.makespan_cycles
    p = len(meta["order"])
    w = cfg.workload
    algbw = w.bytes * cfg.network.clock_ghz / cycles if cycles else float("nan")
    per_npu = endpoint_report(graph, result, meta["order"], cfg.network.clock_ghz)
    result.collective = dict(
        **meta, collective_cycles=cycles,
        collective_seconds=cycles / (cfg.network.clock_ghz * 1e9),
        algbw_gbps=algbw, busbw_gbps=algbw * bus_factor(w.collective, p), per_npu=per_npu)
    return result


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "collective", "str", "all_reduce", "-",
        "Collective: all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce "
        "(the root is the first participant).", None,
        lambda: ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                 "reduce"]),
    Key("workload", "algorithm", "str", "ring", "-",
        "Collective algorithm: ring, bidir_ring, direct, halving_doubling, tree (double "
        "binary tree), hierarchical (a torus's or mesh's dimensions in turn, each ring one "
        "way), bidir_hierarchical (the same, each dimension's shard halved, one half each "
        "way), nccl (as NCCL runs it on a cluster: "
        "pysim/workload/nccl.py).", None, lambda: list(ALGORITHMS)),
    Key("workload", "bytes", "int", 1048576, "bytes", "Collective: bytes per participant.",
        (lambda x: x > 0, "an integer >= 1 (a collective of no data has no time or bandwidth)")),
    Key("workload", "chunks", "int", 4, "-",
        "Collective: pieces the data is split into, pipelined through the steps.", POS),
    Key("workload", "collective_form", "str", "steps", "-",
        "Collectives: 'steps' (an op per send, reduction and reception of every step of every "
        "chunk) or 'streams' (ring and bidir_ring reduce-scatter, all-gather and all-reduce "
        "of one chunk without an offload engine: per rank one send to its ring neighbour of "
        "all its steps' bytes, one reduction and one reception there, and the steps' "
        "latencies as one delay; p ops instead of p (p - 1); within 1% of the steps where the "
        "ring's hops share no link; meant for the flow level, see docs/user-guide.md).",
        None, lambda: ["steps", "streams"]),
    Key("workload", "chunks_in_flight", "int", 0, "-",
        "Collective: at most this many chunks under way at a node at once (0: no bound).",
        NONNEG),
    Key("workload", "all_to_all_peers", "int", 0, "-",
        "All-to-all (direct): the peers a node sends to, and receives from, at once; its "
        "messages go to i + 1, i + 2, ... and one to i + k + peers starts when the one to "
        "i + k has been received and its receiver has received from i + peers (0: all p - 1 "
        "at once, as NCCL 2.19 runs a grouped all-to-all of ncclSend/ncclRecv: every peer's "
        "work in one kernel, 8 sends and 8 receives per block, src/enqueue.cc; and as the "
        "offload engine runs it from its SRAM, a piece's blocks all there before the first "
        "is sent, as ASTRA-sim 1.0's direct all-to-all does with its window of -1).",
        NONNEG),
    Key("workload", "group", "strs", None, "node names",
        "Collective participants, NPUs or hosts (default: every NPU, or every host if there "
        "is none); training: the NPUs used, in rank order (default: every NPU).",
        None),
    Key("workload", "ring_order", "strs", None, "node names",
        "Ring order of the participants, and their ranks for every algorithm (default: ring "
        "algorithms go round a ring over direct links if the topology has one, widest first, "
        "else node order; the others rank in workload.group order).", None),
    Key("workload", "reduce_gbps", "float", None, "GB/s",
        "Reduction throughput at each node (default: reductions take no time).", POS),
    Key("workload", "engine", "str", None, "-",
        "Collectives: where reductions run: 'npu' (its cores, through HBM) or 'offload' (a "
        "collectives engine); default: not modelled, reductions at workload.reduce_gbps "
        "(training: default 'npu').",
        None, lambda: ["npu", "offload"]),
)
