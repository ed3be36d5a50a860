"""llmp calibrate --suggest on generated elasticities: each pick adds what the posterior determinant
says."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llmp.calibrate.suggest import design

elasticity = st.floats(min_value=-1.5, max_value=1.5, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 12), st.just(4)), elements=elasticity),
       st.floats(0.05, 0.5), st.integers(1, 6))
def test_each_pick_adds_what_the_posterior_determinant_says(rows, noise, n):
    precision = np.diag([4.0, 9.0, 2.0, 1.0])
    chosen, gains, cov = design(rows, precision, noise, n)
    assert len(chosen) == len(set(chosen)) == min(n, len(rows))
    after = precision.copy()
    before = np.linalg.slogdet(after)[1]
    for i, gain in zip(chosen, gains):
        after = after + np.outer(rows[i], rows[i]) / noise**2
        now = np.linalg.slogdet(after)[1]
        assert gain == pytest.approx(now - before, abs=1e-6)
        before = now
    assert np.allclose(cov, np.linalg.inv(after), atol=1e-8)
    # greedy: no single unpicked run would have added more than the first pick did
    first = max(np.log1p(r @ np.linalg.inv(precision) @ r / noise**2) for r in rows)
    assert gains[0] == pytest.approx(first, rel=1e-9)
