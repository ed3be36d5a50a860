"""Every shipped example, including the seed paper's runs in examples/seed/, resolves and predicts:
a finite, positive step time that fits in memory (each is a run that ran, or a documented layout)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from llmp import dsl
from llmp.compose import predict

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p.relative_to(ROOT / "examples") for p in (ROOT / "examples").rglob("*.llmp"))


@pytest.mark.parametrize("residuals", [None, "default"])  # the roofline, and the shipped stores as the CLI uses them
@pytest.mark.parametrize("name", [str(p) for p in EXAMPLES if not str(p).startswith("symbolic")])
def test_example_predicts(name: str, residuals: str | None) -> None:
    pred = predict(dsl.load(ROOT / "examples" / name), residuals=residuals)
    assert math.isfinite(pred.step_time_s) and pred.step_time_s > 0
    if not name.startswith("sweep"):  # a sweep's first point is a candidate, not a run
        assert not pred.memory.oom, f"{name}: predicted out of memory on a run that ran"


def test_the_seed_runs_are_all_there() -> None:
    seed = {p.name for p in EXAMPLES if p.parts[0] == "seed"}
    for layout in ("4_4_8", "4_8_4", "8_4_4"):
        assert {f"neox20b_perlmutter_{layout}.llmp", f"neox20b_vista_{layout}.llmp"} <= seed
    assert {"llama13b_perlmutter_4_8_2.llmp", "llama13b_vista_4_8_2.llmp", "llemma7b_perlmutter_4_2_2.llmp",
            "llemma7b_vista_4_2_2.llmp"} <= seed
