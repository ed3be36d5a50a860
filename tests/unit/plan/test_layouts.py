"""The plan's layout search: branch-and-bound finds what an exhaustive evaluation of the same
narrowed space ranks first (the bounds themselves: tests/unit/search/test_prune.py)."""

from __future__ import annotations

import numpy as np
import pytest

from llmp.planning import layouts
from llmp.search import engine
from llmp.search.space import Grid


def exhaustive(source: str, gpus: int) -> tuple[Grid, np.ndarray]:
    """Every layout of the narrowed space and its composed step time (NaN if it cannot run)."""
    spec, resolve = engine.load(source)
    built = engine.build(spec, [gpus], False, resolve)
    spec, grid = built.spec, built.grid
    rows = np.flatnonzero(layouts.narrow(spec, grid) == "")
    sub = grid.take(rows)
    limit = engine.memory_limit(spec, sub, None)
    values, _, _ = engine.evaluate_rows(spec, sub, np.arange(sub.size), limit)
    return sub, np.where(values["feasible"], values["step_time_s"], np.nan)


@pytest.mark.parametrize("gpus", [8, 16])
def test_branch_and_bound_finds_the_exhaustive_best(small_spec, gpus):
    sub, step = exhaustive(str(small_spec), gpus)
    best = layouts.best(str(small_spec), (), gpus)
    assert best is not None
    assert best.roofline_step_s == np.nanmin(step)
    assert best.evaluated <= best.checked <= best.space == sub.size
    assert best.gpus == gpus
    world = best.config["parallel.tp"] * best.config["parallel.pp"] * best.config["parallel.dp"]
    assert world == gpus


def test_narrowing_names_its_rules(small_spec):
    spec, resolve = engine.load(small_spec)
    built = engine.build(spec, [16], False, resolve)
    reasons = layouts.narrow(built.spec, built.grid)
    kept = reasons == ""
    cols = built.grid.columns
    assert np.all(cols["parallel.tp"][kept] <= 8)
    assert np.all((cols["parallel.tp"][kept] > 1) == cols["parallel.sequence_parallel"][kept].astype(bool))
    assert set(cols["parallel.zero"][kept].astype(str)) == {"1"}
    assert any(r.startswith("plan: tp beyond") for r in reasons)
