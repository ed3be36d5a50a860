"""Branch and bound on generated top counts: the pruned search returns what the exhaustive one does
(ranking, times, Pareto front) for every objective and top."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from search_helpers import SMALL
from search_helpers import assert_same_search as _same
from search_helpers import cached_search as _search

from llmp.search import Objective, SearchResult


def _exhaustive_top(gpus: tuple[int, ...], objective: Objective, top: int) -> SearchResult:
    """The exhaustive search's answer for ``top``: its full ranking (composed once per GPU counts
    and objective, the slow part) cut to ``top``; the Pareto front does not depend on ``top``."""
    full = _search(SMALL, gpus, objective, 10**6, True)
    return dataclasses.replace(full, ranked=full.ranked[:top])


# 10-40 s each: in CI's slow step; the default suite keeps the same check on one stack
# (test_pruned_search_equals_the_exhaustive_one_on_a_stack_without_fusion)
@pytest.mark.parametrize("objective", [pytest.param(o, marks=pytest.mark.slow) for o in Objective])
@pytest.mark.parametrize("gpus", [(4,), pytest.param((8,), marks=pytest.mark.slow),
                                  pytest.param((4, 8), marks=pytest.mark.slow)])  # 5-10 s per exhaustive search
@settings(max_examples=6, deadline=None)
@given(top=st.integers(1, 12))
def test_pruned_search_equals_the_exhaustive_one(gpus, objective, top):
    pruned = _search(SMALL, gpus, objective, top, False)
    full = _exhaustive_top(gpus, objective, top)
    _same(pruned, full)
    assert pruned.pruned > 0 or pruned.feasible == full.feasible
    assert full.pruned == 0
