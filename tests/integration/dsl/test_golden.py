"""Golden resolved specs: every examples/*.llmp against tests/integration/golden/<example>.spec.json.

The JSON is exactly what ``llmp check --json`` prints (with ``source`` relative to the repo).
After an intended change, regenerate with ``pytest tests/integration/dsl/test_golden.py --update-golden``
and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmp.commands.check import to_json
from llmp.dsl import load

ROOT = Path(__file__).parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.llmp"))
GOLDEN = ROOT / "tests" / "integration" / "golden"


def golden_path(example: Path) -> Path:
    return GOLDEN / f"{example.stem}.spec.json"


def resolved(example: Path) -> str:
    data = to_json(load(example))
    data["source"] = example.relative_to(ROOT).as_posix()
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_example_matches_golden(example: Path, update_golden: bool) -> None:
    text = resolved(example)
    target = golden_path(example)
    if update_golden:
        GOLDEN.mkdir(exist_ok=True)
        target.write_text(text)
        return
    assert target.exists(), f"no golden file for {example.name}; run pytest --update-golden"
    assert json.loads(text) == json.loads(target.read_text()), (
        f"{example.name} resolves differently from {target.name}; if intended, rerun with "
        "--update-golden and review the diff")


def test_no_stale_golden_files(update_golden: bool) -> None:
    stale = [g for g in GOLDEN.glob("*.spec.json")
             if not (ROOT / "examples" / g.name.replace(".spec.json", ".llmp")).exists()]
    if update_golden:
        for g in stale:
            g.unlink()
        return
    assert not stale, f"golden files without an example: {[g.name for g in stale]}"
