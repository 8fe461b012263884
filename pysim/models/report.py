"""Text tables and JSON of models, for `pysim models`."""
from __future__ import annotations

import os

from pysim._gc import quiet_gc
from pysim.models import load
from pysim.models.model import Model
from pysim.models.registry import get, names


def resolve(spec, **params) -> Model:
    """A zoo name, or the path of an .onnx file or an ASTRA-sim workload."""
    if spec in names() or not (os.path.exists(spec) or spec.lower().endswith(".onnx")):
        return get(spec, **params)
    return load(spec, **params)


@quiet_gc
def to_json(models, precision=None, batch=1, with_layers=False):
    out = []
    for m in models:
        d = m.to_dict(precision, with_layers=with_layers)
        d["batch"] = batch
        d["per_batch"] = {"fwd_flops": d["fwd_flops"] * batch,
                          "bwd_flops": d["bwd_flops"] * batch,
                          "activation_bytes": d["activation_bytes"] * batch}
        out.append(d)
    return out


_SCALES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _num(x, unit=""):
    a = abs(x)
    if a >= 1e3:
        for scale, p in _SCALES:
            if a >= scale:
                return f"{x / scale:.3g} {p}{unit}".rstrip()
    return f"{x:.3g} {unit}".rstrip() if x else "0"


def _short(v):
    if isinstance(v, (list, tuple)) and len(v) > 6:
        return f"[{', '.join(map(str, v[:3]))}, ... ({len(v)} values)]"
    return str(v)


def _table(header, rows, right=()):
    widths = [max(map(len, col)) for col in zip(header, *rows)]
    line = "  ".join(f"{{:{'>' if i in right else '<'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(line.format(*r).rstrip() for r in [header, *rows])


def format_zoo(models, precision=None, batch=1):
    per = "per sample" if batch == 1 else f"per batch of {batch}"
    rows = []
    for m in models:
        p = precision or m.default_precision
        rows.append([m.name, _num(m.params), _num(m.fwd_flops * batch, "FLOP"),
                     _num(m.activation_bytes(p) * batch, "B"), str(len(m.layers)), p,
                     "x".join(map(str, m.input_shape))])
    head = ["model", "params", f"forward ({per})", f"activations kept ({per})", "layers",
            "precision", "input"]
    return _table(head, rows, right={1, 2, 3, 4}) + \
        "\n\nFLOPs = 2 x multiply-accumulates; activations kept = bytes stashed for the " \
        "backward pass. pysim models NAME shows a model's layers."


@quiet_gc
def format_model(m, precision=None, batch=1):
    p = precision or m.default_precision
    per = "per sample" if batch == 1 else f"per batch of {batch}"
    lines = [f"model       {m.name}", f"source      {m.source}"]
    if m.given_times:
        lines.append(f"parallelism {m.parallelism}" +
                     (f"  ({', '.join(f'{k} {v}' for k, v in m.config.items())})"
                      if m.config else ""))
        lines.append(f"layers      {len(m.layers)} with given times (cycles) and collectives "
                     f"(bytes)")
        rows = []
        for i, l in enumerate(m.layers):
            g = l.given
            rows.append([str(i), l.name] +
                        [str(g[f"{ph}_cycles"]) for ph in ("fwd", "ig", "wg", "update")] +
                        [f"{g[f'{ph}_comm'][0]} {g[f'{ph}_comm'][1]}"
                         if g[f"{ph}_comm"][0] != "NONE" else "-" for ph in ("fwd", "ig",
                                                                            "wg")])
        head = ["#", "layer", "fwd", "in-grad", "w-grad", "update", "fwd comm",
                "in-grad comm", "w-grad comm"]
        return "\n".join(lines) + "\n\n" + _table(head, rows, right={0, 2, 3, 4, 5})
    state = m.state_bytes(p, "adam")
    if m.config:
        lines.append("parameters  " + ", ".join(f"{k} {_short(v)}" for k, v in m.config.items()))
    lines += [
        f"input       {'x'.join(map(str, m.input_shape))} per sample; precision {p}; {per}",
        f"params      {m.params:,} ({_num(m.weight_bytes(p), 'B')} of weights; training "
        f"state with Adam {_num(state['total'], 'B')})",
        f"forward     {_num(m.fwd_flops * batch, 'FLOP')}; backward "
        f"{_num(m.bwd_flops * batch, 'FLOP')}",
        f"activations {_num(m.activation_bytes(p) * batch, 'B')} kept for the backward pass"]
    if m.unsupported:
        lines.append("unsupported " + ", ".join(f"{k} x{v}" for k, v in m.unsupported.items())
                     + ": their FLOPs are left out (their bytes are counted)")
    rows = []
    for i, l in enumerate(m.layers):
        b = l.bytes(p)
        rows.append([str(i), l.name, l.kind + (f" {l.op}" if l.op else ""),
                     "x".join(map(str, l.out_shape)), _num(l.params),
                     _num(l.fwd_flops * batch), _num((l.bwd_input_flops + l.bwd_weight_flops)
                                                     * batch),
                     _num((b["read"] + b["write"]) * batch), _num(b["weights"]),
                     _num(b["stash"] * batch), l.tp or "-"])
    head = ["#", "layer", "kind", "output", "params", "fwd FLOP", "bwd FLOP", "act bytes",
            "weight bytes", "kept bytes", "tp"]
    return "\n".join(lines) + "\n\n" + _table(head, rows, right={0, 4, 5, 6, 7, 8, 9})
