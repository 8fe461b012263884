"""The router against BookSim2 itself: every packet of recorded BookSim runs, replayed here,
is delivered at the cycle BookSim delivered it.

tests/data/booksim_traces.npz holds, per case, the packets of one run of BookSim2 (commit
28f4329 of its public repository: its input-queued router with separable input-first VC and
switch allocators, one iteration, 2 VCs of 8 flits, 1-cycle routing, VC allocation, switch
allocation and crossbar, credit_delay 0, dimension-order routing; channels of 1 cycle on its
mesh and of 2 on its torus, which it lays out folded; on the torus its dateline classes, and
odd k, so that no route is a tie BookSim would break at random): the cycle
each was created, its source, destination and length, read from BookSim's watch log of every
packet, and the cycle its tail was ejected (-1 for packets created in the run's last 300
cycles, which may not have been delivered when it stopped; they are replayed, as they load
the network, but not compared). `meta` says which BookSim parameters and which of our
topologies the case is, and our network keys where they are not the defaults.

Two cases are a ring of 8 (torus k = 8, n = 1) where only nodes 0 and 1 send, each to
node + 2 at 0.99 flits a cycle (BookSim's tornado traffic narrowed to those sources and that
shift), 16-flit packets, with 8 VCs of 32 flits and with 4 VCs of 8 flits, each run until
BookSim had delivered every packet it created: the link 1 -> 2 is shared by a stream passing
through and one injected there. In both simulators which share each stream settles on
depends on the first packets' creation times (docs/flow.md), so only the same packets can
compare them.

Each departure from BookSim's model -- the NIC sending a flit onto its channel the cycle it is
chosen, VC requests spread by input VC index, a switch allocator whose input arbiters turn over
VCs, the 'crossing' dateline classes -- changes the delivery of hundreds of these packets."""
import json
import os

import numpy as np
import pytest

from conftest import make_cfg
from pysim.sim import run_packets

DATA = os.path.join(os.path.dirname(__file__), "data", "booksim_traces.npz")
_Z = np.load(DATA)
CASES = sorted(k[:-len("/packets")] for k in _Z.files if k.endswith("/packets"))


@pytest.mark.parametrize("case", CASES)
def test_every_packet_is_delivered_when_booksim_delivered_it(case):
    meta = json.loads(str(_Z[case + "/meta"]))
    p = _Z[case + "/packets"].astype(np.int64)
    cfg = make_cfg(topology=meta["topology"], network=meta.get("network", {}))
    _, _, deliver, _, _ = run_packets(cfg, p[:, 0], p[:, 1], p[:, 2], p[:, 3])
    compared = p[:, 4] >= 0
    assert compared.sum() > 200
    np.testing.assert_array_equal(deliver[compared], p[compared, 4])
