"""Uneven pipeline stages through the step: pace, memory, closed form, sweep, trace."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import gpt, llama, make_spec, specs, with_parallel

from llmp.analytic import compile as compile_exprs
from llmp.analytic import cost
from llmp.compose import evaluate
from llmp.compose import predict as _predict
from llmp.compose.closed_form import pipeline_time, step_time_expr
from llmp.compose.schedule import in_flight, plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.compose.trace import trace
from llmp.spec import specpath
from llmp.spec.spec import Schedule


def predict(spec, residuals=None):
    """The analytic composition (these tests are about it, not about a shipped residual store)."""
    return _predict(spec, residuals)


def _model(layers: int = 12):
    return llama(layers=layers, hidden=1024, heads=8, kv_heads=8, ffn=2816, vocab=32000, seq_len=1024)


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


def test_moving_layers_onto_one_stage_makes_it_set_the_pace():
    even = predict(make_spec(_model(12), gpus_per_node=4, pp=4, global_batch=32))
    heavy = predict(make_spec(_model(12), gpus_per_node=4, pp=4, global_batch=32, stage_layers=(3, 6, 2, 1)))
    layer = (even.step.works[1].fwd.compute + even.step.works[1].bwd.compute) / 3
    assert heavy.step_time_s > even.step_time_s
    assert heavy.step_time_s >= 32 * 6 * layer


def test_memory_follows_each_stages_own_layers():
    spec = make_spec(_model(12), gpus_per_node=4, pp=4, global_batch=32, stage_layers=(1, 1, 9, 1))
    mem = predict(spec).memory
    assert mem.rank == 2  # the stage with nine layers holds the most weights and activations
    even = predict(make_spec(_model(12), gpus_per_node=4, pp=4, global_batch=32)).memory
    assert mem.weights > even.weights and mem.grads > even.grads


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


@pytest.mark.parametrize("schedule", [Schedule.GPIPE, Schedule.ONE_F_ONE_B])
def test_closed_form_equals_the_simulation_for_an_uneven_gpipe_and_uniform_1f1b(schedule):
    # dp = 1: no gradient sync, so the pipeline alone sets the step; GPipe is exact for any stage
    # times, 1F1B for uniform ones (the equal split through the explicit list).
    layers = (3, 6, 2, 1) if schedule is Schedule.GPIPE else (3, 3, 3, 3)
    spec = make_spec(_model(12), gpus_per_node=4, pp=4, global_batch=8, schedule=schedule, stage_layers=layers)
    value = float(compile_exprs([step_time_expr(spec)])(cost(spec).point)[0])
    assert value == pytest.approx(predict(spec).step_time_s, rel=1e-9)


def test_the_interleaved_closed_form_takes_each_ranks_own_chunks():
    # uniform chunks through the explicit per-chunk list: interleaved makespan (m + (pp-1)/vp) W
    f, b, pp, vp, m = 1.0, 2.0, 4, 2, 8
    p = plan(Schedule.INTERLEAVED, pp, vp, m)
    tl = simulate(p, uniform_durations(p, [f] * (pp * vp), [b] * (pp * vp)))
    assert pipeline_time(Schedule.INTERLEAVED, [f] * 8, [b] * 8, m, pp, vp) == pytest.approx(max(tl.rank_end))


def test_sweeps_over_an_uneven_layout_equal_predict():
    spec = make_spec(gpt(layers=10, hidden=512, heads=8, vocab=32000, seq_len=512), gpus_per_node=4, pp=4,
                     global_batch=16, partition="parameters")
    hidden = np.array([512.0, 768.0, 1024.0])
    out = evaluate(spec, {"model.hidden": hidden, "model.ffn_hidden": 4 * hidden,
                          "model.head_dim": hidden / 8})
    for i, h in enumerate(hidden):
        one = specpath.replace(spec, {"model.hidden": int(h), "model.ffn_hidden": int(4 * h),
                                      "model.head_dim": int(h / 8)})
        assert out["step_time_s"][i] == pytest.approx(predict(one).step_time_s, rel=1e-9)
        assert out["memory_per_gpu_bytes"][i] == pytest.approx(predict(one).memory.total, rel=1e-9)


def test_the_trace_names_each_ranks_layers_and_tasks_last_as_long_as_their_chunk():
    spec = make_spec(_model(12), gpus_per_node=4, pp=4, global_batch=8, stage_layers=(3, 6, 2, 1))
    events = trace(predict(spec))["traceEvents"]
    names = [e["args"]["name"] for e in events if e["name"] == "process_name"]
    assert names == ["pipeline rank 0 (3 layers)", "pipeline rank 1 (6 layers)", "pipeline rank 2 (2 layers)",
                     "pipeline rank 3 (1 layers)"]
    gemm = {}
    for e in events:
        if e.get("cat") == "gemm" and e["args"].get("pass") == "fwd" and e["args"]["microbatch"] == 0:
            gemm[e["args"]["chunk"]] = (e["dur"], e["args"]["layers"])
    assert gemm[1][0] == pytest.approx(2 * gemm[0][0]) and gemm[1][1] == 6


def test_llama3_405b_example_predicts_with_seven_layers_on_its_edge_stages():
    from pathlib import Path

    from llmp.dsl import load
    spec = load(Path(__file__).parents[3] / "examples" / "llama3_405b_pp16_vp8.llmp")
    p = predict(spec)
    layers = [int(sum(p.step.layers[r::16])) for r in range(16)]
    assert layers == [7] + [8] * 14 + [7] and not p.memory.oom


def test_deepspeed_partition_splits_neox_20b_on_eight_stages():
    # GPT-NeoX 20B (44 layers) on pp 8 with the GPT-NeoX default partition runs, the first and
    # last stages lighter (DeeperSpeed's greedy fill).
    model = gpt(layers=44, hidden=6144, heads=64, vocab=50432, seq_len=2048, tied_embeddings=False)
    spec = make_spec(model, nodes=8, gpus_per_node=4, tp=4, pp=8, global_batch=32,
                     partition="type:transformer|mlp")
    layers = [int(sum(predict(spec).step.layers[r::8])) for r in range(8)]
    assert layers == [5, 6, 6, 6, 6, 6, 6, 3]
    assert dataclasses.replace(spec.parallel, partition="").partition == ""


def test_a_chunk_without_layers_runs_only_its_embedding_even_under_zero3():
    from llmp.spec.spec import ZeroStage
    spec = make_spec(_model(8), nodes=2, gpus_per_node=4, pp=2, global_batch=16, zero=ZeroStage.Z3,
                     stage_layers=(0, 8))
    p = predict(spec)
    first = p.step.works[0].fwd.by_category
    gather = next(r.roofline_s for r in p.ops if r.name == "embedding.embedding.zero_all_gather")
    assert first.get("gemm", 0) == 0 and first["dp"] == pytest.approx(gather)
