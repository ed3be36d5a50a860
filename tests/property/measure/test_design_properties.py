"""The sampling design on generated scales: scaled ranges scale the work caps only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.measure import design


@given(st.sampled_from(sorted(design.RANGES)), st.floats(min_value=1e-4, max_value=10))
def test_scaled_ranges_scale_the_work_caps_only(kind, factor):
    base = design.RANGES[kind]
    scaled = base.scaled(factor)
    assert scaled.max_flops == pytest.approx(base.max_flops * factor)
    assert scaled.max_bytes == pytest.approx(base.max_bytes * factor)
    assert scaled.max_params == max(4096, int(base.max_params * factor))
    assert (scaled.hidden, scaled.tokens, scaled.tp, scaled.vocab) == (base.hidden, base.tokens, base.tp, base.vocab)
