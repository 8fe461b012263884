"""The direct all-to-all with k peers in flight per side (workload.all_to_all_peers): closed
forms on a switch and on a fully connected topology, the window itself, and every byte
arriving on the links it should, at both network levels."""
import math
import os

import numpy as np
import pytest

from conftest import TOPOLOGIES
from pysim import load, simulate
from pysim.config import ConfigError

P = 8
BLOCK = 64 * 1024                 # bytes each node sends each other node
# a message's last packet's latency is under this many cycles on both topologies: two links
# of 20 ns, a few router cycles, a packet of 16 flits serialised at >= 25 GB/s (20 cycles)
LATENCY = 100


def _a2a(topo, net, peers, engine=None, **extra):
    over = {"workload.kind": "collective", "workload.collective": "all_to_all",
            "workload.algorithm": "direct", "workload.bytes": P * BLOCK,
            "workload.chunks": 1, "workload.all_to_all_peers": peers, "network.model": net,
            **extra}
    if engine is not None:
        over["workload.engine"] = engine
    return simulate(load(os.path.join(TOPOLOGIES, topo), over))


def _sends(res):
    """(src, dst, size, start, finish) of the run's sends, as arrays."""
    rows = [o for o in res.ops if o["kind"] == "send"]
    return (np.array([o["node"] for o in rows]), np.array([o["dst"] for o in rows]),
            np.array([o["size"] for o in rows]), np.array([o["start"] for o in rows]),
            np.array([o["finish"] for o in rows]))


def _most_at_once(start, finish):
    """The most intervals [start, finish) open at one time."""
    ev = sorted([(int(f), -1) for f in finish] + [(int(s), 1) for s in start])
    cur = most = 0
    for _, d in ev:
        cur += d
        most = max(most, cur)
    return most


@pytest.mark.parametrize("net", ["flow", "flit"])
@pytest.mark.parametrize("nic", [224.0, 100.0])
@pytest.mark.parametrize("peers", [1, 2, 3, 4, 0])
def test_fully_connected_all_to_all_takes_rounds_of_k_peers(net, nic, peers):
    """fully-connected8: a 25 GB/s link between every pair. With k peers in flight each
    message has a link of its own, at min(25, nic / k) GB/s, and a node's 7 messages go in
    ceil(7 / k) rounds: T = ceil(7 / k) b / min(25, nic / k) (k = 0: all 7 at once), plus a
    message's latency per round (a round waits for the reception k rounds before; at k = 1
    nothing hides it). NICs of 224 GB/s (seven channels of a flit per cycle, one per link):
    link-bound, b / 25 with every peer in flight; of 100 GB/s: past k = 4 the NIC binds, and
    T = 7 b / 100, the bytes over the per-NPU injection rate. At the flit level a NIC of
    fewer channels than busy links turns its channels between them (csim/_nic.pxd,
    _pick_message), so there the NIC-bound case is the flow level's alone."""
    if net == "flit" and nic < 25.0 * (peers or P - 1):
        pytest.skip("a NIC of fewer channels than busy links: flow level only")
    k = peers or P - 1
    rounds = math.ceil((P - 1) / k)
    t = rounds * BLOCK / min(25.0, nic / k)                     # ns = cycles at 1 GHz
    res = _a2a("fully-connected8.toml", net, peers, **{
        "topology.nic.npu.injection_gbps": nic, "topology.nic.npu.ejection_gbps": nic})
    assert t <= res.makespan_cycles <= t * 1.01 + rounds * LATENCY, (res.makespan_cycles, t)


@pytest.mark.parametrize("net", ["flow", "flit"])
@pytest.mark.parametrize("peers", [1, 2, 0])
def test_switch_all_to_all_is_bound_by_the_nic_whatever_the_window(net, peers):
    """switch8: each NPU's one 150 GB/s link to the switch carries all it sends and all it
    receives; with k peers in flight per side every node sends to k and receives from k at
    once (the rounds are permutations), so T = 7 b / 150 GB/s for every k: bytes over the
    per-NPU injection rate, plus a message's latency per group of k rounds: the k messages a
    node has in flight share its NIC and end together, and the next k wait for their
    receptions (at the flow level T = 7 b / 150 + ceil(7 / k) latencies exactly)."""
    t = (P - 1) * BLOCK / 150.0
    res = _a2a("switch8.toml", net, peers)
    slack = math.ceil((P - 1) / (peers or P - 1)) * LATENCY
    assert t <= res.makespan_cycles <= t * 1.01 + slack, (res.makespan_cycles, t)


@pytest.mark.parametrize("net", ["flow", "flit"])
@pytest.mark.parametrize("engine", [None, "npu", "offload"])
@pytest.mark.parametrize("peers", [1, 3])
def test_no_node_has_more_than_k_peers_in_flight_per_side(net, engine, peers):
    """The window: at no time does a node send to, or receive from, more than k peers; every
    one of the p (p - 1) messages is sent, each of b bytes."""
    res = _a2a("fully-connected8.toml", net, peers, engine)
    src, dst, size, start, finish = _sends(res)
    assert len(src) == P * (P - 1) and (size == BLOCK).all()
    assert (finish > start).all()
    for n in set(src.tolist()):
        assert _most_at_once(start[src == n], finish[src == n]) <= peers
        assert _most_at_once(start[dst == n], finish[dst == n]) <= peers
    assert len({(a, b) for a, b in zip(src.tolist(), dst.tolist())}) == P * (P - 1)


@pytest.mark.parametrize("net", ["flow", "flit"])
@pytest.mark.parametrize("peers", [2, 0])
def test_every_byte_crosses_its_own_link(net, peers):
    """fully-connected8: each ordered pair's block crosses the pair's link and no other, so
    every directed link carries exactly b bytes (b / 32 flits of 32 bytes) and every packet
    of every message is delivered."""
    res = _a2a("fully-connected8.toml", net, peers)
    flits = [r["flits"] for r in res.links]
    assert len(flits) == P * (P - 1)
    assert all(f == BLOCK // 32 for f in flits), sorted(set(flits))
    assert res.packets == P * (P - 1) * BLOCK // (16 * 32)       # packets of 16 flits


def test_peers_is_refused_below_zero():
    with pytest.raises(ConfigError, match="workload.all_to_all_peers"):
        _a2a("switch8.toml", "flow", -1)


@pytest.mark.parametrize("collective,algorithm", [("all_reduce", "ring"),
                                                  ("all_gather", "direct")])
def test_peers_of_another_collective_are_refused_not_ignored(collective, algorithm):
    """workload.all_to_all_peers is read by the direct all-to-all alone: given to another
    collective it would change nothing, and is refused naming the key and the collective."""
    with pytest.raises(ConfigError, match=rf"workload.all_to_all_peers = 2 is read by "
                                          rf"workload.collective = 'all_to_all' only, not "
                                          rf"'{collective}'"):
        _a2a("switch8.toml", "flow", 2, **{"workload.collective": collective,
                                           "workload.algorithm": algorithm})
    simulate(load(os.path.join(TOPOLOGIES, "switch8.toml"), {
        "workload.kind": "collective", "workload.collective": collective,
        "workload.algorithm": algorithm, "workload.bytes": P * BLOCK,
        "network.model": "flow"}))
