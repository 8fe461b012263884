"""`pysim models`: the zoo, one model's layers, files, JSON, and refusals."""
import json

from click.testing import CliRunner

from pysim import models
from pysim.cli import main


def run(args):
    return CliRunner().invoke(main, ["models"] + args)


def test_zoo_json_has_every_model_with_the_documented_fields():
    res = run(["--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["name"] for r in rows] == models.names()
    for r in rows:
        m = models.get(r["name"])
        assert r["params"] == m.params and r["fwd_flops"] == m.fwd_flops
        assert r["activation_bytes"] == m.activation_bytes(m.default_precision)
        assert r["layers"] == len(m.layers) and "layer_table" not in r


def test_one_model_json_with_batch_and_precision():
    res = run(["resnet50", "--batch", "32", "--precision", "mixed", "--json"])
    assert res.exit_code == 0, res.output
    [r] = json.loads(res.output)
    m = models.get("resnet50")
    assert r["precision"] == "mixed" and r["batch"] == 32
    assert r["activation_bytes"] == m.activation_bytes("mixed")      # per sample
    assert r["per_batch"]["activation_bytes"] == 32 * m.activation_bytes("mixed")
    assert len(r["layer_table"]) == r["layers"] == len(m.layers)
    fc = r["layer_table"][-2]
    assert fc["name"] == "fc" and fc["out_shape"] == [1000]
    assert fc["bytes"]["weights"] == fc["params"] * 2


def test_text_tables():
    res = run([])
    assert res.exit_code == 0 and "resnet50" in res.output and "25.6 M" in res.output
    res = run(["gpt2", "-p", "size=small", "-p", "seq=128"])
    assert res.exit_code == 0, res.output
    assert "124,439,808" in res.output and "layer11.fc2" in res.output
    assert res.output.count("\n") > 150


def test_files(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("DATA\n1\nconv1 -1 5 NONE 0 6 NONE 0 7 ALLREDUCE 1024 1\n")
    res = run([str(p)])
    assert res.exit_code == 0 and "ALLREDUCE 1024" in res.output
    [r] = json.loads(run([str(p), "--json"]).output)
    assert r["given_times"] and r["parallelism"] == "DATA"


def test_refusals():
    res = run(["resnt50"])
    assert res.exit_code == 1 and "did you mean 'resnet50'" in res.output
    res = run(["resnet50", "-p", "imag=3"])
    assert res.exit_code == 1 and "did you mean 'image'" in res.output
    res = run(["resnet50", "--batch", "0"])
    assert res.exit_code == 1 and "--batch 0" in res.output
    res = run(["-p", "layers=3"])
    assert res.exit_code == 1 and "needs a MODEL" in res.output
    res = run(["missing.onnx"])
    assert res.exit_code == 1 and "no such file" in res.output
    res = run(["transformer", "-p", "layers=0"])
    assert res.exit_code == 1 and "layers = 0" in res.output
    assert "Traceback" not in res.output


def test_a_parameter_given_twice_is_refused_naming_both_values():
    """-p layers=1 -p layers=2 drew the model with the last, without a word (as --set
    refuses a key given twice)."""
    r = run(["transformer", "-p", "layers=1", "-p", "layers=2"])
    assert r.exit_code == 1 and "--param layers is given twice (1, then 2); give it once" \
        in r.output, r.output


def test_a_batch_past_the_integer_limit_is_refused():
    """--batch 10^21 printed FLOPs in the e+09 P range; integers past 10^15 are refused
    everywhere else."""
    r = run(["resnet50", "--batch", str(10 ** 21)])
    assert r.exit_code == 1 and "--batch 1000000000000000000000: expected an integer in 1 .. " \
        "1,000,000,000,000,000" in r.output, r.output
