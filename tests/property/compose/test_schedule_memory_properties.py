"""Memory per schedule on generated specs: a waiting W keeps less than a whole pass of a dense
layer, and ZB-H1 never holds more activations than 1F1B."""

from __future__ import annotations

import pytest
from analytic_helpers import context as _ctx
from hypothesis import given, settings
from strategies_analytic import specs, with_parallel, with_train

from llmp.analytic.activations import layer_activation_bytes, weight_grad_bytes
from llmp.analytic.structure import structure_of
from llmp.compose.schedule import in_flight, plan
from llmp.spec.spec import Recompute, Schedule


@settings(max_examples=30, deadline=None)
@given(specs(moe=False, recompute=Recompute.NONE))
def test_a_waiting_w_keeps_less_than_a_whole_pass_of_a_dense_layer_without_recompute(spec):
    # Dense layers: a W needs the GEMM inputs and output gradients, the B also the norm inputs,
    # attention's log-sum-exp (or scores) and the dropout masks. (A MoE layer's W also keeps the
    # router's and each routed row's output gradients, which can exceed what its forward kept.)
    ctx = _ctx(spec)
    assert float(weight_grad_bytes(ctx)) < float(layer_activation_bytes(ctx))


@settings(max_examples=30, deadline=None)
@given(specs(moe=False))
def test_zb_h1_never_holds_more_activations_than_1f1b(spec):
    # Every rank's fullest state (whole passes and passes waiting for their W) stays within 1F1B's
    # rank 0 (Qi et al. 2024 §2.1): a waiting W keeps less than a whole pass of a dense layer.
    spec = with_train(with_parallel(spec, vp=1, schedule=Schedule.ZB_H1), recompute=Recompute.NONE)
    ctx = _ctx(spec)
    kept, waiting = float(layer_activation_bytes(ctx)), float(weight_grad_bytes(ctx))
    st_ = structure_of(spec)
    layers = st_.chunk_layers
    zb = in_flight(plan(Schedule.ZB_H1, st_.pp, 1, st_.microbatches), [n * kept for n in layers],
                   [n * waiting for n in layers])
    one = in_flight(plan(Schedule.ONE_F_ONE_B, st_.pp, 1, st_.microbatches), [n * kept for n in layers])
    assert max(zb) == pytest.approx(max(one), rel=1e-12)
