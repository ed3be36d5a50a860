"""Published rows → .llmp text → resolved Spec: architecture, layout, defaults and skip reasons."""

from __future__ import annotations

import pytest

from llmp import dsl
from llmp.analytic import params
from llmp.dsl.spec import Activation, Arch, Position, Precision, Recompute, Schedule, ZeroStage
from llmp.validate.frameworks import zero_stage
from llmp.validate.mapping import Mapped, Skipped
from llmp.validate.metrics import Metric, megatron_sc21_flops
from llmp.validate.models import family_of
from llmp.validate.skips import SkipReason
from tests.validate import published_rows as P


def _mapped(result: Mapped | Skipped) -> Mapped:
    assert isinstance(result, Mapped), f"skipped: {result.reason}: {result.detail}"
    return result


def _said(m: Mapped, *fragments: str) -> bool:
    """Some recorded assumption mentions every fragment."""
    return any(all(f in a for f in fragments) for a in m.assumptions)


def test_llm_foundry_mpt_70b_on_h100(map_snippet):
    m = _mapped(map_snippet(P.MPT_70B_H100))
    model, par, cl = m.spec.model, m.spec.parallel, m.spec.cluster
    assert (model.layers, model.hidden, model.heads, model.ffn_hidden, model.vocab, model.seq_len) == (
        80, 8192, 64, 32768, 50368, 2048)
    assert model.arch is Arch.GPT and model.position is Position.LEARNED and model.bias and model.tied_embeddings
    # The table's NumParams (64,862,437,376) is exactly the count of the mapped architecture.
    assert params.count(model) == 64_862_437_376
    assert (par.tp, par.pp, par.dp, par.zero) == (1, 1, 512, ZeroStage.FSDP)
    assert (cl.node.id, cl.nodes, cl.node.gpu.id) == ("dgx_h100", 64, "h100_sxm5_80gb")
    assert m.spec.train.recompute is Recompute.FULL and m.spec.train.micro_batch == 8
    assert m.spec.train.precision is Precision.BF16
    # tokens/s has more significant digits than tokens/s/GPU: it is the preferred throughput.
    assert m.metric is Metric.TOKENS_PER_SEC
    assert m.measured_s == pytest.approx(4096 * 2048 / 515636)
    assert _said(m, "MPT family")


def test_llm_foundry_a100_40gb_runs_on_the_1600_gbps_roce_node(map_snippet):
    m = _mapped(map_snippet(P.MPT_7B_A100_40GB))
    cl = m.spec.cluster
    assert cl.node.id == "mosaicml_a100_40gb"
    assert cl.inter.bandwidth == pytest.approx(1600e9 / 8)
    assert m.spec.model.seq_len == 16384 and m.spec.train.global_batch == 32


def test_sc21_table1_uses_the_paper_flop_formula(map_snippet):
    m = _mapped(map_snippet(P.SC21_1P7B))
    assert m.metric is Metric.ACHIEVED_TFLOPS_PER_GPU
    flops = megatron_sc21_flops(global_batch=512, seq_len=2048, layers=24, hidden=2304, vocab=51200)
    assert m.measured_s == pytest.approx(flops / (137e12 * 32))
    assert _said(m, "96·B·s·l·h²")
    t, p = m.spec.train, m.spec.parallel
    assert (t.micro_batch, t.global_batch, t.recompute, t.precision) == (16, 512, Recompute.FULL, Precision.FP16)
    assert (p.tp, p.pp, p.dp) == (1, 1, 32)
    assert m.spec.cluster.node.id == "dgx_a100" and m.spec.cluster.nodes == 4


def test_sc21_interleaved_pipeline(map_snippet):
    m = _mapped(map_snippet(P.SC21_530B))
    p = m.spec.parallel
    assert (p.tp, p.pp, p.dp, p.vp, p.schedule) == (8, 35, 9, 3, Schedule.INTERLEAVED)
    assert m.spec.cluster.nodes == 315


def test_sc21_table2_zero3_recompute_comes_from_the_source(map_snippet):
    m = _mapped(map_snippet(P.SC21_ZERO3_175B))
    assert m.spec.parallel.zero is ZeroStage.Z3
    assert m.spec.train.recompute is Recompute.FULL
    assert _said(m, "recompute blank: full", "FLOP convention")
    assert m.metric is Metric.ACHIEVED_TFLOPS_PER_GPU  # preferred to the derived training days


def test_megatron_2020_single_v100_uses_part_of_a_dgx2(map_snippet):
    m = _mapped(map_snippet(P.README2020_V100_1GPU))
    cl = m.spec.cluster
    assert cl.node.gpu.id == "v100_sxm3_32gb" and cl.node.gpus_per_node == 1 and cl.nodes == 1
    assert cl.node.intra.id == "nvlink2"
    assert m.metric is Metric.ITERATION_TIME_MS and m.measured_s == pytest.approx(1.121)
    assert m.spec.train.micro_batch == 8 and _said(m, "micro_batch blank: global_batch/dp = 8")
    assert m.spec.train.precision is Precision.FP16 and _said(m, "dtype blank")
    assert m.spec.model.ffn_hidden == 4 * 1920 and _said(m, "ffn_hidden blank")
    assert "node dgx2_v100_1gpu {" in m.text
    # The generated text is a spec in its own right.
    assert dsl.loads(m.text).cluster.world_size == 1


def test_megatron_2020_weak_scaling_row(map_snippet):
    m = _mapped(map_snippet(P.README2020_8B_1024))
    assert (m.spec.cluster.node.id, m.spec.cluster.nodes) == ("dgx_a100", 128)
    assert (m.spec.parallel.tp, m.spec.parallel.dp) == (8, 128)
    assert m.spec.train.micro_batch == 16  # 2048 / dp 128, no gradient accumulation in 2020


def test_nemo_llama2_70b_fp8(map_snippet):
    m = _mapped(map_snippet(P.NEMO_LLAMA2_70B))
    model, p = m.spec.model, m.spec.parallel
    assert model.arch is Arch.LLAMA and model.kv_heads == 8 and model.activation is Activation.SWIGLU
    assert m.spec.train.precision is Precision.FP8
    assert (p.tp, p.pp, p.dp, p.vp, p.schedule) == (4, 4, 4, 20, Schedule.INTERLEAVED)
    assert p.sequence_parallel and p.tp_comm_overlap and p.zero is ZeroStage.Z1
    assert _said(m, "sequence_parallel blank: true") and _said(m, "zero blank: 1")
    assert m.measured_s == pytest.approx(128 * 4096 / (1728 * 64))


def test_nemo_gpt3_fills_vocab_and_kv_heads(map_snippet):
    m = _mapped(map_snippet(P.NEMO_GPT3_5B))
    assert m.spec.model.vocab == 50304 and _said(m, "vocab blank: 50304")
    assert m.spec.model.kv_heads == 32 and _said(m, "kv_heads blank")


def test_nemotron_family(map_snippet):
    m = _mapped(map_snippet(P.NEMO_NEMOTRON_8B))
    model = m.spec.model
    assert (model.activation, model.position, model.bias, model.tied_embeddings) == (
        Activation.RELU, Position.ROTARY, False, False)
    assert model.vocab == 256000
    assert _said(m, "not modelled: squared ReLU")


def test_automodel_llama3_70b_prefers_the_step_time(map_snippet):
    m = _mapped(map_snippet(P.AUTOMODEL_LLAMA3_70B))
    assert m.metric is Metric.ITERATION_TIME_S and m.measured_s == pytest.approx(18.90)
    assert (m.spec.parallel.cp, m.spec.parallel.dp, m.spec.parallel.zero) == (2, 32, ZeroStage.FSDP)


def test_mt_nlg_fills_micro_batch_for_a_pipeline(map_snippet):
    m = _mapped(map_snippet(P.MISC_MTNLG))
    assert m.spec.train.micro_batch == 1 and _said(m, "micro_batch blank: 1")
    assert m.spec.train.recompute is Recompute.FULL and m.metric is Metric.ITERATION_TIME_S


@pytest.mark.parametrize("snippet, reason, detail", [
    (P.NEMO_LORA, SkipReason.FINE_TUNING, "[LoRA]"),
    (P.AUTOMODEL_NEMOTRON_V3, SkipReason.MISSING_ARCHITECTURE, "layers, hidden, heads blank"),
    (P.AUTOMODEL_DEEPSEEK, SkipReason.MOE, "256 experts, top-8"),
    (P.MISC_LLAMA65B, SkipReason.MISSING_LAYOUT, "tp, pp and dp are all blank"),
    (P.MISC_LLAMA31, SkipReason.NO_TIME_METRIC, "model_tflops_per_gpu"),
    (P.MISC_BLOOM, SkipReason.SPEC_ERROR, "model.layers(70) % (pp(12) * vp(1))"),
    (P.edit(P.SC21_1P7B, "gpu_id", "tpu_v5p"), SkipReason.UNKNOWN_GPU, "'tpu_v5p'"),
    (P.edit(P.SC21_1P7B, "dtype", "fp8"), SkipReason.UNSUPPORTED_DTYPE, "no fp8 peak"),
    (P.edit(P.NEMO_LLAMA2_70B, "dtype", "nvfp4"), SkipReason.UNSUPPORTED_DTYPE, "dtype nvfp4"),
    (P.edit(P.SC21_1P7B, "global_batch", ""), SkipReason.MISSING_BATCH, "global_batch blank"),
    (P.edit(P.SC21_1P7B, "gpus_per_node", "16"), SkipReason.UNKNOWN_GPU, "no catalog node has 16 x a100_sxm4_80gb"),
], ids=lambda x: x.name if isinstance(x, SkipReason) else "")
def test_unmodellable_rows_are_skipped_with_a_specific_reason(map_snippet, snippet, reason, detail):
    result = map_snippet(snippet)
    assert isinstance(result, Skipped)
    assert result.reason is reason
    assert detail in result.detail


def test_the_spec_error_is_the_resolvers_diagnostic(map_snippet):
    result = map_snippet(P.MISC_BLOOM)
    assert isinstance(result, Skipped)
    assert "error: not divisible:" in result.detail and "pp = 12" in result.detail


MEASURED_BY_US = P.HEADER + (
    # Written by `llmp measure examples/tiny_cpu.llmp --csv ...` on the dev VM (notes shortened).
    "llmp measure,examples/tiny_cpu.llmp,tiny_gpt,0.000544256,2,128,4,4,512,1024,128,,,"
    "Intel(R) Xeon(R) Processor @ 2.50GHz,cpu,1,1,,,1,1,1,1,1,1,4,8,false,none,none,fp32,,"
    "iteration_time_s,0.0799188,s,llmp measure; torch 2.13.0+cpu; threads 1\n")


def test_rows_measured_by_us_on_the_cpu_are_accepted(map_snippet):
    m = _mapped(map_snippet(MEASURED_BY_US))
    assert m.spec.cluster.node.id == "cpu_host" and m.spec.train.precision is Precision.FP32
    assert m.spec.model.arch is Arch.GPT and _said(m, "no known family")
    assert _said(m, "fp32 from the precision column") and _said(m, "llmp measure")
    assert m.measured_s == pytest.approx(0.0799188)
    assert (m.spec.train.micro_batch, m.spec.train.global_batch, m.spec.model.ffn_hidden) == (4, 8, 512)


@pytest.mark.parametrize("name, arch", [
    ("MPT-30b", Arch.GPT), ("GPT3-175B", Arch.GPT), ("GPT 1T (Megatron-LM SC21)", Arch.GPT),
    ("LLAMA3-70B", Arch.LLAMA), ("Llama 3.1 405B (pre-training)", Arch.LLAMA), ("Qwen2.5 7B [LoRA]", Arch.LLAMA),
])
def test_model_families(name, arch):
    family = family_of(name)
    assert family is not None and family.arch is arch


def test_unknown_names_are_not_claimed_by_a_family():
    assert family_of("GPT-OSS 120B") is None
    assert family_of("Qwen3 MoE 30B") is None


def test_arch_is_inferred_from_columns_for_unknown_families(map_snippet):
    gqa = P.edit(P.edit(P.NEMO_LLAMA2_70B, "model_name", "Mystery-70B"), "source", "somebody")
    m = _mapped(map_snippet(gqa))
    assert m.spec.model.arch is Arch.LLAMA and _said(m, "kv_heads 8 < heads 64")
    mha = P.edit(P.SC21_1P7B, "model_name", "Mystery-2B")
    m = _mapped(map_snippet(mha))
    assert m.spec.model.arch is Arch.GPT


@pytest.mark.parametrize("cell, stage", [
    ("FSDP FULL_SHARD", ZeroStage.FSDP), ("FSDP SHARD_GRAD_OP", ZeroStage.Z2), ("FSDP2 (FSDP=64)", ZeroStage.FSDP),
    ("FSDP (FairScale) + Megatron tensor parallelism", ZeroStage.FSDP), ("ZeRO-3 (DeepSpeed)", ZeroStage.Z3),
    ("ZeRO-1 (DeepSpeed BF16_Optimizer)", ZeroStage.Z1), ("ZeRO-0", ZeroStage.NONE), ("none", ZeroStage.NONE),
    ("tensor sharding of some kind", None),
])
def test_zero_stage_cells(cell, stage):
    assert zero_stage(cell) is stage


def test_an_unreadable_sharding_cell_is_a_skip_not_a_guess(map_snippet):
    result = map_snippet(P.edit(P.SC21_1P7B, "zero_stage_or_fsdp", "Colossal gemini"))
    assert isinstance(result, Skipped) and "zero_stage_or_fsdp 'Colossal gemini' not understood" in result.detail
