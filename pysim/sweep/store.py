"""The results database of sweeps: SQLite in WAL mode, a row per point (its config's hash, its
overrides, status, result and provenance), committed as each finishes; rows as tidy tables.
"""
from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
import urllib.parse

from pysim._io import OutputError, check_output, json_safe
from pysim._version import __version__
from pysim.errors import ConfigError
from pysim.schema import short


SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    hash TEXT PRIMARY KEY,      -- sha256 of the resolved config
    params TEXT NOT NULL,       -- the swept keys and their values (JSON)
    status TEXT NOT NULL,       -- done | saturated | failed
    result TEXT,                -- the full Result.to_dict() (JSON), NULL if failed
    error TEXT,                 -- what went wrong, NULL unless failed
    wall_seconds REAL,
    version TEXT,
    finished TEXT               -- UTC time the point was stored
);
"""


def _schema_columns():
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    cols = [c[1] for c in db.execute("PRAGMA table_info(points)")]
    db.close()
    return cols


COLUMNS = _schema_columns()    # what a pysim results database's table has


class StoreError(ConfigError):
    """The results database cannot be opened, read or written (the message says which and
    why)."""


def is_sqlite(path):
    """The file starts as every SQLite database does."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from None


class Store:
    """The SQLite results file: one row per point, committed as each finishes. While a sweep
    writes it, it is in WAL mode (a reader never blocks the writer, and a killed sweep loses
    no committed point); when the sweep ends it goes back to a single file (journal mode
    DELETE), so that a finished database can be read where nothing can be written."""

    def __init__(self, path, readonly=False):
        """readonly (results, plot): the file must exist and is never written."""
        self.path = os.fspath(path)
        self.readonly = readonly
        self.db = None
        if self.path != ":memory:" and os.path.exists(self.path) and \
                not os.path.isfile(self.path):
            raise StoreError(f"results database {self.path}: not a regular file (a directory, "
                             f"a device or a FIFO)")
        if self.path != ":memory:" and os.path.exists(self.path) and \
                os.path.getsize(self.path) > 0 and not is_sqlite(self.path):
            raise StoreError(f"{self.path} exists and is not a pysim results database "
                             f"(SQLite); not touching it")
        if not readonly and self.path != ":memory:":
            try:                  # (a missing folder, a name too long, a read-only place)
                check_output(self.path, force=True, what="results database")
            except OutputError as e:
                raise StoreError(f"results database (--db): {e}") from None
        try:
            self._open()
        except sqlite3.Error as e:
            self.close()
            raise StoreError(self._why(e)) from None

    def _why(self, e):
        text = str(e)
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return (f"{self.path} is damaged or not a complete SQLite database ({text}); "
                    f"not touching it")
        if self.readonly:
            return f"cannot read the results database {self.path}: {text}"
        return (f"cannot write the results database {self.path} (--db): {text}; check that "
                f"its directory and the file can be written")

    def _open(self):
        if self.readonly:
            if not os.path.isfile(self.path):
                raise StoreError(f"results database {self.path}: no such file")
            uri = "file:" + urllib.parse.quote(os.path.abspath(self.path))
            try:
                self.db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=30)
                tables = self._tables()
            except sqlite3.OperationalError:
                # a read-only place: WAL mode could not make its -shm file there. Open it
                # as immutable (nothing may change it meanwhile, and a write-ahead log left
                # by a sweep that was killed is not read: say so)
                if self.db is not None:
                    self.db.close()
                self.db = sqlite3.connect(uri + "?immutable=1", uri=True)
                tables = self._tables()
                wal = self.path + "-wal"
                if os.path.exists(wal) and os.path.getsize(wal) > 0:
                    sys.stderr.write(f"warning: {self.path} is read-only and has a write-ahead "
                                     f"log ({wal}) that cannot be read without writing: "
                                     f"points stored last by a sweep that was killed may be "
                                     f"missing\n")
        else:
            folder = os.path.dirname(os.path.abspath(self.path))
            if self.path != ":memory:" and not os.path.isdir(folder):
                raise StoreError(f"results database {self.path}: no directory {folder}")
            self.db = sqlite3.connect(self.path, timeout=30)
            tables = self._tables()
        columns = [c[1] for c in self.db.execute("PRAGMA table_info(points)")]
        if ("points" in tables and columns != COLUMNS) or (tables and "points" not in tables):
            raise StoreError(f"{self.path} is an SQLite database of something else than "
                             f"pysim's results; not touching it")
        if self.readonly:
            if not tables:
                raise StoreError(f"{self.path} holds no results")
            return
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self.db.commit()

    def _tables(self):
        return {t for (t,) in self.db.execute("SELECT name FROM sqlite_master "
                                              "WHERE type = 'table'")}

    def finished(self):
        """Hashes of the points already stored (failed ones are retried)."""
        try:
            return {h for (h,) in self.db.execute(
                "SELECT hash FROM points WHERE status != 'failed'")}
        except sqlite3.Error as e:
            raise StoreError(self._why(e)) from None

    def put(self, h, params, status, result, error, wall):
        try:
            self.db.execute(
                "INSERT OR REPLACE INTO points VALUES (?, ?, ?, ?, ?, ?, ?, "
                "strftime('%Y-%m-%dT%H:%M:%SZ','now'))",
                (h, json.dumps(json_safe(params), default=str), status,
                 None if result is None else json.dumps(json_safe(result), allow_nan=False),
                 error, wall, __version__))
            self.db.commit()
        except sqlite3.Error as e:
            raise StoreError(f"{self._why(e)} (the points stored before are kept)") from None

    def rows(self):
        try:
            raw = self.db.execute(
                "SELECT hash, params, status, result, error, wall_seconds, version FROM points "
                "ORDER BY rowid").fetchall()      # (all: no statement left open holding a lock)
            return [row_dict(*r) for r in raw]
        except sqlite3.Error as e:
            raise StoreError(self._why(e)) from None
        except (ValueError, TypeError) as e:      # a row whose JSON is not pysim's
            raise StoreError(f"{self.path}: a stored point is not readable ({e}); not a "
                             f"database pysim wrote, or damaged") from None

    def close(self):
        if self.db is None:
            return
        if not self.readonly and self.path != ":memory:":
            try:                        # a finished database is one file again
                self.db.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:       # (another sweep has it open: it stays in WAL mode)
                pass
        self.db.close()
        self.db = None


def row_dict(h, params, status, result, error, wall, version):
    params = json.loads(params)
    res = json.loads(result) if result else None
    if not isinstance(params, dict) or not (res is None or isinstance(res, dict)):
        raise ValueError("params and result are not JSON objects")
    return dict(hash=h, params=params, status=status, result=res, error=error,
                wall_seconds=wall, version=version)


def scalar_metrics(result):
    """The top-level numbers, booleans and strings of a result (no lists or dicts)."""
    if not result:
        return {}
    return {k: v for k, v in result.items()
            if isinstance(v, (int, float, bool, str)) or v is None}


def tidy(rows):
    """One flat dict per point: the swept keys, then the system (its name, from the resolved
    config stored with the result; absent for a failed point), status, error and the scalar
    metrics."""
    out = []
    for i, r in enumerate(rows if not isinstance(rows, (str, bytes, dict)) else [rows]):
        if not isinstance(r, dict) or not {"params", "result", "status", "error"} <= set(r):
            raise ConfigError(f"rows[{i}] = {short(r)}: expected a sweep's row, a dict with "
                              f"params, result, status and error (what pysim.sweep returns)")
        d = dict(r["params"])
        system = ((r["result"] or {}).get("config") or {}).get("_system")
        if system is not None:
            d["system"] = system
        d.update(scalar_metrics(r["result"]))
        d["status"] = r["status"]          # done | saturated | failed (the store's word)
        d["error"] = r["error"]
        out.append(d)
    return out


def order_key(v):
    """A sort key for any swept value: missing first, then numbers, strings, lists."""
    if v is None:
        return (0,)
    if isinstance(v, (bool, int, float)):
        return (1, float(v))
    if isinstance(v, str):
        return (2, v)
    if isinstance(v, (list, tuple)):
        return (3, tuple(order_key(x) for x in v))
    return (4, json.dumps(v, sort_keys=True, default=str))


def sort_rows(rows, keys=None):
    """Rows ordered by their swept values, key by key (`keys`, default: every swept key in
    name order), not in the order the points finished."""
    if keys is None:
        keys = sorted({k for r in rows for k in r["params"]})
    return sorted(rows, key=lambda r: tuple(order_key(r["params"].get(k)) for k in keys))


def to_pandas(rows):
    """The tidy table as a pandas DataFrame (pandas is optional)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas needs pandas: pip install 'pysim[pandas]'") from None
    return pd.DataFrame(tidy(rows))
