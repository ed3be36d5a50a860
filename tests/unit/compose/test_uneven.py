"""Uneven pipeline stages through the step: pace, memory, closed form, sweep, trace."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from compose_helpers import predict
from compose_helpers import uneven_model as _model
from strategies_analytic import gpt, make_spec

from llmp.analytic import compile as compile_exprs
from llmp.analytic import cost
from llmp.compose import evaluate
from llmp.compose.closed_form import pipeline_time, step_time_expr
from llmp.compose.schedule import plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.compose.trace import trace
from llmp.spec import specpath
from llmp.spec.spec import Schedule


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
