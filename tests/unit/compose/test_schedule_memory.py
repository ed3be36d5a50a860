"""Memory per schedule: activations in flight (ZB-H1 and ZB-V as 1F1B, DualPipe one stage more),
the weight-gradient share a waiting W keeps, and DualPipe's two copies of the parameters."""

from __future__ import annotations

import pytest
from analytic_helpers import context as _ctx
from strategies_analytic import gpt, llama, make_spec, with_parallel

from llmp.analytic import shard
from llmp.analytic.activations import layer_activation_bytes, weight_grad_bytes
from llmp.analytic.grads import grad_bytes
from llmp.analytic.graph import decompose
from llmp.analytic.structure import structure_of
from llmp.compose import predict as _predict
from llmp.spec.spec import Schedule, ZeroStage
from llmp.stacks import padded_vocab


def predict(spec):
    """The analytic composition (these tests are about it, not about a shipped residual store)."""
    return _predict(spec, None)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_waiting_w_keeps_qi_et_al_table_1(tp):
    # Qi et al. 2024 Table 1: W needs 32 s b h (the GEMM inputs and output gradients) of GPT's
    # s b h (34 + 5 a s / h) per layer; with tp (no SP) the replicated inputs stay whole.
    m = gpt(layers=4, hidden=1024, heads=16, seq_len=1024, dropout=0.1)
    spec = make_spec(m, gpus_per_node=tp, tp=tp, flash=False, global_batch=2, micro_batch=2)
    s, b, h = 1024, 2, 1024
    inputs = 2 * h + h / tp + 4 * h / tp                  # two norm outputs, attention output, fc2 input
    grads = 3 * h / tp + h + 4 * h / tp + h               # QKV, proj, fc1, fc2 output gradients
    assert float(weight_grad_bytes(_ctx(spec))) == pytest.approx(2 * s * b * (inputs + grads))
    if tp == 1:
        assert float(weight_grad_bytes(_ctx(spec))) == pytest.approx(32 * s * b * h)


def _model():
    return gpt(layers=8, hidden=2048, heads=16, seq_len=2048, vocab=64)


@pytest.mark.parametrize("pp", [2, 4])
def test_zb_h1_and_zb_v_hold_the_activations_of_1f1b(pp):
    spec = make_spec(_model(), gpus_per_node=pp, pp=pp, global_batch=4 * pp)
    one = predict(spec).memory
    zb_h1 = predict(with_parallel(spec, schedule=Schedule.ZB_H1)).memory
    zb_v = predict(with_parallel(spec, schedule=Schedule.ZB_V, vp=2)).memory
    per_layer = float(layer_activation_bytes(_ctx(spec)))
    assert one.rank == zb_h1.rank == zb_v.rank == 0
    assert one.activations == zb_h1.activations == pytest.approx(8 * per_layer)   # pp microbatches x 8 / pp layers
    assert zb_v.activations == pytest.approx(one.activations)


@pytest.mark.parametrize("pp", [2, 4])
def test_dualpipe_holds_one_stage_more_of_activations(pp):
    spec = make_spec(_model(), gpus_per_node=pp, pp=pp, global_batch=4 * pp)
    one = predict(spec).memory
    dual = predict(with_parallel(spec, schedule=Schedule.DUALPIPE)).memory
    assert dual.rank in (0, pp - 1)
    assert dual.activations == pytest.approx(one.activations * (pp + 1) / pp)


@pytest.mark.parametrize("zero", [ZeroStage.NONE, ZeroStage.Z1])
def test_dualpipe_keeps_two_copies_of_the_parameters(zero):
    # DeepSeek-V3 Table 2: parameters 2x. Rank 0 holds stage 0 of one copy and stage pp - 1 of the
    # other: weights, gradients and optimizer states of 1F1B's first and last rank together.
    pp = 4
    m = llama(layers=8, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)
    spec = make_spec(m, nodes=2, gpus_per_node=4, pp=pp, global_batch=16, zero=zero, schedule=Schedule.DUALPIPE)
    dual = predict(spec).memory
    first = shard.rank(m, spec.parallel, pp=pp, layers=2, first=True, last=False, vocab=padded_vocab(spec)).total
    last = shard.rank(m, spec.parallel, pp=pp, layers=2, first=False, last=True, vocab=padded_vocab(spec)).total
    dp = 2 if zero is ZeroStage.Z1 else 1
    assert dual.weights == pytest.approx(2 * (first + last))
    assert dual.grads == pytest.approx(4 * (first + last))
    assert dual.optimizer == pytest.approx(12 * (first + last) / dp)
    one = predict(with_parallel(spec, schedule=Schedule.ONE_F_ONE_B)).memory
    assert dual.weights > 1.9 * one.weights - 2 * (last - first)   # the middle ranks hold twice the layers


def test_dualpipe_all_reduces_each_ranks_gradients_with_the_other_copys_rank():
    m = llama(layers=8, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)
    spec = make_spec(m, gpus_per_node=4, pp=4, global_batch=16, schedule=Schedule.DUALPIPE)
    ctx = _ctx(spec)
    sync = [op for op in decompose(spec) if op.name.startswith("step.model_copy_grad_all_reduce")]
    assert {r for op in sync for r in op.ranks} == {0, 1, 2, 3}
    for op in sync:
        r = op.ranks[0]
        params = shard.rank(m, spec.parallel, pp=4, layers=4, first=r in (0, 3), last=r in (0, 3),
                            vocab=padded_vocab(spec)).total
        assert op.work.group == 2 and op.work.bytes == pytest.approx(params * grad_bytes(ctx))


def test_zb_v_places_a_stages_layers_on_its_two_chunks_of_the_v():
    m = llama(layers=8, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)
    spec = make_spec(m, gpus_per_node=2, pp=2, vp=2, global_batch=8, schedule=Schedule.ZB_V, stage_layers=(2, 6))
    st_ = structure_of(spec)
    assert st_.placement == ((0, 3), (1, 2))
    assert st_.chunk_layers == (1, 3, 3, 1)
    assert [st_.stage_layers(r) for r in range(2)] == [2, 6]
