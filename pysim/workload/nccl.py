"""Collectives as NCCL runs them on a cluster (`workload.algorithm = "nccl"`).

NCCL moves data in channels (each a ring or a pair of trees over every rank, driven by its
own thread block) with one of three protocols:

- LL: 8 bytes of data and an 8-byte flag in each 16-byte store, so twice the bytes on the
  wire, and the lowest latency per step;
- LL128: 120 bytes of data in each 128-byte line (128/120 the bytes on the wire);
- Simple: the data alone, with the highest latency per step.

Algorithms, at both levels of a cluster (NVLink inside a node, InfiniBand between nodes):

- ring: every rank on one ring per channel, the ranks of a node consecutive (inside, over
  NVLink through the NVSwitch; between nodes, from one GPU's NIC to the next node's GPU); each
  channel starts its node's part of the ring at a different GPU, so the channels leave each
  node through different NICs. All-reduce is a reduce-scatter then an all-gather, 2 (p - 1)
  steps of n / (C p) bytes per channel;
- tree: the ranks of a node on a chain, the chains' heads on a binary tree over the nodes,
  and the second tree of each pair mirrored (NCCL's double binary tree, so a node that is a
  leaf of one tree is interior in the other); data is reduced up and broadcast down in slices
  that pipeline;
- nvls (NVLink SHARP, one node): the NVSwitch reduces and multicasts. Each GPU sends its data
  into the switch, receives its reduced share, sends that share back to be multicast and
  receives every share: n + n/8 bytes each way per GPU instead of the ring's 2 n (p - 1) / p.
  The switch's reduction engine is the cluster's `nvls<k>` node (`topology.nvls = true`).

Each step pays the protocol's latency for its transport (a delay before the send), and each
collective NCCL's base latency once. `workload.nccl_algorithm` / `nccl_protocol` = "auto"
picks, per size, the pair that NCCL's own alpha-beta cost model (`model_seconds`) says is
fastest, as NCCL does by default; the latencies are NCCL's tuning constants (NVIDIA/nccl,
src/graph/tuning.cc, releases 2.19-2.23) and the bandwidths the links' own.

This module is NCCL's plan and cost (what it runs, how it lays out rings and slices, what its
model says a collective takes); `pysim.workload.nccl_graph` builds the plan's ops.
"""
from __future__ import annotations

import math

from pysim.errors import ConfigError
from pysim.schema import Key, declare

PROTOCOLS = ("LL", "LL128", "Simple")
ALGOS = ("ring", "tree", "nvls")
WIRE = {"LL": 2.0, "LL128": 128.0 / 120.0, "Simple": 1.0}   # wire bytes per data byte

# NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, 2.19-2.23), microseconds: the base
# latency of a collective per (algorithm, protocol), and the latency of one step per
# transport, algorithm and protocol.
BASE_US = {("ring", "LL"): 6.6, ("ring", "LL128"): 14.0, ("ring", "Simple"): 8.4,
           ("tree", "LL"): 6.8, ("tree", "LL128"): 14.0, ("tree", "Simple"): 8.4,
           ("nvls", "Simple"): 0.0}
STEP_US = {
    "nvlink": {("ring", "LL"): 0.6, ("ring", "LL128"): 1.9, ("ring", "Simple"): 3.4,
               ("tree", "LL"): 0.6, ("tree", "LL128"): 1.25, ("tree", "Simple"): 4.0,
               ("nvls", "Simple"): 25.0},
    "net": {("ring", "LL"): 2.7, ("ring", "LL128"): 4.0, ("ring", "Simple"): 14.0,
            ("tree", "LL"): 5.0, ("tree", "LL128"): 8.5, ("tree", "Simple"): 14.0,
            ("nvls", "Simple"): 18.0},
}
# A step runs in the time NCCL's tuning model gives it, on every machine. On a DGX A100 the
# one-channel nccl-tests latencies on 2 to 8 GPUs (NVIDIA/nccl-tests #123, 2022: 10.0 to 33.7
# us, about 4 us more per GPU) grow with the kernels one host thread launches (`-g`), not with
# the ring's steps: the same nccl-tests on one 8 x A100-SXM4-80GB NVSwitch server takes a flat
# 38-40 us from 8 bytes to 16 KiB with one thread driving the 8 GPUs and 17.7-25.7 us with a
# process per GPU (tests/data/nccl_tests_harness_a100.json). The one-process runs hold
# NCCL's 0.6 us: 8 GPUs, 8 bytes, one channel, 6.6 + 14 x (0.6 + the route's 0.2) = 17.8 us
# against 17.7 measured. bench/nccl_tests.py models the one-thread launch.


def step_us(algo, proto, transport):
    """The latency a step of (algo, proto) takes over the transport ('nvlink' or 'net'):
    NCCL's tuning model's (STEP_US), on every machine."""
    return STEP_US[transport][(algo, proto)]


# NVLink's data rate: NCCL's topology model takes 20.0 GB/s of data per NVLink 3 link (A100)
# and 20.6 per NVLink 4 link (H100) each way (NVIDIA/nccl src/graph/topo.h, SM80_NVLINK_BW and
# SM90_NVLINK_BW), of the links' 25 GB/s line rate each way (A100 and H100 datasheets: 12 and
# 18 links of 50 GB/s both ways): the rest is NVLink's packet headers and flow control. So
# 240 of 300 GB/s per A100 and 370.8 of 450 per H100 (S. Jeaugey, NCCL, NVIDIA/nccl-tests #212,
# 2024: "an effective NVLink bandwidth of 370GB/s").
NVLINK_DATA = {"a100": 20.0 / 25.0, "h100": 20.6 / 25.0}
# NVLink SHARP's multimem loads and stores reach 85% of that on Hopper (NVIDIA/nccl
# src/graph/tuning.cc, nvlsEfficiency).
NVLS_EFFICIENCY = 0.85
# The channels NCCL runs on an 8-GPU NVSwitch node of either kind: its ring search gives each
# channel 40 GB/s (A100: 12 links x 20 = 240 GB/s, 6 channels) or 60 GB/s (H100: 18 x 20 =
# 360, 6 channels) per GPU (src/graph/search.cc, speedArrayIntra / sm90SpeedArrayIntra), the
# search doubles channels of at least 25 GB/s and the connection of the rings doubles them
# again (src/graph/connect.cc): 24 channels, each one thread block on its own SM. NVLink
# SHARP runs 16 (src/transport/nvls.cc, NCCL_NVLS_NCHANNELS). (NCCL 2.18.)
NCCL_CHANNELS = 24
NVLS_CHANNELS = 16
MAX_CHANNELS = 64             # the most NCCL runs (MAXCHANNELS: 32 in 2.18, 64 later)
# Below a size NCCL runs fewer channels: while bytes < channels x threads x threshold it
# drops a channel (src/enqueue.cc, getAlgoInfo), with threads per channel 512 (LL, Simple)
# or 640 (LL128) and thresholds of 8 bytes a thread for LL (times the ranks on a ring), 8
# for LL128 and 64 for Simple (src/include/comm.h, NCCL_*_THREAD_THRESHOLD).
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THREAD_BYTES = {"LL": 8, "LL128": 8, "Simple": 64}
# What one channel's thread block moves per second in LL and LL128 (its loads and stores of
# flags, not the links, bound it), from the same tuning model: LL's bus bandwidth in all at
# most LL_MAX (one node; two nodes; more, on the DGX's host CPUs: AMD for A100, Intel for
# H100), LL128's per channel at most LL128_CHANNEL.
LL_MAX_GBPS = {"a100": (87.7, 22.5, 19.0), "h100": (141.0, 39.0, 20.4)}
LL128_CHANNEL_GBPS = {"a100": 20.0, "h100": 36.7}
# NCCL's ring pipeline (ring_rounds): the chunk one loop moves per rank and channel, per
# protocol, from its buffers of NCCL_STEPS = 8 steps (src/include/devcomm.h): Simple's 4 MiB
# buffer (NCCL_BUFFSIZE's default) in steps of 512 KiB, a chunk of ALLREDUCE_CHUNKSTEPS = 4
# of them, moved in two slices of ALLREDUCE_SLICESTEPS = 2 steps, a slice at least a 32nd
# of that (src/device/prims_simple.h: max(nelem / 2, sliceSize / 32)); LL's 8 lines x 512
# threads x 8 steps of 16-byte lines, half of each line data (32 KiB a step); LL128's 120
# words x 640 threads x 8 steps of 8 bytes, 120 of each 128 bytes data (576,000 a step).
CHUNK_BYTES = {"Simple": 4 * (1 << 19), "LL": (8 * 512 * 16) // 2,
               "LL128": 120 * 640 * 8 * 15 // 16}
MIN_SLICE = 2 * (1 << 19) // 32
# Up to 2.19 NCCL lays a ring all-reduce's last loop out chunk-major (src/collectives/device/
# all_reduce.h, runRing, 2.18.5 and 2.19.3): the chunk of each rank and channel is the rest
# over channels x ranks rounded up to whole grains (in LL128 a thread's 8 lines' 60 bytes of
# data, times the channel's threads, NCCL_LL128_MAX_NTHREADS = 640 or fewer where one
# channel runs (getAlgoInfo), halved: "it makes performance much, much smoother"), at
# (rank chunk x channels + channel) x chunk, so that the last of the ranks' chunks are short
# or empty on every channel. All the channels of an NVSwitch node run one ring order, the
# ranks in turn (NCCL's log of its rings on an HGX A100, NVIDIA/nccl-tests #100), so at a
# step a rank sends on every channel at once or idles. From 2.20 each channel's share is
# split evenly over the ranks (src/enqueue.cc, computeCollLastChunkInfo), as pysim shares
# the rest otherwise. pysim lays LL128 out so for those releases: an LL128 warp forwards its
# slice of 16 lines (1,920 bytes of data) only once every line of it has come
# (src/collectives/device/prims_ll128.h, recvReduceSendCopy: it reloads the slice until no
# flag is stale), and a channel's 20 warps hold a step of up to 38,400 bytes in one slice
# each, so such a step moves as a whole, as pysim moves a step. LL's threads forward each
# 16-byte line as it comes (prims_ll.h, readLL), pipelining a step at the grain of a line,
# which pysim's whole steps with the rest shared evenly stand for better than whole steps
# of NCCL's uneven chunks would; LL keeps the even share.
CHUNK_MAJOR_RELEASES = ("2.18", "2.19")
GRAIN_BYTES = {"LL128": 60}
MAX_LOOP_ROUNDS = 8           # loops past this many are built as this many rounds of alike ones
TREE_SLICE = 1 << 18          # a tree pipelines slices of at most this many bytes per channel
MAX_SLICES = 16
# NVLink SHARP moves its data a loop at a time: each of its channels one chunk per rank (the
# rank's share of the loop), the chunk 128 KiB, shrunk to 64, 32 and 16 KiB when the bytes are
# fewer than 64, 8 and 2 times channels x ranks x chunk (src/enqueue.cc, computeColl). pysim
# pipelines the loops as slices (each a reduction that waits for every rank's part of it),
# at most NVLS_MAX_SLICES of them
NVLS_CHUNK = 1 << 17
NVLS_MAX_SLICES = 64
# A channel of NVLink SHARP is one thread block, which copies its part of the rank's data into
# the switch's buffer (its scatter warps), reduces and multicasts its rank's chunk of it
# (multimem loads and stores) and copies the result out (its gather warps); NCCL runs 16 of
# them because fewer do not reach NVLS's rate ("NVLS should not need more than 16 channels to
# get peak BW", src/enqueue.cc, getAlgoInfo, 2.18.5; from 2.20, buffers registered with NVLS,
# whose thread blocks skip the copies, "only need 4/5 channels to saturate bandwidth"). So a
# channel moves at most 1/NVLS_PEAK_CHANNELS of the links' NVLS rate, and a collective whose
# data sits on fewer channels goes at the pace of its busiest one (nvls_factor). Up to 2.19
# NCCL lays each loop out channel by channel (src/collectives/device/all_reduce.h, the NVLS
# RunWorkElement: channel b's part of a loop is ranks x chunk bytes at b x ranks x chunk), so
# below channels x ranks x chunk bytes (2 MiB on a DGX H100) the data sits on the first
# channels, all of it on one up to 128 KiB; from 2.20 each channel takes an even share
# (src/enqueue.cc, the channels' countPerChannels). NVLS_LAYOUT_RELEASES are the former.
NVLS_PEAK_CHANNELS = 16
NVLS_LAYOUT_RELEASES = ("2.18", "2.19")

declare(
    Key("workload", "nccl_algorithm", "str", "auto", "-",
        "Collectives by workload.algorithm = 'nccl': 'ring', 'tree', 'nvls' (NVLink SHARP, "
        "one node with topology.nvls) or 'auto' (NCCL's cost model picks per size).",
        None, lambda: ["auto", *ALGOS]),
    Key("workload", "nccl_protocol", "str", "auto", "-",
        "Collectives by workload.algorithm = 'nccl': 'LL', 'LL128', 'Simple' or 'auto'.",
        None, lambda: ["auto", *PROTOCOLS]),
    Key("workload", "nccl_channels", "int", 0, "-",
        "Collectives by workload.algorithm = 'nccl': channels (rings or tree pairs, each one "
        "thread block on its own SM) at most; 0: NCCL's on an 8-GPU NVSwitch node (24; NVLink "
        "SHARP 16), fewer for small sizes as NCCL runs them.",
        (lambda x: 0 <= x <= MAX_CHANNELS, f"an integer from 0 to {MAX_CHANNELS}")),
    Key("workload", "nccl_tuning", "str", "2.23", "-",
        "Collectives by workload.algorithm = 'nccl': the NCCL release whose tuning model "
        "picks the algorithm and protocol per size ('2.18', '2.19', '2.20' (2.19's constants "
        "are 2.20's) or '2.23'); up to 2.19 an LL128 ring all-reduce also lays out its last "
        "loop's chunks as those releases do (chunk-major, the last ranks' chunks short or "
        "empty), and NVLink SHARP its loops channel by channel (below 2 MiB on a DGX H100 "
        "the data on the first channels, each moving a 16th of NVLS's rate at most); "
        "otherwise the collective runs alike whatever the release.",
        None, lambda: list(TUNING_RELEASES)),
)

SUPPORTED = {"all_reduce", "reduce_scatter", "all_gather"}


class Machine:
    """What the NCCL model needs of a cluster: the node of each rank, the links' data rates
    and whether the NVSwitches reduce (nvls)."""

    def __init__(self, info, order, names=None):
        self.G = int(info["gpus_per_node"])
        self.node_of = [int(n[3:]) // self.G if n.startswith("gpu") and n[3:].isdigit()
                        else None for n in order]
        if None in self.node_of:
            bad = order[self.node_of.index(None)]
            raise ConfigError(f"workload.algorithm = 'nccl': {bad!r} is not a GPU of the "
                              f"cluster (the ranks are GPUs gpu0, gpu1, ...)")
        self.nodes = len(set(self.node_of))
        self.preset = info.get("preset", "a100")
        if self.preset not in LL_MAX_GBPS:
            self.preset = "h100" if "h100" in self.preset else "a100"
        self.nvdata = NVLINK_DATA[self.preset]
        self.nvlink = float(info["nvlink_gbps"]) * self.nvdata       # GB/s of data
        self.nic = float(info["nic_gbps"])
        self.nvls = bool(info.get("nvls"))
        self.clock = float(info["clock_ghz"])

    def cap(self, proto, channels):
        """Bus bandwidth (GB/s) the protocol's channels can move at most, or None."""
        if proto == "LL":
            return LL_MAX_GBPS[self.preset][min(self.nodes, 3) - 1 if self.nodes < 4 else 2]
        if proto == "LL128":
            return LL128_CHANNEL_GBPS[self.preset] * channels
        return None

    def hop_factor(self, proto, channels, same_node):
        """How much longer than the link alone allows a channel's step takes under the
        protocol's cap: the ratio of the channel's share of the link to its cap (>= 1)."""
        cap = self.cap(proto, channels)
        if cap is None:
            return 1.0
        if same_node:
            share = self.nvlink / WIRE[proto] / channels
        else:
            share = self.nic / WIRE[proto] / max(1, channels // max(1, self.G))
        return max(1.0, share / (cap / channels))


def _bus(m, p, channels):
    """(ring, tree) data rates of the slowest level, GB/s per direction per rank."""
    intra = m.nvlink
    if m.nodes == 1:
        return intra, intra
    per_node = p // m.nodes
    inter = m.nic * min(channels, per_node)        # the NICs a node's channels leave by
    return min(intra, inter), min(intra, inter)


def nvls_chunk(nbytes, p, channels=NVLS_CHANNELS):
    """NCCL's NVLS chunk for nbytes over p ranks (bytes)."""
    ops, chunk = channels * p, NVLS_CHUNK
    for times, smaller in ((64, 1 << 16), (8, 1 << 15), (2, 1 << 14)):
        if nbytes < times * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def _nvls_slices(nbytes, p, channels=NVLS_CHANNELS):
    loop = channels * p * nvls_chunk(nbytes, p, channels)
    return _split(nbytes, max(1, min(NVLS_MAX_SLICES, -(-nbytes // loop))))


def nvls_busiest(nbytes, p, channels=NVLS_CHANNELS, release="2.23"):
    """The bytes (of each rank's data) on NVLink SHARP's busiest channel: up to 2.19
    (NVLS_LAYOUT_RELEASES) loops of channels x ranks x chunk laid out channel by channel, so
    the first channel holds ranks x chunk of every loop and of the last its rest, up to that;
    from 2.20 an even share."""
    n, c = int(nbytes), max(1, int(channels))
    if release not in NVLS_LAYOUT_RELEASES:
        return -(-n // c)
    per = p * nvls_chunk(n, p, c)
    full, rest = divmod(n, c * per)
    return full * per + min(rest, per)


def nvls_factor(nbytes, p, channels=NVLS_CHANNELS, release="2.23"):
    """How much longer than the links allow NVLink SHARP takes because a channel moves at
    most 1/NVLS_PEAK_CHANNELS of the links' NVLS rate: the busiest channel's bytes at that
    rate over all the bytes at the links' (>= 1)."""
    n = max(1, int(nbytes))
    return max(1.0, NVLS_PEAK_CHANNELS * nvls_busiest(n, p, channels, release) / n)


def nvls_seconds(nbytes, m, p, channels=NVLS_CHANNELS, release="2.23"):
    """The closed form of NVLink SHARP as pysim runs it (nccl_graph._nvls): NCCL's NVLS
    latency, then the slices' bytes, n (1 + 1/p) each way per GPU and the first slice's fill
    again, at the links' NVLS rate, times nvls_factor (the busiest channel's pace)."""
    first = _nvls_slices(nbytes, p, channels)[0]
    rate = m.nvlink * NVLS_EFFICIENCY * 1e9
    return STEP_US["nvlink"][("nvls", "Simple")] * 1e-6 + \
        nvls_factor(nbytes, p, channels, release) * (nbytes + first) * (1 + 1 / p) / rate


def model_seconds(collective, algo, proto, nbytes, m, p, channels, latency=True):
    """NCCL's alpha-beta estimate of one collective (seconds), or None where the pair does
    not apply: base latency + steps x step latency + bytes / bandwidth, the bandwidth the
    slowest level's data rate times the protocol's efficiency (latency=False: the bytes'
    term alone, which no run can beat)."""
    if (algo, proto) not in BASE_US or (algo != "ring" and collective != "all_reduce"):
        return None
    if algo == "nvls" and (not m.nvls or m.nodes > 1):
        return None
    ring_bw, tree_bw = _bus(m, p, channels)
    eff = 1.0 / WIRE[proto]
    cap = m.cap(proto, channels)
    # the protocol's cap bounds the bus bandwidth: bus bytes (nccl-tests' convention) / cap
    bus = nbytes * (2 * (p - 1) / p if collective == "all_reduce" else (p - 1) / p)
    t_cap = 0.0 if cap is None else bus / (cap * 1e9)
    N = m.nodes
    on = 1.0 if latency else 0.0
    lat = BASE_US[(algo, proto)]
    steps = {"all_reduce": 2 * (p - 1)}.get(collective, p - 1)
    if algo == "ring":
        inter = 0 if N == 1 else (2 * (N - 1) if collective == "all_reduce" else N - 1)
        lat += (steps - inter) * STEP_US["nvlink"][(algo, proto)] + \
            inter * STEP_US["net"][(algo, proto)]
        # per rank, each way, a fraction N / p of it between nodes (each channel crosses
        # between nodes N times in p hops, and the channels' rotations spread the crossings
        # over every GPU's NIC)
        moved = nbytes * steps / p
        t_bw = moved * (1 - N / p if N > 1 else 1) / (m.nvlink * eff * 1e9)
        if N > 1:
            t_bw = max(t_bw, moved * N / p / (m.nic * eff * 1e9))
        return on * lat * 1e-6 + max(t_bw, t_cap)
    if algo == "tree":
        q = p // N                                   # ranks per node, on a chain
        depth = (q - 1) * STEP_US["nvlink"][(algo, proto)] + \
            max(0, math.ceil(math.log2(N))) * STEP_US["net"][(algo, proto)]
        lat += 2 * depth
        # each way per rank: the chain's up and down traffic, 2 n (q - 1) / q over the
        # channels' rotations; per node on the NICs: 2 n (up once, down to two children in
        # the tree where it is interior, its half of the data in each tree)
        intra = 2 * nbytes * (q - 1) / q / (m.nvlink * eff * 1e9) if q > 1 else 0
        inter = 2 * nbytes / (m.nic * min(channels, q) * eff * 1e9) if N > 1 else 0
        return on * lat * 1e-6 + max(intra, inter, t_cap)
    lat += STEP_US["nvlink"][(algo, proto)]        # nvls: its slices' traffic, and the
    first = _nvls_slices(nbytes, p)[0]             # first slice's fill of the pipeline
    return on * lat * 1e-6 + (nbytes + first) * (1 + 1 / p) / (m.nvlink * NVLS_EFFICIENCY * 1e9)


# NCCL's tuning model of a tree (src/graph/tuning.cc, 2.18): its bus bandwidth is the links'
# times 0.92, capped per channel (perChMaxTreeBws: A100 24.0 / 23.6 / 17.8 GB/s, H100 38.7 /
# 41.4 / 36.0 on one, two, more nodes); LL a 3.8th of it (at most LL's cap), LL128 7/9 of
# it on one node and 120/128 on more (capped at perChMaxTreeLL128Bws: A100 20, H100 36.7 /
# 36.7 / 29.0 per channel); half of it the algorithm bandwidth, times a correction per size
# (treeCorrectionFactor, powers of two from 64 B to 256 MiB), over the channels of its graph
# (half those run: NCCL's connection doubles them).
TREE_CH_GBPS = {"a100": (24.0, 23.6, 17.8), "h100": (38.7, 41.4, 36.0)}
TREE_LL128_CH_GBPS = {"a100": (20.0, 20.0, 20.0), "h100": (36.7, 36.7, 29.0)}
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9)}


# The tuning model of each NCCL release where it differs from 2.23's (the tables above;
# src/graph/tuning.cc of 2.18.5, 2.20.5 and 2.23.4): the ring's LL bus bandwidth (a quarter
# of the links' for all-reduce or across nodes and a third else, up to 2.20; half from
# 2.21), LL's ceiling on one Hopper node (87.7 GB/s up to 2.20), the tree's Simple latencies
# (base, per NVLink and per network step), NVLink SHARP's latency on one node, and the
# ring's steps counted as crossing nodes in an all-reduce (2 N up to 2.22, 2 (N - 1) in
# 2.23); 2.19 has 2.20's constants. `workload.nccl_tuning` picks the release whose model
# chooses the algorithm and protocol; the collective then runs as pysim models it, whatever
# the release, but for the LL128 ring's chunk-major last loop up to 2.19 (chunk_major).
TUNING_RELEASES = ("2.18", "2.19", "2.20", "2.23")
RELEASE = {
    "2.18": dict(ll_ring=(0.25, 1 / 3), hopper_ll1=87.7, tree_simple=(0.0, 4.0, 14.0),
                 nvls_us=23.0, inter_steps=lambda n: 2 * n),
    "2.20": dict(ll_ring=(0.25, 1 / 3), hopper_ll1=87.7, tree_simple=(0.0, 28.0, 28.0),
                 nvls_us=23.0, inter_steps=lambda n: 2 * n),
    "2.23": dict(ll_ring=(0.5, 0.5), hopper_ll1=141.0, tree_simple=(8.4, 4.0, 14.0),
                 nvls_us=25.0, inter_steps=lambda n: 2 * (n - 1)),
}
RELEASE["2.19"] = RELEASE["2.20"]
# The host's cost of posting a network step, which a ring across nodes pays at least per step
# (getNetOverhead: 2 us on AMD hosts, as the DGX A100's two EPYC 7742, 1 us on Intel, as the
# DGX H100's two Xeon Platinum 8480C, by their datasheets;
# three times that in Simple), and the latency of a ring's Simple all-reduce across nodes
# times 1.4 once each rank's share per channel is 64 bytes or more ("plateau effect of ring",
# ncclTopoGetAlgoTime; compute capability 8.0 and above).
NET_OVERHEAD_US = {"a100": 2.0, "h100": 1.0}
RING_PLATEAU = 1.4
LL128_RING_EFFICIENCY = 0.92    # (NCCL: 0.7 with fewer than two ranks a node; see docs/clusters.md)


def _ring_tuning_seconds(collective, proto, nbytes, m, p, channels, release):
    """NCCL's tuning model of a ring (ncclTopoTuneModel, ncclTopoGetAlgoTime) for the
    release: base latency, (steps - inter) intra-node and `inter` network step latencies,
    then the bytes at the protocol's share of the links' bus bandwidth."""
    r = RELEASE[release]
    N = m.nodes
    steps = 2 * (p - 1) if collective == "all_reduce" else p - 1
    inter = 0 if N == 1 else (r["inter_steps"](N) if collective == "all_reduce" else N - 1)
    intra = STEP_US["nvlink"][("ring", proto)]
    if N > 1:
        intra = max(intra, NET_OVERHEAD_US[m.preset] * (3 if proto == "Simple" else 1))
    lat = BASE_US[("ring", proto)] + (steps - inter) * intra + \
        inter * STEP_US["net"][("ring", proto)]
    if proto == "Simple" and N > 1 and collective == "all_reduce" and \
            nbytes / (max(1, channels) * p) >= 64:
        lat *= RING_PLATEAU
    bus = _bus(m, p, channels)[0]
    if proto == "LL":
        ll = LL_MAX_GBPS[m.preset][min(N, 3) - 1]
        if N == 1 and m.preset == "h100":
            ll = r["hopper_ll1"]
        share = r["ll_ring"][0 if (N > 1 or collective == "all_reduce") else 1]
        bus = min(ll, bus * share)
    elif proto == "LL128":
        bus = min(bus * LL128_RING_EFFICIENCY,
                  max(1, channels // 2) * LL128_CHANNEL_GBPS[m.preset])
    moved = nbytes * steps / p                      # bus bytes per rank
    return lat * 1e-6 + moved / (bus * 1e9)


def tuning_seconds(collective, algo, proto, nbytes, m, p, channels, release="2.23"):
    """What NCCL's own tuning model of the release says a collective takes (what `choose`
    ranks by): the ring by NCCL's ring formulas (_ring_tuning_seconds); NVLS as
    model_seconds with the release's latency; a tree by NCCL's tree formulas (TREE_*; its
    latency with the release's Simple latencies and log2i, rounding down, of the nodes)."""
    t = model_seconds(collective, algo, proto, nbytes, m, p, channels)
    if t is None:
        return t
    if algo == "ring":
        return _ring_tuning_seconds(collective, proto, nbytes, m, p, channels, release)
    lat = t - model_seconds(collective, algo, proto, nbytes, m, p, channels, latency=False)
    if algo == "nvls":
        return t - lat + RELEASE[release]["nvls_us"] * 1e-6
    # NCCL's tree latency: base + 2 ((ranks per node - 1) intra + log2i(nodes) inter),
    # log2i rounding down (tuning.cc), the Simple latencies the release's
    base, nv, net = RELEASE[release]["tree_simple"] if proto == "Simple" else (
        BASE_US[(algo, proto)], STEP_US["nvlink"][(algo, proto)], STEP_US["net"][(algo, proto)])
    q = p // m.nodes
    lat = (base + 2 * ((q - 1) * nv + (m.nodes.bit_length() - 1) * net)) * 1e-6
    k = min(m.nodes, 3) - 1
    graph = max(1, channels // 2)
    bus = min(_bus(m, p, channels)[1] * 0.92, graph * TREE_CH_GBPS[m.preset][k])
    if proto == "LL":
        bus = min(bus / 3.8, LL_MAX_GBPS[m.preset][k])
    elif proto == "LL128":
        bus = min(bus * (7 / 9 if m.nodes == 1 else 120 / 128),
                  graph * TREE_LL128_CH_GBPS[m.preset][k])
    log = max(0, int(nbytes) >> 6).bit_length() - 1
    corr = TREE_CORRECTION[proto][log] if 0 <= log < 23 else 1.0
    return lat + nbytes / (bus * 0.5 * corr * 1e9)


def _flight_excess(m, proto, channels, rounds, steps, width):
    """Seconds a ring crossing nodes waits on the network beyond its links' time, at most:
    per step of each loop, the network's step latency after the NVLink one (the slice's
    flight, pysim's _ring_hop) less what the sender's other slices of the step keep its link
    busy meanwhile (a step's first slice's next step waits for it to arrive: max(0, d0 +
    flight - sum d)), as if every step's chain went through a network hop (stream_excess
    takes the share of hops that cross nodes)."""
    x = step_us("ring", proto, "nvlink") * 1e-6
    flight = max(0.0, STEP_US["net"][("ring", proto)] * 1e-6 - x)
    rate = m.nic * 1e9 / (WIRE[proto] * m.hop_factor(proto, channels, False))
    out = 0.0
    for loops, sizes in rounds:
        d = [x * loops + z * width / rate for z in sizes]
        if d:
            out += steps * max(0.0, d[0] + flight * loops - sum(d))
    return out


def _hop_seconds_per_byte(m, proto, channels, same):
    """Seconds a byte of data takes over each of a ring's hops (same: whether the hop stays
    in a node, NVLink, or crosses to the next, the NIC), in the protocol's wire bytes."""
    return [WIRE[proto] * m.hop_factor(proto, channels, h) / ((m.nvlink if h else m.nic) * 1e9)
            for h in same]


def stream_excess(m, proto, channels, rounds, steps, width, ring):
    """Seconds the slices' way around a ring crossing nodes takes beyond the slice-steps at
    its slowest hop's rank (the two longest paths of the steps' max-plus schedule, links'
    latencies aside): per step of each loop, the first slice's work and bytes at the ring's
    mean hop, plus the network's flight after the NVLink step latency at the share of hops
    that cross nodes, against every slice's work and bytes at the slowest hop."""
    p = len(ring)
    same = [m.node_of[ring[k - 1]] == m.node_of[ring[k]] for k in range(p)]
    share = same.count(False) / p
    if not share:
        return 0.0
    x = step_us("ring", proto, "nvlink") * 1e-6
    flight = max(0.0, STEP_US["net"][("ring", proto)] * 1e-6 - x)
    per_byte = _hop_seconds_per_byte(m, proto, channels, same)
    mean, worst = sum(per_byte) / p, max(per_byte)
    out = 0.0
    for loops, sizes in rounds:
        if sizes:
            stay = sum(x * loops + z * width * worst for z in sizes)
            move = x * loops + sizes[0] * width * mean + share * flight * loops
            out += steps * max(0.0, move - stay)
    return out


def ring_seconds(collective, proto, nbytes, m, p, channels, flight=True, release="2.23"):
    """The closed form of the ring as pysim runs it (ring_rounds, _ring), where nothing else
    shares its links: NCCL's base latency, then every slice-step in turn, each the sending
    thread block's work (NCCL's NVLink step latency) and the slice's wire bytes over its
    link, at the pace of the ring's slowest hop, for the bundle of channels that takes
    longest; across nodes (flight = True) plus, per step of each loop, the network's step
    latency beyond the NVLink one where the sender's other slices of the step do not cover
    it (_flight_excess). Where the release lays the last loop out chunk-major
    (chunk_major), that loop's steps go as its chunks do: at step s the rank at ring position
    k sends chunk k - 1 - s, when both its previous step and the chunk's arrival from the
    rank before are done; an empty chunk's step is nothing."""
    steps = 2 * (p - 1) if collective == "all_reduce" else p - 1
    rounds = ring_rounds(collective, nbytes, proto, p, channels)
    layout = chunk_major(collective, nbytes, proto, p, channels, release)
    x = step_us("ring", proto, "nvlink") * 1e-6
    bundles = _bundles(m, channels)
    worst = 0.0
    for index, (ring, width) in enumerate(bundles):
        same = [m.node_of[ring[k]] == m.node_of[ring[(k + 1) % p]] for k in range(p)]
        per_byte = _hop_seconds_per_byte(m, proto, channels, same)
        chunks = bundle_chunks(layout, index, len(bundles))
        t = 0.0
        for i, (loops, sizes) in enumerate(rounds):
            if chunks is not None and i == len(rounds) - 1:
                done = [0.0] * p
                for s in range(steps):
                    new = list(done)
                    for k in range(p):
                        z = chunks[(k - 1 - s) % p]
                        if z:
                            ready = max(done[k], done[k - 1] if s else 0.0)
                            new[k] = ready + x + z * per_byte[k]
                    done = new
                t += max(done)
                continue
            for z in sizes:
                t += steps * max(x * loops + z * width * f for f in per_byte)
        if flight and False in same:
            t += _flight_excess(m, proto, channels, rounds, steps, width)
        worst = max(worst, t)
    return BASE_US[("ring", proto)] * 1e-6 + worst


def choose(collective, nbytes, m, p, channels, algo="auto", proto="auto", release="2.23"):
    """The (algorithm, protocol) the release's NCCL cost model picks for this size, among
    those allowed."""
    best = None
    for a in (ALGOS if algo == "auto" else (algo,)):
        for pr in (PROTOCOLS if proto == "auto" else (proto,)):
            t = tuning_seconds(collective, a, pr, nbytes, m, p, channels, release)
            if t is not None and (best is None or t < best[0]):
                best = (t, a, pr)
    if best is None:
        given = f"workload.nccl_algorithm = {algo!r}" + \
            (f", nccl_protocol = {proto!r}" if proto != "auto" else "")
        why = (f"NCCL's {algo} runs all_reduce only, not {collective}"
               if algo != "ring" and collective != "all_reduce" else
               "NVLink SHARP needs a node whose NVSwitches reduce, with topology.nvls = true "
               "(dgx-h100)" if algo == "nvls" and not m.nvls else
               f"NVLink SHARP is modelled within one node, not {m.nodes}"
               if algo == "nvls" and m.nodes > 1 else
               f"NCCL runs {algo} in " + ", ".join(pr for a, pr in BASE_US if a == algo) +
               " only" if proto != "auto" and (algo, proto) not in BASE_US else
               f"NCCL does not run {collective} so here")
        raise ConfigError(f"{given}: {why} (ring does every collective in any protocol; tree "
                          f"all_reduce; nvls all_reduce in Simple, on one node with "
                          f"topology.nvls = true)")
    return best[1], best[2]


def channels_for(nbytes, algo, proto, p, channels):
    """The channels NCCL runs a collective of nbytes on, of `channels` at most: NVLink SHARP
    all of its own; a ring or tree one fewer while bytes < channels x threads x threshold
    (the threshold of LL on a ring times its ranks), down to one."""
    if algo == "nvls":
        return channels
    per = THREADS[proto] * THREAD_BYTES[proto] * (p if (algo, proto) == ("ring", "LL") else 1)
    return max(1, min(channels, int(nbytes) // per + (1 if int(nbytes) % per else 0)))


def ring_threads(nbytes, proto, p, channels):
    """The threads of each channel's thread block in a ring of nbytes on `channels` channels
    (NCCL's getAlgoInfo, src/enqueue.cc): the protocol's most, halved while one channel runs
    and bytes < threads x threshold and the threads are a multiple of 128; at least 3
    warps."""
    nt = THREADS[proto]
    per = THREAD_BYTES[proto] * (p if proto == "LL" else 1)
    while channels <= 1 and int(nbytes) < nt * per and nt % 128 == 0:
        nt //= 2
    return max(nt, 96)


def chunk_major(collective, nbytes, proto, p, channels, release):
    """The bytes of each rank's chunk on each channel in the last loop of NCCL's ring
    (out[channel][chunk]) where the release lays it out chunk-major and pysim follows it
    (CHUNK_MAJOR_RELEASES, LL128 all-reduce), else None (the rest shared evenly)."""
    if collective != "all_reduce" or proto not in GRAIN_BYTES or \
            release not in CHUNK_MAJOR_RELEASES:
        return None
    c = max(1, int(channels))
    rest = int(nbytes) % (c * p * CHUNK_BYTES[proto])
    if rest == 0:
        return None
    grain = ring_threads(nbytes, proto, p, c) * GRAIN_BYTES[proto] // 2
    chunk = min(CHUNK_BYTES[proto], -(-rest // (c * p * grain)) * grain)
    return [[max(0, min(chunk, rest - (k * c + ch) * chunk)) for k in range(p)]
            for ch in range(c)]


def bundle_chunks(layout, index, kinds):
    """A bundle's bytes of each rank chunk in the last loop (the layout's channels index,
    index + kinds, ...; _bundles), or None."""
    if layout is None:
        return None
    rows = layout[index::kinds]
    return [sum(r[k] for r in rows) for k in range(len(layout[0]))]


def run_channels(collective, nbytes, algo, proto, p, channels=None):
    """The channels a collective runs on: `channels` (workload.nccl_channels) or NCCL's
    default for the algorithm, fewer for small sizes as NCCL runs them."""
    most = channels or (NVLS_CHANNELS if algo == "nvls" else NCCL_CHANNELS)
    return channels_for(nbytes, algo, proto, p, most)


def plan(collective, nbytes, settings, machine, order):
    """(Machine, algorithm, protocol, channels) NCCL runs the collective of nbytes over the
    ranks `order` with: the pair its model picks (or the one set), on at most
    settings['channels'] (workload.nccl_channels, or the SMs an NPU-run collective may hold)
    or NCCL's default channels, fewer for small sizes."""
    if machine is None:
        raise ConfigError("workload.algorithm = 'nccl' needs a cluster (topology.kind = "
                          "'cluster'): its ranks are the GPUs of DGX-like nodes")
    m = Machine(machine, order)
    p = len(order)
    most = settings.get("channels") or NCCL_CHANNELS
    algo, proto = choose(collective, nbytes, m, p, most, settings.get("algorithm", "auto"),
                         settings.get("protocol", "auto"), settings.get("tuning", "2.23"))
    return m, algo, proto, run_channels(collective, nbytes, algo, proto, p,
                                        settings.get("channels"))


def _split(total, parts):
    q, r = divmod(int(total), parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


def _rank_order(m, channel):
    """The ring of a channel: nodes in order, each node's GPUs from its channel-th on."""
    by_node = {}
    for i, n in enumerate(m.node_of):
        by_node.setdefault(n, []).append(i)
    out = []
    for n in sorted(by_node):
        r = by_node[n]
        k = channel % len(r)
        out += r[k:] + r[:k]
    return out


def ring_rounds(collective, nbytes, proto, p, channels):
    """The pipeline of one channel of NCCL's ring as it moves nbytes over p ranks on
    `channels` channels: a list of (loops, slices), each loop of the collective's ring steps
    (2 (p - 1) for all-reduce, p - 1 else) moving, per step, one chunk of the rank's data in
    `slices` (bytes of each slice per channel), so `loops` x steps x len(slices) slice-steps
    in all. Loops past MAX_LOOP_ROUNDS are merged (a round of k alike loops, each slice k
    times the bytes; `loops` counts the loops a round stands for).

    NCCL's loop (src/device/all_reduce.h, runRing; src/enqueue.cc, computeColl): each
    channel moves, per loop, a chunk of each rank's block; the chunk is the protocol's step
    (CHUNK_BYTES: Simple four 512 KiB steps of its 4 MiB buffer, LL and LL128 one step of
    their buffers' data) or, in the last loop, the rest shared out over channels x ranks.
    Simple moves a chunk in two slices of half of it, at least STEP_BYTES x 2 / 32 (32 KiB)
    each (src/device/prims_simple.h, genericOp; ALLREDUCE_CHUNKSTEPS / SLICESTEPS); LL and
    LL128 a chunk per step."""
    c = max(1, int(channels))
    loop = c * p * CHUNK_BYTES[proto]
    full, rest = divmod(int(nbytes), loop)

    def slices(chunk):
        if proto != "Simple" or chunk <= MIN_SLICE:
            return [chunk] if chunk > 0 else []
        first = max(-(-chunk // 2), MIN_SLICE)
        return [first, chunk - first] if chunk > first else [chunk]
    rounds = []
    if full:
        k = max(1, min(full, MAX_LOOP_ROUNDS - (1 if rest else 0)))
        per = _split(full, k)
        chunk = CHUNK_BYTES[proto]
        rounds += [(n, [z * n for z in slices(chunk)]) for n in per if n]
    if rest:
        chunk = -(-rest // (c * p))
        rounds.append((1, slices(chunk)))
    return rounds


def _bundles(m, channels):
    """(ring order, channels) of the rings built: one for every channel inside one node (the
    rotations cross the same NVSwitch links); across nodes one per rotation of a node's
    ranks, with the channels of that rotation."""
    per_node = max(1, len(m.node_of) // max(1, m.nodes))
    kinds = 1 if m.nodes == 1 else min(channels, per_node)
    return [(_rank_order(m, k), n) for k, n in enumerate(
        [len(range(k, channels, kinds)) for k in range(kinds)]) if n]
