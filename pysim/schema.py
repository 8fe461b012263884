"""Declared configuration keys, and the checks they share.

Each component declares the keys it reads beside its code, with `declare(Key(...), ...)`:
section, name, kind, default, unit, one line of doc, and a constraint. A check that spans keys
(two keys that must agree) is registered with `@cross_check`. `pysim.config` parses, merges and
checks a configuration against what has been declared; the configuration reference
(docs/configuration.md) is generated from the same declarations. Which modules declare keys,
and so must be imported before a configuration is parsed, is `pysim.components`' list.

This module imports nothing of pysim but the errors, and nothing compiled: the limits of the
compiled core come from the pure-Python `csim.limits`.
"""
from __future__ import annotations

import datetime
import difflib
import math

from csim.limits import MAX_PACKET_FLITS, MAX_VCS
from pysim.errors import ConfigError

KIND_NAMES = ("int", "float", "bool", "str", "ints", "floats", "int|ints", "strs", "table",
              "tables")

# The order sections appear in, in the reference and in messages; a section declared by no
# key is not shown.
SECTION_ORDER = ("simulation", "network", "topology", "workload", "traffic", "jobs")

MAX_INT = 10 ** 15          # integers (cycles, bytes, counts) above this are refused: cycle
                            # stamps are 64-bit, and no run gets near 10^15 of anything
MAX_FLIT_BYTES = 1 << 16   # the engine counts a flit's bytes in 32 bits, and serialisation
                            # credits in flit_bytes * 2**20
MAX_DELAY_CYCLES = 10 ** 6  # a router stage or a link: the event wheel spans the longest


class Key:
    """One declared configuration key.

    kind: one of KIND_NAMES; check: (predicate, "what was expected") or None; choices: a
    callable returning the allowed names (a registry's), or None; allow_inf: a float key
    that may be inf (a throughput that costs nothing); int_limit: the largest integer allowed
    (default MAX_INT)."""

    def __init__(self, section, name, kind, default, unit, doc, check=None, choices=None, *,
                 allow_inf=False, int_limit=MAX_INT):
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
        self.allow_inf = allow_inf
        self.int_limit = int_limit

    @property
    def path(self):
        return f"{self.section}.{self.name}"

    def __repr__(self):
        return f"Key({self.path!r}, {self.kind!r}, default={self.default!r})"


KEYS: list[Key] = []            # every declared key, in declaration order
KEY_MAP: dict[str, Key] = {}    # path -> Key
CROSS_CHECKS: list = []         # fn(cfg) run on every validated Config: checks across keys


def declare(*keys: Key) -> None:
    """Register keys. A path declared twice is a programming error, refused at import."""
    for k in keys:
        if k.path in KEY_MAP:
            raise ValueError(f"configuration key {k.path} is declared twice")
        KEYS.append(k)
        KEY_MAP[k.path] = k


def cross_check(fn):
    """Register fn(cfg), raising a ConfigError, as a check of every validated Config."""
    CROSS_CHECKS.append(fn)
    return fn


def sections() -> list[str]:
    """The declared sections: those of SECTION_ORDER first, then others in the order of their
    first key."""
    declared = list(dict.fromkeys(k.section for k in KEYS))
    return ([s for s in SECTION_ORDER if s in declared] +
            [s for s in declared if s not in SECTION_ORDER])


# ---------------------------------------------------------------------- shared constraints
def _positive(x):
    return x > 0


def _nonneg(x):
    return x >= 0


def _prob(x):
    return 0.0 <= x <= 1.0


def all_positive(xs):
    return len(xs) > 0 and all(x > 0 for x in xs)


def all_nonneg(xs):
    return all(x >= 0 for x in xs)


POS = (_positive, "a number > 0")
NONNEG = (_nonneg, "a number >= 0")
PROB = (_prob, "a number in [0, 1]")
DELAY = (lambda x: 0 <= x <= MAX_DELAY_CYCLES, f"an integer in 0 .. {MAX_DELAY_CYCLES:,}")
DELAY1 = (lambda x: 1 <= x <= MAX_DELAY_CYCLES, f"an integer in 1 .. {MAX_DELAY_CYCLES:,}")
PACKET = (lambda x: 1 <= x <= MAX_PACKET_FLITS, f"an integer in 1 .. {MAX_PACKET_FLITS}")
VCS = (lambda x: 1 <= x <= MAX_VCS, f"an integer in 1 .. {MAX_VCS}")


def finite_float(v):
    """v (an int or a float, not a bool) as a finite float, else None: an integer too large
    for a float (10**400) or an infinite or NaN float is not a quantity."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def short(v, limit=60):
    """repr(v), cut short: a 400-digit integer named in full buries the message. A TOML date
    or time as written (1979-05-27, not datetime.date(1979, 5, 27))."""
    r = f"{v.isoformat()} (a date/time)" if isinstance(v, (datetime.date, datetime.time)) \
        else repr(v)
    return r if len(r) <= limit else f"{r[:limit - 20]}...{r[-12:]} ({len(r)} characters)"


def suggest(name, options):
    """' (did you mean 'x'?)' for the closest of `options`, or ''."""
    close = difflib.get_close_matches(name, options, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def positive_number(where, v):
    """A finite number > 0 given for `where` (a key or a table field), as a float."""
    f = finite_float(v)
    if f is None or not f > 0:
        raise ConfigError(f"{where} = {short(v)}: expected a finite number > 0")
    return f


def check_fields(path, table, fields):
    """Every entry of `table` one of `fields`, each a finite number > 0."""
    for k, v in table.items():
        if k not in fields:
            raise ConfigError(f"{path}.{k}: unknown field{suggest(k, fields)}; expected "
                              f"{', '.join(fields)}")
        positive_number(f"{path}.{k}", v)


def fields_check(path, fields, kinds=None):
    """Check of a table of defaults: only `fields`, each a finite number > 0; with `kinds`,
    a table of such tables, one per node kind named (the predicate raises itself, to name
    the field)."""
    def check(table):
        if kinds is None:
            check_fields(path, table, fields)
            return True
        for kind, sub in table.items():
            if kind not in kinds:
                raise ConfigError(f"{path}.{kind}: unknown node kind {kind!r}; expected one "
                                  f"of {', '.join(kinds)}")
            if not isinstance(sub, dict):
                raise ConfigError(f"{path}.{kind} = {sub!r}: expected a table")
            check_fields(f"{path}.{kind}", sub, fields)
        return True
    return check, "a table"


def raising(check_fn, expected="a table"):
    """A constraint from a function that raises a ConfigError naming the field itself."""
    def pred(v):
        check_fn(v)
        return True
    return pred, expected


# ---------------------------------------------------------------------- what a choice reads
# A key that chooses a component (workload.kind) may declare, per choice, which keys that
# choice reads: a key read by some choices and not by the chosen one is refused when given
# (pysim.workload.base.check_reads), naming the choices that would read it.
READS: dict[str, dict[str, tuple]] = {}   # chooser path -> {choice: key paths it reads}


def reads(chooser, choice, paths):
    """Declare that `chooser = choice` reads `paths` (a path ending '.*': every key of that
    sub-table, 'workload.memory.*'); the choice "*" stands for every value not declared (a
    key of open values, as a file's path)."""
    READS.setdefault(chooser, {})[choice] = tuple(paths)


def _expand(paths):
    out = set()
    for p in paths:
        if p.endswith(".*"):
            out.update(k for k in KEY_MAP if k.startswith(p[:-1]))
        else:
            out.add(p)
    return out


def read_by(chooser, choice):
    """The key paths `chooser = choice` reads (None if it declared none)."""
    choices = READS.get(chooser, {})
    paths = choices.get(choice, choices.get("*")) if _hashable(choice) else choices.get("*")
    return None if paths is None else _expand(paths)


def _hashable(v):
    try:
        hash(v)
    except TypeError:
        return False
    return True


def readers(chooser, path):
    """The choices of `chooser` that read `path`."""
    return [c for c, paths in READS.get(chooser, {}).items() if path in _expand(paths)]


def governed(chooser):
    """The keys some choice of `chooser` reads and another does not."""
    sets = [_expand(p) for p in READS.get(chooser, {}).values()]
    return set().union(*sets) - set.intersection(*sets) if sets else set()


def unread(chooser, choice, paths):
    """Those of `paths` (key paths) that `chooser = choice` does not read but another choice
    does."""
    mine = read_by(chooser, choice)
    if mine is None:
        return []
    gov = governed(chooser)
    return [p for p in paths if p in gov and p not in mine]



def drop_unread(raw, overrides):
    """A raw config (as TOML parses one) with the keys its own choice read and an override's
    new choice does not removed: `--set workload.kind=training` on a file of a collective
    leaves out the file's workload.bytes, `--set workload.kind=collective` on a file of
    synthetic traffic (its kind given or the default) its [traffic] (overridden keys stay,
    and are checked)."""
    for chooser in READS:
        if chooser not in overrides or not isinstance(overrides[chooser], str):
            continue
        section, name = chooser.split(".", 1)
        body = raw.get(section)
        if body is not None and not isinstance(body, dict):
            continue
        before = (body or {}).get(name, KEY_MAP[chooser].default)
        if before == overrides[chooser]:
            continue
        for path in unread(chooser, overrides[chooser], list(KEY_MAP)):
            if path in overrides:
                continue
            pop_key(raw, path)
    return raw


def pop_key(raw, path):
    """Remove the key `path` from a raw config (as TOML parses one), a sub-table's key
    ('workload.memory.policy') whether written flat or nested; a table it leaves empty goes
    too."""
    section, key = path.split(".", 1)
    body = raw.get(section)
    if not isinstance(body, dict):
        return
    body.pop(key, None)
    sub, dot, field = key.partition(".")
    if dot and isinstance(body.get(sub), dict):
        body[sub].pop(field, None)
        if not body[sub]:
            del body[sub]
    if not body:
        del raw[section]

# ---------------------------------------------------------------------- one value
def type_ok(kind, v):
    is_int = isinstance(v, int) and not isinstance(v, bool)
    is_num = (is_int or isinstance(v, float))
    if kind == "int":
        return is_int
    if kind == "float":
        return is_num
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "str":
        return isinstance(v, str)
    if kind == "ints":
        return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                           for x in v)
    if kind == "floats":
        return isinstance(v, list) and all(isinstance(x, (int, float)) and
                                           not isinstance(x, bool) for x in v)
    if kind == "int|ints":
        return type_ok("int", v) or (type_ok("ints", v) and len(v) > 0)
    if kind == "strs":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == "tables":
        return isinstance(v, list) and all(isinstance(x, dict) for x in v)
    if kind == "table":
        return isinstance(v, dict)
    raise AssertionError(kind)


KIND_TEXT = {"int": "an integer", "float": "a number", "bool": "true or false",
             "str": "a string", "ints": "a list of integers", "floats": "a list of numbers",
             "int|ints": "an integer or a list of integers",
             "tables": "an array of tables ([[...]])", "table": "a table",
             "strs": "a list of strings"}


def _number_named(key, v):
    """The name among a string key's choices that the number v reads as (2.2 for "2.20"),
    or None."""
    if key.kind != "str" or key.choices is None or isinstance(v, bool) or \
            not isinstance(v, (int, float)):
        return None
    for name in key.choices():
        try:
            if float(name) == v:
                return name
        except (TypeError, ValueError):
            continue
    return None


def _kin_of_type(key, v):
    """'; did you mean topology.node_count (an integer)?' where a key of the same section,
    named as this one's stem, takes a value of v's type (topology.nodes = 4, a graph's
    nodes, for a cluster's topology.node_count), else ''."""
    stem = key.name.rstrip("s")
    kin = [k for k in KEYS if k.section == key.section and k is not key and
           k.name.startswith(stem) and type_ok(k.kind, v)]
    return (f"; did you mean {kin[0].path} ({KIND_TEXT[kin[0].kind]})?" if len(kin) == 1
            else "")


def check_value(key: Key, v):
    """Validate one value for `key`; return it normalised (floats as float)."""
    if v is None:
        if key.default is None:          # an optional key, unset
            return None
        raise ConfigError(f"{key.path} = None: expected {KIND_TEXT[key.kind]} (leave the key "
                          f"out for its default, {key.default!r})")
    if not type_ok(key.kind, v):
        named = _number_named(key, v)
        if named is not None:            # (a name that reads as a number: 2.18, not "2.18")
            raise ConfigError(f"{key.path} = {short(v)}: expected a string, the name "
                              f"\"{named}\" in quotes (on the command line inside the "
                              f"shell's: --set '{key.path}=\"{named}\"')")
        raise ConfigError(f"{key.path} = {short(v)}: expected {KIND_TEXT[key.kind]}"
                          f"{_kin_of_type(key, v)}")
    if key.kind in ("int", "ints", "int|ints"):
        limit = key.int_limit
        if any(abs(x) > limit for x in (v if isinstance(v, list) else [v])):
            raise ConfigError(f"{key.path} = {short(v)}: expected at most {limit:,}")
    if key.kind == "float":
        f = finite_float(v)
        if f is None and key.allow_inf and not isinstance(v, bool) and v == math.inf:
            f = math.inf                 # a throughput that costs nothing
        if f is None:
            raise ConfigError(f"{key.path} = {short(v)}: expected a finite number")
        v = f
    if key.kind == "floats":
        fs = [finite_float(x) for x in v]
        if any(f is None for f in fs):
            bad = v[fs.index(None)]
            raise ConfigError(f"{key.path} = {short(v)}: expected finite numbers (entry "
                              f"{fs.index(None)} is {short(bad)})")
        v = fs
    if key.check is not None:
        pred, expected = key.check
        if not pred(v):
            raise ConfigError(f"{key.path} = {short(v)}: expected {expected}")
    if key.choices is not None:
        names = key.choices()
        if v not in names:
            raise ConfigError(f"{key.path} = {short(v)}: unknown name{suggest(v, names)}; "
                              f"known: {', '.join(names)}")
    return v


__all__ = ["ConfigError", "CROSS_CHECKS", "DELAY", "DELAY1", "KEYS", "KEY_MAP", "KIND_TEXT",
           "Key", "MAX_DELAY_CYCLES", "MAX_FLIT_BYTES", "MAX_INT", "NONNEG", "PACKET", "POS",
           "PROB", "READS", "SECTION_ORDER", "VCS", "all_nonneg", "all_positive", "check_fields",
           "check_value", "cross_check", "declare", "drop_unread", "fields_check", "finite_float",
           "governed",
           "pop_key", "positive_number", "raising", "read_by", "readers", "reads",
           "sections", "short", "suggest", "type_ok", "unread"]
