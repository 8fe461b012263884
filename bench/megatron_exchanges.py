"""Megatron-LM's exchanges between pipeline stages as its code of 2021 ran them, replayed step
by step on the pass times of simulated Table 1 rows, beside the same replay under pysim's
semantics.

    python bench/megatron_exchanges.py megatron.json [--transfer-scale X] [--json FILE]

megatron.json is what `python bench/megatron.py --json megatron.json` writes; its pipelined
rows are replayed. What Megatron-LM ran (NVIDIA/Megatron-LM at 6985e58, the commit of the
paper's `examples/sc21` scripts; the schedules behave so since 64a83fb of March 2021):

- `megatron/schedules.py`, forward_backward_pipelining_with_interleaving: stage r warms up
  with (pp - r - 1) x 2 + (v - 1) x pp forward passes (all m v when m = pp), then in each
  steady step runs a forward pass and a backward pass and only then ONE exchange
  (send_forward_backward_recv_forward_backward): the forward pass's output leaves the stage
  after the backward pass that follows it. The cool-down exchanges carry gradients only.
  Without interleaving: send_forward_recv_backward after each forward pass and
  send_backward_recv_forward after each backward pass.
- `megatron/p2p_communication.py`, _communicate: the exchange's sends and receives posted
  together (batch_isend_irecv), waited for, then torch.cuda.synchronize(), then the
  scatter-gather's all-gather of what was received. An NCCL send ends once its peer has
  posted the matching receive, so an exchange waits for its neighbours' exchanges.

Replayed here: each stage's passes and exchanges in that order; a message ends at the later
of its send's and its receive's posting plus its transfer time; an exchange ends when all
its messages have, plus the all-gather if it received. pysim's semantics, replayed on the
same times: each pass waits for its input (the send's end, then the all-gather), the sending
stage goes on once its send ends (workload.parallel.p2p_sync), nothing waits for a receiver.
Pass times per row from its simulated breakdown (the critical GPU's): per layer and micro-
batch w = (products + attention + element-wise + exposed tensor-parallel time) / (the
stage's layers x m), a quarter of it forward and three quarters backward (the recomputed
forward and the backward); the logits and loss ('embedding' / m) on the last stage's last
chunk, a third forward; a send's and an all-gather's time as pysim ran them (pp_send and
pp_all_gather seconds over their count; --transfer-scale multiplies the sends'). The first
column (pysim's iteration less its exposed data-parallel all-reduce and optimizer step)
checks the pysim-semantics replay against pysim itself. Both replays give the closed form
(p - 1) / (m v) with equal passes and no transfer time (tests/test_megatron_exchanges.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from outputs import FORCE, check

from pysim.workload.training.pipeline import schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron import TABLES, table  # noqa: E402
from provenance import provenance, write_json  # noqa: E402


def _interleaved(r, pp, v, m):
    """Stage r's passes ('F'/'B', chunk) and exchanges ('X', ops) in
    forward_backward_pipelining_with_interleaving's order; an op is (kind, direction):
    ('send'|'recv', 'f'|'b')."""
    total = m * v

    def chunk(k, forward):
        c = (k % (pp * v)) // pp
        return c if forward else v - 1 - c

    def first(c):
        return r == 0 and c == 0

    def last(c):
        return r == pp - 1 and c == v - 1

    acts = []

    def exchange(send_f, send_b, recv_prev, recv_next):
        acts.append(("X", [op for op, on in ((("send", "b"), send_b), (("recv", "f"), recv_prev),
                                             (("send", "f"), send_f), (("recv", "b"), recv_next))
                           if on]))
    every = m == pp
    warm = total if every else min((pp - r - 1) * 2 + (v - 1) * pp, total)
    if r != 0:                                   # recv_forward before the warm-up
        exchange(False, False, True, False)
    for k in range(warm):
        c = chunk(k, True)
        acts.append(("F", c))
        recv_prev = not (r == 0 and chunk(k + 1, True) == 0) and k != total - 1
        if k == warm - 1 and not every:
            exchange(not last(c), False, recv_prev, r != pp - 1)
        else:
            exchange(not last(c), False, recv_prev, False)
    rest = total - warm
    for k in range(rest):
        cf, cb = chunk(k + warm, True), chunk(k, False)
        acts += [("F", cf), ("B", cb)]
        recv_prev = True if r != 0 else chunk(k + warm - (pp - 1), True) != v - 1
        recv_next = True if r != pp - 1 else chunk(k - (pp - 1), False) != 0
        if k == rest - 1:
            recv_prev = False
        exchange(not last(cf), not first(cb), recv_prev, recv_next)
    if every and r != pp - 1:                    # recv_backward before the cool-down
        exchange(False, False, False, True)
    for k in range(rest, total):
        cb = chunk(k, False)
        acts.append(("B", cb))
        recv_next = not (r == pp - 1 and chunk(k + 1, False) == v - 1) and k != total - 1
        exchange(False, not first(cb), False, recv_next)
    return acts


def _plain(r, pp, m):
    """Stage r's passes and exchanges in forward_backward_pipelining_without_interleaving's
    order."""
    warm = min(pp - r - 1, m)
    rest = m - warm
    head, tail = r == 0, r == pp - 1
    acts = []

    def exchange(*ops):
        acts.append(("X", [op for op, on in ops if on]))
    for _ in range(warm):
        exchange((("recv", "f"), not head))
        acts.append(("F", 0))
        exchange((("send", "f"), not tail))
    if rest:
        exchange((("recv", "f"), not head))
    for i in range(rest):
        acts.append(("F", 0))
        exchange((("send", "f"), not tail), (("recv", "b"), not tail))
        acts.append(("B", 0))
        exchange((("send", "b"), not head), (("recv", "f"), not head and i != rest - 1))
    for _ in range(warm):
        exchange((("recv", "b"), not tail))
        acts.append(("B", 0))
        exchange((("send", "b"), not head))
    return acts


def megatron_actions(r, pp, v, m):
    """Stage r's passes and exchanges as Megatron-LM's schedules of 2021 order them."""
    return _interleaved(r, pp, v, m) if v > 1 else _plain(r, pp, m)


def replay_megatron(pp, v, m, fwd, bwd, transfer, gather):
    """Each stage's end (seconds) with Megatron-LM's exchanges; fwd[r][c], bwd[r][c]: stage
    r's forward and backward pass times of chunk c."""
    acts = [megatron_actions(r, pp, v, m) for r in range(pp)]
    t, at = [0.0] * pp, [0] * pp
    posted, counts, pending = {}, {}, [None] * pp
    while True:
        moved = False
        for r in range(pp):
            while at[r] < len(acts[r]):
                kind, what = acts[r][at[r]]
                if kind != "X":
                    t[r] += (fwd if kind == "F" else bwd)[r][what]
                    at[r] += 1
                    moved = True
                    continue
                if pending[r] is None:           # post this exchange's ops
                    keys = []
                    for op, d in what:
                        peer = (r + 1) % pp if (op == "send") == (d == "f") else (r - 1) % pp
                        chan = (r, peer, d) if op == "send" else (peer, r, d)
                        n = counts.get((chan, op), 0)
                        counts[(chan, op)] = n + 1
                        posted[(chan, n, op)] = t[r]
                        keys.append((chan, n, op))
                    pending[r] = keys
                ends = []
                for chan, n, op in pending[r]:
                    other = (chan, n, "recv" if op == "send" else "send")
                    if other not in posted:
                        break
                    ends.append(max(posted[(chan, n, op)], posted[other]) + transfer)
                else:
                    got = any(op == "recv" for _, _, op in pending[r])
                    t[r] = max([t[r]] + ends) + (gather if got else 0.0)
                    pending[r] = None
                    at[r] += 1
                    moved = True
                    continue
                break
        if all(at[r] == len(acts[r]) for r in range(pp)):
            return t
        if not moved:
            raise RuntimeError(f"the exchanges deadlock at {at}")


def replay_pysim(pp, v, m, fwd, bwd, transfer, gather):
    """Each stage's end with pysim's semantics: a pass waits for its input (send, then the
    all-gather), the sender waits for its send, no rendezvous."""
    order = [schedule("1f1b", r, pp, m, v) for r in range(pp)]
    last_virtual = pp * v - 1
    ready, t, at = {}, [0.0] * pp, [0] * pp
    while True:
        moved = False
        for r in range(pp):
            while at[r] < len(order[r]):
                kind, j, c = order[r][at[r]]
                vs = c * pp + r
                need = (None if vs == 0 else ("f", vs, j)) if kind == "F" else \
                    (None if vs == last_virtual else ("b", vs, j))
                if need is not None and need not in ready:
                    break
                start = t[r] if need is None else max(t[r], ready[need]) + gather
                t[r] = start + (fwd if kind == "F" else bwd)[r][c]
                to = vs + 1 if kind == "F" else vs - 1
                if 0 <= to <= last_virtual:
                    ready[("f" if kind == "F" else "b", to, j)] = t[r] + transfer
                    t[r] += transfer
                at[r] += 1
                moved = True
        if all(at[r] == len(order[r]) for r in range(pp)):
            return t
        if not moved:
            raise RuntimeError(f"the passes deadlock at {at}")


def row_inputs(row, layers):
    """(pp, v, m, fwd, bwd, transfer, gather) of a bench/megatron.py JSON row."""
    pp, v, b = row["pp"], row["interleave"], row["breakdown_seconds"]
    m = row["batch"] // (row["gpus"] // (row["tp"] * pp)) // row["micro_batch"]
    w = (b["products"] + b["attention"] + b["elementwise"] + b["tp_exposed"]) / (
        layers // pp * m)
    per_chunk = layers / (pp * v)
    fwd = [[per_chunk * w / 4] * v for _ in range(pp)]
    bwd = [[per_chunk * w * 3 / 4] * v for _ in range(pp)]
    fwd[pp - 1][v - 1] += b["embedding"] / m / 3
    bwd[pp - 1][v - 1] += b["embedding"] / m * 2 / 3
    kinds = row["comm_by_kind"]

    def each(kind):
        k = kinds.get(kind, {"count": 0})
        return k["seconds"] / k["count"] if k["count"] else 0.0
    return pp, v, m, fwd, bwd, each("pp_send"), each("pp_all_gather")


NEEDED = ("params_billion", "gpus", "tp", "pp", "batch", "micro_batch", "interleave",
          "iteration_seconds", "published_iteration_seconds", "breakdown_seconds",
          "comm_by_kind")


def read_rows(path, error):
    """The rows of bench/megatron.py's --json output at `path`; anything else is told to
    `error` (a message naming the file and what was expected)."""
    what = "expected what `python bench/megatron.py --json FILE` writes"
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        error(f"{path}: cannot be read ({e.strerror}); {what}")
    except ValueError as e:
        error(f"{path}: not JSON ({e}); {what}")
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        error(f"{path}: no list of rows; {what}")
    for i, r in enumerate(rows):
        missing = [k for k in NEEDED if k not in r]
        if r.get("error") is not None and missing:
            error(f"{path}: row {i} has no {', '.join(missing)}; {what}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rows", help="bench/megatron.py --json's output")
    ap.add_argument("--transfer-scale", type=float, default=1.0,
                    help="multiply each send's time between stages by this (default 1: as "
                         "pysim ran them)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args(argv)
    if not a.transfer_scale >= 0:
        ap.error(f"--transfer-scale {a.transfer_scale}: expected a number >= 0")
    check(ap, a.force, [("--json", a.json)],
          inputs=[("the rows file", a.rows)] + [(f"bench/megatron.py's table {w}", TABLES[w])
                                                for w in TABLES])
    rows = read_rows(a.rows, ap.error)
    layers = {(r["params_billion"], r["gpus"]): r["layers"] for which in TABLES
              for r in table(which)[1]}
    for row in rows:
        if row.get("error") is not None and (row["params_billion"], row["gpus"]) not in layers:
            ap.error(f"{a.rows}: the row of {row['params_billion']}B on {row['gpus']} GPUs is "
                     f"in none of bench/megatron.py's tables ({', '.join(sorted(TABLES))})")
    out = []
    print(f"{'params':>8} {'pp':>3} {'v':>2} {'m':>4} {'pysim':>9} {'replay':>9} "
          f"{'Megatron':>9} {'difference':>10}")
    for row in rows:
        if row.get("error") is None or row["pp"] == 1:
            continue
        key = (row["params_billion"], row["gpus"])
        pp, v, m, fwd, bwd, transfer, gather = row_inputs(row, layers[key])
        transfer *= a.transfer_scale
        b = row["breakdown_seconds"]
        pysim = row["iteration_seconds"] - b["dp_exposed"] - b["optimizer"]
        ours = max(replay_pysim(pp, v, m, fwd, bwd, transfer, gather))
        theirs = max(replay_megatron(pp, v, m, fwd, bwd, transfer, gather))
        out.append(dict(params_billion=row["params_billion"], pp=pp, interleave=v,
                        micro_batches=m, pysim_seconds=pysim, replay_pysim_seconds=ours,
                        replay_megatron_seconds=theirs, megatron_less_pysim=theirs - ours,
                        published_iteration_seconds=row["published_iteration_seconds"],
                        transfer_seconds=transfer, gather_seconds=gather))
        print(f"{row['params_billion']:>7}B {pp:>3} {v:>2} {m:>4} {pysim:>8.3f}s {ours:>8.3f}s "
              f"{theirs:>8.3f}s {theirs - ours:>+9.3f}s")
    if a.json:
        write_json(a.json, {"rows": out, "transfer_scale": a.transfer_scale,
                            "provenance": provenance()})


if __name__ == "__main__":
    main()
