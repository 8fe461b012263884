"""The benchmarks' outputs: `--json`/`--out` may name a bare file in the current folder."""
import ast
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "bench")


def test_write_json_takes_a_bare_file_name(tmp_path, monkeypatch):
    sys.path.insert(0, BENCH)
    try:
        from provenance import write_json
    finally:
        sys.path.remove(BENCH)
    monkeypatch.chdir(tmp_path)
    write_json("out.json", {"rows": [1]})
    write_json(os.path.join("new", "deeper", "out.json"), {"rows": [2]})
    assert json.loads((tmp_path / "out.json").read_text()) == {"rows": [1]}
    assert json.loads((tmp_path / "new" / "deeper" / "out.json").read_text()) == {"rows": [2]}


def _is(node, dotted):
    return isinstance(node, ast.Call) and ast.unparse(node.func) == dotted


def test_no_benchmark_makes_the_folder_of_a_bare_file_name():
    """os.makedirs(os.path.dirname(path)) raises for a bare "x.json" (dirname ""): every
    benchmark that makes its output's folder makes it of the absolute path (or leaves it to
    provenance.write_json)."""
    bad = []
    for path in sorted(glob.glob(os.path.join(BENCH, "*.py"))):
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if _is(node, "os.makedirs") and node.args and _is(node.args[0], "os.path.dirname"):
                inner = node.args[0].args[0] if node.args[0].args else None
                if not _is(inner, "os.path.abspath"):
                    bad.append(f"{os.path.basename(path)}:{node.lineno}")
    assert not bad, bad
