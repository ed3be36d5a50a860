"""Overlapped communication slows the compute it runs beside (``OverlapRules.contention``): the step
grows with the contention where collectives hide behind compute, and a run without collectives
does not feel it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import llmp
from llmp.compose.overlap import CONTENTION, OverlapRules
from llmp.compose.predictor import priced
from llmp.compose.step import compose

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _steps(example: str, contentions: tuple[float, ...]) -> tuple[float, list[float]]:
    spec = llmp.load(EXAMPLES / example)
    p = priced(spec)
    rules = OverlapRules.of(spec)
    assert rules.contention == CONTENTION
    own = float(p.step_time(p.times))
    return own, [float(compose(p.graph, p.times, dataclasses.replace(rules, contention=c),
                               spec.parallel.schedule).step_time) for c in contentions]


@pytest.mark.parametrize("example", ["llama3_8b_dgx_h100.llmp", "gpt3_175b_dgx_a100.llmp", "deepseek_v3_h800.llmp"])
def test_hidden_communication_slows_the_step_by_the_contention(example: str) -> None:
    own, (none, half, full) = _steps(example, (0.0, CONTENTION / 2, CONTENTION))
    assert full == pytest.approx(own, rel=1e-12)
    assert none < half < full
    # linear in the contention where no overlap changes side (the hidden spans stay the same)
    assert half - none == pytest.approx((full - none) / 2, rel=0.05)


def test_a_run_without_collectives_does_not_feel_contention() -> None:
    spec = llmp.load(EXAMPLES / "tiny_cpu.llmp")  # one device: nothing to communicate
    p = priced(spec)
    rules = OverlapRules.of(spec)
    steps = {c: float(compose(p.graph, p.times, dataclasses.replace(rules, contention=c),
                              spec.parallel.schedule).step_time) for c in (0.0, CONTENTION)}
    assert steps[0.0] == steps[CONTENTION]
