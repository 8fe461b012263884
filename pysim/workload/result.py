"""What an op-graph run measured: the ops' times as a lazy table over the run's arrays, and
the result (`GraphResult`) with its summary, its JSON form and its trace."""
from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pysim._io import json_safe
from pysim.stats import link_column
from pysim.workload.compile import KIND_OF, ROOFLINE
from pysim.workload.holds import memory_rows


class OpTable(Sequence):
    """The ops of a run, as a sequence of dicts (name, kind, node, dst, size, start, finish;
    a roofline op also flops, bytes and isolated_cycles) made when asked for: the columns
    are the graph's and the run's arrays (`start`, `finish`), not a dict per op."""

    def __init__(self, graph, start, finish, isolated):
        self.n = len(graph)
        # the graph's columns (pysim.workload.graph.OpGraph), read op by op
        self.names, self.code, self.node, self.dst, self.size = (
            graph._names, graph._code, graph._node, graph._dst, graph._size)
        self.node_names = list(graph._nodes) + [None]          # (id -1: none)
        self.wop, self.wflops, self.wbytes = graph._wop, graph._wflops, graph._wbytes
        self.start, self.finish, self.isolated = start, finish, isolated

    def __len__(self):
        return self.n

    def _op(self, i, start, finish, w=None):
        """Op i's row; w: its place among the roofline ops, where known."""
        name = self.names[i]
        code = self.code[i]
        nn = self.node_names
        op = dict(name=name if name is not None else f"op{i}", kind=KIND_OF[code],
                  node=nn[self.node[i]], dst=nn[self.dst[i]], size=self.size[i], start=start,
                  finish=finish)
        if code == ROOFLINE:
            if w is None:
                w = bisect.bisect_left(self.wop, i)
            op["flops"], op["bytes"] = self.wflops[w], self.wbytes[w]
            op["isolated_cycles"] = int(self.isolated[i])
        return op

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("op index out of range")
        return self._op(i, int(self.start[i]), int(self.finish[i]))

    def __iter__(self):
        w = 0
        for i, a, b in zip(range(self.n), self.start.tolist(), self.finish.tolist()):
            yield self._op(i, a, b, w)
            w += self.code[i] == ROOFLINE

    def __eq__(self, other):
        return list(self) == list(other)


def op_times(ops):
    """(start, finish) arrays of a run's ops (a GraphResult's `ops`)."""
    if isinstance(ops, OpTable):
        return ops.start, ops.finish
    return (np.array([op["start"] for op in ops], np.int64),
            np.array([op["finish"] for op in ops], np.int64))


MODEL_TEXT = {"flit": "flit (routers, VCs and credits, cycle by cycle)",
              "flow": "flow (messages as flows sharing links max-min fairly, plus their "
                      "zero-load latency)"}


@dataclass
class GraphResult:
    """What an op-graph run measured. `to_dict()` is what `pysim run --json` writes."""
    makespan_cycles: int
    ops: Sequence                   # per op: name, kind, node, dst, size, start, finish
    packets: int
    avg_packet_latency: float
    flit_hops: int
    wall_seconds: float
    cycles_per_second: float
    cycles_skipped: int
    node_names: list
    config: dict = field(default_factory=dict)
    seed: int = 0
    version: str = ""
    build: dict = field(default_factory=dict)
    collective: dict = field(default_factory=dict)   # set for collective workloads
    links: Sequence = field(default_factory=list)    # per channel, over the makespan: a
                                                     # pysim.stats.LinkTable
    memory: dict = field(default_factory=dict)       # set when the graph holds memory
    network_model: str = "flit"    # which network model produced it: 'flit' or 'flow'
    flow: dict = field(default_factory=dict)         # flow model: flows, rate recomputations
    profile: dict = field(default_factory=dict)      # where the wall time went, and sizes
    notes: list = field(default_factory=list)        # limits met that were not chosen
    op_graph: object = field(default=None, repr=False, compare=False)  # (graph, topology):
                                                     # what ran (not in to_dict)

    def to_dict(self):
        """Plain JSON data: a number that is not defined (no packet, no time) is None."""
        d = dict(self.__dict__)
        d.pop("op_graph", None)
        d.update(d.pop("collective"))        # collective_cycles, algbw_gbps, ... top-level
        if not d["memory"]:
            del d["memory"]
        # the ops made once, not copied again: of an op's values only a roofline op's
        # flops and bytes can be a float (json_safe's concern)
        ops = d["ops"]
        d["ops"] = []
        d = json_safe(d)
        d["ops"] = [json_safe(op) if "flops" in op else op for op in ops]
        return d

    def busy_cycles(self):
        """Per node: cycles its compute unit was busy."""
        busy = {}
        if isinstance(self.ops, OpTable):
            t = self.ops
            code = np.frombuffer(t.code, np.int8)[:t.n]
            for i in np.flatnonzero((code == 0) | (code == ROOFLINE)).tolist():
                n = t.node_names[t.node[i]]
                busy[n] = busy.get(n, 0) + int(t.finish[i] - t.start[i])
            del code                         # (the graph's column may grow again)
            return busy
        for op in self.ops:
            if op["kind"] == "compute":
                busy[op["node"]] = busy.get(op["node"], 0) + op["finish"] - op["start"]
        return busy

    def trace(self):
        """A Chrome/Perfetto trace: a process per node, a track per resource (compute;
        network: its sends and its memory-node reads and writes; memory; collectives engine),
        plus one for delays; a memory-node read or write shows on the memory node's memory
        track too. The format's `ts` and `dur` are microseconds (cycles / clock_ghz / 1000);
        each event keeps its cycles in `args` (`start_cycle`, `cycles`). `otherData` names the
        system and the clock, and carries the version, the seed and the resolved config."""
        us_per_cycle = 1e-3 / float((self.config.get("network") or {}).get("clock_ghz") or 1.0)
        events = []
        pids = {name: i for i, name in enumerate(self.node_names)}
        delay_pid = len(self.node_names)
        for name, pid in pids.items():
            events.append({"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0,
                           "args": {"name": "compute"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1,
                           "args": {"name": "network"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 2,
                           "args": {"name": "memory"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 3,
                           "args": {"name": "collectives engine"}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 4,
                           "args": {"name": "gate"}})
        events.append({"ph": "M", "name": "process_name", "pid": delay_pid,
                       "args": {"name": "delays"}})
        for op in self.ops:
            if op["start"] < 0:
                continue
            pid = pids[op["node"]] if op["node"] is not None else delay_pid
            tid = {"compute": 0, "send": 1, "delay": 0, "memory": 2, "engine": 3,
                   "mem_write": 1, "mem_read": 1, "reduce_npu": 0,
                   "reduce_offload": 3, "acquire": 4, "release": 4, "take_units": 4,
                   "free_units": 4}[op["kind"]]
            args = {"start_cycle": op["start"], "cycles": op["finish"] - op["start"]}
            args.update({"size": op["size"]} if op["size"] >= 0 else
                        {"flops": op["flops"], "bytes": op["bytes"]})
            if op["kind"] == "send":
                args["dst"] = op["dst"]
            event = {"ph": "X", "name": op["name"], "cat": op["kind"], "pid": pid, "tid": tid,
                     "ts": op["start"] * us_per_cycle,
                     "dur": (op["finish"] - op["start"]) * us_per_cycle, "args": args}
            events.append(event)
            if op["kind"] in ("mem_write", "mem_read") and op["dst"] in pids:
                events.append({**event, "pid": pids[op["dst"]], "tid": 2,
                               "name": f"{op['name']} ({op['node']})",
                               "args": {**args, "npu": op["node"]}})
        system = (self.config or {}).get("_system")
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"system": system, "clock_ghz": 1e-3 / us_per_cycle,
                              "version": self.version, "seed": self.seed,
                              "config": self.config}}

    def summary(self):
        busy = self.busy_cycles()
        rows = []
        c = self.collective
        if c:
            rgbps = (self.config.get("workload") or {}).get("reduce_gbps")
            where = (f"reductions on the {'NPU' if c['engine'] == 'npu' else 'offload engine'}"
                     if c["engine"] else f"reductions at {rgbps:g} GB/s" if rgbps
                     else "reductions take no time")
            rows += [("collective", f"{c['collective']} / {c['algorithm']}, {c['bytes']} bytes "
                                    f"per node, {len(c['participants'])} participants, "
                                    f"{c['chunks']} chunks, {where}"),
                     ("ring order", " ".join(c["order"])),
                     ("time", f"{c['collective_cycles']} cycles"),
                     ("bandwidth", f"algbw {c['algbw_gbps']:.2f} GB/s, busbw "
                                   f"{c['busbw_gbps']:.2f} GB/s (nccl-tests conventions)")]
            per = c.get("per_npu") or {}
            if per and c.get("engine"):
                ratio = sum(v["hbm_bytes"] for v in per.values()) / max(
                    1, sum(v["network_bytes"] for v in per.values()))
                rows.append(("HBM per network byte", f"{ratio:.2f} (all NPUs)"))
                for n, v in list(per.items())[:8]:
                    rows.append((f"  {n}",
                                 f"HBM {v['hbm_bytes']} B, "
                                 f"{v['hbm_bytes_per_network_byte']:.2f} per network byte, "
                                 f"{v['network_gbps']:.1f} GB/s sent, compute slowed "
                                 f"{v['compute_slowdown_cycles']} cycles"))
        rows += [("network model", MODEL_TEXT.get(self.network_model, self.network_model)),
                 ("makespan", f"{self.makespan_cycles} cycles"),
                ("ops", f"{len(self.ops)} (" + ", ".join(
                    f"{k} {v}" for k, v in sorted(self._count().items())) + ")"),
                ("packets", f"{self.packets}, avg latency "
                            + (f"{self.avg_packet_latency:.1f}" if self.packets and
                               self.avg_packet_latency == self.avg_packet_latency else "n/a")
                            + " cycles" + (" (flows: packets not simulated)"
                                           if self.network_model == "flow" else "")),
                ("compute busy", ", ".join(f"{n} {100 * b / max(self.makespan_cycles, 1):.0f}%"
                                           for n, b in sorted(busy.items())[:8]) or "none"),
                ("link utilisation", self._link_line())]
        rows += memory_rows(self.memory)
        rows += [("note", n) for n in self.notes]
        rows += [("speed", f"{self.cycles_per_second:,.0f} cycles/s, {self.wall_seconds:.2f} s "
                          f"wall"),
                 ("wall time", self._profile_line()),
                 ("seed / version", f"{self.seed} / pysim {self.version}")]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)

    def _profile_line(self):
        p = self.profile
        if not p:
            return "not measured"
        return (f"network {p['network_seconds']:.2f} s, compile {p['compile_seconds']:.2f} s "
                f"({p['graph_ops']:,} ops into {p['engine_ops']:,} engine ops), engine set-up "
                f"{p['engine_setup_seconds']:.2f} s, engine {p['engine_seconds']:.2f} s "
                + (f"({p['events']:,} events, {p['solver_seconds']:.2f} s of it in the max-min "
                   f"solver)" if "events" in p else
                   f"({p['event_cycles']:,} cycles stepped)")
                + f", results {p['results_seconds']:.2f} s")

    def _link_line(self):
        used = np.flatnonzero(link_column(self.links, "flits"))
        if not used.size:
            return "no router-to-router link used"
        util = link_column(self.links, "utilisation")[used].tolist()
        top = self.links[int(used[util.index(max(util))])]
        mean = sum(util) / len(util)
        return (f"max {top['utilisation']:.3f} ({top['src']}->{top['dst']}), mean {mean:.3f} "
                f"over the {used.size} of {len(self.links)} channels used (whole run)")

    def _count(self):
        if isinstance(self.ops, OpTable):
            c = {}
            for k, v in Counter(self.ops.code[:self.ops.n]).items():
                c[KIND_OF[k]] = c.get(KIND_OF[k], 0) + v
            return c
        c = {}
        for op in self.ops:
            c[op["kind"]] = c.get(op["kind"], 0) + 1
        return c
