"""Reference routes, pair by pair in plain Python from the routings' definitions, to hold the
rules csim looks routes up by (pysim/routing.py, csim/_routes.pxd) to: dimension order on
meshes, rings and tori, and a cluster's up/down routes (pysim/cluster.py's docstring)."""
import numpy as np

from pysim import cluster

# cluster shapes (topology.kind = 'cluster' keys) that the routing tests cover
CLUSTERS = [
    dict(node="dgx-a100", node_count=3, fabric="fat-tree"),                    # two tiers
    dict(node="dgx-a100", node_count=6, fabric="rail-optimised", radix=8),     # three
    dict(node="dgx-h100", node_count=5, fabric="fat-tree", radix=8),
    dict(node="dgx-h100", node_count=12, fabric="rail-optimised", radix=8),
    dict(node="dgx-h100", node_count=9, fabric="fat-tree", radix=6, oversubscription=2.0),
    dict(node="dgx-h100", node_count=2, fabric="rail-optimised", radix=32),     # one leaf/rail
    dict(node="dgx-a100", node_count=2, fabric="fat-tree", radix=16),           # m1 = 8
    dict(node="dgx-a100", node_count=1),                                       # no fabric
    dict(node="dgx-h100", node_count=1, nvls=True),                            # + NVLS engine
]


def dor_table(topo, dateline):
    """table[u, d] by dimension order: the lowest dimension where u and d differ; where it
    wraps (dateline routing), the shorter way round, at distance k/2 + from an even coordinate
    and - from an odd one, + only on a ring one way round; else towards d."""
    chan = {}
    for c in range(topo.n_channels):
        chan[(topo.ch_src[c], topo.ch_dim[c], topo.ch_dir[c])] = c
    n = topo.n_nodes
    table = np.full((n, n), -1, np.int32)
    for u in range(n):
        for d in range(n):
            a, b = [int(x) for x in topo.coords[u]], [int(x) for x in topo.coords[d]]
            diff = [i for i in range(len(a)) if a[i] != b[i]]
            if not diff:
                continue
            i = diff[0]
            k = topo.dims[i]
            if dateline and topo.wrap[i]:
                if not topo.bidirectional:
                    step = 1
                else:
                    off = (b[i] - a[i]) % k
                    step = 1 if 2 * off < k or (2 * off == k and a[i] % 2 == 0) else -1
            else:
                step = 1 if b[i] > a[i] else -1
            table[u, d] = chan[(u, i, step)]
    return table


def cluster_table(topo):
    """table[u, d] of a cluster (topology.kind = 'cluster'), entry by entry: a GPU to its own
    node's GPUs through the NVSwitch, else by its NIC up to its leaf; a switch down towards d
    where d lies below it, else up by the port d's position picks (D-mod-k: a leaf's uplink
    (pos % spines) * m1 on two tiers, pos % up on three; a spine's port to the core group
    (leaf's index in its pod) % cores, the first of its m2 links). NVLink SHARP's engine
    (nvls0): through the NVSwitch to and from every GPU."""
    info = topo.cluster
    G, N, E = info["gpus_per_node"], info["nodes"], info["gpus"]
    p = cluster.plan(info["fabric"], N, G, info["radix"], (info["down"] + info["up"]) /
                     info["up"] - 1.0) if N > 1 else None
    assert p is None or (p.down, p.up) == (info["down"], info["up"])
    by_pair = {}
    for c in range(topo.n_channels):
        by_pair.setdefault((topo.ch_src[c], topo.ch_dst[c]), []).append(c)
    names = {name: i for i, name in enumerate(topo.node_names)}
    n = topo.n_nodes
    table = np.full((n, n), -1, np.int32)

    def link(a, b, k=0):
        return by_pair[(a, b)][k]

    nvs = [names[f"nvswitch{i}"] for i in range(N)]
    leaf = [names[f"leaf{i}"] for i in range(info["leaves"])]
    spine = [names[f"spine{i}"] for i in range(info["spines"])]
    core = [names[f"core{i}"] for i in range(info["cores"])]
    nvls = names.get("nvls0")
    dests = list(range(E)) + ([nvls] if nvls is not None else [])
    for d in dests:
        if d == nvls:
            for g in range(E):
                table[g, d] = link(g, nvs[0])
            table[nvs[0], d] = link(nvs[0], nvls)
            continue
        nd = d // G
        if nvls is not None:
            table[nvls, d] = link(nvls, nvs[0])
        for g in range(E):
            if g != d:
                table[g, d] = link(g, nvs[g // G]) if g // G == nd else \
                    link(g, leaf[int(p.leaf[g])])
        table[nvs[nd], d] = link(nvs[nd], d)
        if p is None:
            continue
        ld, pos = int(p.leaf[d]), int(p.pos[d])
        for li, x in enumerate(leaf):
            if li == ld:
                table[x, d] = link(x, d)
            elif p.tiers == 2:
                j = (pos % p.spines) * p.m1
                table[x, d] = link(x, spine[j // p.m1], j % p.m1)
            else:
                j = pos % p.up
                table[x, d] = link(x, spine[(li // p.pod_leaves) * p.spines + j])
        if p.tiers == 2:
            for si, x in enumerate(spine):
                table[x, d] = link(x, leaf[ld])     # (the first of the m1 links)
        elif p.tiers == 3:
            pod = ld // p.pod_leaves
            grp = (ld % p.pod_leaves) % p.cores
            for si, x in enumerate(spine):
                if si // p.spines == pod:
                    table[x, d] = link(x, leaf[ld])
                else:
                    table[x, d] = link(x, core[(si % p.spines) * p.cores + grp])
            for ci, x in enumerate(core):
                table[x, d] = link(x, spine[pod * p.spines + ci // p.cores])
    return table
