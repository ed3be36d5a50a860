"""What ``recompute = selective`` re-runs under each stack: Megatron's attention core, torchtitan's
op-level SAC (every other matmul saved); the memory model reads the same matmul list."""

from __future__ import annotations

import pytest
from analytic_helpers import context as _ctx
from analytic_helpers import recomputed as _recomputed
from analytic_helpers import titan_spec as _titan
from strategies_analytic import gpt, llama, with_train

from llmp.analytic.activations import layer_activation_bytes, op_sac_bytes
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Family, cost
from llmp.analytic.layer import layer_ops, op_sac_matmuls
from llmp.compose import predict
from llmp.compose.memory import memory
from llmp.compose.step import schedule_plan
from llmp.spec.model import MoeSpec
from llmp.spec.spec import Recompute, Stack
from llmp.stacks import PROFILES, SelectiveRecompute


def test_only_torchtitan_runs_op_level_sac():
    assert {s for s, p in PROFILES.items() if p.selective_recompute.value is SelectiveRecompute.OP_SAC} \
        == {Stack.TORCHTITAN}


@pytest.mark.parametrize("stack", [Stack.MEGATRON_CORE, Stack.NEMO, Stack.MEGATRON_LM, Stack.GENERIC])
def test_megatron_selective_reruns_the_attention_core_only(stack):
    spec = with_train(_titan(), stack=stack)
    assert set(_recomputed(spec)) == {"attn.core"}


def test_torchtitan_reruns_all_but_every_other_matmul_and_sdpa():
    # wq, wk, wv, wo, w1, w3, w2: wq, wv, w1, w2 saved; wk, wo, w3 re-run with the norms, rope, silu,
    # the multiply and the attention residual; SDPA saved; the closing residual add is never reached.
    redo = _recomputed(_titan())
    assert set(redo) == {"attn.norm", "attn.qkv.wk", "attn.rotary", "attn.proj.wo", "attn.residual",
                         "mlp.norm", "mlp.fc1.w3", "mlp.act.silu", "mlp.act.mul"}
    t, h, kv, f = 8192, 4096, 1024, 14336
    gemm = sum(cost(op.work).flops for op in redo.values() if op.work.family is Family.GEMM)
    assert gemm == pytest.approx(2 * t * h * (kv + h + f))


def test_with_tp_all_gathers_are_rerun_and_reduce_scatters_kept():
    redo = _recomputed(_titan(tp=2, sequence_parallel=True))
    assert {"attn.tp_all_gather", "mlp.tp_all_gather"} <= set(redo)
    assert not any("reduce_scatter" in name for name in redo)
    assert redo["attn.tp_all_gather"].partner == "recompute.layer.attn.qkv.wk"
    assert redo["mlp.tp_all_gather"].partner == "recompute.layer.mlp.fc1.w3"


def test_an_ungated_mlp_shifts_the_alternation():
    # wq, wk, wv, wo, w1, w2: the sixth matmul (w2) is re-run, w1 kept.
    model = gpt(layers=2, hidden=2048, heads=16, seq_len=2048)
    saved = {(mm.module, mm.saved) for mm in op_sac_matmuls(_ctx(_titan(model)))}
    assert saved == {("wq", True), ("wk", False), ("wv", True), ("wo", False), ("w1", True), ("w2", False)}
    assert {"attn.qkv.wk", "attn.proj.wo", "mlp.fc2.w2"} <= set(_recomputed(_titan(model)))


def test_op_sac_recompute_is_timed_and_costs_more_than_the_attention_core():
    titan = predict(_titan())
    core = predict(with_train(_titan(), stack=Stack.GENERIC))
    assert titan.breakdown["recompute"] > core.breakdown["recompute"] > 0


def test_full_recompute_is_the_whole_forward_under_every_stack():
    full = {stack: set(_recomputed(with_train(_titan(), stack=stack, recompute=Recompute.FULL)))
            for stack in (Stack.TORCHTITAN, Stack.MEGATRON_CORE)}
    assert full[Stack.TORCHTITAN] == full[Stack.MEGATRON_CORE]
    assert {"attn.core", "mlp.fc1", "mlp.fc2", "mlp.residual"} <= full[Stack.TORCHTITAN]


def test_op_sac_runs_on_dense_layers_and_a_moe_layer_reruns_its_attention_core():
    # a dense first layer, then a MoE layer (DeepSeek-V3's layout): op-level SAC applies to the
    # dense one; the MoE layer re-runs the attention core only and keeps its activations
    experts = MoeSpec(experts=8, top_k=2, expert_ffn_hidden=1408, first_dense_layers=1)
    model = llama(layers=2, hidden=2048, heads=16, kv_heads=8, ffn=5632, vocab=32000, seq_len=1024, moe=experts)
    spec = _titan(model)
    ctx = _ctx(spec)
    dense, moe = ctx.st.kinds
    assert (dense.moe, moe.moe) == (False, True)
    redo = [{op.name.removeprefix("recompute.").split(".", 1)[1] for op in layer_ops(ctx, i) if op.recompute}
            for i in (0, 1)]
    assert {"attn.qkv.wk", "attn.proj.wo", "mlp.fc1.w3"} <= redo[0]
    assert redo[1] == {"attn.core"}
    g = decompose(spec)
    mem = memory(spec, g.structure, schedule_plan(g, spec.parallel.schedule))
    kept = op_sac_bytes(ctx, dense) + layer_activation_bytes(ctx, moe)
    working = max(layer_activation_bytes(ctx, dense), layer_activation_bytes(ctx, moe))
    assert mem.activations == pytest.approx(kept + working)
