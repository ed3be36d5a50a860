"""Pipeline schedules: the timeline, its bubble, and the closed-form makespans of GPipe and 1F1B."""

from __future__ import annotations

import numpy as np
import pytest
from compose_helpers import chunk_timeline as timeline
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.compose.closed_form import pipeline_time
from llmp.compose.schedule import plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.spec.spec import Schedule

PP = st.sampled_from([1, 2, 3, 4, 8])


@given(PP, st.integers(1, 32), st.floats(0.1, 10), st.floats(0.1, 10))
def test_1f1b_bubble_share_is_pp_minus_1_over_m_plus_pp_minus_1(pp, m, f, b):
    tl = timeline(Schedule.ONE_F_ONE_B, pp, 1, m, f, b)
    step = max(tl.rank_end)
    busy = m * (f + b)
    assert (step - busy) / step == pytest.approx((pp - 1) / (m + pp - 1), rel=1e-9, abs=1e-12)


@given(st.sampled_from([2, 4, 8]), st.sampled_from([2, 3, 4]), st.integers(1, 8), st.floats(0.1, 10))
def test_interleaving_divides_the_bubble_by_vp(pp, vp, groups, w):
    m = pp * groups
    tl = timeline(Schedule.INTERLEAVED, pp, vp, m, w, 2 * w)
    busy = m * vp * 3 * w
    assert max(tl.rank_end) - busy == pytest.approx((pp - 1) * 3 * w, rel=1e-9)   # (pp-1)/vp of a full stage


@given(PP, st.integers(1, 16))
def test_in_flight_microbatches_per_schedule(pp, m):
    assert plan(Schedule.GPIPE, pp, 1, m).peak_in_flight == (m,) * pp
    assert plan(Schedule.ONE_F_ONE_B, pp, 1, m).peak_in_flight == tuple(min(pp - r, m) for r in range(pp))


@given(st.sampled_from([Schedule.ONE_F_ONE_B, Schedule.GPIPE, Schedule.INTERLEAVED]), st.sampled_from([2, 4, 8]),
       st.integers(1, 6), st.floats(0.1, 10), st.floats(0.1, 10))
def test_closed_form_equals_the_timeline_for_uniform_stages(schedule, pp, groups, f, b):
    vp = 2 if schedule is Schedule.INTERLEAVED else 1
    m = pp * groups
    tl = timeline(schedule, pp, vp, m, f, b)
    kinds = 2 if pp * vp == 2 else 3
    assert pipeline_time(schedule, [f] * kinds, [b] * kinds, m, pp, vp) == pytest.approx(max(tl.rank_end), rel=1e-12)


@given(st.sampled_from([2, 3, 4, 8]), st.integers(1, 20), st.lists(st.floats(0.1, 10), min_size=6, max_size=6))
def test_gpipe_closed_form_is_exact_for_uneven_first_and_last_stages(pp, m, t):
    f = [t[0]] + [t[1]] * (pp - 2) + [t[2]]
    b = [t[3]] + [t[4]] * (pp - 2) + [t[5]]
    tl = timeline(Schedule.GPIPE, pp, 1, m, f, b)
    kinds = [0, 2] if pp == 2 else [0, 1, 2]
    closed = pipeline_time(Schedule.GPIPE, [t[k] for k in kinds], [t[3 + k] for k in kinds], m, pp, 1)
    assert closed == pytest.approx(max(tl.rank_end), rel=1e-12)


@settings(max_examples=20)
@given(st.sampled_from([2, 4]), st.integers(1, 8), st.floats(0.1, 10), st.floats(0.1, 10))
def test_array_durations_time_each_column_like_floats(pp, m, f, b):
    p = plan(Schedule.ONE_F_ONE_B, pp, 1, m)
    arrays = simulate(p, uniform_durations(p, [np.array([f, b])] * pp, [np.array([b, f])] * pp), np.maximum)
    for col, (x, y) in enumerate(((f, b), (b, f))):
        one = simulate(p, uniform_durations(p, [x] * pp, [y] * pp))
        assert max(e[col] for e in arrays.rank_end) == pytest.approx(max(one.rank_end), rel=1e-12)


@settings(max_examples=40)
@given(st.sampled_from(list(Schedule)), st.sampled_from([1, 2, 3, 4, 6]), st.sampled_from([1, 2, 3]),
       st.integers(1, 24), st.integers(0, 2**32 - 1))
def test_timing_a_wave_at_a_time_gives_the_node_loop_bit_for_bit(schedule, pp, vp, m, seed):
    """Arrays are timed a wave of independent nodes at a time (``timeline.waves``); every node
    sees the same max and sum as in the float loop, so each column is the float timeline exactly."""
    from llmp.analytic.schedules import entry

    if entry(schedule).requires(pp, vp, m, None):
        return
    p = plan(schedule, pp, vp, m)
    rng = np.random.default_rng(seed)
    draws = [rng.uniform(0.1, 10, 5) for _ in p.keys]
    arrays = simulate(p, draws, np.maximum)
    for col in range(5):
        one = simulate(p, [float(d[col]) for d in draws])
        assert [float(e[col]) for e in arrays.end] == list(one.end)
        assert [float(s[col]) for s in arrays.start] == list(one.start)
        assert [float(e[col]) for e in arrays.rank_end] == [float(e) for e in one.rank_end]
