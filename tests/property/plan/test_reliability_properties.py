"""The run as it really goes, on generated GPU counts, MTTFs and restarts: more GPUs fail more
often, Daly's interval minimises the expected wall time and refines Young's, and failures and
checkpoints only add time."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from llmp.planning.reliability import FailureModel, daly_interval, expected_wall_s, goodput, young_interval

seconds = st.floats(min_value=1.0, max_value=3600.0)
mttfs = st.floats(min_value=600.0, max_value=30 * 86400.0)


@given(st.integers(1, 2**17), st.integers(1, 2**17))
def test_more_gpus_fail_more_often(a, b):
    model = FailureModel.published()
    small, large = sorted((a, b))
    assert model.failures_per_day(large)[0] >= model.failures_per_day(small)[0]
    assert model.mttf_s(large)[0] <= model.mttf_s(small)[0]


@given(seconds, mttfs)
def test_dalys_interval_minimises_the_expected_wall_time(delta, mttf):
    """Daly's interval is a higher-order estimate of the minimiser: within 0.1% of the best wall
    time on a fine grid of intervals around it, for checkpoints up to half the MTTF (a run whose
    checkpoint takes longer barely progresses at all)."""
    assume(delta <= mttf / 2)
    work, restart = 1e7, 300.0
    best = daly_interval(delta, mttf)
    at_best = expected_wall_s(work, best, delta, restart, mttf)
    grid = [best * 2 ** (k / 16) for k in range(-48, 49)]
    assert at_best <= min(expected_wall_s(work, t, delta, restart, mttf) for t in grid) * (1 + 1e-3)


@given(seconds, mttfs)
def test_daly_refines_young_and_beats_it(delta, mttf):
    work, restart = 1e7, 300.0
    young, daly = young_interval(delta, mttf), daly_interval(delta, mttf)
    assert expected_wall_s(work, daly, delta, restart, mttf) <= expected_wall_s(work, young, delta, restart, mttf) * (
        1 + 1e-9)
    if delta < 0.01 * mttf:  # first order in delta / M: the two agree when checkpoints are cheap
        assert daly == pytest.approx(young, rel=0.1)


@given(seconds, mttfs, st.floats(0.0, 3600.0))
def test_failures_and_checkpoints_only_add_time(delta, mttf, restart):
    work = 1e6
    wall = expected_wall_s(work, daly_interval(delta, mttf), delta, restart, mttf)
    assert wall >= work
    run = goodput((work, 0.9 * work, 1.1 * work), gpus=1024, failures=FailureModel.published(), checkpoint_s=delta,
                  restart_s=restart)
    point, low, high = run.ettr
    assert 0 < low <= point * (1 + 1e-12) and point <= high * (1 + 1e-12) and high <= 1 + 1e-12
