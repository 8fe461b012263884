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


def test_the_interleaved_order_by_hand(ex):
    """pp = 2, v = 2, m = 4 in forward_backward_pipelining_with_interleaving's order
    (Megatron-LM, megatron/schedules.py at 6985e58), worked by hand: stage r warms up with
    (pp - r - 1) x 2 + (v - 1) x pp forward passes (4 on stage 0, 2 on stage 1), each
    steady step a forward then a backward pass, the rest backward; forward k runs chunk
    (k mod pp v) // pp, backward k chunk v - 1 - that."""
    want = {0: "F0 F0 F1 F1 F0 B1 F0 B1 F1 B0 F1 B0 B1 B1 B0 B0",
            1: "F0 F0 F1 B1 F1 B1 F0 B0 F0 B0 F1 B1 F1 B1 B0 B0"}
    for r, order in want.items():
        got = " ".join(f"{k}{c}" for k, c in ex.megatron_actions(r, 2, 2, 4) if k != "X")
        assert got == order, r


def test_a_sender_waits_for_its_send_by_hand(ex):
    """pp = 2, two micro-batches (1F1B), forward 1 and backward 2, a transfer x: each
    stage goes on only once its send has ended (pysim's p2p_sync; Megatron-LM's exchange
    waits for its sends and receives). By hand, pysim's semantics: stage 0 forwards twice
    (ends 1 + x, 2 + 2x); stage 1 forwards at 1 + x, backwards to 4 + x, sends (4 + 2x),
    forwards the second at 4 + 2x and backwards to 7 + 2x, sends (7 + 3x); stage 0's
    backwards start at 4 + 2x and 7 + 3x: 9 + 3x (without the sender's wait, 9 + 2x).
    Megatron-LM's exchanges give the same: stage 0's second send meets stage 1's receive
    posted at 4 + x."""
    x = 0.25
    fwd, bwd = [[1.0], [1.0]], [[2.0], [2.0]]
    for replay in (ex.replay_pysim, ex.replay_megatron):
        assert replay(2, 1, 2, fwd, bwd, x, 0.0) == pytest.approx([9 + 3 * x, 7 + 3 * x])


@pytest.mark.parametrize("content, said", [
    (None, "cannot be read (No such file or directory); expected what `python "
           "bench/megatron.py --json FILE` writes"),
    ("{not json", "not JSON"),
    ('{"systems": {}}', "no list of rows"),
    ('{"rows": [{"params_billion": 39.1, "gpus": 512, "pp": 2, "error": 0.01}]}',
     "row 0 has no tp, batch, micro_batch, interleave, iteration_seconds"),
])
def test_what_is_not_a_megatron_json_is_named(ex, tmp_path, capsys, content, said):
    """A missing file, one that is not JSON, or not bench/megatron.py's --json output
    (nccl_tests' JSON has no rows; a row without its breakdown) is a usage error naming
    the file and what was expected (they were a FileNotFoundError, a JSONDecodeError and a
    KeyError)."""
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as e:
        ex.main([str(path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}: " in err and said in err


def test_the_output_may_not_overwrite_the_input(ex, tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text('{"rows": []}')
    with pytest.raises(SystemExit):
        ex.main([str(path), "--json", str(path)])
    assert f"--json {path} is the rows file, which this benchmark reads" in \
        capsys.readouterr().err
    assert path.read_text() == '{"rows": []}'
