"""Mixture of experts as it runs: published parameter counts, the FLOPs each piece executes,
the tokens on the wire, layer kinds, and the expert memory sharded over its own group."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from strategies_analytic import llama, make_spec, mixtral

import llmp.dsl
from llmp.analytic import kinds, params, routing
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import DIMS, Family, Kernel, Pass, cost
from llmp.analytic.kinds import LayerKind
from llmp.analytic.op import Part
from llmp.analytic.pricing import price
from llmp.compose import predict
from llmp.compose.predictor import gpu_flops
from llmp.hardware.spec import Dtype
from llmp.spec.model import MlaSpec, MoeSpec, Router
from llmp.spec.spec import Dispatcher

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _example(stem: str):
    return llmp.dsl.load(EXAMPLES / f"{stem}.llmp").model


# ---- parameters against the published counts --------------------------------------------------------

@pytest.mark.parametrize("stem, total, active, rel, source", [
    ("deepseek_v3_h800", 671e9, 37e9, 0.015,
     "DeepSeek-V3 technical report (arXiv:2412.19437) §1: 671B total, 37B activated per token"),
    ("mixtral_8x7b_dgx_h100", 46.7e9, 12.9e9, 0.005,
     "Mixtral of Experts (arXiv:2401.04088) §2: 46.7B total (47B), 12.9B active (13B) per token"),
    ("mixtral_8x22b_dgx_h100", 141e9, 39e9, 0.005, "mistral.ai/news/mixtral-8x22b: 141B total, 39B active"),
    ("qwen3_30b_a3b_dgx_h100", 30.5e9, 3.3e9, 0.015, "Qwen3 technical report (arXiv:2505.09388) Table 2: 30B/3B; "
                                                     "model card Qwen/Qwen3-30B-A3B: 30.5B total, 3.3B activated"),
    ("qwen3_235b_a22b_dgx_h100", 235e9, 22e9, 0.01, "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated"),
    ("llama4_maverick_dgx_h100", 400e9, 17e9, 0.015, "Meta, The Llama 4 herd: Maverick 17B active, 400B total"),
])
def test_published_total_and_active_parameters(stem, total, active, rel, source):
    m = _example(stem)
    assert params.count(m) == pytest.approx(total, rel=rel), source
    assert params.active(m) == pytest.approx(active, rel=rel), source


def test_gpt_oss_120b_counts_as_its_model_card():
    # gpt-oss model card (arXiv:2508.10925) Table 1: 116.83B total, 5.13B active; the active count
    # leaves out the input embedding table (a lookup multiplies nothing), the unembedding stays in.
    m = _example("gpt_oss_120b_dgx_h100")
    assert params.count(m) == pytest.approx(116.83e9, rel=0.001)
    assert params.active(m) - m.vocab * m.hidden == pytest.approx(5.13e9, rel=0.005)
    small = _example("gpt_oss_20b_dgx_h100")  # Table 1: 20.91B total, 3.61B active
    assert params.count(small) == pytest.approx(20.91e9, rel=0.001)
    assert params.active(small) - small.vocab * small.hidden == pytest.approx(3.61e9, rel=0.005)


def test_deepseek_v3_multi_token_prediction_module_is_counted_apart():
    # §2.2 / §4.2: the MTP module (one MoE layer, a 2h x h projection and norms) is not in the 671B.
    m = _example("deepseek_v3_h800")
    block = params.layer_params(m, LayerKind(moe=True, windowed=False))
    assert params.mtp_params(m) == block + 2 * m.hidden**2 + 3 * m.hidden
    assert params.count(dataclasses.replace(m, mtp_layers=0)) == params.count(m)


def test_mla_projections_follow_deepseek_v2():
    # DeepSeek-V2 §2.1: W_DQ (h x 1536), W_UQ (1536 x 128*192), W_DKV (h x 576, incl. the shared rope key),
    # W_UKV (512 x 128*256), W_O (128*128 x h), and the two RMSNorms of the latents.
    m = _example("deepseek_v3_h800")
    h = 7168
    expected = h * 1536 + 1536 + 1536 * 128 * 192 + h * 576 + 512 + 512 * 128 * 256 + 128 * 128 * h
    assert params.attention_params(m) == expected


# ---- FLOPs ------------------------------------------------------------------------------------------

def _flops(spec, keep) -> float:
    g = decompose(spec)
    f = price(g, spec).flops
    return gpu_flops(g, f, keep) * g.structure.world_size


def _gemm_attention(op) -> bool:
    return isinstance(op.work, Kernel) and op.work.family in (Family.GEMM, Family.ATTENTION)


@pytest.mark.parametrize("moe_over, model_over", [
    ({}, {}),
    ({"shared_experts": 1, "first_dense_layers": 1}, {}),
    ({"every": 2}, {}),
    ({}, {"mla": MlaSpec(q_lora_rank=256, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32,
                         v_head_dim=64), "kv_heads": 8}),
])
def test_moe_step_flops_are_6_active_N_plus_attention(moe_over, model_over):
    # Executed GEMM FLOPs = 6 N_active per token (the router's GEMM included: it is a matmul of the active
    # parameters), plus causal flash attention: 2 b s^2 h (d + d_v) / 2 forward, 2.5x (d = d_v) backward.
    moe = MoeSpec(experts=8, top_k=2, expert_ffn_hidden=1024, **moe_over)
    m = llama(**{"layers": 4, "hidden": 512, "heads": 8, "kv_heads": 8, "ffn": 1536, "vocab": 32000,
                 "seq_len": 1024, "moe": moe, **model_over})
    spec = make_spec(m, ep=2, global_batch=16)
    tokens = spec.train.global_batch * m.seq_len
    n_matmul = params.active(m) - params.embedding_params(m) + m.vocab * m.hidden
    norms = m.layers * (2 * m.hidden + (m.mla.q_lora_rank + m.mla.kv_lora_rank if m.mla else 0))  # no matmul
    d, dv = (m.head_dim, m.head_dim) if m.mla is None else (m.mla.qk_head_dim, m.mla.v_head_dim)
    attention = m.layers * m.heads * m.seq_len * ((d + dv) + (3 * d + 2 * dv))  # per token: fwd + bwd, causal
    expected = tokens * (6 * (n_matmul - norms) + attention)
    assert _flops(spec, _gemm_attention) == pytest.approx(expected, rel=1e-9)


def test_imbalance_and_capacity_set_the_busiest_ranks_expert_work():
    def experts(**moe_over):
        m = llama(layers=2, vocab=32000, seq_len=4096,
                  moe=MoeSpec(experts=8, top_k=2, expert_ffn_hidden=14336, **moe_over))
        spec = make_spec(m, ep=8, global_batch=8)
        g = decompose(spec)
        return sum(float(c) for c, op in zip(price(g, spec).flops, g.ops) if ".moe.experts.fc" in op.name)

    base = experts()
    assert experts(imbalance=1.5) == pytest.approx(1.5 * base)
    assert experts(imbalance=1.5, capacity_factor=1.25) == pytest.approx(1.25 * base)  # tokens beyond it dropped
    assert experts(capacity_factor=2.0) == pytest.approx(base)  # a capacity above the load costs nothing


def test_attention_with_a_value_head_dim_and_a_window():
    def att(pass_, **dims):
        base = dict(batch=1, heads=16, kv_heads=16, seq_q=4096, seq_kv=4096, head_dim=128, head_dim_v=128,
                    window=4096, causal=True, flash=True)
        return cost(Kernel.make(Family.ATTENTION, Dtype.BF16, pass_, **{**base, **dims}))

    full = att(Pass.FWD)
    assert full.flops == pytest.approx(2 * 16 * 4096 * 4096 * 128)  # 4 b h s^2 d / 2
    assert att(Pass.BWD).flops == pytest.approx(2.5 * full.flops)
    mla = att(Pass.FWD, head_dim=192, head_dim_v=128)
    assert mla.flops == pytest.approx(16 * 4096 * 4096 * (192 + 128))  # S with d = 192, PV with d_v = 128
    assert att(Pass.BWD, head_dim=192, head_dim_v=128).flops == pytest.approx(16 * 4096 * 4096 * (3 * 192 + 2 * 128))
    band = att(Pass.FWD, window=128)
    assert band.flops == pytest.approx(2 * 16 * (2 * 4096 * 128 - 128 * 128) / 2 * 128 * 2)
    assert band.bytes == full.bytes  # a window skips work, not the reads of Q, K, V


def test_attention_dims_are_in_the_schema_order():
    assert DIMS[Family.ATTENTION][5:8] == ("head_dim", "head_dim_v", "window")


# ---- tokens on the wire -----------------------------------------------------------------------------

@pytest.mark.parametrize("experts, top_k, ep, router, dispatcher, copies", [
    (256, 8, 64, Router.BALANCED, Dispatcher.DEEPEP, 2.0),       # DeepSeek-V3 on AutoModel: 4 experts per rank
    (128, 8, 8, Router.BALANCED, Dispatcher.DEEPEP, 1.0),        # Qwen3-30B-A3B: 16 per rank hold all 8
    (384, 8, 32, Router.BALANCED, Dispatcher.DEEPEP, 4 / 3),     # Kimi K2: starts 0, 8, 4 mod 12
    (128, 4, 64, Router.BALANCED, Dispatcher.DEEPEP, 2.0),       # gpt-oss-120b: 2 per rank
    (256, 8, 64, Router.SIGMOID, Dispatcher.DEEPEP, 64 * (1 - math.comb(252, 8) / math.comb(256, 8))),
    (256, 8, 64, Router.SIGMOID, Dispatcher.ALLTOALL, 8.0),
])
def test_dispatch_copies(experts, top_k, ep, router, dispatcher, copies):
    moe = MoeSpec(experts=experts, top_k=top_k, expert_ffn_hidden=1024, router=router)
    spec = make_spec(llama(layers=2, hidden=1024, heads=8, kv_heads=8, ffn=2048, vocab=1000, seq_len=512, moe=moe),
                     nodes=ep // 8 if ep > 8 else 1, ep=ep, dispatcher=dispatcher, global_batch=max(8, ep))
    assert routing.dispatch_copies(spec) == pytest.approx(copies)


def test_deepep_sends_fewer_bytes_than_the_all_to_all_dispatcher():
    base = make_spec(llama(layers=2, vocab=32000, seq_len=4096,
                           moe=MoeSpec(experts=64, top_k=8, expert_ffn_hidden=1024)), ep=8, global_batch=8)

    def dispatch(spec):
        g = decompose(spec)
        return next(op.work.bytes for op in g.ops if op.name.endswith("moe.ep_dispatch"))

    deepep = dataclasses.replace(base, parallel=dataclasses.replace(base.parallel, dispatcher=Dispatcher.DEEPEP))
    assert dispatch(deepep) / dispatch(base) == pytest.approx(routing.dispatch_copies(deepep) / 8)


# ---- layer kinds ------------------------------------------------------------------------------------

def test_layer_kinds_follow_the_configs():
    ds = _example("deepseek_v3_h800")
    seq = kinds.sequence(ds)
    assert [k.moe for k in seq[:4]] == [False, False, False, True] and all(k.moe for k in seq[3:])
    maverick = _example("llama4_maverick_dgx_h100")  # interleave_moe_layer_step 2: layers 1, 3, ... MoE
    assert [k.moe for k in kinds.sequence(maverick)[:4]] == [False, True, False, True]
    oss = _example("gpt_oss_120b_dgx_h100")  # layer_types: sliding, full, sliding, ...
    assert [k.windowed for k in kinds.sequence(oss)[:4]] == [True, False, True, False]
    assert [kinds.label(k, kinds.kinds(oss)) for k in kinds.kinds(oss)] == ["window_layer", "full_layer"]
    assert kinds.uniform(_example("mixtral_8x7b_dgx_h100")) == LayerKind(moe=True, windowed=False)


def test_dense_first_layers_load_the_first_stage_only():
    spec = llmp.dsl.load(EXAMPLES / "deepseek_v3_h800.llmp")
    st = decompose(spec).structure
    assert st.kinds == (LayerKind(moe=False, windowed=False), LayerKind(moe=True, windowed=False))
    assert st.chunk_kinds[0] == (3, 0) and all(c[0] == 0 for c in st.chunk_kinds[1:])
    assert sum(c[1] for c in st.chunk_kinds) == 58 and st.mtp_kind == LayerKind(moe=True, windowed=False)
    names = {op.name for op in decompose(spec).ops}
    assert {"dense_layer.mlp.fc1", "moe_layer.moe.experts.fc1", "mtp0.eh_proj", "mtp0.layer.moe.experts.fc1",
            "mtp0.head.logits", "moe_layer.attn.kv_up"} <= names


def test_windowed_layers_run_the_banded_kernel():
    g = decompose(llmp.dsl.load(EXAMPLES / "gpt_oss_20b_dgx_h100.llmp"))
    core = {op.name: op.work for op in g.ops if op.name.endswith("attn.core") and op.part is Part.FORWARD}
    assert core["window_layer.attn.core"].dim("window") == 128
    assert core["full_layer.attn.core"].dim("window") == 4096


# ---- memory -----------------------------------------------------------------------------------------

def test_expert_states_shrink_with_ep_and_shard_over_the_expert_data_parallel_group():
    def mem(ep, zero="1"):
        spec = make_spec(mixtral(layers=4), nodes=2, ep=ep, global_batch=64, zero=zero)
        return predict(spec, residuals=None).memory

    one, eight = mem(1), mem(8)
    layer = params.layer_params(mixtral(layers=4))
    expert = 8 * params.mlp_params(mixtral(layers=4), 14336)
    assert one.weights - eight.weights == pytest.approx(4 * expert * 2 * (1 - 1 / 8), rel=1e-9)
    # ZeRO-1: dense optimizer states over dp = 16, expert states over dp / ep = 2 (12 bytes per parameter)
    assert eight.optimizer == pytest.approx(12 * (4 * (layer - expert) / 16 + 4 * expert / 8 / 2
                                                  + params.embedding_params(mixtral(layers=4)) / 16), rel=1e-6)
