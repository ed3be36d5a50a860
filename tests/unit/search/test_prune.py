"""Branch and bound: the lower bounds are bounds, and the pruned search returns what the
exhaustive one does (ranking, times, Pareto front) for every objective and ``top``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from search_helpers import SMALL
from search_helpers import assert_same_search as _same
from search_helpers import cached_search as _search

import llmp
from llmp.compose import predict
from llmp.errors import LlmpError
from llmp.search import Objective, engine, search
from llmp.search.bound import Tails, bounds

ROOT = Path(__file__).parents[3]
MOE = ROOT / "examples" / "mixtral_8x7b_dgx_h100.llmp"


@pytest.mark.slow  # a pruned and an exhaustive search over every layout of 64 GPUs
def test_pruning_skips_most_layouts_and_says_so():
    pruned = _search(SMALL, (4,), Objective.STEP_TIME, 3, False)
    full = _search(SMALL, (4,), Objective.STEP_TIME, 10**6, True)
    assert pruned.pruned > 0.9 * full.feasible  # most layouts that would run are never composed
    assert "pruned" in pruned.to_table() and pruned.to_dict()["pruned"] == pruned.pruned
    assert sum(pruned.infeasible.values()) + pruned.pruned + pruned.feasible <= pruned.size


def _exhaustive(path: Path, gpus: int, sample: int | None = None, sets: tuple[str, ...] = ()):
    """Every (or a seeded sample of) layout(s): the grid, its rows and their composed values."""
    spec = llmp.load(path, sets)
    built = engine.build(spec, [gpus], False)
    rows = np.flatnonzero(built.grid.reasons() == "")
    if sample is not None:
        rows = np.random.default_rng(0).choice(rows, min(sample, len(rows)), replace=False)
    limit = np.full(built.grid.size, np.inf)
    values, _, _ = engine.evaluate_rows(built.spec, built.grid, rows, limit)
    return built, rows, values


# Stacks without gradient-accumulation fusion add each microbatch's gradients into a buffer that
# ZeRO-2/3 shard over dp: a per-layer kernel whose size the pipeline fields change.
@pytest.mark.parametrize(("path", "gpus", "sample", "sets"), [
    *(pytest.param(SMALL, n, None, (), marks=pytest.mark.slow) for n in (8, 16)), (MOE, 64, 60, ()),
    pytest.param(SMALL, 8, None, ("train.stack=megatron_deepspeed",), marks=pytest.mark.slow)])
def test_the_bounds_never_exceed_the_composed_step(path, gpus, sample, sets):
    built, rows, values = _exhaustive(path, gpus, sample, sets)
    ran = rows[values["feasible"][rows]]
    assert len(ran) > 5
    t = values["step_time_s"][ran]
    found = bounds(built.spec, built.grid, rows)
    assert np.all(found.step[ran] <= t)
    assert np.count_nonzero(found.step[ran] > 0.5 * t) > len(ran) // 2  # not a bound of 0
    tails = found.step.copy()
    Tails(built.spec, built.grid, rows, found).refine(tails, rows)
    assert np.all(tails[ran] <= t)
    assert np.all(tails >= found.step)
    assert np.median(tails[ran] / t) > max(0.8, np.median(found.step[ran] / t))  # tighter, and close
    refined = []

    def keep(i: int, lower: float) -> bool:
        refined.append((i, lower))
        return False

    engine.evaluate_rows(built.spec, built.grid, ran, np.full(built.grid.size, np.inf), skip=keep)
    for i, lower in refined:
        assert lower <= values["step_time_s"][i]
        assert lower >= 0.5 * values["step_time_s"][i] or built.grid.columns["parallel.schedule"][i] == "dualpipe"


@pytest.mark.parametrize(("path", "gpus", "sets"), [
    (SMALL, 8, ("train.stack=megatron_deepspeed",)), (MOE, 64, ())])
def test_layouts_of_a_class_share_their_tails(path, gpus, sets):
    # What Tails prices once per class (the ops the floors leave out, the ranks' sync and update)
    # is the same for every layout of the class: none of it reads TAIL_FREE.
    spec = llmp.load(path, sets)
    built = engine.build(spec, [gpus], False)
    rows = np.flatnonzero(built.grid.reasons() == "")
    tails = Tails(built.spec, built.grid, rows, bounds(built.spec, built.grid, rows))
    compared = 0
    for members in list(tails.members.values())[::3]:
        found = []
        for i in members[:4]:
            try:
                found.append(tails._class(int(i)))
            except LlmpError:
                continue
        for other in found[1:]:
            for field in ("extra", "extra_compute", "prefetch", "ends", "sync", "last", "spans", "share", "update"):
                assert np.array_equal(getattr(other, field), getattr(found[0], field)), field
            compared += 1
    assert compared > 10


@pytest.mark.slow  # an exhaustive search beside the pruned one
def test_pruned_search_equals_the_exhaustive_one_on_a_stack_without_fusion():
    spec = llmp.load(SMALL, ["train.stack=megatron_deepspeed"])
    pruned = search(spec, gpus=[8], top=5, residuals=None)
    full = search(spec, gpus=[8], top=5, exhaustive=True, residuals=None)
    _same(pruned, full)
    assert pruned.pruned > 0


def test_a_composed_layout_equals_predict():
    result = _search(SMALL, (8,), Objective.STEP_TIME, 3, False)
    for c in result.ranked:
        direct = predict(llmp.load(SMALL, c.overrides()), None)
        assert c.step_time_s == direct.step_time_s
        assert c.memory_per_gpu_bytes == direct.memory_per_gpu_bytes
