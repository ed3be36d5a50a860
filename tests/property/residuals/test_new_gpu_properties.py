"""A GPU nobody profiled, on generated seeds and shares: in_test is a seeded share."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.residuals import split


@settings(max_examples=15, deadline=None)
@given(test=st.floats(0.05, 0.95), seed=st.integers(0, 10**6))
def test_in_test_is_a_seeded_share(test, seed):
    keys = [f"gemm:[{i}, {2 * i}]" for i in range(400)]
    held = [split.in_test(k, test, seed) for k in keys]
    assert held == [split.in_test(k, test, seed) for k in keys]
    assert abs(sum(held) / len(keys) - test) < 0.12
