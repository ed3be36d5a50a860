"""evaluate(): vectorised sweeps agree with predict() configuration by configuration."""

from __future__ import annotations

import numpy as np
import pytest
from compose_helpers import predict
from compose_helpers import sweep_point as _point
from strategies_analytic import gpt, make_spec

from llmp.compose import evaluate, sweep
from llmp.errors import InputError


def test_structural_fields_group_and_infeasible_points_are_flagged():
    spec = make_spec(gpt(layers=8), nodes=2, global_batch=64)
    tp = np.array([1, 2, 4, 8, 8, 3])
    pp = np.array([1, 2, 2, 1, 2, 1])
    grid = {"parallel.tp": tp, "parallel.pp": pp, "parallel.dp": 16 // (tp * pp)}
    out = evaluate(spec, grid)
    assert out["feasible"].tolist() == [True, True, True, True, True, False]
    assert np.isnan(out["step_time_s"][-1])
    for i in range(5):
        p = predict(_point(spec, grid, i))
        assert out["step_time_s"][i] == pytest.approx(p.step_time_s, rel=1e-9)


def test_mismatched_lengths_are_an_input_error():
    with pytest.raises(InputError):
        evaluate(make_spec(), {"model.hidden": np.array([1024, 2048]), "gpu.mem_bandwidth": np.array([1e12])})


def test_sweeps_over_schedules_equal_predict_and_skip_the_layouts_a_schedule_cannot_run():
    spec = make_spec(gpt(layers=8), gpus_per_node=4, pp=4, global_batch=32)
    grid = {"parallel.schedule": np.array(["1f1b", "gpipe", "zb_h1", "dualpipe", "zb_v", "interleaved", "zb_v"]),
            "parallel.vp": np.array([1, 1, 1, 1, 2, 2, 1]),
            "gpu.mem_bandwidth": np.linspace(1e12, 4e12, 7)}
    out = evaluate(spec, grid)
    assert out["feasible"].tolist() == [True] * 6 + [False]   # zb_v needs vp = 2
    for i in range(6):
        p = predict(_point(spec, grid, i))
        assert out["step_time_s"][i] == pytest.approx(p.step_time_s, rel=1e-9)
        assert out["memory_per_gpu_bytes"][i] == pytest.approx(p.memory.total, rel=1e-9)
        assert out["bubble_s"][i] == pytest.approx(p.bubble_s, rel=1e-6, abs=1e-12)


def test_chunks_give_the_numbers_of_one_call_and_bound_the_chunk():
    spec = make_spec(gpt(layers=8), nodes=2, global_batch=64)
    rng = np.random.default_rng(0)
    n = 300
    tp = rng.choice([1, 2, 3, 4], n)  # tp 3 cannot split the heads: a whole infeasible group
    grid = {"parallel.tp": tp, "parallel.pp": np.full(n, 2), "parallel.dp": np.maximum(1, 8 // tp),
            "gpu.mem_bandwidth": rng.uniform(1e12, 5e12, n), "node.intra.bandwidth": rng.uniform(1e11, 9e11, n)}
    whole = evaluate(spec, grid)
    parts = evaluate(spec, grid, budget=1)  # one configuration per call
    assert not whole["feasible"].all()
    for k in whole:
        np.testing.assert_array_equal(parts[k], whole[k])
    assert sweep.chunk_size(66, 9216) * 8 * (sweep.ARRAYS_PER_OP * 66 + 2 * 9216) <= sweep.MEMORY
    assert sweep.chunk_size(10**6, 10**9) == 1
