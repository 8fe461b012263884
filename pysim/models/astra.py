"""ASTRA-sim 1.0 text workloads: a model whose layer times and collectives are given.

The format (ASTRA-sim 1.0, Rashidi et al., ISPASS 2020), one item per line:

1. the parallelism: DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER,
   HYBRID_TRANSFORMER_FWD_IN_BCKWD, HYBRID_DLRM, HYBRID_DLRM_ENHANCED, HYBRID_CUSTOMIZED,
   MICRO, DISTRIBUTED_INFERENCE; the transformer kinds follow it with
   `model_parallel_NPU_group: N` (and the FWD_IN_BCKWD kind with `checkpoints: n l1 .. ln
   checkpoint_initiates: n l1 .. ln`), the DLRM kinds with the index of the last bottom-MLP
   layer;
2. the number of layers;
3. one line per layer: name, a reserved integer, then for the forward pass, the input
   gradient and the weight gradient each a compute time (cycles), a collective (ALLREDUCE,
   ALLTOALL, ALLGATHER, REDUCESCATTER, ALLREDUCEALLTOALL or NONE) and its size (bytes); then
   the time of the weight update (cycles); under HYBRID_CUSTOMIZED, the layer's own
   parallelism last.

Every layer becomes a `given` layer whose `given` dict holds those numbers; the model's
`parallelism` is the first word and its `config` the header's other fields. A name that
repeats (ASTRA-sim allows it) is numbered from its second use on: `layernorm2#2`.
"""
from __future__ import annotations

import difflib
import itertools
import os

from pysim._io import MAX_TEXT_MODEL_BYTES, InputError, read_input
from pysim.models import layers as L
from pysim.models.layers import ModelError
from pysim.models.model import Model

PARALLELISMS = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA",
                "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_DLRM",
                "HYBRID_DLRM_ENHANCED", "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE")
COMMS = ("ALLREDUCE", "ALLTOALL", "ALLGATHER", "REDUCESCATTER", "ALLREDUCEALLTOALL", "NONE")
MAX_LAYERS = 100_000       # each layer costs memory in every plan built from it


MAX_VALUE = 10 ** 15       # cycles or bytes of one layer (what an op graph takes)


def _int(path, lineno, what, token, lo=0):
    if not (isinstance(token, str) and token.isascii() and
            token.lstrip("-").isdigit()):          # (int() also takes 1_000 and other digits)
        raise ModelError(f"{path}, line {lineno}: {what} = {token!r}: expected an integer")
    v = int(token)
    if not lo <= v <= MAX_VALUE:
        raise ModelError(f"{path}, line {lineno}: {what} = {v}: expected an integer from "
                         f"{lo} to {MAX_VALUE:,}")
    return v


def _header(path, lineno, tokens):
    kind = tokens[0]
    if kind not in PARALLELISMS:
        close = difflib.get_close_matches(kind, PARALLELISMS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ModelError(f"{path}, line {lineno}: parallelism {kind!r} unknown{hint}; "
                         f"expected one of {', '.join(PARALLELISMS)}")
    rest = tokens[1:]
    info = {}

    def take(what, lo=0):
        if not rest:
            raise ModelError(f"{path}, line {lineno}: {kind} needs {what} on its line")
        return _int(path, lineno, what, rest.pop(0), lo)

    def label(word):
        if not rest or rest[0] != word:
            got = repr(rest[0]) if rest else "nothing"
            raise ModelError(f"{path}, line {lineno}: expected '{word}' after {kind}, "
                             f"found {got}")
        rest.pop(0)

    if kind.startswith("HYBRID_TRANSFORMER"):
        label("model_parallel_NPU_group:")
        info["model_parallel_npu_group"] = take("model_parallel_NPU_group", 1)
        if kind == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
            for word, key in (("checkpoints:", "checkpoints"),
                              ("checkpoint_initiates:", "checkpoint_initiates")):
                label(word)
                n = take(f"the number of {key}")
                info[key] = [take(f"a layer of {key}") for _ in range(n)]
    elif kind.startswith("HYBRID_DLRM"):
        info["dlrm_last_bottom_layer"] = take("the last bottom-MLP layer")
    if rest:
        raise ModelError(f"{path}, line {lineno}: unexpected {' '.join(rest)!r} after {kind}")
    return kind, info


def load_astra(path, **params):
    """Read an ASTRA-sim 1.0 text workload into a Model of `given` layers."""
    if params:
        raise ModelError(f"{path}: an ASTRA-sim workload takes no parameters (got "
                         f"{', '.join(params)})")
    try:
        text = read_input(path, MAX_TEXT_MODEL_BYTES, "model's .onnx file or an ASTRA-sim "
                                                      "text workload").decode("utf-8-sig")
    except InputError as e:
        raise ModelError(str(e)) from None
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not an ASTRA-sim text workload (not UTF-8 text)") from None
    rows = ((i, ln.split()) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip())
    lines = list(itertools.islice(rows, 2))        # (the rest once the count is known)
    if len(lines) < 2:
        raise ModelError(f"{path}: not an ASTRA-sim workload: expected the parallelism on "
                         f"the first line and the number of layers on the second")
    kind, info = _header(path, *lines[0])
    lineno, tokens = lines[1]
    if len(tokens) != 1:
        raise ModelError(f"{path}, line {lineno}: expected the number of layers alone, "
                         f"found {' '.join(tokens)!r}")
    n = _int(path, lineno, "the number of layers", tokens[0], 1)
    if n > MAX_LAYERS:
        raise ModelError(f"{path}, line {lineno}: {n:,} layers: at most {MAX_LAYERS:,}")
    body = list(rows)
    if len(body) < n:
        last = body[-1][0] if body else lineno
        raise ModelError(f"{path}, line {last}: the file ends after {len(body)} of the {n} "
                         f"layers line {lineno} announces")
    if len(body) > n:
        raise ModelError(f"{path}, line {body[n][0]}: more layers than the {n} line "
                         f"{lineno} announces")
    per_layer = 13 if kind == "HYBRID_CUSTOMIZED" else 12
    out, names = [], set()
    for lineno, t in body:
        if len(t) != per_layer:
            raise ModelError(
                f"{path}, line {lineno}: {len(t)} fields, expected {per_layer}: name, "
                f"reserved, then forward, input-gradient and weight-gradient each as compute "
                f"cycles, collective, bytes, then update cycles"
                + (", then the layer's parallelism" if per_layer == 13 else ""))
        name = t[0]
        if not name.isprintable():
            raise ModelError(f"{path}, line {lineno}: the layer name {name!r} holds a control "
                             f"character; expected printable characters")
        if name in names:             # ASTRA-sim allows it; a table needs unique names
            k = 2
            while f"{t[0]}#{k}" in names:
                k += 1
            name = f"{t[0]}#{k}"
        names.add(name)
        reserved = _int(path, lineno, "the reserved field", t[1], -(2 ** 31))
        times, comms = {}, {}
        for j, phase in enumerate(("fwd", "ig", "wg")):
            times[phase] = _int(path, lineno, f"{phase} compute cycles", t[2 + 3 * j])
            ctype = t[3 + 3 * j]
            if ctype not in COMMS:
                raise ModelError(f"{path}, line {lineno}: {phase} collective {ctype!r}: "
                                 f"expected one of {', '.join(COMMS)}")
            size = _int(path, lineno, f"{phase} collective bytes", t[4 + 3 * j])
            comms[phase] = (ctype, size)
        update = _int(path, lineno, "update cycles", t[11])
        layer = L.given(name, times["fwd"], times["ig"], times["wg"], update, comms["fwd"],
                        comms["ig"], comms["wg"])
        layer.given["reserved"] = reserved
        if per_layer == 13:
            own = t[12]
            if own not in PARALLELISMS:
                raise ModelError(f"{path}, line {lineno}: the layer's parallelism {own!r}: "
                                 f"expected one of {', '.join(PARALLELISMS)}")
            layer.given["parallelism"] = own
        out.append(layer)
    name = os.path.splitext(os.path.basename(path))[0]
    return Model(name, out, source=f"ASTRA-sim 1.0 workload {os.path.basename(path)}",
                 given_times=True, parallelism=kind, config=info)
