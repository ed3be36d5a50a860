"""Pipeline schedules: the timeline, its bubble, and the closed-form makespans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.compose.closed_form import pipeline_time
from llmp.compose.schedule import plan, simulate
from llmp.dsl.spec import Schedule

PP = st.sampled_from([1, 2, 3, 4, 8])


@given(PP, st.integers(1, 32), st.floats(0.1, 10), st.floats(0.1, 10))
def test_1f1b_bubble_share_is_pp_minus_1_over_m_plus_pp_minus_1(pp, m, f, b):
    tl = simulate(plan(Schedule.ONE_F_ONE_B, pp, 1, m), [f] * pp, [b] * pp)
    step = max(tl.rank_end)
    busy = m * (f + b)
    assert (step - busy) / step == pytest.approx((pp - 1) / (m + pp - 1), rel=1e-9, abs=1e-12)


@given(st.sampled_from([2, 4, 8]), st.sampled_from([2, 3, 4]), st.integers(1, 8), st.floats(0.1, 10))
def test_interleaving_divides_the_bubble_by_vp(pp, vp, groups, w):
    m = pp * groups
    tl = simulate(plan(Schedule.INTERLEAVED, pp, vp, m), [w] * (pp * vp), [2 * w] * (pp * vp))
    busy = m * vp * 3 * w
    assert max(tl.rank_end) - busy == pytest.approx((pp - 1) * 3 * w, rel=1e-9)   # (pp-1)/vp of a full stage


@settings(max_examples=50)
@given(st.sampled_from(list(Schedule)), PP, st.integers(1, 4), st.data())
def test_timeline_respects_dependencies_and_runs_one_task_at_a_time(schedule, pp, groups, data):
    vp = data.draw(st.sampled_from([2, 3])) if schedule is Schedule.INTERLEAVED and pp > 1 else 1
    m = pp * groups
    chunks = pp * vp
    f = data.draw(st.lists(st.floats(0.1, 5), min_size=chunks, max_size=chunks))
    b = data.draw(st.lists(st.floats(0.1, 5), min_size=chunks, max_size=chunks))
    p = plan(schedule, pp, vp, m)
    tl = simulate(p, f, b)
    assert len(p.rank) == 2 * m * chunks
    for i, d in enumerate(p.dep):
        if d >= 0:
            assert tl.start[i] >= tl.end[d] - 1e-12
    for r in range(pp):
        spans = sorted((tl.start[i], tl.end[i]) for i in range(len(p.rank)) if p.rank[i] == r)
        assert all(a[1] <= b_[0] + 1e-12 for a, b_ in zip(spans, spans[1:]))


@given(PP, st.integers(1, 16))
def test_in_flight_microbatches_per_schedule(pp, m):
    assert plan(Schedule.GPIPE, pp, 1, m).peak_in_flight == (m,) * pp
    assert plan(Schedule.ONE_F_ONE_B, pp, 1, m).peak_in_flight == tuple(min(pp - r, m) for r in range(pp))


@pytest.mark.parametrize("pp,vp", [(2, 2), (4, 2), (4, 4), (8, 2)])
def test_interleaved_first_rank_holds_korthikanti_share(pp, vp):
    # Korthikanti et al. 2022 §4.2.3: the first stage holds L (1 + (pp-1)/(pp vp)) layers' worth,
    # i.e. pp vp + pp - 1 chunk passes of L / (pp vp) layers.
    p = plan(Schedule.INTERLEAVED, pp, vp, 4 * pp)
    assert p.peak_in_flight[0] == pp * vp + pp - 1


@given(st.sampled_from([Schedule.ONE_F_ONE_B, Schedule.GPIPE, Schedule.INTERLEAVED]), st.sampled_from([2, 4, 8]),
       st.integers(1, 6), st.floats(0.1, 10), st.floats(0.1, 10))
def test_closed_form_equals_the_timeline_for_uniform_stages(schedule, pp, groups, f, b):
    vp = 2 if schedule is Schedule.INTERLEAVED else 1
    m = pp * groups
    tl = simulate(plan(schedule, pp, vp, m), [f] * (pp * vp), [b] * (pp * vp))
    kinds = 2 if pp * vp == 2 else 3
    assert pipeline_time(schedule, [f] * kinds, [b] * kinds, m, pp, vp) == pytest.approx(max(tl.rank_end), rel=1e-12)


@given(st.sampled_from([2, 3, 4, 8]), st.integers(1, 20), st.lists(st.floats(0.1, 10), min_size=6, max_size=6))
def test_gpipe_closed_form_is_exact_for_uneven_first_and_last_stages(pp, m, t):
    f = [t[0]] + [t[1]] * (pp - 2) + [t[2]]
    b = [t[3]] + [t[4]] * (pp - 2) + [t[5]]
    tl = simulate(plan(Schedule.GPIPE, pp, 1, m), f, b)
    kinds = [0, 2] if pp == 2 else [0, 1, 2]
    closed = pipeline_time(Schedule.GPIPE, [t[k] for k in kinds], [t[3 + k] for k in kinds], m, pp, 1)
    assert closed == pytest.approx(max(tl.rank_end), rel=1e-12)


def test_single_stage_is_microbatches_times_work():
    tl = simulate(plan(Schedule.ONE_F_ONE_B, 1, 1, 5), [1.0], [2.0])
    assert max(tl.rank_end) == 15.0 == pipeline_time(Schedule.ONE_F_ONE_B, [1.0], [2.0], 5, 1, 1)
