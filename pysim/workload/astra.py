"""ASTRA-sim 1.0 text workloads run as training iterations, with ASTRA-sim's own rules.

A model read from an ASTRA-sim workload file (pysim.models.astra: layers with given compute
cycles and collectives) runs as ASTRA-sim 1.0 runs its DATA workloads (its
workload/Workload.cc, workload/Layer.cc and system/Sys.cc, branch ASTRA-sim-1.0), on every
NPU used, in lockstep:

- the forward pass runs the layers in order, each its forward cycles; a layer's forward waits
  until its own weight-gradient collective of the previous iteration, and that layer's
  update delay after it, have finished;
- the backward pass runs from the last layer down: the layer's weight-gradient cycles, then
  its weight-gradient collective is issued without waiting, then its input-gradient cycles
  (the first layer has none);
- only the weight-gradient collectives are issued; the update delay starts when a collective
  completes and is not compute (a delay, the compute unit stays free);
- each step of the workload's loop ends with ASTRA-sim's one-cycle event to the next step
  (so a forward step takes its cycles + 1);
- a collective is cut into workload.chunks chunks (ASTRA-sim's preferred-dataset-splits, of
  size // chunks bytes each, as it cuts them); the chunks of every collective queue for the
  network, which runs one chunk at a time (ASTRA-sim's active-chunks-per-dimension = 1,
  with pysim's network taken as one dimension), the newest collective's first (its default
  LIFO scheduling: waiting chunks of a later collective go before those of an earlier one;
  a collective's own chunks in order);
- the run ends when every collective (and its update delay) has finished.

Where pysim differs: the collectives run with workload.algorithm and workload.engine on the
simulated network, flit by flit, where ASTRA-sim's analytical network is congestion-free;
the endpoint model (workload.engine, 'npu' by default) may use the NPU's compute unit for
reductions, which ASTRA-sim does not.
"""
from __future__ import annotations

from pysim.errors import ConfigError
from pysim.workload import collectives as coll
from pysim.workload.graph import OpGraph, engine_params
from pysim.workload.plan import CollectiveOps, LayerOps, Plan

COMM = {"ALLREDUCE": "all_reduce", "ALLTOALL": "all_to_all", "ALLGATHER": "all_gather",
        "REDUCESCATTER": "reduce_scatter"}


def astra_graph(cfg, topo, model, npus=None, graph=None, prefix=""):
    """Add workload.iterations passes of an ASTRA-sim DATA workload to `graph`; returns
    (graph, plan) as pysim.workload.training.training_graph does."""
    if model.parallelism != "DATA":
        raise ConfigError(f"workload.model = {cfg.workload.model!r}: an ASTRA-sim workload of "
                          f"parallelism {model.parallelism}; pysim runs ASTRA-sim's DATA "
                          f"workloads (other parallelisms: not supported)")
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
    w = cfg.workload
    engine = w.engine or "npu"
    g = graph if graph is not None else OpGraph()
    plan = Plan(model=model, precision=None, optimizer_name=None, batch=w.batch, dp=len(npus),
                tp=1, pp=1, micro_batches=1, schedule="astra-sim DATA", order=["dp"],
                tables="replicated", engine=engine, algorithm=w.algorithm, npus=list(npus),
                coords={n: (i, 0, 0) for i, n in enumerate(npus)},
                stages=[(0, len(model.layers))])
    plan.updates = {}
    idx = {n: i for i, n in enumerate(names)}
    ep = engine_params(topo, cfg)[idx[npus[0]]]
    sram = ep[1] if engine == "offload" else None
    if engine == "offload":
        coll.check_offload_sram(topo, cfg, npus)
    grain = w.packet_flits * cfg.network.flit_bytes
    gate = npus[0]                       # the network's one queue of chunks
    priority = [0]
    orders = {}

    def order(algorithm):
        if algorithm not in orders:
            orders[algorithm] = coll.ring_order(cfg, topo, list(npus)) \
                if algorithm in coll.RING_ALGORITHMS else list(npus)
        return orders[algorithm]

    def issue(it, i, ctype, size, after):
        """The layer's collective: its chunks queue at the gate (LIFO across collectives);
        returns the op after which every chunk is done."""
        if ctype not in COMM:
            raise ConfigError(f"workload.model: layer {model.layers[i].name!r}: collective "
                              f"{ctype} is not supported (expected one of "
                              f"{', '.join(COMM)} or NONE)")
        collective = COMM[ctype]
        algorithm = w.algorithm if collective != "all_to_all" else "direct"
        dims = None
        ordr = order(algorithm)
        if algorithm == "hierarchical":
            if sorted(npus) != sorted(names) or topo.coords is None:
                raise ConfigError("workload.algorithm = 'hierarchical' runs over every node of "
                                  "a torus or mesh")
            ordr, dims = list(names), list(topo.dims)
        chunk = size // w.chunks
        prio = priority[0]
        priority[0] += 1
        first = len(g)
        rels = []
        done_all = {}
        for c in range(w.chunks):
            acq = g.acquire(gate, prio, after=after)
            done = {}
            # (each chunk has the SRAM to itself: chunks run one at a time, and in an order
            # the gate decides as the run goes)
            coll.build(collective, algorithm, ordr, chunk, 1, None, engine, sram, g, 0, dims,
                       grain, after={n: [acq] for n in npus}, done=done, sram_pieces=ep[3])
            rels.append(g.release(gate, after=list(done.values())))
        end = g.delay(0, after=rels)
        done_all = {n: end for n in npus}
        plan.collectives.append(CollectiveOps(
            what="wg_" + collective, collective=collective, group=list(npus), bytes=size,
            iteration=it, micro_batch=0, layers=[i], first=first, last=len(g),
            done=done_all, layer_bytes=[size]))
        return end

    L = len(model.layers)
    carry = {n: [] for n in npus}        # what the pass's first step waits for
    upd_prev = {}
    for it in range(w.iterations):
        first = len(g)
        prev = dict(carry)
        for i, layer in enumerate(model.layers):
            gv = layer.given
            for n in npus:
                deps = list(prev[n]) + ([upd_prev[i]] if i in upd_prev else [])
                op = g.compute(n, cycles=gv["fwd_cycles"] + 1, after=deps,
                               name=f"{prefix}it{it} {layer.name} fwd {n}")
                prev[n] = [op]
                plan.layer_ops[(it, i, n, 0)] = LayerOps(op, None, None, 0)
        upd = {}
        for i in range(L - 1, -1, -1):
            layer = model.layers[i]
            gv = layer.given
            wg = {}
            for n in npus:
                wg[n] = g.compute(n, cycles=gv["wg_cycles"], after=prev[n],
                                  name=f"{prefix}it{it} {layer.name} bwd_weight {n}")
                plan.layer_ops[(it, i, n, 0)].bwd_weight = wg[n]
            ctype, size = gv["wg_comm"]
            if ctype != "NONE" and size > 0:
                end = issue(it, i, ctype, size, list(wg.values()))
                upd[i] = g.delay(gv["update_cycles"], after=[end],
                                 name=f"{prefix}it{it} {layer.name} update")
                plan.updates[(it, i)] = upd[i]
            if i > 0:                    # the weight-gradient step's event, the input
                for n in npus:           # gradient, its step's event
                    op = g.compute(n, cycles=1 + gv["ig_cycles"] + 1, after=[wg[n]],
                                   name=f"{prefix}it{it} {layer.name} bwd_input {n}")
                    plan.layer_ops[(it, i, n, 0)].bwd_input = op
                    prev[n] = [op]
            else:
                carry = {n: [g.delay(1, after=[wg[n]])] for n in npus}
        upd_prev = upd
        plan.iterations.append((first, len(g)))
    return g, plan
