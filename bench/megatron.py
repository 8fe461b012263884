"""Megatron-LM's GPT runs on Selene (Narayanan et al., SC 2021, Table 1) simulated at the flow
level: per configuration, the published per-GPU throughput beside pysim's, and the error.

    python bench/megatron.py [--rows 0,1,2] [--json FILE] [--micro-batch N] [--interleave auto]

The ten configurations (tests/data/megatron_sc21_table1.json, with the table's citation) are
GPT models of 1.7 to 1,008 billion parameters on 32 to 3,072 A100s. Each runs one iteration
of pysim's `transformer` (sequence 2,048, vocabulary 51,200, dropout 0.1) in mixed precision
with Adam, tensor parallelism inside an 8-GPU node, pipeline parallelism across nodes, full
activation recomputation, the gradients all-reduced after the backward pass (Megatron-LM's
local data parallelism of 2021), a linear layer's input gradient all-reduced after its
weight gradient (workload.parallel.tp_overlap = false: Megatron-LM of 2021 had no
asynchronous tensor-parallel all-reduce), each stage's next pass after its sends between
stages (workload.parallel.p2p_sync = true: Megatron-LM's exchanges of 2021 and 2022 end in
torch.cuda.synchronize()), every collective as NCCL runs it (workload.algorithm
= 'nccl': its channels, protocols, chunks and slices, the algorithm and protocol NCCL's
tuning model picks; pysim/workload/nccl.py), the NPUs' kernel model (workload.compute =
'kernels', unfused attention, fused bias-dropout-add) and one data-parallel replica built for
all (workload.parallel.replicas = 'one'; --replicas all builds every one) and tensor-parallel
rank 0's ops for its group (workload.parallel.tp_ranks = 'one'; --tp-ranks all builds every
rank's: the same iteration, eight times the ops), the ring collectives as streams
(workload.collective_form = 'streams': per rank the slice-steps' latency once and a send of all
its bytes, instead of every slice-step; with --algorithm ring only where pp > 1; --form steps
builds every step). Throughput is counted as the paper counts it:
96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs per iteration over its time and the GPUs.

What Megatron-LM's code of 2021 ran besides the layers (--era 2021, the default): each
micro-batch's weight gradients added to the accumulated ones by a kernel of their own
(workload.grad_accumulation = 'add'), the mixed-precision optimizer's separate passes
(workload.optimizer_step = 'passes'), the cross entropy's passes over fp32 logits
(workload.loss_kernels = 'passes') and the transformer layers' small kernels of PyTorch 1.8
(workload.layer_kernels = 'passes'); --era fused leaves the four out. --table korthikanti runs
Korthikanti et al.'s Table 5 instead (MLSys 2023: four models on 8 to 512 GPUs without data
parallelism, full recomputation, Megatron-LM of 2022 with the input gradient's all-reduce
beside the weight gradient, the paper's micro-batch and interleaving;
tests/data/korthikanti_table5.json). --table readme runs the one measurement
Megatron-LM's README of 2021 gives (GPT-3 175B on 1,024 A100s, tp 8, pp 16,
micro-batch 1, not interleaved, about 32 s an iteration: the same code, container and count
as Table 1's; tests/data/megatron_readme_2021.json).

Not in the paper's table, and taken from the authors' scripts for it (NVIDIA/Megatron-LM,
examples/sc21/run_table_1.sh; kept beside the table in its data file): each row's micro-batch
size (16 for 1.7B to 7.5B, 8 for 18B, 4 for 39B, 2 for 76B and 145B, 1 above) and
interleaved chunks per stage (3 for 76B and 530B, 2 for 145B and 310B, none for the others,
the 1T model included). The scripts run the models without pipelining with PyTorch's
DistributedDataParallel, which all-reduces 25 MB gradient buckets during the last
micro-batch's backward pass (workload.overlap, bucket_mb = 25, the optimizer stepping after
every bucket: step_after = 'all'), the others with Megatron-LM's local data parallelism,
which all-reduces every gradient after it. The
system is Selene as the cluster
builder lays it out (`topology.kind = "cluster"`, DGX A100 nodes on a rail-optimised fat tree
of 40-port HDR switches, as the shipped `selene`), with as many nodes as the configuration
uses;
`--system graph` takes a simpler stand-in (each GPU on its node's NVSwitch at 300 GB/s and on
its rail's InfiniBand switch at 25 GB/s, the rails joined by one spine).

`--json FILE` writes {"rows": [...], "provenance": ...}: per configuration
published_tflops_per_gpu, simulated_tflops_per_gpu, error, iteration_seconds, wall_seconds,
cpu_seconds, peak_rss_mb (each row runs in a process of its own), the breakdown of the
critical GPU's time (compute_seconds with recompute_seconds and optimizer_seconds,
per_kind_compute_seconds, comm_by_kind: per kind of communication its count, running and
exposed seconds; breakdown_seconds: the iteration in parts, products, attention cores,
element-wise kernels, embedding and loss, optimizer, exposed TP, DP and between-stage
communication, idle), published_iteration_seconds,
ops (and ops_counted, counted from the plan before building), or the reason it did not run
(`--max-ops`: configurations whose graph would have more ops are counted, not run).
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import statistics
import sys
import time
import traceback

from outputs import FORCE, check, quiet_worker, sigint_deferred, write_json

from pysim.config import from_dict
from pysim.topology import build as build_topology
from pysim.workload import graph as graph_module
from pysim.workload.collectives.registry import ALGORITHMS
from pysim.workload.graph import GraphError
from pysim.workload.training import run_training
from pysim.workload.training.builder import _Builder
from pysim.workload.training.count import count as count_ops
from pysim.workload.training.layout import _Layout, load_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                    "megatron_sc21_table1.json")
GPUS_PER_NODE = 8
NVLINK_GBPS = 300.0          # per direction: 12 NVLink3 links of 25 GB/s (A100 datasheet)
IB_GBPS = 25.0               # one HDR InfiniBand HCA (200 Gb/s) per GPU
NVLINK_NS = 500.0            # assumed
IB_NS = 1000.0               # assumed: HCA and switch


KORTHIKANTI = os.path.join(os.path.dirname(DATA), "korthikanti_table5.json")
README_2021 = os.path.join(os.path.dirname(DATA), "megatron_readme_2021.json")
TABLES = {"sc21": DATA, "korthikanti": KORTHIKANTI, "readme": README_2021}


def table(which="sc21"):
    """(metadata, rows) of Narayanan et al.'s Table 1 ('sc21'), Korthikanti et al.'s
    Table 5 ('korthikanti': its full-recomputation column as a per-GPU throughput by the
    same count, with the 2022 code's input-gradient all-reduce beside the weight gradient)
    or the GPT-3 175B example of Megatron-LM's README of 2021 ('readme': the same code,
    container and count as Table 1's)."""
    with open(TABLES[which]) as f:
        d = json.load(f)
    rows = [dict(zip(d["columns"], r)) for r in d["rows"]]
    if "run_settings" in d:              # the authors' scripts' micro-batch and interleaving
        for r, s in zip(rows, d["run_settings"]["rows"]):
            r.update(zip(d["run_settings"]["columns"], s))
    if which == "korthikanti":
        for r in rows:
            r["tp_overlap"] = True
            r["tflops_per_gpu"] = flops_per_iteration(r, d["vocab"], d["seq"]) / (
                r["full_recompute_seconds"] * r["gpus"]) / 1e12
    return d, rows


def cluster_system(gpus):
    """DGX A100-like nodes of 8 GPUs on an NVSwitch, each GPU on its rail's switch (GPU k of
    every node on rail k), the rails joined by a spine; a graph topology."""
    nodes, links = [], []
    n_nodes = gpus // GPUS_PER_NODE
    for r in range(GPUS_PER_NODE):
        nodes.append({"name": f"rail{r}", "kind": "switch"})
    nodes.append({"name": "spine", "kind": "switch"})
    for r in range(GPUS_PER_NODE):
        links.append({"a": f"rail{r}", "b": "spine", "gbps": IB_GBPS * n_nodes,
                      "latency_ns": IB_NS})
    for k in range(n_nodes):
        nodes.append({"name": f"nvs{k}", "kind": "switch"})
        for r in range(GPUS_PER_NODE):
            g = f"gpu{k * GPUS_PER_NODE + r}"
            nodes.append({"name": g, "kind": "npu"})
            links.append({"a": g, "b": f"nvs{k}", "gbps": NVLINK_GBPS,
                          "latency_ns": NVLINK_NS})
            links.append({"a": g, "b": f"rail{r}", "gbps": IB_GBPS, "latency_ns": IB_NS})
    return {"kind": "graph", "nodes": nodes, "links": links, "route_weight": "bandwidth",
            "transit": ["switch"],
            "npu": {"preset": "a100"},
            "nic": {"npu": {"injection_gbps": NVLINK_GBPS + IB_GBPS,
                            "ejection_gbps": NVLINK_GBPS + IB_GBPS}}}


def flops_per_iteration(row, vocab, seq):
    """Narayanan et al.'s count (section 5.1), with activation recomputation."""
    B, l, h = row["batch"], row["layers"], row["hidden"]
    return 96 * B * seq * l * h * h * (1 + seq / (6 * h) + vocab / (16 * l * h))


def cluster_builder(gpus):
    """Selene as pysim's cluster builder lays it out: DGX A100 nodes on a rail-optimised
    fat tree (topology.kind = 'cluster')."""
    return {"kind": "cluster", "node": "dgx-a100", "node_count": gpus // GPUS_PER_NODE,
            "fabric": "rail-optimised"}


SYSTEMS = {"graph": cluster_system, "cluster": cluster_builder}

# What Megatron-LM's code of the paper's time ran besides the products (its commit of April
# 2021, examples/pretrain_gpt3_175B.sh: --fp16, --clip-grad 1.0, local data parallelism):
# each micro-batch's weight gradients added to the accumulated ones by a separate kernel
# (autograd's accumulation, or the contiguous buffers' main_grad.add_), and the
# mixed-precision optimizer's separate passes (megatron/optimizer/optimizer.py), and the
# cross entropy on fp32 logits (megatron/mpu/cross_entropy.py; the sc21 scripts do not pass
# --fp16-lm-cross-entropy), and the transformer layers' small kernels on PyTorch 1.8 of NGC
# 20.12 (workload.layer_kernels = 'passes': bias additions and bias gradients, the attention's
# copies and scalings, the fused causal softmax over the lower triangle, layer norm, GeLU and
# dropout backward at their full bytes). 'fused': all four folded away.
ERAS = {"2021": {"grad_accumulation": "add", "optimizer_step": "passes",
                 "loss_kernels": "passes", "layer_kernels": "passes"},
        "fused": {"grad_accumulation": "fused", "optimizer_step": "fused",
                  "loss_kernels": "fused", "layer_kernels": "fused"}}


def chunks_per_stage(row):
    """The interleaved schedule's model chunks per stage: the paper runs Table 1 interleaved
    without giving the number; taken here as the fewest above one that divide a stage's
    transformer layers (Megatron-LM needs whole layers per chunk), 1 without pipelining."""
    if row["pp"] == 1:
        return 1
    per = row["layers"] // row["pp"]
    return next((v for v in range(2, per + 1) if per % v == 0), 1)


def ddp_settings(row):
    """The data parallelism of the authors' scripts (run_settings' ddp): PyTorch's
    DistributedDataParallel ('torch', the rows without pipelining) all-reduces 25 MB buckets
    (bucket_cap_mb's default) as the last micro-batch's backward pass fills them (Megatron-LM
    skips the others' with no_sync), and the optimizer steps once every bucket is reduced (it
    clips by the gradients' global norm); Megatron-LM's own ('local') all-reduces each
    model chunk's gradients after the whole backward pass, then steps."""
    if row.get("ddp") == "torch":
        return {"overlap": True, "bucket_mb": 25, "step_after": "all"}
    return {"overlap": False, "bucket_mb": 1e9, "step_after": "all"}


def config(row, vocab, seq, micro_batch=1, interleave="auto", system="cluster",
           algorithm="nccl", sms=None, replicas="one", form="steps", tp_ranks="one",
           era="2021", library="cuda12"):
    """The configuration of Table 1's row (sms: workload.comm_sms, None: its default)."""
    if interleave == "auto":
        interleave = chunks_per_stage(row)
    tp, pp, gpus = row["tp"], row["pp"], row["gpus"]
    dp = gpus // (tp * pp)
    m = row["batch"] // dp // micro_batch
    par = {"tp": tp, "pp": pp, "dp": dp, "micro_batches": m, "replicas": replicas,
           "tp_ranks": tp_ranks,
           "order": ["tp", "pp", "dp"]}
    if tp > 1:                           # (no tensor-parallel collective with tp = 1)
        par["tp_overlap"] = row.get("tp_overlap", False)
    if pp > 1:                           # (no sends between stages with pp = 1)
        par["p2p_sync"] = True
    if interleave > 1:
        par["interleave"] = interleave
    topology = SYSTEMS[system](gpus)
    extra = {} if sms is None else {"comm_sms": sms}
    return from_dict({
        "network": {"model": "flow"},
        "topology": topology,
        "workload": {"kind": "training", "model": "transformer",
                     "model_params": {"layers": row["layers"], "hidden": row["hidden"],
                                      "heads": row["heads"], "seq": seq, "vocab": vocab},
                     "batch": row["batch"], "precision": "mixed", "optimizer": "adam",
                     "iterations": 1, "parallel": par, **ddp_settings(row),
                     **({} if algorithm == "nccl" else {"chunks": 1}), "compute": "kernels",
                     "algorithm": algorithm, "collective_form": form, **extra, **ERAS[era],
                     "kernel_library": library,
                     "memory": {"policy": "recompute", "recompute": "full"}}})


def run_row(row, vocab, seq, micro_batch=1, interleave="auto", system="cluster",
            algorithm="nccl",
            max_ops=None, sms=None, replicas="one", form="auto", tp_ranks="one", era="2021",
            library="cuda12"):
    t0, c0 = time.perf_counter(), time.process_time()
    max_ops = graph_module.MAX_OPS if max_ops is None else max_ops
    if interleave == "auto":
        interleave = chunks_per_stage(row)
    if form == "auto":
        form = "streams" if row["pp"] > 1 or algorithm == "nccl" else "steps"
    out = {"params_billion": row["params_billion"], "gpus": row["gpus"], "tp": row["tp"],
           "pp": row["pp"], "batch": row["batch"], "micro_batch": micro_batch,
           "interleave": interleave, "system": system, "algorithm": algorithm, "comm_sms": sms,
           "replicas": replicas, "tp_ranks": tp_ranks, "collective_form": form, "era": era,
           "kernel_library": library,
           "published_tflops_per_gpu": row["tflops_per_gpu"]}
    cfg = config(row, vocab, seq, micro_batch, interleave, system, algorithm, sms, replicas,
                 form, tp_ranks, era, library)
    b = _Builder(_Layout(cfg, build_topology(cfg), load_model(cfg), None), None, "")
    try:
        counted = count_ops(b)       # (a collective past the op limit is refused here)
    except GraphError as e:
        out.update(error=None, simulated_tflops_per_gpu=None, refused=str(e),
                   wall_seconds=time.perf_counter() - t0)
        return out
    out["ops_counted"] = counted.graph_total
    out["engine_ops_counted"] = counted.engine_total
    out["ops_by_part"] = counted.graph
    if counted.engine_total > max_ops:
        out.update(error=None, simulated_tflops_per_gpu=None,
                   refused=f"{counted.engine_total:,} engine ops counted from the plan, more "
                           f"than --max-ops {max_ops:,}", wall_seconds=time.perf_counter() - t0)
        return out
    try:
        res = run_training(cfg, op_count=counted)      # (counted once, here)
    except GraphError as e:
        out.update(error=None, simulated_tflops_per_gpu=None, refused=str(e),
                   wall_seconds=time.perf_counter() - t0)
        return out
    t = res.training["iteration_seconds"]
    sim = flops_per_iteration(row, vocab, seq) / (t * row["gpus"]) / 1e12
    tr = res.training
    kinds = {k: {"count": v["count"], "seconds": v["comm_cycles"] * 1e-9,
                 "exposed_seconds": v["exposed_comm_cycles"] * 1e-9}
             for k, v in tr["comm_by_kind"].items()}
    out.update(simulated_tflops_per_gpu=sim, error=sim / row["tflops_per_gpu"] - 1,
               iteration_seconds=t, compute_seconds=tr["compute_cycles"] * 1e-9,
               recompute_seconds=tr["recompute_cycles"] * 1e-9,
               optimizer_seconds=tr["optimizer_cycles"] * 1e-9,
               exposed_comm_seconds=tr["exposed_comm_cycles"] * 1e-9,
               comm_by_kind=kinds, per_kind_compute_seconds=_compute_by_kind(tr),
               other_seconds=tr["other_cycles"] * 1e-9, ops=len(res.ops),
               wall_seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
    out["published_iteration_seconds"] = flops_per_iteration(row, vocab, seq) / (
        row["tflops_per_gpu"] * 1e12 * row["gpus"])
    out["breakdown_seconds"] = breakdown(tr)
    return out


def _compute_by_kind(tr):
    """Seconds of forward and backward ops on the critical GPU per kind of layer of a
    transformer layer (qkv, attention, fc1, ...; the rest: 'other'), recomputation apart."""
    out = {}
    for r in tr["per_layer"]:
        name = r["name"].split(".")[-1] if r["name"].startswith("layer") else "other"
        out[name] = out.get(name, 0.0) + (r["fwd_cycles"] + r["bwd_cycles"]) * 1e-9
    return out


# A transformer layer's parts by the kernels they run: its products, its attention core (the
# batched products and the scores' softmax and dropout passes), its element-wise kernels.
PRODUCTS = ("qkv", "proj", "fc1", "fc2")
ELEMENTWISE = ("ln1", "ln2", "add1", "add2", "gelu", "proj_dropout", "fc_dropout")


def breakdown(tr):
    """The critical GPU's iteration in parts (seconds): the transformer layers' products,
    attention cores and element-wise kernels (forward, recomputed forward and backward, the
    backward with its gradient additions), the embedding, logits and loss ('embedding'), the
    optimizer step; then the communication it waits for: tensor-parallel, data-parallel,
    between stages (sends, scatter-gather, the tied embeddings' all-reduce), and the rest of
    the iteration where it neither computes nor communicates (the pipeline's bubble). The
    recomputed forward is shared out over the parts as their forward times are."""
    fwd, both = {}, {}
    for r in tr["per_layer"]:
        name = r["name"].split(".")[-1] if r["name"].startswith("layer") else "embedding"
        part = ("products" if name in PRODUCTS else "attention" if name == "attention" else
                "elementwise" if name in ELEMENTWISE else "embedding")
        fwd[part] = fwd.get(part, 0.0) + r["fwd_cycles"] * 1e-9
        both[part] = both.get(part, 0.0) + (r["fwd_cycles"] + r["bwd_cycles"]) * 1e-9
    total_fwd = sum(fwd.values()) or 1.0
    rec = tr["recompute_cycles"] * 1e-9
    out = {k: both.get(k, 0.0) + rec * fwd.get(k, 0.0) / total_fwd
           for k in ("products", "attention", "elementwise", "embedding")}
    out["optimizer"] = tr["optimizer_cycles"] * 1e-9
    kinds = tr["comm_by_kind"]

    def exposed(pred):
        return sum(v["exposed_comm_cycles"] for k, v in kinds.items() if pred(k)) * 1e-9
    out["tp_exposed"] = exposed(lambda k: k.startswith("tp_"))
    out["dp_exposed"] = exposed(lambda k: k.startswith("dp_"))
    # the rest of the exposed time (where kinds overlap, counted once): between stages
    every = tr["exposed_comm_cycles"] * 1e-9
    out["pipeline_exposed"] = max(0.0, every - out["tp_exposed"] - out["dp_exposed"])
    out["idle"] = max(0.0, tr["iteration_seconds"] - tr["compute_cycles"] * 1e-9 - every)
    return out


PARTS = ("products", "attention", "elementwise", "embedding", "optimizer", "tp_exposed",
         "dp_exposed", "pipeline_exposed", "idle")


def print_parts(rows):
    """Each row's parts (seconds) and what is missing of its published iteration; over the
    rows, Pearson's r of the throughput error with each quantity (docs/validation.md)."""
    print("\nparts of the critical GPU's iteration, seconds: " + ", ".join(PARTS))
    for r in rows:
        b, gap = r["breakdown_seconds"], r["published_iteration_seconds"] - \
            r["iteration_seconds"]
        print(f"{r['params_billion']:>7}B " + " ".join(f"{b[k]:7.3f}" for k in PARTS) +
              f"  missing {gap:6.3f} s, {gap / b['products']:.2f} of the products")
    if len(rows) < 3:
        return
    err = [r["error"] for r in rows]
    share = {k: [r["breakdown_seconds"][k] / r["iteration_seconds"] for r in rows]
             for k in ("attention", "products", "elementwise", "tp_exposed", "dp_exposed")}
    share["pipeline and idle"] = [(r["breakdown_seconds"]["pipeline_exposed"] +
                                   r["breakdown_seconds"]["idle"]) / r["iteration_seconds"]
                                  for r in rows]
    given = {"tp": [r["tp"] for r in rows], "pp": [r["pp"] for r in rows],
             "micro-batch": [r["micro_batch"] for r in rows],
             "log params": [math.log(r["params_billion"]) for r in rows],
             **{f"{k} share": v for k, v in share.items()}}
    # (a quantity alike in every row, or an error alike, has no correlation: left out)
    print("r of the error with: " + ", ".join(
        f"{k} {statistics.correlation(v, err):+.2f}" for k, v in given.items()
        if len(set(v)) > 1 and len(set(err)) > 1))


def run_isolated(*args):
    """run_row in a child process of its own, with that process's peak memory. Ctrl-C,
    which reaches both processes, ends both at any moment: one that comes while the child is
    forked is raised after (outputs.sigint_deferred), and an interrupted parent stops its
    child."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, args))
    try:
        with sigint_deferred():
            child.start()
        send.close()
        ok, out = recv.recv()
    except KeyboardInterrupt:
        if child.pid is not None:
            child.terminate()
            child.join()
        raise
    except EOFError:
        child.join()
        raise RuntimeError(f"the row's process ended (status {child.exitcode}) before "
                           f"its result") from None
    child.join()
    if not ok:
        raise RuntimeError(f"the row's process failed:\n{out}")
    return out


def _child(send, args):
    quiet_worker()
    try:
        out = run_row(*args)
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        send.send((True, out))
    except SystemExit:                  # (Ctrl-C: the parent says it)
        pass
    except BaseException:
        send.send((False, traceback.format_exc()))


def check_options(ap, a, rows):
    """The rows picked, after a usage error (ap.error) for an option of a value no row can
    run, naming the option, its value and what is expected: before any run."""
    try:
        pick = range(len(rows)) if a.rows is None else [int(x) for x in a.rows.split(",")]
    except ValueError:
        pick = None
    if pick is None or not pick or not all(0 <= k < len(rows) for k in pick):
        ap.error(f"--rows {a.rows!r}: expected indices of the table's rows, 0 to "
                 f"{len(rows) - 1}, comma-separated")
    if a.interleave != "auto" and (not a.interleave.isdigit() or int(a.interleave) < 1):
        ap.error(f"--interleave {a.interleave!r}: expected 'auto' or a count of model chunks "
                 f">= 1")
    for opt, v, least in (("--micro-batch", a.micro_batch, 1), ("--max-ops", a.max_ops, 1),
                          ("--op-limit", a.op_limit, 1), ("--comm-sms", a.comm_sms, 0)):
        if v is not None and v < least:
            ap.error(f"{opt} {v}: expected an integer >= {least}")
    if a.algorithm not in ALGORITHMS:
        ap.error(f"--algorithm {a.algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    for k in pick if a.micro_batch else ():
        per = rows[k]["batch"] // (rows[k]["gpus"] // (rows[k]["tp"] * rows[k]["pp"]))
        if per % a.micro_batch:
            ap.error(f"--micro-batch {a.micro_batch}: does not divide the {per} samples of "
                     f"each data-parallel replica of row {k} ({rows[k]['params_billion']}B)")
    return pick


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default=None, help="indices of Table 1's rows (default all)")
    ap.add_argument("--micro-batch", type=int, default=None,
                    help="the micro-batch size of every row (default: each row's, from the "
                         "authors' scripts)")
    ap.add_argument("--interleave", default="auto",
                    help="model chunks per pipeline stage (default 'auto': each row's, from "
                         "the authors' scripts; where a table gives none, the fewest above "
                         "one that divide a stage's layers, where pp > 1)")
    ap.add_argument("--system", choices=sorted(SYSTEMS), default="cluster",
                    help="cluster: topology.kind = 'cluster' (DGX A100 nodes on a "
                         "rail-optimised fat tree, as the shipped selene); graph: a stand-in "
                         "of NVSwitch islands on rail switches joined by one spine")
    ap.add_argument("--algorithm", default="nccl",
                    help="workload.algorithm of every group (default nccl: NCCL's ring, tree "
                         "or NVLS as NCCL picks them; ring: pysim's GPU-run ring)")
    ap.add_argument("--max-ops", type=int, default=None,
                    help="run only configurations whose graph, counted from the plan, has at "
                         "most this many ops (default: the op graph's limit)")
    ap.add_argument("--op-limit", type=int, default=None,
                    help="raise the op graph's limit (pysim.workload.graph.MAX_OPS, graph "
                         "and engine ops) for this run: memory grows by up to 800 bytes per engine "
                         "op (pysim.workload.training.count.BYTES_PER_OP)")
    ap.add_argument("--comm-sms", type=int, default=None,
                    help="workload.comm_sms: the compute units an NPU-run collective holds "
                         "(default the preset's NCCL channel count; 0: none, collectives "
                         "limited by the links and the whole HBM)")
    ap.add_argument("--replicas", choices=("one", "all"), default="one",
                    help="workload.parallel.replicas: build one data-parallel replica for all "
                         "(default) or every one")
    ap.add_argument("--form", choices=("auto", "steps", "streams"), default="auto",
                    help="workload.collective_form: every ring step's ops, or one stream per "
                         "rank and chunk; auto (default): streams with NCCL's collectives or "
                         "where pp > 1, steps else")
    ap.add_argument("--tp-ranks", choices=("one", "all"), default="one",
                    help="workload.parallel.tp_ranks: build tensor-parallel rank 0's ops for "
                         "its group (default) or every rank's")
    ap.add_argument("--era", choices=sorted(ERAS), default="2021",
                    help="the iteration's kernels besides the products: 2021 (default: "
                         "Megatron-LM of the paper's time, each micro-batch's gradients "
                         "added by their own kernel, the mixed-precision step as separate "
                         "passes, the cross entropy's passes, the layers' small kernels) or "
                         "fused (all folded away)")
    ap.add_argument("--library", choices=("auto", "cuda11", "cuda12"), default="auto",
                    help="workload.kernel_library, whose products the kernel model's are "
                         "fitted to: cuda11 (the CUDA 11 era's libraries), cuda12 (cuBLASLt "
                         "of CUDA 12.5); auto (default): cuda11 for sc21 and readme (the "
                         "authors' scripts ran NGC PyTorch 20.12, CUDA 11.1), cuda12 for "
                         "korthikanti (the one it agrees with; its container is not "
                         "recorded, its libraries CUDA 11's of 2022)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--table", choices=sorted(TABLES), default="sc21",
                    help="sc21: Narayanan et al.'s Table 1 (default); korthikanti: Korthikanti "
                         "et al.'s Table 5, full recomputation (its micro-batch and chunks); "
                         "readme: the GPT-3 175B example of Megatron-LM's README of 2021 "
                         "(1,024 GPUs, tp 8, pp 16, micro-batch 1)")
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args(argv)
    meta, rows = table(a.table)
    pick = check_options(ap, a, rows)
    check(ap, a.force, [("--json", a.json)], inputs=[(f"the table {w}", TABLES[w])
                                                    for w in TABLES])
    if a.op_limit is not None:
        graph_module.MAX_OPS = a.op_limit
    library = a.library if a.library != "auto" else \
        ("cuda11" if a.table in ("sc21", "readme") else "cuda12")
    out = []
    print(f"{'params':>8} {'GPUs':>5} {'tp':>3} {'pp':>3} {'published':>9} {'pysim':>7} "
          f"{'error':>7} {'iteration':>10} {'wall':>7} {'CPU':>7} {'peak':>8}")
    for k in pick:
        mb = a.micro_batch if a.micro_batch is not None else rows[k].get("micro_batch", 1)
        v = rows[k].get("interleave", "auto") if a.interleave == "auto" else int(a.interleave)
        r = run_isolated(rows[k], meta["vocab"], meta["seq"], mb, v, a.system,
                    a.algorithm, a.max_ops, a.comm_sms, a.replicas, a.form, a.tp_ranks, a.era,
                         library)
        out.append(r)
        if r["simulated_tflops_per_gpu"] is None:
            print(f"{r['params_billion']:>7}B {r['gpus']:>5} {r['tp']:>3} {r['pp']:>3} "
                  f"{r['published_tflops_per_gpu']:>9.4g} refused: {r['refused']}", flush=True)
            continue
        print(f"{r['params_billion']:>7}B {r['gpus']:>5} {r['tp']:>3} {r['pp']:>3} "
              f"{r['published_tflops_per_gpu']:>9.4g} {r['simulated_tflops_per_gpu']:>7.1f} "
              f"{100 * r['error']:>+6.1f}% {r['iteration_seconds']:>9.3f}s "
              f"{r['wall_seconds']:>6.1f}s {r['cpu_seconds']:>6.1f}s "
              f"{r['peak_rss_mb']:>6.0f}MB", flush=True)
    errs = [abs(r["error"]) for r in out if r["error"] is not None]
    if errs:
        print(f"mean |error| {100 * sum(errs) / len(errs):.1f}%, max {100 * max(errs):.1f}% "
              f"over {len(errs)} of {len(out)} configurations")
    peak = max([r.get("peak_rss_mb", 0) for r in out] or [0])
    print(f"peak memory {peak:.0f} MB (the largest row's process)")
    ran = [r for r in out if r["error"] is not None]
    if ran:
        print_parts(ran)
    if a.json:
        write_json(a.json, {"rows": out, "source": meta["source"], "peak_rss_mb": peak,
                            "provenance": provenance()})


if __name__ == "__main__":
    main()
