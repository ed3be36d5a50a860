"""Sensitivity differentiates what ``llmp predict`` predicts: the same step time at the point, and
derivatives that match finite differences of the real ``predict`` (shipped residual stores on)
wherever the step moves no residual tree to another leaf.

The residual factors are piecewise constant in an op's dims (XGBoost trees), so a finite
difference across a split measures the split's jump, which the held-fixed factors cannot see;
such steps are left out, and a kink of the roofline inside the step too. Counts keep the spec
valid (``model.layers`` a multiple of the pipeline's chunks, ``train.global_batch`` of the
replicas' microbatches), so a count's step is the smallest valid one above 0.4% of its value.
Parallel degrees and node counts change which collectives exist: the step's structure, which
sensitivity holds fixed, so they are not differenced.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import llmp
from llmp import dsl
from llmp.errors import LlmpError
from llmp.sensitivity import FieldSensitivity, Sensitivity, sensitivity
from llmp.spec import schema
from llmp.units import format_quantity

EXAMPLES = Path(__file__).parents[3] / "examples"
GPU_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.llmp")
                      if p.stem not in {"tiny_cpu", "symbolic_hidden", "sweep_llama3_8b"})
TOP = 6
"""Fields differenced per example: the most influential ones a finite difference can move."""
REL = 0.03


def _structural(path: str) -> bool:
    return path.startswith("parallel.") or path == "cluster.nodes"


def _text(f: FieldSensitivity, value: float) -> str:
    if f.integer:
        return str(round(value))
    field = schema.field_at(f.path)
    assert field is not None
    return format_quantity(value, field.dim, sig=12)


def _steps(f: FieldSensitivity) -> Iterator[float]:
    """Candidate central-difference steps, smallest first."""
    x = f.value
    if f.integer:
        yield from sorted({c * 2**j for c in range(1, 17) for j in range(15) if x * 0.004 <= c * 2**j <= x * 0.25})
    else:
        yield from (x * r for r in (0.002, 0.005, 0.01, 0.02))


def _predict(path: Path, sets: list[str]) -> tuple[float, np.ndarray]:
    p = llmp.predict(dsl.load(path, sets))
    return p.step_time_s, np.asarray([r.factor for r in p.ops])


def _finite_difference(path: Path, result: Sensitivity, f: FieldSensitivity) -> float | None:
    """(T(x + h) - T(x - h)) / 2h of predict, at the first valid step that keeps every residual
    factor and crosses no kink; None when there is none."""
    _, here = _predict(path, [])
    for h in _steps(f):
        if any(k.path == f.path and abs(k.at - f.value) <= h for k in result.kinks):
            return None
        try:
            up, up_f = _predict(path, [f"{f.path}={_text(f, f.value + h)}"])
            down, down_f = _predict(path, [f"{f.path}={_text(f, f.value - h)}"])
        except LlmpError:
            continue  # an invalid count (a divisibility): the next step
        if up_f.shape == down_f.shape == here.shape and (up_f == here).all() and (down_f == here).all():
            return (up - down) / (2 * h)
    return None


def _check(path: Path) -> int:
    spec = dsl.load(path)
    result = sensitivity(spec, resolve=lambda extra: dsl.load(path, list(extra)))
    assert result.step_time_s == pytest.approx(llmp.predict(spec).step_time_s, rel=1e-12)
    assert result.residuals == llmp.predict(spec).provenance.residuals
    checked = 0
    top = [f for f in result.fields if not _structural(f.path) and f.derivative != 0 and not f.one_sided][:TOP]
    for f in top:
        fd = _finite_difference(path, result, f)
        if fd is None:
            continue
        assert f.derivative == pytest.approx(fd, rel=REL), f.path
        checked += 1
    return checked


KNOWN = {
    "llama3_405b_pp16_vp8": "its top fields move a residual factor at every valid step (layers step by pp x vp = 128)",
    "vista_llemma_7b": "model.hidden: 0.000866 against a finite difference of 0.000928 (7%), no factor moved: the "
                       "derivative is the trend of the tile staircase, the difference one stair",
}
"""Examples the check does not pass yet (measured 2026-11-28), strict: one that starts passing fails."""


@pytest.mark.slow
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(reason=KNOWN[p.stem], strict=True))
                                  if p.stem in KNOWN else p for p in GPU_EXAMPLES], ids=lambda p: p.stem)
def test_sensitivity_matches_finite_differences_of_predict(path):
    assert _check(path) >= 1, "no top field could be differenced without moving a residual factor"


@pytest.mark.slow  # the GPT-3 example differentiated symbolically and by finite differences of predict
def test_gpt3_sensitivity_is_predicts_step():
    # The case: sensitivity reported the bare roofline's step (55 s) beside predict's 64 s,
    # and dT/d global_batch 0.0348 beside a finite difference of predict of 0.0403.
    path = EXAMPLES / "gpt3_175b_dgx_a100.llmp"
    result = sensitivity(dsl.load(path), wrt=["train.global_batch", "model.layers"],
                         resolve=lambda extra: dsl.load(path, list(extra)))
    assert result.step_time_s == pytest.approx(llmp.predict(dsl.load(path)).step_time_s, rel=1e-12)
    assert result.closed_form_s == pytest.approx(result.step_time_s, rel=1e-9)
    assert any("held at its value at the point" in n for n in result.notes)
    for f in result.fields:
        fd = _finite_difference(path, result, f)
        assert fd is not None, f.path
        assert f.derivative == pytest.approx(fd, rel=REL), f.path
