"""evaluate() on generated specs and sweeps: the vectorised sweep equals predict() for every
configuration."""

from __future__ import annotations

import numpy as np
import pytest
from compose_helpers import predict
from compose_helpers import sweep_point as _point
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import specs

from llmp.compose import evaluate


@settings(max_examples=10)
@given(specs(), st.data())
def test_sweep_equals_predict_for_every_configuration(spec, data):
    n = 4
    grid = {
        "model.ffn_hidden": np.array([spec.model.ffn_hidden * data.draw(st.sampled_from([1, 2])) for _ in range(n)]),
        "gpu.mem_bandwidth": np.array([data.draw(st.floats(1e12, 5e12)) for _ in range(n)]),
        "cluster.inter.bandwidth": np.array([data.draw(st.floats(1e10, 1e12)) for _ in range(n)]),
        "train.recompute": np.array([data.draw(st.sampled_from(["none", "selective", "full"])) for _ in range(n)]),
    }
    out = evaluate(spec, grid)
    for i in range(n):
        p = predict(_point(spec, grid, i))
        assert out["feasible"][i]
        assert out["step_time_s"][i] == pytest.approx(p.step_time_s, rel=1e-9)
        assert out["memory_per_gpu_bytes"][i] == pytest.approx(p.memory.total, rel=1e-9)
        assert out["mfu"][i] == pytest.approx(p.mfu, rel=1e-9)
        assert out["bubble_s"][i] == pytest.approx(p.bubble_s, rel=1e-6, abs=1e-12)
