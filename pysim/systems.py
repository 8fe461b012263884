"""The shipped systems: complete configs installed with the package, found by name.

`pysim run mesh8x8`, `pysim.load("dgx1-v100")`: a name that is not a file is looked up here.
The files live in the repository's `topologies/` folder and are installed as
`pysim/topologies/*.toml`. Each begins with two comment lines that `pysim systems` shows:

    # <what the system is, in one line>
    # Source: <where its numbers come from: papers and datasheets, authors, venue, year>

followed by as many lines as the assumptions need.
"""
from __future__ import annotations

import difflib
import os

from pysim._io import as_path
from pysim.errors import ConfigError

_HERE = os.path.dirname(os.path.abspath(__file__))


def directory():
    """The folder of the shipped systems: inside the installed package, or the checkout's
    topologies/ when pysim runs from its source tree (an editable install)."""
    installed = os.path.join(_HERE, "topologies")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(_HERE), "topologies")


def names():
    """The shipped systems' names, sorted."""
    folder = directory()
    if not os.path.isdir(folder):
        return []
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".toml"))


def path_of(name):
    """The file of shipped system `name` (with or without .toml), or None."""
    if not isinstance(name, str) or os.sep in name or "/" in name:
        return None
    stem = name[:-5] if name.endswith(".toml") else name
    return os.path.join(directory(), stem + ".toml") if stem in names() else None


def resolve(path, what="config file"):
    """`path` if it is a file; else the shipped system of that name; else a ConfigError that
    lists the shipped systems (with the closest name first)."""
    path = as_path(path, f"{what} (a path or a shipped system's name)")
    if os.path.exists(path):
        return path
    found = path_of(path)
    if found is not None:
        return found
    known = names()
    if os.sep in path or "/" in path:
        raise ConfigError(f"{what}: no such file {path}")
    close = difflib.get_close_matches(path[:-5] if path.endswith(".toml") else path, known,
                                      n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise ConfigError(f"{what}: no such file or shipped system {path!r}{hint}; shipped "
                      f"systems: {', '.join(known)} (pysim systems describes them)")


def header(path):
    """(what it is, source) from the two comment lines a shipped file begins with."""
    what = source = ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                break
            text = line[1:].strip()
            if not what:
                what = text
            elif text.startswith("Source:"):
                source = text[len("Source:"):].strip()
                break
    return what, source
