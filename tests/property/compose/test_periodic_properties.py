"""The extrapolated rank ends (llmp.compose.periodic) on generated layouts, task times and kept
nodes: they equal the whole event timeline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from llmp.analytic.schedules import TABLE, entry
from llmp.compose import periodic
from llmp.compose.schedule import plan
from llmp.compose.timeline import end_times, simulate, uniform_durations
from llmp.spec.spec import Schedule


@st.composite
def layouts(draw: st.DrawFn, most: int = 48) -> tuple[Schedule, int, int, int, int | None]:
    """A valid (schedule, pp, vp, microbatches, group) of every schedule in the table."""
    schedule = draw(st.sampled_from(list(TABLE)))
    group = None
    if schedule is Schedule.INTERLEAVED:
        pp, vp = draw(st.integers(2, 5)), draw(st.integers(2, 4))
        group = draw(st.sampled_from([None, pp, pp + 1, pp + 3]))
    elif schedule is Schedule.ZB_V:
        pp, vp = draw(st.integers(1, 5)), 2
    elif schedule is Schedule.DUALPIPE:
        pp, vp = draw(st.sampled_from([2, 4, 6])), 1
    else:
        pp, vp = draw(st.integers(1, 6)), 1
    m = draw(st.integers(1, most))
    assume(entry(schedule).requires(pp, vp, m, group) is None)
    return schedule, pp, vp, m, group


def _chunk_times(draw: st.DrawFn, chunks: int) -> list[float]:
    """Uneven stages: a middle time, with the first and last chunk (embedding, head) and a few
    others (an uneven split, a slow link's sends) set apart."""
    middle = draw(st.floats(0.2, 5))
    out = [middle] * chunks
    for g in [*draw(st.lists(st.integers(0, chunks - 1), max_size=3)), 0, chunks - 1]:
        out[g] = middle * draw(st.floats(0.5, 2))
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[object, list[float]]:
    schedule, pp, vp, m, group = draw(layouts())
    p = plan(schedule, pp, vp, m, group)
    chunks = pp * vp
    f, b = _chunk_times(draw, chunks), _chunk_times(draw, chunks)
    w = _chunk_times(draw, chunks) if p.splits_w else None
    return p, uniform_durations(p, f, b, w)


@settings(max_examples=60, deadline=None)
@given(cases())
def test_rank_ends_equal_the_whole_timeline(case):
    p, durations = case
    want = simulate(p, durations).rank_end
    assert periodic.rank_end(p, durations) == pytest.approx(want, rel=1e-11)


@settings(max_examples=60, deadline=None)
@given(layouts(), st.integers(0, 2**32 - 1))
def test_any_task_times_and_columns_equal_the_whole_timeline(layout, seed):
    # Every duration on its own (sends of any length): slow to settle, so both paths run.
    p = plan(*layout)
    rng = np.random.default_rng(seed)
    columns = [rng.uniform(0.1, 3, 5) for _ in p.keys]
    columns[0] = np.float64(1.5)  # a number among the arrays broadcasts
    want = simulate(p, columns, np.maximum).rank_end
    got = periodic.rank_end(p, columns, arrays=True)
    for a, b in zip(got, want):
        assert a.shape == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-11)
    for col in range(5):
        one = [float(np.broadcast_to(x, (5,))[col]) for x in columns]
        assert periodic.rank_end(p, one) == pytest.approx([float(x[col]) for x in want], rel=1e-11)


@settings(max_examples=60, deadline=None)
@given(layouts(), st.data())
def test_end_times_are_the_timelines_bits_for_any_nodes_kept(layout, data):
    # Kept nodes in any order, some twice: rows of their own, the waves around them sliced or
    # scattered, and the rows of the others reused.
    p = plan(*layout)
    n = len(p.rank)
    keep = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(n, 40)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    durations = rng.uniform(0.1, 3, (len(p.keys), 3))
    want = simulate(p, list(durations), np.maximum).end
    got = end_times(p, durations, keep)
    assert got.shape == (len(keep), 3)
    assert (got == want[keep]).all()
