"""The registry of memory policies: each registers its decide function and the workload.memory
keys it reads; a policy is chosen by name (with "+compression"), an unknown name answered
with the known ones."""
from __future__ import annotations

import math
from dataclasses import dataclass

from pysim.errors import ConfigError
from pysim.schema import NONNEG, Key, declare, raising
from pysim.schema import suggest as _suggest

KEEP, SWAP, RECOMPUTE = "keep", "swap", "recompute"

LAYER_KINDS = ("conv", "linear", "matmul", "lstm", "embedding", "attention", "norm", "pool",
               "eltwise", "softmax", "interaction", "loss", "given")
# COMET: feature maps kept for the backward pass, compressed by error-bounded SZ; kinds not
# in the table are not compressed (an assumed ratio: configure workload.memory.ratio)
DEFAULT_RATIO = {"conv": 15.0, "norm": 15.0, "eltwise": 15.0, "pool": 15.0}


@dataclass(frozen=True)
class Policy:
    name: str
    decide: object                  # decide(costs, budget, params) -> Plan
    fields: tuple                   # workload.memory.* keys it reads
    doc: str


POLICIES: dict[str, Policy] = {}
COMMON_FIELDS = ("policy", "target", "budget_fraction", "workspace_mb")

COMPRESSION_FIELDS = ("ratio", "compress_gbps", "decompress_gbps")


def register(name, fields=()):
    """Register `decide(costs, budget, params) -> Plan` as memory policy `name`, reading the
    workload.memory fields listed."""
    def deco(fn):
        if name in POLICIES:
            raise ValueError(f"memory policy {name!r} is registered twice")
        POLICIES[name] = Policy(name, fn, tuple(fields),
                                (fn.__doc__ or "").strip().split("\n")[0])
        return fn
    return deco


def policy_names():
    return sorted(POLICIES) + ["compression"]


def parse_policy(text):
    """'offload', 'compression', 'lms+compression' -> (policy name, compress?); an unknown
    name is a ConfigError listing the known ones."""
    if not isinstance(text, str):
        raise ConfigError(f"workload.memory.policy = {text!r}: expected a string")
    parts = [p.strip() for p in text.split("+")]
    compress = "compression" in parts
    rest = [p for p in parts if p != "compression"]
    for p in rest:
        if p not in POLICIES:
            raise ConfigError(f"workload.memory.policy = {text!r}: unknown policy {p!r}"
                              f"{_suggest(p, policy_names())}; known: "
                              f"{', '.join(policy_names())} (compression joins another with "
                              f"'+', e.g. 'offload+compression')")
    if len(rest) > 1 or parts.count("compression") > 1:
        raise ConfigError(f"workload.memory.policy = {text!r}: one policy, optionally joined "
                          f"with compression ('offload+compression')")
    return (rest[0] if rest else "none"), compress


def check_ratios(table):
    """workload.memory.ratio: {layer kind or layer name: ratio >= 1} (a name is checked
    against the model's layers when the plan is made: `check_ratio_names`)."""
    for k, v in table.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v < math.inf:
            raise ConfigError(f"workload.memory.ratio.{k} = {v!r}: expected a number >= 1")


def check_ratio_names(table, layer_names):
    """Every key of workload.memory.ratio that is not a layer kind names a layer of the
    model (on some NPU)."""
    known = set(layer_names)
    for k in table or {}:
        if k not in LAYER_KINDS and k not in known:
            raise ConfigError(f"workload.memory.ratio.{k}: neither a layer kind nor a layer of "
                              f"the model{_suggest(k, sorted(known) + list(LAYER_KINDS))}; "
                              f"expected one of the kinds {', '.join(LAYER_KINDS)} or a "
                              f"layer's name (pysim models NAME lists them)")


def check_fields(cfg):
    """The workload.memory keys given must be read by the chosen policy (a key of another
    policy is an error naming which policies read it)."""
    name, compress = parse_policy(cfg.workload.memory.policy)
    reads = set(COMMON_FIELDS) | set(POLICIES[name].fields)
    if compress:
        reads |= set(COMPRESSION_FIELDS)
    for path in sorted(cfg.explicit):
        if path.startswith("workload.memory."):
            f = path.split(".", 2)[2]
            if f not in reads:
                users = [p.name for p in POLICIES.values() if f in p.fields]
                if f in COMPRESSION_FIELDS:
                    users.append("compression")
                raise ConfigError(f"{path} is not read by workload.memory.policy = "
                                  f"{cfg.workload.memory.policy!r} (it is read by "
                                  f"{', '.join(users)})")


def params_from(cfg):
    """The workload.memory table as a dict of its fields."""
    m = cfg.workload.memory
    return {f: getattr(m, f) for f in m._values}


# The configuration keys this module reads (pysim.schema).
declare(
    Key("workload", "memory.policy", "str", "none", "-",
        "Training: the memory plan: none, offload (vDNN-style), lms, recompute, karma, "
        "compression (COMET), or a policy joined with compression ('offload+compression').",
        raising(parse_policy, "a memory policy")),
    Key("workload", "memory.target", "str", "auto", "-",
        "Where offloaded bytes go: 'mem' (the NPU's nearest memory nodes, in proportion to "
        "their links' bandwidth), 'host' (its host's DRAM) or 'auto' (mem if the system has "
        "memory nodes, else host).", None, lambda: ["auto", "mem", "host"]),
    Key("workload", "memory.budget_fraction", "float", 0.9, "-",
        "Share of each NPU's HBM the planning policies (lms, karma, offload's dynamic) aim to "
        "fill; "
        "the rest is left for what is not modelled (TFLMS's auto-tuning uses 0.9).",
        (lambda x: 0 < x <= 1, "a number in (0, 1]")),
    Key("workload", "memory.prefetch_layers", "int", 1, "layers",
        "offload: a stash is prefetched when the backward pass of the layer this many layers "
        "after it starts.", NONNEG),
    Key("workload", "memory.layers", "str", "all", "-",
        "offload: the tensors offloaded: 'all' kept tensors, those 'conv' layers keep, or "
        "'dynamic': none, conv or all, the first whose predicted peak fits (vDNN's three "
        "policies).", None, lambda: ["all", "conv", "dynamic"]),
    Key("workload", "memory.swapout_threshold", "int", -1, "ops",
        "lms: a stash is swapped out when more than this many ops separate its producer from "
        "its consumer in the iteration's order (-1: the largest that fits, found as TFLMS's "
        "auto-tuning does).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.swapin_ahead", "int", -1, "ops",
        "lms: a stash is swapped in this many ops before its consumer (-1: the largest that "
        "fits).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.swapin_groupby", "int", -1, "ops",
        "lms: consumers of a stash within this many ops of each other share one swap-in (-1: "
        "the largest that fits).", (lambda x: x >= -1, "an integer >= -1")),
    Key("workload", "memory.sync_mode", "int", -1, "-",
        "lms: 0 asynchronous swaps, 1 the next op waits for each swap-out, 2 swap-ins wait "
        "until their consumer is next, 3 both (-1: the lowest that fits, as TFLMS's "
        "auto-tuning).", (lambda x: -1 <= x <= 3, "an integer in -1 .. 3")),
    Key("workload", "memory.min_bytes", "int", 1048576, "bytes",
        "lms, karma: stashes smaller than this are never swapped (PyTorch LMS's default "
        "size threshold, 1 MiB).", NONNEG),
    Key("workload", "memory.segments", "int", 0, "-",
        "recompute: segments whose first layer's stash is kept (0: round(sqrt(layers)), as "
        "Chen et al. 2016).", NONNEG),
    Key("workload", "memory.host_update", "bool", False, "-",
        "karma: the optimizer step runs on the host (gradients sent to it, weights back), its "
        "state in host DRAM (KARMA's multi-node scheme).", None),
    Key("workload", "memory.ratio", "table", None, "-",
        "compression: compression ratio of a stash per layer kind or layer name, e.g. "
        "{conv = 10.0, \"layer1.0.conv1\" = 20.0} (a name wins over its kind; default: 15 "
        "for conv, norm, eltwise and pool, whose stashes are feature maps; other kinds are "
        "not compressed).",
        raising(check_ratios, "a table of layer kinds or names")),
    Key("workload", "memory.compress_gbps", "float", 100.0, "GB/s",
        "compression: compressor throughput, a roofline op of the NPU that reads S and writes "
        "S / ratio bytes of HBM (inf: only its HBM traffic).",
        (lambda x: x > 0, "a number > 0 (inf: free)"),
        allow_inf=True),
    Key("workload", "memory.decompress_gbps", "float", 200.0, "GB/s",
        "compression: decompressor throughput, a roofline op of the NPU that reads S / ratio "
        "and writes S bytes of HBM (inf: only its HBM traffic).",
        (lambda x: x > 0, "a number > 0 (inf: free)"),
        allow_inf=True),
    Key("workload", "memory.workspace_mb", "float", 0.0, "MiB",
        "Scratch memory each convolution op (forward, input gradient, weight gradient) holds "
        "in HBM while it runs, as cuDNN's algorithms take a workspace (0: none).", NONNEG),
)
