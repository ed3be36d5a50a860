"""Memory per GPU: Korthikanti's activation formulas, ZeRO sharding, recompute, pipelines."""

from __future__ import annotations

import pytest
from strategies_analytic import (
    gpt,
    llama,
    make_spec,
    with_parallel,
    with_train,
)

from llmp.analytic import shard
from llmp.analytic.activations import layer_activation_bytes, op_sac_bytes
from llmp.analytic.block import Context
from llmp.analytic.structure import structure_of
from llmp.compose import predict
from llmp.spec.spec import Recompute, Schedule, Stack, ZeroStage
from llmp.stacks import padded_vocab


def _per_layer(spec) -> float:
    return float(layer_activation_bytes(Context.of(spec, structure_of(spec))))


@pytest.mark.parametrize("tp,sp", [(1, False), (4, False), (4, True)])
def test_gpt_activations_match_korthikanti(tp, sp):
    # Korthikanti et al. 2022, eqs. 1-4: sbh(34 + 5as/h); sbh(10 + 24/t + 5as/(ht)); sbh/t (34 + 5as/h).
    m = gpt(layers=4, hidden=2048, heads=16, seq_len=2048, dropout=0.1)
    spec = make_spec(m, gpus_per_node=tp, tp=tp, sequence_parallel=sp, flash=False, global_batch=2, micro_batch=2)
    s, b, h, a = m.seq_len, 2, m.hidden, m.heads
    if tp == 1:
        expect = s * b * h * (34 + 5 * a * s / h)
    elif not sp:
        expect = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp))
    else:
        expect = s * b * h * (34 + 5 * a * s / h) / tp
    assert _per_layer(spec) == pytest.approx(expect, rel=1e-12)
    # selective recompute (or flash attention) drops the 5as/h term (flash keeps a tiny log-sum-exp)
    sel = with_train(spec, recompute=Recompute.SELECTIVE)
    assert _per_layer(sel) == pytest.approx(expect - 5 * a * s * s * b / tp, rel=1e-12)


def test_swiglu_and_gqa_change_the_34():
    # Llama-like: no dropout, SwiGLU (3 f-wide tensors), GQA (K, V narrower than Q).
    m = llama(layers=2, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000, seq_len=4096)
    spec = make_spec(m, gpus_per_node=1, global_batch=1)
    s, h, f, kv = 4096, 4096, 14336, 8 * 128
    expect = 2 * s * (4 * h + 2 * h + 2 * kv + 3 * f)   # norms+inputs 4h, Q and out 2h, K V, mlp 3f
    assert _per_layer(spec) == pytest.approx(expect + 4 * 32 * s, rel=1e-12)   # + FP32 log-sum-exp


@pytest.mark.parametrize("flash", [False, True])
def test_recompute_full_keeps_less_than_selective_keeps_at_most_none(flash):
    spec = make_spec(gpt(layers=8, hidden=2048, heads=16, seq_len=2048), gpus_per_node=2, pp=2, global_batch=8,
                     flash=flash)
    act = {r: predict(with_train(spec, recompute=r)).memory.activations for r in Recompute}
    assert act[Recompute.FULL] < act[Recompute.SELECTIVE] <= act[Recompute.NONE]
    if not flash:
        assert act[Recompute.SELECTIVE] < act[Recompute.NONE]


def test_1f1b_first_stage_holds_pp_microbatches_and_gpipe_all():
    spec = make_spec(gpt(layers=8, hidden=2048, heads=16, seq_len=2048, vocab=64), gpus_per_node=4, pp=4,
                     global_batch=16)
    per_layer = _per_layer(spec)
    one = predict(spec).memory
    assert one.rank == 0
    assert one.activations == pytest.approx(4 * 2 * per_layer)       # pp microbatches x 2 layers
    gpipe = predict(with_parallel(spec, schedule=Schedule.GPIPE)).memory
    assert gpipe.activations == pytest.approx(16 * 2 * per_layer)    # all m microbatches


def test_memory_states_follow_megatron_bytes_per_parameter():
    # bf16 weights (2) + fp32 main grads (4) + fp32 master, m, v (12) = 18 bytes per parameter
    spec = make_spec(gpt(layers=2, hidden=1024, heads=8, seq_len=512, vocab=1024), gpus_per_node=1, global_batch=1)
    mem = predict(spec).memory
    params = (mem.weights) / 2
    assert mem.grads == pytest.approx(4 * params)
    assert mem.optimizer == pytest.approx(12 * params)


def test_fsdp_stores_fp32_shards_and_gathers_the_root():
    # PyTorch FSDP: the FP32 shard is the parameter and the master copy (Adam holds m and v only);
    # the layers in use and the root's embedding, final norm and head are gathered in BF16.
    m = llama(layers=4, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)
    spec = make_spec(m, gpus_per_node=8, global_batch=8, zero=ZeroStage.FSDP)
    mem = predict(spec).memory
    total = shard.rank(m, spec.parallel, pp=1, layers=m.layers, first=True, last=True, vocab=padded_vocab(spec)).total
    layer = shard.layer(m, spec.parallel).total
    assert mem.optimizer == pytest.approx(8 * total / 8)
    assert mem.grads == pytest.approx(4 * total / 8)
    gathered = 2 * (2 * layer + (total - 4 * layer))
    assert mem.weights == pytest.approx(4 * total / 8 + gathered)


def test_torchtitan_selective_keeps_every_other_matmul():
    # torchtitan op-SAC per layer: the input x, wq (q), wv (kv), w1 (f), w2 (h) outputs and the SDPA
    # output (q), plus the FP32 log-sum-exp; norms, rope, silu, wk, wo, w3 are recomputed.
    m = llama(layers=2, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq_len=8192)
    spec = with_train(make_spec(m, gpus_per_node=8, global_batch=16, micro_batch=2, zero=ZeroStage.FSDP),
                      stack=Stack.TORCHTITAN, recompute=Recompute.SELECTIVE)
    t = 2 * 8192
    expect = 2 * t * (4096 + 4096 + 1024 + 14336 + 4096 + 4096) + 4 * 2 * 32 * 8192
    assert float(op_sac_bytes(Context.of(spec, structure_of(spec)))) == pytest.approx(expect)
    generic = predict(with_train(spec, stack=Stack.GENERIC)).memory
    titan = predict(spec).memory
    assert titan.activations < generic.activations


def test_torchtitan_loss_holds_twelve_bytes_per_logit():
    m = llama(layers=2, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)
    spec = make_spec(m, gpus_per_node=1, global_batch=2, micro_batch=2)
    titan = predict(with_train(spec, stack=Stack.TORCHTITAN)).memory
    assert titan.logits == pytest.approx(12 * 2 * 1024 * 32000)
    assert predict(spec).memory.logits == pytest.approx((2 + 4) * 2 * 1024 * 32000)


def test_llama31_8b_on_torchtitan_fsdp2_fits_in_96_gb():
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table 1: 8 H100 96 GB, local batch 2,
    # selective op AC, FSDP: the run fit (82.4 GiB reserved). It used to be predicted out of memory.
    from llmp import dsl
    spec = dsl.loads("""use "grand_teton_h100_96gb"
model llama31_8b { arch = llama  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
                   ffn_hidden = 14336  vocab = 128256  seq_len = 8192 }
cluster c { node = grand_teton_h100_96gb }
train { stack = torchtitan  global_batch = 16  micro_batch = 2  recompute = selective  parallel { dp = 8 } }
""")
    mem = predict(spec).memory
    assert not mem.oom
    assert (mem.total - mem.overhead) / 2**30 == pytest.approx(82.4, rel=0.12)
