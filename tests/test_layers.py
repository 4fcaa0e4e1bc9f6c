"""The rules between coc's parts, read from the source's import statements (no import runs).

coc is a handful of parts with one job each (docs/architecture.md): the topology model, the
testbed, the launcher, the communicator, the compatibility layer, the benchmarks, and a few
top-level modules every part may use. The rules keep each part changeable on its own:

- :mod:`coc.errors` imports no other part: every part raises its classes;
- the topology model imports no other part of coc (only :mod:`coc.errors` and the leaf
  :mod:`coc.ports`);
- the communicator (``coc.comm``) never reaches the launcher, and the launcher never reaches
  the communicator, not even through a third module: every rank's ``coc.init()`` must not
  load launcher code, and ``coc-run`` must not need NumPy or the engine's communicator;
- only one adapter, :mod:`coc._native`, imports the compiled binding ``coc._engine``, and in
  ``coc.comm`` only the engine port (:data:`ENGINE_PORT`) imports that adapter or the
  lookup of the site's real mpi4py (:mod:`coc.realmpi`): the rest of the communicator
  talks to the port;
- no two subpackages import each other, directly or through others.

An import inside a function counts like one at the top of the module: it is a dependency all
the same. One exception, :data:`FACADE`: ``coc/__init__.py`` loads ``coc.comm`` inside its
``__getattr__`` when a user first touches ``coc.COMM_WORLD`` and friends, so ``from coc
import __version__`` does not load the communicator.

Edges that break a rule today and whose fix is planned are in :data:`ALLOWED`, each with the
reason; an entry whose edge is gone fails the test too, so the list only shrinks.
"""

import ast
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "coc"

#: (module, imported module) pairs that break a rule today, with why and when they go.
ALLOWED: dict = {}

#: The one lazy edge the rules ignore: coc/__init__.py's __getattr__ loading the API.
FACADE = ("coc", "coc.comm")

#: The one module of coc.comm that opens and drives the engine and the site's MPI, and the
#: modules only it may import there.
ENGINE_PORT = "coc.comm.port"
PORT_ONLY = ("coc._native", "coc.realmpi")
PORT_RULE = "only the engine port coc.comm.port imports coc._native and coc.realmpi"

#: Parts the topology model may import: the errors, and coc.ports (port-range parsing,
#: a leaf that imports only coc.errors, kept outside the topology so ranks can read their
#: range without loading networkx).
TOPOLOGY_MAY_IMPORT = {"coc.errors", "coc.ports"}


class Edge:
    """One import: ``source`` module loads ``target`` module at ``file:line``.

    ``named`` is the module the statement names: ``target`` is it or a package holding it
    (importing ``coc.launcher.agent`` runs ``coc/launcher/__init__.py`` too).
    """

    def __init__(self, source, target, named, file, line, lazy):
        self.source, self.target, self.named = source, target, named
        self.file, self.line, self.lazy = file, line, lazy

    def __repr__(self):
        return f"{self.file}:{self.line}: {self.source} imports {self.target}"


def modules(root):
    """Return {module name: file} for every module under ``root`` (a ``coc/`` tree).

    Python sources, and the compiled binding by its Cython source (``coc._engine``).
    """
    found = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyx")]):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _targets(node, module, is_package, known):
    """Return the coc modules one import statement names (``from a import b``: ``a.b`` if
    that is a module, else ``a``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        base = base[:len(base) - node.level + is_package]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module
    names = [f"{stem}.{alias.name}" for alias in node.names]
    return [name if name in known else stem for name in names]


def edges(root):
    """Return every import edge between modules of the ``coc/`` tree at ``root``."""
    known = modules(root)
    found = []
    for module, path in known.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        lazy_lines = {n.lineno for fn in ast.walk(tree)
                      if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, module, path.name == "__init__.py", known):
                while target not in known and "." in target:   # coc.errors.CocError
                    target = target.rsplit(".", 1)[0]
                named = target
                while target in known and target != module:   # and its parent packages,
                    found.append(Edge(module, target, named, path.relative_to(root.parent),
                                      node.lineno, node.lineno in lazy_lines))
                    target = target.rpartition(".")[0]
                    if target == root.name:                   # not the root: every module
                        break                                 # loads it
    packages = subpackages(root)
    return [e for e in found
            if not (e.lazy and (e.source, part(e.target, packages)) == FACADE)]


def subpackages(root):
    """Return the subpackages of the ``coc/`` tree at ``root`` (``coc.comm``, ...)."""
    return {f"{root.name}.{d.name}" for d in root.iterdir() if (d / "__init__.py").is_file()}


def part(module, packages):
    """Return the part a module belongs to: its subpackage (``coc.comm``), else itself."""
    prefix = ".".join(module.split(".")[:2])
    return prefix if prefix in packages else module


def inside(module, package):
    """Return whether ``module`` is ``package`` or one of its submodules."""
    return module == package or module.startswith(package + ".")


def reaching(graph, start, package):
    """Return one import path (a list of edges) from module ``start`` into ``package``, or None."""
    paths, queue = {start: []}, [start]
    while queue:
        module = queue.pop(0)
        for edge in graph.get(module, ()):
            if edge.target in paths:
                continue
            paths[edge.target] = paths[module] + [edge]
            if inside(edge.target, package):
                return paths[edge.target]
            queue.append(edge.target)
    return None


def violations(root):
    """Return every broken rule in the ``coc/`` tree at ``root``, as (edge or path, why)."""
    all_edges = edges(root)
    kept = [e for e in all_edges if (e.source, e.named) not in ALLOWED]
    graph = {}
    for edge in kept:
        graph.setdefault(edge.source, []).append(edge)
    found = []
    for edge in kept:
        if edge.source == "coc.errors":
            found.append((edge, "coc.errors imports no other part"))
        if inside(edge.source, "coc.topology") and not (
                inside(edge.target, "coc.topology") or edge.target in TOPOLOGY_MAY_IMPORT):
            found.append((edge, "the topology model imports no other part"))
        if edge.target == "coc._engine" and edge.source != "coc._native":
            found.append((edge, "only coc._native imports the binding coc._engine"))
        if (inside(edge.source, "coc.comm") and edge.source != ENGINE_PORT
                and edge.target in PORT_ONLY):
            found.append((edge, PORT_RULE))
    for source, forbidden in (("coc.comm", "coc.launcher"), ("coc.launcher", "coc.comm")):
        entries = {}                        # one path per import that enters the forbidden part
        for module in sorted(graph):
            path = inside(module, source) and reaching(graph, module, forbidden)
            if path:
                entries.setdefault(repr(path[-1]), path)
        found.extend((path, f"{source} never reaches {forbidden}") for path in entries.values())
    found.extend((cycle, "no cycle between subpackages")
                 for cycle in package_cycles(kept, subpackages(root)))
    return found


def package_cycles(kept, packages):
    """Return the import cycles between subpackages, each as the sorted packages in it."""
    after = {p: set() for p in packages}
    for edge in kept:
        a, b = part(edge.source, packages), part(edge.target, packages)
        if a in packages and b in packages and a != b:
            after[a].add(b)
    reach = {}
    for p in packages:
        seen, stack = set(), [p]
        while stack:
            for q in after[stack.pop()] - seen:
                seen.add(q)
                stack.append(q)
        reach[p] = seen
    return sorted({tuple(sorted({p} | {q for q in reach[p] if p in reach[q]}))
                   for p in packages if p in reach[p]})


def test_the_rules_hold():
    """coc's own tree breaks no rule (apart from the listed, explained edges)."""
    assert violations(ROOT) == []


def test_every_allowed_edge_still_exists():
    """An allowed edge that has gone is taken off the list, so the list only shrinks."""
    present = {(e.source, e.target) for e in edges(ROOT)}
    assert sorted(set(ALLOWED) - present) == []


@pytest.fixture(name="tree")
def tree_fixture(tmp_path):
    """A copy of coc's Python sources to break on purpose."""
    copy = tmp_path / "coc"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    return copy


def _break(tree, relative, line):
    """Append ``line`` to one file of the copied tree."""
    path = tree / relative
    path.write_text(path.read_text() + "\n" + line + "\n")


def test_a_launcher_import_in_comm_fails(tree):
    """``import coc.launcher`` added to coc.comm is reported, with file and line."""
    assert violations(tree) == []
    _break(tree, "comm/ops.py", "import coc.launcher")
    found = [path for path, why in violations(tree) if why == "coc.comm never reaches coc.launcher"]
    assert len(found) == 1
    edge = found[0][-1]
    assert str(edge.file) == "coc/comm/ops.py" and edge.target == "coc.launcher"
    assert repr(edge).startswith(f"coc/comm/ops.py:{edge.line}: coc.comm.ops imports")


def test_a_lazy_import_through_another_module_fails(tree):
    """The launcher reaching coc.comm through a top-level module, inside a function, counts."""
    _break(tree, "pycommand.py", "def _later():\n    from coc.comm import ops")
    found = violations(tree)
    assert [why for _, why in found] == ["coc.launcher never reaches coc.comm"] * len(found)
    assert found and all(path[-1].source == "coc.pycommand" for path, _ in found)


@pytest.mark.parametrize("relative, line, why", [
    ("errors.py", "from coc import routes", "coc.errors imports no other part"),
    ("topology/units.py", "from coc import routes", "the topology model imports no other part"),
    ("gateway.py", "from coc import _engine", "only coc._native imports the binding coc._engine"),
    ("comm/ops.py", "from coc._native import engine", PORT_RULE),
    ("comm/world.py", "from coc import realmpi", PORT_RULE),
    ("testbed/names.py", "from coc.bench import stats", "no cycle between subpackages"),
])
def test_each_rule_fails_when_broken(tree, relative, line, why):
    """Every rule reports its own breach."""
    if why == "no cycle between subpackages":     # bench already imports the testbed
        assert any(e.source.startswith("coc.bench") and e.target.startswith("coc.testbed")
                   for e in edges(tree))
    _break(tree, relative, line)
    assert why in [w for _, w in violations(tree)]
