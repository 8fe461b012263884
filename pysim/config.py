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


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


class Key:
    """One declared configuration key."""

    def __init__(self, section, name, kind, default, unit, doc, check=None, choices=None):
        self.section = section
        self.name = name
        self.kind = kind          # "int", "float", "bool", "str", "ints", "floats", "int|ints"
        self.default = default
        self.unit = unit
        self.doc = doc
        self.check = check        # (predicate, "what was expected") or None
        self.choices = choices    # callable returning the allowed names, or None

    @property
    def path(self):
        return f"{self.section}.{self.name}"


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
MAX_DELAY_CYCLES = 10 ** 6  # a router stage or a link: the event wheel spans the longest

POS = (_positive, "a number > 0")
DELAY = (lambda x: 0 <= x <= MAX_DELAY_CYCLES, f"an integer in 0 .. {MAX_DELAY_CYCLES:,}")
DELAY1 = (lambda x: 1 <= x <= MAX_DELAY_CYCLES, f"an integer in 1 .. {MAX_DELAY_CYCLES:,}")
PACKET = (lambda x: 1 <= x <= MAX_PACKET_FLITS, f"an integer in 1 .. {MAX_PACKET_FLITS}")
NONNEG = (_nonneg, "a number >= 0")
PROB = (_prob, "a number in [0, 1]")


def positive_number(where, v):
    """A finite number > 0 given for `where` (a key or a table field), as a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
        raise ConfigError(f"{where} = {v!r}: expected a finite number > 0")
    return float(v)


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
              "reduce_gbps", "offload_gbps", "offload_sram_mb")


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


def _topology_kinds():
    from pysim.topology import BUILDERS
    return sorted(BUILDERS)


def _workload_kinds():
    from pysim.workload import WORKLOADS
    return sorted(WORKLOADS)


def _patterns():
    from pysim.traffic import PATTERNS
    return sorted(PATTERNS)


KEYS = [
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
        "Flits buffered and none moving for this long is reported as deadlock.", POS),
    Key("simulation", "max_packets", "int", 4000000, "packets",
        "Most packets alive at once (queued at sources or in flight); beyond it the run "
        "stops as saturated.", POS),
    # ------------------------------------------------------------------ network
    Key("network", "flit_bytes", "int", 32, "bytes", "Bytes per flit.", POS),
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
        "engine's, 256), offload_sram_mb (8), efficiency (a table: fraction of peak per "
        "layer kind, e.g. {conv = 0.6}); fields given override the preset's; graph nodes may "
        "override (and name their own preset).", (_npu_table, "a table")),
    Key("topology", "host", "table", None, "-",
        "Host roofline: [topology.host] tflops (default 2), dram_gbps (100); graph nodes may "
        "override.", _fields("topology.host", ("tflops", "dram_gbps"))),
    Key("topology", "route_weight", "str", "hops", "-",
        "Graph routing: shortest paths by 'hops', link 'latency' or inverse 'bandwidth'.",
        None, lambda: ["hops", "latency", "bandwidth"]),
    Key("topology", "dateline", "str", "booksim", "-",
        "Ring, torus: VC classes of each dimension. 'booksim' (BookSim's): for its whole trip "
        "in a dimension a packet uses the upper half of the VCs if its destination's "
        "coordinate is below the one it entered at, else the lower; 'crossing': the lower "
        "half until it crosses the wrap-around link, the upper from it on; 'fewest': every VC "
        "for every packet when the routes cannot deadlock without classes (a 4-ary torus with "
        "tie_break = 'parity'), else 'crossing'.", None, lambda: ["booksim", "crossing", "fewest"]),
    Key("topology", "tie_break", "str", "random", "-",
        "Ring, torus: the way a packet takes at distance exactly k/2 (k even) where it enters "
        "a dimension: 'random' (BookSim's: either, by a coin per packet) or 'parity' (+ if its "
        "coordinate there is even, else -: every link gets the same share of ties, and a "
        "4-ary torus needs no dateline classes).", None, lambda: ["parity", "random"]),
    Key("topology", "link_gbps", "float", None, "GB/s",
        "Bandwidth of every link, per direction (decimal GB/s); default one flit per cycle.",
        POS),
    Key("topology", "link_latency_ns", "float", None, "ns",
        "Latency of every link; default one cycle.", POS),
    # ------------------------------------------------------------------ traffic
    # ------------------------------------------------------------------ workload
    Key("workload", "kind", "str", "synthetic", "-",
        "What runs: 'synthetic' traffic ([traffic]), an op 'graph' (workload.file) or a "
        "'collective' (the registered workload kinds).", None, _workload_kinds),
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
        NONNEG),
    Key("workload", "chunks", "int", 4, "-",
        "Collective: pieces the data is split into, pipelined through the steps.", POS),
    Key("workload", "chunks_in_flight", "int", 0, "-",
        "Collective: at most this many chunks under way at a node at once (0: no bound).",
        NONNEG),
    Key("workload", "group", "strs", None, "node names",
        "Collective participants (default: every NPU, or every endpoint if there is none).",
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
        "collectives engine); default: not modelled, reductions at workload.reduce_gbps.",
        None, lambda: ["npu", "offload"]),
    Key("workload", "slice_cycles", "int", 1000, "cycles",
        "Roofline compute ops run in slices of at most this many cycles, so that memory "
        "traffic of other ops can interleave with theirs.", POS),
    Key("workload", "mem_piece_bytes", "int", 65536, "bytes",
        "Op graphs: memory reads and writes move in pieces of this size, so that transfer and "
        "access overlap.", POS),
    Key("workload", "max_cycles", "int", 1000000000000, "cycles",
        "Op graphs: give up (an error) if the graph has not finished by then.", POS),
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
]

KEY_MAP = {k.path: k for k in KEYS}
SECTIONS = list(dict.fromkeys(k.section for k in KEYS))


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
        raise ConfigError(f"{key.path} = {v!r}: expected {_KIND_TEXT[key.kind]}")
    if key.kind in ("int", "ints", "int|ints"):
        limit = 2 ** 64 - 1 if key.path == "simulation.seed" else MAX_INT
        if any(abs(x) > limit for x in (v if isinstance(v, list) else [v])):
            raise ConfigError(f"{key.path} = {v!r}: expected at most {limit:,}")
    if key.kind == "float":
        v = float(v)
        if not math.isfinite(v):
            raise ConfigError(f"{key.path} = {v!r}: expected a finite number")
    if key.kind == "floats":
        v = [float(x) for x in v]
    if key.check is not None:
        pred, expected = key.check
        if not pred(v):
            raise ConfigError(f"{key.path} = {v!r}: expected {expected}")
    if key.choices is not None:
        names = key.choices()
        if v not in names:
            raise ConfigError(f"{key.path} = {v!r}: unknown name{_suggest(v, names)}; "
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
        for s in SECTIONS:
            setattr(self, s, Section(s, values[s]))

    def to_dict(self):
        return copy.deepcopy(self._values)

    def get(self, path):
        section, name = path.split(".", 1)
        return self._values[section][name]

    def is_set(self, path):
        return path in self.explicit

    def with_overrides(self, overrides: dict):
        """A new Config with `{"section.key": value}` applied (validated)."""
        raw = {s: {k: v for k, v in self._values[s].items() if f"{s}.{k}" in self.explicit}
               for s in SECTIONS}
        for path, v in cwd_paths(overrides).items():
            apply_override(raw, path, v)
        return from_dict(raw, base_dir=self.base_dir, source=self.source)

    def __repr__(self):
        return f"Config({self._values!r})"


def from_dict(raw: dict, base_dir: str | None = None, source: str | None = None) -> Config:
    """Validate a nested dict (as TOML parses it) into a Config. Relative paths in it are
    relative to `base_dir` (default: the current directory)."""
    base_dir = os.path.abspath(base_dir if base_dir is not None else os.getcwd())
    if not isinstance(raw, dict):
        raise ConfigError(f"a configuration must be a table of sections, got {type(raw).__name__}")
    values = {s: {} for s in SECTIONS}
    explicit = set()
    for section, body in raw.items():
        if section not in values:
            raise ConfigError(f"unknown section [{section}]{_suggest(section, SECTIONS)}; "
                              f"known: {', '.join(SECTIONS)}")
        if not isinstance(body, dict):
            raise ConfigError(f"[{section}] must be a table, got {body!r}")
        names = [k.name for k in KEYS if k.section == section]
        for name, v in body.items():
            path = f"{section}.{name}"
            if path not in KEY_MAP:
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


def from_resolved(resolved: dict) -> Config:
    """A Config from a resolved config (as a Result carries it: every key, defaults filled
    in): keys at their default value are taken as not given."""
    raw = {}
    for section, body in resolved.items():
        if section.startswith("_") or not isinstance(body, dict):
            continue
        for name, v in body.items():
            key = KEY_MAP.get(f"{section}.{name}")
            if key is None or v is None or v == key.default:
                continue
            raw.setdefault(section, {})[name] = v
    return from_dict(raw)


def _cross_checks(cfg: Config):
    t = cfg.traffic
    if cfg.traffic.packet_weights is not None:
        sizes = t.packet_flits if isinstance(t.packet_flits, list) else [t.packet_flits]
        if len(t.packet_weights) != len(sizes):
            raise ConfigError(f"traffic.packet_weights = {t.packet_weights!r}: expected "
                              f"{len(sizes)} weights, one per entry of traffic.packet_flits")
        if sum(t.packet_weights) <= 0:
            raise ConfigError(f"traffic.packet_weights = {t.packet_weights!r}: expected a "
                              f"positive sum")


def read_toml(path, what, error=ConfigError):
    """Parse a TOML file; `what` says which file it is in the error if it is missing or not
    valid TOML."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
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


def is_key(path):
    """A key that can be overridden: a declared 'section.key', or a field inside a table key
    ('topology.npu.tflops', 'topology.nic.mem.injection_gbps')."""
    parts = path.split(".")
    head = KEY_MAP.get(".".join(parts[:2]))
    return head is not None and (len(parts) == 2 or (head.kind == "table" and all(parts)))


def apply_override(raw, path, value, what="override"):
    """Set `path` to `value` in a raw config dict (as TOML parses one): 'section.key', or a
    field inside a table key, which keeps the table's other fields."""
    parts = path.split(".")
    if len(parts) < 2 or not all(parts):
        raise ConfigError(f"{what} {path!r}: expected section.key")
    section, key, rest = parts[0], parts[1], parts[2:]
    body = raw.setdefault(section, {})
    if not isinstance(body, dict):
        raise ConfigError(f"{what} {path!r}: [{section}] is not a table")
    if not rest:
        body[key] = value
        return
    head = KEY_MAP.get(f"{section}.{key}")
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

    out = {}
    for path, v in overrides.items():
        if is_path_key(path):
            v = [fix(x) for x in v] if isinstance(v, (list, tuple)) else fix(v)
        out[path] = v
    return out


def load(path, overrides: dict | None = None) -> Config:
    """Read a TOML file, or a shipped system given by name ("mesh8x8"), into a validated
    Config; `overrides` maps "section.key" to values (their paths relative to the current
    directory)."""
    from pysim import systems
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
