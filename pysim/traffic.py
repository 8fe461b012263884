"""Synthetic traffic: destination patterns and injection processes (specification only;
csim draws the packets).

Patterns are registered by name in PATTERNS. Each maps the topology to a `Pattern`: either a
fixed destination per source (a permutation over endpoint indices), or uniform random
destinations, optionally mixed with hotspot destinations. Endpoint index = position in
`topo.endpoints()`; for the regular topologies that is the node id, with node id
x0 + k0*(x1 + k1*(x2 ...)) from its coordinates.

Conventions: `uniform` includes the source itself as a destination (VALIDATION.md's
convention: a packet to itself is ejected by its own router after 0 hops); `uniform_noself`
excludes it. `hotspot` sends `traffic.hotspot_fraction` of packets to a node drawn uniformly
from `traffic.hotspot_nodes` and the rest uniformly (self included).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from csim.limits import MAX_PACKET_FLITS
from pysim.errors import ConfigError
from pysim.schema import NONNEG, PACKET, PROB, Key, all_nonneg, cross_check, declare


@dataclass
class Pattern:
    mode: str                       # "perm" or "uniform"
    perm: np.ndarray | None = None  # endpoint -> endpoint, mode "perm"
    include_self: bool = True
    hot: list = field(default_factory=list)   # endpoint indices
    hot_frac: float = 0.0


def _bits(n, name):
    b = int(n).bit_length() - 1
    if n < 2 or (1 << b) != n:
        raise ConfigError(f"traffic.pattern = {name!r}: needs a power-of-two number of "
                          f"endpoints, this topology has {n}")
    return b


def _coords(topo, name):
    if topo.coords is None or len(topo.endpoints()) != topo.n_nodes:
        raise ConfigError(f"traffic.pattern = {name!r}: needs a regular topology "
                          f"(ring, mesh or torus)")
    return topo.coords, np.array(topo.dims)


def _from_coords(coords, dims):
    strides = np.cumprod(np.concatenate(([1], dims[:-1])))
    return (coords * strides).sum(axis=1)


def uniform(topo, cfg):
    return Pattern("uniform", include_self=True)


def uniform_noself(topo, cfg):
    if len(topo.endpoints()) < 2:
        raise ConfigError("traffic.pattern = 'uniform_noself': needs at least 2 endpoints")
    return Pattern("uniform", include_self=False)


def transpose(topo, cfg):
    coords, dims = _coords(topo, "transpose")
    if len(dims) != 2 or dims[0] != dims[1]:
        raise ConfigError(f"traffic.pattern = 'transpose': needs a square 2-D topology, "
                          f"got dims {[int(k) for k in dims]}")
    return Pattern("perm", perm=_from_coords(coords[:, ::-1], dims))


def bitcomp(topo, cfg):
    n = len(topo.endpoints())
    _bits(n, "bitcomp")
    return Pattern("perm", perm=(~np.arange(n)) & (n - 1))


def bitrev(topo, cfg):
    n = len(topo.endpoints())
    b = _bits(n, "bitrev")
    src = np.arange(n)
    dst = np.zeros(n, dtype=np.int64)
    for i in range(b):
        dst |= ((src >> i) & 1) << (b - 1 - i)
    return Pattern("perm", perm=dst)


def shuffle(topo, cfg):
    n = len(topo.endpoints())
    b = _bits(n, "shuffle")
    src = np.arange(n)
    return Pattern("perm", perm=((src << 1) | (src >> (b - 1))) & (n - 1))


def tornado(topo, cfg):
    """Every dimension: x -> (x + ceil(k/2) - 1) mod k."""
    coords, dims = _coords(topo, "tornado")
    shift = (dims + 1) // 2 - 1
    return Pattern("perm", perm=_from_coords((coords + shift) % dims, dims))


def neighbor(topo, cfg):
    """Every dimension: x -> (x + 1) mod k."""
    coords, dims = _coords(topo, "neighbor")
    return Pattern("perm", perm=_from_coords((coords + 1) % dims, dims))


def hotspot(topo, cfg):
    t = cfg.traffic
    eps = topo.endpoints()
    pos = {node: i for i, node in enumerate(eps)}
    if not t.hotspot_nodes:
        raise ConfigError("traffic.hotspot_nodes = []: the hotspot pattern needs at least "
                          "one hot node")
    hot = []
    for node in t.hotspot_nodes:
        if node not in pos:
            raise ConfigError(f"traffic.hotspot_nodes: {node} is not an endpoint node id "
                              f"(0..{topo.n_nodes - 1}, switches excluded)")
        hot.append(pos[node])
    return Pattern("uniform", include_self=True, hot=hot, hot_frac=t.hotspot_fraction)


PATTERNS = {
    "uniform": uniform,
    "uniform_noself": uniform_noself,
    "transpose": transpose,
    "bitcomp": bitcomp,
    "bitrev": bitrev,
    "shuffle": shuffle,
    "tornado": tornado,
    "neighbor": neighbor,
    "hotspot": hotspot,
}


def pattern(topo, cfg) -> Pattern:
    name = cfg.traffic.pattern
    if name not in PATTERNS:
        raise ConfigError(f"traffic.pattern = {name!r}: unknown; known: "
                          f"{', '.join(sorted(PATTERNS))}")
    p = PATTERNS[name](topo, cfg)
    if name != "hotspot" and (cfg.is_set("traffic.hotspot_nodes") or
                              cfg.is_set("traffic.hotspot_fraction")):
        raise ConfigError(f"traffic.hotspot_nodes/hotspot_fraction are only used by "
                          f"traffic.pattern = 'hotspot', not {name!r}")
    return p


def packet_sizes(cfg):
    """(sizes, cumulative probabilities, mean size in flits)."""
    t = cfg.traffic
    sizes = t.packet_flits if isinstance(t.packet_flits, list) else [t.packet_flits]
    w = np.ones(len(sizes)) if t.packet_weights is None else np.asarray(t.packet_weights, float)
    w = w / w.max()                 # first: weights of 1e308 would sum to infinity
    w = w / w.sum()
    return np.array(sizes, np.int32), np.cumsum(w), float(np.dot(sizes, w))


def engine_args(topo, cfg, inj_flits_per_cycle=1.0):
    """Keyword arguments for csim.Engine.set_synthetic."""
    t = cfg.traffic
    pat = pattern(topo, cfg)
    sizes, cdf, mean = packet_sizes(cfg)
    if t.injection_rate > inj_flits_per_cycle + 1e-12:
        raise ConfigError(f"traffic.injection_rate = {t.injection_rate}: more than the "
                          f"injection bandwidth of the slowest NIC, {inj_flits_per_cycle:g} "
                          f"flits/cycle")
    p = t.injection_rate / mean           # packets per endpoint per cycle
    if not (math.isfinite(mean) and mean >= 1 and math.isfinite(p)):   # (config checks it)
        raise ConfigError(f"traffic.packet_weights = {t.packet_weights}: the mean packet "
                          f"length is {mean!r} flits; expected a finite number >= 1")
    duty = t.burst_on_cycles / (t.burst_on_cycles + t.burst_off_cycles)
    p_on = p / duty
    if t.process == "onoff" and p_on > 1.0:
        raise ConfigError(f"traffic.injection_rate = {t.injection_rate}: with on/off bursts "
                          f"on {duty:.0%} of the time, a node would need {p_on:.3g} packets "
                          f"per cycle while on; lower the rate or lengthen burst_on_cycles")
    n_ep = len(topo.endpoints())
    perm = pat.perm if pat.perm is not None else np.zeros(n_ep, np.int32)
    return dict(seed=int(cfg.simulation.seed), process=t.process, p_inject=p, p_on=p_on,
                q_on_end=1.0 / t.burst_on_cycles, q_off_end=1.0 / t.burst_off_cycles,
                duty=duty, pattern=pat.mode, include_self=pat.include_self,
                perm=np.asarray(perm, np.int32), hot=np.asarray(pat.hot, np.int32),
                hot_frac=pat.hot_frac, sizes=sizes, size_cdf=cdf)


# The configuration keys this module reads (pysim.schema).
declare(
    Key("traffic", "pattern", "str", "uniform", "-", "Destination pattern (see Traffic).",
        None, lambda: sorted(PATTERNS)),
    Key("traffic", "injection_rate", "float", 0.1, "flits/node/cycle",
        "Offered load per endpoint.", NONNEG),
    Key("traffic", "packet_flits", "int|ints", 4, "flits",
        "Packet length, or a list of lengths for a mix.",
        (lambda x: PACKET[0](x) if isinstance(x, int) else
         (len(x) > 0 and all(PACKET[0](v) for v in x)),
         f"an integer in 1 .. {MAX_PACKET_FLITS} or a non-empty list of them")),
    Key("traffic", "packet_weights", "floats", None, "-",
        "Relative frequency of each length in packet_flits (default equal).",
        (all_nonneg, "a list of numbers >= 0")),
    Key("traffic", "process", "str", "bernoulli", "-",
        "Injection process: 'bernoulli' or 'onoff' (Markov-modulated bursts).", None,
        lambda: ["bernoulli", "onoff"]),
    Key("traffic", "burst_on_cycles", "float", 20.0, "cycles",
        "On/off process: mean length of an on period.", (lambda x: x >= 1, "a number >= 1")),
    Key("traffic", "burst_off_cycles", "float", 20.0, "cycles",
        "On/off process: mean length of an off period.", (lambda x: x >= 1, "a number >= 1")),
    Key("traffic", "hotspot_nodes", "ints", [], "node ids",
        "Hotspot pattern: the hot destination nodes.", (all_nonneg, "a list of node ids")),
    Key("traffic", "hotspot_fraction", "float", 0.0, "-",
        "Hotspot pattern: fraction of packets sent to the hot nodes (the rest uniform).", PROB),
)


@cross_check
def _check_packet_weights(cfg):
    t = cfg.traffic
    if t.packet_weights is not None:
        sizes = t.packet_flits if isinstance(t.packet_flits, list) else [t.packet_flits]
        if len(t.packet_weights) != len(sizes):
            raise ConfigError(f"traffic.packet_weights = {t.packet_weights!r}: expected "
                              f"{len(sizes)} weights, one per entry of traffic.packet_flits")
        if max(t.packet_weights) <= 0:
            raise ConfigError(f"traffic.packet_weights = {t.packet_weights!r}: expected a "
                              f"positive sum")
