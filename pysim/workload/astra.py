"""ASTRA-sim 1.0 text workloads run as training iterations, with ASTRA-sim's own rules.

A model read from an ASTRA-sim workload file (pysim.models.astra: layers with given compute
cycles and collectives) runs as ASTRA-sim 1.0 runs it (its workload/Workload.cc,
workload/Layer.cc and system/Sys.cc, branch ASTRA-sim-1.0), on every NPU used, in lockstep.

**The system layer** (`_System`): the NPUs are laid out in ASTRA-sim's logical dimensions: a
torus or mesh by its `dims` (dimension 0 innermost), any other topology as one dimension in
ring order; a model-parallel group that does not fill whole dimensions splits the dimension
it ends in, as ASTRA-sim does (a HYBRID_TRANSFORMER group of 4 on a ring of 8: dimensions of
4 and 2). A collective of `size` bytes is cut into chunks of `size // workload.chunks` bytes
(the last one smaller if the size does not divide; ASTRA-sim's preferred-dataset-splits).
Each chunk runs as phases, one per dimension involved (of more than one NPU): an all-reduce
reduce-scatters along the dimensions in order, all-reduces along the last and all-gathers
back (`workload.astra_collective_optimization = "localBWAware"`, or an all-reduce per
dimension with "baseline"); an all-gather runs its dimensions last to first; the others
(reduce-scatter, all-to-all) first to last. A phase on a dimension runs ASTRA-sim's ring
algorithm on every ring of that dimension at once: in step after step each NPU sends its
ring neighbour a message (an all-reduce of d bytes over k NPUs: 2(k - 1) steps of d/k; a
reduce-scatter k - 1 steps of d/k; an all-gather k - 1 steps of d; an all-to-all
k(k - 1)/2 steps of d/k) and sends the next when it has received the previous one. Each
message costs its sender and its receiver ASTRA-sim's endpoint delay
(`workload.astra_endpoint_delay` cycles, the NPU-to-memory transfer of its shared-bus model
switched off, as in its sample systems): a phase takes e + steps x (message + e) when
messages take the same time. A reduced message also costs ASTRA-sim's reduction through its
NPU memory (3 x floor(bytes / 500,000) cycles: a write and two reads at 500,000 GB/s, the
analytical backend's memory), a delay on no unit: the NPU's compute unit is not used, so a
collective never queues behind compute. With `workload.algorithm = "bidir_ring"` each
message is halved, one half each way round the ring (ASTRA-sim's analytical ring gives a
message the bandwidth of all the dimension's links, both directions); with "ring" it goes
one way. Each dimension is a queue that runs one chunk at a time (ASTRA-sim's
active-chunks-per-dimension = 1: a gate in the compiled core): a chunk waits for its
dimension, and among waiting chunks the collective issued last goes first
(`workload.astra_scheduling = "LIFO"`, ASTRA-sim's default) or first ("FIFO"), a
collective's own chunks in order; some collectives take a priority of their own as the
workload loops below say. A collective is done when its last chunk is, and its layer's
update delay after that (a delay, not compute).

**The workload loops** (each compute step is the layer's cycles on the NPU's compute unit;
each step of ASTRA-sim's loop ends with its one-cycle event to the next):

- DATA: the forward pass runs the layers in order, a layer waiting for its own weight-
  gradient collective of the previous pass; the backward pass from the last layer down: the
  weight-gradient cycles, the weight-gradient all-reduce issued without waiting, then the
  input-gradient cycles (the first layer has none); only weight-gradient collectives run, on
  every dimension.
- HYBRID_TRANSFORMER (a model-parallel group of `model_parallel_NPU_group` NPUs, the
  innermost dimensions), MODEL (model parallel on every dimension), HYBRID_DATA_MODEL (model
  parallel on dimension 0, data parallel on the others), HYBRID_MODEL_DATA (the reverse) and
  HYBRID_CUSTOMIZED (each layer its own of DATA, MODEL, HYBRID_DATA_MODEL and
  HYBRID_MODEL_DATA): forward and input-gradient collectives on the model-parallel
  dimensions, weight-gradient ones on the data-parallel ones; the forward pass waits for each
  layer's forward collective; the backward pass runs, from the last layer down, the
  input-gradient cycles and its collective (LIFO, not waited for; none for the first layer
  but under HYBRID_TRANSFORMER), then the weight-gradient cycles and its collective (FIFO
  priority), then waits for the layer's input-gradient collective.
- HYBRID_DLRM (the layer index of the last bottom-MLP layer in the header): layer 0 (the
  embeddings) communicates on every dimension, forward and input gradient, ahead of every
  other collective; the others are data parallel. The forward pass issues layer 0's
  all-to-all without waiting and waits for it at the last bottom-MLP layer; the backward pass
  as DATA's, layer 0's input-gradient all-to-all issued after the input gradient of the
  first top-MLP layer, and each layer's weight-gradient step waiting for its input-gradient
  collective (HYBRID_DLRM_ENHANCED: not waiting).
- DISTRIBUTED_INFERENCE: forward passes only, each layer's forward collective on every
  dimension, waited for.
- MICRO: the weight-gradient collective of the first layer, once per iteration, all issued
  at once.

- HYBRID_TRANSFORMER_FWD_IN_BCKWD (its header names checkpoint layers and layers initiating
  recomputation): the transformer's loop, but the input-gradient step of a layer initiating
  recomputation first runs the forward pass again (each layer's forward cycles and
  collective, waited for) from the checkpoint at or below it up to the next layer initiating
  one.

The run ends when every pass and every collective (and its update delay) has finished. With
`workload.engine` set, the reductions run on pysim's endpoint models instead ('npu': the
NPU's cores through HBM, its traffic shared with compute's; 'offload': the collectives
engine's own unit), after which the endpoint delay still applies.
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.schema import Key, declare
from pysim.workload import collectives as coll
from pysim.workload import graph as graph_module
from pysim.workload.graph import GraphError, OpGraph
from pysim.workload.plan import CollectiveOps, LayerOps, Plan

COMM = {"ALLREDUCE": "all_reduce", "ALLTOALL": "all_to_all", "ALLGATHER": "all_gather",
        "REDUCESCATTER": "reduce_scatter"}
SUPPORTED = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER",
             "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED",
             "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE")
LAYERWISE = ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "MODEL",
             "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_CUSTOMIZED")       # the loop of Workload::iterate_hybrid_parallel_*
CUSTOM_LAYER = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "MICRO",
                "DISTRIBUTED_INFERENCE")
REDUCE_MEMORY_GBPS = 500_000      # ASTRA-sim 1.0 analytical: the NPU memory's bandwidth
PRIORITY_BASE = 10 ** 9           # gate priorities: LIFO counts up, FIFO down from here
PRIORITY_HIGHEST = 10 ** 12

declare(
    Key("workload", "astra_endpoint_delay", "int", 10, "cycles",
        "ASTRA-sim workloads: cycles each message costs its sender and its receiver "
        "(ASTRA-sim's endpoint-delay).",
        (lambda v: 0 <= v <= 10 ** 9, "an integer from 0 to 1e9")),
    Key("workload", "astra_scheduling", "str", "LIFO", "-",
        "ASTRA-sim workloads: which waiting collective a dimension serves first: the last "
        "issued (LIFO) or the first (FIFO).", None, lambda: ["LIFO", "FIFO"]),
    Key("workload", "astra_collective_optimization", "str", "localBWAware", "-",
        "ASTRA-sim workloads: an all-reduce over several dimensions as reduce-scatters, an "
        "all-reduce on the last, all-gathers back (localBWAware), or an all-reduce per "
        "dimension (baseline).", None, lambda: ["localBWAware", "baseline"]),
)


def chunk_sizes(size, splits):
    """ASTRA-sim's chunks of a collective: size // splits bytes each, the remainder last."""
    c = size // splits
    if c == 0:
        return [size]
    out = []
    while size > 0:
        out.append(min(c, size))
        size -= out[-1]
    return out


def phase_plan(ctype, size, dims, involved, optimization="localBWAware"):
    """The phases of one chunk of `size` bytes: [(dimension, kind, bytes in)], kind one of
    'rs', 'ag', 'ar', 'a2a' (ASTRA-sim's Sys::generate_collective)."""
    order = list(range(len(dims)))
    if ctype == "all_gather":
        order.reverse()
    act = [d for d in order if dims[d] > 1 and involved[d]]
    out = []
    if ctype == "all_reduce" and optimization == "localBWAware" and act:
        last = act[-1]
        for d in act[:-1]:
            out.append((d, "rs", size))
            size //= dims[d]
        out.append((last, "ar", size))
        for d in reversed(act[:-1]):
            out.append((d, "ag", size))
            size *= dims[d]
        return out
    kind = {"all_reduce": "ar", "reduce_scatter": "rs", "all_gather": "ag",
            "all_to_all": "a2a"}[ctype]
    for d in act:
        out.append((d, kind, size))
        size = size // dims[d] if kind == "rs" else size * dims[d] if kind == "ag" else size
    return out


def ring_steps(kind, size, k):
    """(steps, message bytes, steps whose message is reduced) of ASTRA-sim's ring algorithm
    over k NPUs for a phase of `size` bytes."""
    if kind == "ar":
        return 2 * (k - 1), size // k, k - 1
    if kind == "rs":
        return k - 1, size // k, k - 1
    if kind == "ag":
        return k - 1, size, 0
    return k * (k - 1) // 2, size // k, 0


def phase_cycles(kind, size, k, message_cycles, endpoint_delay):
    """ASTRA-sim's time of a ring phase when every message takes message_cycles(bytes):
    e + steps x (message + e), plus the reductions through its NPU memory."""
    steps, msg, reduced = ring_steps(kind, size, k)
    proc = 3 * (msg // REDUCE_MEMORY_GBPS)
    return endpoint_delay + steps * (message_cycles(msg) + endpoint_delay) + reduced * proc


def analytical_message(names, units, latency, bandwidth, links=2):
    """A message's time in ASTRA-sim 1.0's analytical backend (its HierarchicalTopology::send,
    astra-network-analytical), for astra_graph's `message`: NPUs `names` in ASTRA-sim's id
    order on its dimensions of `units` NPUs each (rings; dimension 0 innermost, ids counting
    it fastest); a message goes on the highest dimension where the two ids' addresses differ,
    over the shorter way round its ring: int(hops x latency[d]) cycles, then the bytes over
    links x bandwidth[d] (bytes per cycle) added to that whole number and rounded down
    (its time is an int, its terms doubles); NIC, router and HBM latencies 0 (those of the
    comparison's network files)."""
    total = 1
    for k in units:
        total *= k
    if len(names) != total or not len(latency) == len(bandwidth) == len(units) or \
            min(bandwidth, default=1) <= 0 or links < 1:
        raise ValueError(f"analytical_message: {len(names)} NPUs on dimensions {list(units)} "
                         f"(expected their product, {total}), {len(latency)} latencies and "
                         f"{len(bandwidth)} bandwidths (expected one per dimension, "
                         f"bandwidths > 0), links = {links} (expected >= 1)")
    index = {n: i for i, n in enumerate(names)}

    def address(i):
        out = []
        for k in units:
            out.append(i % k)
            i //= k
        return out

    def message(src, dst, nbytes):
        a, b = address(index[src]), address(index[dst])
        d = len(units) - 1
        while d >= 0 and a[d] == b[d]:
            d -= 1
        if d < 0:
            return 0
        dist = abs(a[d] - b[d])
        hops = min(dist, units[d] - dist)
        return int(int(hops * latency[d]) + nbytes / (links * bandwidth[d]))
    return message


def logical_dims(cfg, topo, npus, group=None):
    """The NPUs in ASTRA-sim's order (dimension 0 innermost) and the sizes of its logical
    dimensions; `group` (a model-parallel group's size) splits the dimension it ends in.
    Returns (order, dims, the last model-parallel dimension or -1)."""
    p = len(npus)
    if topo.coords is not None and sorted(npus) == sorted(topo.node_names):
        dims = [int(k) for k in topo.dims]          # node order is dimension 0 fastest
        order = [n for n in topo.node_names if n in set(npus)]
    else:
        order, dims = coll.ring_order(cfg, topo, list(npus)), [p]
    if group is None or group <= 1:
        return order, dims, -1
    size = 1
    for d, k in enumerate(dims):
        if size * k < group:
            size *= k
            continue
        if size * k == group:
            return order, dims, d
        if group % size or k % (group // size):
            raise ConfigError(f"workload.model: model_parallel_NPU_group = {group} does not "
                              f"split the NPUs' dimensions {dims}")
        first = group // size
        return order, dims[:d] + [first, k // first] + dims[d + 1:], d
    raise ConfigError(f"workload.model: model_parallel_NPU_group = {group}: more than the "
                      f"{p} NPUs used")


class _System:
    """ASTRA-sim's system layer over the NPUs of one run: logical dimensions, a queue (gate)
    per dimension, collective priorities, the endpoint delay; issue() adds a collective's
    chunks and returns the op after which it is done (None: no dimension involved)."""

    def __init__(self, cfg, topo, npus, g, order, dims, message=None):
        w = cfg.workload
        self.message = message
        self.g, self.npus, self.order, self.dims = g, list(npus), order, dims
        self.e = w.astra_endpoint_delay
        self.policy = w.astra_scheduling
        self.optimization = w.astra_collective_optimization
        self.splits = w.chunks
        self.engine = w.engine
        if w.algorithm not in ("ring", "bidir_ring"):
            raise ConfigError(f"workload.algorithm = {w.algorithm!r}: an ASTRA-sim workload "
                              f"runs ASTRA-sim's ring algorithm per dimension: 'ring' (one "
                              f"way) or 'bidir_ring' (each message halved, both ways)")
        self.bidir = w.algorithm == "bidir_ring"
        if len(dims) > len(npus):
            raise ConfigError(f"workload.model: {len(dims)} dimensions over {len(npus)} NPUs")
        self.gates = [npus[d] for d in range(len(dims))]   # a dimension's queue: a gate
        self.counter = 0
        strides = [1]
        for k in dims[:-1]:
            strides.append(strides[-1] * k)
        self.rings = []                    # per dimension: its rings, as lists of names
        for d, k in enumerate(dims):
            groups = {}
            for i, n in enumerate(order):
                key = tuple((i // strides[e]) % dims[e] for e in range(len(dims)) if e != d)
                groups.setdefault(key, []).append(n)
            self.rings.append([v for _, v in sorted(groups.items())])

    def priority(self, policy):
        if policy == "HIGHEST":
            return PRIORITY_HIGHEST
        if policy is None:
            policy = self.policy
        self.counter += 1 if policy == "LIFO" else -1
        return PRIORITY_BASE + self.counter - (1 if policy == "LIFO" else -1)

    def _phase(self, d, kind, size, after):
        """One chunk's phase on dimension d: every ring of it at once; returns the op after
        which every NPU has finished it."""
        g, e = self.g, self.e
        ends = []
        for ring in self.rings[d]:
            k = len(ring)
            steps, msg, reduced = ring_steps(kind, size, k)
            proc = 3 * (msg // REDUCE_MEMORY_GBPS)
            parts = [(msg - msg // 2, 1), (msg // 2, -1)] if self.bidir else [(msg, 1)]
            parts = [(b, s) for b, s in parts if b > 0]
            if self.message is not None:         # the whole message, a delay of its time
                parts = [(msg, 1)] if msg > 0 else []
            ready = {n: g.delay(e, after=after) for n in ring}
            for s in range(steps):
                got = {n: [] for n in ring}
                for j, n in enumerate(ring):
                    for b, way in parts:
                        to = ring[(j + way) % k]
                        got[to].append(
                            g.send(n, to, b, after=[ready[n]]) if self.message is None else
                            g.delay(self.message(n, to, b), after=[ready[n]]))
                for n in ring:                # (messages of no bytes: the step's delay)
                    got_n = got[n] or [ready[n]]
                    if s < reduced and self.engine in ("npu", "offload") and msg:
                        red = g.reduce(n, msg, self.engine, after=got_n)
                        ready[n] = g.delay(e, after=[red])
                    else:
                        ready[n] = g.delay(e + (proc if s < reduced else 0), after=got_n)
            ends += list(ready.values())
        return g.delay(0, after=ends)

    def issue(self, ctype, size, involved, policy, after):
        if ctype not in COMM:
            raise ConfigError(f"workload.model: collective {ctype} is not supported "
                              f"(expected one of {', '.join(COMM)} or NONE)")
        if size <= 0:
            return None
        collective = COMM[ctype]
        chunks = chunk_sizes(size, self.splits)
        plans = [phase_plan(collective, c, self.dims, involved, self.optimization)
                 for c in chunks]
        if not plans[0]:
            return None
        prio = self.priority(policy)
        g = self.g
        start = g.delay(0, after=after)
        ends = []
        for plan in plans:
            prev = start
            for d, kind, nb in plan:
                acq = g.acquire(self.gates[d], prio, after=[prev])
                end = self._phase(d, kind, nb, [acq])
                g.release(self.gates[d], after=[end])
                prev = end
            ends.append(prev)
        return g.delay(0, after=ends)


def ops_bound(model, dims, splits, iterations, bidir):
    """An upper bound of the ops astra_graph makes, counted before building any: every
    collective of every layer as if issued on every dimension, each phase per NPU and step
    its sends and one delay, and a few ops per phase and collective."""
    p = 1
    for k in dims:
        p *= k
    total = 0
    parts = 2 if bidir else 1
    for layer in model.layers:
        gv = layer.given
        for phase in ("fwd", "ig", "wg"):
            ctype, size = gv[phase + "_comm"]
            if ctype == "NONE" or size <= 0 or ctype not in COMM:
                continue
            n = len(chunk_sizes(size, splits))
            steps = sum(k * (k - 1) // 2 + 2 * (k - 1) for k in dims if k > 1)
            total += n * (p * steps * (parts + 1) + (p + 4) * len(dims) * 2) + 4
        total += 8 * p
    return iterations * total


def involved_dims(kind, ndims, boundary, phase, layer=None):
    """Which logical dimensions a collective of `phase` ('fwd', 'ig', 'wg') uses
    (ASTRA-sim's Workload::decode_involved_dimensions); under HYBRID_CUSTOMIZED `kind` is the
    layer's own parallelism."""
    every, none = [True] * ndims, [False] * ndims
    if kind in ("DATA", "MICRO") or (kind.startswith("HYBRID_DLRM") and layer != 0):
        return every if phase == "wg" else none
    if kind.startswith("HYBRID_DLRM"):
        return every
    if kind in ("MODEL", "DISTRIBUTED_INFERENCE"):
        return none if phase == "wg" else every
    if kind == "HYBRID_DATA_MODEL":          # model parallel on dimension 0, data on the rest
        model = [d == 0 for d in range(ndims)]
    elif kind == "HYBRID_MODEL_DATA":        # data parallel on dimension 0, model on the rest
        model = [d > 0 for d in range(ndims)]
    else:                                    # the transformers: up to the group's boundary
        model = [d <= boundary for d in range(ndims)]
    return model if phase in ("fwd", "ig") else [not x for x in model]


def astra_graph(cfg, topo, model, npus=None, graph=None, prefix="", message=None):
    """Add workload.iterations passes of an ASTRA-sim workload to `graph`; returns
    (graph, plan) as pysim.workload.training.training_graph does. `message(src, dst, bytes)`,
    if given, is a message's time in cycles: each ring step's message is then a delay of
    that time (the whole message, whatever workload.algorithm) instead of a send on pysim's
    network, so the run has ASTRA-sim's rules over another network model (such as
    analytical_message's, ASTRA-sim's analytical backend)."""
    kind = model.parallelism
    if kind not in SUPPORTED:
        raise ConfigError(f"workload.model = {cfg.workload.model!r}: an ASTRA-sim workload of "
                          f"parallelism {kind}; pysim runs ASTRA-sim's "
                          f"{', '.join(SUPPORTED)} workloads (other parallelisms: not "
                          f"supported)")
    names, kinds = topo.node_names, topo.node_kinds
    if npus is None:
        npus = list(cfg.workload.group) if cfg.workload.group is not None else \
            [n for n, k in zip(names, kinds) if k == "npu"]
    if not npus:
        raise ConfigError(f"workload.kind = 'training': {topo.name} has no NPU to train on "
                          f"(nodes of kind 'npu')")
    for n in npus:
        if n not in names or kinds[names.index(n)] != "npu":
            raise ConfigError(f"workload.group: {n!r} is not an NPU of {topo.name}")
    if len(npus) < 2:
        raise ConfigError("workload.group: an ASTRA-sim workload needs two NPUs or more")
    w = cfg.workload
    group = model.config.get("model_parallel_npu_group") if model.config else None
    order, dims, boundary = logical_dims(cfg, topo, npus, group)
    bound = ops_bound(model, dims, w.chunks, w.iterations, w.algorithm == "bidir_ring")
    if bound > graph_module.MAX_OPS:
        raise GraphError(f"workload.model: {len(model.layers):,} layers' collectives in "
                         f"{w.chunks} chunks over {len(npus)} NPUs for {w.iterations} "
                         f"iterations make up to {bound:,} ops, more than the "
                         f"{graph_module.MAX_OPS:,} ops a graph may have (fewer "
                         f"workload.chunks or workload.iterations make fewer)")
    g = graph if graph is not None else OpGraph()
    sysl = _System(cfg, topo, npus, g, order, dims, message)
    plan = Plan(model=model, precision=None, optimizer_name=None, batch=w.batch, dp=len(npus),
                tp=1, pp=1, micro_batches=1, schedule=f"astra-sim {kind}", order=["dp"],
                tables="replicated", engine=w.engine or "astra-sim", algorithm=w.algorithm,
                npus=list(npus), coords={n: (i, 0, 0) for i, n in enumerate(npus)},
                stages=[(0, len(model.layers))])
    plan.updates = {}
    L = len(model.layers)
    layers = model.layers
    last_bottom = model.config.get("dlrm_last_bottom_layer", -1) if model.config else -1
    nd = len(dims)

    def issue(it, i, phase, policy, after):
        gv = layers[i].given
        ctype, size = gv[phase + "_comm"]
        if ctype == "NONE" or size <= 0:
            return None
        own = gv.get("parallelism", kind) if kind == "HYBRID_CUSTOMIZED" else kind
        if own not in CUSTOM_LAYER and kind == "HYBRID_CUSTOMIZED":
            raise ConfigError(f"workload.model: layer {layers[i].name!r} of a "
                              f"HYBRID_CUSTOMIZED workload has parallelism {own}: expected "
                              f"one of {', '.join(CUSTOM_LAYER)}")
        inv = involved_dims(own, nd, boundary, phase, i)
        first = len(g)
        end = sysl.issue(ctype, size, inv, policy, after)
        if end is None:
            return None
        done = g.delay(gv["update_cycles"], after=[end],
                       name=f"{prefix}it{it} {layers[i].name} {phase} update "
                            f"#{len(issued)}")
        plan.updates.setdefault((it, i, phase), done)
        issued.append(done)
        plan.collectives.append(CollectiveOps(
            what=f"{phase}_{COMM[ctype]}", collective=COMM[ctype], group=list(npus),
            bytes=size, iteration=it, micro_batch=0, layers=[i], first=first, last=len(g),
            done={n: done for n in npus}, layer_bytes=[size]))
        return done

    def step(it, i, what, cycles, cur, extra=()):
        """A compute step of `cycles` on every NPU after cur[n] and `extra`."""
        out = {}
        for n in npus:
            out[n] = g.compute(n, cycles=cycles, after=list(cur[n]) + list(extra),
                               name=f"{prefix}it{it} {layers[i].name} {what} {n}")
        return out

    def wait(cur, ops):
        ops = [o for o in ops if o is not None]
        return {n: list(cur[n]) + ops for n in npus} if ops else cur

    def tick(ops, cycles=1):
        return {n: [g.delay(cycles, after=[ops[n]])] for n in npus}

    checkpoints = set(model.config.get("checkpoints", ())) if model.config else set()
    initiates = set(model.config.get("checkpoint_initiates", ())) if model.config else set()

    def recompute_backward(it, cur):
        """HYBRID_TRANSFORMER_FWD_IN_BCKWD's backward pass (its state machine): as the
        transformer's, but at the input gradient of a layer that initiates recomputation the
        forward pass is run again from the checkpoint at or below it (each layer's forward
        cycles and forward collective, waited for) up to the next layer that initiates one,
        whose input gradient then runs."""
        i, state, started = L - 1, "ig", False
        for k in range(4 * L * L + 8):
            gv = layers[i].given
            if state == "ig":
                if i in initiates and not started:
                    j = i
                    while j >= 0 and j not in checkpoints:
                        j -= 1
                    if j < 0:
                        raise ConfigError(f"workload.model: layer {i} initiates a forward "
                                          f"pass in the backward one but no checkpoint is at "
                                          f"or below it")
                    i, state, started = j, "fip", True
                    cur = {n: [g.delay(1, after=cur[n])] for n in npus}
                    continue
                ig = step(it, i, "bwd_input", gv["ig_cycles"], cur)
                pending[(i, "ig")] = issue(it, i, "ig", "LIFO", [ig[n] for n in npus])
                for n in npus:
                    plan.layer_ops[(it, i, n, 0)].bwd_input = ig[n]
                started, state = False, "wg"
                cur = tick(ig)
            elif state == "wg":
                wg = step(it, i, "bwd_weight", gv["wg_cycles"], cur)
                pending[(i, "wg")] = issue(it, i, "wg", "FIFO", [wg[n] for n in npus])
                for n in npus:
                    plan.layer_ops[(it, i, n, 0)].bwd_weight = wg[n]
                cur = wait({n: [wg[n]] for n in npus}, [pending.pop((i, "ig"), None)])
                cur = {n: [g.delay(1, after=cur[n])] for n in npus}
                i -= 1
                if i < 0:
                    return cur
                state = "ig"
            else:                         # the forward pass again, from the checkpoint
                cur = wait(cur, [pending.pop((i, "wg"), None)])
                fwd = step(it, i, f"recompute {k}", gv["fwd_cycles"], cur)
                done = issue(it, i, "fwd", None, [fwd[n] for n in npus])
                cur = wait({n: [fwd[n]] for n in npus}, [done])
                cur = {n: [g.delay(1, after=cur[n])] for n in npus}
                i += 1
                if i >= L:
                    raise ConfigError("workload.model: a forward pass in the backward one "
                                      "runs past the last layer (no layer above the "
                                      "checkpoint initiates one)")
                if i in initiates:
                    state = "ig"
        raise ConfigError("workload.model: the checkpoints and the layers initiating "
                          "recomputation make the backward pass loop")

    cur = {n: [] for n in npus}
    pending = {}                          # (layer, phase) -> the done op of its collective
    issued = []                           # every collective's done op
    for it in range(w.iterations):
        first = len(g)
        if kind == "MICRO":
            pending[(it, "wg")] = issue(it, 0, "wg", None, [])
            plan.iterations.append((first, len(g)))
            continue
        for i in range(L):                # forward pass
            gv = layers[i].given
            cur = wait(cur, [pending.pop((i, "wg"), None)])
            fwd = step(it, i, "fwd", gv["fwd_cycles"], cur)
            for n in npus:
                plan.layer_ops[(it, i, n, 0)] = LayerOps(fwd[n], None, None, 0)
            cur = {n: [fwd[n]] for n in npus}
            if kind in LAYERWISE or kind == "DISTRIBUTED_INFERENCE":
                done = issue(it, i, "fwd", None, [fwd[n] for n in npus])
                cur = wait(cur, [done])
            elif kind.startswith("HYBRID_DLRM"):
                if gv["fwd_comm"][0] == "ALLTOALL":
                    pending[(i, "fwd")] = issue(it, i, "fwd", "HIGHEST",
                                                [fwd[n] for n in npus])
                elif i == last_bottom:
                    cur = wait(cur, [pending.pop((0, "fwd"), None)])
            cur = {n: [g.delay(1, after=cur[n])] for n in npus}
        if kind == "DISTRIBUTED_INFERENCE":       # forward passes only
            plan.iterations.append((first, len(g)))
            continue
        if kind == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
            cur = recompute_backward(it, cur)
            plan.iterations.append((first, len(g)))
            continue
        for i in range(L - 1, -1, -1):    # backward pass
            gv = layers[i].given
            if kind in LAYERWISE:
                ig = step(it, i, "bwd_input", gv["ig_cycles"], cur)
                if kind == "HYBRID_TRANSFORMER" or i > 0:
                    pending[(i, "ig")] = issue(it, i, "ig", "LIFO", [ig[n] for n in npus])
                cur = tick(ig)
                wg = step(it, i, "bwd_weight", gv["wg_cycles"], cur)
                pending[(i, "wg")] = issue(it, i, "wg", "FIFO", [wg[n] for n in npus])
                cur = wait({n: [wg[n]] for n in npus}, [pending.pop((i, "ig"), None)])
                cur = {n: [g.delay(1, after=cur[n])] for n in npus}
                for n in npus:
                    plan.layer_ops[(it, i, n, 0)].bwd_input = ig[n]
                    plan.layer_ops[(it, i, n, 0)].bwd_weight = wg[n]
                continue
            wg = step(it, i, "bwd_weight", gv["wg_cycles"], cur)
            pending[(i, "wg")] = issue(it, i, "wg", None, [wg[n] for n in npus])
            cur = {n: [wg[n]] for n in npus}
            if kind == "HYBRID_DLRM":           # (not HYBRID_DLRM_ENHANCED)
                cur = wait(cur, [pending.pop((i, "ig"), None)])
            cur = {n: [g.delay(1, after=cur[n])] for n in npus}
            for n in npus:
                plan.layer_ops[(it, i, n, 0)].bwd_weight = wg[n]
            if i > 0:
                ig = step(it, i, "bwd_input", gv["ig_cycles"], cur)
                for n in npus:
                    plan.layer_ops[(it, i, n, 0)].bwd_input = ig[n]
                if kind.startswith("HYBRID_DLRM") and i == last_bottom + 1:
                    pending[(0, "ig")] = issue(it, 0, "ig", "HIGHEST", [ig[n] for n in npus])
                cur = tick(ig)
        plan.iterations.append((first, len(g)))
    # the run ends when every collective has finished: the last pass's range takes them
    if issued:
        g.delay(0, after=issued + [o for n in npus for o in cur[n]])
        plan.iterations[-1] = (plan.iterations[-1][0], len(g))
    return g, plan


def run_cycles(res):
    """The cycle at which a run's last op finished (ASTRA-sim's 'all passes finished')."""
    return max((op["finish"] for op in res.ops), default=0)


__all__ = ["astra_graph", "analytical_message", "chunk_sizes", "ops_bound", "phase_plan",
           "ring_steps", "phase_cycles", "logical_dims", "involved_dims", "run_cycles"]
