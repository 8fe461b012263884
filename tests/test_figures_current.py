"""The documentation's figures and sample outputs are current: the README's sample output is
what the command prints now, and every figure was made (docs/figures/make.sh) from the code
and systems that are here now (docs/figures/current.py keeps the fingerprint)."""
import importlib.util
import os

from conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "figures_current", os.path.join(ROOT, "docs", "figures", "current.py"))
current = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(current)


def test_the_readme_sample_output_is_what_pysim_prints():
    assert current.readme_sample() == current.sample_output(), \
        "README.md's sample output is stale: run docs/figures/make.sh (or current.py --samples)"


def test_the_figures_were_made_from_the_code_here():
    changed, missing = current.stale()
    assert not missing, f"figures make.sh did not write: {missing}"
    assert not changed, (f"the figures were made from other code (changed: "
                         f"{', '.join(changed[:12])}{' ...' if len(changed) > 12 else ''}); run "
                         f"docs/figures/make.sh")


def test_the_fingerprint_ignores_comments_and_docstrings_but_not_code():
    a = current._python_code('"""doc"""\nx = 1  # one\n\n\ndef f():\n    """f"""\n    return x\n')
    b = current._python_code('"""other words"""\nx = 1\n\ndef f():\n    return x\n')
    c = current._python_code('"""doc"""\nx = 2\n\ndef f():\n    return x\n')
    assert a == b != c
    assert current._other_code("a = 1\n# note\n\nb = 2\n") == \
        current._other_code("a = 1\nb = 2\n") != current._other_code("a = 1\nb = 3\n")
