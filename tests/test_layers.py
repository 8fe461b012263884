"""The import layers of pysim (docs/architecture.md), read statically from every module's source.

Arrows point one way: a module imports only modules of its own layer or of layers below it;
no circle, even within a layer; no import inside a function, except the few deferred imports
named in DEFERRED (optional extras, matplotlib, and the compiled core behind pysim.engine).
"""
import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lowest first; a module is in the layer of the longest prefix listed
LAYERS = [
    ("csim", ["csim"]),
    ("config", ["pysim.errors", "pysim._version", "pysim._io", "pysim._gc", "pysim.schema",
                "pysim.systems",
                "pysim.config", "pysim.engine"]),
    ("components", ["pysim.models", "pysim.topology", "pysim.cluster", "pysim.routing",
                    "pysim.deadlock",
                    "pysim.network",
                    "pysim.flow", "pysim.theory", "pysim.traffic", "pysim.stats"]),
    ("workload", ["pysim.workload", "pysim.sim"]),
    ("studies", ["pysim.jobs", "pysim.sweep", "pysim.plot", "pysim.figure_checks"]),
    ("interface", ["pysim.cli", "pysim.docs", "pysim.components", "=pysim",
                   "pysim.__main__"]),
]
# ("=name": that module alone, not the modules under it: a new module of pysim must be given
# its layer here)

# A model knows nothing of networks: pysim.models imports, of pysim, only itself and the
# config layer.
MODELS_MAY_IMPORT = ("pysim.models", "pysim.errors", "pysim.schema", "pysim.config",
                     "pysim._io", "pysim._version", "pysim._gc")

# (importing module, imported top-level package or module) allowed inside a function
DEFERRED = {
    ("pysim.engine", "csim"),            # the compiled core, loaded on first use
    ("pysim.models.onnx_import", "onnx"),  # optional extra: pysim[onnx]
    ("pysim.sweep.execute", "dask"),     # optional extra: pysim[dask]
    ("pysim.sweep.store", "pandas"),     # optional extra: pysim[pandas]
    ("pysim.workload.chakra", "google"),  # optional extra: pysim[chakra] (protobuf)
}
DEFERRED_ANYWHERE = {"matplotlib"}     # heavy: loaded when a figure is first drawn


def _modules():
    mods = {}
    for top in ("pysim", "csim"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    p = os.path.join(d, f)
                    name = os.path.relpath(p, ROOT)[:-3].replace(os.sep, ".")
                    if name.endswith(".__init__"):
                        name = name[:-len(".__init__")]
                    mods[name] = p
    return mods


MODULES = _modules()


def _resolve(name):
    """The module (of MODULES) that `name` imports: a.b.c -> a.b if c is no module."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module, path):
    """[(lineno, imported name, inside a function)] of one module."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = []

    def visit(node, deferred):
        for ch in ast.iter_child_nodes(node):
            inner = deferred or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda))
            if isinstance(ch, ast.Import):
                out.extend((ch.lineno, a.name, deferred) for a in ch.names)
            elif isinstance(ch, ast.ImportFrom):
                base = ch.module or ""
                if ch.level:
                    pkg = module if path.endswith("__init__.py") else module.rpartition(".")[0]
                    for _ in range(ch.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                # `from pkg import sub` imports pkg.sub when that is a module
                out.extend((ch.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES
                            else base, deferred) for a in ch.names)
            visit(ch, inner)
    visit(tree, False)
    return out


def _layer(module):
    best, index = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if p.startswith("="):
                if module == p[1:] and len(p) > best:
                    best, index = len(p), i
                continue
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, index = len(p), i
    return index


def _edges():
    edges = {}
    for m, p in MODULES.items():
        for line, name, deferred in _imports(m, p):
            edges.setdefault(m, []).append((line, name, deferred))
    return edges


EDGES = _edges()


def test_every_module_has_a_layer():
    assert [m for m in MODULES if _layer(m) is None] == []


def test_no_module_imports_a_higher_layer():
    bad = []
    for m, es in EDGES.items():
        for line, name, _ in es:
            target = _resolve(name)
            if not target:
                continue
            if _layer(target) > _layer(m):
                bad.append(f"{MODULES[m]}:{line}: {m} ({LAYERS[_layer(m)][0]}) imports "
                           f"{target} ({LAYERS[_layer(target)][0]})")
    assert bad == []


def test_csim_imports_nothing_of_pysim():
    bad = [(m, line, n) for m, es in EDGES.items() if m.startswith("csim")
           for line, n, _ in es if n.split(".")[0] == "pysim"]
    assert bad == []


def test_a_model_knows_nothing_of_networks():
    bad = []
    for m, es in EDGES.items():
        if m.startswith("pysim.models"):
            for line, n, _ in es:
                t = _resolve(n)
                if t.startswith("pysim") and not any(t == p or t.startswith(p + ".")
                                                     for p in MODELS_MAY_IMPORT):
                    bad.append(f"{MODULES[m]}:{line}: {m} imports {t}")
    assert bad == []


def test_no_import_inside_a_function_but_the_deferred_ones():
    bad = []
    for m, es in EDGES.items():
        for line, n, deferred in es:
            if not deferred:
                continue
            top = n.split(".")[0]
            if (m, n) in DEFERRED or (m, top) in DEFERRED or top in DEFERRED_ANYWHERE:
                continue
            bad.append(f"{MODULES[m]}:{line}: {m} imports {n} inside a function")
    assert bad == []


def test_no_circle():
    graph = {m: sorted({_resolve(n) for _, n, _ in es if _resolve(n) and _resolve(n) != m})
             for m, es in EDGES.items()}
    # Tarjan's strongly connected components
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in list(graph):
        if v not in index:
            strong(v)
    assert circles == []


def test_every_module_declaring_keys_is_a_component():
    """pysim.components imports every module that declares configuration keys, so that a
    configuration parsed after `import pysim` knows them all."""
    listed = {_resolve(n) for _, n, _ in EDGES["pysim.components"]}
    declaring = {m for m, p in MODULES.items() if m.startswith("pysim.")
                 and m != "pysim.schema" and "\ndeclare(" in open(p, encoding="utf-8").read()}
    assert declaring - listed == set()


def test_the_configuration_machinery_needs_no_compiled_core():
    """With the extension unimportable, pysim (and so pysim.config) imports, a configuration
    parses and the reference page is generated: only running needs the compiled core."""
    code = ("import sys; sys.modules['csim._engine'] = None\n"
            "import pysim.config, pysim, pysim.docs\n"
            "cfg = pysim.load('mesh8x8', {'traffic.injection_rate': 0.2})\n"
            "assert cfg.topology.dims == [8, 8]\n"
            "pysim.docs.configuration_page()\n"
            "try:\n"
            "    pysim.simulate(cfg)\n"
            "except ImportError:\n"
            "    print('needs the core')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "needs the core"


def test_no_assert_of_the_suite_hides_a_check_in_its_message():
    """`assert a, b and c` checks a alone: b and c are its message. No test does that."""
    bad = []
    for f in sorted(os.listdir(os.path.join(ROOT, "tests"))):
        if f.endswith(".py"):
            tree = ast.parse(open(os.path.join(ROOT, "tests", f), encoding="utf-8").read())
            bad += [f"{f}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Assert)
                    and isinstance(n.msg, (ast.BoolOp, ast.Compare))]
    assert bad == []


def test_import_pysim_leaves_the_studies_and_the_core_unloaded():
    """`import pysim` loads the components (every key declared) but not what only some runs
    need: the compiled core, figures (matplotlib), sweeps and job streams (processes,
    SQLite). Each is loaded on first use; pysim.sweep is the package, and callable."""
    code = ("import sys, pysim\n"
            "heavy = ['csim._engine', 'matplotlib', 'pysim.plot', 'pysim.sweep', 'pysim.jobs.run',\n"
            "         'pysim.jobs.servers', 'sqlite3', 'multiprocessing', 'concurrent.futures']\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n"
            "from pysim.jobs import run_stream\n"
            "print(callable(pysim.sweep), pysim.sweep is sys.modules['pysim.sweep'],\n"
            "      pysim.sweep.sweep.__module__, pysim.to_pandas.__module__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["[]", "True True pysim.sweep.execute pysim.sweep.store"]
