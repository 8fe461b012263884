"""The results of job simulations by shape key: in memory, and optionally in an SQLite file
that later runs reuse (a key hashes the server's config and everything the simulation
depends on, so a changed config never reads a stale entry)."""
from __future__ import annotations

import json
import os
import sqlite3

from pysim._version import __version__
from pysim.errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS shapes (
    key TEXT PRIMARY KEY,       -- sha256 of the shape, its labels and the server's config
    value TEXT NOT NULL,        -- the simulation's result (JSON)
    version TEXT
);
"""


class Cache:
    def __init__(self, path=None):
        self.mem = {}
        self.hits = self.misses = 0
        self.db = None
        if path is not None:
            path = os.fspath(path)
            if os.path.exists(path) and os.path.getsize(path) > 0:
                with open(path, "rb") as f:
                    if f.read(16) != b"SQLite format 3\x00":
                        raise ConfigError(f"--cache {path}: exists and is not a pysim shape "
                                          f"cache (SQLite); not touching it")
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise ConfigError(f"--cache {path}: no directory {folder}")
            self.db = sqlite3.connect(path, timeout=30)
            tables = {t for (t,) in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "shapes" not in tables:
                self.db.close()
                raise ConfigError(f"--cache {path}: an SQLite database of something else; not "
                                  f"touching it")
            self.db.executescript(SCHEMA)
            self.db.commit()

    def get(self, key):
        if key in self.mem:
            self.hits += 1
            return self.mem[key]
        if self.db is not None:
            row = self.db.execute("SELECT value FROM shapes WHERE key = ?", (key,)).fetchone()
            if row is not None:
                self.mem[key] = json.loads(row[0])
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
            self.db.execute("INSERT OR REPLACE INTO shapes VALUES (?, ?, ?)",
                            (key, json.dumps(value), __version__))
            self.db.commit()

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None
