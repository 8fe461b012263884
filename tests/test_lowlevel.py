"""The boundary to the compiled core, tested on its own: csim driven directly with inputs made by
hand (pysim.engine's NetworkArrays, GraphArrays, FlowArrays), no configuration, no topology
builder. Bad inputs are refused naming the input; the engine conserves flits, meets the
zero-load closed form on a two-node link, serialises a node's compute unit, and a hand-made
network equals the one pysim compiles for the same system."""
import threading

import numpy as np
import pytest

from csim import limits

from pysim.engine import (CH_EJECT, CH_INJECT, CH_NET, N_UNITS, OP_COMPUTE, OP_DELAY, OP_SEND,
                          SW_ARBITERS, VC_ARBITERS, EngineInputError, FlowArrays, GraphArrays,
                          NetworkArrays, arbiter_inputs, core, new_engine, set_graph)

DELAYS = dict(routing_delay=1, vc_alloc_delay=1, sw_alloc_delay=1, st_delay=1,
              injection_delay=1)


def two_nodes(num=1, den=1, link_latency=1, nic_latency=1, vcs=2, **over):
    """Nodes 0 and 1 joined by one link each way. Channels: 0, 1 the NICs' injection
    channels; 2 (0 -> 1) and 3 (1 -> 0) the link; 4, 5 the ejection channels. The link moves
    num / den flits per cycle; every other channel one."""
    kind = [CH_INJECT, CH_INJECT, CH_NET, CH_NET, CH_EJECT, CH_EJECT]
    inputs = dict(
        n_nodes=2, vcs=vcs, buffer_flits=8, **DELAYS, wait_for_tail_credit=False, n_classes=1,
        watchdog_cycles=10_000, max_packets=1_000_000,
        ch_src=[0, 1, 0, 1, 0, 1], ch_dst=[0, 1, 1, 0, 0, 1], ch_kind=kind,
        ch_lat_cycles=[nic_latency, nic_latency, link_latency, link_latency, nic_latency,
                       nic_latency],
        ch_num=[1, 1, num, num, 1, 1], ch_den=[1, 1, den, den, 1, 1],
        ch_group=[-1] * 6, ch_order=[0] * 6, ch_par_base=list(range(6)), ch_par_n=[1] * 6,
        ch_out_idx=[0, 0, 0, 0, 1, 1], node_pos=None, entry_class=False, tie_k=None,
        ch_rev=None, tie_seed=1, **arbiter_inputs("round_robin", "outputs"),
        rt=[4, 2, 3, 5], ep_node=[0, 1], nic_inj_base=[0, 1], nic_inj_n=[1, 1])
    inputs.update(over)
    return NetworkArrays(**inputs)


def graph(kind, node, dst, size, edges=(), **over):
    """GraphArrays from per-op lists and (from, to) dependency edges."""
    n = len(kind)
    succ_lists = [[] for _ in range(n)]
    for a, b in edges:
        succ_lists[a].append(b)
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum([len(s) for s in succ_lists])
    succ = np.array([b for s in succ_lists for b in s], np.int32)
    deps = np.bincount(succ, minlength=n) if n else np.zeros(0, np.int32)
    inputs = dict(kind=kind, node=node, dst=dst, size=size, deps=deps, succ_ptr=ptr,
                  succ=succ, unit=None, packet_flits=4, flit_bytes=32)
    inputs.update(over)
    return GraphArrays(**inputs)


def op_times(g):
    """(start, finish) of every op of graph g run to its end on two_nodes()."""
    eng = new_engine(two_nodes())
    set_graph(eng, g)
    assert eng.run(1 << 40, stop="all") == "done"
    return eng.op_times()


def run_trace(net, times, src, dst, lengths):
    eng = new_engine(net)
    eng.set_trace(np.asarray(times, np.int64), np.asarray(src, np.int32),
                  np.asarray(dst, np.int32), np.asarray(lengths, np.int32))
    assert eng.run(1 << 40, stop="all") == "done"
    deliver, inject, hops = eng.trace_results()
    return eng, deliver, inject, hops


def closed_form(length, link_rate=1.0, link_latency=1, nic_latency=1):
    """Zero-load latency (creation to the tail's ejection) of one packet over one link: the
    NIC's injection delay, two NIC channels and the link, two routers of four one-cycle
    stages, and the tail's distance behind the head (spaced by the slowest channel; the
    router after it, skipping routing and VC allocation, lets the tail gain two cycles, never
    closer than a flit a cycle)."""
    d = DELAYS
    per_router = d["routing_delay"] + d["vc_alloc_delay"] + d["sw_alloc_delay"] + d["st_delay"]
    body = length - 1
    spaced = int(np.ceil(body / link_rate))
    after = 1 if link_rate < 1 else 0
    tail = max(body, spaced - after * (d["routing_delay"] + d["vc_alloc_delay"]))
    return d["injection_delay"] + 2 * nic_latency + 2 * per_router + link_latency + tail


# ------------------------------------------------------------------ invariants and closed forms

@pytest.mark.parametrize("length", [1, 2, 4, 16])
@pytest.mark.parametrize("num, den, link_latency", [(1, 1, 1), (1, 2, 1), (1, 1, 7), (1, 3, 5)])
def test_one_packet_takes_the_closed_form_time(length, num, den, link_latency):
    """(Buffers deep enough for a credit's round trip: the closed form has no credit stall.)"""
    net = two_nodes(num, den, link_latency, buffer_flits=64)
    _, deliver, _, hops = run_trace(net, [0], [0], [1], [length])
    assert hops[0] == 1
    assert deliver[0] == closed_form(length, num / den, link_latency)


@pytest.mark.parametrize("vcs", [1, 2, 4])
def test_flits_are_conserved_both_ways_under_load(vcs):
    """Every flit injected is ejected once, at its destination: 400 packets of mixed lengths
    both ways over a link of 2/3 flit a cycle, created faster than it carries them."""
    rng = np.random.default_rng(7)
    n = 400
    times = np.sort(rng.integers(0, 600, n))
    src = rng.integers(0, 2, n)
    lengths = rng.integers(1, 9, n)
    eng, deliver, inject, hops = run_trace(two_nodes(2, 3, vcs=vcs), times, src, 1 - src,
                                           lengths)
    c = eng.counters()
    assert c["flits_created"] == c["flits_injected"] == c["flits_ejected"] == lengths.sum()
    assert c["packets_done"] == n and c["flits_buffered"] == 0
    assert c["bad_eject"] == c["buf_overflow"] == c["bad_front"] == c["bad_class"] == 0
    assert (hops == 1).all() and (inject >= times).all()
    for s in (0, 1):       # one link each way, 2/3 flit a cycle: no faster than its rate
        mine = src == s
        span = deliver[mine].max() - times[mine].min()
        assert span >= lengths[mine].sum() * 3 / 2


def test_the_same_inputs_give_the_same_times():
    net = two_nodes(1, 2)
    runs = [run_trace(net, [0, 0, 3, 5], [0, 1, 0, 0], [1, 0, 1, 1], [4, 3, 8, 1])[1]
            for _ in range(2)]
    np.testing.assert_array_equal(*runs)


def test_compute_ops_hold_their_node_and_follow_their_dependencies():
    """On one node, two compute ops without dependencies run one after the other (one compute
    unit); a dependency starts an op when its predecessor ends; a delay op takes no node."""
    g = graph([OP_COMPUTE, OP_COMPUTE, OP_COMPUTE, OP_DELAY, OP_COMPUTE],
              [0, 0, 1, -1, 1], [0, 0, 0, 0, 0], [10, 20, 5, 7, 3], edges=[(2, 3), (3, 4)])
    start, finish = op_times(g)
    assert sorted(zip(start[:2], finish[:2])) == [(0, 10), (10, 30)]
    assert (start[2], finish[2]) == (0, 5)
    assert (start[3], finish[3]) == (5, 12)
    assert (start[4], finish[4]) == (12, 15)


def test_a_stream_takes_its_sources_data_as_it_comes():
    """Ops 1-3 stream op 0's data (1000 cycles on node 0's compute unit), so each starts
    with it and cannot finish before it: op 1 (500 cycles on node 0's unit 2, a tail of 10)
    runs its bulk of 490, gives its unit up -- op 4, ready at 600, takes it for 100 -- and
    runs its tail when op 0 finishes: 1000 + 10; op 2 (2000 cycles, its data come faster
    than it works) ends at 2000 as if alone; a send of one packet (op 3, a tail of 7)
    finishes 7 after op 0. The stream is counted in deps, not in succ."""
    g = graph([OP_COMPUTE, OP_COMPUTE, OP_COMPUTE, OP_SEND, OP_COMPUTE, OP_DELAY],
              [0, 0, 1, 0, 0, -1], [0, 0, 0, 1, 0, 0], [1000, 500, 2000, 128, 100, 600],
              edges=[(5, 4)], deps=[0, 1, 1, 1, 1, 0], unit=[0, 2, 2, 0, 2, 0],
              stream_src=[-1, 0, 0, 0, -1, -1], tail=[0, 10, 10, 7, 0, 0])
    start, finish = op_times(g)
    assert list(zip(start[:5], finish[:5])) == [(0, 1000), (0, 1010), (0, 2000), (0, 1007),
                                                (600, 700)]


def test_a_streams_tail_goes_before_an_op_queued_on_its_unit():
    """Op 1 streams op 0's data (1000 cycles on node 0's compute unit): 1500 cycles on
    unit 2 with a tail of 10, so its bulk of 1490 outlasts its source and its tail follows
    the bulk at once, ahead of op 2 (100 cycles on unit 2, ready at 600 behind delay op 3,
    queued there): op 1 ends at 1500 as if alone, op 2 runs 1500-1600."""
    g = graph([OP_COMPUTE, OP_COMPUTE, OP_COMPUTE, OP_DELAY], [0, 0, 0, -1], [0] * 4,
              [1000, 1500, 100, 600], edges=[(3, 2)], deps=[0, 1, 1, 0], unit=[0, 2, 2, 0],
              stream_src=[-1, 0, -1, -1], tail=[0, 10, 0, 0])
    start, finish = op_times(g)
    assert list(zip(start[:3], finish[:3])) == [(0, 1000), (0, 1500), (1500, 1600)]


def test_a_bulk_resumed_after_a_tail_keeps_its_own_tail_ahead_of_the_queue():
    """Op 1 streams op 0 (200 cycles on unit 1) with 20 cycles on unit 2, all tail: it
    gives the unit up at once to op 3, which streams op 2 (1000 cycles on unit 0) with 1500
    on unit 2, a tail of 10. At 200 op 1's tail takes the unit from op 3's bulk (1290 left),
    which resumes at 220 behind it, ends at 1510, and its tail (op 2 long done) follows at
    once, ahead of op 4 (100 cycles on unit 2, ready at 600 behind delay op 5): op 3 ends
    at 1520, op 4 runs 1520-1620."""
    g = graph([OP_COMPUTE] * 5 + [OP_DELAY], [0] * 5 + [-1], [0] * 6,
              [200, 20, 1000, 1500, 100, 600], edges=[(5, 4)], deps=[0, 1, 0, 1, 1, 0],
              unit=[1, 2, 0, 2, 2, 0], stream_src=[-1, 0, -1, 2, -1, -1],
              tail=[0, 20, 0, 10, 0, 0])
    start, finish = op_times(g)
    assert list(zip(start[:5], finish[:5])) == [(0, 200), (0, 220), (0, 1000), (0, 1520),
                                                (1520, 1620)]


def test_streamed_ops_share_communications_memory_on_two_lanes():
    """Ops 0 and 2 (1000 cycles each on node 0's unit 5, the memory communication sends
    from) are read as they are sent (sends 3 and 4 stream them); op 1 (500 cycles on unit
    5) is not. Ops 0 and 2 run at once, on the unit's two lanes, each at half its budget:
    both end at 2000, and both sends start at 0. Op 1, ready at 0 too, waits for the first
    lane (a copy stored and forwarded whole takes one lane), 2000-2500."""
    g = graph([OP_COMPUTE] * 3 + [OP_SEND] * 2, [0] * 5, [0, 0, 0, 1, 1],
              [1000, 500, 1000, 128, 128], deps=[0, 0, 0, 1, 1], unit=[5, 5, 5, 0, 0],
              stream_src=[-1, -1, -1, 0, 2], tail=[0] * 5)
    start, finish = op_times(g)
    assert list(zip(start[:3], finish[:3])) == [(0, 2000), (2000, 2500), (0, 2000)]
    assert start[3] == start[4] == 0 and min(finish[3:]) >= 2000


def test_a_second_lane_takes_the_first_streamed_op_waiting():
    """On node 0's unit 5: ops 0 (1000 cycles) and 1 (200) are streamed (sends 4 and 5 read
    them as they go) and take the two lanes at cycle 0, each at half the budget; op 2 (100,
    not streamed) and op 3 (300, streamed: send 6), ready at 0 too, wait in that order. Op
    1 ends at 400; its lane takes op 3, passing op 2, which waits for the first lane: op 3
    at half rate ends at 1000, op 0 (800 left at 400) at 1500, op 2 runs 1500-1600."""
    g = graph([OP_COMPUTE] * 4 + [OP_SEND] * 3, [0] * 7, [0] * 4 + [1] * 3,
              [1000, 200, 100, 300, 128, 128, 128], deps=[0, 0, 0, 0, 1, 1, 1],
              unit=[5] * 4 + [0] * 3, stream_src=[-1] * 4 + [0, 1, 3], tail=[0] * 7)
    start, finish = op_times(g)
    assert list(zip(start[:4], finish[:4])) == [(0, 1500), (0, 400), (1500, 1600),
                                                (400, 1000)]


def test_a_chain_of_streams_longer_than_the_c_stack_could_recurse_runs():
    """50,000 one-flit sends 0 -> 1, each streaming the one before (so all start at cycle
    0, one starting the next), started in a thread of 512 KiB of stack: a recursion per
    stream would overflow it (the process would die). Each send's data is all sent before
    its source finishes, so with no tail it finishes with its source or its own delivery,
    whichever is later: the running maximum of the deliveries of the same sends made
    without streams (all at cycle 0 too, in the same order)."""
    n = 50_000
    g = graph([OP_SEND] * n, [0] * n, [1] * n, [32] * n, deps=[0] + [1] * (n - 1),
              stream_src=[-1] + list(range(n - 1)), tail=[0] * n)
    eng = new_engine(two_nodes())
    err = []

    def start():
        try:
            set_graph(eng, g)
        except BaseException as e:        # (reported below, not lost in the thread)
            err.append(e)
    old = threading.stack_size(512 * 1024)
    try:
        t = threading.Thread(target=start)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    assert not err
    assert eng.run(1 << 40, stop="all") == "done"
    start_t, finish = eng.op_times()
    alone = new_engine(two_nodes())
    set_graph(alone, graph([OP_SEND] * n, [0] * n, [1] * n, [32] * n))
    assert alone.run(1 << 40, stop="all") == "done"
    assert (start_t == 0).all()
    assert (finish == np.maximum.accumulate(alone.op_times()[1])).all()


def test_an_empty_graph_is_done_at_once():
    eng = new_engine(two_nodes())
    set_graph(eng, graph([], [], [], []))
    assert eng.run(1 << 40, stop="all") == "done"
    assert eng.now == 0


def test_a_send_at_the_flit_level_takes_the_closed_form_time():
    """One send of one full packet (4 flits of 32 bytes): the packet's zero-load latency."""
    eng = new_engine(two_nodes())
    set_graph(eng, graph([OP_SEND], [0], [1], [4 * 32]))
    assert eng.run(1 << 40, stop="all") == "done"
    start, finish = eng.op_times()
    assert finish[0] - start[0] == closed_form(4)


def flow_inputs(n_ops, sends, latency):
    """FlowArrays for ops of which `sends` are sends 0 -> 1 of zero-load latency `latency`."""
    lat = np.zeros(n_ops, np.int64)
    lat[sends] = latency
    pair = np.full(n_ops, -1, np.int32)
    pair[sends] = 0
    return FlowArrays(latency=lat, latency_full=lat, latency_whole=lat, pair=pair,
                      pair_src=[0], pair_dst=[1], pair_cap=[-1], cap_bytes=np.zeros(0),
                      cap_lanes=np.zeros(0, np.int32))


@pytest.mark.parametrize("num, den", [(1, 1), (1, 4)])
def test_a_flow_moves_at_its_channel_rate(num, den):
    """At the flow level a message alone moves at its slowest channel's rate: twice the bytes
    take exactly bytes / rate cycles longer (whatever latency it carries)."""
    rate = 32 * num / den                                  # bytes per cycle
    times = []
    for nbytes in (64_000, 128_000):
        eng = new_engine(two_nodes(num, den))
        set_graph(eng, graph([OP_SEND], [0], [1], [nbytes]), flow_inputs(1, [0], 17))
        assert eng.run(1 << 40, stop="all") == "done"
        start, finish = eng.op_times()
        times.append(finish[0] - start[0])
    assert times[1] - times[0] == pytest.approx(64_000 / rate, abs=1)


def _finishes(n, **over):
    """The finish cycles of n equal messages from node 0 to node 1, all sent at cycle 0."""
    eng = new_engine(two_nodes())
    set_graph(eng, graph([OP_SEND] * n, [0] * n, [1] * n, [256_000] * n, **over),
              flow_inputs(n, list(range(n)), 0))
    assert eng.run(1 << 40, stop="all") == "done"
    return eng.op_times()[1]


def test_two_flows_on_one_channel_share_it():
    """Two equal messages on one link at once, the NIC interleaving them (nic_fifo off),
    finish together, in twice the time of one."""
    one, two = _finishes(1, nic_fifo=False), _finishes(2, nic_fifo=False)
    assert two[0] == two[1]
    assert two[0] == pytest.approx(2 * one[0], rel=1e-3)


def test_two_flows_of_one_pair_go_in_order():
    """The same two messages sent in order (the default): the first in the time of one
    alone, the second one message's drain after it (its latency paid once more)."""
    one, two = _finishes(1), _finishes(2)
    assert two[0] == one[0]
    assert two[1] == pytest.approx(2 * one[0], rel=1e-3)


# ------------------------------------------------------------------ the inputs' checks

def test_a_hand_made_network_equals_the_compiled_one():
    """pysim's compilation of two nodes and a link gives these inputs, up to the order of the
    channels (compare them channel by channel, matched by kind and ends)."""
    import pysim
    from pysim.network import compile_network
    cfg = pysim.from_dict({"topology": {"kind": "graph", "nodes": [{"name": "a"},
                                                                   {"name": "b"}],
                                        "links": [{"a": "a", "b": "b"}]}})
    got, mine = compile_network(cfg).arrays, two_nodes()
    for k in ("n_nodes", "vcs", "buffer_flits", "n_classes", "routing_delay",
              "injection_delay", "va_arbiter", "sa_arbiter"):
        assert got[k] == mine[k], k

    def channels(a):
        return sorted(zip(a["ch_kind"].tolist(), a["ch_src"].tolist(), a["ch_dst"].tolist(),
                          a["ch_lat_cycles"].tolist(), (a["ch_num"] / a["ch_den"]).tolist()))
    assert channels(got) == channels(mine)
    for a in (got, mine):          # the routes name the link each way, the ejection at home
        rt = a.table().reshape(2, 2)
        assert [a["ch_kind"][rt[i, i]] for i in (0, 1)] == [CH_EJECT, CH_EJECT]
        assert (a["ch_src"][rt[0, 1]], a["ch_dst"][rt[0, 1]]) == (0, 1)


@pytest.mark.parametrize("over, names", [
    (dict(ch_dst=[0, 1, 1]), "ch_dst"),                      # a shape
    (dict(rt=[4, 2, 3]), "rt"),
    (dict(ch_src=[0.5, 1, 0, 1, 0, 1]), "ch_src"),           # a dtype
    (dict(ch_dst=[0, 1, 5, 0, 0, 1]), "ch_dst"),             # a node out of range
    (dict(rt=[4, 2, 9, 5]), "rt"),                           # a channel out of range
    (dict(ch_kind=[1, 1, 0, 0, 2, 7]), "ch_kind"),
    (dict(ch_num=[1, 1, 3, 3, 1, 1], ch_den=[1, 1, 2, 2, 1, 1]), "ch_num"),  # > 1 flit/cycle
    (dict(ch_par_base=[0, 1, 3, 3, 4, 5]), "ch_par_base"),   # a lane after its group's
    (dict(vcs=65), "vcs"),
    (dict(n_classes=3), "n_classes"),
    (dict(sw_alloc_delay=0), "sw_alloc_delay"),
    (dict(entry_class=True), "entry_class"),
    (dict(node_pos=[[0, 1]]), "node_pos"),
    (dict(rt=None), "rt"),                                   # missing
    (dict(rt=None, route=core.RouteRule(dict(                # routes by rule: a channel
        kind="rows", n=2, cls=[0, 0], off=[0, 7], vec=[-1, 2], exc_ptr=[0, 0, 0],
        exc_d=[], exc_c=[], diag=[4, 5]))), "route"),        # (2 + 7) out of range
    (dict(rt=None, route=core.RouteRule(dict(                # an exception's
        kind="rows", n=2, cls=[0, 0], off=[0, 0], vec=[-1, -1], exc_ptr=[0, 1, 2],
        exc_d=[1, 0], exc_c=[2, 6], diag=[4, 5]))), "route"),
    (dict(rt=None, route=core.RouteRule(dict(                # past its tmap's entries
        kind="dor", n=2, dims=[2], wrap=[0], coords=[0, 1], chan=[[2, -1], [-1, 3]],
        bidir=True, dateline=False, tmap=[0, 1, 2], diag=[4, 5]))), "route"),
    (dict(colour="red"), "colour"),                          # unknown
])
def test_bad_network_inputs_are_refused_naming_them(over, names):
    with pytest.raises(EngineInputError, match=names):
        two_nodes(**over)


@pytest.mark.parametrize("args, over, names", [
    (([OP_SEND], [0], [1], [-1]), {}, "size"),
    (([9], [0], [1], [1]), {}, "kind"),
    (([OP_COMPUTE, OP_COMPUTE], [0, 0], [0, 0], [1, 1]), dict(deps=[0, 1]), "deps"),
    (([OP_COMPUTE], [0], [0], [1]), dict(succ_ptr=[0, 1], succ=[3], deps=[0]), "succ"),
    (([OP_COMPUTE], [0], [0], [1]), dict(succ_ptr=[0, 0, 0]), "succ_ptr"),
    (([OP_COMPUTE], [0], [0], [1]), dict(packet_flits=0), "packet_flits"),
    (([OP_COMPUTE], [0], [0], [1]), dict(unit=[N_UNITS]), "unit"),
    (([OP_COMPUTE], [0], [0], [1.5]), {}, "size"),
    (([OP_COMPUTE], [0], [0], [1]), dict(share=[0.0]), "share"),
    (([OP_COMPUTE], [0], [0], [1]), dict(share=[1.5]), "share"),
    (([OP_COMPUTE], [0], [0], [1]), dict(stream_src=[0]), "stream_src"),
    (([OP_COMPUTE, OP_DELAY], [0, -1], [0, 0], [1, 1]), dict(stream_src=[-1, 0],
                                                           deps=[0, 1]), "stream_src"),
    (([OP_COMPUTE, OP_COMPUTE], [0, 0], [0, 0], [1, 1]), dict(stream_src=[-1, 0]), "deps"),
    (([OP_COMPUTE], [0], [0], [1]), dict(tail=[-1]), "tail"),
])
def test_bad_graph_inputs_are_refused_naming_them(args, over, names):
    with pytest.raises(EngineInputError, match=names):
        graph(*args, **over)


def test_a_graph_naming_a_node_the_network_lacks_is_refused():
    g = graph([OP_SEND], [0], [2], [64])
    with pytest.raises(EngineInputError, match="node"):
        g.check(n_nodes=2)


def test_bad_flow_inputs_are_refused_naming_them():
    good = dict(latency=[1], latency_full=[1], latency_whole=[1], pair=[0], pair_src=[0],
                pair_dst=[1], pair_cap=[-1], cap_bytes=np.zeros(0),
                cap_lanes=np.zeros(0, np.int32))
    FlowArrays(**good)
    for over, name in ((dict(latency=[1, 2]), "latency"), (dict(pair=[1]), "pair"),
                       (dict(cap_bytes=[0.0], cap_lanes=[1]), "cap_bytes"),
                       (dict(pair_dst=[1, 0]), "pair_dst")):
        with pytest.raises(EngineInputError, match=name):
            FlowArrays(**{**good, **over})


def test_the_engine_takes_only_typed_inputs():
    with pytest.raises(TypeError, match="NetworkArrays"):
        new_engine(two_nodes().as_dict())
    eng = new_engine(two_nodes())
    with pytest.raises(TypeError, match="GraphArrays"):
        set_graph(eng, {"kind": []})


def test_the_arbiters_are_chosen_by_name():
    """Each registered arbiter names the engine inputs that pick it, and they differ."""
    assert {tuple(a.inputs.items()) for a in VC_ARBITERS.values()} == \
        {(("va_arbiter", 0),), (("va_arbiter", 1),)}
    assert {tuple(a.inputs.items()) for a in SW_ARBITERS.values()} == \
        {(("sa_arbiter", 0),), (("sa_arbiter", 1),)}
    assert set(VC_ARBITERS) == set(limits.VC_ARBITERS)
    assert set(SW_ARBITERS) == set(limits.SW_ARBITERS)
    for va in VC_ARBITERS:
        for sa in SW_ARBITERS:
            net = two_nodes(**arbiter_inputs(va, sa))
            _, deliver, _, _ = run_trace(net, [0], [0], [1], [4])
            assert deliver[0] == closed_form(4)      # alone, every arbiter grants at once
