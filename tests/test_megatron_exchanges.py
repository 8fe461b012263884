"""bench/megatron_exchanges.py's replays of a pipeline's passes: Megatron-LM's exchanges of 2021
(coupled, rendezvous) and pysim's semantics, held to the interleaved schedule's closed form
(Narayanan et al., SC21, section 2.2: the bubble is (p - 1) / (m v) of the ideal time) and
to the invariants of Megatron-LM's schedule (every pass once, every send received)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def ex():
    sys.path.insert(0, os.path.join(HERE, "..", "bench"))
    try:
        import megatron_exchanges
    finally:
        sys.path.pop(0)
    return megatron_exchanges


CASES = [(2, 1, 12), (4, 1, 4), (4, 3, 28), (8, 2, 48), (4, 2, 4), (3, 2, 6), (35, 3, 70)]


@pytest.mark.parametrize("pp,v,m", CASES)
def test_equal_passes_without_transfers_give_the_closed_form(ex, pp, v, m):
    """Forward 1 and backward 2 per chunk on every stage, nothing to send: each stage busy
    m v x 3, and the last to finish ends (p - 1) x 3 later: (p - 1) / (m v) of the busy
    time, whether the exchanges are Megatron-LM's or pysim's."""
    fwd = [[1.0] * v for _ in range(pp)]
    bwd = [[2.0] * v for _ in range(pp)]
    busy = m * v * 3.0
    want = busy * (1 + (pp - 1) / (m * v))
    for replay in (ex.replay_megatron, ex.replay_pysim):
        assert max(replay(pp, v, m, fwd, bwd, 0.0, 0.0)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("pp,v,m", CASES)
def test_megatron_runs_every_pass_once_and_every_send_is_received(ex, pp, v, m):
    for r in range(pp):
        acts = ex.megatron_actions(r, pp, v, m)
        for kind in "FB":
            got = sorted(c for k, c in acts if k == kind)
            assert got == sorted(c for c in range(v) for _ in range(m)), (r, kind)
    for d, step in (("f", 1), ("b", -1)):
        for r in range(pp):
            peer = (r + step) % pp
            sends = sum(op == ("send", d) for k, ops in ex.megatron_actions(r, pp, v, m)
                        if k == "X" for op in ops)
            recvs = sum(op == ("recv", d) for k, ops in ex.megatron_actions(peer, pp, v, m)
                        if k == "X" for op in ops)
            assert sends == recvs, (d, r)
    # stage r sends forward what virtual stages r, r + pp, ... hand on: (v - 1) m from the
    # last stage (its last chunk ends the model), v m from the others
    for r in range(pp):
        sends = sum(op == ("send", "f") for k, ops in ex.megatron_actions(r, pp, v, m)
                    if k == "X" for op in ops)
        assert sends == (v - 1) * m if r == pp - 1 else v * m


def test_a_transfer_on_a_two_stage_pipeline_by_hand(ex):
    """pp = 2, one micro-batch, forward 1 and backward 2, a transfer x and no all-gather.
    Megatron-LM: stage 0 forwards (1), its send meets stage 1's receive posted at 0 and
    ends at 1 + x; stage 1 forwards and backwards (to 1 + x + 3), sends back, stage 0's
    receive posted at 1 + x (its send done) ends at 4 + 2x, then its backward: 6 + 2x.
    pysim's semantics: the same passes and transfers in the same chain."""
    x = 0.25
    fwd, bwd = [[1.0], [1.0]], [[2.0], [2.0]]
    assert max(ex.replay_megatron(2, 1, 1, fwd, bwd, x, 0.0)) == pytest.approx(6 + 2 * x)
    assert max(ex.replay_pysim(2, 1, 1, fwd, bwd, x, 0.0)) == pytest.approx(6 + 2 * x)
