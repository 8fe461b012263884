"""NCCL's collectives as op graphs (`workload.algorithm = "nccl"`): the ops of the plan
`pysim.workload.nccl` makes -- a ring's slice-steps per bundle of channels, a double binary
tree's slices up and down, NVLink SHARP's exchange through the switch -- and the count of
those ops before any is built (`plan_ops`, `ops_bound`), so that a graph too large is refused
at once. The algorithms, protocols and NCCL's cost model are described in that module."""
from __future__ import annotations

import math

from pysim.errors import ConfigError
from pysim.workload.nccl import (BASE_US, MAX_LOOP_ROUNDS, MAX_SLICES, NVLS_EFFICIENCY,
                                 NVLS_MAX_SLICES, PROTOCOLS, SUPPORTED, TREE_SLICE, WIRE,
                                 _bundles, _nvls_slices, _rank_order, _split,
                                 bundle_chunks, chunk_major, nvls_factor, plan, ring_rounds,
                                 step_us, stream_excess)


def ops_bound(collective, p, channels, nbytes=None, form="steps"):
    """An upper bound of the ops the NCCL expansion makes: a ring's slice-steps, a delay, a
    send and (between nodes) an arrival each per rank, per bundle of channels (at most
    min(channels, p) bundles; as streams at most a delay, a send and a latency per rank, and
    a delay and two latencies more across nodes), or per
    slice per tree edge up and down, or the NVLS exchange; plus a delay per rank. nbytes (if known)
    bounds the ring's rounds and slices (ring_rounds: at most MAX_LOOP_ROUNDS rounds of two
    slices)."""
    c = max(1, channels)
    bundles = min(c, p)
    steps = (2 if collective == "all_reduce" else 1) * (p - 1)
    if form == "streams":
        ring = bundles * 6 * p
    else:
        slices = 2 * MAX_LOOP_ROUNDS
        if nbytes is not None:
            slices = max(sum(len(z) for _, z in ring_rounds(collective, nbytes, pr, p, 1))
                         for pr in PROTOCOLS)
        ring = bundles * max(1, slices) * steps * p * 3
    tree = c * 4 * (p - 1) * MAX_SLICES
    return max(ring, tree) + 4 * p * (p + 1) * NVLS_MAX_SLICES + p


def plan_ops(collective, nbytes, settings, machine, order, form="steps"):
    """The ops build() makes for this collective (counted from its plan, not built): a ring
    exactly (per bundle a delay and a send per slice-step and rank, and an arrival delay
    per hop between nodes; at most, where NCCL 2.18's LL128 layout leaves a rank's chunk
    empty and its step has no ops; as streams a delay, a send and a latency per rank, and
    across nodes, where the network's flight shows, a delay and one or two latencies more:
    _ring_stream); a tree or NVLS by ops_bound."""
    m, algo, proto, channels = plan(collective, nbytes, settings, machine, order)
    p = len(order)
    if algo != "ring":
        return ops_bound(collective, p, channels, nbytes)
    steps = 2 * (p - 1) if collective == "all_reduce" else p - 1
    rounds = ring_rounds(collective, nbytes, proto, p, channels)
    n = 0 if form == "streams" else p                  # the base latency at each rank
    for ring, width in _bundles(m, channels):
        if form == "streams":
            _, _, excess, crosses = _stream_plan(m, proto, channels, ring, width, rounds,
                                                 steps, m.clock)
            n += (3 + (0 if excess <= 0 else 2 if len(crosses) == p else 3)) * p
            continue
        cross = sum(m.node_of[ring[k]] != m.node_of[ring[(k + 1) % p]] for k in range(p))
        n += sum(len(z) for _, z in rounds) * steps * (2 * p + cross)
    return n


def build(b, collective, settings, machine):
    """Add the collective to the builder b's graph (collectives._Builder: its graph, ranks
    b.order, bytes b.N, per rank index what it waits for b.start; sets b.node_last)."""
    if collective not in SUPPORTED:
        raise ConfigError(f"workload.algorithm = 'nccl' does {', '.join(sorted(SUPPORTED))}, "
                          f"not {collective!r}")
    m, algo, proto, channels = plan(collective, b.N, settings, machine, b.order)
    p = b.p
    g = b.g
    cyc = m.clock * 1e3                               # cycles per microsecond
    base = int(round(BASE_US[(algo, proto)] * cyc))
    form = getattr(b, "form", "steps") if algo == "ring" else "steps"
    # NCCL's base latency, at each rank once its part can start (as streams, with the
    # slice-steps' latency after the sends: _ring_stream)
    start = {i: list(b.start.get(i, ())) for i in range(p)} if form == "streams" else \
        {i: [g.delay(base, after=list(b.start.get(i, ())))] for i in range(p)}
    step = {t: int(round(step_us(algo, proto, t) * cyc)) for t in ("nvlink", "net")}
    ctx = dict(g=g, order=b.order, m=m, wire=WIRE[proto], step=step, base=base,
               tuning=settings.get("tuning", "2.23"),
               flight=max(0, step["net"] - step["nvlink"]), proto=proto, channels=channels,
               factor={x: m.hop_factor(proto, channels, x) for x in (True, False)})
    if algo == "ring":
        last = _ring(ctx, collective, b.N, channels, start, proto, form)
    elif algo == "tree":
        last = _tree(ctx, b.N, channels, start)
    else:
        last = _nvls(ctx, b.N, start, machine)
    for i in range(p):
        b.node_last.setdefault(i, []).extend(last[i])
    if settings.get("chosen") is not None:
        settings["chosen"].update(nccl_algorithm=algo, nccl_protocol=proto,
                                  nccl_channels=channels)
    return algo, proto


def _ring_hop(ctx, a, b, nbytes, after, times=1):
    """A ring's slice-step: the sending thread block's own work on the slice (NCCL's NVLink
    step latency, `times` slices' worth where the hop stands for as many alike), then the
    send of its wire bytes (a NVLink hop also carries NVLink's overhead). Between nodes the
    slice reaches the next rank the network's step latency after the sender's part
    (NCCL's proxy posts it to the NIC, and the next slice's work goes on meanwhile): the
    arrival, what the receiver's next step waits for, comes that much after the send.
    Returns (send, arrival)."""
    m, g = ctx["m"], ctx["g"]
    same = m.node_of[a] == m.node_of[b]
    d = g.delay(ctx["step"]["nvlink"] * times, after=after)
    wire = nbytes * ctx["wire"] * ctx["factor"][same] / (m.nvdata if same else 1.0)
    snd = g.send(ctx["order"][a], ctx["order"][b], int(math.ceil(wire)), after=[d])
    if same:
        return snd, snd
    return snd, g.delay(ctx["flight"] * times, after=[snd])


def _hop(ctx, a, b, nbytes, after, times=1):
    """One step: the protocol's latency for the link's transport (`times` steps' worth, where
    the hop stands for as many alike), then the send of the data's wire bytes (a NVLink hop
    also carries NVLink's own overhead)."""
    m = ctx["m"]
    same = m.node_of[a] == m.node_of[b]
    d = ctx["g"].delay(ctx["step"]["nvlink" if same else "net"] * times, after=after)
    wire = nbytes * ctx["wire"] * ctx["factor"][same] / (m.nvdata if same else 1.0)
    return ctx["g"].send(ctx["order"][a], ctx["order"][b], int(math.ceil(wire)), after=[d])


def _ring(ctx, collective, nbytes, channels, start, proto, form):
    """NCCL's ring: per channel a ring over every rank (the ranks of a node consecutive,
    from the channel-th on), moving each loop's chunks step by step in slices; at a rank one
    thread block does the slice-steps one after another, each the protocol's step latency
    (NCCL's hwLat for the link's transport) then the send of the slice to the next rank,
    and a slice's next step waits for its arrival from the previous rank. Channels whose
    rings cross the same links (every channel inside one NVSwitch node; those of one
    rotation across nodes) are built as one ring carrying their bytes together. Where the
    release lays the last loop out chunk-major (nccl.chunk_major: up to 2.19, LL128),
    that loop's step s at ring position k carries the bundle's bytes of chunk k - 1 - s, and
    an empty chunk's step is no op. As streams (form = 'streams', _ring_stream): per bundle
    and rank the slice-steps' latency once, then one send of every byte it sends (the rest
    shared evenly whatever the release)."""
    m = ctx["m"]
    p = len(m.node_of)
    last = {i: list(start[i]) for i in range(p)}
    steps = 2 * (p - 1) if collective == "all_reduce" else p - 1
    rounds = ring_rounds(collective, nbytes, proto, p, channels)
    bundles = _bundles(m, channels)
    layout = None if form == "streams" else \
        chunk_major(collective, nbytes, proto, p, channels, ctx["tuning"])
    for index, (ring, width) in enumerate(bundles):
        if form == "streams":
            _ring_stream(ctx, ring, width, rounds, steps, start, last)
            continue
        chunks = bundle_chunks(layout, index, len(bundles))
        prev = {r: list(start[r]) for r in range(p)}     # each rank's last slice-step
        got = {}                                       # (step, slice) -> arrival at a rank
        inbox = {}                                     # each rank's last arrival
        for i, (loops, sizes) in enumerate(rounds):
            major = chunks is not None and i == len(rounds) - 1
            for s in range(steps):
                arrived = {}
                for z, size in enumerate(sizes):
                    for k in range(p):
                        a, b = ring[k], ring[(k + 1) % p]
                        moved = chunks[(k - 1 - s) % p] if major else size * width
                        if moved == 0:
                            continue
                        deps = prev[a] + ([got[(z, a)]] if s and (z, a) in got else [])
                        op, arrival = _ring_hop(ctx, a, b, moved, deps, loops)
                        prev[a] = [op]
                        arrived[(z, b)] = arrival
                        inbox[b] = arrival
                got = arrived
        for r in range(p):
            ends = prev[r] + [got[k] for k in got if k[1] == r]
            if chunks is not None and r in inbox and inbox[r] not in ends:
                ends.append(inbox[r])                   # its last chunk came before the end
            last[r].extend(ends)
    return last


def _stream_plan(m, proto, channels, ring, width, rounds, steps, clock):
    """What a bundle's ring as streams waits beyond its sends: (slice-steps, their chain's
    steps, flight excess in cycles, the positions k whose hop into ring[k] crosses nodes).
    The slice-steps' schedule is a max-plus system whose longest path either stays at the
    slowest hop's rank (every slice-step's work, bytes and link latency there) or runs
    around the ring with the slices (per step one slice's work and link latency, the
    network's flight at the share of hops that cross nodes): the excess is how much longer
    the latter is beyond the links' time (nccl.stream_excess), the chain's steps how many
    link latencies it pays."""
    p = len(ring)
    n_slices = sum(loops * len(sizes) for loops, sizes in rounds) * steps
    chain = sum(loops for loops, sizes in rounds if sizes) * steps
    crosses = [k for k in range(p) if m.node_of[ring[k - 1]] != m.node_of[ring[k]]]
    excess = int(round(stream_excess(m, proto, channels, rounds, steps, width, ring)
                       * 1e9 * clock))
    return n_slices, chain, excess, crosses


def _ring_stream(ctx, ring, width, rounds, steps, start, last):
    """A bundle's ring as streams: per rank, once its data is ready, one delay of the latency
    in series with its sends (NCCL's base latency, the thread block's work per slice-step),
    one send to its neighbour of every byte it sends over the steps, and, once that and its
    predecessor's have, the links' own latency of as many one-flit messages (the slice-steps
    staying at the rank). Across nodes, beside that, the slices' way around the ring: the
    network's flight where the sender's other slices do not cover it, then a link latency
    per step, at the ring's share of crossing hops that of the hop from the first node into
    the second (most of the ring's crossings go between neighbouring nodes, its wrap from
    the last node to the first farther), the rest that of a hop inside a node. Where the ranks start
    together and nothing else shares their links the longer of the two is the slice-steps'
    time; 3 ops per rank (5 or 6 where the flight shows), each rank's alike but for the
    ring's rotation."""
    m, g, order = ctx["m"], ctx["g"], ctx["order"]
    p = len(ring)
    n_slices, chain, excess, crosses = _stream_plan(m, ctx["proto"], ctx["channels"], ring,
                                                    width, rounds, steps, m.clock)
    moved = sum(sum(sizes) for _, sizes in rounds) * steps * width
    wait = ctx["base"] + ctx["step"]["nvlink"] * n_slices
    sends = []
    for k in range(p):
        a, b = ring[k], ring[(k + 1) % p]
        same = m.node_of[a] == m.node_of[b]
        wire = moved * ctx["wire"] * ctx["factor"][same] / (m.nvdata if same else 1.0)
        d = g.delay(int(wait), after=list(start[a]))
        sends.append(g.send(order[a], order[b], int(math.ceil(wire)), after=[d]))
    inside = next(iter(sorted(set(range(p)) - set(crosses))), None)   # a hop in a node
    n_cross = int(round(max(0, chain - 1) * len(crosses) / p))
    for k in range(p):
        a, b = ring[k - 1], ring[k]
        after = [sends[k - 1], sends[k]]
        last[b].append(g.step_latency(order[a], order[b], max(0, n_slices - 1), after=after))
        if excess <= 0:
            continue
        c = crosses[1] if len(crosses) > 1 else crosses[0]
        t = g.delay(excess, after=after)
        t = g.step_latency(order[ring[c - 1]], order[ring[c]], n_cross, after=[t])
        if inside is not None:
            t = g.step_latency(order[ring[inside - 1]], order[ring[inside]],
                               max(0, chain - 1) - n_cross, after=[t])
        last[b].append(t)


def _tree(ctx, nbytes, channels, start):
    """Per channel a tree: each node's ranks on a chain from its head, the heads on a binary
    tree over the nodes (heap-shaped, mirrored on odd channels); the channel's data in
    slices reduced up and broadcast down, a slice following the one before on every edge."""
    m = ctx["m"]
    p = len(m.node_of)
    last = {i: list(start[i]) for i in range(p)}
    for c, part in enumerate(_split(nbytes, channels)):
        if part == 0:
            continue
        for t, half in enumerate(_split(part, 2)):
            if half:
                _one_tree(ctx, _rank_order(m, c), half, t == 1, start, last)
    return last


def _one_tree(ctx, ring, part, mirrored, start, last):
    """One tree of a channel's pair over `part` bytes: each node's ranks on a chain from its
    head (ring order), the heads on a heap-shaped binary tree over the nodes, mirrored for
    the second tree of the pair (a node interior in one is a leaf in the other)."""
    m = ctx["m"]
    p, N = len(m.node_of), m.nodes
    per = p // N
    chains = [ring[k * per:(k + 1) * per] for k in range(N)]
    parent = {}
    for k, chain in enumerate(chains):
        for j in range(1, len(chain)):
            parent[chain[j]] = chain[j - 1]
        x = (N - 1 - k) if mirrored else k
        if x == 0:
            parent[chain[0]] = -1
        else:
            px = (x - 1) // 2
            parent[chain[0]] = chains[(N - 1 - px) if mirrored else px][0]
    children = {r: [] for r in range(p)}
    for r, q in parent.items():
        if q >= 0:
            children[q].append(r)
    root = next(r for r, q in parent.items() if q < 0)
    order_up, stack = [], [(root, False)]      # post-order: children before parents
    while stack:
        r, done = stack.pop()
        if done:
            order_up.append(r)
        else:
            stack.append((r, True))
            stack.extend((ch, False) for ch in reversed(children[r]))
    slices = _split(part, max(1, min(MAX_SLICES, -(-part // TREE_SLICE))))
    up_prev, down_prev = {}, {}
    for sz in slices:
        up = {}
        for r in order_up:
            deps = list(start[r]) + [up[ch] for ch in children[r]]
            if parent[r] >= 0:
                if r in up_prev:
                    deps.append(up_prev[r])
                up[r] = _hop(ctx, r, parent[r], sz, deps)
                up_prev[r] = up[r]
        have = {root: [up[ch] for ch in children[root]] or list(start[root])}
        for r in reversed(order_up):           # parents before children
            for ch in children[r]:
                deps = have[r] + ([down_prev[ch]] if ch in down_prev else [])
                snd = _hop(ctx, r, ch, sz, deps)
                down_prev[ch] = snd
                have[ch] = [snd]
    for r in range(p):
        last[r].extend(have[r])


def _nvls(ctx, nbytes, start, machine):
    """One node's NVLink SHARP all-reduce through its switch's engine `nvls<k>`, in slices:
    every GPU sends a slice into the switch; once all have, the engine returns each GPU its
    share reduced; each GPU sends its share back, which the engine multicasts to all. The
    step latency is paid once, before the first slice. Every send carries its bytes times
    nvls_factor, so that the exchange goes at its busiest channel's pace where the release's
    layout leaves channels idle or fewer channels run (a channel moves a 16th of NVLS's rate
    at most)."""
    m, g, order = ctx["m"], ctx["g"], ctx["order"]
    p = len(order)
    eng = f"nvls{m.node_of[0]}"
    eff = m.nvdata * NVLS_EFFICIENCY / nvls_factor(nbytes, p, ctx["channels"], ctx["tuning"])
    last = {i: list(start[i]) for i in range(p)}
    prev_in = {i: g.delay(ctx["step"]["nvlink"], after=list(start[i])) for i in range(p)}
    for sz in _nvls_slices(nbytes, p, ctx["channels"]):
        ins = []
        for i in range(p):
            prev_in[i] = g.send(order[i], eng, int(math.ceil(sz / eff)),
                                after=[prev_in[i]])
            ins.append(prev_in[i])
        shares = _split(sz, p)
        back = [g.send(eng, order[i], int(math.ceil(shares[i] / eff)), after=ins)
                for i in range(p)]
        ups = [g.send(order[i], eng, int(math.ceil(shares[i] / eff)), after=[back[i]])
               for i in range(p)]
        for i in range(p):
            last[i] = [g.send(eng, order[i], int(math.ceil(sz / eff)), after=ups)]
    return last
