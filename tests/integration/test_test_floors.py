"""The tests' own floors (docs/architecture.md, "A test"): tests/property/ holds Hypothesis
properties only, and no unit module hides a generated-input test among its examples."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _tests(folder: str) -> list[tuple[str, str, bool]]:
    """(module, test, decorated with @given) for every test function under tests/<folder>/."""
    found = []
    for path in sorted((TESTS / folder).rglob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                given = any("given" in ast.unparse(d).split("(")[0] for d in node.decorator_list)
                found.append((str(path.relative_to(TESTS)), node.name, given))
    return found


def test_every_property_test_is_generated():
    examples = [f"{m}::{t}" for m, t, given in _tests("property") if not given]
    assert not examples, f"example tests belong in tests/unit/<package>/: {examples}"


def test_no_unit_test_is_generated():
    generated = [f"{m}::{t}" for m, t, given in _tests("unit") if given]
    assert not generated, f"@given tests belong in tests/property/<package>/: {generated}"


def test_the_folders_hold_tests():
    assert len(_tests("property")) > 100 and len(_tests("unit")) > 500
