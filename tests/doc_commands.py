"""Run the commands a Markdown page shows, as a reader would type them.

Every ```sh block of a page is run, in order, by bash (-e: the first failing command stops
it), in one fresh folder per page, so a block may use the files an earlier one wrote; every
```python block is run by the current Python in the same folder. ```console, ```text and
```toml blocks are output or file contents, not run. The package is taken as installed: a
line `pip install ... && CMD` runs CMD, and the test command itself (`pytest`) is skipped.

    python tests/doc_commands.py README.md docs/user-guide.md    # from any folder

.ci/run runs it with the installed wheel, from outside the checkout; the test suite runs it
on README.md.
"""
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(sh|python)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks(path):
    """[(language, text)] of the runnable blocks of a page, in order."""
    with open(path, encoding="utf-8") as f:
        return [(m.group(1), m.group(2)) for m in FENCE.finditer(f.read())]


def shell_lines(text):
    """A sh block as it runs here: `pip install ... && CMD` is CMD; pytest is not run."""
    out = []
    for line in text.splitlines():
        if line.startswith("pip install"):
            _, sep, rest = line.partition("&&")
            line = rest.strip() if sep else ""
        if line.split()[:1] == ["pytest"]:
            continue
        out.append(line)
    return "\n".join(out) + "\n"


# Every command a page shows: a line of a ``` or ```sh block starting `pysim ` or `python `
# (with its continuation lines), and an inline `pysim ...` span that is a whole command (no
# placeholder: no word in capitals, no [optional] part, no '...').
ANY_FENCE = re.compile(r"^```([a-z]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:pysim|python) [^`]+)`(?!`)")
PLACEHOLDER = re.compile(r"\b[A-Z]{2,}\b|\[|\.\.\.|\\\|")


def commands(path, fenced=True):
    """[(line number, command)] of the commands a page shows, in the page's order (without
    those of its ```sh blocks unless `fenced`)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = []
    spans = []
    for m in ANY_FENCE.finditer(text):
        spans.append((m.start(), m.end()))
        if m.group(1) not in ("", "sh") or (m.group(1) == "sh" and not fenced):
            continue
        first = text.count("\n", 0, m.start(2)) + 1
        lines = m.group(2).splitlines()
        i = 0
        while i < len(lines):
            line, at = lines[i].strip(), first + i
            if line.startswith("pip install") and "&&" in line:
                line = line.partition("&&")[2].strip()
            if line.split()[:1] in (["pysim"], ["python"]):
                while line.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line[:-1].rstrip() + " " + lines[i].strip()
                out.append((at, line))
            i += 1
    for m in INLINE.finditer(text):
        if any(a <= m.start() < b for a, b in spans):
            continue
        cmd = " ".join(m.group(1).split())
        words = cmd.split()
        # `pysim run` or `pysim run --json` names a command or an option in the prose
        whole = (len(words) >= 3 and not words[2].startswith("-")) or \
            words[1:] in (["systems"], ["models"], ["--version"])
        if whole and not PLACEHOLDER.search(cmd):
            out.append((text.count("\n", 0, m.start()) + 1, cmd))
    return sorted(out)


def run_page(path, folder, timeout=600):
    """Run a page's blocks in `folder`; returns (ok, what was run and what it printed)."""
    log = []
    for lang, text in blocks(path):
        if lang == "sh":
            cmd = ["bash", "-e", "-o", "pipefail", "-c", shell_lines(text)]
        else:
            cmd = [sys.executable, "-c", text]
        p = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "MPLBACKEND": "Agg"})
        log.append(f"$ ({lang}, {path})\n{text}{p.stdout}{p.stderr}")
        if p.returncode != 0:
            log.append(f"exit status {p.returncode}")
            return False, "\n".join(log)
    return True, "\n".join(log)


def main(paths):
    ok = True
    for path in paths:
        with tempfile.TemporaryDirectory() as folder:
            good, log = run_page(os.path.abspath(path), folder)
        print(f"{'ok' if good else 'FAILED'}: the commands of {path}")
        if not good:
            print(log)
        ok &= good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
