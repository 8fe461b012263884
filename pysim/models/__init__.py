"""What is trained: models as ordered tables of layers, built from their shapes.

    from pysim import models
    m = models.get("resnet50")              # the zoo; models.names() lists it
    m.params, m.fwd_flops, m.activation_bytes("mixed")
    for layer in m.layers: layer.kind, layer.fwd_flops, layer.bytes("fp16")
    models.load("net.onnx")                 # an ONNX model, or an ASTRA-sim text workload

A model knows nothing of networks; the training plans turn it into op graphs.
"""

from pysim.models import cnn, dlrm, language, moe  # noqa: F401  (the zoo: each module registers)
from pysim.models.astra import load_astra
from pysim._io import as_path
from pysim.models.layers import KINDS, Layer, ModelError
from pysim.models.model import Model, Net
from pysim.models.onnx_import import load_onnx
from pysim.models.precision import PRECISIONS, PrecisionBytes, optimizer_bytes, precision_bytes
from pysim.models.registry import get, names, parameters, register


def load(path, **params):
    """A model from a file: `.onnx` (needs the `onnx` package: pip install 'pysim[onnx]'),
    or an ASTRA-sim 1.0 text workload (any other file)."""
    path = as_path(path, "models.load(path)")
    if path.lower().endswith(".onnx"):
        return load_onnx(path, **params)
    return load_astra(path, **params)


__all__ = ["KINDS", "Layer", "Model", "ModelError", "Net", "PRECISIONS", "PrecisionBytes",
           "get", "load", "names", "optimizer_bytes", "parameters", "precision_bytes",
           "register"]
