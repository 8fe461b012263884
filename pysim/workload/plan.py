"""What a training plan records of the op graph it built: per layer and NPU the ops of each
pass and the bytes kept for backward (LayerOps), each collective's ops (CollectiveOps), and
the plan itself (Plan). Written by the training builders (pysim.workload.training, and the
ASTRA-sim workloads, pysim.workload.astra); read by the memory plans and the reports.

The records are kept as columns (typed arrays, and lists of references to values they
share), not as an object per record: `LayerTable` (plan.layer_ops, a mapping),
`CollectiveTable` (plan.collectives, a sequence) and `RecomputeTable` (plan.recomputed, a
sequence) read like the dict and lists of records they stand for -- a record read is made
from the columns -- and take a repeated pipeline pass's records as one block of columns
(pysim.workload.training.repeat). `columns()` gives a table as numpy arrays."""
from __future__ import annotations

import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


# ------------------------------------------------------------------ what the plan records

@dataclass
class LayerOps:
    fwd: int | None
    bwd_input: int | None
    bwd_weight: int | None
    stash_bytes: int                     # kept from this forward op for the backward ops


@dataclass
class CollectiveOps:
    what: str                            # dp_all_reduce, tp_all_reduce, all_to_all, ...
    collective: str                      # all_reduce, all_to_all
    group: list
    bytes: int                           # per participant
    iteration: int
    micro_batch: int | None
    layers: list                         # layer indices whose data it carries
    first: int                           # op id range [first, last) in the graph
    last: int
    done: dict                           # per NPU: the op ending its part
    layer_bytes: list = field(default_factory=list)   # per layer in `layers`: its bytes


def _np(a, dtype=np.int64):
    """A numpy copy of an array.array column (empty ones alike)."""
    return np.frombuffer(a, dtype).copy() if len(a) else np.zeros(0, dtype)


class _Npus:
    """NPU names by id (the tables' npu columns)."""

    def __init__(self):
        self.names, self.ids = [], {}

    def id(self, n):
        i = self.ids.get(n)
        if i is None:
            i = self.ids[n] = len(self.names)
            self.names.append(n)
        return i


_LAYER_COLS = ("it", "layer", "npu", "mb", "fwd", "bwd_input", "bwd_weight")
_AT = {f: k for k, f in enumerate(_LAYER_COLS)}
_W = len(_LAYER_COLS)


class _LayerRow:
    """One record of a LayerTable, read and written in its columns (as a LayerOps)."""
    __slots__ = ("_t", "_r")

    def __init__(self, table, row):
        self._t, self._r = table, row

    def _get(k):
        def get(self):
            x = self._t._rec[_W * self._r + k]
            return None if x < 0 else x

        def put(self, x):
            self._t._rec[_W * self._r + k] = -1 if x is None else x
        return property(get, put)
    fwd, bwd_input, bwd_weight = _get(4), _get(5), _get(6)
    del _get

    @property
    def stash_bytes(self):
        return self._t._stash[self._r]

    @stash_bytes.setter
    def stash_bytes(self, x):
        self._t._stash[self._r] = x

    def _tuple(self):
        return (self.fwd, self.bwd_input, self.bwd_weight, self.stash_bytes)

    def __eq__(self, other):
        if not isinstance(other, (LayerOps, _LayerRow)):
            return NotImplemented
        return self._tuple() == (other.fwd, other.bwd_input, other.bwd_weight,
                                 other.stash_bytes)

    __hash__ = None

    def __repr__(self):
        return "LayerOps(fwd={!r}, bwd_input={!r}, bwd_weight={!r}, stash_bytes={!r})".format(
            *self._tuple())


class LayerTable(Mapping):
    """plan.layer_ops: {(iteration, layer, npu, micro_batch): LayerOps} as columns (one
    int64 array of rows: iteration, layer, npu id, micro-batch, and the three ops, -1 for
    None; the stash bytes as a list). Reads like the dict (a record read is a view of its
    row: setting its fields sets the row); `table[key] = LayerOps(...)` adds or sets a
    record. A repeated pass adds its records as a block (`add_block`), found by key through
    its class's places."""

    def __init__(self):
        self._rec = array.array("q")
        self._stash = []
        self._npus = _Npus()
        self._index = {}                 # key -> row, of the records added one by one
        self._blocks = {}                # (iteration, mb) -> [(row0, {(layer, npu): k})]
        self._block_at = {}              # (iteration, mb, tag) -> row0

    def __len__(self):
        return len(self._stash)

    def _row(self, key):
        r = self._index.get(key)
        if r is None and self._blocks:
            try:
                it, i, n, j = key
                blocks = self._blocks.get((it, j), ())
            except (TypeError, ValueError):
                return None
            for row0, where in blocks:
                k = where.get((i, n))
                if k is not None:
                    return row0 + k
        return r

    def __getitem__(self, key):
        r = self._row(key)
        if r is None:
            raise KeyError(key)
        return _LayerRow(self, r)

    def __contains__(self, key):
        return self._row(key) is not None

    def __setitem__(self, key, lo):
        r = self._row(key)
        if r is None:
            it, i, n, j = key
            r = self._index[key] = len(self._stash)
            self._rec.extend((it, i, self._npus.id(n), j, -1, -1, -1))
            self._stash.append(None)
        row = _LayerRow(self, r)
        row.fwd, row.bwd_input, row.bwd_weight = lo.fwd, lo.bwd_input, lo.bwd_weight
        row.stash_bytes = lo.stash_bytes

    def __iter__(self):
        rec, names = self._rec, self._npus.names
        return zip(rec[0::_W], rec[1::_W], map(names.__getitem__, rec[2::_W]), rec[3::_W])

    def items(self):
        return zip(iter(self), self.values())

    def values(self):
        return map(_LayerRow, [self] * len(self), range(len(self)))

    def __eq__(self, other):
        if not isinstance(other, Mapping):
            return NotImplemented
        return len(self) == len(other) and all(
            other.get(k) == v for k, v in self.items())

    __hash__ = None

    def __repr__(self):
        return f"LayerTable({len(self):,} records)"

    @property
    def npus(self):
        """The NPU names of the npu column, by id."""
        return list(self._npus.names)

    def rows(self, lo=0):
        """The rows from lo on as an int64 array (a copy) of the columns it, layer, npu
        (ids into `npus`), mb, fwd, bwd_input, bwd_weight (-1 for an op that is None)."""
        if len(self) <= lo:
            return np.zeros((0, _W), np.int64)
        return np.frombuffer(self._rec, np.int64)[_W * lo:].reshape(-1, _W).copy()

    def columns(self, iteration=None):
        """The records as numpy arrays (int64; -1 for an op that is None): it, layer, npu
        (ids into `npus`), mb, fwd, bwd_input, bwd_weight; and `rows`, their places. Those
        of one iteration, if given."""
        a = self.rows()
        rows = np.arange(len(a), dtype=np.int64)
        if iteration is not None:
            keep = a[:, 0] == iteration
            a, rows = a[keep], rows[keep]
        out = {f: a[:, k] for k, f in enumerate(_LAYER_COLS)}
        out["rows"] = rows
        return out

    def at(self, row):
        """The record of a row (a view, as table[key] gives)."""
        return _LayerRow(self, row)

    def add_block(self, it, mb, rec, stash, where, tag):
        """Records of one pass added at once: rec, their rows (an int64 array of the
        columns, as `rows` gives them), their stash bytes; `where`: {(layer, npu name):
        place in the block}, shared by every block of `tag`. Their keys must be new."""
        row0 = len(self._stash)
        self._rec.frombytes(rec)
        self._stash.extend(stash)
        b = self._blocks.get((it, mb))
        if b is None:
            self._blocks[(it, mb)] = [(row0, where)]
        else:
            b.append((row0, where))
        self._block_at[(it, mb, tag)] = row0

    def block_row(self, it, mb, tag):
        """The first row of the block of `tag` for (iteration, mb), or None."""
        return self._block_at.get((it, mb, tag))

    WIDTH, AT = _W, _AT                  # (a row's columns, and each column's place)

    def set_flat(self, at, values):
        """The rows' array set at the flat places `at` (WIDTH * row + AT[column])."""
        a = np.frombuffer(self._rec, np.int64)
        a[at] = values
        del a


class _Records(Sequence):
    """A table read as the list of its records: equal to a sequence of equal records."""

    def __eq__(self, other):
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}({len(self):,} records)"


class RecomputeTable(_Records):
    """plan.recomputed: [(iteration, npu, op)] of recomputed forward ops, as one int64
    array of rows (iteration, npu id, op)."""

    def __init__(self):
        self._rec = array.array("q")
        self._npus = _Npus()

    def __len__(self):
        return len(self._rec) // 3

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(len(self))[k]]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        it, n, op = self._rec[3 * k:3 * k + 3]
        return (it, self._npus.names[n], op)

    def __iter__(self):
        r = self._rec
        return zip(r[0::3], map(self._npus.names.__getitem__, r[1::3]), r[2::3])

    def append(self, rec):
        it, n, op = rec
        self._rec.extend((it, self._npus.id(n), op))

    def extend(self, recs):
        for r in recs:
            self.append(r)

    def rows(self, lo=0):
        """The rows from lo on (iteration, npu id, op) as an int64 array (a copy)."""
        if len(self) <= lo:
            return np.zeros((0, 3), np.int64)
        return np.frombuffer(self._rec, np.int64)[3 * lo:].reshape(-1, 3).copy()

    def add_rows(self, rows):
        """Rows (an int64 array, as `rows` gives them, or its flat buffer) added."""
        self._rec.frombytes(rows)

    @property
    def npus(self):
        return list(self._npus.names)

    def columns(self, iteration=None):
        """it, npu (ids into `npus`), op as numpy arrays (of one iteration, if given)."""
        a = self.rows()
        if iteration is not None:
            a = a[a[:, 0] == iteration]
        return dict(it=a[:, 0], npu=a[:, 1], op=a[:, 2])



class CollectiveTable(_Records):
    """plan.collectives: CollectiveOps records as columns (a record read is made from them:
    a new CollectiveOps, whose changes change nothing here). Per record an int64 row
    (iteration, micro-batch or -1 for None, first and last op) and a tuple of references to
    its what, collective, group, bytes, layers and layer bytes (shared by a repeated pass's
    records: read, never changed); the `done` maps as one flat array of (npu id, op) pairs
    with per-record offsets."""

    def __init__(self):
        self._static = []                # per record (what, collective, group, bytes,
        #                                  layers, layer_bytes)
        self._rec = array.array("q")     # per record: it, mb (-1: None), first, last
        self._dptr = array.array("q", [0])
        self._done = array.array("q")    # (npu id, op) pairs
        self._npus = _Npus()

    def __len__(self):
        return len(self._static)

    def _get(self, k):
        a, b = self._dptr[k], self._dptr[k + 1]
        names = self._npus.names
        what, coll, group, nbytes, layers, lb = self._static[k]
        it, mb, first, last = self._rec[4 * k:4 * k + 4]
        d = self._done[2 * a:2 * b]
        return CollectiveOps(what, coll, group, nbytes, it, None if mb < 0 else mb, layers,
                             first, last, dict(zip(map(names.__getitem__, d[0::2]), d[1::2])),
                             lb)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self._get(i) for i in range(len(self))[k]]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return self._get(k)

    def __iter__(self):
        return map(self._get, range(len(self)))

    def append(self, c):
        self._static.append((c.what, c.collective, c.group, c.bytes, c.layers,
                             c.layer_bytes))
        self._rec.extend((c.iteration, -1 if c.micro_batch is None else c.micro_batch,
                          c.first, c.last))
        for n, op in c.done.items():
            self._done.extend((self._npus.id(n), op))
        self._dptr.append(len(self._done) // 2)

    def extend(self, cs):
        for c in cs:
            self.append(c)

    @property
    def npus(self):
        return list(self._npus.names)

    def what(self, k):
        return self._static[k][0]

    def layers(self, k):
        """Record k's layers and layer bytes."""
        return self._static[k][4], self._static[k][5]

    def block(self, lo):
        """The records from place lo on as a CollectiveBlock: their rows and done pairs as
        they are (nothing to add: by_base and by_mb zero)."""
        a = self._dptr[lo]
        rec = np.frombuffer(self._rec, np.int64)[4 * lo:].reshape(-1, 4).copy()
        done = np.frombuffer(self._done, np.int64)[2 * a:].reshape(-1, 2).copy()
        return CollectiveBlock(self._static[lo:], rec, np.zeros_like(rec),
                               np.zeros_like(rec),
                               np.frombuffer(self._dptr, np.int64)[lo + 1:] - a, done,
                               np.zeros_like(done))

    def add_parts(self, static, rec, dptr, done):
        """Records added as flat int64 buffers: their static tuples, rows (it, mb, first,
        last), the ends of their done pairs (offset already) and the pairs."""
        self._static.extend(static)
        self._rec.frombytes(rec)
        self._dptr.frombytes(dptr)
        self._done.frombytes(done)

    def columns(self, iteration=None):
        """it, mb (-1: None), first, last as numpy arrays, `done_ptr`, `done_npu` (ids into
        `npus`) and `done_op` (record k's done: done_ptr[k]..done_ptr[k + 1]), `rows`
        (their places); those of one iteration, if given (done_ptr then of those)."""
        rec = np.frombuffer(self._rec, np.int64).reshape(-1, 4) if len(self) else \
            np.zeros((0, 4), np.int64)
        ptr = np.frombuffer(self._dptr, np.int64).copy()
        done = np.frombuffer(self._done, np.int64).reshape(-1, 2) if len(self._done) else \
            np.zeros((0, 2), np.int64)
        rows = np.arange(len(self), dtype=np.int64)
        if iteration is not None:
            keep = rec[:, 0] == iteration
            rows, rec = rows[keep], rec[keep]
            cnt = (ptr[1:] - ptr[:-1])[keep]
            at = np.repeat(ptr[:-1][keep] - np.concatenate([[0], np.cumsum(cnt)[:-1]]),
                           cnt) + np.arange(int(cnt.sum()))
            ptr = np.concatenate([[0], np.cumsum(cnt)])
            done = done[at]
        return dict(it=rec[:, 0].copy(), mb=rec[:, 1].copy(), first=rec[:, 2].copy(),
                    last=rec[:, 3].copy(), done_ptr=ptr, done_npu=done[:, 0].copy(),
                    done_op=done[:, 1].copy(), rows=rows)



@dataclass
class CollectiveBlock:
    """Collective records as columns (CollectiveTable.block; repeat._blob): per record its
    (what, collective, group, bytes, layers, layer bytes), its row (it, mb, first, last)
    and what a block adds to it per op of offset and per micro-batch, its done pairs' ends
    (dptr: the end of each record's pairs, from the block's first) and pairs (npu id, op)
    and what they add per op of offset."""
    static: list
    rec: np.ndarray
    by_base: np.ndarray
    by_mb: np.ndarray
    dptr: np.ndarray
    done: np.ndarray
    done_by_base: np.ndarray


@dataclass
class Plan:
    model: object
    precision: str
    optimizer_name: str
    batch: int
    dp: int
    tp: int
    pp: int
    micro_batches: int
    schedule: str
    order: list
    tables: str
    engine: str
    algorithm: str
    npus: list
    coords: dict                         # npu -> (dp index, tp index, stage)
    stages: list                         # per stage: (first layer, last layer + 1)
    iterations: list = field(default_factory=list)     # per iteration: (first, last) op ids
    layer_ops: LayerTable = field(default_factory=LayerTable)
    optimizer: dict = field(default_factory=dict)
    collectives: CollectiveTable = field(default_factory=CollectiveTable)
    sends: list = field(default_factory=list)
    recomputed: RecomputeTable = field(default_factory=RecomputeTable)  # (iteration, npu,
    #                                                                    op): recomputation
    table_owner: dict = field(default_factory=dict)    # layer index -> npu (split tables)
    memory: dict = field(default_factory=dict)         # npu -> bytes needed in HBM
    layout: object = None                # the resolved layout (sizes, splits, costs)

    def stash(self, iteration, layer, npu, micro_batch):
        """(op producing the layer's stash, last op consuming it, bytes) on npu, or None."""
        lo = self.layer_ops.get((iteration, layer, npu, micro_batch))
        if lo is None or lo.fwd is None:
            return None
        last = lo.bwd_weight if lo.bwd_weight is not None else lo.bwd_input
        return lo.fwd, last, lo.stash_bytes

    def describe(self):
        return dict(model=self.model.name, precision=self.precision,
                    optimizer=self.optimizer_name, batch=self.batch, dp=self.dp, tp=self.tp,
                    pp=self.pp, micro_batches=self.micro_batches, schedule=self.schedule,
                    order=list(self.order), tables=self.tables, engine=self.engine,
                    algorithm=self.algorithm, npus=list(self.npus),
                    stages=[list(s) for s in self.stages],
                    memory_bytes=dict(self.memory))
