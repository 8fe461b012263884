"""Limits a run met that the user did not choose, said in its summary (`result.notes`).

A run's numbers can be capped by something left at its default: a NIC slower than the links
it feeds (a link-bandwidth sweep then stops at the NIC's rate), or a default rank placement
whose groups talk over a slow path (PCIe between GPUs of one data-parallel group). Each check
here looks at what the run did (which channels were busy) and names the key that would
lift the limit.
"""
from __future__ import annotations

import numpy as np

from pysim.network import CH_NET

BUSY = 0.5          # a channel busy this share of the run or more is a limit worth naming


def nic_limit(network, cfg, flits, cycles, unit_flits=None):
    """A note if an endpoint's NIC, slower than the widest link it sends on, was busy for
    most of the run (its messages left no faster than the NIC), else None. `flits`: per
    channel; or `unit_flits`: per link and NIC of network.unit_first, each of its lanes'
    (the flow level's, alike over a link's lanes)."""
    if cycles <= 0:
        return None
    topo = network.topo
    if unit_flits is not None:
        unit_flits = np.asarray(unit_flits)

        def flits_at(c):                    # (a lane's: its link's or NIC's)
            return unit_flits[np.searchsorted(network.unit_first, c, "right") - 1]
    else:
        flits = np.asarray(flits)

        def flits_at(c):
            return flits[c]
    clock, fb = cfg.network.clock_ghz, cfg.network.flit_bytes
    num, den = network.ch_num, network.ch_den            # (rate: flits per cycle, read
    worst = None                                         # where needed, not per lane)
    for way, nic_ch, mine, far in (("injection", network.inj_ch, network.ch_src,
                                    network.ch_dst),
                                   ("ejection", network.ej_ch, network.ch_dst,
                                    network.ch_src)):
        nodes = np.flatnonzero(nic_ch >= 0)
        at = nic_ch[nodes]
        share = flits_at(at) / (cycles * (num[at] / den[at]))
        busy = nodes[share >= BUSY]
        if not busy.size:
            continue
        # (the busy NICs' nodes' links that carried flits, in channel order)
        is_busy = np.zeros(topo.n_nodes, bool)
        is_busy[busy] = True
        mask = is_busy[mine]
        mask &= network.ch_kind == CH_NET
        mask &= (np.repeat(unit_flits != 0, network.unit_lanes) if unit_flits is not None
                 else flits != 0)
        links = np.flatnonzero(mask)
        del mask
        links = links[np.argsort(mine[links], kind="stable")]     # (by node, then channel)
        owner = mine[links]
        for node in busy:                           # (the busy NICs alone, one by one)
            c = int(nic_ch[node])
            rate_c = num[c] / den[c]
            used = flits_at(c) / (cycles * rate_c)
            per = {}                          # the node's links in use, lanes summed
            lo, hi = np.searchsorted(owner, node), np.searchsorted(owner, node, "right")
            for k in links[lo:hi]:
                per[int(far[k])] = per.get(int(far[k]), 0.0) + num[k] / den[k]
            widest = max(per.values(), default=0.0)
            if widest > rate_c * 1.001 and (worst is None or used > worst[2]):
                worst = (way, int(node), used, rate_c, widest)
    if worst is None:
        return None
    way, node, used, nic, widest = worst
    key = f"network.{way}_gbps"
    if cfg.is_set(key) or cfg.is_set("topology.nic"):
        src = f"as configured ({key}, topology.nic)"
    else:
        src = f"the default: one flit per cycle ({key}, topology.nic)"
    verb, links = ("injects", "sends on") if way == "injection" else ("ejects", "receives on")
    return (f"{topo.node_names[node]}'s NIC {verb} {nic * fb * clock:g} GB/s, {src}, less "
            f"than the {widest * fb * clock:g} GB/s of the links it {links}, and was busy "
            f"{100 * used:.0f}% of the run: its messages were capped by the NIC; raise {key} "
            f"to lift it")


def slow_group_path(links, cfg, topo):
    """A note if the busiest link of a training run with no memory plan is a slow detour (a
    link to a PCIe switch or a host, slower than the widest link at an NPU) while the user
    chose no rank placement (workload.parallel.order, workload.group, workload.ring_order):
    the default placement put a group's NPUs where they talk the slow way. `links`: the
    result's per-channel report (a pysim.stats.LinkTable); `topo`: the topology it ran on."""
    if not links or any(cfg.is_set(k) for k in ("workload.group", "workload.ring_order")):
        return None
    par = cfg.workload.parallel or {}
    if "order" in par or cfg.workload.memory.policy != "none":
        return None                      # (a memory plan's transfers fill links of their own)
    cols, _, first = links.by_run()          # (a run of alike rows at a time)
    top = links[int(first[np.argmax(cols["utilisation"])])]    # (the first of the busiest)
    kinds = dict(zip(topo.node_names, topo.node_kinds))
    npu = np.array([k == "npu" for k in topo.node_kinds])
    at_npu = npu[cols["src"]] | npu[cols["dst"]]
    widest = float(cols["bandwidth_gbps"][at_npu].max(initial=0.0))
    detour = {kinds.get(top["src"]), kinds.get(top["dst"])} & {"switch", "host"}
    if top["utilisation"] < 0.05 or not detour or top["bandwidth_gbps"] >= widest:
        return None
    return (f"the busiest link, {top['src']}->{top['dst']} ({top['bandwidth_gbps']:g} GB/s, "
            f"utilisation {top['utilisation']:.3f}), is not between NPUs: the default rank "
            f"placement (workload.parallel.order = ['tp', 'dp', 'pp']) routes some group's "
            f"traffic through it; workload.parallel.order or workload.group choose another")

