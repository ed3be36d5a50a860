"""The extrapolated rank ends (llmp.compose.periodic) against the whole event timeline."""

from __future__ import annotations

import pytest

from llmp.analytic.schedules import entry
from llmp.compose import periodic
from llmp.compose.schedule import plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.spec.spec import Schedule


@pytest.mark.parametrize("schedule,pp,vp,group", [
    (Schedule.ONE_F_ONE_B, 12, 1, None), (Schedule.INTERLEAVED, 4, 5, None), (Schedule.INTERLEAVED, 4, 2, 6),
    (Schedule.ZB_H1, 8, 1, None), (Schedule.ZB_V, 4, 2, None), (Schedule.DUALPIPE, 8, 1, None)])
def test_every_repeating_schedule_times_a_plan_that_does_not_grow_with_the_microbatches(schedule, pp, vp, group):
    most = set()
    q = entry(schedule).period(pp, group)
    for m in (300 * q, 600 * q):  # plans of m' = m modulo the block's microbatches
        p = plan(schedule, pp, vp, m, group)
        chunks = pp * vp
        durations = uniform_durations(p, [1.0] + [1.1] * (chunks - 2) + [1.4], [2.0] * chunks,
                                      [0.8] * chunks if p.splits_w else None)
        ends, timed = periodic.timed(p, durations)
        assert ends == pytest.approx(simulate(p, durations).rank_end, rel=1e-12)
        most.add(timed)
    assert max(most) < 100 * q


def test_gpipe_runs_two_loops_and_is_timed_whole():
    p = plan(Schedule.GPIPE, 4, 1, 64)
    durations = uniform_durations(p, [1.0] * 4, [2.0] * 4)
    assert periodic.timed(p, durations) == (simulate(p, durations).rank_end, 64)
