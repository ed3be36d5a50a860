"""Benchmarks change tracked files only when asked: RESULTS.md under ``--record``, shipped data
under ``--ship``; and without the public data folder they stop with a message, not a traceback."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def _guarded(tree: ast.AST, flag: str) -> list[int]:
    """Lines of calls to ``record(...)`` that no ``if args.<flag>`` encloses."""
    bad: list[int] = []

    def visit(node: ast.AST, inside: bool) -> None:
        if isinstance(node, ast.If) and f"args.{flag}" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, inside)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "record" and not inside:
            bad.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return bad


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name != "recording.py"], ids=lambda s: s.name)
def test_results_are_appended_only_under_record(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    assert _guarded(tree, "record") == []


@pytest.fixture
def lone_checkout(tmp_path: Path) -> Path:
    """The benchmarks beside the package, with no shared data folder anywhere above them."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "benchmarks", root / "benchmarks", ignore=shutil.ignore_patterns("RESULTS.md", ".*"))
    (root / "llmp").symlink_to(ROOT / "llmp")
    return root


@pytest.mark.parametrize("argv", [["collectives_published.py"], ["collective_tables.py"],
                                  ["fit_public.py", "--data", "nowhere"], ["unseen_gpu.py", "--data", "nowhere"],
                                  ["tile_choice.py", "--data", "nowhere"]], ids=lambda a: a[0])
def test_without_the_data_folder_a_message_and_nothing_written(lone_checkout: Path, argv: list[str]) -> None:
    done = subprocess.run([sys.executable, f"benchmarks/{argv[0]}", *argv[1:]], cwd=lone_checkout,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "no data folder" in done.stderr and "Traceback" not in done.stderr
    assert not (lone_checkout / "benchmarks" / "RESULTS.md").exists()
