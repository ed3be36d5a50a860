"""Uneven pipeline stages on generated splits: an explicit equal split gives the default numbers,
the slowest stage sets the pace, in-flight memory weighs each chunk pass, and GPipe's closed form is
exact for any chunk times."""

from __future__ import annotations

import pytest
from compose_helpers import predict
from compose_helpers import uneven_model as _model
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import make_spec, specs, with_parallel

from llmp.compose.closed_form import pipeline_time
from llmp.compose.schedule import in_flight, plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.spec.spec import Schedule


@settings(max_examples=40, deadline=None)
@given(specs())
def test_an_explicit_equal_split_gives_the_default_numbers_exactly(spec):
    p = spec.parallel
    per_stage = spec.model.layers // p.pp
    explicit = with_parallel(spec, stage_layers=(per_stage,) * p.pp)
    a, b = predict(spec), predict(explicit)
    assert b.step_time_s == a.step_time_s and b.memory.total == a.memory.total and b.breakdown == a.breakdown


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([2, 3, 4]), st.data())
def test_the_slowest_stage_sets_the_pace(pp, data):
    layers = data.draw(st.lists(st.integers(1, 6), min_size=pp, max_size=pp))
    schedule = data.draw(st.sampled_from([Schedule.ONE_F_ONE_B, Schedule.GPIPE]))
    spec = make_spec(_model(sum(layers)), gpus_per_node=pp, pp=pp, global_batch=4 * pp, schedule=schedule,
                     stage_layers=tuple(layers))
    step = predict(spec).step
    m = 4 * pp
    busy = [m * sum(w.fwd.total + w.bwd.total for w in step.works[r::pp]) for r in range(pp)]
    assert step.step_time >= max(busy) * (1 - 1e-12)
    assert [int(x) for x in step.layers] == layers


@given(st.sampled_from([2, 4]), st.sampled_from([2, 3]), st.data())
def test_in_flight_weighs_each_chunk_pass_by_what_it_keeps(pp, vp, data):
    m = 2 * pp
    p = plan(Schedule.INTERLEAVED, pp, vp, m)
    uniform = data.draw(st.integers(1, 4))
    assert in_flight(p, (uniform,) * (pp * vp)) == tuple(n * uniform for n in p.peak_in_flight)
    layers = tuple(data.draw(st.lists(st.integers(0, 4), min_size=pp * vp, max_size=pp * vp)))
    held = in_flight(p, layers)
    assert all(0 <= h <= n * max(layers) for h, n in zip(held, p.peak_in_flight))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(Schedule.INTERLEAVED, 2), (Schedule.INTERLEAVED, 3), (Schedule.ONE_F_ONE_B, 1),
                        (Schedule.ZB_H1, 1), (Schedule.ZB_V, 2)]), st.sampled_from([2, 3, 4]), st.data())
def test_chunks_keeping_the_same_bytes_may_share_a_class(layout, pp, data):
    # memory names the chunks of as many layers of each kind as one class: fewer, shorter states
    # to compare, the same peaks as a class per chunk.
    schedule, vp = layout
    p = plan(schedule, pp, vp, data.draw(st.integers(pp, 3 * pp)) // pp * pp)
    layers = tuple(data.draw(st.lists(st.integers(0, 3), min_size=pp * vp, max_size=pp * vp)))
    waiting = tuple(2 * n + 1 for n in layers) if p.splits_w else None
    classes = tuple(sorted(set(layers)).index(n) for n in layers)
    assert in_flight(p, layers, waiting, classes) == in_flight(p, layers, waiting)


@settings(max_examples=50)
@given(st.sampled_from([4, 5, 8]), st.integers(1, 12), st.data())
def test_gpipe_closed_form_is_exact_for_any_chunk_times(pp, m, data):
    f = data.draw(st.lists(st.floats(0.1, 10), min_size=pp, max_size=pp))
    b = data.draw(st.lists(st.floats(0.1, 10), min_size=pp, max_size=pp))
    p = plan(Schedule.GPIPE, pp, 1, m)
    tl = simulate(p, uniform_durations(p, f, b))
    assert pipeline_time(Schedule.GPIPE, f, b, m, pp, 1) == pytest.approx(max(tl.rank_end), rel=1e-12)
