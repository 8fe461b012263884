"""`pysim models`: the model zoo, or one model layer by layer.
"""
from __future__ import annotations

import json

import click

from pysim.cli._common import main
from pysim.config import override_pairs, parse_override
from pysim.errors import ConfigError
from pysim.schema import MAX_INT, short
from pysim.models import get as get_model
from pysim.models import names as model_names
from pysim.models.report import format_model, format_zoo, resolve, to_json


@main.command(name="models")
@click.argument("model", required=False)
@click.option("--batch", type=int, default=1, show_default=True,
              help="Samples per batch: FLOPs and activation bytes are shown for the batch.")
@click.option("--precision", type=click.Choice(["fp32", "fp16", "bf16", "mixed", "amp"]),
              default=None, help="Bytes per element (default: each model's own).")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A model parameter (repeatable), e.g. -p layers=48 -p image=299; for an "
                   ".onnx file, a symbolic dimension, e.g. -p seq=128.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models_cmd(model, batch, precision, params, as_json):
    """The model zoo, or MODEL's layers (a zoo name, an .onnx file or an ASTRA-sim
    workload)."""
    try:
        if not 1 <= batch <= MAX_INT:
            raise ConfigError(f"--batch {batch}: expected an integer in 1 .. {MAX_INT:,}")
        pairs = []
        for text in params:
            key, eq, _ = text.partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"--param {text!r}: expected KEY=VALUE, e.g. layers=48")
            pairs.append((key.strip(), parse_override(text)[1]))
        kw = override_pairs(pairs, lambda k, a, b: f"--param {k} is given twice ({short(a)}, "
                                                   f"then {short(b)}); give it once")
        if model is None:
            if kw:
                raise ConfigError("--param needs a MODEL")
            ms = [get_model(n) for n in model_names()]
        else:
            ms = [resolve(model, **kw)]
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(to_json(ms, precision, batch, with_layers=model is not None),
                              indent=1))
    elif model is None:
        click.echo(format_zoo(ms, precision, batch))
    else:
        click.echo(format_model(ms[0], precision, batch))
