"""Parameter sweeps: a grid of runs, in parallel, stored in SQLite as each point finishes.

A point is one set of overrides of a base config. Its identity is a hash of its resolved
config (every key, defaults included), so re-running a sweep skips the points already done,
and a sweep interrupted (Ctrl-C, or the process killed) loses no finished point: each is
committed on its own, in a database in WAL mode. Points run in local worker processes or on
a Dask distributed cluster; only the submitting process writes the database.

    rows = pysim.sweep("topologies/mesh8x8.toml",
                       {"traffic.injection_rate": [0.05, 0.1, 0.15]}, jobs=2,
                       db="results.sqlite")
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import json
import math
import multiprocessing as mp
import os
import signal
import sqlite3
import sys
import threading
import time
import urllib.parse
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait as wait_for

from pysim._version import __version__
from pysim.config import (KEY_MAP, Config, apply_override, cwd_paths, from_dict, is_key, load,
                          parse_override)
from pysim.errors import ConfigError, PysimWarning
from pysim.schema import suggest as _suggest
from pysim._io import json_safe
from pysim.sim import simulate

MAX_POINTS = 1_000_000     # points in one sweep (a range of 1e18 values filled memory)
SCHEDULER_TIMEOUT_S = 10   # to connect to a Dask scheduler

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


# ------------------------------------------------------------------ grids

def parse_param(text: str):
    """'key=v1,v2,...' or 'key=start:stop:step' (stop included) -> (key, [values])."""
    key, eq, spec = text.partition("=")
    key = key.strip()
    if not eq or not key or not spec.strip():
        raise ConfigError(f"--param {text!r}: expected KEY=V1,V2,... or KEY=START:STOP:STEP")
    spec = spec.strip()
    if ":" in spec and not spec.startswith(("[", '"', "'")):
        parts = spec.split(":")
        try:
            start, stop, step = (float(p) for p in parts)
        except ValueError:
            raise ConfigError(f"--param {text!r}: START:STOP:STEP must be three numbers") from None
        if len(parts) != 3 or not all(map(math.isfinite, (start, stop, step))) or \
                step <= 0 or stop < start:
            raise ConfigError(f"--param {text!r}: expected finite numbers, START <= STOP and "
                              f"STEP > 0")
        if (stop - start) / step + 1 > MAX_POINTS:
            raise ConfigError(f"--param {text!r}: {_count((stop - start) / step + 1)} values; a "
                              f"sweep has at most {MAX_POINTS:,} points")
        n = int(math.floor((stop - start) / step + 1e-9)) + 1
        vals = [start + i * step for i in range(n)]
        if all(float(p).is_integer() for p in parts):
            vals = [int(round(v)) for v in vals]
        else:
            vals = [round(v, 12) for v in vals]
        return key, vals
    values = []
    for item in _split_top_level(spec):
        values.append(parse_override(f"{key}={item}", "--param")[1])
    declared = KEY_MAP.get(key)
    if declared is not None and declared.kind in ("int", "float", "int|ints"):
        for v in values:
            if isinstance(v, str):
                raise ConfigError(f"--param {text!r}: {v!r} is not a number; {_range_hint(key, v)}")
    return key, values


def _range_hint(key, value):
    """What to write instead of a value like '0.1-0.5' (taken for a range)."""
    a, sep, b = value.partition("-")
    try:
        lo, hi = float(a), float(b)
    except ValueError:
        lo = hi = None
    if sep and lo is not None and hi > lo:
        step = (hi - lo) / 4
        if lo.is_integer() and hi.is_integer():
            step = max(1, int(step))
        return (f"a range is START:STOP:STEP (STOP included), e.g. "
                f"{key}={a}:{b}:{step:g}")
    return "expected V1,V2,... or START:STOP:STEP (STOP included)"


def _count(x):
    """A count of values for a message: in full up to 10^15, else in three digits."""
    return f"{x:,.0f}" if x < 1e15 else f"{x:.3g}"


def _split_top_level(spec):
    """Split on commas that are not inside brackets or quotes (lists as values)."""
    out, depth, cur, quote = [], 0, "", None
    for ch in spec:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur += ch
        elif ch == "[":
            depth += 1
            cur += ch
        elif ch == "]":
            depth -= 1
            cur += ch
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _values(key, v):
    """A grid entry as a list of plain values: a list, a tuple, a range or a numpy array
    (its numbers as Python's); a single value may be given bare."""
    if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__iter__"):
        out = [_plain(v)]
    else:
        if hasattr(v, "tolist"):                 # a numpy array
            v = v.tolist()
        out = [_plain(x) for x in v]
        if not out:
            raise ConfigError(f"--param {key}: no values")
    for x in out:                        # (1e999 reads as inf: refused before any point runs)
        if isinstance(x, float) and not math.isfinite(x):
            raise ConfigError(f"--param {key}: the value {x!r} is not a finite number")
    return out


def _plain(x):
    """A numpy scalar as the Python number it holds (np.int64 is not an int)."""
    return x.item() if hasattr(x, "item") and hasattr(x, "dtype") else x


def expand(grid: dict, zipped: bool = False):
    """{key: [values]} -> list of {key: value}: the cross product, or paired lists."""
    keys = list(grid)
    if not keys:
        return [{}]
    if not all(isinstance(k, str) for k in keys):
        raise ConfigError(f"grid keys {keys!r}: expected configuration keys (strings)")
    lists = [_values(k, grid[k]) for k in keys]
    unknown = [k for k in keys if not is_key(k)]
    if unknown:
        k = unknown[0]
        raise ConfigError(f"--param {k}: not a configuration key"
                          f"{_suggest(k, list(KEY_MAP))}")
    size = len(lists[0]) if zipped else math.prod(len(v) for v in lists)
    if size > MAX_POINTS:
        raise ConfigError(f"the grid has {size:,} points; a sweep has at most {MAX_POINTS:,}")
    if zipped:
        if len({len(v) for v in lists}) != 1:
            raise ConfigError("--zip: every --param needs the same number of values, got "
                              + ", ".join(f"{k}: {len(v)}" for k, v in zip(keys, lists)))
        combos = zip(*lists)
    else:
        combos = itertools.product(*lists)
    return [dict(zip(keys, c)) for c in combos]


# ------------------------------------------------------------------ one point

def _base(config):
    """(raw dict of the user's keys, base dir, source) from a path or a Config."""
    if isinstance(config, Config):
        raw = {}
        for path in config.explicit:
            s, k = path.split(".", 1)
            raw.setdefault(s, {})[k] = config.get(path)
        return raw, config.base_dir, config.source
    if isinstance(config, dict):
        return _base(from_dict(config))
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"sweep() takes a Config, a path to a TOML file or a dict, not "
                        f"{type(config).__name__}")
    cfg = load(os.fspath(config))           # validates, resolves topology.file
    return _base(cfg)


def resolve(base, overrides):
    raw, base_dir, source = base
    merged = json.loads(json.dumps(raw))
    for path, v in overrides.items():
        apply_override(merged, path, v, "--param")
    return from_dict(merged, base_dir=base_dir, source=source)


def config_hash(cfg) -> str:
    text = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def run_point(base, overrides):
    """Run one point; never raises: returns (status, result dict or None, error, wall)."""
    t = time.perf_counter()
    try:
        cfg = resolve(base, overrides)
        result = simulate(cfg).to_dict()
        # synthetic traffic has a saturation verdict; a collective or an op graph runs to
        # completion (or raises), so it is done
        status = "saturated" if result.get("saturated") else "done"
        return status, result, None, time.perf_counter() - t
    except Exception as e:     # a failing point is recorded, the sweep goes on
        return "failed", None, f"{type(e).__name__}: {e}", time.perf_counter() - t


# ------------------------------------------------------------------ the store

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
    """One flat dict per point: the swept keys, then status, error and the scalar metrics."""
    out = []
    for r in rows:
        d = dict(r["params"])
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


# ------------------------------------------------------------------ running

class _Progress:
    def __init__(self, total, enabled):
        self.total, self.enabled = total, enabled
        self.done = self.failed = 0
        self.t0 = time.perf_counter()

    def update(self, status):
        if status == "failed":
            self.failed += 1
        else:
            self.done += 1
        if not self.enabled:
            return
        n = self.done + self.failed
        el = time.perf_counter() - self.t0
        eta = el / n * (self.total - n) if n else float("nan")
        width = 30
        bar = "#" * int(width * n / max(self.total, 1))
        sys.stderr.write(f"\r[{bar:<{width}}] {n}/{self.total}  done {self.done}  "
                         f"failed {self.failed}  elapsed {el:.1f}s  eta {eta:.1f}s ")
        sys.stderr.flush()
        if n == self.total:
            sys.stderr.write("\n")


def sweep(config, grid, jobs=None, db=None, zipped=False, scheduler=None, progress=False):
    """Run every point of `grid` ({key: [values]}) over the base `config` (a path or a
    Config). Points already in `db` are skipped; each finished point is stored at once.
    Returns all rows of the points of this grid (stored ones included), in grid order.

    jobs: local worker processes (default: the machine's cores). scheduler: the address of a
    Dask distributed scheduler ("tcp://host:port"), or a dask.distributed.Client, instead of
    local processes."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ConfigError(f"jobs = {jobs!r}: expected a number of worker processes >= 1 (None: "
                          f"one per core)")
    if not isinstance(grid, dict):
        raise ConfigError(f"grid = {grid!r}: expected a dict {{'section.key': [values]}}")
    base = _base(config)
    points = expand(cwd_paths(grid), zipped)
    store = Store(db if db is not None else ":memory:")
    try:
        seen = store.finished()
        todo, hashes, queued = [], [], set()
        for p in points:
            try:
                h = config_hash(resolve(base, p))
            except ConfigError as e:
                # a bad value for one point: recorded as failed, the others run
                h = hashlib.sha256(json.dumps([base[0], p], sort_keys=True,
                                              default=str).encode()).hexdigest()
                store.put(h, p, "failed", None, f"ConfigError: {e}", 0.0)
                hashes.append(h)
                continue
            hashes.append(h)
            if h not in seen and h not in queued:
                todo.append((p, h))
                queued.add(h)
        bar = _Progress(len(todo), progress)
        if todo:
            if scheduler is not None:
                _run_dask(scheduler, base, todo, store, bar)
            else:
                _run_local(jobs, base, todo, store, bar)
        by_hash = {r["hash"]: r for r in store.rows()}
        return [by_hash[h] for h in hashes if h in by_hash]
    finally:
        store.close()


def cores():
    """The cores this process may run on (its CPU affinity where the system says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cap_workers(workers, tasks=None):
    """How many local worker processes to start for `workers` asked (None: one per core)
    and `tasks` to run: never more than the cores (more only share them, each with its own
    memory) nor than the tasks. Asking for more than the cores gives a PysimWarning."""
    n = cores()
    if workers is not None and workers > n:
        warnings.warn(f"{workers:,} worker processes asked for; using {n}, the cores this "
                      f"machine gives (more would only share them)", PysimWarning,
                      stacklevel=3)
    w = n if workers is None else min(workers, n)
    if tasks is not None:
        w = min(w, tasks)
    return max(1, w)


def _die_with_parent(parent_pid):
    """In a worker: end when the sweep's process ends, however it ends (kill -9 included), so
    that no worker lives on orphaned. On Linux the kernel sends SIGKILL when the parent dies
    (prctl PR_SET_PDEATHSIG); everywhere, a thread checks once a second that the parent is
    still there (the engine releases the GIL while it runs, so the thread gets its turn)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)        # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):                      # (the thread still watches)
            pass
    ppid = os.getppid()

    def gone():
        if os.getppid() != ppid:
            return True
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass
        return False

    if gone():                      # the parent died before the prctl took effect
        os._exit(1)

    def watch():
        while not gone():
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="pysim-parent-watch").start()


def _worker(conn, parent_pid):
    """A local worker: runs the points it is sent, one at a time, until told to stop (None)
    or its pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the sweep's to handle
    _die_with_parent(parent_pid)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        base, p = msg
        conn.send(run_point(base, p))


def _pool_worker(parent_pid):
    """An executor's worker: Ctrl-C is the parent's to handle, and it dies with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def _death(exitcode):
    """Why a worker process ended, from its exit code, for the failed point's error."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        why = " (as the kernel's out-of-memory killer does)" if name == "SIGKILL" else ""
        return f"WorkerDied: the worker process running this point was killed by {name}{why}"
    return f"WorkerDied: the worker process running this point exited (code {exitcode})"


def _run_local(jobs, base, todo, store, bar):
    jobs = cap_workers(jobs, len(todo))
    if jobs == 1:
        for p, h in todo:
            status, result, error, wall = run_point(base, p)
            store.put(h, p, status, result, error, wall)
            bar.update(status)
        return
    # forked workers start in milliseconds; PYSIM_MP_START=spawn (or forkserver) if the
    # calling process runs threads that must not be forked
    method = os.environ.get("PYSIM_MP_START",
                            "fork" if sys.platform.startswith("linux") else "spawn")
    ctx = mp.get_context(method)
    queue = list(reversed(todo))
    busy = {}                       # connection -> (process, (point, hash), start time)
    idle = []

    def start():
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(theirs, os.getpid()), daemon=True,
                           name="pysim-sweep-worker")
        proc.start()
        theirs.close()              # so that the worker's death is an end of file here
        return mine, proc

    def hand_out():
        while queue and idle:
            conn, proc = idle.pop()
            ph = queue.pop()
            try:
                conn.send((base, ph[0]))
            except OSError:          # it died while idle: the point goes back
                queue.append(ph)
                proc.join(1)
                idle.append(start())
                continue
            busy[conn] = (proc, ph, time.perf_counter())

    try:
        for _ in range(min(jobs, len(todo))):
            idle.append(start())
        hand_out()
        while busy:
            for conn in wait_for(list(busy)):
                proc, (p, h), t0 = busy.pop(conn)
                try:
                    status, result, error, wall = conn.recv()
                    idle.append((conn, proc))
                except (EOFError, OSError):
                    # the worker died with the point (the OOM killer, kill -9): the point is
                    # failed with the reason, a new worker takes the next one
                    proc.join(5)
                    conn.close()
                    status, result, wall = "failed", None, time.perf_counter() - t0
                    error = _death(proc.exitcode)
                    if queue:
                        idle.append(start())
                store.put(h, p, status, result, error, wall)
                bar.update(status)
            hand_out()
    except BaseException:
        # interrupted (or failed): stop the workers now rather than let them finish the
        # points already handed to them (their results could not be stored anyway)
        for _, (proc, _, _) in busy.items():
            proc.kill()
        for conn, proc in idle:
            proc.kill()
        raise
    finally:
        for conn, proc in idle:
            try:
                conn.send(None)
            except OSError:
                pass
        for conn, proc in list(idle) + [(c, v[0]) for c, v in busy.items()]:
            proc.join(2)
            if proc.is_alive():
                proc.kill()
                proc.join(1)
            conn.close()


def _run_dask(scheduler, base, todo, store, bar):
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise ConfigError("--scheduler needs Dask: pip install 'pysim[dask]'") from None
    own = not hasattr(scheduler, "submit")
    try:
        client = Client(scheduler, timeout=SCHEDULER_TIMEOUT_S) if own else scheduler
    except (OSError, ValueError, TypeError) as e:
        raise ConfigError(f"--scheduler {scheduler!r}: cannot connect ({e}); expected the "
                          f"address of a running Dask scheduler, tcp://HOST:PORT") from None
    try:
        futures = [client.submit(run_point, base, p, pure=False) for p, _ in todo]
        point_of = {f.key: ph for f, ph in zip(futures, todo)}
        for f in as_completed(futures):
            p, h = point_of[f.key]
            try:
                status, result, error, wall = f.result()
            except Exception as e:    # its worker died (KilledWorker), or was lost
                status, result, error, wall = "failed", None, f"{type(e).__name__}: {e}", 0.0
            store.put(h, p, status, result, error, wall)
            bar.update(status)
    finally:
        if own:
            client.close()


# ------------------------------------------------------------------ executors

class WorkerDied(RuntimeError):
    """A worker process (or a Dask worker) running a task died with it."""


class _Done:
    """A task run at once in this process (one local job): its result, or its exception."""

    def __init__(self, fn, args):
        try:
            self.value, self.error = fn(*args), None
        except Exception as e:          # raised again by Executor.result, like a future's
            self.value, self.error = None, e


class Executor:
    """Where tasks that return a value run (job streams' simulations): in this process
    (jobs = 1), on local worker processes (jobs > 1; default: the machine's cores), or on a
    Dask distributed cluster (scheduler: "tcp://host:port", or a dask.distributed.Client) --
    the places a sweep's points run, with the same connection to the cluster.

        with Executor(jobs=2) as ex:
            fs = {ex.submit(fn, arg) for arg in args}
            while fs:
                done, fs = ex.wait(fs)          # at least one finished
                for f in done:
                    ex.result(f)

    Leaving the block on an exception (Ctrl-C among them) stops the local workers at once
    rather than letting them finish the tasks already handed to them."""

    def __init__(self, jobs=None, scheduler=None, tasks=None):
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int)
                                 or jobs < 1):
            raise ConfigError(f"workers = {jobs!r}: expected a number of worker processes "
                              f">= 1 (None: one per core)")
        self.jobs = cap_workers(jobs, tasks) if scheduler is None else (jobs or 1)
        self.scheduler = scheduler
        self.pool = self.client = None
        self.own_client = False

    @property
    def workers(self):
        """How many tasks may run at once (a Dask cluster's threads)."""
        if self.client is not None:
            return max(1, sum(self.client.nthreads().values()))
        return self.jobs

    def __enter__(self):
        if self.scheduler is not None:
            try:
                from dask.distributed import Client
            except ImportError:
                raise ConfigError("--scheduler needs Dask: pip install 'pysim[dask]'") from None
            self.own_client = not hasattr(self.scheduler, "submit")
            try:
                self.client = Client(self.scheduler, timeout=SCHEDULER_TIMEOUT_S) \
                    if self.own_client else self.scheduler
            except (OSError, ValueError, TypeError) as e:
                raise ConfigError(f"--scheduler {self.scheduler!r}: cannot connect ({e}); "
                                  f"expected the address of a running Dask scheduler, "
                                  f"tcp://HOST:PORT") from None
        elif self.jobs > 1:
            # forked workers start in milliseconds; PYSIM_MP_START=spawn (or forkserver) if
            # the calling process runs threads that must not be forked
            method = os.environ.get("PYSIM_MP_START",
                                    "fork" if sys.platform.startswith("linux") else "spawn")
            self.pool = ProcessPoolExecutor(max_workers=self.jobs,
                                            mp_context=mp.get_context(method),
                                            initializer=_pool_worker, initargs=(os.getpid(),))
        return self

    def submit(self, fn, *args):
        if self.client is not None:
            return self.client.submit(fn, *args, pure=False)
        if self.pool is not None:
            return self.pool.submit(fn, *args)
        return _Done(fn, args)

    def wait(self, pending):
        """(finished, still pending) among `pending`; blocks until one has finished."""
        pending = set(pending)
        done = {f for f in pending if isinstance(f, _Done)}
        if done:
            return done, pending - done
        if self.client is not None:
            from dask.distributed import wait as dask_wait
            res = dask_wait(list(pending), return_when="FIRST_COMPLETED")
            return set(res.done), set(res.not_done)
        done, rest = wait(pending, return_when=FIRST_COMPLETED)
        return set(done), set(rest)

    def result(self, f):
        """The task's value; its exception raised again; a worker that died (the out-of-memory
        killer, kill -9, a Dask worker lost) a WorkerDied."""
        if isinstance(f, _Done):
            if f.error is not None:
                raise f.error
            return f.value
        try:
            return f.result()
        except BrokenProcessPool as e:
            raise WorkerDied(f"a worker process died while running a task ({e})") from None
        except Exception as e:
            if type(e).__name__ in ("KilledWorker", "FutureCancelledError", "CancelledError"):
                raise WorkerDied(f"a Dask worker was lost while running a task "
                                 f"({type(e).__name__}: {e})") from None
            raise

    def __exit__(self, kind, value, tb):
        if self.pool is not None:
            if kind is not None:
                # interrupted (or failed): stop the workers now rather than let them finish
                # the tasks already handed to them (their results could not be used anyway)
                for proc in list((getattr(self.pool, "_processes", None) or {}).values()):
                    proc.terminate()
                self.pool.shutdown(wait=False, cancel_futures=True)
            else:
                self.pool.shutdown(wait=True)
        if self.client is not None and self.own_client:
            self.client.close()
        return False
