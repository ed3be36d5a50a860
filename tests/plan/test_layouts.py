"""The layout search: its lower bound is a bound, and branch-and-bound finds what an exhaustive
evaluation of the same space ranks first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llmp.planning import layouts
from llmp.search import engine
from llmp.search.space import Grid

ROOT = Path(__file__).resolve().parents[2]


def exhaustive(source: str, gpus: int) -> tuple[Grid, np.ndarray, np.ndarray, dict]:
    """Every layout of the narrowed space: its bound, its evaluated step time (NaN if it cannot run)."""
    built = engine.build(source, [], (), [gpus], False)
    spec, grid = built.spec, built.grid
    rows = np.flatnonzero(layouts.narrow(spec, grid) == "")
    sub = Grid(columns={p: c[rows] for p, c in grid.columns.items()}, varied=grid.varied, size=len(rows))
    why = engine.feasibility(spec, sub, None)
    runnable = np.flatnonzero(why == "")
    values, _ = engine.evaluate_grid(spec, sub, runnable)
    ok = values["feasible"] & (values["memory_per_gpu_bytes"] <= engine.memory_limit(spec, sub, None))
    step = np.where(ok, values["step_time_s"], np.nan)
    return sub, layouts.step_bound(spec, sub), step, values


@pytest.mark.parametrize("gpus", [4, 8, 16])
def test_the_bound_never_exceeds_the_evaluated_step(small_spec, gpus):
    _sub, bound, _step, values = exhaustive(str(small_spec), gpus)
    ran = values["feasible"]
    assert ran.sum() > 5
    assert np.all(bound[ran] <= values["step_time_s"][ran] * (1 + 1e-9))
    assert np.all(bound > 0)


@pytest.mark.parametrize("gpus", [8, 16])
def test_branch_and_bound_finds_the_exhaustive_best(small_spec, gpus):
    sub, _bound, step, _ = exhaustive(str(small_spec), gpus)
    best = layouts.best(str(small_spec), (), gpus)
    assert best is not None
    assert best.roofline_step_s == pytest.approx(np.nanmin(step), rel=1e-12)
    assert best.evaluated <= best.checked <= best.space == sub.size
    assert best.gpus == gpus
    world = best.config["parallel.tp"] * best.config["parallel.pp"] * best.config["parallel.dp"]
    assert world == gpus


def test_the_bound_on_a_pipelined_large_model():
    # Llama 3 405B on 8,192 GPUs: interleaved and 1F1B layouts, full recompute, uneven stages
    _sub, bound, _step, values = exhaustive_sample(str(ROOT / "examples" / "llama3_405b_pp16_vp8.llmp"), 8192)
    ran = values["feasible"]
    assert ran.sum() >= 20
    assert np.all(bound[ran] <= values["step_time_s"][ran] * (1 + 1e-9))


def exhaustive_sample(source: str, gpus: int, keep: int = 60):
    """Like :func:`exhaustive` on the ``keep`` layouts with the smallest bound (the full 405B space
    takes minutes to evaluate)."""
    built = engine.build(source, [], (), [gpus], False)
    spec, grid = built.spec, built.grid
    rows = np.flatnonzero(layouts.narrow(spec, grid) == "")
    full = Grid(columns={p: c[rows] for p, c in grid.columns.items()}, varied=grid.varied, size=len(rows))
    rows = np.argsort(layouts.step_bound(spec, full), kind="stable")
    checked = Grid(columns={p: c[rows] for p, c in full.columns.items()}, varied=grid.varied, size=len(rows))
    why = engine.feasibility(spec, checked, None)
    runnable = np.flatnonzero(why == "")[:keep]
    values, _ = engine.evaluate_grid(spec, checked, runnable)
    return checked, layouts.step_bound(spec, checked), values["step_time_s"], values


def test_narrowing_names_its_rules(small_spec):
    built = engine.build(str(small_spec), [], (), [16], False)
    reasons = layouts.narrow(built.spec, built.grid)
    kept = reasons == ""
    cols = built.grid.columns
    assert np.all(cols["parallel.tp"][kept] <= 8)
    assert np.all((cols["parallel.tp"][kept] > 1) == cols["parallel.sequence_parallel"][kept].astype(bool))
    assert set(cols["parallel.zero"][kept].astype(str)) == {"1"}
    assert any(r.startswith("plan: tp beyond") for r in reasons)
