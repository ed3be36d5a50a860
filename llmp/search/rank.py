"""Objectives, ranking and the Pareto front of a search.

Cost is stated per work done, so configurations with different batch sizes compare fairly:
GPU-hours per 10^9 trained tokens, times ``gpu_hour_price`` (default 1.0, so the number reads as
GPU-hours; pass a price per GPU-hour to get money).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

TOKENS_PER_COST_UNIT = 1e9
COST_DEFINITION = ("cost = GPUs x seconds per 10^9 tokens / 3600 x --gpu-hour-price "
                   "(GPU-hours per billion tokens at price 1.0)")


class Objective(StrEnum):
    STEP_TIME = "step_time"
    """Seconds per optimizer step (lower is better)."""
    TOKENS_PER_S = "tokens_per_s"
    """Training throughput (higher is better)."""
    COST = "cost"
    """GPU-hours per 10^9 tokens times the price (lower is better)."""

    @property
    def maximise(self) -> bool:
        return self is Objective.TOKENS_PER_S


def cost(gpus: np.ndarray, tokens_per_s: np.ndarray, price: float) -> np.ndarray:
    """GPU-hours per 10^9 tokens times ``price``."""
    return gpus * (TOKENS_PER_COST_UNIT / tokens_per_s) / 3600.0 * price


def order(values: np.ndarray, tie: np.ndarray, objective: Objective) -> np.ndarray:
    """Indices from best to worst by ``values`` (``tie``, then position, breaks ties)."""
    key = -values if objective.maximise else values
    return np.lexsort((np.arange(len(values)), tie, key))


def pareto(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points no other point dominates, minimising both ``x`` and ``y``, by ``x``.

    A point dominates another when it is no worse in both and better in one; equal points do not
    dominate each other, so duplicates on the front are all kept.
    """
    idx = np.lexsort((y, x))
    front: list[int] = []
    best_y = np.inf
    for i in idx:
        if y[i] < best_y:
            front.append(int(i))
            best_y = y[i]
        elif front and y[i] == y[front[-1]] and x[i] == x[front[-1]]:
            front.append(int(i))
    return np.asarray(front, dtype=int)
