"""What every command of the `pysim` command line shares: the group (`main`), reading
overrides, refusing and writing outputs, progress lines, tables.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import warnings

import click

from pysim._io import (OutputError, check_distinct, check_not_input, check_output, dump_json,
                       read_bounded, write_atomic)
from pysim._version import __version__
from pysim.config import override_pairs, parse_override
from pysim.errors import ConfigError, PysimWarning
from pysim.schema import short
from pysim.workload.runtime import describe as describe_estimate, duration as describe_duration


def overrides(pairs):
    """--set KEY=VALUE options as a dict; a key given twice is refused with both values."""
    try:
        return override_pairs([parse_override(text) for text in pairs],
                              lambda p, a, b: f"--set {p} is given twice ({short(a)}, then "
                                              f"{short(b)}); give it once")
    except ConfigError as e:
        text = str(e)
        raise ConfigError(text if text.startswith("--set") else f"--set {text}") from None


STDOUT = "-"        # an output option given `-`: a JSON or CSV output goes to standard output


class OutPath(click.Path):
    """click.Path of an output option: an empty name (`--json "$OUT"` with OUT unset) is
    refused, not taken for the option not given (the output silently not written)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r}: an empty name; expected a file or folder name", param, ctx)
        return super().convert(value, param, ctx)


def to_stdout(*paths):
    """Whether an output goes to standard output: the human text (summary, description,
    'written to' lines) then goes to stderr, so that stdout holds the JSON or CSV alone."""
    return any(p == STDOUT for p in paths)


def refuse_stdout(option, path, what, name="file"):
    """Checked before any work: `-` given to an output that is not JSON or CSV text (a
    folder, a database, an image) is refused, not made a file named `-`."""
    if path == STDOUT:
        raise click.ClickException(f"{option} -: {what} cannot go to standard output (- "
                                   f"stands for it only for JSON and CSV outputs); give a "
                                   f"{name} name")


def refuse_overwrite(path, force):
    """Checked before any work: an output file is not overwritten unless --force, and one
    that could not be written at all (no such directory, a read-only one) stops the command
    at once, not after a long run whose results would then be lost. `-` is standard output
    (nothing to check)."""
    if path == STDOUT:
        return
    try:
        check_output(path, force)
    except OutputError as e:
        raise click.ClickException(str(e)) from None


def distinct_outputs(*given):
    """Checked before any work: no two output options ((option, path or None) pairs) name
    one file (or a file and a folder), which the second write would replace or fail on."""
    try:
        check_distinct(given, stdout=STDOUT)
    except OutputError as e:
        raise click.ClickException(str(e)) from None


def not_an_input(outputs, inputs=(), cfg=None):
    """Checked before any work: no output ((option, path or None) pairs) names a file the
    command reads (`inputs`: (what, path) pairs; with `cfg`, its file and the files its keys
    name), which --force would write over: --force replaces outputs, never inputs."""
    inputs = list(inputs)
    if cfg is not None:
        inputs += [("the config file", cfg.source)] + cfg.files()
    try:
        check_not_input([(o, p) for o, p in outputs if p != STDOUT], inputs, "command")
    except OutputError as e:
        raise click.ClickException(str(e)) from None


def write_output(path, write, keep=None, force=True, **kw):
    """Write an output (whole or not at all); if that fails after the work is done, say so,
    and keep what was computed: `keep()` saves it elsewhere and returns where. `-` is
    standard output (text only)."""
    try:
        if path == STDOUT:
            try:
                out = _Tail(sys.stdout)
                write(out)
                if out.last != "\n":          # (a terminal's prompt on a line of its own)
                    sys.stdout.write("\n")
                sys.stdout.flush()
            except BrokenPipeError:
                raise                   # (the reader stopped reading: stdout_closed)
            except OSError as e:
                raise OutputError(f"cannot write standard output: {e.strerror or e}") from None
        else:
            write_atomic(path, write, force=force, **kw)
        return True
    except OutputError as e:
        where = ""
        if keep is not None:
            try:
                where = f"; kept in {keep()}"
            except OSError:
                where = "; it could not be kept elsewhere either"
        click.echo(f"error: {e}{where}", err=True)
        return False


class _Tail:
    """A text stream that remembers the last character written to it."""

    def __init__(self, f):
        self.f, self.last = f, ""

    def write(self, text):
        if text:
            self.last = text[-1]
        return self.f.write(text)


def finish(outputs, summary, quiet, force, ok=True):
    """The end of a command that computed a result: write each output asked for, whole or not
    at all (`outputs`: (path or None, write(f), keep() -> where it was kept instead, what it
    is)); print `summary` unless quiet (and always when a write failed), then where each
    output went; exit with status 1 if one failed (or `ok` is false already). With an
    output on standard output (`-`), the summary and those lines go to stderr."""
    written = []
    for path, write, keep, what in outputs:
        if path:
            done = write_output(path, write, keep=keep, force=force)
            ok &= done
            written.append((what, path))
    err = to_stdout(*(o[0] for o in outputs))
    if not quiet or not ok:
        click.echo(summary(), err=err)
    if not quiet and ok:
        for what, path in written:
            if path != STDOUT:
                click.echo(f"{what} written to {path}", err=err)
    if not ok:
        sys.exit(1)


def keep_text(text, name, suffix):
    """As keep_json, for text (a job file)."""
    fd, path = tempfile.mkstemp(prefix=f"pysim-{name}-", suffix=suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def keep_json(obj, name):
    """Save a computed result that could not go where asked: a new file in the temporary
    directory. Returns its path."""
    fd, path = tempfile.mkstemp(prefix=f"pysim-{name}-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        dump_json(obj, f, indent=1)
    return path


PIPE_CLOSED = 141       # 128 + SIGPIPE: a Unix filter's status when its reader stops reading


def stdout_closed():
    """Standard output's reader stopped reading (`pysim run ring8 --json - | head`): what it
    read is what it wanted, so the command ends at once and quietly, as a Unix filter does,
    with status 141 (nothing is kept elsewhere, no error is printed; stdout is pointed at
    /dev/null so that Python's closing flush does not complain)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):     # (no file descriptor: a test's captured stdout)
        pass
    sys.exit(PIPE_CLOSED)


class _Group(click.Group):
    """The command group: a closed standard output ends any command as stdout_closed says."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            stdout_closed()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pysim")
def main():
    """pysim: cycle-level simulation of accelerator, memory-node and host networks."""
    default = warnings.showwarning

    def show(message, category, *args, **kw):
        if issubclass(category, PysimWarning):
            click.echo(f"warning: {message}", err=True)
        else:
            default(message, category, *args, **kw)
    warnings.showwarning = show


def format_value(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_table(rows, columns):
    widths = [max(len(c), *(len(format_value(r.get(c, ""))) for r in rows)) for c in columns]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        click.echo("  ".join(format_value(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


class Ticker:
    """A progress line on the terminal (stderr), redrawn at most once a second, with the
    share of the work done and an ETA where the run knows its total; `draw=False` draws no
    line (stderr is not a terminal) but still says a long run's estimate before it starts."""

    def __init__(self, draw=True):
        self.t0 = time.perf_counter()
        self.shown = 0.0
        self.width = 0
        self.draw = draw
        self.done = None                 # share of the estimated work done, when known

    def show(self, text, now=False):
        """Redraw the line with text(seconds since the start), unless it was drawn less than
        a second ago (`now`: draw it anyway)."""
        t = time.perf_counter() - self.t0
        if not self.draw or (t - self.shown < 1.0 and not now):
            return
        self.shown = t
        line = text(t)
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def estimate(self, est):
        """Before an op graph runs: its estimate (pysim.workload.runtime), said if long."""
        self.t0 = time.perf_counter()
        line = describe_estimate(est)
        if line:
            self.clear()
            click.echo(line, err=True)

    def share(self, fraction):
        self.done = fraction

    def __call__(self, now, last):
        """Simulated cycles so far (of at most `last`), with the share done and an ETA."""
        share = self.done if self.done is not None else (now / last if last else None)
        self.show(lambda t: f"cycle {now:,}" + (f" of at most {last:,}" if last else "") +
                  f", {t:.0f} s" + eta(share, t, "at most " if last and self.done is None
                                       else ""))

    def clear(self):
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def eta(share, elapsed, qualifier=""):
    """', 40% done, ETA 2 min' from the share done after `elapsed` seconds ('' if unknown)."""
    if share is None or share <= 0.0:
        return ""
    left = elapsed * (1.0 - share) / share
    return f", {100 * share:.0f}% done, ETA {qualifier}{describe_duration(left)}"


def figure_ext(path, option):
    refuse_stdout(option, path, "a figure")
    if os.path.splitext(path)[1].lower() not in (".png", ".pdf", ".svg"):
        raise click.ClickException(f"{option} {path}: expected a .png, .pdf or .svg file")


def read_json(path):
    """A JSON file the user names for a figure (bounded, strict: NaN and Infinity are not
    JSON)."""

    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    try:
        return json.loads(read_bounded(path).decode("utf-8"), parse_constant=refuse)
    except UnicodeDecodeError:
        raise click.ClickException(f"{path}: not a JSON file (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise click.ClickException(f"{path}: not a JSON file: {e}") from None
    except RecursionError:
        raise click.ClickException(f"{path}: nests too deeply") from None
    except OSError as e:
        raise click.ClickException(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise click.ClickException(f"{path}: {e}") from None
