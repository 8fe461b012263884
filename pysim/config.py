"""TOML configuration: every key declared once, with its type, unit, default and doc.

`load(path)` and `from_dict(d)` return a validated `Config`; every error is a `ConfigError`
that names the key, the value given and what was expected. The configuration reference,
docs/configuration.md, is generated from `KEYS` (`python -m pysim.docs`), and a test checks it
is current.
"""
from __future__ import annotations

import copy
import difflib
import math
import os
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from csim._engine import MAX_PACKET_FLITS, MAX_VCS     # limits of the compiled core


from pysim.errors import ConfigError, PysimWarning  # noqa: F401  (re-exported)
from pysim.schema import KEY_MAP, KEYS, Key, declare, sections  # noqa: F401


def _positive(x):
    return x > 0


def _nonneg(x):
    return x >= 0


def _prob(x):
    return 0.0 <= x <= 1.0


def _all_positive(xs):
    return len(xs) > 0 and all(x > 0 for x in xs)


def _all_nonneg(xs):
    return all(x >= 0 for x in xs)


MAX_INT = 10 ** 15          # integers (cycles, bytes, counts) above this are refused: cycle
                            # stamps are 64-bit, and no run gets near 10^15 of anything
MAX_FLIT_BYTES = 1 << 16   # the engine counts a flit's bytes in 32 bits, and serialisation
                            # credits in flit_bytes * 2**20
MAX_DELAY_CYCLES = 10 ** 6  # a router stage or a link: the event wheel spans the longest

POS = (_positive, "a number > 0")
DELAY = (lambda x: 0 <= x <= MAX_DELAY_CYCLES, f"an integer in 0 .. {MAX_DELAY_CYCLES:,}")
DELAY1 = (lambda x: 1 <= x <= MAX_DELAY_CYCLES, f"an integer in 1 .. {MAX_DELAY_CYCLES:,}")
PACKET = (lambda x: 1 <= x <= MAX_PACKET_FLITS, f"an integer in 1 .. {MAX_PACKET_FLITS}")
NONNEG = (_nonneg, "a number >= 0")
PROB = (_prob, "a number in [0, 1]")


def finite_float(v):
    """v (an int or a float, not a bool) as a finite float, else None: an integer too large
    for a float (10**400) or an infinite or NaN float is not a quantity."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def positive_number(where, v):
    """A finite number > 0 given for `where` (a key or a table field), as a float."""
    f = finite_float(v)
    if f is None or not f > 0:
        raise ConfigError(f"{where} = {_short(v)}: expected a finite number > 0")
    return f


def _short(v, limit=60):
    """repr(v), cut short: a 400-digit integer named in full buries the message."""
    r = repr(v)
    return r if len(r) <= limit else f"{r[:limit - 20]}...{r[-12:]} ({len(r)} characters)"


def _check_fields(path, table, fields):
    for k, v in table.items():
        if k not in fields:
            raise ConfigError(f"{path}.{k}: unknown field{_suggest(k, fields)}; expected "
                              f"{', '.join(fields)}")
        positive_number(f"{path}.{k}", v)


def _fields(path, fields, kinds=None):
    """Check of a table of defaults: only `fields`, each a finite number > 0; with `kinds`,
    a table of such tables, one per node kind named (the predicate raises itself, to name
    the field)."""
    def check(table):
        if kinds is None:
            _check_fields(path, table, fields)
            return True
        for kind, sub in table.items():
            if kind not in kinds:
                raise ConfigError(f"{path}.{kind}: unknown node kind {kind!r}; expected one "
                                  f"of {', '.join(kinds)}")
            if not isinstance(sub, dict):
                raise ConfigError(f"{path}.{kind} = {sub!r}: expected a table")
            _check_fields(f"{path}.{kind}", sub, fields)
        return True
    return check, "a table"


NIC_FIELDS = ("injection_gbps", "ejection_gbps")
NPU_FIELDS = ("tflops", "tflops_fp32", "tflops_fp16", "tflops_bf16", "hbm_gbps", "hbm_gb",
              "reduce_gbps", "offload_gbps", "offload_sram_mb", "offload_pieces")


def _npu_table(table):
    """[topology.npu]: numeric fields > 0, a preset's name, an efficiency table."""
    from pysim.models.presets import check_efficiency, check_preset
    numeric = {k: v for k, v in table.items() if k not in ("preset", "efficiency")}
    _check_fields("topology.npu", numeric, NPU_FIELDS + ("preset", "efficiency"))
    if "preset" in table:
        check_preset("topology.npu.preset", table["preset"])
    if "efficiency" in table:
        check_efficiency("topology.npu.efficiency", table["efficiency"])
    return True


def _parallel_table(table):
    """[workload.parallel]: the training plan's fields (pysim.workload.training)."""
    from pysim.workload.training import check_parallel
    check_parallel(table)
    return True


def _topology_kinds():
    from pysim.topology import BUILDERS
    return sorted(BUILDERS)


def _workload_kinds():
    from pysim.workload import WORKLOADS
    return sorted(WORKLOADS)


def _memory_policy(v):
    from pysim.workload.memory import parse_policy
    parse_policy(v)                      # raises a ConfigError naming the known ones
    return True


def _ratio_table(t):
    from pysim.workload.memory import check_ratios
    check_ratios(t)
    return True


def _patterns():
    from pysim.traffic import PATTERNS
    return sorted(PATTERNS)


declare(
    # ------------------------------------------------------------------ simulation
    Key("simulation", "seed", "int", 1, "-", "Seed of the traffic generator's PRNG.",
        NONNEG),
    Key("simulation", "warmup_cycles", "int", 2000, "cycles",
        "Cycles simulated before measurement starts.", NONNEG),
    Key("simulation", "measure_cycles", "int", 10000, "cycles",
        "Length of the measured window; packets created in it are measured.", POS),
    Key("simulation", "drain_cycles", "int", 50000, "cycles",
        "Most cycles to wait, after the window, for measured packets; "
        "if they are not all delivered by then the run is saturated.", NONNEG),
    Key("simulation", "watchdog_cycles", "int", 20000, "cycles",
        "Flits buffered and none moving for this long, beyond the longest a flit takes "
        "through the slowest link or NIC (serialisation and latency) and a router, is "
        "reported as deadlock.", POS),
    Key("simulation", "max_packets", "int", 4000000, "packets",
        "Most packets alive at once (queued at sources or in flight); beyond it the run "
        "stops as saturated.", POS),
    # ------------------------------------------------------------------ network
    Key("network", "flit_bytes", "int", 32, "bytes", "Bytes per flit.",
        (lambda x: 1 <= x <= MAX_FLIT_BYTES, f"an integer in 1 .. {MAX_FLIT_BYTES:,}")),
    Key("network", "clock_ghz", "float", 1.0, "GHz", "Network clock; 1 cycle = 1/clock_ghz ns.",
        POS),
    Key("network", "vcs", "int", 2, "-", "Virtual channels per input port.",
        (lambda x: 1 <= x <= MAX_VCS, f"an integer in 1 .. {MAX_VCS}")),
    Key("network", "vc_buffer_flits", "int", 8, "flits", "Buffer depth of each virtual channel.",
        POS),
    Key("network", "routing_delay", "int", 1, "cycles",
        "Route computation: head arrival to first VC allocation.", DELAY),
    Key("network", "vc_alloc_delay", "int", 1, "cycles",
        "VC allocation grant to first switch allocation.", DELAY),
    Key("network", "sw_alloc_delay", "int", 1, "cycles",
        "Switch allocation grant to switch traversal (also delays the credit).", DELAY1),
    Key("network", "st_delay", "int", 1, "cycles",
        "Switch traversal: crossbar to the output link.", DELAY),
    Key("network", "injection_delay", "int", 1, "cycles",
        "NIC: cycles from choosing a flit to send (a free VC with a credit) to its entering "
        "the NIC-router channel, like a router's switch traversal; 1 is BookSim's timing, 0 "
        "puts the flit on the channel the cycle it is chosen.", DELAY),
    Key("network", "wait_for_tail_credit", "bool", False, "-",
        "true: an output VC is reallocated only after the credit of the previous packet's "
        "tail returns, so a VC buffer holds one packet at a time; false (BookSim's default): "
        "as soon as the tail has left.", None),
    Key("network", "va_input_arbiter", "str", "round_robin", "-",
        "VC allocation: 'round_robin' (BookSim's separable input-first allocator): a waiting "
        "head asks for the first free output VC of its class at or after its input VC's "
        "round-robin pointer, which moves past each VC it is granted; 'own_index': from the VC "
        "at its input VC's own index, so heads in different input VCs ask for different output "
        "VCs first (fewer conflicts).", None, lambda: ["own_index", "round_robin"]),
    Key("network", "sa_input_arbiter", "str", "outputs", "-",
        "Switch allocation: what an input port's round-robin arbiter turns over: 'outputs' "
        "(BookSim's separable input-first allocator: per output asked for, the ready VC "
        "nearest after the port's VC pointer, and among those outputs the one nearest after "
        "its output pointer) or 'vcs' (the ready VC nearest after the VC pointer).", None,
        lambda: ["outputs", "vcs"]),
    Key("network", "injection_gbps", "float", None, "GB/s",
        "NIC injection bandwidth; default one flit per cycle.", POS),
    Key("network", "ejection_gbps", "float", None, "GB/s",
        "NIC ejection bandwidth; default one flit per cycle.", POS),
    Key("network", "nic_latency_ns", "float", None, "ns",
        "Latency of the NIC-router channel, each way; default one cycle.", POS),
    Key("network", "model", "str", "flit", "-",
        "Network fidelity of op graphs and collectives: 'flit' (routers, VCs, credits, cycle "
        "by cycle) or 'flow' (each message a flow on the same route, links and NICs shared "
        "max-min fairly, plus its zero-load latency; see docs/flow.md). Synthetic traffic is "
        "flit-level only.", None, lambda: ["flit", "flow"]),
    # ------------------------------------------------------------------ topology
    Key("topology", "kind", "str", "mesh", "-", "Registered topology builder.", None,
        _topology_kinds),
    Key("topology", "dims", "ints", [8, 8], "nodes", "Nodes per dimension (mesh, torus).",
        (_all_positive, "a non-empty list of integers > 0")),
    Key("topology", "size", "int", 8, "nodes",
        "Number of nodes (ring, switch, fully_connected).", (lambda x: x >= 2, "an integer >= 2")),
    Key("topology", "bidirectional", "bool", True, "-",
        "Ring: links in both directions (else one direction only).", None),
    Key("topology", "dim_link_gbps", "floats", None, "GB/s",
        "Mesh, torus: bandwidth of the links of each dimension (overrides link_gbps).",
        (_all_positive, "a list of numbers > 0, one per dimension")),
    Key("topology", "file", "str", None, "path",
        "Take the [topology] table of this TOML file, or of a shipped system named bare "
        "('dgx1-v100'); keys given here as well override the file's.", None),
    Key("topology", "nodes", "tables", None, "-",
        "Graph: [[topology.nodes]] with name, kind (npu, mem, host, switch), and optional "
        "injection_gbps, ejection_gbps.", None),
    Key("topology", "links", "tables", None, "-",
        "Graph: [[topology.links]] with a, b (node names), and optional gbps or "
        "bytes_per_cycle, latency_ns or latency_cycles (default link_gbps, link_latency_ns), "
        "count (parallel links, default 1), directed (a to b only, default false).", None),
    Key("topology", "nic", "table", None, "-",
        "Per node kind NIC defaults, e.g. [topology.nic.mem] injection_gbps = 100.",
        _fields("topology.nic", NIC_FIELDS, kinds=("npu", "mem", "host"))),
    Key("topology", "mem", "table", None, "-",
        "Memory-node defaults: [topology.mem] gbps (default 100), latency_ns (50), "
        "capacity_gb (128); graph nodes may override with mem_gbps, mem_latency_ns, "
        "capacity_gb.", _fields("topology.mem", ("gbps", "latency_ns", "capacity_gb"))),
    Key("topology", "npu", "table", None, "-",
        "NPU: [topology.npu] preset (an accelerator's datasheet figures: v100, a100, h100, "
        "tpu_v3; see docs/models.md), tflops (peak at every precision; default 100), "
        "tflops_fp32, tflops_fp16, tflops_bf16 (peak at one precision; mixed takes the 16-bit "
        "one), hbm_gbps (900), hbm_gb (32: a collective's data must fit), reduce_gbps "
        "(reduction rate of the NPU's own cores, 450), offload_gbps (its collectives "
        "engine's, 256), offload_sram_mb (8), offload_pieces (16: the engine streams its SRAM in "
        "pieces of offload_sram_mb / this), efficiency (a table: fraction of peak per "
        "layer kind, e.g. {conv = 0.6}); fields given override the preset's; graph nodes may "
        "override (and name their own preset).", (_npu_table, "a table")),
    Key("topology", "host", "table", None, "-",
        "Host: [topology.host] tflops (default 2), dram_gbps (100), dram_gb (its memory, "
        "256); graph nodes may override.",
        _fields("topology.host", ("tflops", "dram_gbps", "dram_gb"))),
    Key("topology", "route_weight", "str", "hops", "-",
        "Graph routing: shortest paths by 'hops', link 'latency' or inverse 'bandwidth'.",
        None, lambda: ["hops", "latency", "bandwidth"]),
    Key("topology", "transit", "strs", None, "node kinds",
        "Graph routing: the kinds of node that forward other nodes' packets (default: every "
        "kind); ['switch', 'host'] keeps traffic between NPUs without a direct link off the "
        "other NPUs, as on servers whose GPUs do not route.",
        (lambda xs: len(xs) > 0 and all(x in ("npu", "mem", "host", "switch") for x in xs),
         "a non-empty list of node kinds: npu, mem, host, switch")),
    Key("topology", "dateline", "str", "booksim", "-",
        "Ring, torus: VC classes of each dimension. 'booksim' (BookSim's): for its whole trip "
        "in a dimension a packet uses the upper half of the VCs if its destination's "
        "coordinate is below the one it entered at, else the lower; 'crossing': the lower "
        "half until it crosses the wrap-around link, the upper from it on; 'fewest': every VC "
        "for every packet when the routes cannot deadlock without classes (a 4-ary torus with "
        "tie_break = 'parity'), else 'crossing'.", None, lambda: ["booksim", "crossing", "fewest"]),
    Key("topology", "tie_break", "str", "parity", "-",
        "Ring, torus: the way a packet takes at distance exactly k/2 (k even) where it enters "
        "a dimension: 'parity' (+ if its coordinate there is even, else -: routes are a fixed "
        "table, as the flow level's, every link gets the same share of ties, and a 4-ary "
        "torus needs no dateline classes) or 'random' (BookSim's: either, by a coin per "
        "packet).", None, lambda: ["parity", "random"]),
    Key("topology", "link_gbps", "float", None, "GB/s",
        "Bandwidth of every link, per direction (decimal GB/s); default one flit per cycle.",
        POS),
    Key("topology", "link_latency_ns", "float", None, "ns",
        "Latency of every link; default one cycle.", POS),
    # ------------------------------------------------------------------ traffic
    # ------------------------------------------------------------------ workload
    Key("workload", "kind", "str", "synthetic", "-",
        "What runs: 'synthetic' traffic ([traffic]), an op 'graph' (workload.file), a "
        "'collective' or 'training' iterations (the registered workload kinds).", None,
        _workload_kinds),
    Key("workload", "collective", "str", "all_reduce", "-",
        "Collective: all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce "
        "(the root is the first participant).", None,
        lambda: ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                 "reduce"]),
    Key("workload", "algorithm", "str", "ring", "-",
        "Collective algorithm: ring, bidir_ring, direct, halving_doubling, tree (double "
        "binary tree), hierarchical.", None,
        lambda: ["ring", "bidir_ring", "direct", "halving_doubling", "tree", "hierarchical"]),
    Key("workload", "bytes", "int", 1048576, "bytes", "Collective: bytes per participant.",
        (_positive, "an integer >= 1 (a collective of no data has no time or bandwidth)")),
    Key("workload", "chunks", "int", 4, "-",
        "Collective: pieces the data is split into, pipelined through the steps.", POS),
    Key("workload", "chunks_in_flight", "int", 0, "-",
        "Collective: at most this many chunks under way at a node at once (0: no bound).",
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
    Key("workload", "file", "str", None, "path",
        "Op-graph file (TOML, [[ops]]).", None),
    Key("workload", "packet_flits", "int", 16, "flits",
        "Op graphs: messages are cut into packets of at most this many flits.", PACKET),
    Key("workload", "engine", "str", None, "-",
        "Collectives: where reductions run: 'npu' (its cores, through HBM) or 'offload' (a "
        "collectives engine); default: not modelled, reductions at workload.reduce_gbps "
        "(training: default 'npu').",
        None, lambda: ["npu", "offload"]),
    Key("workload", "model", "str", None, "-",
        "Training: a zoo model's name (pysim models), or an .onnx or ASTRA-sim workload file "
        "(relative to the config).", None),
    Key("workload", "model_params", "table", None, "-",
        "Training: parameters of the zoo model's builder, e.g. {layers = 24, seq = 512}.",
        None),
    Key("workload", "batch", "int", None, "samples",
        "Training: the global mini-batch, samples per iteration over all data-parallel "
        "replicas.", POS),
    Key("workload", "parallel", "table", None, "-",
        "Training: the plan: dp, tp, pp (their product the NPUs used; default dp = the NPUs "
        "/ (tp x pp)), micro_batches (default 1), schedule ('1f1b' or 'gpipe'), order (the "
        "dimensions from neighbouring NPUs outwards, default ['tp', 'dp', 'pp']), tables "
        "('split': embedding tables spread over the NPUs with all-to-all, or 'replicated').",
        (_parallel_table, "a table")),
    Key("workload", "precision", "str", None, "-",
        "Training: fp32, fp16, bf16 or mixed (default: the model's).", None,
        lambda: ["fp32", "fp16", "bf16", "mixed"]),
    Key("workload", "optimizer", "str", "sgd", "-",
        "Training: 'sgd' (with momentum) or 'adam': the state the optimizer step reads and "
        "writes.", None, lambda: ["sgd", "adam"]),
    Key("workload", "iterations", "int", 2, "-",
        "Training: iterations simulated; the last is reported.", POS),
    Key("workload", "bucket_mb", "float", 25.0, "MiB",
        "Training: data-parallel gradients are all-reduced in buckets of this size.", POS),
    Key("workload", "overlap", "bool", True, "-",
        "Training: all-reduce each gradient bucket as soon as the backward pass has produced "
        "it (false: one all-reduce after the whole backward pass).", None),
    Key("workload", "slice_cycles", "int", 1000, "cycles",
        "Roofline compute ops run in slices of at most this many cycles, so that memory "
        "traffic of other ops can interleave with theirs.", POS),
    Key("workload", "mem_piece_bytes", "int", 65536, "bytes",
        "Op graphs: memory reads and writes move in pieces of this size, so that transfer and "
        "access overlap.", POS),
    Key("workload", "max_cycles", "int", 1000000000000, "cycles",
        "Op graphs: give up (an error) if the graph has not finished by then.", POS),
    # ------------------------------------------------------------------ workload.memory
    Key("workload", "memory.policy", "str", "none", "-",
        "Training: the memory plan: none, offload (vDNN-style), lms, recompute, karma, "
        "compression (COMET), or a policy joined with compression ('offload+compression').",
        (lambda v: _memory_policy(v), "a memory policy")),
    Key("workload", "memory.target", "str", "auto", "-",
        "Where offloaded bytes go: 'mem' (the NPU's nearest memory nodes, in proportion to "
        "their links' bandwidth), 'host' (its host's DRAM) or 'auto' (mem if the system has "
        "memory nodes, else host).", None, lambda: ["auto", "mem", "host"]),
    Key("workload", "memory.budget_fraction", "float", 0.9, "-",
        "Share of each NPU's HBM the planning policies (lms, karma) aim to fill; "
        "the rest is left for what is not modelled (TFLMS's auto-tuning uses 0.9).",
        (lambda x: 0 < x <= 1, "a number in (0, 1]")),
    Key("workload", "memory.prefetch_layers", "int", 1, "layers",
        "offload: a stash is prefetched when the backward pass of the layer this many layers "
        "after it starts.", NONNEG),
    Key("workload", "memory.layers", "str", "all", "-",
        "offload: the stashes offloaded: 'all' layers' or 'conv' layers' only (vDNN's two "
        "policies).", None, lambda: ["all", "conv"]),
    Key("workload", "memory.swapout_threshold", "int", -1, "ops",
        "lms: a stash is swapped out when more than this many ops separate its producer from "
        "its consumer in the iteration's order (-1: the largest that fits, found as TFLMS's "
        "auto-tuning does).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.swapin_ahead", "int", -1, "ops",
        "lms: a stash is swapped in this many ops before its consumer (-1: the largest that "
        "fits).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.swapin_groupby", "int", -1, "ops",
        "lms: consumers of a stash within this many ops of each other share one swap-in (-1: "
        "the largest that fits).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.sync_mode", "int", -1, "-",
        "lms: 0 asynchronous swaps, 1 the next op waits for each swap-out, 2 swap-ins wait "
        "until their consumer is next, 3 both (-1: the lowest that fits, as TFLMS's "
        "auto-tuning).", (lambda x: -1 <= x <= 3, "an integer in -1 .. 3")),
    Key("workload", "memory.min_bytes", "int", 1048576, "bytes",
        "lms, karma: stashes smaller than this are never swapped (PyTorch LMS's default "
        "size threshold, 1 MiB).", NONNEG),
    Key("workload", "memory.segments", "int", 0, "-",
        "recompute: segments whose first layer's stash is kept (0: round(sqrt(layers)), as "
        "Chen et al. 2016).", NONNEG),
    Key("workload", "memory.host_update", "bool", False, "-",
        "karma: the optimizer step runs on the host (gradients sent to it, weights back), its "
        "state in host DRAM (KARMA's multi-node scheme).", None),
    Key("workload", "memory.ratio", "table", None, "-",
        "compression: compression ratio of a stash per layer kind, e.g. {conv = 10.0} "
        "(default: 15 for conv, norm, eltwise and pool, whose stashes are feature maps; "
        "kinds not given are not compressed).",
        (lambda t: _ratio_table(t), "a table of layer kinds")),
    Key("workload", "memory.compress_gbps", "float", 100.0, "GB/s",
        "compression: compressor throughput on the NPU's compute unit (inf: free).",
        (lambda x: x > 0, "a number > 0 (inf: free)")),
    Key("workload", "memory.decompress_gbps", "float", 200.0, "GB/s",
        "compression: decompressor throughput on the NPU's compute unit (inf: free).",
        (lambda x: x > 0, "a number > 0 (inf: free)")),
    # ------------------------------------------------------------------ traffic
    Key("traffic", "pattern", "str", "uniform", "-", "Destination pattern (see Traffic).",
        None, _patterns),
    Key("traffic", "injection_rate", "float", 0.1, "flits/node/cycle",
        "Offered load per endpoint.", NONNEG),
    Key("traffic", "packet_flits", "int|ints", 4, "flits",
        "Packet length, or a list of lengths for a mix.",
        (lambda x: PACKET[0](x) if isinstance(x, int) else
         (len(x) > 0 and all(PACKET[0](v) for v in x)),
         f"an integer in 1 .. {MAX_PACKET_FLITS} or a non-empty list of them")),
    Key("traffic", "packet_weights", "floats", None, "-",
        "Relative frequency of each length in packet_flits (default equal).",
        (_all_nonneg, "a list of numbers >= 0")),
    Key("traffic", "process", "str", "bernoulli", "-",
        "Injection process: 'bernoulli' or 'onoff' (Markov-modulated bursts).", None,
        lambda: ["bernoulli", "onoff"]),
    Key("traffic", "burst_on_cycles", "float", 20.0, "cycles",
        "On/off process: mean length of an on period.", (lambda x: x >= 1, "a number >= 1")),
    Key("traffic", "burst_off_cycles", "float", 20.0, "cycles",
        "On/off process: mean length of an off period.", (lambda x: x >= 1, "a number >= 1")),
    Key("traffic", "hotspot_nodes", "ints", [], "node ids",
        "Hotspot pattern: the hot destination nodes.", (_all_nonneg, "a list of node ids")),
    Key("traffic", "hotspot_fraction", "float", 0.0, "-",
        "Hotspot pattern: fraction of packets sent to the hot nodes (the rest uniform).", PROB),
    # ------------------------------------------------------------------ jobs
    Key("jobs", "count", "int", 100, "jobs",
        "Job streams (pysim jobs): how many jobs a generated stream has.", POS),
    Key("jobs", "min_npus", "int", 2, "NPUs",
        "Generated stream: fewest NPUs a job asks for (drawn uniformly up to max_npus).", POS),
    Key("jobs", "max_npus", "int", 5, "NPUs",
        "Generated stream: most NPUs a job asks for.", POS),
    Key("jobs", "models", "strs", ["alexnet", "inception_v3", "resnet50", "vgg16",
                                   "googlenet", "caffenet"], "-",
        "Generated stream: the models jobs train, drawn uniformly.",
        (lambda xs: len(xs) > 0, "a non-empty list of model names")),
    Key("jobs", "insensitive", "strs", ["googlenet", "caffenet"], "-",
        "Models whose jobs count as bandwidth-insensitive (the preserve policy gives them the "
        "allocation that keeps the most NVLink bandwidth free); the others are sensitive.",
        None),
    Key("jobs", "patterns", "strs", ["ring"], "-",
        "Generated stream: communication patterns drawn uniformly: ring (ring all-reduce), "
        "clique (direct all-reduce), tree (double binary tree).",
        (lambda xs: len(xs) > 0 and all(x in ("ring", "clique", "tree") for x in xs),
         "a non-empty list of ring, clique, tree")),
    Key("jobs", "min_iterations", "int", 500, "iterations",
        "Generated stream: fewest training iterations of a job (drawn uniformly up to "
        "max_iterations).", POS),
    Key("jobs", "max_iterations", "int", 2400, "iterations",
        "Generated stream: most training iterations of a job.", POS),
    Key("jobs", "arrivals", "str", "batch", "-",
        "Generated stream: 'batch': every job arrives at time 0; 'uniform': arrival times "
        "drawn uniformly over jobs.window_s, in order.", None,
        lambda: ["batch", "uniform"]),
    Key("jobs", "window_s", "float", None, "s",
        "Generated stream with uniform arrivals: the window the arrivals fall in.", POS),
    Key("jobs", "batch_per_npu", "int", 32, "samples",
        "Samples per NPU per iteration: a job on k NPUs trains a global batch of k times "
        "this, data parallel (a job file may set its own).", POS),
    Key("jobs", "policies", "strs", ["baseline", "topo_aware", "greedy", "preserve"], "-",
        "Allocation policies the stream runs under (registered in pysim.jobs.policies).",
        (lambda xs: len(xs) > 0 and len(set(xs)) == len(xs),
         "a non-empty list of policy names, each once")),
    Key("jobs", "file", "str", None, "path",
        "A job file ([[jobs]] tables) to run instead of a generated stream.", None),
    Key("jobs", "sim_iterations", "int", 4, "iterations",
        "Training iterations simulated per allocation shape: a job's time alone is its first "
        "iteration plus (n - 1) times the mean of the others.", POS),
    Key("jobs", "corun", "str", "together", "-",
        "'together': running jobs whose routes share a link are simulated together and slow "
        "each other down; 'apart': every job runs at its speed alone.", None,
        lambda: ["together", "apart"]),
    Key("jobs", "corun_iterations", "int", 3, "iterations",
        "A simulation of jobs running together spans this many iterations of the slowest.",
        POS),
)

INF_OK = {"workload.memory.compress_gbps", "workload.memory.decompress_gbps"}


def _type_ok(kind, v):
    is_int = isinstance(v, int) and not isinstance(v, bool)
    is_num = (is_int or isinstance(v, float))
    if kind == "int":
        return is_int
    if kind == "float":
        return is_num
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "str":
        return isinstance(v, str)
    if kind == "ints":
        return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                           for x in v)
    if kind == "floats":
        return isinstance(v, list) and all(isinstance(x, (int, float)) and
                                           not isinstance(x, bool) for x in v)
    if kind == "int|ints":
        return _type_ok("int", v) or (_type_ok("ints", v) and len(v) > 0)
    if kind == "strs":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == "tables":
        return isinstance(v, list) and all(isinstance(x, dict) for x in v)
    if kind == "table":
        return isinstance(v, dict)
    raise AssertionError(kind)


_KIND_TEXT = {"int": "an integer", "float": "a number", "bool": "true or false",
              "str": "a string", "ints": "a list of integers", "floats": "a list of numbers",
              "int|ints": "an integer or a list of integers",
              "tables": "an array of tables ([[...]])", "table": "a table",
              "strs": "a list of strings"}


def _suggest(name, options):
    close = difflib.get_close_matches(name, options, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_value(key: Key, v):
    """Validate one value for `key`; return it normalised (floats as float)."""
    if v is None:
        if key.default is None:          # an optional key, unset
            return None
        raise ConfigError(f"{key.path} = None: expected {_KIND_TEXT[key.kind]} (leave the key "
                          f"out for its default, {key.default!r})")
    if not _type_ok(key.kind, v):
        raise ConfigError(f"{key.path} = {_short(v)}: expected {_KIND_TEXT[key.kind]}")
    if key.kind in ("int", "ints", "int|ints"):
        limit = 2 ** 64 - 1 if key.path == "simulation.seed" else MAX_INT
        if any(abs(x) > limit for x in (v if isinstance(v, list) else [v])):
            raise ConfigError(f"{key.path} = {_short(v)}: expected at most {limit:,}")
    if key.kind == "float":
        f = finite_float(v)
        if f is None and key.path in INF_OK and not isinstance(v, bool) and v == math.inf:
            f = math.inf                 # a throughput that costs nothing
        if f is None:
            raise ConfigError(f"{key.path} = {_short(v)}: expected a finite number")
        v = f
    if key.kind == "floats":
        fs = [finite_float(x) for x in v]
        if any(f is None for f in fs):
            bad = v[fs.index(None)]
            raise ConfigError(f"{key.path} = {_short(v)}: expected finite numbers (entry "
                              f"{fs.index(None)} is {_short(bad)})")
        v = fs
    if key.check is not None:
        pred, expected = key.check
        if not pred(v):
            raise ConfigError(f"{key.path} = {_short(v)}: expected {expected}")
    if key.choices is not None:
        names = key.choices()
        if v not in names:
            raise ConfigError(f"{key.path} = {_short(v)}: unknown name{_suggest(v, names)}; "
                              f"known: {', '.join(names)}")
    return v


class Section:
    """Attribute access to one section's values."""

    def __init__(self, name, values):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, item):
        try:
            return self._values[item]
        except KeyError:
            pre = item + "."
            sub = {k[len(pre):]: v for k, v in self._values.items() if k.startswith(pre)}
            if sub:                                   # a sub-table: workload.memory
                return Section(f"{self._name}.{item}", sub)
            raise AttributeError(f"{self._name}.{item} is not a configuration key") from None

    def __setattr__(self, key, value):
        raise AttributeError("Config is read-only; use Config.with_overrides()")


class Config:
    """A validated configuration: `cfg.traffic.injection_rate`, `cfg.to_dict()`."""

    def __init__(self, values: dict, explicit: set, base_dir: str, source: str | None = None):
        self._values = values          # {section: {name: value}} with defaults filled
        self.explicit = frozenset(explicit)   # keys the user gave
        self.base_dir = base_dir       # files named in the config resolve against this
        self.source = source           # the file it was read from, if any
        for s in sections():
            setattr(self, s, Section(s, values[s]))

    def __reduce__(self):
        # (pickled as its parts: worker processes and Dask receive Configs)
        return (Config, (self._values, set(self.explicit), self.base_dir, self.source))

    def to_dict(self):
        """{section: {key: value}}, keys of a sub-table nested as TOML writes them
        ({"workload": {"memory": {"policy": ...}}})."""
        out = {}
        for s, body in self._values.items():
            out[s] = {}
            for k, v in body.items():
                sub, dot, field = k.partition(".")
                if dot:
                    out[s].setdefault(sub, {})[field] = copy.deepcopy(v)
                else:
                    out[s][k] = copy.deepcopy(v)
        return out

    def get(self, path):
        section, name = path.split(".", 1)
        return self._values[section][name]

    def is_set(self, path):
        return path in self.explicit

    def with_overrides(self, overrides: dict):
        """A new Config with `{"section.key": value}` applied (validated)."""
        raw = {s: {k: v for k, v in self._values[s].items() if f"{s}.{k}" in self.explicit}
               for s in sections()}
        for path, v in cwd_paths(_as_overrides(overrides, "with_overrides()")).items():
            apply_override(raw, path, v)
        return from_dict(raw, base_dir=self.base_dir, source=self.source)

    def __repr__(self):
        return f"Config({self._values!r})"


def _as_overrides(overrides, who):
    """Overrides as a dict: a dict {'section.key': value}, or (key, value) pairs."""
    if overrides is None or isinstance(overrides, dict):
        return overrides or {}
    try:
        return dict(overrides)
    except (TypeError, ValueError):
        raise TypeError(f"{who}: overrides must be a dict {{'section.key': value}} or (key, "
                        f"value) pairs, not {_short(overrides)}") from None


def from_dict(raw: dict, base_dir: str | None = None, source: str | None = None) -> Config:
    """Validate a nested dict (as TOML parses it) into a Config. Relative paths in it are
    relative to `base_dir` (default: the current directory)."""
    base_dir = os.path.abspath(base_dir if base_dir is not None else os.getcwd())
    if not isinstance(raw, dict):
        raise ConfigError(f"a configuration must be a table of sections, got {type(raw).__name__}")
    SECTIONS = sections()
    values = {s: {} for s in SECTIONS}
    explicit = set()
    for section, body in raw.items():
        if not isinstance(section, str):
            raise ConfigError(f"section {section!r}: expected a section name (a string); "
                              f"known: {', '.join(SECTIONS)}")
        if section not in values:
            raise ConfigError(f"unknown section [{section}]{_suggest(section, SECTIONS)}; "
                              f"known: {', '.join(SECTIONS)}")
        if not isinstance(body, dict):
            raise ConfigError(f"[{section}] must be a table, got {body!r}")
        names = sorted({k.name.partition(".")[0] for k in KEYS if k.section == section},
                       key=[k.name.partition(".")[0] for k in KEYS].index)
        for name, v in _flatten(section, body):
            if not isinstance(name, str):
                raise ConfigError(f"[{section}] key {name!r}: expected a key name (a string); "
                                  f"known in [{section}]: {', '.join(names)}")
            path = f"{section}.{name}"
            if path not in KEY_MAP:
                sub, dot, field = name.rpartition(".")
                if dot:
                    fields = [k.name.rpartition(".")[2] for k in KEYS
                              if k.section == section and k.name.startswith(sub + ".")]
                    raise ConfigError(f"unknown key {path}{_suggest(field, fields)}; known in "
                                      f"[{section}.{sub}]: {', '.join(fields)}")
                raise ConfigError(f"unknown key {path}{_suggest(name, names)}; "
                                  f"known in [{section}]: {', '.join(names)}")
            values[section][name] = check_value(KEY_MAP[path], v)
            explicit.add(path)
    for k in KEYS:
        if k.name not in values[k.section]:
            values[k.section][k.name] = copy.deepcopy(k.default)
    cfg = Config(values, explicit, base_dir, source)
    _cross_checks(cfg)
    return cfg


def _sub_tables(section):
    """Names of the sub-tables of a section ('memory' for [workload.memory])."""
    return {k.name.partition(".")[0] for k in KEYS if k.section == section and "." in k.name}


def _flatten(section, body):
    """(name, value) pairs of a section's body, the keys of a sub-table given as a nested
    table ([workload.memory] policy = ...) named 'memory.policy' as when given flat."""
    subs = _sub_tables(section)
    for name, v in body.items():
        if name in subs:
            if not isinstance(v, dict):
                raise ConfigError(f"{section}.{name} = {v!r}: expected a table of keys "
                                  f"([{section}.{name}])")
            for field, fv in v.items():
                yield f"{name}.{field}", fv
        else:
            yield name, v


def from_resolved(resolved: dict) -> Config:
    """A Config from a resolved config (as a Result carries it: every key, defaults filled
    in): keys at their default value are taken as not given."""
    raw = {}
    for section, body in resolved.items():
        if section.startswith("_") or not isinstance(body, dict):
            continue
        try:
            items = list(_flatten(section, body))
        except ConfigError:
            continue
        for name, v in items:
            key = KEY_MAP.get(f"{section}.{name}")
            if key is None or v is None or v == key.default:
                continue
            raw.setdefault(section, {})[name] = v
    return from_dict(raw)


def _cross_checks(cfg: Config):
    j = cfg.jobs
    for lo, hi in (("min_npus", "max_npus"), ("min_iterations", "max_iterations")):
        if getattr(j, lo) > getattr(j, hi):
            raise ConfigError(f"jobs.{lo} = {getattr(j, lo)} > jobs.{hi} = {getattr(j, hi)}: "
                              f"expected {lo} <= {hi}")
    t = cfg.traffic
    if cfg.traffic.packet_weights is not None:
        sizes = t.packet_flits if isinstance(t.packet_flits, list) else [t.packet_flits]
        if len(t.packet_weights) != len(sizes):
            raise ConfigError(f"traffic.packet_weights = {t.packet_weights!r}: expected "
                              f"{len(sizes)} weights, one per entry of traffic.packet_flits")
        if max(t.packet_weights) <= 0:
            raise ConfigError(f"traffic.packet_weights = {t.packet_weights!r}: expected a "
                              f"positive sum")


def read_toml(path, what, error=ConfigError):
    """Parse a TOML file; `what` says which file it is in the error if it is missing or not
    valid TOML."""
    from pysim._io import read_bounded
    try:
        data = read_bounded(path)
        text = data.decode("utf-8")
        return tomllib.loads(text[1:] if text.startswith("\ufeff") else text)  # (a BOM)
    except FileNotFoundError:
        raise error(f"{what}: no such file {path}") from None
    except IsADirectoryError:
        raise error(f"{what}: {path} is a directory, not a TOML file") from None
    except OSError as e:
        raise error(f"{what}: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{what}: {path} is not valid TOML (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{what}: {path} is not valid TOML: {e}") from None
    except ValueError as e:          # not a regular file, or too large (read_bounded)
        raise error(f"{what}: {e}") from None
    except RecursionError:
        raise error(f"{what}: {path} nests tables or arrays too deeply") from None


def _split_key(path):
    """(the declared key that `path` names or starts with, the fields after it), or
    (None, ...): 'workload.memory.policy' -> (that key, []), 'topology.npu.tflops' ->
    (topology.npu, ['tflops'])."""
    parts = path.split(".")
    for n in range(len(parts), 1, -1):
        key = KEY_MAP.get(".".join(parts[:n]))
        if key is not None:
            return key, parts[n:]
    return None, parts[2:]


def is_key(path):
    """A key that can be overridden: a declared 'section.key' ('workload.memory.policy'),
    or a field inside a table key ('topology.npu.tflops', 'topology.nic.mem.injection_gbps')."""
    key, rest = _split_key(path)
    return key is not None and (not rest or (key.kind == "table" and all(rest)))


def apply_override(raw, path, value, what="override"):
    """Set `path` to `value` in a raw config dict (as TOML parses one): 'section.key', or a
    field inside a table key, which keeps the table's other fields."""
    if not isinstance(path, str):
        raise ConfigError(f"{what} {path!r}: expected a key 'section.key' (a string)")
    value = _plain(value)
    parts = path.split(".")
    if len(parts) < 2 or not all(parts):
        raise ConfigError(f"{what} {path!r}: expected section.key")
    section = parts[0]
    body = raw.setdefault(section, {})
    if not isinstance(body, dict):
        raise ConfigError(f"{what} {path!r}: [{section}] is not a table")
    head, rest = _split_key(path)
    if head is not None and head.section == section and "." in head.name:
        # a key of a sub-table ([workload.memory] policy): kept flat, as the Config keeps it
        sub = head.name.partition(".")[0]
        if isinstance(body.get(sub), dict):
            for f, v in list(_flatten(section, {sub: body.pop(sub)})):
                body.setdefault(f, v)
        key = head.name
    else:
        head, key, rest = KEY_MAP.get(".".join(parts[:2])), parts[1], parts[2:]
        if rest and key in _sub_tables(section):
            fields = [k.name.partition(".")[2] for k in KEYS
                      if k.section == section and k.name.startswith(key + ".")]
            raise ConfigError(f"{what} {path!r}: unknown key{_suggest(rest[0], fields)}; "
                              f"known in [{section}.{key}]: {', '.join(fields)}")
    if not rest:
        body[key] = value
        return
    if head is None or head.kind != "table":
        raise ConfigError(f"{what} {path!r}: {section}.{key} is not a table of fields")
    node = copy.deepcopy(body.get(key)) if body.get(key) is not None else {}
    body[key] = node
    for i, p in enumerate(rest[:-1]):
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{what} {path!r}: {'.'.join(parts[:i + 3])} is not a table")
    if not isinstance(node, dict):
        raise ConfigError(f"{what} {path!r}: {section}.{key} is not a table")
    node[rest[-1]] = value


def is_path_key(path):
    key = KEY_MAP.get(path)
    return key is not None and key.unit == "path"


def _plain(v):
    """A value with numpy's scalars and arrays (np.int64(16), from a sweep over np.arange)
    as the Python numbers and lists a config holds."""
    if hasattr(v, "dtype") and hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def cwd_paths(overrides: dict, what="override") -> dict:
    """Overrides with their relative paths made absolute against the current directory: a path
    typed on the command line or given in the Python API is relative to where it is given,
    while a path written in a file is relative to that file. A bare name that is no file
    here but a shipped system's (topology.file = "dgx1-v100") becomes that system's file.
    A value may be a list of paths (a sweep's values)."""
    from pysim import systems

    def fix(v):
        if not isinstance(v, str) or not v or os.path.isabs(v):
            return v
        full = os.path.abspath(v)
        if not os.path.exists(full) and systems.path_of(v) is not None:
            return systems.path_of(v)
        return full

    def model(v):                    # a zoo name, or a model file: a file only if it is one
        if not isinstance(v, str) or os.path.isabs(v) or not ("." in v or os.sep in v):
            return v
        return os.path.abspath(v) if os.path.exists(v) else v

    out = {}
    for path, v in overrides.items():
        if is_path_key(path):
            v = [fix(x) for x in v] if isinstance(v, (list, tuple)) else fix(v)
        elif path == "workload.model":
            v = [model(x) for x in v] if isinstance(v, (list, tuple)) else model(v)
        out[path] = v
    return out


def load(path, overrides: dict | None = None) -> Config:
    """Read a TOML file, or a shipped system given by name ("mesh8x8"), into a validated
    Config; `overrides` maps "section.key" to values (their paths relative to the current
    directory), or is a list of (key, value) pairs."""
    from pysim import systems
    overrides = _as_overrides(overrides, "load()")
    path = systems.resolve(path)
    raw = read_toml(path, "config file")
    base = os.path.dirname(os.path.abspath(path))
    overrides = cwd_paths(overrides or {})
    raw = _include_topology(raw, base, overrides)
    for p, v in overrides.items():
        apply_override(raw, p, v)
    try:
        return from_dict(raw, base_dir=base, source=path)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _include_topology(raw, base, overrides):
    """Resolve topology.file: the named file's [topology] table, with this config's own
    [topology] keys (and overrides) on top. The path is relative to the naming config."""
    topo = raw.get("topology")
    name = overrides.get("topology.file", topo.get("file") if isinstance(topo, dict) else None)
    if name is None:
        return raw
    if topo is None:
        topo = {}
    if not isinstance(topo, dict):
        raise ConfigError(f"[topology] must be a table, got {_short(topo)}")
    if not isinstance(name, str):
        raise ConfigError(f"topology.file = {name!r}: expected a string (a path)")
    from pysim import systems
    path = name if os.path.isabs(name) else os.path.join(base, name)
    if not os.path.exists(path) and systems.path_of(name) is not None:
        path = systems.path_of(name)
    included = read_toml(path, f"topology.file = {name!r} (relative to the config naming it)")
    t = included.get("topology")
    if not isinstance(t, dict):
        raise ConfigError(f"topology.file = {name!r}: {path} has no [topology] table")
    if "file" in t:
        raise ConfigError(f"topology.file = {name!r}: {path} names another topology.file; "
                          f"one level of inclusion only")
    merged = dict(t)
    merged.update(topo)                       # keeps topology.file: it names the system
    out = dict(raw)
    out["topology"] = merged
    return out


def parse_override(text: str, what="--set"):
    """'section.key=value' -> ("section.key", value); the value is read as TOML, else a string.
    A list that is not valid TOML (strings in it without quotes) is refused with the quoted
    form."""
    path, eq, value = text.partition("=")
    path = path.strip()
    if not eq or not path:
        raise ConfigError(f"{what} {text!r}: expected KEY=VALUE, e.g. traffic.injection_rate=0.2")
    value = value.strip()
    try:
        v = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        if value.startswith("["):
            items = [x.strip().strip("\"'") for x in value.strip("[]").split(",") if x.strip()]
            quoted = ", ".join(x if _is_number(x) else f'"{x}"' for x in items)
            raise ConfigError(f"{what} {text}: {value} is not a TOML list; strings in a list "
                              f"need double quotes, and the whole argument single quotes for "
                              f"the shell: {what} '{path}=[{quoted}]'") from None
        v = value
    return path, v


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
