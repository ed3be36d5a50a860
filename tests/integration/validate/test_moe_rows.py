"""Published mixture-of-experts rows → specs: the family's public config fills what the schema
lacks (expert width, shared experts, dense layers, MLA, windows), the row's notes and its stack's
benchmark configuration decide the gate, the dispatcher, a blank ep and the pipeline split."""

from __future__ import annotations

from pathlib import Path

import published_rows as P
import pytest

from llmp.analytic import params
from llmp.analytic.split import Uneven, split, uneven
from llmp.compose import predict
from llmp.spec.model import Router
from llmp.spec.spec import Dispatcher, Stack
from llmp.validate import group_measurements, map_measurement, read_csvs
from llmp.validate.mapping import Mapped
from llmp.validate.models import GENERIC_MOE, MOE_FAMILIES, moe_family_of

AUTOMODEL = Path(__file__).resolve().parents[3] / "validation" / "nemo_automodel_perf_summary.csv"


def _rows() -> dict[str, Mapped]:
    out = {}
    for m in group_measurements(read_csvs([AUTOMODEL])):
        result = map_measurement(m)
        if isinstance(result, Mapped):
            out[f"{m.config.text('model_name')}/{m.config.text('num_gpus')}"] = result
    return out


@pytest.fixture(scope="module")
def automodel() -> dict[str, Mapped]:
    return _rows()


def _said(m: Mapped, *fragments: str) -> bool:
    return any(all(f in a for f in fragments) for a in m.assumptions)


def test_every_automodel_moe_pre_training_row_is_predicted(automodel):
    moe = sorted(k for k, m in automodel.items() if m.spec.model.moe is not None)
    assert moe == ["DeepSeek V3 671B/1024", "DeepSeek V3 671B/256", "GPT-OSS 120B/64", "GPT-OSS 20B/8", "Kimi K2/256",
                   "Qwen3 MoE 30B/8"]


def test_deepseek_v3_takes_its_public_config_and_the_runs_settings(automodel):
    m = automodel["DeepSeek V3 671B/256"]
    model, p = m.spec.model, m.spec.parallel
    assert model.moe is not None and model.mla is not None
    assert (model.moe.experts, model.moe.top_k, model.moe.expert_ffn_hidden, model.moe.shared_experts,
            model.moe.first_dense_layers) == (256, 8, 2048, 1, 3)
    assert (model.mla.q_lora_rank, model.mla.kv_lora_rank, model.mla.qk_head_dim, model.mla.v_head_dim) == (
        1536, 512, 192, 128)
    assert model.moe.router is Router.BALANCED and _said(m, "fake balanced gate", "FakeBalancedGate")
    assert p.dispatcher is Dispatcher.DEEPEP and _said(m, "dispatcher = deepep")
    assert (p.ep, p.pp, p.vp) == (64, 4, 8)
    assert split(m.spec).chunks == tuple([2] * 29 + [1] * 3) and _said(m, "generate_hf_model_fqn_per_model_part")
    assert model.mtp_layers == 0 and _said(m, "no multi-token prediction module")
    assert params.count(model) / 1e9 == pytest.approx(671, rel=0.001)
    assert m.spec.train.stack is Stack.NEMO_AUTOMODEL


def test_gpt_oss_fills_a_blank_ep_from_the_benchmark_configuration(automodel):
    m = automodel["GPT-OSS 120B/64"]
    model = m.spec.model
    assert m.spec.parallel.ep == 64 and _said(m, "ep blank: ep = dp = 64", "gptoss_120b_te_deepep.yaml")
    assert (model.window, model.full_attention_every, model.head_dim, model.bias) == (128, 2, 64, True)
    assert params.count(model) / 1e9 == pytest.approx(116.8, rel=0.002)


def test_kimi_k2_and_qwen3_fill_the_blank_dense_width(automodel):
    kimi, qwen = automodel["Kimi K2/256"], automodel["Qwen3 MoE 30B/8"]
    assert kimi.spec.model.ffn_hidden == 18432 and _said(kimi, "ffn_hidden blank: 18432")
    assert kimi.spec.model.moe.first_dense_layers == 1
    assert params.count(kimi.spec.model) / 1e12 == pytest.approx(1.03, rel=0.01)  # "1 trillion total parameters"
    assert qwen.spec.model.moe.expert_ffn_hidden == 768 and qwen.spec.model.head_dim == 128


def test_a_truncated_note_leaves_the_models_own_router(map_snippet):
    # The snippet's notes stop before the gate and the kernels: the family's router stays.
    m = map_snippet(P.AUTOMODEL_DEEPSEEK)
    assert isinstance(m, Mapped)
    moe = m.spec.model.moe
    assert moe.router is Router.SIGMOID and moe.expert_bias and m.spec.parallel.dispatcher is Dispatcher.ALLTOALL


def test_a_clashing_dense_width_is_a_skip(map_snippet):
    result = map_snippet(P.edit(P.AUTOMODEL_DEEPSEEK, "ffn_hidden", "16384"))
    assert not isinstance(result, Mapped)
    assert "ffn_hidden 16384 differs from the DeepSeek-V3 config's 18432" in result.detail


@pytest.mark.parametrize("name, family", [
    ("DeepSeek V3 671B", "DeepSeek-V3"), ("DeepSeek-V3", "DeepSeek-V3"), ("Kimi K2", "Kimi K2"),
    ("Qwen3 MoE 30B", "Qwen3-30B-A3B"), ("Qwen3-30B-A3B", "Qwen3-30B-A3B"), ("Qwen3-235B-A22B", "Qwen3-235B-A22B"),
    ("GPT-OSS 20B", "gpt-oss-20b"), ("gpt-oss-120b", "gpt-oss-120b"), ("Mixtral 8x7B", "Mixtral 8x7B"),
    ("Mixtral-8x22B", "Mixtral 8x22B"),
])
def test_moe_families(name, family):
    fam = moe_family_of(name)
    assert fam is not None and fam.name == family


def test_no_moe_family_claims_a_dense_name():
    assert all(moe_family_of(n) is None for n in ("Llama3 70B", "Qwen2.5 32B", "GPT3-175B", "Nemotron V3 Nano 30B"))


def test_every_family_cites_its_config():
    assert all("config" in f.citation for f in MOE_FAMILIES)


@pytest.mark.parametrize("layers, chunks, expected", [
    (61, 32, [2] * 29 + [1] * 3), (48, 4, [12] * 4), (10, 4, [3, 3, 2, 2]),
])
def test_automodel_split_gives_the_first_stages_the_extra_layers(layers, chunks, expected):
    assert uneven(Uneven.FIRST_MORE, layers, chunks) == tuple(expected)
    assert sum(expected) == layers


def _bridge(snippet: str, **cells: str) -> str:
    """``snippet``'s step-time row as a Megatron-Bridge performance row (stack nemo), with ``cells`` changed
    (its throughput rows are left out: with another layout or GPU count they would contradict it)."""
    first = "".join(snippet.splitlines(keepends=True)[:2])
    out = P.edit(P.edit(first, "source", "megatron-bridge-perf-summary"), "source_ref",
                 "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md")
    for column, value in {"zero_stage_or_fsdp": "", "notes": "", **cells}.items():
        out = P.edit(out, column, value)
    return out


def test_deepseek_v3_on_pp8_vp4_runs_the_recipes_layout_with_ep_folded(map_snippet):
    # 1024 H100s, tp 2, pp 8 x vp 4, ep 64 > dp: Megatron-Bridge's H100 recipe (layout "Et|(tt|)*30mL").
    m = map_snippet(_bridge(P.AUTOMODEL_DEEPSEEK, tp="2", pp="8", vp="4", dp="64", ep="64"))
    assert isinstance(m, Mapped), m
    p, model = m.spec.parallel, m.spec.model
    assert m.spec.train.stack is Stack.NEMO and model.mtp_layers == 1
    assert p.pipeline_layout == "Et|(tt|)*30mL" and _said(m, "Megatron-Bridge", "deepseek_workload_base_configs.py")
    assert split(m.spec).chunks == (1,) + (2,) * 30 + (0,)
    assert (p.ep, p.dp, p.tp, p.etp) == (64, 64, 2, 1) and _said(m, "etp = 1", "deepseek_v3.py")
    assert predict(m.spec, residuals=None).step_time_s > 0


def test_an_ep_that_cannot_fold_with_etp_tp_runs_with_unsplit_experts(map_snippet):
    # tp 2, dp 8, ep 16: etp = tp gives 32 expert ranks for 16; the run split its experts less.
    row = _bridge(P.AUTOMODEL_DEEPSEEK, model_name="Qwen3 MoE 30B", layers="48", hidden="2048", heads="32",
                  kv_heads="4", ffn_hidden="6144", moe_experts="128", moe_topk="8", tp="2", pp="1", vp="1", dp="8",
                  ep="16", num_gpus="16", global_batch="256")
    m = map_snippet(row)
    assert isinstance(m, Mapped), m
    assert (m.spec.parallel.etp, m.spec.parallel.ep) == (1, 16) and _said(m, "etp = 1", "does not divide")


def test_a_moe_of_no_known_family_is_a_generic_moe_with_every_assumption_named(map_snippet):
    row = _bridge(P.AUTOMODEL_DEEPSEEK, model_name="GLM-5.2", layers="48", hidden="4096", heads="32",
                  kv_heads="8", ffn_hidden="1536", moe_experts="128", moe_topk="8", tp="1", pp="4", vp="1",
                  dp="32", ep="32", num_gpus="128")
    m = map_snippet(row)
    assert isinstance(m, Mapped), m
    moe = m.spec.model.moe
    assert (moe.experts, moe.top_k, moe.expert_ffn_hidden, moe.shared_experts, moe.first_dense_layers) == (
        128, 8, 1536, 0, 0)
    assert moe.router is Router.SOFTMAX and not moe.expert_bias and m.spec.model.mla is None
    assert any(a.startswith(GENERIC_MOE) for a in m.assumptions)
    for named in ("moe_ffn_hidden_size defaults to ffn_hidden_size", "no dense first layers", "no shared experts",
                  "router: softmax"):
        assert _said(m, named), named
    assert predict(m.spec, residuals=None).step_time_s > 0
