"""The host thread on generated op sequences: the closed form of a repeated group is the max-plus
recurrence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.compose.overlap import _COMPUTE, _run

seconds = st.floats(min_value=0.0, max_value=1e-3, allow_nan=False)


def _replay(h: list[float], d: list[float], repeat: int) -> float:
    """When the device finishes ``repeat`` copies of ops issued in turn by the host (``h`` seconds
    each) and run in turn by the device (``d`` each), each op starting once issued and once the
    previous op is done: the recurrence itself, op by op."""
    host = device = 0.0
    for _ in range(repeat):
        for hi, di in zip(h, d):
            host += hi
            device = max(device, host) + di
    return device


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(seconds, seconds), min_size=1, max_size=12), st.integers(1, 40))
def test_the_closed_form_of_a_repeated_group_is_the_recurrence(ops, repeat):
    h = [a for a, _ in ops]
    d = [b for _, b in ops]
    static = (tuple(1 for _ in ops), tuple((_COMPUTE, j, "gemm", -1, hj, j) for j, hj in enumerate(h)))
    run = _run(static, d, repeat, 1.0, 0.0)
    expected = _replay(h, d, repeat) if any(h) else repeat * sum(d)
    assert run.latency == pytest.approx(expected, rel=1e-9, abs=1e-15)
    # a pass is never faster than either stream alone, nor slower than both in series
    assert max(run.host, run.device) * (1 - 1e-12) <= run.latency <= (run.host + run.device) * (1 + 1e-12)
