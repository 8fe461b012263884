"""Running a sweep: each point's config resolved and hashed, the points not yet stored run in
local worker processes (which die with their parent) or on a Dask cluster, each stored as it
finishes; `Executor`, the same pool for other work (job streams).
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait as wait_for

from pysim.config import Config, apply_override, cwd_paths, from_dict, load, typed_keys
from pysim.errors import ConfigError, PysimWarning
from pysim.sim import simulate
from pysim.schema import drop_unread
from pysim.sweep.grid import expand
from pysim.sweep.store import Store


SCHEDULER_TIMEOUT_S = 10   # to connect to a Dask scheduler


def base_config(config):
    """(raw dict of the user's keys, base dir, source, the keys typed rather than read from
    a file, the keys read from a topology.file: {key: file}) from a path or a Config."""
    if isinstance(config, Config):
        raw = {}
        for path in config.explicit:
            s, k = path.split(".", 1)
            raw.setdefault(s, {})[k] = config.get(path)
        return raw, config.base_dir, config.source, config.typed, config.origin
    if isinstance(config, dict):
        return base_config(from_dict(config))
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"sweep() takes a Config, a path to a TOML file or a dict, not "
                        f"{type(config).__name__}")
    cfg = load(os.fspath(config))           # validates, resolves topology.file
    return base_config(cfg)


def resolve(base, overrides):
    raw, base_dir, source, typed, origin = base
    merged = drop_unread(json.loads(json.dumps(raw)), overrides)
    for path, v in overrides.items():
        apply_override(merged, path, v, "swept key")
    return from_dict(merged, base_dir=base_dir, source=source,
                     typed=set(typed) | typed_keys(overrides), origin=origin)


def config_hash(cfg) -> str:
    text = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _another_configuration(store, cfg, grid):
    """'key = old there, new here' for a key in which a stored point's config differs from
    `cfg` (a point of this sweep), other than the seed and the keys either sweep varies; or
    None."""
    new = cfg.to_dict()
    for r in store.rows():
        old = (r.get("result") or {}).get("config")
        if not old:
            continue
        skip = set(r["params"]) | set(grid) | {"simulation.seed"}
        for s in sorted(set(old) | set(new)):
            a, b = old.get(s), new.get(s)
            if s.startswith("_") or a == b or not isinstance(a, dict) or \
                    not isinstance(b, dict):
                continue
            for k in sorted(set(a) & set(b)):      # (a key of one version only: not told)
                key = f"{s}.{k}"
                if a[k] != b[k] and not any(x == key or x.startswith(key + ".")
                                            for x in skip):
                    return f"{key} = {a[k]!r} there, {b[k]!r} here"
        return None
    return None


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
    base = base_config(config)
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
        if todo and db is not None:
            other = _another_configuration(store, resolve(base, todo[0][0]), grid)
            if other:
                warnings.warn(f"{db} holds points of another configuration ({other}); "
                              f"pysim results shows them with these, and pysim plot refuses "
                              f"to average them (another --db keeps them apart)", PysimWarning)
        bar = _Progress(len(todo), progress)
        if todo:
            if scheduler is not None:
                _run_dask(scheduler, base, todo, store, bar)
            else:
                _run_local(jobs, base, todo, store, bar)
        by_hash = {r["hash"]: r for r in store.rows()}
        # a point stored by another grid on the same configuration (--param traffic.
        # injection_rate=0.1 where an earlier sweep ran network.vcs=2 at the default 0.1)
        # is labelled with this grid's parameters
        return [by_hash[h] if by_hash[h]["params"] == p else {**by_hash[h], "params": p}
                for h, p in zip(hashes, points) if h in by_hash]
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
