"""FLOP counting: the 6N rule and regression tests for counting mistakes other tools shipped."""

from __future__ import annotations

import pytest
from analytic_helpers import step_flops as _step_flops
from strategies_analytic import gpt, llama, make_spec, mixtral, with_train

from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Family, Kernel
from llmp.analytic.op import Part, Scope
from llmp.analytic.pricing import price
from llmp.compose.predictor import gpu_flops
from llmp.spec.spec import Attention, Recompute


def _op(graph, name):
    return next(op for op in graph.ops if op.name == name)


def test_flops_linear_in_layers_and_tokens():
    base = make_spec(llama(layers=4, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=2048))
    deeper = make_spec(llama(layers=8, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=2048))
    assert _scope_flops(deeper, Scope.LAYER) == pytest.approx(2 * _scope_flops(base, Scope.LAYER), rel=1e-12)
    assert _scope_flops(deeper, Scope.LAST) == pytest.approx(_scope_flops(base, Scope.LAST), rel=1e-12)
    bigger_batch = with_train(base, global_batch=2 * base.train.global_batch)
    assert _step_flops(bigger_batch) == pytest.approx(2 * _step_flops(base), rel=1e-12)


def _scope_flops(spec, scope) -> float:
    g = decompose(spec)
    f = price(g, spec).flops
    return gpu_flops(g, f, lambda op: op.scope is scope) * g.structure.world_size


def test_causal_attention_is_halved_only_in_fused_kernels():
    spec = make_spec(gpt(layers=2, dropout=0.0))
    m, b = spec.model, spec.train.micro_batch
    full = 4 * b * m.heads * m.seq_len ** 2 * m.head_dim
    g = decompose(spec)
    core = dict(zip((op.name for op in g.ops), price(g, spec).flops))
    assert core["layer.attn.core"] == pytest.approx(full / 2)          # flash skips the masked half
    assert core["layer.attn.core.bwd"] == pytest.approx(2.5 * full / 2)
    unfused = with_train(spec, attention=Attention.UNFUSED)
    g2 = decompose(unfused)
    f2 = dict(zip((op.name for op in g2.ops), price(g2, unfused).flops))
    assert f2["layer.attn.scores"] + f2["layer.attn.context"] == pytest.approx(full)  # dense GEMMs do not


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_gqa_qkv_width_with_kv_replication(tp):
    # Llama 3 70B shape: 64 query heads, 8 KV heads of 128. Q: 64*128/tp; K,V: max(8, tp)/tp KV heads.
    m = llama(layers=2, hidden=8192, heads=64, kv_heads=8, ffn=28672)
    spec = make_spec(m, nodes=2, tp=tp, global_batch=32)
    qkv = _op(decompose(spec), "layer.attn.qkv").work
    kv_local = max(8, tp) // tp
    assert qkv.dim("n") == pytest.approx(64 * 128 / tp + 2 * kv_local * 128)
    assert qkv.dim("k") == 8192
    core = _op(decompose(spec), "layer.attn.core").work
    assert core.dim("heads") == pytest.approx(64 / tp)
    assert core.dim("kv_heads") == pytest.approx(kv_local)


def test_swiglu_has_three_matrices_and_gelu_two():
    sw = make_spec(llama(layers=2, hidden=1024, heads=8, kv_heads=8, ffn=3072, vocab=32000, seq_len=1024), tp=2)
    g = decompose(sw)
    f = dict(zip((op.name for op in g.ops), price(g, sw).flops))
    tokens = sw.model.seq_len * sw.train.micro_batch
    assert f["layer.mlp.fc1"] + f["layer.mlp.fc2"] == pytest.approx(2 * tokens * 1024 * 3 * 3072 / 2)
    ge = make_spec(gpt(layers=2, hidden=1024, heads=8, seq_len=1024), tp=2)
    g = decompose(ge)
    f = dict(zip((op.name for op in g.ops), price(g, ge).flops))
    assert f["layer.mlp.fc1"] + f["layer.mlp.fc2"] == pytest.approx(2 * tokens * 1024 * 2 * 4096 / 2)


@pytest.mark.parametrize("tied", [True, False])
def test_tied_embeddings_still_compute_logits(tied):
    spec = make_spec(gpt(layers=2, tied_embeddings=tied), tp=2)
    logits = _op(decompose(spec), "head.logits").work
    assert (logits.dim("m"), logits.dim("n"), logits.dim("k")) == (spec.model.seq_len, spec.model.vocab / 2,
                                                                    spec.model.hidden)


def test_tied_embeddings_sync_between_first_and_last_stage():
    tied = decompose(make_spec(gpt(layers=4, tied_embeddings=True), pp=2))
    untied = decompose(make_spec(gpt(layers=4, tied_embeddings=False), pp=2))
    assert sum(op.name == "step.tied_embedding_all_reduce" for op in tied.ops) == 2   # first and last rank
    assert not any(op.name == "step.tied_embedding_all_reduce" for op in untied.ops)


@pytest.mark.parametrize("spec", [make_spec(), make_spec(gpt(layers=2), tp=2, sequence_parallel=True)],
                         ids=["llama", "gpt_sp"])
def test_backward_gemms_are_twice_forward(spec):
    g = decompose(spec)
    f = price(g, spec).flops
    gemm = [(op, x) for op, x in zip(g.ops, f) if isinstance(op.work, Kernel) and op.work.family is Family.GEMM]
    fwd = sum(x * op.count for op, x in gemm if op.part is Part.FORWARD)
    bwd = sum(x * op.count for op, x in gemm if op.part is Part.BACKWARD)
    assert bwd == pytest.approx(2 * fwd)


def test_full_recompute_adds_one_layer_forward_and_selective_the_attention_core():
    base = make_spec(gpt(layers=2))
    none = _step_flops(base)
    full = _step_flops(with_train(base, recompute=Recompute.FULL))
    selective = _step_flops(with_train(base, recompute=Recompute.SELECTIVE))
    assert full - none == pytest.approx(_layer_forward_flops(base), rel=1e-9)
    core = _layer_forward_flops(base, families=(Family.ATTENTION,))
    assert selective - none == pytest.approx(core, rel=1e-9)


def _layer_forward_flops(spec, families=(Family.GEMM, Family.ATTENTION)) -> float:
    g = decompose(spec)
    f = price(g, spec).flops
    keep = lambda op: (op.scope is Scope.LAYER and op.part is Part.FORWARD and isinstance(op.work, Kernel)  # noqa: E731
                       and op.work.family in families)
    return gpu_flops(g, f, keep) * g.structure.world_size


def test_moe_expert_flops_follow_top_k_and_capacity():
    spec = make_spec(mixtral(layers=2), ep=8, global_batch=16)
    g = decompose(spec)
    f = dict(zip((op.name for op in g.ops), price(g, spec).flops))
    m = spec.model
    tokens = m.seq_len * spec.train.micro_batch
    per_gpu = 2 * tokens * m.moe.top_k * m.hidden * 3 * m.moe.expert_ffn_hidden  # all local experts, cf 1
    assert f["layer.moe.experts.fc1"] + f["layer.moe.experts.fc2"] == pytest.approx(per_gpu)
    assert _op(g, "layer.moe.experts.fc1").work.dim("batch") == m.moe.experts / 8
