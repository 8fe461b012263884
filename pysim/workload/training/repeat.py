"""A pipeline pass built once and repeated: the forward (or backward) pass of one virtual
stage for a micro-batch is the same for every micro-batch but the first (and, backward, the
last) but for the ops it waits for and the micro-batch in its ops' names. `Repeat` builds
each such class of passes once op by op (`_Builder.forward` / `backward`), keeps the ops it
added as columns (kinds, nodes, sizes, roofline work, dependencies as CSR with the ops
outside the pass as the places of its inputs), and adds every later pass of the class as
array work: its op ids offset, its inputs (each NPU's last op, what the stage before sent,
the collectives' stream order) put in, its names the pass's own with the micro-batch's
number (made when read: OpGraph._add_lazy_names), the plan's records (layer ops, collectives, sends, recomputations) offset.

A pass is repeated only where what it reads is what the built one read, in the same shape
(the same inputs present, of the same lengths, the same equalities among them); anything
else (the first and last micro-batches, a stage's first pass, memory hooks, a collectives
offload engine, a pass that changed ops outside its own) is built op by op. The graph is the
one building every pass op by op gives, op for op (tests/test_repeat.py)."""
from __future__ import annotations

from itertools import islice

import numpy as np

from pysim.workload import graph as graph_module
from pysim.workload.graph import GraphError

ENABLED = True           # False: every pass built op by op (the reference of the tests)


class Repeat:
    """The passes of one builder's iterations (see the module's doc)."""

    def __init__(self, b):
        self.b = b
        self.on = ENABLED and b.hooks is None and b.sram is None
        self.kept = {}                   # (iteration, pass, virtual stage) -> _Pass or None
        self.repeated = 0                # passes added as array work

    def run(self, kind, it, s, j, last, prev_opt, into):
        """Pass `kind` ('F' or 'B') of virtual stage s for micro-batch j, as
        _Builder.forward / backward add it."""
        b = self.b
        m = b.lay.m
        repeatable = self.on and j > 0 and (kind == "F" or j < m - 1)
        key = (it, kind, s)
        t = self.kept.get(key, False) if repeatable else None
        if t is False:                   # the class's first: built and kept
            self.kept[key] = _record(b, kind, it, s, j, last, prev_opt, into, self.kept)
            return
        if t is not None and t.replay(b, j, last, into):
            self.repeated += 1
            return
        _build(b, kind, it, s, j, last, prev_opt, into)


def _build(b, kind, it, s, j, last, prev_opt, into):
    if kind == "F":
        b.forward(it, s, j, last, prev_opt, into)
    else:
        b.backward(it, s, j, last, into)


def _stream_lists(b):
    """The collectives' stream order as {(group, npu): tuple of ops}."""
    return {(gk, n): tuple(v) for gk, grp in b.streams[0].items() for n, v in grp.items()}


class _Pass:
    """One pass's ops and records, relative to its first op (see the module's doc)."""

    def _roles(self, b, s, j, last, into):
        """The ops a pass of this class reads (its inputs, in a fixed order), and the shape
        of what it reads: which inputs are there and how many, the pipeline's gather it
        receives, and which of the inputs are the same op."""
        st = b.streams[0]
        vals, shape = [], []
        for n in self.npus:
            x = last.get(n)
            shape.append(x is not None)
            if x is not None:
                vals.append(x)
        for d, t in self.dt:
            got = into.get((s, j, d, t), ())
            shape.append(len(got))
            vals.extend(got)
        shape.append(into.get((s, j, "gather")))
        for gk, n in self.touched:
            got = st.get(gk, {}).get(n)
            shape.append(-1 if got is None else len(got))
            if got:
                vals.extend(got)
        first = {}
        pattern = tuple(map(first.setdefault, vals, range(len(vals))))
        return vals, (tuple(shape), pattern)

    def replay(self, b, j, last, into):
        """Add this class's pass for micro-batch j; False (nothing added) where its inputs
        differ in shape from the pass kept."""
        vals, shape = self._roles(b, self.s, j, last, into)
        if shape != self.shape:
            return False
        g = b.g
        base = len(g)
        k = len(self.code)
        if base + k > graph_module.MAX_OPS:
            raise GraphError(f"the op graph passes {graph_module.MAX_OPS:,} ops (a collective "
                             f"makes ops per participant, step and chunk: fewer "
                             f"workload.chunks make fewer)")
        ndep = len(g._dep)
        plan, it = b.plan, self.it
        lops, colls = plan.layer_ops, plan.collectives
        # every offset column at once: the blob's parts plus base, j, ndep and the
        # collectives' done pairs so far, each times its multiplier (see _blob)
        blob = self.blob0 + np.array([0, base, j, ndep, colls._dptr[-1]] + vals,
                                     np.int64)[self.which]
        part = self.parts                # (byte slices of the blob)
        blob = memoryview(blob).cast("B")
        g._code.extend(self.code)
        g._node.extend(self.node)
        g._dst.extend(self.dst)
        g._size.extend(self.size)
        g._add_lazy_names(base, self.marks, self.names, str(j), self.named)
        g._dep.frombytes(blob[part["dep"]])
        g._ptr.frombytes(blob[part["ptr"]])
        g._wop.frombytes(blob[part["wop"]])
        g._wflops.extend(self.wflops)
        g._wbytes.extend(self.wbytes)
        g._wpeak.extend(self.wpeak)
        if self.lat:
            g.latencies.extend(zip(map(base.__add__, self.lat[0]), *self.lat[1:]))
        if self.streamable:             # (OpGraph.allow_streams' ranges, as they come)
            r = g._streamable
            lo, hi = self.streamable[0]
            if r and r[-1][1] == base + lo:
                r[-1] = (r[-1][0], base + hi)
            else:
                r.append((base + lo, base + hi))
            if len(self.streamable) > 1:
                r.extend(zip(map(base.__add__, self.stream_lo), map(base.__add__,
                                                                   self.stream_hi)))

        def op(x):                      # a recorded op: its place in the pass, or an input
            return base + x if x >= 0 else vals[-1 - x]
        if self.new_layers is not None:
            _, _, _, stash, where = self.new_layers
            lops.add_block(it, j, blob[part["layers"]], stash, where, self)
        if self.set_layers is not None:
            row0 = None if self.set_tag is None else lops.block_row(it, j, self.set_tag)
            if row0 is not None:         # (the forward pass of j repeated: its block's rows)
                lops.set_flat(self.set_fast[0] + lops.WIDTH * row0,
                              np.frombuffer(blob[part["set"]], np.int64))
            else:
                for (i, n), f, x in self.set_layers:
                    setattr(lops[(it, i, n, j)], f, base + x)
        if self.recomputed is not None:
            plan.recomputed.add_rows(blob[part["recomputed"]])
        if self.collectives is not None:
            colls.add_parts(self.collectives.static, blob[part["coll_rec"]],
                            blob[part["coll_dptr"]], blob[part["coll_done"]])
        plan.sends.extend({**d, "micro_batch": j, "op": base + d["op"]} for d in self.sends)
        for key, v in self.into_new:
            k2 = (key[0], j) + key[2:]
            into[k2] = list(map(base.__add__, v)) if isinstance(v, list) else v
        for key in self.into_popped:
            into.pop((key[0], j) + key[2:], None)
        for n, x in self.last:
            last[n] = op(x)
        st = b.streams[0]
        for (gk, n), v in self.streams_after:
            st.setdefault(gk, {})[n] = [op(x) for x in v]
        return True


def _record(b, kind, it, s, j, last, prev_opt, into, kept):
    """Build the pass op by op and keep it as a _Pass; None where it cannot be repeated
    (kept: the classes kept so far, whose forward pass's records a backward one sets)."""
    g, plan, lay = b.g, b.plan, b.lay
    npus = list(lay.stage_npus(s))
    lo, ndep0 = len(g), g._ptr[len(g)]
    counts = (len(g._over), g._version, len(g._hbytes), len(g._space), len(plan.optimizer),
              len(b.step_done), g._forward)
    nw, nlat = len(g._wop), len(g.latencies)
    nlay, nrec, ncol, nsend = (len(plan.layer_ops), len(plan.recomputed),
                               len(plan.collectives), len(plan.sends))
    nranges = len(g._streamable)    # (those after: the pass's; the one before may grow)
    into0 = dict(into)       # (a pass gives its sends new entries, never changes a list)
    streams0 = _stream_lists(b)
    last0 = dict(last)
    a, e = lay.stages[s]
    old = {}
    if kind == "B":
        for i in range(a, e):
            for n in npus:
                lo_ = plan.layer_ops.get((it, i, n, j))
                if lo_ is not None:
                    old[(i, n)] = (lo_.fwd, lo_.bwd_input, lo_.bwd_weight)
    _build(b, kind, it, s, j, last, prev_opt, into)
    hi = len(g)
    if (len(g._over), g._version, len(g._hbytes), len(g._space), len(plan.optimizer),
            len(b.step_done), g._forward) != counts or hi == lo:
        return None
    t = _Pass()
    t.it, t.s, t.npus = it, s, npus
    t.dt = [tuple(lay.coords[n][:2]) for n in npus]
    streams1 = _stream_lists(b)
    t.touched = sorted((k for k in streams1 if streams0.get(k) != streams1[k]), key=repr)
    # the inputs, as the pass read them (with the state before it)
    before = _Pass()
    before.npus, before.dt, before.touched = npus, t.dt, t.touched
    b_streams = b.streams[0]
    saved = {k: b_streams[k[0]][k[1]] for k in t.touched}
    for (gk, n) in t.touched:                     # (the lists as they were, to read them)
        if (gk, n) in streams0:
            b_streams[gk][n] = list(streams0[(gk, n)])
        else:
            del b_streams[gk][n]
    vals, t.shape = before._roles(b, s, j, last0, into0)
    for k, v in saved.items():
        b_streams[k[0]][k[1]] = v
    role = {}
    for k, v in enumerate(vals):
        role.setdefault(v, k)

    def rel(x):
        """A recorded op: its place in the pass, -1 - its input's place, or None."""
        if lo <= x < hi:
            return x - lo
        r = role.get(x)
        return None if r is None else -1 - r
    # the ops as columns
    ptr = np.frombuffer(g._ptr, np.int64)[lo:hi + 1].copy()
    dep = np.frombuffer(g._dep, np.int64)[ptr[0]:ptr[-1]].copy()
    ext = np.flatnonzero(dep < lo)
    ext_role = [role.get(int(x), -1) for x in dep[ext]]
    if any(r < 0 for r in ext_role) or (dep >= hi).any():
        return None
    assert ndep0 == ptr[0]
    t.ptr = ptr[1:] - ptr[0]
    t.dep = dep - lo
    t.ext_pos, t.ext_role = ext, np.asarray(ext_role, np.int64)
    t.code, t.node, t.dst, t.size = (g._code[lo:hi], g._node[lo:hi], g._dst[lo:hi],
                                     g._size[lo:hi])
    t.wop = np.frombuffer(g._wop, np.int64)[nw:].copy() - lo
    t.wflops, t.wbytes, t.wpeak = g._wflops[nw:], g._wbytes[nw:], g._wpeak[nw:]
    lat = [(op - lo, src, dst, steps) for op, src, dst, steps in g.latencies[nlat:]]
    if any(not 0 <= x[0] < hi - lo for x in lat):
        return None
    t.lat = list(map(list, zip(*lat)))   # (per column: ops, sources, destinations, steps)
    t.streamable = []
    for r0, r1 in g._streamable[max(0, nranges - 1):]:
        c0, c1 = max(r0, lo), min(r1, hi)
        if c1 > c0:
            if t.streamable and t.streamable[-1][1] == c0 - lo:     # (one range, joined)
                t.streamable[-1] = (t.streamable[-1][0], c1 - lo)
            else:
                t.streamable.append((c0 - lo, c1 - lo))
    t.stream_lo = [a for a, _ in t.streamable[1:]]
    t.stream_hi = [b_ for _, b_ in t.streamable[1:]]
    # names: the micro-batch's number in each, once
    mark = f" mb{j} "
    t.names = []
    for nm in g._names[lo:hi]:
        if nm is None:
            t.names.append(None)
            continue
        if nm.count(mark) != 1:
            return None
        p, q = nm.split(mark)
        t.names.append((p + " mb", " " + q))
    t.named = [i for i, p in enumerate(t.names) if p is not None]
    t.marks = [None if p is None else graph_module._LAZY for p in t.names]
    # the plan's records
    t.new_layers = None
    lops = plan.layer_ops
    W, AT = lops.WIDTH, lops.AT
    if len(lops) > nlay:                 # (the records the pass added: rows, relative)
        rec = lops.rows(nlay)
        ops = rec[:, 4:]
        if (rec[:, 0] != it).any() or (rec[:, 3] != j).any() or \
                ((ops >= 0) & ((ops < lo) | (ops >= hi))).any():
            return None
        names = lops._npus.names
        where = {(i, names[n]): k for k, (i, n) in
                 enumerate(zip(rec[:, 1].tolist(), rec[:, 2].tolist()))}
        by_base = np.zeros_like(rec)
        by_base[:, 4:] = ops >= 0
        rec[:, 4:] = np.where(ops >= 0, ops - lo, -1)
        rec[:, 3] = 0
        by_mb = np.zeros_like(rec)
        by_mb[:, 3] = 1
        t.new_layers = (rec, by_base, by_mb, lops._stash[nlay:], where)
    changed = []
    for (i, n), was in old.items():
        lo_ = lops[(it, i, n, j)]
        for field, x0, x1 in zip(("fwd", "bwd_input", "bwd_weight"), was,
                                 (lo_.fwd, lo_.bwd_input, lo_.bwd_weight)):
            if x0 != x1:
                if x1 is None or not lo <= x1 < hi:
                    return None
                changed.append(((i, n), field, x1 - lo))
    t.set_layers = changed or None
    t.set_tag = t.set_fast = None
    fwd_class = kept.get((it, "F", s)) if kind == "B" else None
    if changed and fwd_class is not None and fwd_class.new_layers is not None:
        where = fwd_class.new_layers[4]
        if all(k in where for k, _, _ in changed):     # (places in its block's rows)
            t.set_tag = fwd_class
            t.set_fast = (np.asarray([W * where[k] + AT[f] for k, f, _ in changed], np.int64),
                          np.asarray([x for _, _, x in changed], np.int64))
    t.recomputed = None
    rc = plan.recomputed
    if len(rc) > nrec:
        r = rc.rows(nrec)
        if (r[:, 0] != it).any() or ((r[:, 2] < lo) | (r[:, 2] >= hi)).any():
            return None
        r[:, 2] -= lo
        by_base = np.zeros_like(r)
        by_base[:, 2] = 1
        t.recomputed = (r, by_base)
    t.collectives = None
    if len(plan.collectives) > ncol:
        blk = plan.collectives.block(ncol)
        r, d = blk.rec, blk.done
        if (r[:, 0] != it).any() or (r[:, 1] != j).any() or (r[:, 2] < lo).any() or \
                (r[:, 2] > r[:, 3]).any() or (r[:, 3] > hi).any() or \
                ((d[:, 1] < lo) | (d[:, 1] >= hi)).any():
            return None
        r[:, 1] = 0
        r[:, 2:] -= lo
        blk.by_mb[:, 1] = 1
        blk.by_base[:, 2:] = 1
        d[:, 1] -= lo
        blk.done_by_base[:, 1] = 1
        t.collectives = blk
    t.sends = []
    for d in plan.sends[nsend:]:
        if d["iteration"] != it or d["micro_batch"] != j or not lo <= d["op"] < hi:
            return None
        t.sends.append({**d, "op": d["op"] - lo})
    # what it left for the passes after it
    t.into_new, t.into_popped = [], []
    fresh = len(into.keys() - into0.keys())      # (the last keys inserted, in order)
    for k in list(islice(reversed(into), fresh))[::-1]:
        v = into[k]
        if k in into0 or k[1] != j:
            return None
        if isinstance(v, list):
            if any(not lo <= x < hi for x in v):
                return None
            v = [x - lo for x in v]
        t.into_new.append((k, v))
    for k in into0.keys() - into.keys():
        if k != (s, j, "gather"):
            return None
        t.into_popped.append(k)
    t.last = []
    for n, x in last.items():
        if last0.get(n) != x:
            if n not in npus or rel(x) is None:
                return None
            t.last.append((n, rel(x)))
    if len(last) != len(last0) and any(n not in last0 and n not in npus for n in last):
        return None
    t.streams_after = []
    for k in t.touched:
        v = [rel(x) for x in b_streams[k[0]][k[1]]]
        if any(x is None for x in v):
            return None
        t.streams_after.append((k, v))
    _blob(t)
    return t


def _blob(t):
    """The pass's offset columns as one int64 array (blob0) and per entry which one scalar
    a pass adds to it (`which`: 0 none, 1 base: its first op, 2 j: its micro-batch, 3 ndep:
    the graph's dependencies before it, 4 dend: the collectives' done pairs before it, 5 + k
    its input k, put in at a dependency outside the pass): dependencies
    (base; the inputs' places, ext_pos, put in after), dependency ends (ndep), roofline ops
    (base), layer records (base on ops, j on the micro-batch), the fields a backward pass
    sets (base), recomputations (base on ops), collectives' rows (base on ops, j on the
    micro-batch), their done ends (dend) and done pairs (base on ops). `parts`: each
    part's slice."""
    z = np.zeros
    parts = [("dep", t.dep, (1, 0, 0, 0)), ("ptr", t.ptr, (0, 0, 1, 0)),
             ("wop", t.wop, (1, 0, 0, 0))]
    if t.new_layers is not None:
        rec, by_base, by_mb = t.new_layers[:3]
        parts.append(("layers", rec.ravel(), (by_base.ravel(), by_mb.ravel(), 0, 0)))
    if t.set_fast is not None:
        parts.append(("set", t.set_fast[1], (1, 0, 0, 0)))
    if t.recomputed is not None:
        r, by_base = t.recomputed
        parts.append(("recomputed", r.ravel(), (by_base.ravel(), 0, 0, 0)))
    if t.collectives is not None:
        c = t.collectives
        parts += [("coll_rec", c.rec.ravel(), (c.by_base.ravel(), c.by_mb.ravel(), 0, 0)),
                  ("coll_dptr", c.dptr, (0, 0, 0, 1)),
                  ("coll_done", c.done.ravel(), (c.done_by_base.ravel(), 0, 0, 0))]
    at, where = 0, {}
    for name, x, _ in parts:
        where[name] = slice(at, at + len(x))
        at += len(x)
    t.blob0 = np.concatenate([np.asarray(x, np.int64) for _, x, _ in parts])
    by = z((4, at), np.int64)
    for (name, x, m4) in parts:
        for k, m in enumerate(m4):
            by[k, where[name]] = m
    assert ((by != 0).sum(0) <= 1).all() and (by <= 1).all()   # (one offset an entry)
    # per entry the scalar it adds, of (0, base, j, ndep, dend, the inputs...): an input's
    # place (ext_pos) takes its input alone
    t.which = np.where(by.any(0), by.argmax(0) + 1, 0)
    ext = t.ext_pos + where["dep"].start
    t.which[ext] = 5 + t.ext_role
    t.blob0[ext] = 0
    t.parts = {k: slice(8 * v.start, 8 * v.stop) for k, v in where.items()}


__all__ = ["ENABLED", "Repeat"]
