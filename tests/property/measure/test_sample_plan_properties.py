"""llmp sample --per-operator K on generated families and K: the per-operator prefix holds K of
every stratum."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.measure import design


@given(family=st.sampled_from(design.FAMILIES), k=st.integers(1, 6))
@settings(max_examples=25, deadline=None)
def test_per_operator_prefix_holds_k_of_every_stratum(family: str, k: int) -> None:
    """k cases of every (operator, pass) the design draws, in the stratum llmp fit counts, and no
    case past the one that completes the last stratum."""
    dtypes = design.DEFAULT_DTYPES["cuda"]
    prefix = design.per_stratum_prefix(family, design.RANGES["cuda"], dtypes, 0, k)
    drawn = {c.stratum for c in design.per_stratum_prefix(family, design.RANGES["cuda"], dtypes, 0, 40)}
    counts = {s: sum(1 for c in prefix if c.stratum == s) for s in drawn}
    assert min(counts.values()) >= k
    last = prefix[-1].stratum
    assert counts[last] == k  # the last case was needed
