"""Declared configuration keys.

Each component declares the keys it reads beside its code, with `declare(Key(...), ...)`:
section, name, kind, default, unit, one line of doc, and a constraint. `pysim.config` parses,
merges and checks a configuration against what has been declared; the configuration reference
(docs/configuration.md) is generated from the same declarations. This module imports nothing
of pysim but the errors.
"""
from __future__ import annotations

from pysim.errors import ConfigError

KIND_NAMES = ("int", "float", "bool", "str", "ints", "floats", "int|ints", "strs", "table",
              "tables")


class Key:
    """One declared configuration key.

    kind: one of KIND_NAMES; check: (predicate, "what was expected") or None; choices: a
    callable returning the allowed names (a registry's), or None."""

    def __init__(self, section, name, kind, default, unit, doc, check=None, choices=None):
        if kind not in KIND_NAMES:
            raise ValueError(f"key {section}.{name}: kind {kind!r} is not one of {KIND_NAMES}")
        self.section = section
        self.name = name
        self.kind = kind
        self.default = default
        self.unit = unit
        self.doc = doc
        self.check = check
        self.choices = choices

    @property
    def path(self):
        return f"{self.section}.{self.name}"

    def __repr__(self):
        return f"Key({self.path!r}, {self.kind!r}, default={self.default!r})"


KEYS: list[Key] = []            # every declared key, in declaration order
KEY_MAP: dict[str, Key] = {}    # path -> Key


def declare(*keys: Key) -> None:
    """Register keys. A path declared twice is a programming error, refused at import."""
    for k in keys:
        if k.path in KEY_MAP:
            raise ValueError(f"configuration key {k.path} is declared twice")
        KEYS.append(k)
        KEY_MAP[k.path] = k


def sections() -> list[str]:
    """The declared sections, in the order of their first key."""
    return list(dict.fromkeys(k.section for k in KEYS))


__all__ = ["ConfigError", "KEYS", "KEY_MAP", "Key", "declare", "sections"]
