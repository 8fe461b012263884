"""Op-graph files (`[workload] kind = "graph"`, `file = "ops.toml"`): an array `[[ops]]` of
tables with `name` (optional, unique), `kind` (compute, send, delay, reduce, mem_write,
mem_read), `node` and `cycles` (compute), `src`, `dst` and `bytes` (send), `cycles` (delay),
`npu`, `mem` and `bytes` (mem_write, mem_read; a mem_write's `free_after` names the op whose
finish frees its space), and `after` (names of dependencies)."""
from __future__ import annotations

from pysim.config import read_toml
from pysim.errors import GraphError
from pysim.schema import suggest


def read_ops(path, g):
    """Add the ops of an op-graph TOML file ([[ops]]) to the empty graph g
    (`pysim.workload.graph.OpGraph`); return g."""
    raw = read_toml(path, "workload.file", GraphError)
    for key in raw:
        if key != "ops":
            raise GraphError(f"{path}: unknown table or key {key!r}{suggest(key, ['ops'])}; "
                             f"an op-graph file holds [[ops]] only")
    ops = raw.get("ops")
    if ops == []:
        raise GraphError(f"{path}: no ops; expected at least one [[ops]] table")
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise GraphError(f"{path}: expected an array of tables [[ops]]")
    fields = {"compute": {"node"}, "send": {"src", "dst", "bytes"},
              "delay": {"cycles"}, "reduce": {"node", "bytes"},
              "mem_write": {"npu", "mem", "bytes"},
              "mem_read": {"npu", "mem", "bytes"}}
    optional = {"compute": {"cycles", "flops", "bytes"}, "reduce": {"engine"},
                "mem_write": {"free_after"}}
    frees = []
    for i, op in enumerate(ops):
        where = f"{path}: ops[{i}]"
        kind = op.get("kind")
        if not isinstance(kind, str) or kind not in fields:
            raise GraphError(f"{where}.kind = {kind!r}: expected compute, send, delay, "
                             f"reduce, mem_write or mem_read")
        takes = fields[kind] | optional.get(kind, set()) | {"name", "after"}
        extra = set(op) - takes - {"kind"}
        if extra:
            raise GraphError(f"{where}: unknown field(s) {', '.join(sorted(extra))} for a "
                             f"{kind} op (it takes {', '.join(sorted(takes))})")
        missing = fields[kind] - set(op)
        if missing:
            raise GraphError(f"{where}: a {kind} op needs {', '.join(sorted(missing))}")
        try:
            if kind == "compute":
                g.compute(op["node"], op.get("cycles"), op.get("after"), op.get("name"),
                          flops=op.get("flops"), bytes=op.get("bytes"))
            elif kind == "send":
                g.send(op["src"], op["dst"], op["bytes"], op.get("after"), op.get("name"))
            elif kind == "reduce":
                g.reduce(op["node"], op["bytes"], op.get("engine", "npu"), op.get("after"),
                         op.get("name"))
            elif kind == "mem_write":
                w = g.mem_write(op["npu"], op["mem"], op["bytes"], op.get("after"),
                                op.get("name"))
                if "free_after" in op:
                    frees.append((where, w, op["free_after"]))
            elif kind == "mem_read":
                g.mem_read(op["npu"], op["mem"], op["bytes"], op.get("after"), op.get("name"))
            else:
                g.delay(op["cycles"], op.get("after"), op.get("name"))
        except GraphError as e:
            raise GraphError(f"{where}: {e}") from None
    for where, w, name in frees:          # the freeing op may come later in the file
        if not isinstance(name, str) or name not in g._by_name:
            raise GraphError(f"{where}.free_after = {name!r}: expected the name of an op")
        g.free(g.space(w), g._by_name[name])
    return g
