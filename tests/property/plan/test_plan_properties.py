"""A whole run on generated token counts: more tokens take proportionally longer and cost more."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st


@given(st.floats(min_value=1e6, max_value=1e14), st.floats(min_value=1.01, max_value=100.0))
def test_more_tokens_take_proportionally_longer_and_cost_more(on8, tokens, factor):
    a = dataclasses.replace(on8, tokens=tokens)
    b = dataclasses.replace(on8, tokens=tokens * factor)
    for x, y in ((a.days, b.days), (a.gpu_hours, b.gpu_hours), (a.energy_kwh, b.energy_kwh), (a.cost, b.cost)):
        assert all(yi > xi for xi, yi in zip(x, y))
        assert y[0] / x[0] == pytest.approx(factor)
