"""The calibration fit on generated steps: an overhead reaches a shorter step in proportion."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.compose import posterior


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 10.0), st.floats(0.1, 50.0))
def test_an_overhead_reaches_a_shorter_step_in_proportion(step, t_ref):
    reach = float(posterior.overhead_reach(step, t_ref))
    assert 0.0 < reach <= 1.0
    assert reach == (1.0 if step >= t_ref else pytest.approx(step / t_ref))
