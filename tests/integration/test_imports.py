"""The package's import graph: no cycles among llmp modules or among its packages, and the packages
stand on floors, each importing only the floors below it (docs/architecture.md).

Every ``import`` of an llmp module counts, with no exemption: at module level, inside a function (a
function-level import that closes a loop is still a loop; it only hides it from the interpreter)
and under ``if TYPE_CHECKING:`` (an annotation that names an upper floor is still a dependency on
it). So no llmp module is imported under ``TYPE_CHECKING``, and a function imports an llmp module
only to defer a third-party package its callers otherwise never load (SymPy on the numeric path,
torch and the web packages for their commands).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "llmp"

FLOORS: tuple[tuple[str, ...], ...] = (
    # the ground: the version, errors, SymPy on demand, small helpers; units and output files on
    # them; the grammar and the plotting backend on those
    ("llmp", "llmp.errors", "llmp.sym", "llmp.recent", "llmp.progress", "llmp.callable_package"),
    ("llmp.units", "llmp.files"),
    ("llmp.grammar", "llmp.plotting"),
    ("llmp.hardware",),  # device, link, node and cluster types; the catalog's files
    ("llmp.spec",),  # what a spec is: Spec, its schema, values, symbols, paths, algebra
    ("llmp.stacks",),  # training stacks as data
    ("llmp.analytic",),  # operator graph, costs, layout rules, the schedule table, the residual contract
    ("llmp.dsl",),  # the language: text -> Spec, the catalog resolver, the HF importer
    ("llmp.residuals",),  # residual models and stores
    ("llmp.compose", "llmp.measure"),  # the step; the torch measurement kit
    ("llmp.search", "llmp.validate"),
    ("llmp.calibrate", "llmp.planning", "llmp.sensitivity"),
    ("llmp.serve",),
    ("llmp.commands", "llmp.cli"),  # the CLI imports each command's module by name, when it runs
    ("llmp.__main__",),
)
"""Each package's floor, lowest first: a package imports only packages on floors below its own."""

DEFERRED = frozenset({"sympy", "torch", "starlette", "uvicorn"})
"""Third-party packages a function may defer by importing the llmp module that loads them."""


@dataclass(frozen=True)
class Site:
    """One import of an llmp module: where (``module``, ``function`` or ``type_checking``) and of what."""

    importer: str
    target: str
    where: str
    line: int


@cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _owner(dotted: str, modules: dict[str, Path]) -> str | None:
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


@cache
def _scan(name: str) -> tuple[tuple[Site, ...], frozenset[str]]:
    """The llmp imports of module ``name`` (a ``from pkg import sub`` names the submodule), and the
    third-party top-level packages it imports at module level."""
    modules = _modules()
    path = modules[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    sites: list[Site] = []
    external: set[str] = set()

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                inner = "type_checking"
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and where == "module":
                inner = "function"
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in child.names]
                targets = [s for s in subs if s in modules] or [base]
            for target in targets:
                if not target.startswith("llmp"):
                    if where == "module":
                        external.add(target.partition(".")[0])
                elif (mod := _owner(target, modules)) is not None and mod != name:
                    sites.append(Site(name, mod, where, child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), "module")
    return tuple(sites), frozenset(external)


def _sites() -> list[Site]:
    return [site for name in _modules() for site in _scan(name)[0]]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in _modules()}
    for site in _sites():
        graph[site.importer].add(site.target)
    return graph


def _package(module: str) -> str:
    """The package a module belongs to: ``llmp.X`` for a subpackage's modules, else the module itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else module


def _packages() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {_package(name): set() for name in _modules()}
    for site in _sites():
        if _package(site.importer) != _package(site.target):
            graph[_package(site.importer)].add(_package(site.target))
    return graph


@cache
def _loads(name: str) -> frozenset[str]:
    """Third-party packages importing module ``name`` loads: its own and its llmp imports' at module level."""
    sites, external = _scan(name)
    out = set(external)
    for site in sites:
        if site.where == "module":
            out |= _loads(site.target)
    return frozenset(out)


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: set[frozenset[str]] = set()

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.add(frozenset(component))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles_among_llmp_modules():
    # A cycle means a concept lives in two layers: move it down to its one home (docs/architecture.md).
    found = sorted(sorted(c) for c in _cycles(_graph()))
    assert not found, f"import cycles: {found}"


def test_no_import_cycles_among_llmp_packages():
    found = sorted(sorted(c) for c in _cycles(_packages()))
    assert not found, f"package import cycles: {found}"


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


def test_every_package_imports_only_the_floors_below_it():
    floor = {package: i for i, floors in enumerate(FLOORS) for package in floors}
    graph = _packages()
    assert set(graph) == set(floor), "a package with no floor: add it to FLOORS and docs/architecture.md"
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if floor[b] >= floor[a])
    assert not upward, upward


def test_no_llmp_import_is_only_for_type_checking():
    found = [f"{s.importer}:{s.line} -> {s.target}" for s in _sites() if s.where == "type_checking"]
    assert not found, found


def test_a_function_imports_an_llmp_module_only_to_defer_a_heavy_package():
    found = [f"{s.importer}:{s.line} -> {s.target}" for s in _sites()
             if s.where == "function" and not DEFERRED & (_loads(s.target) - _loads(s.importer))]
    assert not found, found


def test_the_deferred_packages_are_deferred():
    # What the function-level imports are for: the numeric path (spec, analytic, compose) and the
    # command table load none of them.
    for name in ("llmp.compose", "llmp.dsl", "llmp.cli"):
        assert not DEFERRED & _loads(name), (name, sorted(DEFERRED & _loads(name)))
    assert "sympy" in _loads("llmp.analytic.compiled") and "torch" in _loads("llmp.measure.step")


def test_the_residual_models_do_not_import_the_measurement_kit():
    # The kit (torch) writes sample rows the models read: it may import llmp.residuals.samplefile
    # (the file format) and nothing else of the models; the models never import the kit or torch.
    graph = _graph()
    residuals = [m for m in graph if m.startswith("llmp.residuals")]
    wrong = {m: sorted(graph[m]) for m in residuals if any(t.startswith("llmp.measure") for t in graph[m])}
    assert residuals and not wrong
    kit = [m for m in graph if m.startswith("llmp.measure")]
    used = {t for m in kit for t in graph[m] if t.startswith("llmp.residuals")}
    assert kit and used == {"llmp.residuals.samplefile"}
    modules = _modules()
    torch = re.compile(r"^\s*(import|from) torch\b", re.M)
    torch_users = [m for m in residuals if torch.search(modules[m].read_text(encoding="utf-8"))]
    assert not torch_users
