"""What every benchmark does with the files it writes, as the `pysim` command line does.

- An output that exists is refused before any work unless --force is given, as is one that
  could not be written at all (pysim's own checks: pysim._io.check_output): a usage error,
  status 2, naming the option, the file and --force.
- An output that names a file the benchmark reads is refused even with --force (--force
  replaces outputs, never inputs), as are two outputs naming one file.
- A JSON output or a figure is written whole or not at all (pysim._io.write_atomic).
- Ctrl-C ends a benchmark with one line on stderr, `interrupted: nothing written` or the
  files written so far, and no traceback; the process then ends by SIGINT, as an interrupted
  program does (status 130 in a shell). This holds from the moment this module is imported,
  so a benchmark imports it before pysim, numpy or torch (which take a while to load);
  importing it loads nothing of pysim (bench/models.py times that).

    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    check(ap, a.force, [("--json", a.json)], inputs=[("the table", TABLE)])
    ...
    write_json(a.json, doc)
"""
import contextlib
import json
import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FORCE = "overwrite the output files if they exist"

_written = []               # the outputs written by this run, in order


def check(ap, force, outputs, inputs=()):
    """Checked before any work: `outputs` ((option, path or None) pairs) may be written:
    none names a file the benchmark reads (`inputs`: (what, path or None) pairs), no two name
    one file, and one that exists is overwritten only with `force`. A refusal is `ap`'s usage
    error (status 2). An output's folder is made if missing."""
    # (imported here: see the module docstring)
    from pysim._io import OutputError, check_distinct, check_not_input, check_output
    try:
        check_distinct(outputs)
        check_not_input(outputs, inputs, "benchmark")
    except OutputError as e:
        ap.error(str(e))
    for opt, path in outputs:
        if not path:
            continue
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        except OSError as e:
            ap.error(f"{opt} {path}: cannot make its folder ({e.strerror or e})")
        try:
            check_output(path, force, what=opt)
        except OutputError as e:
            ap.error(str(e) if str(e).startswith(opt) else f"{opt} {e}")


def write_json(path, doc, quiet=False, end="", **dump):
    """Write `doc` as JSON to `path`, whole or not at all (its folder is made if missing),
    and say where (unless quiet); `end` follows the JSON text."""
    from pysim._io import write_atomic
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, lambda f: (json.dump(doc, f, indent=1, **dump), f.write(end)))
    wrote(path)
    if not quiet:
        print(f"written {path}")


def write_figure(path, draw):
    """Save a figure to `path` whole or not at all: draw(name) saves it under a temporary
    name beside `path` (of its extension), which is then renamed over `path`."""
    from pysim._io import write_atomic

    def write(name):
        draw(name)
    write.takes_path = True
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, write)
    wrote(path)


def wrote(path):
    """Record an output written (a figure saved by its library), for the line Ctrl-C
    prints."""
    if path not in _written:
        _written.append(path)


def interrupted():
    """The line Ctrl-C prints: what this run wrote before it."""
    return "interrupted: " + ("written " + ", ".join(_written) if _written
                              else "nothing written")


def quiet_worker():
    """A worker process's start (a process pool's initializer): Ctrl-C, which reaches every
    process of the terminal's group, ends it quietly (SystemExit, which multiprocessing does
    not print; a pool hands a busy worker's to the parent), and the parent says it."""
    signal.signal(signal.SIGINT, _exit_quietly)


@contextlib.contextmanager
def sigint_deferred():
    """Ctrl-C while a child process is forked is raised when the fork is done: raised
    during it (in an at-fork hook, which Python ignores) it would be lost, or come before
    the parent knows its child, which would then outlive it."""
    got = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


def _exit_quietly(signum, frame):
    sys.exit(128 + signum)


def _hook(kind, value, tb, default=sys.excepthook):
    if issubclass(kind, KeyboardInterrupt):
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(interrupted(), file=sys.stderr)      # (Python then ends the process by SIGINT)
    else:
        default(kind, value, tb)


def _run_as_benchmark():
    """Whether the program running is a benchmark of this folder (not a test importing one)."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return bool(main) and os.path.dirname(os.path.abspath(main)) == HERE


if _run_as_benchmark():
    sys.excepthook = _hook
