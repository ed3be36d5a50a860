"""Token counts and durations on generated numbers: token suffixes and duration units scale the
number."""

from __future__ import annotations

import math

from hypothesis import assume, given
from hypothesis import strategies as st

from llmp.planning.inputs import (
    DURATION_UNIT,
    MAX_DURATION,
    MAX_TOKENS,
    MIN_DURATION,
    TOKEN_SUFFIX,
    parse_duration,
    parse_tokens,
)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(sorted(TOKEN_SUFFIX)))
def test_token_suffixes_scale_the_number(x, suffix):
    # whole token counts up to 1e15 (MAX_TOKENS)
    assume(x * TOKEN_SUFFIX[suffix] <= MAX_TOKENS)
    assert math.isclose(parse_tokens(f"{x}{suffix}"), x * TOKEN_SUFFIX[suffix], rel_tol=1e-12)


@given(st.floats(min_value=1e-3, max_value=1e4, allow_nan=False), st.sampled_from(sorted(DURATION_UNIT)))
def test_duration_units_scale_the_number(x, unit):
    text = f"{x:.6f}{unit}"
    seconds = float(f"{x:.6f}") * DURATION_UNIT[unit]
    assume(MIN_DURATION <= seconds <= MAX_DURATION)  # a second to a decade
    assert math.isclose(parse_duration(text), seconds, rel_tol=1e-12)
