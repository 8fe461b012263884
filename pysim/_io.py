"""Files the user names: outputs checked before any work, written whole or not at all, and
inputs read with a size bound.

An output is checked before the run whose result it will hold (it exists and --force was not
given; its directory is missing; nothing can be created there -- a temporary file is made and
removed; an existing file cannot be opened for writing), so a long run is never lost to a
path that could not take it. It is then written to a temporary file beside it and renamed
over it, so a write that fails half-way (a full disk) leaves the old file, or none."""
from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Sequence


class OutputError(OSError):
    """An output file cannot be written; the message names it and says why."""


def as_path(path, what):
    """`path` (a str, bytes or os.PathLike) as a str; anything else is a TypeError naming
    `what` (the argument)."""
    if isinstance(path, bytes):
        return os.fsdecode(path)
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(f"{what}: expected a path (a str or os.PathLike), not "
                        f"{type(path).__name__}") from None


def check_output(path, force=False, what="output"):
    """Raise OutputError if `path` could not be written (see the module docstring)."""
    if not path:
        return
    path = os.fspath(path)
    if os.path.isdir(path):
        raise OutputError(f"{what} {path} is a directory; expected a file name")
    if _special(path):               # /dev/stdout, a FIFO: written in place, nothing replaced
        if not os.access(path, os.W_OK):
            raise OutputError(f"cannot write {path}: permission denied")
        return
    if os.path.lexists(path) and not force:
        raise OutputError(f"{path} exists; pass --force to overwrite it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OutputError(f"cannot write {path}: no directory {folder}")
    name = os.fsencode(os.path.basename(path))
    try:
        most = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        most = 255
    if len(name) > most:
        raise OutputError(f"cannot write {path}: its name has {len(name)} bytes; the file "
                          f"system holding {folder} takes at most {most}")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".pysim-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"cannot write {path}: cannot create a file in {folder} "
                          f"({e.strerror})") from None
    if os.path.exists(path):
        try:
            with open(path, "ab"):
                pass
        except OSError as e:
            raise OutputError(f"cannot write {path}: {e.strerror}") from None


def check_distinct(outputs, stdout=None):
    """Raise OutputError if two outputs ((option, path or None) pairs) name one file (or a
    file and a folder), which the second write would replace or fail on. `stdout` (the
    name standard output goes by, such as "-") may be named by one output only."""
    seen = {}
    for opt, path in outputs:
        if not path:
            continue
        if stdout is not None and path == stdout:
            if stdout in seen:
                raise OutputError(f"{seen[stdout]} and {opt} both name {stdout} (standard "
                                  f"output); at most one output may go there")
            seen[stdout] = opt
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise OutputError(f"{seen[real]} and {opt} both name {path}; give each its own "
                              f"file")
        seen[real] = opt


def check_not_input(outputs, inputs, reader="program"):
    """Raise OutputError if an output ((option, path or None) pairs) is a file the `reader`
    (the command, the benchmark) reads (`inputs`: (what, path or None) pairs), which --force
    would write over: --force replaces outputs, never inputs."""
    for opt, path in outputs:
        if not path or not os.path.exists(path):
            continue
        for what, src in inputs:
            if src and os.path.exists(src) and os.path.samefile(path, src):
                raise OutputError(f"{opt} {path} is {what}, which this {reader} reads; "
                                  f"--force writes over outputs, not inputs: give {opt} "
                                  f"another name")


def _special(path):
    """An existing file that is not a regular one (a device such as /dev/stdout or /dev/null,
    a FIFO, a socket): it is written in place; renaming a file over it would replace it."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not os.path.isdir(path)
    except OSError:
        return False


def write_atomic(path, write, binary=False, force=True):
    """Write `path` whole or not at all: write(f) fills a temporary file in the same
    directory (or, given a path to write to, write(temp path)), which is then renamed over
    `path` (over the file a symbolic link points to, not the link). A device or FIFO is
    written in place. Without `force`, a file that appeared at `path` meanwhile (another
    run writing the same output) is not replaced: the name is taken exclusively first, and
    the write fails. Errors are OutputError naming the file."""
    path = os.fspath(path)
    if _special(path):
        try:
            if getattr(write, "takes_path", False):
                write(path)
            else:
                with open(path, "wb" if binary else "w") as f:
                    write(f)
            return
        except OSError as e:
            raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    path = os.path.realpath(path)            # (a link's target is what is overwritten)
    folder = os.path.dirname(os.path.abspath(path))
    ext = os.path.splitext(path)[1]
    tmp = placeholder = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".pysim-", suffix=ext)
        if getattr(write, "takes_path", False):
            os.close(fd)
            write(tmp)
        else:
            with os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                                                              {"newline": ""})) as f:
                write(f)
        try:                        # a new file gets the mode any new file would
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        except OSError:
            pass
        if not force:
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                raise OutputError(f"cannot write {path}: another process created it while "
                                  f"this one ran (pass --force to overwrite it)") from None
            placeholder = path
        os.replace(tmp, path)
        tmp = placeholder = None
    except OutputError:
        raise
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if placeholder is not None:          # (taken, then not filled: given back)
            try:
                os.unlink(placeholder)
            except OSError:
                pass
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def by_path(fn):
    """Mark a writer that takes the temporary file's path (matplotlib's savefig) rather
    than an open file."""
    fn.takes_path = True
    return fn


def json_safe(obj):
    """obj with every non-finite float (NaN, +-inf) replaced by None, recursively: what JSON
    can hold ('Infinity' and 'NaN' are not JSON, and other tools refuse them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (str, int, bytes)) or obj is None:
        return obj
    if isinstance(obj, Sequence):       # (a table of rows made when asked for: LinkTable)
        return [json_safe(v) for v in obj]
    return obj


def dump_json(obj, f, **kw):
    """json.dump of json_safe(obj), refusing anything that is not JSON."""
    json.dump(json_safe(obj), f, allow_nan=False, **kw)


MAX_INPUT_BYTES = 256 << 20     # a TOML or JSON file the user names (a 2,000-node fully
                                # connected graph's links are about 100 MB of TOML)


def read_bounded(path, limit=None):
    """The bytes of a regular file of at most `limit` bytes; anything else (a device such as
    /dev/zero, a FIFO that would block, a larger file) is a ValueError saying which."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file (a device, a FIFO or a socket)")
    if st.st_size > limit:
        raise ValueError(f"{path} has {st.st_size:,} bytes; expected at most {limit:,}")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} has more than {limit:,} bytes")
    return data


MAX_MODEL_BYTES = 2 << 30       # a model file (.onnx, a Chakra trace): protobuf's own limit
MAX_TEXT_MODEL_BYTES = 64 << 20  # an ASTRA-sim text workload (100,000 layers are ~10 MB)


def read_input(path, limit=None, what="file"):
    """read_bounded(path, limit), every failure an InputError saying what is wrong with the
    file in words (no such file, a directory, a device or FIFO, too large, unreadable)."""
    try:
        return read_bounded(path, limit)
    except FileNotFoundError:
        raise InputError(f"no such file {path}") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; expected a {what}") from None
    except ValueError as e:
        raise InputError(f"{e} (reading a {what})") from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None


class InputError(ValueError):
    """An input file cannot be read; the message names it and says why."""
