"""Megatron's microbatch group on generated layouts: the default group is pp, and every group
Megatron accepts runs each task once without deadlock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.compose.schedule import Kind, plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.spec.spec import Schedule


@given(st.sampled_from([2, 4, 8]), st.sampled_from([2, 3, 4]), st.integers(1, 6))
def test_the_default_group_is_pp(pp, vp, groups):
    m = pp * groups
    assert plan(Schedule.INTERLEAVED, pp, vp, m, pp) == plan(Schedule.INTERLEAVED, pp, vp, m)


@settings(max_examples=60)
@given(st.sampled_from([2, 3, 4]), st.sampled_from([2, 3]), st.data())
def test_every_group_megatron_accepts_runs_each_task_once_without_deadlock(pp, vp, data):
    group = data.draw(st.integers(pp, 3 * pp))
    m = data.draw(st.integers(group, 4 * group).filter(lambda m: m % group == 0 or m % group >= pp))
    p = plan(Schedule.INTERLEAVED, pp, vp, m, group)
    assert sorted(zip(p.chunk, p.microbatch, (k is Kind.F for k in p.kind))) == sorted(
        (g, j, f) for g in range(pp * vp) for j in range(m) for f in (True, False))
    tl = simulate(p, uniform_durations(p, [1.0] * (pp * vp), [2.0] * (pp * vp)))
    assert max(tl.rank_end) >= m * vp * 3.0  # no rank works faster than its own work
