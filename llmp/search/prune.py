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
dropped. The ranking and the front equal the exhaustive search's (``tests/property/search/test_prune_properties.py``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.search import engine, rank
from llmp.search.bound import Tails, bounds
from llmp.search.rank import Objective
from llmp.search.space import Grid
from llmp.spec.spec import Spec

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


@dataclass(frozen=True, kw_only=True, slots=True)
class _Goal:
    """What the search ranks by and plots the front against, as functions of step time per row."""

    objective: Objective
    gpus: np.ndarray
    tokens: np.ndarray
    gpu_hour_price: float
    pareto_x: str | None

    def badness(self, t: np.ndarray, i: np.ndarray) -> np.ndarray:
        """The objective at step time ``t`` for rows ``i``, oriented so that lower is better."""
        with np.errstate(divide="ignore"):
            per_s = self.tokens[i] / t
        if self.objective is Objective.TOKENS_PER_S:
            return -per_s
        if self.objective is Objective.COST:
            return rank.cost(self.gpus[i], per_s, self.gpu_hour_price)
        return t

    def x_of(self, t: np.ndarray, i: np.ndarray) -> np.ndarray:
        if self.pareto_x == "gpus":
            return self.gpus[i].astype(float)
        with np.errstate(divide="ignore"):
            return rank.cost(self.gpus[i], self.tokens[i] / t, self.gpu_hour_price)


class _Search:
    """The branch and bound's working state: the columns composed so far, each row's bound (raised
    as its tail is priced), and which rows are still to do. :meth:`ranking` and :meth:`front` are
    its two phases."""

    def __init__(self, spec: Spec, grid: Grid, goal: _Goal, top: int, max_memory: float | None,
                 calibration: Any, progress: engine.Progress | None) -> None:
        self.spec, self.grid, self.goal, self.top = spec, grid, goal, top
        self.calibration, self.progress = calibration, progress
        self.reasons = grid.reasons()
        self.values = engine.empty_values(grid.size)
        self.rows = np.flatnonzero(self.reasons == "")
        found_bounds = bounds(spec, grid, self.rows, calibration)
        self.bound = found_bounds.step.copy()
        self.tails = Tails(spec, grid, self.rows, found_bounds, calibration)
        self.limit = engine.memory_limit(spec, grid, max_memory)
        self.todo = np.ones(grid.size, dtype=bool)
        self.checked = np.zeros(grid.size, dtype=bool)
        self.done = 0

    def run(self, batch: np.ndarray, threshold: float | None) -> None:
        """Check and compose ``batch``, skipping a row whose raised bound is past ``threshold``."""
        bound, badness = self.bound, self.goal.badness

        def skip(j: int, t: float) -> bool:
            i = batch[j : j + 1]
            bound[i] = max(bound[i[0]], t)
            return threshold is not None and bool(badness(bound[i], i)[0] > threshold)

        sub = self.grid.take(batch)
        out, why, skipped = engine.evaluate_rows(self.spec, sub, np.arange(sub.size), self.limit[batch],
                                                 self.calibration, skip)
        self.reasons[batch] = why
        for k, column in self.values.items():
            column[batch] = out[k]
        self.todo[batch[~skipped]] = False
        self.checked[batch] = True
        self.done += len(batch)
        if self.progress is not None:
            self.progress(self.done, len(self.rows))

    def good(self) -> np.ndarray:
        return np.flatnonzero(self.values["feasible"])

    def threshold(self) -> float:
        """The ``top``-th best objective composed so far (a configuration must beat or tie it)."""
        found = self.good()
        if len(found) < self.top:
            return np.inf
        return float(np.partition(self.goal.badness(self.values["step_time_s"][found], found),
                                  self.top - 1)[self.top - 1])

    def ranking(self) -> None:
        """Phase 1: the ranking, best bound first. A configuration taken from the queue has its
        bound raised by its tail (Tails); one that rose goes back, the rest are checked and
        composed in batches. Once the best bound left is past the threshold every other one is too."""
        rows, bound, badness = self.rows, self.bound, self.goal.badness
        key = np.full(self.grid.size, np.inf)
        key[rows] = badness(bound[rows], rows)
        queue = list(zip(key[rows].tolist(), rows.tolist()))
        heapq.heapify(queue)
        cutoff = self.threshold()
        taken: list[int] = []
        while queue:
            least, i = queue[0]
            if least > cutoff:
                if not taken:
                    break
            else:
                heapq.heappop(queue)
                raised = self.tails.refine(bound, (i,))
                if len(raised):
                    key[raised] = badness(bound[raised], raised)
                if key[i] > least:
                    heapq.heappush(queue, (float(key[i]), i))
                    continue
                taken.append(i)
                if len(taken) < BATCH and queue:
                    continue
            self.run(np.array(taken), cutoff)
            taken = []
            cutoff = self.threshold()

    def still_open(self, i: np.ndarray) -> np.ndarray:
        """Rows ``i`` whose best case no configuration composed so far strictly dominates."""
        found = self.good()
        t_found = self.values["step_time_s"][found]
        x_found = self.goal.x_of(t_found, found)
        by_x = np.argsort(x_found, kind="stable")
        stair = np.minimum.accumulate(t_found[by_x]) if len(found) else np.zeros(0)
        reach = np.searchsorted(x_found[by_x], self.goal.x_of(self.bound[i], i), side="right")
        best_t = np.where(reach > 0, stair[np.maximum(reach - 1, 0)] if len(stair) else np.inf, np.inf)
        return ~(best_t < self.bound[i])

    def front(self) -> None:
        """Phase 2: whatever might still be on the Pareto front."""
        while self.goal.pareto_x is not None:
            left = np.flatnonzero(self.todo & (self.reasons == ""))
            open_rows = left[self.still_open(left)]
            if len(open_rows) == 0:
                break
            batch = open_rows[np.argsort(self.bound[open_rows], kind="stable")][:BATCH]
            self.tails.refine(self.bound, batch)
            batch = batch[self.still_open(batch)]
            if len(batch):
                self.run(batch, None)


def search(spec: Spec, grid: Grid, *, objective: Objective, top: int, max_memory: float | None,
           gpus: np.ndarray, tokens: np.ndarray, gpu_hour_price: float, pareto_x: str | None,
           calibration: Any = None, progress: engine.Progress | None = None) -> Pruned:
    """Check and compose the configurations of ``grid`` that can reach the ``top`` best by
    ``objective`` or the Pareto front of step time against ``pareto_x`` (``gpus`` or ``cost``;
    None: the ranking only)."""
    goal = _Goal(objective=objective, gpus=gpus, tokens=tokens, gpu_hour_price=gpu_hour_price, pareto_x=pareto_x)
    s = _Search(spec, grid, goal, top, max_memory, calibration, progress)
    s.ranking()
    s.front()
    pruned = s.todo & (s.reasons == "")
    return Pruned(values=s.values, reasons=s.reasons, pruned=pruned, checked=s.checked, bound_s=s.bound)
