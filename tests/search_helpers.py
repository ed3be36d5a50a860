"""Helpers that the unit tests of ``llmp.search`` (``tests/unit/search/``) and their properties
(``tests/property/search/``) both use: one home, imported under the name each test module reads.

Import with ``from search_helpers import cached_search as _search`` (pytest puts tests/ on
``sys.path``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import llmp
from llmp.search import Objective, SearchResult, search

# ---- branch and bound (test_prune.py) --------------------------------------------------------

SMALL = Path(__file__).resolve().parent / "fixtures" / "small.llmp"


@cache
def cached_search(path: Path, gpus: tuple[int, ...], objective: Objective, top: int, exhaustive: bool) -> SearchResult:
    return search(llmp.load(path), gpus=gpus, objective=objective, top=top, exhaustive=exhaustive, residuals=None)


def assert_same_search(pruned: SearchResult, full: SearchResult) -> None:
    assert [c.config for c in pruned.ranked] == [c.config for c in full.ranked]
    for a, b in zip(pruned.ranked, full.ranked):
        assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-12)
        assert a.memory_per_gpu_bytes == pytest.approx(b.memory_per_gpu_bytes, rel=1e-12)
    assert [c.config for c in pruned.pareto] == [c.config for c in full.pareto]
