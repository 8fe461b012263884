"""The documentation runs as written: the README's commands (its tour included) in a fresh
folder, .ci/run running the README's test command, links that lead somewhere, a README a
newcomer reads in minutes, and pages that speak of the project alone."""
import os
import re
import sys

import pytest

from conftest import ROOT

import doc_commands

README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
PAGES = [README] + sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))


def test_the_readme_commands_run(tmp_path):
    ok, log = doc_commands.run_page(README, str(tmp_path), timeout=300)
    assert ok, log
    # the tour made what it says it makes
    for name in ("out.json", "dgx1.png", "sweep.sqlite", "latency.png", "throughput.png",
                 "trace.json", "timeline.png", "latency-py.png"):
        assert (tmp_path / name).exists(), name


def test_the_user_guide_commands_run(tmp_path):
    ok, log = doc_commands.run_page(os.path.join(DOCS, "user-guide.md"), str(tmp_path),
                                    timeout=300)
    assert ok, log
    assert (tmp_path / "latency.png").exists() and (tmp_path / "r.sqlite").exists()


def test_the_readme_opens_with_the_two_commands_and_stays_short():
    text = open(README).read()
    blocks = doc_commands.blocks(README)
    assert blocks[0] == ("sh", "pip install . && pysim run mesh8x8\n")
    assert blocks[1] == ("sh", "pip install -e '.[test]' && pytest\n")
    assert len(text.splitlines()) <= 160


def test_ci_runs_the_readme_test_command():
    test_command = doc_commands.blocks(README)[1][1].strip()
    ci = open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
    assert test_command in [line.strip() for line in ci]


def _anchors(path):
    """GitHub's anchors of a Markdown page's headings."""
    out = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"#+ (.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_links_lead_somewhere(page):
    text = open(page, encoding="utf-8").read()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"https?://", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        assert os.path.exists(full), f"{os.path.basename(page)}: {target} leads nowhere"
        if anchor and full.endswith(".md"):
            assert anchor in _anchors(full), f"{os.path.basename(page)}: no #{anchor} in {path}"


@pytest.mark.parametrize("page", PAGES + [os.path.join(ROOT, "bench", f)
                                          for f in os.listdir(os.path.join(ROOT, "bench"))
                                          if f.endswith(".py")], ids=os.path.basename)
def test_pages_speak_of_the_project_alone(page):
    text = open(page, encoding="utf-8").read()
    for word in (r"\bsessions?\b", r"\bissues?\b"):
        assert not re.search(word, text, re.I), f"{os.path.basename(page)}: {word}"
    for name in ("PAPERS.md", "seeds/", "/work/"):      # files outside the repository
        assert name not in text, f"{os.path.basename(page)}: {name}"


def test_every_kind_of_figure_is_in_the_docs():
    from pysim.cli import PLOT_KINDS
    guide = open(os.path.join(DOCS, "user-guide.md")).read()
    for kind in PLOT_KINDS:
        assert f"`{kind}`" in guide
    for image in re.findall(r"\]\((figures/[^)]+\.png)\)", guide):
        assert os.path.exists(os.path.join(DOCS, image))
    assert len(re.findall(r"!\[", guide)) >= len(PLOT_KINDS)



def test_validation_lists_every_test_file():
    """docs/validation.md says what each test file checks and against which oracle."""
    text = open(os.path.join(DOCS, "validation.md"), encoding="utf-8").read()
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "tests"))
                   if f.startswith("test_") and f.endswith(".py"))
    assert [f for f in files if f"`{f}`" not in text] == []


SOURCES = [os.path.join(d, f) for top in ("pysim", "csim", "tests", "bench", "docs")
           for d, _, fs in os.walk(os.path.join(ROOT, top)) for f in fs
           if f.endswith((".py", ".pyx", ".pxd", ".md", ".sh"))] + [README]


def test_code_tests_and_docs_state_what_is_true_now():
    """History is in git log (and CHANGELOG.md): no "used to", no pointers to documents the
    repository does not have."""
    for path in SOURCES:
        if path == os.path.abspath(__file__):
            continue
        text = open(path, encoding="utf-8").read()
        for pattern in (r"\bused to\b", r"VALIDATION\.md", r"\bthe earlier engine\b"):
            assert not re.search(pattern, text), f"{os.path.relpath(path, ROOT)}: {pattern}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))

