"""Keeps the documentation's figures and sample outputs current.

    python docs/figures/current.py --samples    # rewrite the README's sample output
    python docs/figures/current.py --write      # record what the figures were made from
    python docs/figures/current.py --check      # exit 1, naming them, if anything is stale

docs/figures/make.sh makes every figure, then runs this with --samples and --write.
`manifest.json` records a fingerprint of everything a figure is made from: the compiled
core's sources, pysim's code, the shipped systems, make.sh and the benchmarks it runs.
Comments, docstrings and blank lines are left out of the fingerprint, so a change of wording
does not make the figures stale; any change of code does. tests/test_figures_current.py fails
while the fingerprint differs from the recorded one, or while the README's sample output
differs from what the command prints now.
"""
import ast
import glob
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MANIFEST = os.path.join(HERE, "manifest.json")
README = os.path.join(ROOT, "README.md")

# what the figures are made from (globs relative to the repository's top folder)
INPUTS = ["csim/*.pyx", "csim/*.pxd", "csim/*.h", "csim/*.py", "pysim/**/*.py",
          "topologies/*.toml", "docs/figures/make.sh", "bench/mapa.py", "bench/vs_booksim.py"]
# the figures make.sh writes (bench/vs_booksim.py's needs BookSim: see make.sh)
FIGURES = ["latency-load-mesh8x8.png", "throughput-mesh8x8.png", "collective-busbw-ring8.png",
           "speedup-ring8.png", "link-utilisation-transpose.png",
           "link-utilisation-dgx1-v100.png", "timeline-mcdla-8.png",
           "timeline-allreduce-dgx1-v100.png", "breakdown-dgx1-v100.png", "memory-mcdla-8.png",
           "dgx1-v100.png", "mcdla-8.png", "torus4x4x4.png", "jobs-mapa-fp32-sync.png",
           "jobs-mapa-mixed-sync.png", "booksim-vs-pysim.png"]

# The README's sample: the command's output, the lines named here, then "..."
SAMPLE_COMMAND = ["run", "mesh8x8", "--set", "traffic.injection_rate=0.15"]
SAMPLE_LINES = ("system", "offered load", "accepted load", "saturated",
                "packets measured", "packet latency", "zero-load latency", "average hops")
SAMPLE_AFTER = "pysim run mesh8x8 --set traffic.injection_rate=0.15 --json out.json\n```\n\n"


def _python_code(text):
    """A Python file's code without its comments, docstrings and layout (its AST)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _other_code(text):
    """A Cython, C, TOML or shell file's lines without whole-line comments and blank lines."""
    return "\n".join(line.rstrip() for line in text.splitlines()
                     if line.strip() and not line.strip().startswith(("#", "//")))


def fingerprint():
    """{path: sha256 of its code} of every input."""
    out = {}
    for pattern in INPUTS:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            code = _python_code(text) if path.endswith(".py") else _other_code(text)
            out[rel] = hashlib.sha256(code.encode()).hexdigest()[:16]
    return out


def sample_output():
    """The README's sample, as `pysim run` prints it now."""
    from click.testing import CliRunner
    from pysim.cli import main
    r = CliRunner().invoke(main, SAMPLE_COMMAND)
    if r.exit_code != 0:
        raise RuntimeError(r.output)
    keep = [line for line in r.output.splitlines()
            if any(line.startswith(label + " ") for label in SAMPLE_LINES)]
    return "\n".join(keep) + "\n...\n"


def _readme_sample_span(text):
    start = text.index(SAMPLE_AFTER) + len(SAMPLE_AFTER)
    if not text.startswith("```text\n", start):
        raise ValueError("README.md: the sample output no longer follows its command")
    start += len("```text\n")
    return start, text.index("```", start)


def readme_sample():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    a, b = _readme_sample_span(text)
    return text[a:b]


def write_samples():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    a, b = _readme_sample_span(text)
    with open(README, "w", encoding="utf-8") as f:
        f.write(text[:a] + sample_output() + text[b:])


def _load():
    try:
        with open(MANIFEST) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def write_manifest(booksim):
    """Record the inputs' fingerprint as what the figures were made from; the figure beside
    BookSim keeps its own (made only with BookSim: `booksim`)."""
    now = fingerprint()
    old = _load() or {}
    doc = {"made_from": now, "figures": FIGURES,
           "booksim_made_from": now if booksim else old.get("booksim_made_from", now)}
    with open(MANIFEST, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def stale():
    """The inputs whose code differs from what the figures were made from (added, changed or
    removed), and the figures make.sh should have written but did not. (The figure beside
    BookSim is made only where BookSim is: its inputs are recorded apart, and not checked.)"""
    made = _load()
    if made is None:
        return ["docs/figures/manifest.json (missing)"], []
    now = fingerprint()
    rec = made["made_from"]
    changed = sorted(p for p in set(now) | set(rec) if now.get(p) != rec.get(p))
    missing = [f for f in made["figures"] if not os.path.exists(os.path.join(HERE, f))]
    return changed, missing


def main(argv):
    if "--samples" in argv:
        write_samples()
    if "--write" in argv:
        write_manifest("--booksim" in argv)
    if "--check" in argv:
        changed, missing = stale()
        ok = not changed and not missing and readme_sample() == sample_output()
        if not ok:
            print(f"stale: {', '.join(changed + missing) or 'the README sample'}; run "
                  f"docs/figures/make.sh")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
