"""Derivatives and elasticities of the step time against finite differences of predict(--set).

The fixture has pp = 1, so the closed form equals the simulated step; the chosen fields sit away
from kinks (checked: none is one-sided and no kink lies within the finite-difference step).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from llmp import dsl
from llmp.compose import predict as _predict
from llmp.sensitivity import analyze, derivatives, operating_point


def predict(spec, residuals=None):
    """The analytic composition (these tests are about it, not about a shipped residual store)."""
    return _predict(spec, residuals)

SMALL = Path(__file__).parents[2] / "fixtures" / "small.llmp"
SYMBOLIC = Path(__file__).parents[3] / "examples" / "symbolic_hidden.llmp"

# (path, central-difference step, --set text of a value)
FD_FIELDS = [
    ("gpu.mem_bandwidth", 3.35e12 * 1e-3, lambda v: f"{v:.9g} B/s"),
    ("gpu.achievable.bf16", 794.5e12 * 1e-3, lambda v: f"{v:.9g} FLOP/s"),
    ("gpu.flash_attention.bf16", 338e12 * 1e-3, lambda v: f"{v:.9g} FLOP/s"),
    ("node.intra.bandwidth", 450e9 * 1e-3, lambda v: f"{v:.9g} B/s"),
    ("gpu.launch_overhead", 4e-6 * 1e-2, lambda v: f"{v:.9g} s"),
    ("model.hidden", 16, lambda v: str(int(v))),
    ("model.ffn_hidden", 32, lambda v: str(int(v))),
    ("model.vocab", 64, lambda v: str(int(v))),
    ("model.seq_len", 64, lambda v: str(int(v))),
    ("train.global_batch", 8, lambda v: str(int(v))),
]


def load(path, extra=()):
    """The spec on its GPU without a tile table (``microarch`` dropped): tile and wave quantization
    makes the step a staircase in the dims, whose derivative llmp takes as the staircase's trend
    (``sympy_functions.Ceil``), so a finite difference over a few elements would measure a step,
    not the composition's derivative these tests check."""
    spec = dsl.load(path, list(extra))
    node = spec.cluster.node
    gpu = dataclasses.replace(node.gpu, microarch=None)
    cluster = dataclasses.replace(spec.cluster, node=dataclasses.replace(node, gpu=gpu))
    return dataclasses.replace(spec, cluster=cluster)


def _resolve(extra):
    return load(SMALL, extra)


@pytest.fixture(scope="module")
def small():
    op = operating_point(load(SMALL), None, _resolve, residuals=None)
    return op, analyze(op)


def test_closed_form_equals_prediction_at_the_point(small):
    _op, result = small
    assert result.closed_form_s == pytest.approx(result.step_time_s, rel=1e-9)
    assert result.step_time_s == pytest.approx(predict(load(SMALL)).step_time_s, rel=1e-12)


@pytest.mark.parametrize(("path", "h", "text"), FD_FIELDS, ids=[f[0] for f in FD_FIELDS])
def test_derivative_matches_finite_difference_of_predict(small, path, h, text):
    op, result = small
    field = next(f for f in result.fields if f.path == path)
    assert not field.one_sided
    x = op.value(path)
    assert not [k for k in result.kinks if k.path == path and abs(k.at - x) <= h]
    up = predict(load(SMALL, [f"{path}={text(x + h)}"])).step_time_s
    down = predict(load(SMALL, [f"{path}={text(x - h)}"])).step_time_s
    fd = (up - down) / (2 * h)
    assert field.derivative == pytest.approx(fd, rel=0.01)
    assert field.elasticity == pytest.approx(x * fd / result.step_time_s, rel=0.01)


def test_derivations_follow_the_spec(small):
    _, result = small
    by = {f.path: f for f in result.fields}
    assert by["model.hidden"].moves == ("model.head_dim",)
    assert "parallel.dp" in by["parallel.tp"].moves  # dp is derived from the GPUs left after tp
    assert by["gpu.memory"].derivative == 0.0
    assert all(f.derivations_known for f in result.fields)


def test_hidden_derivative_includes_head_dim():
    # head_dim = hidden / heads by default: --set model.hidden moves it, and so must dT/dhidden.
    op = operating_point(load(SMALL), None, _resolve, residuals=None)
    (total,) = derivatives(op, ["model.hidden"])
    alone = operating_point(load(SMALL), None, None, residuals=None)
    (partial,) = derivatives(alone, ["model.hidden"])
    assert not partial.derivations_known and partial.moves == ()
    (head,) = derivatives(op, ["model.head_dim"])
    assert total.derivative == pytest.approx(partial.derivative + head.derivative / 16, rel=1e-9)


def test_free_symbol_closed_form_matches_pinned_prediction():
    spec = load(SYMBOLIC)
    op = operating_point(spec, {"model.hidden": 4096.0}, lambda e: load(SYMBOLIC, e), residuals=None)
    pinned = predict(load(SYMBOLIC, ["model.hidden=4096"])).step_time_s
    assert op.branches.value(op.local) == pytest.approx(pinned, rel=1e-9)
    (f,) = derivatives(op, ["hidden"])
    assert f.path == "model.hidden" and set(f.moves) == {"model.head_dim", "model.ffn_hidden"}
    up = predict(load(SYMBOLIC, ["model.hidden=4112"])).step_time_s
    down = predict(load(SYMBOLIC, ["model.hidden=4080"])).step_time_s
    assert f.derivative == pytest.approx((up - down) / 32, rel=0.01)


def test_with_tiles_a_dim_derivative_is_the_trend_of_the_staircase():
    # On the GPU's own tile table (sm90) the step is a staircase in ffn_hidden (2816 per GPU = 22
    # tiles of 128): its derivative is the slope over whole tiles, a central difference of +-2
    # tiles per GPU (+-512 in ffn_hidden at tp 2).
    op = operating_point(dsl.load(SMALL), None, lambda e: dsl.load(SMALL, list(e)), residuals=None)
    (f,) = derivatives(op, ["model.ffn_hidden"])
    up = predict(dsl.load(SMALL, ["model.ffn_hidden=6144"])).step_time_s
    down = predict(dsl.load(SMALL, ["model.ffn_hidden=5120"])).step_time_s
    assert f.derivative == pytest.approx((up - down) / 1024, rel=0.05)
