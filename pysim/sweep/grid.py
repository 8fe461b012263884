"""A sweep's grid: --param values parsed (lists, ranges, TOML values) and expanded into points
(every combination, or zipped).
"""
from __future__ import annotations

import itertools
import math

from pysim.config import KEY_MAP, is_key, parse_override
from pysim.errors import ConfigError
from pysim.schema import suggest as _suggest


MAX_POINTS = 1_000_000     # points in one sweep (a range of 1e18 values filled memory)


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
            raise ConfigError(f"swept key {key}: no values")
    for x in out:                        # (1e999 reads as inf: refused before any point runs)
        if isinstance(x, float) and not math.isfinite(x):
            raise ConfigError(f"swept key {key}: the value {x!r} is not a finite number")
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
        raise ConfigError(f"swept key {k}: not a configuration key"
                          f"{_suggest(k, list(KEY_MAP))}")
    size = len(lists[0]) if zipped else math.prod(len(v) for v in lists)
    if size > MAX_POINTS:
        raise ConfigError(f"the grid has {size:,} points; a sweep has at most {MAX_POINTS:,}")
    if zipped:
        if len({len(v) for v in lists}) != 1:
            got = ", ".join(f"{k}: {len(v)}" for k, v in zip(keys, lists))
            raise ConfigError(f"zipped (--zip): every swept key needs the same number of "
                              f"values, got {got}")
        combos = zip(*lists)
    else:
        combos = itertools.product(*lists)
    return [dict(zip(keys, c)) for c in combos]
