"""Results of a training run: the last iteration's time, its compute and (exposed)
communication on the busiest NPU, per layer and per NPU."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from pysim.workload.compile import OP_CODES, ROOFLINE, node_ids
from pysim.workload.holds import memory_rows
from pysim.workload.plan import Plan
from pysim.workload.result import GraphResult, op_times


def _union(iv):
    """Merge intervals [(start, end)] into disjoint sorted ones (touching ones merged)."""
    iv = list(iv)
    if len(iv) > 64:                      # (many: as arrays)
        a = np.array(iv, np.int64).reshape(-1, 2)
        return _union_arrays(a[:, 0], a[:, 1])
    out = []
    for a, b in sorted(iv):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def _union_arrays(s, e):
    """_union of the intervals [s[k], e[k]) given as arrays."""
    s, e = np.asarray(s, np.int64), np.asarray(e, np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return []
    o = np.lexsort((e, s))
    s, e = s[o], np.maximum.accumulate(e[o])
    new = np.concatenate([[True], s[1:] > e[:-1]])
    last = np.concatenate([np.flatnonzero(new)[1:] - 1, [len(s) - 1]])
    return [[x, y] for x, y in zip(s[new].tolist(), e[last].tolist())]


def _length(iv):
    return sum(b - a for a, b in iv)


MANY = 256       # intervals past which _minus and _clip work as arrays


def _minus(iv, cut):
    """Intervals iv (disjoint, sorted) less intervals cut (disjoint, sorted)."""
    if len(iv) > MANY:               # (a few intervals: bisection into cut is cheaper)
        return _minus_arrays(iv, cut)
    out = []
    j = bisect.bisect_right(cut, iv[0][0], key=lambda c: c[1]) if iv else 0
    for a, b in iv:
        while j < len(cut) and cut[j][1] <= a:
            j += 1
        k = j
        while a < b:
            if k >= len(cut) or cut[k][0] >= b:
                out.append([a, b])
                break
            if cut[k][0] > a:
                out.append([a, cut[k][0]])
            a = max(a, cut[k][1])
            k += 1
    return out


def _minus_arrays(iv, cut):
    """_minus as arrays: every boundary of either list cuts the line into pieces each inside
    or outside each list; the pieces inside iv and outside cut, touching ones joined."""
    a = np.asarray(iv, np.int64).reshape(-1, 2)
    c = np.asarray(cut, np.int64).reshape(-1, 2)
    a = a[a[:, 1] > a[:, 0]]
    if not len(a):
        return []
    pts = np.unique(np.concatenate([a.ravel(), c.ravel()]))
    s, e = pts[:-1], pts[1:]

    def inside(x):
        if not len(x):
            return np.zeros(len(s), bool)
        k = np.searchsorted(x[:, 0], s, "right") - 1
        return (k >= 0) & (e <= x[np.maximum(k, 0), 1])
    keep = inside(a) & ~inside(c)
    s, e = s[keep], e[keep]
    if not len(s):
        return []
    new = np.concatenate([[True], s[1:] != e[:-1]])
    last = np.concatenate([np.flatnonzero(new)[1:] - 1, [len(s) - 1]])
    return np.stack([s[new], e[last]], 1).tolist()


def _clip(iv, lo, hi):
    if len(iv) > MANY:
        a = np.asarray(iv, np.int64).reshape(-1, 2)
        s, e = np.maximum(a[:, 0], lo), np.minimum(a[:, 1], hi)
        keep = e > s
        return np.stack([s[keep], e[keep]], 1).tolist()
    return [[max(a, lo), min(b, hi)] for a, b in iv if min(b, hi) > max(a, lo)]


@dataclass
class TrainingResult(GraphResult):
    """A training run: the op graph's result plus the iteration's breakdown (`training`)."""
    training: dict = field(default_factory=dict)

    def to_dict(self):
        d = super().to_dict()
        d.pop("training", None)
        d.pop("ops", None)               # (every op is in the trace: pysim run --trace)
        d.update(self.training)
        return d

    def summary(self):
        t = self.training
        p = t["plan"]
        where = ("on each NPU's collectives offload engine" if p["engine"] == "offload" else
                 "by ASTRA-sim's endpoint (no compute unit; workload.astra_endpoint_delay per "
                 "message)" if p["engine"] == "astra-sim" else
                 "on the NPUs themselves (workload.engine = 'npu', the default for training)")
        rows = [("model", f"{p['model']}, {p['precision']}, optimizer {p['optimizer']}, "
                          f"batch {p['batch']}" if p["precision"] else
                          f"{p['model']} (an ASTRA-sim {p['schedule'].split()[-1]} workload: "
                          f"given cycles, run by ASTRA-sim's rules)"),
                ("plan", f"dp {p['dp']} x tp {p['tp']} x pp {p['pp']} on {len(p['npus'])} "
                         f"NPUs" + (f", {p['micro_batches']} micro-batches ({p['schedule']})"
                                    if p["pp"] > 1 or p["micro_batches"] > 1 else "") +
                 _megatron_line(p)),
                ("collectives", f"{p['algorithm']}, reductions {where}"),
                *_accelerator_row(t.get("accelerator"), p.get("precision")),
                ("iteration", f"{t['iteration_cycles']:,} cycles = "
                              f"{t['iteration_seconds'] * 1e3:.3f} ms (the last of "
                              f"{t['iterations']})" +
                              (f", {t['samples_per_second']:,.1f} samples/s"
                               if t["samples_per_second"] is not None else "")),
                ("compute", f"{t['compute_cycles']:,} cycles on {t['critical_npu']} (the "
                            f"busiest NPU)"),
                ("communication", f"{t['comm_cycles']:,} cycles running there, "
                                  f"{t['exposed_comm_cycles']:,} exposed (compute waiting)"),
                *([("memory stalls", f"{t['memory_stall_cycles']:,} cycles waiting for "
                                     f"the memory plan's transfers")]
                  if t.get("memory_stall_cycles") else []),
                ("other", f"{t['other_cycles']:,} cycles (none of these)")]
        # in rank order; an NPU with no compute of its own (one whose replica or
        # tensor-parallel rank is taken to run as the one built: workload.parallel.replicas,
        # tp_ranks = 'one') has 0% here by construction, not by measurement: left out
        every = list(t["per_npu"].items())
        util = [(n, v) for n, v in every if v["compute_cycles"]] or every
        idle = len(every) - len(util)
        rows.append(("compute utilisation", ", ".join(
            f"{n} {100 * v['compute_utilisation']:.0f}%" for n, v in util[:8]) +
            (" ..." if len(util) > 8 else "") +
            (f" (and {idle:,} NPUs whose compute is not built: workload.parallel.replicas "
             f"or tp_ranks = 'one')" if idle else "")))
        rows.append(("HBM per network byte", ", ".join(
            f"{n} {v['hbm_comm_bytes_per_network_byte']:.2f}" for n, v in every[:8]) +
            (" ..." if len(every) > 8 else "")))
        rows += [("link utilisation", self._link_line())]
        rows += memory_rows(self.memory)
        rows += [("note", n) for n in self.notes]
        rows += [("speed", f"{self.cycles_per_second:,.0f} cycles/s, {self.wall_seconds:.2f} s "
                           f"wall ({t['build_seconds']:.2f} s building {len(self.ops):,} ops)"),
                 ("seed / version", f"{self.seed} / pysim {self.version}")]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def _accelerator_row(acc, precision):
    if not acc:
        return []
    name = acc["name"] if acc["name"] != "custom" else \
        "no preset ([topology.npu] fields or the defaults)"
    peak = acc["tflops"].get(precision) if precision else None
    return [("accelerator", f"{name}: " + (f"{peak:g} TFLOP/s {precision}, " if peak else "") +
             f"HBM {acc['hbm_gbps']:g} GB/s, {acc['hbm_gb']:g} GB" +
             ("" if acc["all_npus"] else " (the first NPU's; others differ)"))]


def training_report(graph, plan, res, cfg):
    """The last iteration's breakdown: its cycles, compute and communication on the busiest
    NPU, per layer and per NPU (see docs/training.md)."""
    if not isinstance(plan, Plan):
        raise TypeError(f"training_report(plan): expected the Plan training_graph returned, "
                        f"not {type(plan).__name__}")
    clock = cfg.network.clock_ghz
    start, finish = op_times(res.ops)
    lo, hi = plan.iterations[-1]
    t0, t1 = int(start[lo:hi].min()), int(finish[lo:hi].max())
    cycles = t1 - t0
    # training compute ops (forward, backward, optimizer) per NPU, in the last iteration
    it = len(plan.iterations) - 1
    npu_ix = {n: k for k, n in enumerate(plan.npus)}
    P = len(plan.npus)

    def ix(table):                       # a table's npu ids -> places in plan.npus (-1: none)
        return np.array([npu_ix.get(n, -1) for n in table.npus] + [-1], np.int64)
    L = plan.layer_ops.columns(it)
    R = np.stack([L["layer"], ix(plan.layer_ops)[L["npu"]], L["fwd"], L["bwd_input"],
                  L["bwd_weight"]], 1) if len(L["rows"]) else np.zeros((0, 5), np.int64)
    key = R[:, 0] * P + R[:, 1]                  # (layer, npu)
    fwd_ops, bwd_ops = {}, {}
    for bucket, cols in ((fwd_ops, (2,)), (bwd_ops, (3, 4))):
        ks = np.concatenate([key[R[:, c] >= 0] for c in cols])
        ops = np.concatenate([R[R[:, c] >= 0, c] for c in cols])
        u, inv = np.unique(ks, return_inverse=True)
        total = np.zeros(len(u), np.int64)          # (exact: integer sums)
        np.add.at(total, inv, finish[ops] - start[ops])
        for k, d in zip(u.tolist(), total.tolist()):
            bucket[(k // P, plan.npus[k % P])] = int(d)
    # training compute ops (forward, backward, optimizer, recomputed) per NPU
    who = [R[R[:, c] >= 0, 1] for c in (2, 3, 4)]
    ops = [R[R[:, c] >= 0, c] for c in (2, 3, 4)]
    opt = [(npu_ix[n], op) for (it_, i, n), op in plan.optimizer.items() if it_ == it]
    X = np.array(opt, np.int64).reshape(-1, 2)
    rc = plan.recomputed.columns(it)
    rc_who = ix(plan.recomputed)[rc["npu"]]
    who = np.concatenate(who + [X[:, 0], rc_who])
    ops = np.concatenate(ops + [X[:, 1], rc["op"]])
    by = np.argsort(who, kind="stable")
    bounds = np.searchsorted(who[by], np.arange(P + 1))
    comp_u = {n: _union_arrays(start[ops[by[bounds[k]:bounds[k + 1]]]],
                               finish[ops[by[bounds[k]:bounds[k + 1]]]])
              if bounds[k + 1] > bounds[k] else [] for k, n in enumerate(plan.npus)}
    busy = {n: _length(v) for n, v in comp_u.items()}
    crit = max(plan.npus, key=lambda n: (busy[n], n))
    kc = npu_ix[crit]
    # the critical NPU's communication: each collective from its first op touching the NPU
    # to the end of the NPU's part; each pipeline send from or to it
    index = {n: i for i, n in enumerate(plan.npus)}
    cols = graph.arrays()
    nid, did = node_ids(graph, index, cols)
    # per collective of the last iteration, the first start of one of its ops from or to
    # the critical NPU (all collectives at once)
    C = plan.collectives.columns(it)
    nc = len(C["rows"])
    f, ln = C["first"], C["last"] - C["first"]
    cid = np.repeat(np.arange(nc), ln)
    ops = (np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln) +
           np.repeat(f, ln)) if nc else np.zeros(0, np.int64)
    who = np.concatenate([nid[ops], did[ops]])
    when = np.concatenate([start[ops], start[ops]])
    cid = np.concatenate([cid, cid])
    keep = who == kc
    who, when, cid = who[keep], when[keep], cid[keep]
    order = np.lexsort((when, who, cid))
    who, when, cid = who[order], when[order], cid[order]
    firsts = np.flatnonzero(np.concatenate([[True], (who[1:] != who[:-1]) |
                                            (cid[1:] != cid[:-1])])) if who.size else who
    fc, fw, ft = cid[firsts], who[firsts], when[firsts]
    # each collective's part there ends at its done op: where the NPU has one
    dn = ix(plan.collectives)[C["done_npu"]]
    dkey = np.repeat(np.arange(nc, dtype=np.int64), np.diff(C["done_ptr"])) * P + dn
    dkey, dop = dkey[dn == kc], C["done_op"][dn == kc]
    o = np.argsort(dkey, kind="stable")
    dkey, dop = dkey[o], dop[o]
    q = fc * P + fw
    at = np.minimum(np.searchsorted(dkey, q), max(len(dkey) - 1, 0))
    hit = (dkey[at] == q) if len(dkey) else np.zeros(len(q), bool)
    iv_c, iv_n, iv_s = fc[hit], fw[hit], ft[hit].astype(np.int64)
    iv_e = finish[dop[at[hit]]].astype(np.int64)
    # (the pipeline's sends from or to the critical NPU)
    crit_sends = []
    for sd in plan.sends:
        if sd["iteration"] == it and crit in (sd["src"], sd["dst"]):
            crit_sends.append((int(start[sd["op"]]), int(finish[sd["op"]])))
    # the critical NPU's communication: its collectives' parts and its sends (the report
    # speaks of no other NPU's)
    mine = iv_n == kc
    sent = np.asarray(crit_sends, np.int64).reshape(-1, 2)
    crit_comm = _clip(_union_arrays(np.concatenate([iv_s[mine], sent[:, 0]]),
                                    np.concatenate([iv_e[mine], sent[:, 1]])), t0, t1)
    # on the critical NPU, per kind of communication: how many, running, exposed; its
    # collectives in the plan's order
    crit_c = iv_c[mine].tolist()
    crit_iv = list(zip(iv_s[mine].tolist(), iv_e[mine].tolist()))
    crows = C["rows"]
    by_kind = {}
    for k, iv in zip(crit_c, crit_iv):
        by_kind.setdefault(plan.collectives.what(int(crows[k])), []).append(iv)
    by_kind["pp_send"] = crit_sends
    comm_by_kind = {}
    for what, iv in sorted(by_kind.items()):
        if not iv:
            continue
        u = _clip(_union(iv), t0, t1)
        comm_by_kind[what] = dict(count=len(iv), comm_cycles=_length(u),
                                  exposed_comm_cycles=_length(_minus(u, comp_u[crit])))
    extra = {}
    rc_crit = rc["op"][rc_who == kc].tolist()
    for what, ops in (("recompute_cycles", rc_crit),
                      ("optimizer_cycles", [op for (it_, i, n), op in plan.optimizer.items()
                                            if it_ == it and n == crit])):
        extra[what] = _length(_union([(int(start[op]), int(finish[op])) for op in ops]))
    # per layer, on the critical NPU
    model = plan.model
    per_layer = []
    lay_comm = {}
    for k, (x, y) in zip(crit_c, crit_iv):
        layers, layer_bytes = plan.collectives.layers(int(crows[k]))
        iv = [[x, y]]
        dur = y - x
        exp = _length(_minus(iv, comp_u[crit]))
        tot = sum(layer_bytes) or 1
        for i, nb in zip(layers, layer_bytes or [1] * len(layers)):
            share = nb / tot if layer_bytes else 1 / len(layers)
            x = lay_comm.setdefault(i, [0.0, 0.0])
            x[0] += dur * share
            x[1] += exp * share
    for i, layer in enumerate(model.layers):
        cc = lay_comm.get(i, (0.0, 0.0))
        per_layer.append(dict(name=layer.name, kind=layer.kind,
                              fwd_cycles=fwd_ops.get((i, crit), 0),
                              bwd_cycles=bwd_ops.get((i, crit), 0),
                              comm_cycles=int(round(cc[0])),
                              exposed_comm_cycles=int(round(cc[1]))))
    # per NPU
    # per NPU, the bytes of its ops of the last iteration
    code, who, size = cols["code"][lo:hi], nid[lo:hi], cols["size"][lo:hi]
    roof = np.flatnonzero((code == ROOFLINE) & (who >= 0))
    wop, _, wbytes, _ = graph.roofline()
    roof_bytes = wbytes[np.searchsorted(wop, lo + roof)]
    mem = (who >= 0) & (code == OP_CODES["memory"])
    red = (who >= 0) & (code == OP_CODES["reduce_npu"])
    snd = (who >= 0) & (code == OP_CODES["send"])
    P = len(plan.npus)
    comm_hbm = (np.bincount(who[mem], size[mem], P) +
                np.bincount(who[red], 4 * size[red], P))
    hbm = comm_hbm + np.bincount(who[roof], roof_bytes, P)
    net = np.bincount(who[snd], size[snd], P)
    per_npu = {}                         # (the NPUs with ops of their own: those built)
    own = np.bincount(who[who >= 0], minlength=P) > 0
    for k, n in enumerate(plan.npus):
        if not own[k]:
            continue
        per_npu[n] = dict(compute_utilisation=busy[n] / cycles if cycles else 0.0,
                          compute_cycles=busy[n], hbm_bytes=int(hbm[k]),
                          hbm_comm_bytes=int(comm_hbm[k]), network_bytes=int(net[k]))
    for v in per_npu.values():
        v["hbm_comm_bytes_per_network_byte"] = (v["hbm_comm_bytes"] / v["network_bytes"]
                                                if v["network_bytes"] else 0.0)
        v["network_gbps"] = v["network_bytes"] * clock / cycles if cycles else 0.0
    seconds = cycles / (clock * 1e9)
    comm_c = _length(crit_comm)
    exp_c = _length(_minus(crit_comm, comp_u[crit]))
    stall_c = _memory_stall(graph, start, finish, crit, t0, t1, comp_u[crit], crit_comm)
    return dict(
        iteration_cycles=cycles, iteration_seconds=seconds,
        samples_per_second=(plan.batch / seconds if seconds else float("inf"))
        if plan.batch else None,
        compute_cycles=busy[crit], comm_cycles=comm_c, exposed_comm_cycles=exp_c,
        memory_stall_cycles=stall_c,
        other_cycles=max(0, cycles - busy[crit] - exp_c - stall_c), critical_npu=crit,
        comm_by_kind=comm_by_kind, **extra,
        iterations=len(plan.iterations), iteration_start=t0, per_layer=per_layer,
        per_npu=per_npu, plan=_describe(plan), accelerator=_accelerator(plan))


def _memory_stall(graph, start, finish, npu, t0, t1, compute, comm):
    """Cycles of [t0, t1) in which `npu` neither computes nor communicates while one of its
    memory transfers (a memory plan's offload, prefetch or swap: mem_read, mem_write) runs:
    the iteration waiting for memory."""
    code = graph.arrays()["code"]
    ops = np.flatnonzero((code == OP_CODES["mem_read"]) | (code == OP_CODES["mem_write"]))
    if not len(ops):
        return 0
    node = graph.node
    iv = [(int(start[k]), int(finish[k])) for k in ops.tolist()
          if node[k] == npu and finish[k] > t0 and start[k] < t1]
    if not iv:
        return 0
    busy = _union(list(compute) + list(comm))
    return _length(_minus(_clip(_union(iv), t0, t1), busy))


def _accelerator(plan):
    """The accelerator the plan's NPUs are (the first NPU's spec; a preset or the defaults),
    so that a run says what hardware it trained on."""
    lay = getattr(plan, "layout", None)
    specs = getattr(lay, "specs", None)
    if not specs:
        return None
    sp = specs[plan.npus[0]]
    same = all(s == sp for s in specs.values())
    return dict(name=sp.name, tflops=dict(sp.tflops), hbm_gbps=sp.hbm_bytes_per_s / 1e9,
                hbm_gb=sp.hbm_capacity_bytes / 1e9, all_npus=same)


def _describe(plan):
    """The plan's description with its Megatron-LM settings (where a layout was built)."""
    d = plan.describe()
    lay = plan.layout
    if lay is not None and hasattr(lay, "sp"):
        d.update(sp=lay.sp, interleave=lay.v, zero=lay.zero, ep=lay.ep,
                 recompute=lay.recompute, replicas=lay.replicas,
                 compute="kernels" if lay.kernels is not None else "roofline")
    return d


def _megatron_line(p):
    parts = []
    if p.get("sp"):
        parts.append("sequence parallel")
    if p.get("interleave", 1) > 1:
        parts.append(f"interleave {p['interleave']}")
    if p.get("zero"):
        parts.append(f"ZeRO-{p['zero']}")
    if p.get("ep", 1) > 1:
        parts.append(f"ep {p['ep']}")
    if p.get("recompute"):
        parts.append(f"{p['recompute']} recomputation")
    if p.get("replicas") == "one":
        parts.append("one replica built for all")
    return "".join(f", {x}" for x in parts)

