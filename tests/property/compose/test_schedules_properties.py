"""Schedules as table entries, on generated layouts and times: every entry runs each task once in
dependency order, the previous timelines and compositions are kept, and the zero-bubble and DualPipe
schedules keep what their papers say in flight."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import reference_schedule as reference
from compose_helpers import VALID_LAYOUTS as VALID
from compose_helpers import uniform_timeline as timeline
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import specs

from llmp.analytic.graph import decompose
from llmp.analytic.pricing import price
from llmp.analytic.schedules import entry
from llmp.analytic.structure import structure_of
from llmp.compose.closed_form import pipeline_time
from llmp.compose.overlap import OverlapRules
from llmp.compose.schedule import Kind, in_flight, plan
from llmp.compose.step import compose
from llmp.compose.timeline import simulate, uniform_durations
from llmp.spec.spec import Schedule

TIMES = st.floats(0.1, 10)


@settings(max_examples=80)
@given(st.sampled_from(list(Schedule)), st.data())
def test_every_entry_runs_each_task_once_on_its_rank_in_dependency_order(schedule, data):
    pp, vp, m = data.draw(st.sampled_from(VALID[schedule]))
    chunks = pp * vp
    f, b, w = (data.draw(st.lists(TIMES, min_size=chunks, max_size=chunks)) for _ in range(3))
    p, tl = timeline(schedule, pp, vp, m, f, b, w)
    runs: Counter = Counter()
    for i, k in enumerate(p.kind):
        for t in {Kind.F: "F", Kind.B: "B", Kind.W: "W", Kind.BW: "BW", Kind.FB: "F", Kind.WAIT: ""}[k]:
            runs[(t, p.chunk[i], p.microbatch[i])] += 1
        if k is Kind.FB:
            g, j = p.pair[i]
            runs[("B", g, j)] += 1
            runs[("W", g, j)] += 1
        if k is not Kind.WAIT:
            assert p.chunk[i] in p.placement[p.rank[i]]
    assert set(runs.values()) == {1}
    assert {key for key in runs if key[0] != "W"} == {(t, g, j) for t in "FB" for g in range(chunks) for j in range(m)}
    assert {key for key in runs if key[0] == "W"} == {("W", g, j) for g in range(chunks) for j in range(m)}
    assert p.splits_w == entry(schedule).splits_w
    for i, d in enumerate(p.dep):
        if d >= 0:
            assert tl.start[i] >= tl.end[d] - 1e-12
    for r in range(pp):
        spans = sorted((tl.start[i], tl.end[i]) for i in range(len(p.rank)) if p.rank[i] == r)
        assert all(a[1] <= b_[0] + 1e-12 for a, b_ in itertools.pairwise(spans))


@settings(max_examples=60)
@given(st.sampled_from([Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED]), st.data())
def test_gpipe_1f1b_and_interleaved_keep_their_previous_timelines(schedule, data):
    pp, vp, m = data.draw(st.sampled_from(VALID[schedule]))
    chunks = pp * vp
    f, b = (data.draw(st.lists(TIMES, min_size=chunks, max_size=chunks)) for _ in range(2))
    old = reference.plan(schedule, pp, vp, m)
    new = plan(schedule, pp, vp, m)
    was = reference.simulate(old, f, b)
    now = simulate(new, uniform_durations(new, f, b))
    assert now.rank_end == was.rank_end
    before = {(g, j, fw): (s, e)
              for g, j, fw, s, e in zip(old.chunk, old.microbatch, old.forward, was.start, was.end)}
    after = {(g, j, k is Kind.F): (s, e)
             for g, j, k, s, e in zip(new.chunk, new.microbatch, new.kind, now.start, now.end)}
    assert after == before
    layers = tuple(data.draw(st.lists(st.integers(0, 6), min_size=chunks, max_size=chunks)))
    assert new.peak_in_flight == old.peak_in_flight
    assert in_flight(new, layers) == reference.layers_in_flight(old, layers)


@settings(max_examples=40, deadline=None)
# The oracle writes out GPipe, 1F1B and interleaved 1F1B only (the generator draws every schedule).
@given(specs().filter(lambda s: s.parallel.schedule in (Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED)))
def test_composed_steps_of_random_specs_equal_the_previous_composition(spec):
    st_ = structure_of(spec)
    graph = decompose(spec, st_)
    times = list(price(graph, spec).time)
    rules = OverlapRules.of(spec)
    step = compose(graph, times, rules, spec.parallel.schedule)
    total, breakdown = reference.step(graph, times, rules, spec.parallel.schedule)
    # Equal to float rounding: the rank ends extrapolate repeating rounds (llmp.compose.periodic).
    assert step.step_time == pytest.approx(total, rel=1e-12)
    assert step.breakdown == pytest.approx(breakdown, rel=1e-12, abs=1e-12 * total)


@given(st.sampled_from([2, 3, 4, 8]), st.integers(1, 32))
def test_zb_h1_keeps_pp_microbatches_in_flight_like_1f1b(pp, m):
    # Rank r holds pp - r whole microbatches and r waiting for their W: never more than 1F1B's rank 0.
    p, layers = plan(Schedule.ZB_H1, pp, 1, m), (1,) * pp
    whole = in_flight(p, layers)              # a waiting W keeps nothing: whole microbatches alone
    either = in_flight(p, layers, layers)     # a waiting W keeps all: whole and waiting together
    ones = plan(Schedule.ONE_F_ONE_B, pp, 1, m).peak_in_flight
    for r in range(pp):
        assert whole[r] == ones[r]
        assert either[r] <= min(pp, m)
    assert whole[0] == ones[0]


@settings(max_examples=60)
@given(st.sampled_from([2, 3, 4, 6]), st.sampled_from([2, 3, 4]), TIMES, st.floats(1, 2), st.floats(0.2, 1))
def test_zb_v_closed_form_equals_the_timeline_for_uniform_chunks(pp, groups, f, b_over_f, w_over_b):
    m, b = groups * pp, f * b_over_f
    w = b * w_over_b
    _, tl = timeline(Schedule.ZB_V, pp, 2, m, [f] * 2 * pp, [b] * 2 * pp, [w] * 2 * pp)
    closed = pipeline_time(Schedule.ZB_V, [f] * 3, [b + w] * 3, m, pp, 2, weight=[w] * 3)
    assert closed == pytest.approx(max(tl.rank_end), rel=1e-9)


@given(st.sampled_from([2, 3, 4, 8]), st.integers(1, 4))
def test_zb_v_holds_the_activations_of_1f1b(pp, groups):
    # Rank 0 runs 2 pp chunk forwards (of L / 2pp layers) before its first backward: L layers,
    # 1F1B's pp stage forwards.
    m = groups * pp
    chunk_layers = (3,) * (2 * pp)
    zb = in_flight(plan(Schedule.ZB_V, pp, 2, m), chunk_layers)
    one = in_flight(plan(Schedule.ONE_F_ONE_B, pp, 1, m), (6,) * pp)
    assert max(zb) == one[0] == 6 * min(pp, m)


@given(st.sampled_from([2, 4, 6, 8]), st.integers(1, 3))
def test_dualpipe_holds_pp_plus_1_stages_of_activations(pp, groups):
    # DeepSeek-V3 Table 2: activations PP + 1 (1F1B: PP), counted in stage forwards; every
    # forward-backward pair holds its forward's activations with its backward's.
    m = 2 * pp * groups
    whole = in_flight(plan(Schedule.DUALPIPE, pp, 1, m), (1,) * pp)
    assert max(whole) == whole[0] == pp + 1
