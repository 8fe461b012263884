"""The results of job simulations by shape key: in memory, and optionally in an SQLite file
that later runs reuse (a key hashes the server's config and everything the simulation
depends on, so a changed config never reads a stale entry)."""
from __future__ import annotations

import json
import os
import sqlite3
import warnings

from pysim._version import __version__
from pysim._io import OutputError, check_output
from pysim.errors import ConfigError, PysimWarning

SCHEMA = """
CREATE TABLE IF NOT EXISTS shapes (
    key TEXT PRIMARY KEY,       -- sha256 of the shape, its labels and the server's config
    value TEXT NOT NULL,        -- the simulation's result (JSON)
    version TEXT
);
"""


class Cache:
    """Shape results by key. A file that cannot serve as the cache is refused when opened
    (naming --cache and why); one that fails later (a full disk) is left alone, with a
    PysimWarning, and the run goes on with the results in memory."""

    def __init__(self, path=None):
        self.mem = {}
        self.hits = self.misses = 0
        self.db = None
        self.path = None
        if path is None:
            return
        path = self.path = os.fspath(path)
        try:
            check_output(path, force=True, what="--cache")
        except OutputError as e:
            raise ConfigError(f"--cache {path}: {e}") from None
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    raise ConfigError(f"--cache {path}: exists and is not a pysim shape "
                                      f"cache (SQLite); not touching it")
        new = not os.path.exists(path)
        try:
            self.db = sqlite3.connect(path, timeout=30)
            tables = {t for (t,) in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "shapes" not in tables:
                raise ConfigError(f"--cache {path}: an SQLite database of something else; "
                                  f"not touching it")
            self.db.executescript(SCHEMA)
            cols = [c[1] for c in self.db.execute("PRAGMA table_info(shapes)")]
            if cols != ["key", "value", "version"]:
                raise ConfigError(f"--cache {path}: its table 'shapes' has the columns "
                                  f"{', '.join(cols)}, not a pysim shape cache's (key, value, "
                                  f"version); not touching it")
            self.db.execute("SELECT count(*) FROM shapes").fetchone()
            self.db.commit()
        except (sqlite3.Error, ConfigError) as e:
            if self.db is not None:
                self.db.close()
                self.db = None
            if new and os.path.exists(path) and os.path.getsize(path) == 0:
                os.unlink(path)                  # (made here, and nothing in it)
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"--cache {path}: cannot be used as a shape cache ({e}); give "
                              f"another file, or remove this one") from None

    def _failed(self, e):
        warnings.warn(f"--cache {self.path}: {e}; the run goes on, its shapes kept in memory "
                      f"only", PysimWarning, stacklevel=3)
        try:
            self.db.close()
        except sqlite3.Error:
            pass
        self.db = None

    def get(self, key):
        if key in self.mem:
            self.hits += 1
            return self.mem[key]
        if self.db is not None:
            try:
                row = self.db.execute("SELECT value FROM shapes WHERE key = ?",
                                      (key,)).fetchone()
            except sqlite3.Error as e:
                self._failed(e)
                row = None
            try:
                value = None if row is None else json.loads(row[0])
            except (TypeError, ValueError):      # a damaged entry: simulated again
                value = None
            if isinstance(value, dict):
                self.mem[key] = value
                self.hits += 1
                return self.mem[key]
        return None

    def __contains__(self, key):
        if key in self.mem:
            return True
        return self.get(key) is not None and not self._undo_hit()

    def _undo_hit(self):
        self.hits -= 1
        return False

    def put(self, key, value):
        self.misses += 1
        self.mem[key] = value
        if self.db is not None:
            try:
                self.db.execute("INSERT OR REPLACE INTO shapes VALUES (?, ?, ?)",
                                (key, json.dumps(value), __version__))
                self.db.commit()
            except sqlite3.Error as e:
                self._failed(e)

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None
