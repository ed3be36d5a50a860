"""search() on generated points: the Pareto front is undominated and dominates the rest."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llmp.search import rank


@given(arrays(float, st.integers(1, 60), elements=st.floats(0, 10)), st.data())
def test_pareto_front_is_undominated_and_dominates_the_rest(x, data):
    y = data.draw(arrays(float, len(x), elements=st.floats(0, 10)))
    front = set(rank.pareto(x, y).tolist())
    for i in range(len(x)):
        dominated = np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i])))
        assert (i in front) == (not dominated)
