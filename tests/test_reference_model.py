"""csim must deliver every packet at exactly the cycle the pure-Python reference model does,
on small random configurations: topologies, VCs, buffer depths, pipeline delays, link
latencies and fractional link bandwidths, under heavy contention."""
import numpy as np
import pytest

import refmodel
from conftest import make_cfg
from pysim import topology
from pysim.network import CH_EJECT, compile_network
from pysim.sim import run_packets

TOPOS = [
    {"kind": "mesh", "dims": [3, 3]},
    {"kind": "mesh", "dims": [4, 2]},
    {"kind": "mesh", "dims": [2, 2, 2]},
    {"kind": "torus", "dims": [3, 3]},
    {"kind": "torus", "dims": [4, 2]},
    {"kind": "ring", "size": 5},
    {"kind": "ring", "size": 6, "bidirectional": False},
]


def random_case(seed, long_delays=False):
    """A random small configuration and packet list. long_delays: routing and VC allocation
    delays of 3 to 8 cycles (else 0 to 2), longer switch stages, links of 1 to 8 cycles (else
    1 to 3)."""
    rng = np.random.default_rng(seed)
    topo = dict(TOPOS[seed % len(TOPOS)])
    dateline = topo["kind"] != "mesh"
    vcs = int(rng.choice([2, 4])) if dateline else int(rng.choice([1, 2, 3]))
    d0, d1 = (3, 9) if long_delays else (0, 3)
    network = {
        "vcs": vcs,
        "vc_buffer_flits": int(rng.integers(1, 6)),
        "routing_delay": int(rng.integers(d0, d1)),
        "vc_alloc_delay": int(rng.integers(d0, d1)),
        "sw_alloc_delay": int(rng.integers(1, 4 if long_delays else 3)),
        "st_delay": int(rng.integers(0, 3 if long_delays else 2)),
        "wait_for_tail_credit": bool(rng.integers(0, 2)),
        "flit_bytes": 16,
        "injection_delay": int(rng.integers(0, 3)),
        "va_input_arbiter": str(rng.choice(["round_robin", "own_index"])),
        "sa_input_arbiter": str(rng.choice(["outputs", "vcs"])),
    }
    if rng.random() < 0.6:     # slow NICs, or NICs with two injection/ejection channels
        network["injection_gbps"] = float(rng.choice([8.0, 12.0, 24.0, 32.0]))
    if rng.random() < 0.3:
        network["ejection_gbps"] = float(rng.choice([12.0, 32.0]))
    if dateline:               # VC classes and ties of rings and tori, every variant
        topo["dateline"] = str(rng.choice(["booksim", "crossing", "fewest"]))
        topo["tie_break"] = str(rng.choice(["random", "parity"]))
    cfg = make_cfg(topology=topo, network=network)
    topo_obj = topology.build(cfg)
    for c in range(topo_obj.n_channels):     # heterogeneous links, some of two lanes
        topo_obj.ch_bytes_per_cycle[c] = float(rng.choice([16.0, 16.0, 10.0, 5.5, 32.0, 27.0]))
        topo_obj.ch_latency_cycles[c] = int(rng.integers(1, 9 if long_delays else 4))
    net = compile_network(cfg, topo=topo_obj)
    n = topo_obj.n_nodes
    P = int(rng.integers(40, 120))
    times = np.sort(rng.integers(0, 80, P))
    src = rng.integers(0, n, P)
    dst = rng.integers(0, n, P)
    length = rng.integers(1, 7, P)
    return cfg, net, times, src, dst, length


def assert_matches_reference(cfg, net, times, src, dst, length):
    """csim delivers every packet, each at the cycle the reference model does and after as
    many router-to-router hops; returns the engine."""
    _, eng, deliver, inject, hops = run_packets(cfg, times, src, dst, length, network=net)
    ref, ref_hops = refmodel.simulate(net.arrays, list(zip(times.tolist(), src.tolist(),
                                                           dst.tolist(), length.tolist())),
                                      hops=True)
    assert (deliver >= 0).all()
    np.testing.assert_array_equal(deliver, np.array(ref))
    np.testing.assert_array_equal(hops, np.array(ref_hops))
    return eng


@pytest.mark.parametrize("seed", range(21))
def test_csim_matches_reference_model(seed):
    cfg, net, times, src, dst, length = random_case(seed)
    eng = assert_matches_reference(cfg, net, times, src, dst, length)
    c = eng.counters()
    assert c["flits_ejected"] == length.sum()
    assert c["bad_eject"] == 0 and c["buf_overflow"] == 0


@pytest.mark.parametrize("seed", range(100, 107))
def test_csim_matches_reference_model_with_long_delays(seed):
    """Pipeline delays of up to 8 cycles and links of up to 8: heads wait on the engine's
    timers (which span the longest routing and VC-allocation delay) and on the event wheel
    for many cycles, and wrap around both."""
    assert_matches_reference(*random_case(seed, long_delays=True))


HIGH_RADIX = [   # (topology, VCs): routers of 6 to 12 ports
    ({"kind": "fully_connected", "size": 10}, 7),
    ({"kind": "switch", "size": 12}, 5),
    ({"kind": "fully_connected", "size": 6}, 12),
    ({"kind": "fully_connected", "size": 10}, 8),
    ({"kind": "switch", "size": 12}, 12),
    ({"kind": "fully_connected", "size": 6}, 5),
]


@pytest.mark.parametrize("seed", range(len(HIGH_RADIX)))
def test_csim_matches_reference_model_on_high_radix_routers(seed):
    """Routers with many ports and VC counts that are not powers of two: switch allocation's
    candidate bitmask (each port's VCs rounded up to a power of two of bits) spans several
    64-bit words on all but the last of these routers."""
    topo, vcs = HIGH_RADIX[seed]
    rng = np.random.default_rng(1000 + seed)
    network = {"vcs": vcs, "vc_buffer_flits": int(rng.integers(1, 5)),
               "routing_delay": int(rng.integers(0, 2)), "vc_alloc_delay": int(rng.integers(0, 2)),
               "st_delay": int(rng.integers(0, 2)),
               "wait_for_tail_credit": bool(rng.integers(0, 2)), "flit_bytes": 16,
               "sa_input_arbiter": ["outputs", "vcs"][seed % 2]}
    cfg = make_cfg(topology=topo, network=network)
    net = compile_network(cfg)
    if seed < len(HIGH_RADIX) - 1:   # the premise: a router needs more than one mask word
        ports = np.bincount(net.ch_dst[net.ch_kind != CH_EJECT]).max()
        assert ports * (1 << (vcs - 1).bit_length()) > 64
    eps = np.array(net.topo.endpoints())
    P = int(rng.integers(60, 200))
    times = np.sort(rng.integers(0, 60, P))
    src = eps[rng.integers(0, len(eps), P)]
    dst = eps[rng.integers(0, len(eps), P)]
    length = rng.integers(1, 9, P)
    assert_matches_reference(cfg, net, times, src, dst, length)
