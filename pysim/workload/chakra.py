"""Chakra execution traces (MLCommons; the workload format of ASTRA-sim 2.0), read and written.

A trace is a folder of files, one per rank, `<prefix>.<rank>.et`: each a sequence of
protobuf messages, each preceded by its length as a varint -- first a GlobalMetadata (the
schema's version), then the rank's Nodes. A Node has an id, a name, a type (computation,
memory load or store, send, receive, collective), the ids of the nodes of its rank it waits
for (data and control dependencies) and named attributes (num_ops, tensor_size, comm_type,
comm_size, comm_src, comm_dst, comm_tag, ...).

The schema is built here from Chakra's specification (its et_def.proto, version SCHEMA_VERSION)
as a protobuf FileDescriptorProto: the `protobuf` package is the only dependency (the
optional extra `pip install 'pysim[chakra]'`). A trace of another version is refused,
naming it.

pysim -> Chakra (`write`, `pysim run --export-chakra DIR`): every op graph. A rank is each
NPU or host with ops, in topology order. A compute op is a COMP_NODE (its cycles, or its FLOPs
as num_ops and bytes as tensor_size), HBM traffic a MEM_LOAD_NODE, a reduction a COMP_NODE,
a send a COMM_SEND_NODE on its source's rank and a COMM_RECV_NODE on its destination's (one
comm_tag for the pair), a delay a COMP_NODE copied onto each rank that waits for it, the
compute units an NPU-run collective takes and frees a COMP_NODE of pysim's own kind. An op
that waits for an op of another rank other than through a message cannot be expressed (ranks
meet only by messages) and is refused, naming it. pysim's own attributes (pysim_kind,
pysim_cycles, pysim_peak; pysim_stream on the ops of a collective's steps, which may run as
streams: OpGraph.allow_streams) make the trace read back into the same graph, so that it
runs to the same cycle.

Chakra -> pysim (`read`; `workload.kind = "training"` with `workload.model = DIR`): a send and
its receive are one message, which waits for both nodes' dependencies; a COMP_NODE takes
pysim_cycles, else num_ops FLOPs (and tensor_size bytes) on the NPU's roofline, else its
duration_micros; memory nodes move tensor_size bytes through HBM; the k-th COMM_COLL_NODE of
every rank is one collective of comm_size bytes over all ranks, by `workload.algorithm`.
"""
from __future__ import annotations

import contextlib
import functools
import glob
import os
import re

from pysim._io import OutputError, check_output, read_bounded
from pysim.errors import ConfigError
from pysim.schema import short
from pysim.topology import build as build_topology
from pysim.workload import collectives
from pysim.workload.graph import OpGraph, run_graph

SCHEMA_VERSION = "0.0.4"
NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",
              "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE", "STORAGE_NODE",
              "BATCH_NODE", "CHECKPOINT_NODE")
COLL_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
              "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
PYSIM_COLL = {0: "all_reduce", 1: "reduce", 2: "all_gather", 5: "broadcast", 6: "all_to_all",
              7: "reduce_scatter"}
MAX_TRACE_BYTES = 1 << 30        # one rank's file
# attribute name -> the AttributeProto field that carries it
ATTR_FIELD = {"num_ops": "int64_val", "tensor_size": "uint64_val", "comm_type": "int64_val",
              "comm_size": "int64_val", "comm_src": "int32_val", "comm_dst": "int32_val",
              "comm_tag": "int64_val", "is_cpu_op": "bool_val", "pysim_kind": "string_val",
              "pysim_cycles": "int64_val", "pysim_peak": "double_val",
              "pysim_node": "string_val", "pysim_units": "int64_val",
              "pysim_stream": "bool_val"}


@functools.lru_cache(maxsize=1)
def schema():
    """The message classes (GlobalMetadata, Node, AttributeProto), built from a
    FileDescriptorProto written here after Chakra's et_def.proto."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise ConfigError("Chakra traces need the protobuf package: pip install "
                          "'pysim[chakra]' (or pip install protobuf)") from None
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="pysim_chakra_et_def.proto",
                                            package="ChakraProtoMsg", syntax="proto3")

    def message(name, fields, oneof=None):
        m = fd.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for num, fname, ftype, label, type_name, in_oneof in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
            if in_oneof:
                f.oneof_index = 0
        return m

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("Int64List", [(1, "values", F.TYPE_INT64, rep, None, False)])
    message("AttributeProto", [
        (1, "name", F.TYPE_STRING, opt, None, False),
        (2, "doc_string", F.TYPE_STRING, opt, None, False),
        (3, "double_val", F.TYPE_DOUBLE, opt, None, True),
        (7, "int32_val", F.TYPE_INT32, opt, None, True),
        (9, "int64_val", F.TYPE_INT64, opt, None, True),
        (10, "int64_list", F.TYPE_MESSAGE, opt, ".ChakraProtoMsg.Int64List", True),
        (11, "uint32_val", F.TYPE_UINT32, opt, None, True),
        (13, "uint64_val", F.TYPE_UINT64, opt, None, True),
        (27, "bool_val", F.TYPE_BOOL, opt, None, True),
        (29, "string_val", F.TYPE_STRING, opt, None, True)], oneof="value")
    message("GlobalMetadata", [
        (1, "version", F.TYPE_STRING, opt, None, False),
        (2, "attr", F.TYPE_MESSAGE, rep, ".ChakraProtoMsg.AttributeProto", False)])
    for ename, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLL_TYPES)):
        e = fd.enum_type.add(name=ename)
        for i, v in enumerate(values):
            e.value.add(name=v, number=i)
    message("Node", [
        (1, "id", F.TYPE_UINT64, opt, None, False),
        (2, "name", F.TYPE_STRING, opt, None, False),
        (3, "type", F.TYPE_ENUM, opt, ".ChakraProtoMsg.NodeType", False),
        (4, "ctrl_deps", F.TYPE_UINT64, rep, None, False),
        (5, "data_deps", F.TYPE_UINT64, rep, None, False),
        (6, "start_time_micros", F.TYPE_UINT64, opt, None, False),
        (7, "duration_micros", F.TYPE_UINT64, opt, None, False),
        (10, "attr", F.TYPE_MESSAGE, rep, ".ChakraProtoMsg.AttributeProto", False)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:                                      # protobuf < 4.21
        factory = message_factory.MessageFactory(pool)
        get = factory.GetPrototype
    return {n: get(pool.FindMessageTypeByName(f"ChakraProtoMsg.{n}"))
            for n in ("GlobalMetadata", "Node", "AttributeProto")}


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _messages(data, where):
    """The length-delimited messages of a file's bytes."""
    i, n = 0, len(data)
    while i < n:
        size, shift = 0, 0
        while True:
            if i >= n or shift > 63:
                raise ConfigError(f"{where}: a message's length is cut off or malformed "
                                  f"(at byte {i:,}): not a Chakra trace")
            b = data[i]
            i += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if i + size > n:
            raise ConfigError(f"{where}: a message of {size:,} bytes at byte {i:,} runs past the "
                              f"end of the file ({n:,} bytes): not a Chakra trace, or cut off")
        yield data[i:i + size]
        i += size


def _attr(node, name, value):
    a = node.attr.add(name=name)
    setattr(a, ATTR_FIELD[name], value)


def _attrs(node):
    out = {}
    for a in node.attr:
        which = a.WhichOneof("value")
        if which is not None:
            out[a.name] = getattr(a, which)
    return out


# ------------------------------------------------------------------ writing

def write(graph, topo, folder, clock_ghz=1.0, prefix="pysim"):
    """Write op graph `graph` (on topology `topo`) as a Chakra trace: one file per rank in
    `folder` (created if missing). Returns the files' paths."""
    S = schema()
    names = topo.node_names
    kinds = dict(zip(names, topo.node_kinds))
    ranks = [n for n, k in zip(names, topo.node_kinds) if k in ("npu", "host")]
    used = set(graph.node[i] for i in range(len(graph)) if graph.node[i] is not None)
    used |= set(graph.dst[i] for i in range(len(graph)) if graph.kind[i] == "send")
    ranks = [n for n in ranks if n in used]
    rank_of = {n: r for r, n in enumerate(ranks)}
    nodes = [[] for _ in ranks]               # per rank: Node messages
    mine = {}                                 # (op, rank) -> node id on that rank
    streams = graph.stream_mask()             # ops whose steps may stream

    def label(i):
        return graph.label(i)

    def new(r, i, ntype, name):
        nd = S["Node"](id=len(nodes[r]), name=name, type=NODE_TYPES.index(ntype))
        nodes[r].append(nd)
        return nd

    def dep(j, r, i):
        """The node of rank r that stands for op j, for op i of rank r."""
        if (j, r) in mine:
            return mine[(j, r)]
        if graph.kind[j] == "delay":
            return copy_delay(j, r)
        where = names_of(j)
        raise ConfigError(f"--export-chakra: op {label(i)} (on {ranks[r]}) waits for op "
                          f"{label(j)} (on {where}) other than through a message; a Chakra "
                          f"trace's ranks meet only by messages")

    def names_of(j):
        if graph.kind[j] == "send":
            return f"{graph.node[j]} -> {graph.dst[j]}"
        return graph.node[j] or "no node"

    def copy_delay(j, r):
        stack = [j]
        while stack:                   # copies of the delays it waits for first
            k = stack[-1]
            todo = [d for d in graph.after[k] if graph.kind[d] == "delay" and (d, r) not in mine]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if (k, r) in mine:
                continue
            nd = new(r, k, "COMP_NODE", label(k))
            nd.ctrl_deps.extend(dep(d, r, k) for d in graph.after[k])
            nd.duration_micros = int(round(graph.size[k] / (clock_ghz * 1e3)))
            _attr(nd, "pysim_kind", "delay")
            _attr(nd, "pysim_cycles", int(graph.size[k]))
            mine[(k, r)] = nd.id
        return mine[(j, r)]

    for i in range(len(graph)):
        k = graph.kind[i]
        if k == "delay":
            continue                           # (copied onto the ranks that wait for it)
        if k not in ("compute", "send", "memory", "reduce_npu", "reduce_offload", "take_units",
                     "free_units"):
            raise ConfigError(f"--export-chakra: op {label(i)} is a {k!r} op, which a Chakra "
                              f"trace does not express (compute, send, memory, reduce and "
                              f"delay ops do)")
        n = graph.node[i]
        if n not in rank_of:
            raise ConfigError(f"--export-chakra: op {label(i)} runs on {n!r} "
                              f"({kinds.get(n, '?')}), not on an NPU or host")
        r = rank_of[n]
        deps = [dep(j, r, i) for j in graph.after[i]]
        if k == "send":
            if graph.dst[i] not in rank_of:
                raise ConfigError(f"--export-chakra: op {label(i)} sends to {graph.dst[i]!r}, "
                                  f"not an NPU or host")
            d = rank_of[graph.dst[i]]
            nd = new(r, i, "COMM_SEND_NODE", label(i))
            nd.ctrl_deps.extend(deps)
            for a, v in (("comm_src", r), ("comm_dst", d), ("comm_size", int(graph.size[i])),
                         ("comm_tag", i)):
                _attr(nd, a, v)
            mine[(i, r)] = nd.id
            rv = new(d, i, "COMM_RECV_NODE", label(i) + ":recv")
            for a, v in (("comm_src", r), ("comm_dst", d), ("comm_size", int(graph.size[i])),
                         ("comm_tag", i)):
                _attr(rv, a, v)
            if streams[i]:
                _attr(nd, "pysim_stream", True)
            mine[(i, d)] = rv.id
            continue
        if k == "memory":
            nd = new(r, i, "MEM_LOAD_NODE", label(i))
            _attr(nd, "tensor_size", int(graph.size[i]))
        else:
            nd = new(r, i, "COMP_NODE", label(i))
            _attr(nd, "pysim_kind", k)
            work = graph.work[i]
            if k in ("take_units", "free_units"):      # compute units a collective holds
                _attr(nd, "pysim_units", int(graph.size[i]))
            elif k != "compute":
                _attr(nd, "tensor_size", int(graph.size[i]))
            elif work is None:
                _attr(nd, "pysim_cycles", int(graph.size[i]))
                nd.duration_micros = int(round(graph.size[i] / (clock_ghz * 1e3)))
            else:
                flops, nbytes, peak = work
                _attr(nd, "num_ops", int(round(flops)))
                _attr(nd, "tensor_size", int(nbytes))
                if peak is not None:
                    _attr(nd, "pysim_peak", float(peak))
        if streams[i]:
            _attr(nd, "pysim_stream", True)
        nd.ctrl_deps.extend(deps)
        mine[(i, r)] = nd.id
    # a delay nothing waits for still ends somewhere: on the rank of what it waits for
    copied = {j for j, _ in mine}
    for i in range(len(graph)):
        if graph.kind[i] == "delay" and i not in copied and ranks:
            r = next((r for j in graph.after[i] for (k, r) in [(j, rank_of.get(
                graph.node[j] if graph.kind[j] != "send" else graph.dst[j]))]
                if r is not None), 0)
            copy_delay(i, r)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for r, rn in enumerate(ranks):
        meta = S["GlobalMetadata"](version=SCHEMA_VERSION)
        _attr(meta, "pysim_node", rn)
        chunks = [meta.SerializeToString()] + [nd.SerializeToString() for nd in nodes[r]]
        path = os.path.join(folder, f"{prefix}.{r}.et")
        with open(path, "wb") as f:
            for c in chunks:
                f.write(_varint(len(c)))
                f.write(c)
        paths.append(path)
    for p in glob.glob(os.path.join(glob.escape(folder), f"{glob.escape(prefix)}.*.et")):
        if p not in paths and re.fullmatch(r"\d+", os.path.basename(p)[len(prefix) + 1:-3]):
            os.unlink(p)                       # a rank of an earlier, larger trace
    return paths


def check_exportable(cfg):
    """Checked before a run: refuse a configuration whose op graph a Chakra trace cannot hold,
    naming the key (a trace's ranks meet only by messages): a training plan that builds one
    data-parallel replica (workload.parallel.replicas = 'one') has the other replicas' parts
    of its collectives wait on replica 0's ops."""
    w = cfg.workload
    par = w.parallel or {}
    if w.kind == "training" and par.get("replicas") == "one":
        raise ConfigError("--export-chakra: workload.parallel.replicas = 'one' builds "
                          "data-parallel replica 0's passes only, and the other replicas' "
                          "parts of its collectives wait on replica 0's ops, which a Chakra "
                          "trace (its ranks meet only by messages) cannot hold; expected "
                          "replicas = 'all' (the default)")


def check_folder(folder, force=False):
    """Checked before a run: raise OutputError if `write` could not put a trace in `folder`
    (made if missing), or, unless `force`, if the folder holds .et files already."""
    folder = os.fspath(folder)
    if os.path.isdir(folder):
        old = sorted(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(folder),
                                                                          "*.et")))
        if old and not force:
            shown = ", ".join(old[:3]) + (f", ... ({len(old)} in all)" if len(old) > 3 else "")
            raise OutputError(f"{folder} holds trace files already ({shown}); pass --force "
                              f"to write over them")
        check_output(os.path.join(folder, "pysim.0.et"), force=True)
        return
    up = os.path.abspath(folder)
    while not os.path.lexists(up):
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise OutputError(f"cannot make the folder {folder}: {up} is not a directory")
    check_output(os.path.join(up, "pysim.0.et"), force=True)      # (a folder can be made)
    try:
        most = os.pathconf(up, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        most = 255
    made = os.path.relpath(os.path.abspath(folder), up).split(os.sep)
    for name in made:                    # (each folder to make: a name the system takes)
        if len(os.fsencode(name)) > most:
            raise OutputError(f"cannot make the folder {folder}: the name {short(name)} has "
                              f"{len(os.fsencode(name))} bytes; the file system holding {up} "
                              f"takes at most {most}")


# ------------------------------------------------------------------ reading

def trace_files(folder):
    """The per-rank files of a trace folder, in rank order (`<prefix>.<rank>.et`)."""
    found = {}
    for p in glob.glob(os.path.join(folder, "*.et")):
        m = re.fullmatch(r"(.*)\.(\d+)\.et", os.path.basename(p))
        if m:
            found.setdefault(m.group(1), {})[int(m.group(2))] = p
    if not found:
        raise ConfigError(f"{folder}: no Chakra trace files (<prefix>.<rank>.et)")
    if len(found) > 1:
        raise ConfigError(f"{folder}: traces of several prefixes ({', '.join(sorted(found))}); "
                          f"expected one")
    files = next(iter(found.values()))
    ranks = sorted(files)
    if ranks != list(range(len(ranks))):
        missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
        raise ConfigError(f"{folder}: ranks {missing[:5]} have no file (expected ranks 0 to "
                          f"{max(ranks)})")
    return [files[r] for r in ranks]


def load_nodes(path):
    """(metadata attributes, [Node]) of one rank's file; a version other than SCHEMA_VERSION
    is refused."""
    S = schema()
    try:
        data = read_bounded(path, MAX_TRACE_BYTES)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from None
    msgs = _messages(data, path)
    first = next(msgs, None)
    if first is None:
        raise ConfigError(f"{path}: empty; a Chakra trace begins with its GlobalMetadata")
    from google.protobuf.message import DecodeError
    try:
        meta = S["GlobalMetadata"].FromString(first)
        if meta.version != SCHEMA_VERSION:
            raise ConfigError(f"{path}: Chakra schema version {meta.version!r}; pysim reads "
                              f"version {SCHEMA_VERSION!r}")
        nodes = [S["Node"].FromString(m) for m in msgs]
    except DecodeError as e:
        raise ConfigError(f"{path}: not a Chakra trace ({e})") from None
    return _attrs(meta), nodes


def read(folder, topo, graph, cfg, collective_builder=None):
    """Add the trace in `folder` to op graph `graph`: rank r runs on the r-th NPU of `topo`.
    collective_builder(collective, order, nbytes, after, done): adds a collective (for
    COMM_COLL_NODE). Returns the graph."""
    files = trace_files(folder)
    npus = [n for n, k in zip(topo.node_names, topo.node_kinds) if k == "npu"]
    hosts = [n for n, k in zip(topo.node_names, topo.node_kinds) if k == "host"]
    per_rank = [load_nodes(p) for p in files]
    # a rank runs on the node its metadata names (pysim's own traces), else on the r-th NPU
    where = []
    for r, (meta, _) in enumerate(per_rank):
        named = meta.get("pysim_node")
        if named is not None and named in topo.node_names:
            where.append(named)
        elif r < len(npus):
            where.append(npus[r])
        else:
            raise ConfigError(f"{folder}: {len(files)} ranks, and {topo.name} has "
                              f"{len(npus)} NPUs ({len(hosts)} hosts)")
    clock = cfg.network.clock_ghz
    done = {}                                  # (rank, node id) -> op id
    pending = {}                               # (src, dst, tag) -> [send side, recv side]
    colls = {}                                 # k -> {rank: node}
    index = [{nd.id: nd for nd in nodes} for _, nodes in per_rank]
    for r, (_, nodes) in enumerate(per_rank):
        if len(index[r]) < len(nodes):
            ids = [nd.id for nd in nodes]
            twice = next(i for i in ids if ids.count(i) > 1)
            raise ConfigError(f"{files[r]}: node id {twice} is given to {ids.count(twice)} "
                              f"nodes; a rank's node ids are its nodes' names for their "
                              f"dependencies")
    order = [[nd.id for nd in nodes] for _, nodes in per_rank]
    pos = [0] * len(files)
    coll_count = [0] * len(files)
    progress = True
    while progress:
        progress = False
        for r in range(len(files)):
            while pos[r] < len(order[r]):
                nd = index[r][order[r][pos[r]]]
                deps = list(nd.ctrl_deps) + list(nd.data_deps)
                for d in deps:
                    if d not in index[r]:
                        raise ConfigError(f"{files[r]}: node {nd.id} depends on node {d}, "
                                          f"which the rank does not have")
                if any((r, d) not in done for d in deps):
                    break
                after = [done[(r, d)] for d in deps]
                t = NODE_TYPES[nd.type] if nd.type < len(NODE_TYPES) else str(nd.type)
                a = _attrs(nd)
                if t in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                    key = (a.get("comm_src"), a.get("comm_dst"), a.get("comm_tag"))
                    if None in key or "comm_size" not in a:
                        raise ConfigError(f"{files[r]}: node {nd.id} ({t}) lacks comm_src, "
                                          f"comm_dst, comm_tag or comm_size")
                    side = pending.setdefault(key, [None, None, int(a["comm_size"]), nd.name,
                                                    False])
                    side[0 if t == "COMM_SEND_NODE" else 1] = (r, nd.id, after)
                    side[4] = side[4] or bool(a.get("pysim_stream"))
                    if side[0] is not None and side[1] is not None:
                        (sr, sid, s_after), (dr, did, d_after) = side[0], side[1]
                        with _node(files[r], nd, t):
                            op = graph.send(where[sr], where[dr], side[2],
                                            after=s_after + d_after)
                        if side[4]:
                            graph.allow_streams(op, op + 1)
                        done[(sr, sid)] = done[(dr, did)] = op
                        del pending[key]
                    pos[r] += 1
                    progress = True
                    continue
                if t == "COMM_COLL_NODE":
                    k = coll_count[r]
                    coll_count[r] += 1
                    colls.setdefault(k, {})[r] = (nd, after)
                    pos[r] += 1
                    progress = True
                    if len(colls[k]) == len(files):
                        with _node(files[r], nd, t):
                            _collective(colls.pop(k), where, graph, collective_builder,
                                        done, files)
                    continue
                with _node(files[r], nd, t):
                    op = done[(r, nd.id)] = _local_op(graph, t, a, nd, where[r], after,
                                                      clock, files[r])
                if a.get("pysim_stream"):
                    graph.allow_streams(op, len(graph))
                pos[r] += 1
                progress = True
    stuck = [(r, order[r][pos[r]]) for r in range(len(files)) if pos[r] < len(order[r])]
    stuck += [(v[0] or v[1])[:2] for v in pending.values()]
    stuck += [(r, m[0].id) for c in colls.values() for r, m in c.items()]
    if stuck:
        r, nid = stuck[0]
        raise ConfigError(f"{files[r]}: node {nid} can never run (a message without its "
                          f"other side, a collective not on every rank, or a dependency "
                          f"cycle)")
    return graph


@contextlib.contextmanager
def _node(path, nd, t):
    """A value of node `nd` that the op graph refuses is named with the node and its file."""
    try:
        yield
    except ConfigError as e:
        if str(e).startswith(f"{path}:"):
            raise
        raise ConfigError(f"{path}: node {nd.id} ({t}): {e}") from None


def _local_op(graph, t, a, nd, node, after, clock, path):
    kind = a.get("pysim_kind")
    if kind == "delay":
        return graph.delay(int(a["pysim_cycles"]), after=after)
    if kind in ("take_units", "free_units"):
        return getattr(graph, kind)(node, int(a["pysim_units"]), after=after)
    if kind in ("reduce_npu", "reduce_offload"):
        return graph.reduce(node, int(a.get("tensor_size", 0)), kind[len("reduce_"):],
                            after=after)
    if t == "COMP_NODE":
        if "pysim_cycles" in a:
            return graph.compute(node, int(a["pysim_cycles"]), after=after)
        if a.get("num_ops", 0) > 0 or a.get("tensor_size", 0) > 0:
            return graph.compute(node, flops=int(a.get("num_ops", 0)),
                                 bytes=int(a.get("tensor_size", 0)),
                                 peak_flops=a.get("pysim_peak"), after=after)
        return graph.compute(node, int(round(nd.duration_micros * clock * 1e3)), after=after)
    if t in ("MEM_LOAD_NODE", "MEM_STORE_NODE"):
        return graph.memory(node, int(a.get("tensor_size", 0)), after=after)
    if t == "METADATA_NODE":
        return graph.delay(0, after=after)
    raise ConfigError(f"{path}: node {nd.id} is a {t}, which pysim does not run (it runs "
                      f"computation, memory, send, receive and collective nodes)")


def _collective(members, where, graph, builder, done, files):
    first = members[0][0]
    a = _attrs(first)
    ctype = int(a.get("comm_type", 0))
    if ctype not in PYSIM_COLL:
        what = COLL_TYPES[ctype] if 0 <= ctype < len(COLL_TYPES) else ctype
        raise ConfigError(f"{files[0]}: node {first.id}: collective {what} is not one pysim "
                          f"runs ({', '.join(COLL_TYPES[c] for c in PYSIM_COLL)})")
    if builder is None:
        raise ConfigError(f"{files[0]}: collective nodes need a collective builder")
    order = [where[r] for r in sorted(members)]
    after = {where[r]: members[r][1] for r in members}
    fin = {}
    builder(PYSIM_COLL[ctype], order, int(a.get("comm_size", 0)), after, fin)
    for r, (nd, _) in members.items():
        done[(r, nd.id)] = fin[where[r]]


def trace_folder(cfg):
    """The folder workload.model names, if it is one (relative to the config, else to the
    current directory: a name typed on the command line), else None."""
    m = cfg.workload.model
    if not isinstance(m, str) or not m:
        return None
    for path in ((m,) if os.path.isabs(m) else (os.path.join(cfg.base_dir, m),
                                                 os.path.abspath(m))):
        if os.path.isdir(path):
            return path
    return None


def is_trace(cfg):
    return trace_folder(cfg) is not None


def run_trace(cfg, progress=None):
    """Run the Chakra trace of workload.model's folder on the configured system: each rank on
    an NPU (the one it names, for pysim's own traces), its collectives by
    workload.algorithm."""
    topo = build_topology(cfg)
    w = cfg.workload
    args = collectives.nccl_args(cfg, topo)

    def coll(collective, order, nbytes, after, done):
        collectives.build(collective, w.algorithm, order, nbytes, w.chunks, graph=g,
                          after=after, done=done, **args)
    g = OpGraph()
    try:
        read(trace_folder(cfg), topo, g, cfg, coll)
    except ConfigError as e:             # (named by the key that chose the folder)
        raise ConfigError(f"workload.model = {cfg.workload.model!r} (a folder of Chakra "
                          f"traces): {e}") from None
    return run_graph(cfg, g, progress=progress, topo=topo)
