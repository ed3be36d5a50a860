"""Branch and bound: compose only the configurations that can still reach the answer.

A search returns its ``top`` best configurations and the Pareto front. Every configuration gets
a lower bound on its step time (:mod:`llmp.search.bound`), hence a bound on its objective (the
same tokens per step over a shorter step: more tokens per second, less cost). Configurations
are then taken best bound first, in small batches; each has its bound raised by its ranks'
gradient sync and update (:class:`~llmp.search.bound.Tails`, priced once per class of layouts)
and, if it can still make the answer, is checked (rules, then memory) and composed
(:func:`engine.evaluate_rows`), until

* the next bound is strictly worse than the ``top``-th best objective found (every later
  configuration is at least as bad, so none can enter the ranking, ties included), and
* every remaining configuration's best case is strictly dominated on the Pareto axes by a
  configuration already composed (so none can be on the front, nor remove a point from it:
  whatever it dominates, that configuration dominates too).

What is left is *pruned*: not checked, not composed, and not counted among the feasible or the
dropped. The ranking and the front equal the exhaustive search's (``tests/search/test_prune.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.dsl.spec import Spec
from llmp.search import engine, rank
from llmp.search.bound import Tails, bounds
from llmp.search.rank import Objective
from llmp.search.space import Grid

BATCH = 8
"""Configurations checked and composed per round (a round past the answer costs at most this)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Pruned:
    """What the branch and bound composed, and what it left out."""

    values: dict[str, np.ndarray]
    """Columns as :func:`engine.evaluate_grid` returns them (NaN where not composed)."""
    reasons: np.ndarray
    """Per configuration: why it cannot run ("" if it can, or was not checked)."""
    pruned: np.ndarray
    """Per configuration: left out by the bound (not composed, and if not checked, no reason)."""
    checked: np.ndarray
    """Per configuration: its rules were checked."""
    bound_s: np.ndarray
    """Per configuration: the lower bound on its step time (0 where none is known)."""


def search(spec: Spec, grid: Grid, *, objective: Objective, top: int, max_memory: float | None,
           gpus: np.ndarray, tokens: np.ndarray, gpu_hour_price: float, pareto_x: str | None,
           calibration: Any = None, progress: engine.Progress | None = None) -> Pruned:
    """Check and compose the configurations of ``grid`` that can reach the ``top`` best by
    ``objective`` or the Pareto front of step time against ``pareto_x`` (``gpus`` or ``cost``;
    None: the ranking only)."""
    reasons = grid.reasons()
    values = engine.empty_values(grid.size)
    rows = np.flatnonzero(reasons == "")
    found_bounds = bounds(spec, grid, rows, calibration)
    initial = found_bounds.step
    bound = initial.copy()
    tails = Tails(spec, grid, rows, found_bounds, calibration)
    limit = engine.memory_limit(spec, grid, max_memory)

    def badness(t: np.ndarray, i: np.ndarray) -> np.ndarray:
        """The objective at step time ``t`` for rows ``i``, oriented so that lower is better."""
        with np.errstate(divide="ignore"):
            per_s = tokens[i] / t
        if objective is Objective.TOKENS_PER_S:
            return -per_s
        if objective is Objective.COST:
            return rank.cost(gpus[i], per_s, gpu_hour_price)
        return t

    def x_of(t: np.ndarray, i: np.ndarray) -> np.ndarray:
        if pareto_x == "gpus":
            return gpus[i].astype(float)
        with np.errstate(divide="ignore"):
            return rank.cost(gpus[i], tokens[i] / t, gpu_hour_price)

    order = rows[np.argsort(badness(initial[rows], rows), kind="stable")]
    todo = np.ones(grid.size, dtype=bool)
    checked = np.zeros(grid.size, dtype=bool)
    done = 0

    def run(batch: np.ndarray, threshold: float | None) -> None:
        nonlocal done

        def skip(j: int, t: float) -> bool:
            i = batch[j : j + 1]
            bound[i] = max(bound[i[0]], t)
            return threshold is not None and bool(badness(bound[i], i)[0] > threshold)

        sub = grid.take(batch)
        out, why, skipped = engine.evaluate_rows(spec, sub, np.arange(sub.size), limit[batch], calibration, skip)
        reasons[batch] = why
        for k, column in values.items():
            column[batch] = out[k]
        todo[batch[~skipped]] = False
        checked[batch] = True
        done += len(batch)
        if progress is not None:
            progress(done, len(rows))

    def good() -> np.ndarray:
        return np.flatnonzero(values["feasible"])

    # Phase 1: the ranking, best first bound first (``order`` sorts the first bounds, so once a
    # batch's first bound is past the threshold every later one is too).
    start = 0
    while start < len(order):
        found = good()
        threshold = np.inf
        if len(found) >= top:
            threshold = float(np.partition(badness(values["step_time_s"][found], found), top - 1)[top - 1])
        batch = order[start:start + BATCH]
        batch = batch[badness(initial[batch], batch) <= threshold]
        if len(batch) == 0:
            break
        if threshold < np.inf:  # (before the ranking is full every configuration is checked)
            tails.refine(bound, batch)
            batch = batch[badness(bound[batch], batch) <= threshold]
        if len(batch):
            run(batch, threshold)
        start += BATCH
    # Phase 2: whatever might still be on the Pareto front.
    def still_open(i: np.ndarray) -> np.ndarray:
        """Rows ``i`` whose best case no configuration composed so far strictly dominates."""
        found = good()
        t_found = values["step_time_s"][found]
        x_found = x_of(t_found, found)
        by_x = np.argsort(x_found, kind="stable")
        stair = np.minimum.accumulate(t_found[by_x]) if len(found) else np.zeros(0)
        reach = np.searchsorted(x_found[by_x], x_of(bound[i], i), side="right")
        best_t = np.where(reach > 0, stair[np.maximum(reach - 1, 0)] if len(stair) else np.inf, np.inf)
        return ~(best_t < bound[i])

    while pareto_x is not None:
        left = np.flatnonzero(todo & (reasons == ""))
        open_rows = left[still_open(left)]
        if len(open_rows) == 0:
            break
        batch = open_rows[np.argsort(bound[open_rows], kind="stable")][:BATCH]
        tails.refine(bound, batch)
        batch = batch[still_open(batch)]
        if len(batch):
            run(batch, None)
    pruned = todo & (reasons == "")
    return Pruned(values=values, reasons=reasons, pruned=pruned, checked=checked, bound_s=bound)
