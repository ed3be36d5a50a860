"""The package's import graph: no cycles among llmp modules, and the layers point one way.

Every ``import`` counts, at module level or inside a function (a function-level import that
closes a loop is still a loop; it only hides it from the interpreter). Imports under
``if TYPE_CHECKING:`` are annotations and do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "llmp"

def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The llmp modules ``name`` imports (a ``from pkg import sub`` names the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
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
                if target.startswith("llmp") and (mod := owner(target)) is not None and mod != name:
                    found.add(mod)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
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


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


def test_the_hardware_layer_does_not_import_the_language():
    # The catalog's files and types sit below the language, which reads them (llmp.dsl.catalog
    # resolves catalog ids). A __main__ is a program over the package, not part of its layer.
    graph = _graph()
    wrong = {m: sorted(t for t in graph[m] if t == "llmp.dsl" or t.startswith("llmp.dsl."))
             for m in graph if m.startswith("llmp.hardware") and not m.endswith("__main__")}
    assert not {m: t for m, t in wrong.items() if t}
    base = ("llmp.errors", "llmp.sym", "llmp.units", "llmp.grammar")  # the floor: they import only each other
    assert all(t.startswith(base) for m in graph if m.startswith(base) for t in graph[m])


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
