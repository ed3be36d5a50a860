"""Estimating the band's composition term on measured steps (``benchmarks/bands.py``, which ships
``composition_term.json``): the widths below and above that make the band hold the published runs
at its level, each source weighing the same.

Kept apart from :mod:`~llmp.compose.band` because a prediction only reads the shipped term; this
is the offline fit that writes it, run on the validation rows' zero-shot draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llmp.compose.band import LEVEL, CompositionTerm, two_piece
from llmp.errors import InputError


@dataclass(frozen=True, kw_only=True, slots=True)
class Observed:
    """One measured step with its zero-shot prediction's draws, for :func:`estimate_term`."""

    point_s: float
    measured_s: float
    log_draws: np.ndarray
    """``Band.log_draws`` of its prediction (the ops' errors only)."""
    term_draws: np.ndarray
    """``Band.term_draws``: where the composition term will be drawn from."""
    source: str
    group: str
    """One stack on one cluster (e.g. source, GPU and stack): the unit of ``within``."""

    def bounds(self, below: float, above: float, level: float) -> tuple[float, float]:
        """The log band for a composition term of these widths."""
        log_y = self.log_draws + two_piece(self.term_draws, below, above)
        lo, hi = np.quantile(log_y, [(1 - level) / 2, (1 + level) / 2])
        return float(lo), float(hi)

    def inside(self, term: CompositionTerm, level: float) -> bool:
        lo, hi = self.bounds(term.below, term.above, level)
        return lo <= math.log(self.measured_s) <= hi


def _needed(row: Observed, side: str, other: float, level: float, top: float = 8.0) -> float:
    """The least width on ``side`` that brings the row's measurement inside (``inf``: none up to ``top``)."""
    y = math.log(row.measured_s)

    def ok(w: float) -> bool:
        lo, hi = row.bounds(other, w, level) if side == "above" else row.bounds(w, other, level)
        return y <= hi if side == "above" else y >= lo

    if ok(0.0):
        return 0.0
    if not ok(top):
        return math.inf
    a, b = 0.0, top
    while b - a > 1e-4:
        mid = (a + b) / 2
        a, b = (a, mid) if ok(mid) else (mid, b)
    return b


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][min(int(np.searchsorted(cum, q - 1e-12)), len(values) - 1)])


def estimate_term(rows: Sequence[Observed], *, level: float = LEVEL, source: str) -> CompositionTerm:
    """The composition term that makes the band hold ``rows`` at ``level``, each tail missing at
    most ``(1 - level) / 2`` of them, with every source weighing the same (a source with two
    hundred runs of one stack must not set the band of every other stack). Widths are found per
    tail (the upper given the lower, twice over), each the weighted quantile of the least width
    every row needs. ``within``: the median over stacks-on-a-cluster (``Observed.group``, three
    runs or more) of the spread of log(measured / point) around the group's own mean.
    """
    if not rows:
        raise InputError("no measured steps to estimate the composition term on")
    count: dict[str, int] = {}
    for r in rows:
        count[r.source] = count.get(r.source, 0) + 1
    weights = np.asarray([1.0 / count[r.source] for r in rows])
    tail = (1 - level) / 2
    below = above = 0.0
    for _ in range(2):
        above = _weighted_quantile(np.asarray([_needed(r, "above", below, level) for r in rows]), weights, 1 - tail)
        below = _weighted_quantile(np.asarray([_needed(r, "below", above, level) for r in rows]), weights, 1 - tail)
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(math.log(r.measured_s / r.point_s))
    spreads = [float(np.std(v, ddof=1)) for v in groups.values() if len(v) >= 3]
    within = float(np.median(spreads)) if spreads else 0.0
    if not (math.isfinite(below) and math.isfinite(above)):
        raise InputError("the composition term would need to be unbounded to hold these measurements",
                         hint="some measurement lies more than a factor e^8 from its prediction: check its row")
    return CompositionTerm(below=below, above=above, within=within, source=source,
                           sources=tuple(sorted(count)))
