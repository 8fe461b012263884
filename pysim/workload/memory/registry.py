"""The registry of memory policies: each registers its decide function and the workload.memory
keys it reads; a policy is chosen by name (with "+compression"), an unknown name answered
with the known ones."""
from __future__ import annotations

import math
from dataclasses import dataclass

from pysim.config import NONNEG, ConfigError, _suggest
from pysim.schema import Key, declare

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

declare(Key("workload", "memory.workspace_mb", "float", 0.0, "MiB",
            "Scratch memory each convolution op (forward, input gradient, weight gradient) "
            "holds in HBM while it runs, as cuDNN's algorithms take a workspace (0: none).",
            NONNEG))
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
    """workload.memory.ratio: {layer kind: ratio >= 1}."""
    for k, v in table.items():
        if k not in LAYER_KINDS:
            raise ConfigError(f"workload.memory.ratio.{k}: unknown layer kind"
                              f"{_suggest(k, LAYER_KINDS)}; expected one of "
                              f"{', '.join(LAYER_KINDS)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v < math.inf:
            raise ConfigError(f"workload.memory.ratio.{k} = {v!r}: expected a number >= 1")


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
