"""The configuration machinery: TOML in, a validated `Config` out.

`load(path)` and `from_dict(d)` return a validated `Config`; every error is a `ConfigError`
that names the key, the value given and what was expected. This module parses, merges files
and overrides, checks every value against the keys the components declared (`pysim.schema`)
and keeps what was given (provenance). It imports no component and nothing compiled: the keys
it knows are those declared when it is called, and `import pysim` declares them all (through
`pysim.components`). The configuration reference, docs/configuration.md, is generated from the
declarations (`python -m pysim.docs`), and a test checks it is current.
"""
from __future__ import annotations

import copy
import math
import os
import re
import sys
import warnings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pysim import systems
from pysim._io import read_bounded
from pysim.errors import ConfigError, PysimWarning  # noqa: F401  (re-exported)
from pysim.schema import (CROSS_CHECKS, KEY_MAP, KEYS, Key, check_value, declare,  # noqa: F401
                          drop_unread, pop_key, sections, short, suggest, unread)



class Section:
    """Attribute access to one section's values."""

    def __init__(self, name, values):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, item):
        try:
            return self._values[item]
        except KeyError:
            pre = item + "."
            sub = {k[len(pre):]: v for k, v in self._values.items() if k.startswith(pre)}
            if sub:                                   # a sub-table: workload.memory
                return Section(f"{self._name}.{item}", sub)
            raise AttributeError(f"{self._name}.{item} is not a configuration key") from None

    def __setattr__(self, key, value):
        raise AttributeError("Config is read-only; use Config.with_overrides()")


class Config:
    """A validated configuration: `cfg.traffic.injection_rate`, `cfg.to_dict()`."""

    def __init__(self, values: dict, explicit: set, base_dir: str, source: str | None = None,
                 typed=None, origin=None):
        self._values = values          # {section: {name: value}} with defaults filled
        self.explicit = frozenset(explicit)   # keys given (in the file, or typed)
        # the keys the user typed (overrides, --set, a dict from Python), not read from a
        # file: a file may hold sections one command does not read (a server's [jobs] and
        # [traffic]), while a key typed for a command that does not read it is refused
        self.typed = frozenset(self.explicit if typed is None else typed) & self.explicit
        # the keys read from the system a topology.file names, not from this config: {key:
        # that file's path}, for errors to name where a key came from
        self.origin = {k: v for k, v in (origin or {}).items()
                       if k in self.explicit and k not in self.typed}
        self.base_dir = base_dir       # files named in the config resolve against this
        self.source = source           # the file it was read from, if any
        for s in sections():
            setattr(self, s, Section(s, values[s]))

    def __reduce__(self):
        # (pickled as its parts: worker processes and Dask receive Configs)
        return (Config, (self._values, set(self.explicit), self.base_dir, self.source,
                         set(self.typed), dict(self.origin)))

    def to_dict(self):
        """{section: {key: value}}, keys of a sub-table nested as TOML writes them
        ({"workload": {"memory": {"policy": ...}}})."""
        out = {}
        for s, body in self._values.items():
            out[s] = {}
            for k, v in body.items():
                sub, dot, field = k.partition(".")
                if dot:
                    out[s].setdefault(sub, {})[field] = copy.deepcopy(v)
                else:
                    out[s][k] = copy.deepcopy(v)
        return out

    def resolved(self):
        """to_dict() as a result carries it: every key its workload kind reads (not, say, a
        training run's [traffic]), defaults filled in, and a file it
        names (topology.file, workload.file, jobs.file, a workload.model file or folder)
        relative to the config's folder written as an absolute path, so that it is read
        back (`from_dict`, `pysim run RESULT.json`) from any folder; `_source`, the config
        file's absolute path, if it was read from one (read back as its source, so that a
        rerun's system keeps the file's name, `system_name`)."""
        out = self.to_dict()
        for path in unread_by_kind(self.workload.kind):   # ([traffic] under training, ...)
            pop_key(out, path)
        for path, full in self.files():
            section, name = path.split(".", 1)
            if name in out.get(section, {}):
                out[section][name] = full
        if self.source is not None:     # (the config file, which the system's name names:
            out["_source"] = os.path.abspath(self.source)   # read back as Config.source)
        return out

    def files(self):
        """[(key, absolute path)] of each file or folder that exists and a key names
        (topology.file, workload.file, jobs.file: the keys of unit 'path'; workload.model
        when it names a file or folder, not a zoo model), a relative path found in the
        config's folder, or a workload.model folder in the current one (a folder of Chakra
        traces named on the command line, found there as chakra.trace_folder finds it)."""
        out = []
        for path in [k.path for k in KEYS if k.unit == "path"] + ["workload.model"]:
            v = self.get(path)
            if not isinstance(v, str) or not v:
                continue
            full = os.path.join(self.base_dir, v)     # (v itself, if absolute)
            if os.path.exists(full):
                out.append((path, full))
            elif path == "workload.model" and os.path.isdir(v):
                out.append((path, os.path.abspath(v)))
        return out

    def where(self, path):
        """Where the key `path` was given, for an error raised after loading: 'read from
        F, the system topology.file = ... names', 'given as an override on F', 'set in F';
        '' for a config from Python or a key not given."""
        if path in self.origin:
            return (f"read from {self.origin[path]}, the system topology.file = "
                    f"{self.get('topology.file')!r} names")
        if self.source is None or path not in self.explicit:
            return ""
        return (f"given as an override on {self.source}" if path in self.typed else
                f"set in {self.source}")

    def get(self, path):
        section, name = path.split(".", 1)
        return self._values[section][name]

    def is_set(self, path):
        return path in self.explicit

    def with_overrides(self, overrides: dict):
        """A new Config with `{"section.key": value}` applied (validated)."""
        raw = {s: {k: v for k, v in self._values[s].items() if f"{s}.{k}" in self.explicit}
               for s in sections()}
        overrides = cwd_paths(_as_overrides(overrides, "with_overrides()"))
        drop_unread(raw, overrides)
        for path, v in overrides.items():
            apply_override(raw, path, v)
        return from_dict(raw, base_dir=self.base_dir, source=self.source,
                         typed=self.typed | typed_keys(overrides), origin=self.origin)

    def __repr__(self):
        return f"Config({self._values!r})"


def _as_overrides(overrides, who):
    """Overrides as a dict: a dict {'section.key': value}, or (key, value) pairs."""
    if overrides is None or isinstance(overrides, dict):
        return overrides or {}
    try:
        pairs = [tuple(p) for p in overrides]
        if any(len(p) != 2 for p in pairs):
            raise ValueError
    except (TypeError, ValueError):
        raise TypeError(f"{who}: overrides must be a dict {{'section.key': value}} or (key, "
                        f"value) pairs, not {short(overrides)}") from None
    return override_pairs(pairs, lambda p, a, b: f"{who}: overrides give {p} twice "
                                                 f"({short(a)}, then {short(b)}); give it once")


def override_pairs(pairs, twice):
    """(key, value) pairs as a dict, refusing a key given twice (`twice(path, first,
    second)` is the message: the last would silently win) and a table given after a field
    inside it, which it would silently replace. A field after its table is set in it."""
    out = {}
    for path, v in pairs:
        if path in out:
            raise ConfigError(twice(path, out[path], v))
        if isinstance(path, str):
            inside = [p for p in out if isinstance(p, str) and p.startswith(path + ".")]
            if inside:
                raise ConfigError(f"{path} = {short(v)} replaces the whole table, dropping "
                                  f"{inside[0]} = {short(out[inside[0]])} given before it; "
                                  f"set the field after the table, or inside it")
        out[path] = v
    return out


def from_dict(raw: dict, base_dir: str | None = None, source: str | None = None,
              typed=None, origin=None) -> Config:
    """Validate a nested dict (as TOML parses it) into a Config. Relative paths in it are
    relative to `base_dir` (default: the current directory). `typed`: the keys of it the
    user typed rather than a file held (Config.typed); None: all of them. `origin`: {key:
    file} for keys read from a topology.file (Config.origin). A resolved config (a result's
    `config`: is_resolved) is read as from_resolved reads it. A key given as None whose
    default is None is its default, as if left out."""
    base_dir = os.path.abspath(base_dir if base_dir is not None else os.getcwd())
    if not isinstance(raw, dict):
        raise ConfigError(f"a configuration must be a table of sections, got {type(raw).__name__}")
    raw = _plain(raw)
    if is_resolved(raw):
        return from_resolved(raw, base_dir=base_dir, source=source, strict=True)
    return _from_raw(raw, base_dir, source, typed, origin)


def _from_raw(raw, base_dir, source, typed, origin):
    """from_dict's work: every key given is taken as given."""
    SECTIONS = sections()
    values = {s: {} for s in SECTIONS}
    explicit = set()
    for section, body in raw.items():
        if not isinstance(section, str):
            raise ConfigError(f"section {section!r}: expected a section name (a string); "
                              f"known: {', '.join(SECTIONS)}")
        if section not in values:
            raise ConfigError(f"unknown section [{section}]{suggest(section, SECTIONS)}; "
                              f"known: {', '.join(SECTIONS)}")
        if isinstance(body, list) and body and all(isinstance(x, dict) for x in body):
            raise ConfigError(f"[[{section}]] is an array of tables ({len(body)} of them); "
                              f"[{section}] is one table: write [{section}], with single "
                              f"brackets, once")
        if not isinstance(body, dict):
            raise ConfigError(f"[{section}] must be a table, got {short(body)}")
        names = sorted({k.name.partition(".")[0] for k in KEYS if k.section == section},
                       key=[k.name.partition(".")[0] for k in KEYS].index)
        for name, v in _flatten(section, body):
            if not isinstance(name, str):
                raise ConfigError(f"[{section}] key {name!r}: expected a key name (a string); "
                                  f"known in [{section}]: {', '.join(names)}")
            path = f"{section}.{name}"
            if path not in KEY_MAP:
                sub, dot, field = name.rpartition(".")
                if dot:
                    fields = [k.name.rpartition(".")[2] for k in KEYS
                              if k.section == section and k.name.startswith(sub + ".")]
                    raise ConfigError(f"unknown key {path}{suggest(field, fields)}; known in "
                                      f"[{section}.{sub}]: {', '.join(fields)}")
                raise ConfigError(f"unknown key {path}{suggest(name, names)}; "
                                  f"known in [{section}]: {', '.join(names)}")
            values[section][name] = check_value(KEY_MAP[path], v)
            if v is not None:           # (None, for a key whose default is None: the default)
                explicit.add(path)
    for k in KEYS:
        if k.name not in values[k.section]:
            values[k.section][k.name] = copy.deepcopy(k.default)
    cfg = Config(values, explicit, base_dir, source, typed, origin)
    for check in CROSS_CHECKS:
        check(cfg)
    return cfg


def _sub_tables(section):
    """Names of the sub-tables of a section ('memory' for [workload.memory])."""
    return {k.name.partition(".")[0] for k in KEYS if k.section == section and "." in k.name}


def _flatten(section, body):
    """(name, value) pairs of a section's body, the keys of a sub-table given as a nested
    table ([workload.memory] policy = ...) named 'memory.policy' as when given flat."""
    subs = _sub_tables(section)
    for name, v in body.items():
        if name in subs:
            if not isinstance(v, dict):
                raise ConfigError(f"{section}.{name} = {v!r}: expected a table of keys "
                                  f"([{section}.{name}])")
            for field, fv in v.items():
                yield f"{name}.{field}", fv
        else:
            yield name, v


def is_resolved(raw) -> bool:
    """Whether a dict is a resolved config (as a result carries it, Config.resolved()): it
    names the system (`_system`, which only a result writes), or gives every declared key its
    workload kind reads."""
    if "_system" in raw:
        return True
    given = set(unread_by_kind(_raw_kind(raw)))
    for section, body in raw.items():
        if isinstance(section, str) and isinstance(body, dict):
            try:
                given.update(f"{section}.{name}" for name, _ in _flatten(section, body))
            except ConfigError:
                return False
    return given >= set(KEY_MAP)


def _raw_kind(raw, overrides=None):
    """workload.kind as a raw config (and overrides on it) chooses it: given, else the
    default."""
    work = raw.get("workload")
    kind = (overrides or {}).get("workload.kind",
                                 work.get("kind") if isinstance(work, dict) else None)
    return KEY_MAP["workload.kind"].default if kind is None else kind


def unread_by_kind(kind):
    """The keys workload.kind = `kind` does not read (another kind does), which a resolved
    config leaves out."""
    return unread("workload.kind", kind, list(KEY_MAP)) if isinstance(kind, str) else []


def from_resolved(resolved: dict, base_dir: str | None = None, source: str | None = None,
                  strict: bool = False) -> Config:
    """A Config from a resolved config (as a Result carries it: every key, defaults filled
    in): keys at their default value are taken as not given, so that the keys of the other
    workload kinds and network models, all at their defaults, are not refused as given; and
    a key written as null (JSON's stand-in for inf) that may be inf is inf. `strict`: a
    section or key not declared is refused (else left out: a result of another version,
    read to describe it)."""
    raw = {}
    if source is None and isinstance(resolved.get("_source"), str):
        source = resolved["_source"]     # (the config file the result was run from)
    for section, body in resolved.items():
        if not isinstance(section, str) or section.startswith("_") or \
                not isinstance(body, dict):
            continue
        try:
            items = list(_flatten(section, body))
        except ConfigError:
            continue
        for name, v in items:
            key = KEY_MAP.get(f"{section}.{name}")
            if key is None:
                if strict:                 # (from_dict refuses it, naming it)
                    raw.setdefault(section, {})[name] = v
                continue
            if v is None and key.allow_inf:
                v = math.inf
            if v is None or v == key.default:
                continue
            raw.setdefault(section, {})[name] = v
    return _from_raw(raw, os.path.abspath(base_dir if base_dir is not None else os.getcwd()),
                     source, (), None)


def read_toml(path, what, error=ConfigError):
    """Parse a TOML file; `what` says which file it is in the error if it is missing or not
    valid TOML."""
    try:
        data = read_bounded(path)
        text = data.decode("utf-8")
        return tomllib.loads(text[1:] if text.startswith("\ufeff") else text)  # (a BOM)
    except FileNotFoundError:
        raise error(f"{what}: no such file {path}") from None
    except IsADirectoryError:
        raise error(f"{what}: {path} is a directory, not a TOML file") from None
    except OSError as e:
        raise error(f"{what}: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{what}: {path} is not valid TOML (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as e:
        ext = os.path.splitext(os.fspath(path))[1].lower()
        hint = (f" (pysim reads TOML files only, whatever their extension; this {ext} file "
                f"would need to be written as TOML)" if ext in (".json", ".yaml", ".yml")
                else "")
        raise error(f"{what}: {path} is not valid TOML: {e}{hint}") from None
    except ValueError as e:          # not a regular file, or too large (read_bounded)
        raise error(f"{what}: {e}") from None
    except RecursionError:
        raise error(f"{what}: {path} nests tables or arrays too deeply") from None


def _split_key(path):
    """(the declared key that `path` names or starts with, the fields after it), or
    (None, ...): 'workload.memory.policy' -> (that key, []), 'topology.npu.tflops' ->
    (topology.npu, ['tflops'])."""
    parts = path.split(".")
    for n in range(len(parts), 1, -1):
        key = KEY_MAP.get(".".join(parts[:n]))
        if key is not None:
            return key, parts[n:]
    return None, parts[2:]


def typed_keys(overrides):
    """The declared keys that overrides ({'section.key': value}) set: a field inside a table
    key ('topology.npu.tflops') sets its key ('topology.npu')."""
    out = set()
    for path in overrides:
        key, _ = _split_key(path) if isinstance(path, str) else (None, None)
        if key is not None:
            out.add(f"{key.section}.{key.name}")
    return out


def is_key(path):
    """A key that can be overridden: a declared 'section.key' ('workload.memory.policy'),
    or a field inside a table key ('topology.npu.tflops', 'topology.nic.mem.injection_gbps')."""
    key, rest = _split_key(path)
    return key is not None and (not rest or (key.kind == "table" and all(rest)))


def apply_override(raw, path, value, what="override"):
    """Set `path` to `value` in a raw config dict (as TOML parses one): 'section.key', or a
    field inside a table key, which keeps the table's other fields."""
    if not isinstance(path, str):
        raise ConfigError(f"{what} {path!r}: expected a key 'section.key' (a string)")
    value = _plain(value)
    parts = path.split(".")
    if len(parts) < 2 or not all(parts):
        raise ConfigError(f"{what} {path!r}: expected section.key")
    section = parts[0]
    body = raw.setdefault(section, {})
    if not isinstance(body, dict):
        raise ConfigError(f"{what} {path!r}: [{section}] is not a table")
    head, rest = _split_key(path)
    if head is not None and head.section == section and "." in head.name:
        # a key of a sub-table ([workload.memory] policy): kept flat, as the Config keeps it
        sub = head.name.partition(".")[0]
        if isinstance(body.get(sub), dict):
            for f, v in list(_flatten(section, {sub: body.pop(sub)})):
                body.setdefault(f, v)
        key = head.name
    else:
        head, key, rest = KEY_MAP.get(".".join(parts[:2])), parts[1], parts[2:]
        if rest and key in _sub_tables(section):
            fields = [k.name.partition(".")[2] for k in KEYS
                      if k.section == section and k.name.startswith(key + ".")]
            raise ConfigError(f"{what} {path!r}: unknown key{suggest(rest[0], fields)}; "
                              f"known in [{section}.{key}]: {', '.join(fields)}")
    if not rest:
        body[key] = value
        return
    if head is None or head.kind != "table":
        raise ConfigError(f"{what} {path!r}: {section}.{key} is not a table of fields")
    node = copy.deepcopy(body.get(key)) if body.get(key) is not None else {}
    body[key] = node
    for i, p in enumerate(rest[:-1]):
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{what} {path!r}: {'.'.join(parts[:i + 3])} is not a table")
    if not isinstance(node, dict):
        raise ConfigError(f"{what} {path!r}: {section}.{key} is not a table")
    node[rest[-1]] = value


def is_path_key(path):
    key = KEY_MAP.get(path)
    return key is not None and key.unit == "path"


def _plain(v):
    """A value with numpy's scalars and arrays (np.int64(16), from a sweep over np.arange)
    as the Python numbers and lists a config holds."""
    if hasattr(v, "dtype") and hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def cwd_paths(overrides: dict, what="override") -> dict:
    """Overrides with their relative paths made absolute against the current directory: a path
    typed on the command line or given in the Python API is relative to where it is given,
    while a path written in a file is relative to that file. A bare name that is no file
    here but a shipped system's (topology.file = "dgx1-v100") becomes that system's file.
    A value may be a list of paths (a sweep's values)."""

    def fix(v):
        if not isinstance(v, str) or not v or os.path.isabs(v):
            return v
        full = os.path.abspath(v)
        if not os.path.exists(full) and systems.path_of(v) is not None:
            return systems.path_of(v)
        return full

    def model(v):                    # a zoo name (no '.' or '/'), or a model file
        if not isinstance(v, str) or os.path.isabs(v) or not ("." in v or os.sep in v):
            return v
        return os.path.abspath(v)

    out = {}
    for path, v in overrides.items():
        if is_path_key(path):
            v = [fix(x) for x in v] if isinstance(v, (list, tuple)) else fix(v)
        elif path == "workload.model":
            v = [model(x) for x in v] if isinstance(v, (list, tuple)) else model(v)
        out[path] = v
    return out


def load(path, overrides: dict | None = None) -> Config:
    """Read a TOML file, or a shipped system given by name ("mesh8x8"), into a validated
    Config; `overrides` maps "section.key" to values (their paths relative to the current
    directory), or is a list of (key, value) pairs."""
    overrides = _as_overrides(overrides, "load()")
    path = systems.resolve(path)
    raw = read_toml(path, "config file")
    base = os.path.dirname(os.path.abspath(path))
    overrides = cwd_paths(overrides or {})
    origin = {}
    raw = drop_unread(_include_topology(raw, base, overrides, origin, source=path), overrides)
    for p, v in overrides.items():
        apply_override(raw, p, v)
    try:
        return from_dict(raw, base_dir=base, source=path, typed=typed_keys(overrides),
                         origin=origin)
    except ConfigError as e:
        msg = str(e)
        # (a field's table named alone, 'topology.nic.gpu: unknown node kind', is the typed
        # 'topology.nic.gpu.injection_gbps''s)
        typed = [".".join(k.split(".")[:n]) for k in overrides
                 for n in range(len(k.split(".")), min(len(k.split(".")), 3) - 1, -1)]
        if msg.startswith(tuple(f"{k}{c}" for k in typed for c in " .:")):
            # (the value was typed, not read from the file)
            raise ConfigError(f"{e} (given as an override, on {path})") from None
        given = [k for k in overrides if _names(msg, k)]
        if given:                        # a check across keys, one of them typed
            typed = ", ".join(f"{k} = {overrides[k]!r}" for k in given)
            raise ConfigError(f"{e} ({typed} given as an override, on {path})") from None
        came = [k for k in origin if msg.startswith(tuple(f"{k}{c}" for c in " .:"))]
        if came:                         # (read from the system topology.file names)
            raise ConfigError(f"{origin[came[0]]} (the system topology.file names in "
                              f"{path}): {e}") from None
        raise ConfigError(f"{path}: {e}") from None


def _names(msg, key):
    """Whether an error message names `key` as a whole key ('jobs.max_iterations = 10', not
    'jobs.max_iterations_x')."""
    return re.search(rf"(?<![\w.]){re.escape(key)}(?=$|[ :,)])", msg) is not None


def _include_topology(raw, base, overrides, origin=None, source=None):
    """Resolve topology.file: the named file's system -- its [topology] (sub-tables merged
    key by key), [network] and [simulation] -- with this config's own keys (and overrides)
    on top; the keys this config changes are named in a PysimWarning. The path is relative
    to the naming config (`source`, its path). `origin` (a dict) gets {key: the file's path}
    for each key taken from the file alone."""
    topo = raw.get("topology")
    name = overrides.get("topology.file", topo.get("file") if isinstance(topo, dict) else None)
    if name is None:
        return raw
    if topo is None:
        topo = {}
    if not isinstance(topo, dict):
        raise ConfigError(f"[topology] must be a table, got {short(topo)}")
    if not isinstance(name, str):
        raise ConfigError(f"topology.file = {name!r}: expected a string (a path)")
    path = name if os.path.isabs(name) else os.path.join(base, name)
    if not os.path.exists(path) and systems.path_of(name) is not None:
        path = systems.path_of(name)
    if source is not None and os.path.isfile(path) and os.path.isfile(source) and \
            os.path.samefile(path, source):
        raise ConfigError(f"topology.file = {name!r} names this config itself ({path}); "
                          f"expected a system to build on: a shipped one by name (pysim "
                          f"systems) or another file with a [topology] table")
    included = read_toml(path, f"topology.file = {name!r} (relative to the config naming it)")
    t = included.get("topology")
    if not isinstance(t, dict):
        raise ConfigError(f"topology.file = {name!r}: {path} has no [topology] table")
    if "file" in t:
        raise ConfigError(f"topology.file = {name!r}: {path} names another topology.file; "
                          f"one level of inclusion only")
    out = dict(raw)
    changed = []
    # a system's own keys that this config's workload does not read (a shipped system's
    # window of synthetic traffic, under a training run) are left out, not refused: the user
    # did not write them
    skip = set(unread_by_kind(_raw_kind(raw, overrides)))
    # the system whole: its hardware ([topology], sub-tables merged key by key) and how it
    # runs ([network], [simulation]), with this config's own keys on top, which are named
    for section in ("topology", "network", "simulation"):
        theirs = included.get(section)
        mine = topo if section == "topology" else raw.get(section)
        if not isinstance(theirs, dict) or (mine is not None and not isinstance(mine, dict)):
            continue
        merged = {k: v for k, v in theirs.items() if f"{section}.{k}" not in skip}
        if origin is not None:
            origin.update({f"{section}.{k}": path for k in merged
                           if not isinstance(mine, dict) or k not in mine})
        for k, v in (mine or {}).items():
            if isinstance(v, dict) and isinstance(theirs.get(k), dict):
                for kk, vv in v.items():
                    if kk in theirs[k] and theirs[k][kk] != vv:
                        changed.append(f"{section}.{k}.{kk} ({short(theirs[k][kk])} -> "
                                       f"{short(vv)})")
                merged[k] = {**theirs[k], **v}
            else:
                if k in theirs and theirs[k] != v and k != "file":
                    changed.append(f"{section}.{k} ({short(theirs[k])} -> {short(v)})")
                merged[k] = v                 # (keeps topology.file: it names the system)
        out[section] = merged
    if changed:
        warnings.warn(f"topology.file = {name!r}: this config overrides the system's "
                      f"{', '.join(changed)}", PysimWarning, stacklevel=3)
    return out


def parse_override(text: str, what="--set"):
    """'section.key=value' -> ("section.key", value); the value is read as TOML, else a string.
    A list that is not valid TOML (strings in it without quotes) is refused with the quoted
    form."""
    path, eq, value = text.partition("=")
    path = path.strip()
    if not eq or not path:
        raise ConfigError(f"{what} {text!r}: expected KEY=VALUE, e.g. traffic.injection_rate=0.2")
    value = value.strip()
    try:
        v = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        if value.startswith("["):
            items = [x.strip().strip("\"'") for x in value.strip("[]").split(",") if x.strip()]
            quoted = ", ".join(x if _is_number(x) else f'"{x}"' for x in items)
            raise ConfigError(f"{what} {text}: {value} is not a TOML list; strings in a list "
                              f"need double quotes, and the whole argument single quotes for "
                              f"the shell: {what} '{path}=[{quoted}]'") from None
        v = value
    return path, v


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
