"""Published rows → .llmp text → resolved Spec: architecture, layout, defaults and skip reasons."""

from __future__ import annotations

from pathlib import Path

import published_rows as P
import pytest

from llmp import dsl
from llmp.analytic import params
from llmp.analytic.split import split
from llmp.spec.model import Activation, Arch, Norm, Position
from llmp.spec.spec import Attention, Precision, Recompute, Schedule, Stack, ZeroStage
from llmp.stacks import padded_vocab
from llmp.validate import group_measurements, map_measurement, read_csvs
from llmp.validate.mapping import Mapped, Skipped
from llmp.validate.metrics import Quantity, megatron_sc21_flops
from llmp.validate.models import family_of
from llmp.validate.notes import MemoryKind
from llmp.validate.skips import SkipReason

VALIDATION = Path(__file__).resolve().parents[3] / "validation"


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
    assert m.reading.name == "tokens_per_sec" and not m.reading.per_gpu
    assert m.measured_s == pytest.approx(4096 * 2048 / 515636)
    assert _said(m, "MPT family")
    assert m.spec.train.stack is Stack.COMPOSER and _said(m, "stack: composer", "llm-foundry")


def test_llm_foundry_a100_40gb_runs_on_the_1600_gbps_roce_node(map_snippet):
    m = _mapped(map_snippet(P.MPT_7B_A100_40GB))
    cl = m.spec.cluster
    assert cl.node.id == "mosaicml_a100_40gb"
    assert cl.inter.bandwidth == pytest.approx(1600e9 / 8)
    assert m.spec.model.seq_len == 16384 and m.spec.train.global_batch == 32


def test_sc21_table1_uses_the_paper_flop_formula(map_snippet):
    m = _mapped(map_snippet(P.SC21_1P7B))
    assert m.reading.quantity is Quantity.FLOP_RATE
    assert m.spec.train.stack is Stack.MEGATRON_LM
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
    assert m.reading.name == "achieved_tflops_per_gpu"  # preferred to the derived training days
    # DeepSpeed ran ZeRO-3 there, not Megatron-LM: no stack profile models DeepSpeed ZeRO-3
    assert m.spec.train.stack is Stack.GENERIC and _said(m, "DeepSpeed ZeRO-3", "no stack profile")


def test_megatron_2020_single_v100_uses_part_of_a_dgx2(map_snippet):
    m = _mapped(map_snippet(P.README2020_V100_1GPU))
    cl = m.spec.cluster
    assert cl.node.gpu.id == "v100_sxm3_32gb" and cl.node.gpus_per_node == 1 and cl.nodes == 1
    assert cl.node.intra.id == "nvlink2"
    assert m.reading.name == "iteration_time_ms" and m.measured_s == pytest.approx(1.121)
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
    assert m.spec.train.stack is Stack.NEMO
    assert p.sequence_parallel and p.tp_comm_overlap and p.zero is ZeroStage.Z1
    assert _said(m, "sequence_parallel blank: true") and _said(m, "zero_stage_or_fsdp blank: zero = 1", "stack nemo")
    assert "stack = nemo" in m.text and "zero =" not in m.text  # the profile decides, the text does not repeat it
    assert m.measured_s == pytest.approx(128 * 4096 / (1728 * 64))


def test_nemo_gpt3_fills_vocab_and_kv_heads(map_snippet):
    m = _mapped(map_snippet(P.NEMO_GPT3_5B))
    assert m.spec.model.vocab == 50304 and _said(m, "vocab blank: 50304")
    assert m.spec.model.kv_heads == 32 and _said(m, "kv_heads blank")


def test_nemotron_family(map_snippet):
    m = _mapped(map_snippet(P.NEMO_NEMOTRON_8B))
    model = m.spec.model
    assert (model.activation, model.position, model.bias, model.tied_embeddings, model.rotary_pct) == (
        Activation.SQUARED_RELU, Position.ROTARY, False, False, 0.5)
    assert not model.activation.gated
    assert model.vocab == 256000


def test_nemotron_4_340b_has_340b_parameters(map_snippet):
    # NVIDIA's Nemotron-4 340B: squared-ReLU MLP without a gate (a SwiGLU reading gave 471 G).
    m = _mapped(map_snippet(P.NEMO_NEMOTRON_340B))
    assert params.count(m.spec.model, padded_vocab(m.spec)) == pytest.approx(341e9, rel=0.01)


def test_nemotron_4_340b_reduces_gradients_in_bf16_as_its_recipe_did(map_snippet):
    # FP8 on NeMo keeps FP32 main grads unless the recipe says otherwise; Nemotron-4 340B's
    # launcher config sets optim.grad_sync_dtype: bf16.
    m = _mapped(map_snippet(P.NEMO_NEMOTRON_340B))
    assert m.spec.train.fp32_grads is False and _said(m, "nemotron_340b.yaml", "grad_sync_dtype: bf16")
    other = _mapped(map_snippet(P.edit(P.NEMO_NEMOTRON_340B, "model_name", "Nemotron-340B-other")))
    assert other.spec.train.fp32_grads is None


def test_nemo_24_07_rows_keep_what_their_launcher_configs_say(map_snippet):
    # GPT3-5B: 5b_fp8_8node.sh passes optim.grad_sync_dtype=bf16, and gpt3/5b.yaml trains with Apex
    # distributed_fused_adam under megatron_amp_O2, for which NeMo 1 keeps parameter remainders.
    m = _mapped(map_snippet(P.NEMO_GPT3_5B))
    assert m.spec.train.fp32_grads is False and m.spec.train.master_remainders is True
    assert _said(m, "fp32_grads = false", "5b_fp8_8node.sh", "grad_sync_dtype=bf16")
    assert _said(m, "master_remainders = true", "gpt3/5b.yaml", "distributed_fused_adam", "store_param_remainders")
    bf16 = _mapped(map_snippet(P.edit(P.edit(P.NEMO_GPT3_5B, "precision", "BF16"), "dtype", "bf16")))
    assert bf16.spec.train.fp32_grads is None and bf16.spec.train.master_remainders is True  # the script is FP8's
    # Nemotron-8B's FP8 script leaves grad_sync_dtype at NeMo 1's FP32 default; its config is Apex's optimizer.
    n8 = _mapped(map_snippet(P.NEMO_NEMOTRON_8B)).spec.train
    assert n8.fp32_grads is None and n8.master_remainders is True
    # Nemotron-4 340B runs Megatron-Core's distributed optimizer: whole FP32 main parameters.
    n340 = _mapped(map_snippet(P.NEMO_NEMOTRON_340B)).spec.train
    assert n340.fp32_grads is False and n340.master_remainders is False
    other = _mapped(map_snippet(P.edit(P.NEMO_GPT3_5B, "model_name", "GPT3-5B-other"))).spec.train
    assert other.fp32_grads is None and other.master_remainders is False


def test_megatron_llama_fp8_examples_store_fp8_parameters_as_their_recipe_does(map_snippet):
    # train_llama3_8b_h100_fp8.sh passes --fp8-param-gather; the README's 70B/405B rows follow NeMo's
    # performance recipes, whose bf16_with_fp8_mixed sets fp8_param_gather = True.
    m = _mapped(map_snippet(P.MISC_LLAMA3_405B))
    assert m.spec.train.fp8_param_gather is True
    assert _said(m, "fp8_param_gather = true", "bf16_with_fp8_mixed", "train_llama3_8b_h100_fp8.sh")
    bf16 = P.edit(P.edit(P.MISC_LLAMA3_405B, "precision", "BF16"), "dtype", "bf16")
    assert _mapped(map_snippet(bf16)).spec.train.fp8_param_gather is False  # the recipe is FP8's


def test_nemo_24_07_fp8_rows_keep_bf16_parameters(map_snippet):
    # NeMo 24.07's launcher configs and H100 FP8 scripts set no fp8_params: not assumed.
    assert _mapped(map_snippet(P.NEMO_NEMOTRON_340B)).spec.train.fp8_param_gather is False


def test_automodel_llama3_70b_prefers_the_step_time(map_snippet):
    m = _mapped(map_snippet(P.AUTOMODEL_LLAMA3_70B))
    assert m.reading.quantity is Quantity.STEP_TIME and m.measured_s == pytest.approx(18.90)
    assert (m.spec.parallel.cp, m.spec.parallel.dp, m.spec.parallel.zero) == (2, 32, ZeroStage.FSDP)
    assert m.spec.train.stack is Stack.NEMO_AUTOMODEL
    assert m.spec.train.recompute is Recompute.FULL and _said(m, "activation_checkpointing: True")


def test_mt_nlg_fills_micro_batch_for_a_pipeline(map_snippet):
    m = _mapped(map_snippet(P.MISC_MTNLG))
    assert m.spec.train.micro_batch == 1 and _said(m, "micro_batch blank: 1")
    assert m.spec.train.recompute is Recompute.FULL and m.reading.name == "iteration_time_s"
    assert m.spec.train.stack is Stack.MEGATRON_DEEPSPEED


def test_bloom_splits_its_70_layers_over_12_stages_as_its_training_script_did(map_snippet):
    # tr11-176B-ml.slurm: --pp-partition-method 'type:transformer|embedding': 70 layers + 2 embeddings
    # balanced over 12 stages, so the first and last stage hold 5 layers and the others 6.
    m = _mapped(map_snippet(P.MISC_BLOOM))
    assert m.spec.parallel.pp == 12 and m.spec.parallel.partition == "type:transformer|embedding"
    assert _said(m, "tr11-176B-ml.slurm")
    assert split(m.spec).stages(12) == (5,) + (6,) * 10 + (5,)


def test_a_partition_the_notes_state_wins_over_the_sources(map_snippet):
    note = P.MISC_BLOOM.splitlines()[1].rsplit(",", 1)[1]
    m = _mapped(map_snippet(P.edit(P.MISC_BLOOM, "notes", note + "; --pp-partition-method 'type:transformer'")))
    assert m.spec.parallel.partition == "type:transformer" and not _said(m, "tr11-176B-ml.slurm")


def test_megatron_first_and_last_stage_flags_give_the_uneven_split(map_snippet):
    m = _mapped(map_snippet(P.FUNCTIONAL_UNEVEN))
    p = m.spec.parallel
    assert (p.first_stage_layers, p.last_stage_layers) == (2, 2)
    assert split(m.spec).chunks == (2, 4, 4, 2)


def test_megatron_embedding_and_loss_accounting_leaves_the_end_chunks_empty(map_snippet):
    # 6 layers + embedding + loss over pp 4 x vp 2 = 8 chunks: one each, the first and last build none.
    m = _mapped(map_snippet(P.FUNCTIONAL_ACCOUNT))
    assert m.spec.parallel.account_for_embedding and m.spec.parallel.account_for_loss
    assert split(m.spec).chunks == (0, 1, 1, 1, 1, 1, 1, 0)


def test_llama3_405b_on_pp8_vp8_runs_the_recipes_split(map_snippet):
    m = _mapped(map_snippet(P.MISC_LLAMA3_405B))
    p = m.spec.parallel
    assert (p.pp, p.vp) == (8, 8) and p.account_for_embedding and p.account_for_loss
    assert _said(m, "Megatron-Bridge", "llama31_405b.py")
    assert split(m.spec).stages(8) == (15,) + (16,) * 6 + (15,)


def test_a_megatron_core_recipe_spreads_layers_that_the_accounting_does_not_divide(map_snippet):
    # 125 layers on pp 8 x vp 8: 127 accounted do not divide 64 chunks; the recipes' accounting,
    # spread as evenly as the chunks allow (1 + 63 x 2 counted), as a Megatron-Core pipeline layout.
    m = _mapped(map_snippet(P.edit(P.MISC_LLAMA3_405B, "layers", "125")))
    assert m.spec.parallel.pipeline_layout == "E|" + "tt|" * 62 + "tL" and _said(m, "pipeline_layout", "accounted")
    assert split(m.spec).chunks == (0,) + (2,) * 62 + (1,)


@pytest.mark.parametrize("snippet", [
    P.edit(P.SC21_530B, "layers", "104"),  # Megatron-LM, 35 stages x 3 chunks
], ids=["megatron_lm"])
def test_layers_that_do_not_divide_without_a_stated_split_are_skipped_naming_the_options(map_snippet, snippet):
    result = map_snippet(snippet)
    assert isinstance(result, Skipped) and result.reason is SkipReason.UNSTATED_SPLIT
    for option in ("--decoder-first/last-pipeline-num-layers", "--account-for-embedding/loss-in-pipeline-split",
                   "stage_layers", "partition"):
        assert option in result.detail


def test_a_tunable_interleaved_schedule_keeps_its_microbatch_group(map_snippet):
    # GA 5 on pp 4: Megatron runs it with --microbatch-group-size-per-virtual-pipeline-stage=5.
    m = _mapped(map_snippet(P.FUNCTIONAL_TUNABLE))
    assert m.spec.parallel.microbatch_group == 5 and m.spec.microbatches == 5
    assert m.spec.parallel.schedule is Schedule.INTERLEAVED and m.spec.parallel.vp == 3


@pytest.mark.parametrize("snippet, reason, detail", [
    (P.NEMO_DPO, SkipReason.FINE_TUNING, "[DPO]"),
    (P.AUTOMODEL_NEMOTRON_V3, SkipReason.MISSING_ARCHITECTURE, "layers, hidden, heads blank"),
    (P.edit(P.edit(P.AUTOMODEL_DEEPSEEK, "model_name", "Mystery MoE 1T"), "ffn_hidden", ""),
     SkipReason.MISSING_ARCHITECTURE, "ffn_hidden (the expert width) blank: a MoE of no known family"),
    (P.edit(P.AUTOMODEL_DEEPSEEK, "layers", "60"), SkipReason.MOE,
     "matches the DeepSeek-V3 family but the row disagrees with its config: layers 60 (config 61)"),
    (P.MISC_LLAMA65B, SkipReason.MISSING_LAYOUT, "tp, pp and dp are all blank"),
    (P.MISC_LLAMA31, SkipReason.NO_TIME_METRIC, "model_tflops_per_gpu"),
    (P.edit(P.AUTOMODEL_LLAMA3_70B, "zero_stage_or_fsdp", "HSDP (FSDP=8)"), SkipReason.UNEXPRESSIBLE,
     "shards over 8 ranks of dp·cp = 64 (hybrid sharding)"),
    (P.edit(P.SC21_1P7B, "metric_unit", "furlongs", row=1), SkipReason.UNKNOWN_UNIT, "'furlongs' not understood"),
    (P.edit(P.SC21_1P7B, "metric_unit", "s", row=1), SkipReason.UNKNOWN_UNIT, "measures time"),
    (P.edit(P.SC21_1P7B, "recompute", "some layers"), SkipReason.CELL, "recompute 'some layers' not understood"),
    (P.edit(P.SC21_1P7B, "sequence_parallel", "maybe"), SkipReason.CELL, "sequence_parallel 'maybe'"),
    (P.edit(P.NEMO_LLAMA2_70B, "precision", "BF16"), SkipReason.CELL, "name different formats"),
    (P.edit(P.SC21_1P7B, "notes", "RMSNorm; LayerNorm"), SkipReason.CELL, "notes state model.norm both"),
    (P.edit(P.SC21_1P7B, "gpu_id", "tpu_v5p"), SkipReason.UNKNOWN_GPU, "'tpu_v5p'"),
    (P.edit(P.edit(P.SC21_1P7B, "dtype", "fp8"), "precision", "FP8"), SkipReason.UNSUPPORTED_DTYPE, "no fp8 peak"),
    (P.edit(P.edit(P.NEMO_LLAMA2_70B, "dtype", "nvfp4"), "precision", "NVFP4"), SkipReason.UNSUPPORTED_DTYPE,
     "no nvfp4 peak"),  # an NVFP4 row on an H100: the format has no tensor cores there
    (P.edit(P.SC21_1P7B, "global_batch", ""), SkipReason.MISSING_BATCH, "global_batch blank"),
    (P.edit(P.SC21_1P7B, "gpus_per_node", "16"), SkipReason.UNKNOWN_GPU, "no catalog node has 16 x a100_sxm4_80gb"),
], ids=lambda x: x.name if isinstance(x, SkipReason) else "")
def test_unmodellable_rows_are_skipped_with_a_specific_reason(map_snippet, snippet, reason, detail):
    result = map_snippet(snippet)
    assert isinstance(result, Skipped)
    assert result.reason is reason
    assert detail in result.detail


def test_the_spec_error_is_the_resolvers_diagnostic(map_snippet):
    # 1000 sequences do not make whole microbatches of 16 on 32 replicas, as the resolver says.
    result = map_snippet(P.edit(P.SC21_1P7B, "global_batch", "1000"))
    assert isinstance(result, Skipped) and result.reason is SkipReason.SPEC_ERROR
    assert "error:" in result.detail and "train.global_batch(1000) % (micro_batch(16) * dp(32))" in result.detail


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
    assert m.spec.train.stack is Stack.GENERIC
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


def test_an_unreadable_sharding_cell_is_a_skip_not_a_guess(map_snippet):
    result = map_snippet(P.edit(P.SC21_1P7B, "zero_stage_or_fsdp", "Colossal gemini"))
    assert isinstance(result, Skipped) and "zero_stage_or_fsdp 'Colossal gemini' not understood" in result.detail


# --- the stack comes from the row -------------------------------------------------------------

def _synthetic(snippet: str, **cells: str) -> str:
    for column, value in cells.items():
        snippet = P.edit(snippet, column, value)
    return snippet


DGX_CLOUD = _synthetic(P.NEMO_LLAMA2_70B, source="dgx-cloud-benchmarking",
                       source_ref="NVIDIA/dgxc-benchmarking@0a1b2c3:llama3.1/70b/README.md (synthetic test row)")
MEGATRON_BRIDGE = _synthetic(P.NEMO_LLAMA2_70B, source="megatron-bridge-perf-summary",
                             source_ref="NVIDIA-NeMo/Megatron-Bridge@0a1b2c3:docs/performance-summary.md (synthetic)")


@pytest.mark.parametrize("snippet, stack", [
    (P.MPT_70B_H100, Stack.COMPOSER), (P.SC21_1P7B, Stack.MEGATRON_LM), (P.README2020_8B_1024, Stack.MEGATRON_LM),
    (P.NEMO_LLAMA2_70B, Stack.NEMO), (P.AUTOMODEL_LLAMA3_70B, Stack.NEMO_AUTOMODEL),
    (P.MISC_MTNLG, Stack.MEGATRON_DEEPSPEED),
    (P.FUNCTIONAL_7B_H100, Stack.MEGATRON_CORE), (P.TORCHTITAN_8B, Stack.TORCHTITAN), (DGX_CLOUD, Stack.NEMO),
    (MEGATRON_BRIDGE, Stack.NEMO), (_synthetic(P.README2020_8B_1024, source="megatron-lm-examples-llama",
                                               source_ref="examples"),
     Stack.MEGATRON_CORE),
    (_synthetic(P.README2020_8B_1024, source="some-lab-blog", source_ref="a blog post"), Stack.GENERIC),
    (_synthetic(P.README2020_8B_1024, source="some-lab-blog", source_ref="a blog post",
                notes="flags: --transformer-impl=local"), Stack.MEGATRON_CORE),
], ids=["foundry", "sc21", "readme2020", "nemo", "automodel", "mt-nlg", "megatron-ci", "torchtitan", "dgx-cloud",
        "megatron-bridge", "megatron-examples", "unknown", "unknown-with-megatron-flags"])
def test_the_stack_comes_from_the_row(map_snippet, snippet, stack):
    m = _mapped(map_snippet(snippet))
    assert m.spec.train.stack is stack
    assert f"stack = {stack.value}" in m.text and _said(m, f"stack: {stack.value}")


@pytest.mark.parametrize("snippet", [DGX_CLOUD, MEGATRON_BRIDGE], ids=["dgx-cloud", "megatron-bridge"])
def test_dgx_cloud_and_megatron_bridge_rows_run_the_nemo_recipes(map_snippet, snippet):
    # They used to get "unknown framework" defaults: no SP, no TP overlap, no distributed optimizer.
    p = _mapped(map_snippet(snippet)).spec.parallel
    assert p.sequence_parallel and p.tp_comm_overlap and p.zero is ZeroStage.Z1 and p.param_gather_overlap


def test_row_cells_override_the_profile_only_where_stated(map_snippet):
    m = _mapped(map_snippet(_synthetic(DGX_CLOUD, sequence_parallel="no", zero_stage_or_fsdp="DDP (FSDP=0)")))
    p = m.spec.parallel
    assert not p.sequence_parallel and p.zero is ZeroStage.NONE
    assert not p.tp_comm_overlap and _said(m, "tp_comm_overlap = false", "needs sequence parallelism")
    assert p.dp_overlap  # not stated: the stack's


def test_fsdp2_cells_and_torchtitan(map_snippet):
    m = _mapped(map_snippet(P.TORCHTITAN_8B))
    t, p = m.spec.train, m.spec.parallel
    assert p.zero is ZeroStage.FSDP and t.recompute is Recompute.SELECTIVE and t.attention is Attention.SDPA
    assert m.spec.cluster.node.id == "grand_teton_h100_96gb" and m.spec.cluster.node.gpu.memory > 90 * 2**30
    assert m.reading.name == "tokens_per_sec_per_gpu"
    (mem,) = m.memory
    assert mem.kind is MemoryKind.RESERVED and mem.bytes == pytest.approx(82.4 * 2**30)


def test_megatron_ci_row_reads_its_flags_and_architecture_notes(map_snippet):
    m = _mapped(map_snippet(P.FUNCTIONAL_7B_H100))
    model, t, p = m.spec.model, m.spec.train, m.spec.parallel
    # GQA with a GeLU MLP and LayerNorm: the notes say so, the columns alone would say Llama
    assert model.arch is Arch.GPT and model.activation is Activation.GELU and model.norm is Norm.LAYERNORM
    assert model.kv_heads == 8 and not model.tied_embeddings
    assert padded_vocab(m.spec) == 131200 and t.vocab_divisible_by == 128
    assert not t.grad_accum_fusion and p.dp_overlap and p.param_gather_overlap
    assert p.zero is ZeroStage.Z1 and not p.sequence_parallel and p.vp == 8
    assert _said(m, "not modelled: --deterministic-mode")
    (mem,) = m.memory
    assert mem.kind is MemoryKind.ALLOCATED and mem.one_rank


def test_local_transformer_implementation_runs_unfused_attention(map_snippet):
    m = _mapped(map_snippet(P.FUNCTIONAL_LOCAL_IMPL))
    assert m.spec.train.attention is Attention.UNFUSED_FUSED_SOFTMAX
    assert m.spec.parallel.zero is ZeroStage.NONE and _said(m, "none (Megatron DDP)")


def test_architecture_notes_override_the_family_and_the_columns(map_snippet):
    row = _synthetic(P.NEMO_LLAMA2_70B, model_name="Mystery-70B", source="some-lab", source_ref="blog",
                     notes="activation gelu; untie-embeddings; rotary 25%; parallel residual")
    m = _mapped(map_snippet(row))
    model = m.spec.model
    assert model.arch is Arch.GPT and _said(m, "the notes name the MLP")
    assert model.activation is Activation.GELU and not model.tied_embeddings
    assert model.rotary_pct == 0.25 and model.position is Position.ROTARY and model.parallel_residual


@pytest.mark.slow  # maps every published row: ~80 s
def test_every_validation_row_is_understood():
    # Every cell, unit and note of every published file is read: no skip says "not understood".
    measurements = group_measurements(read_csvs(sorted(str(p) for p in VALIDATION.glob("*.csv"))))
    reasons = {}
    for m in measurements:
        result = map_measurement(m)
        if isinstance(result, Skipped):
            reasons[m.config.key] = (result.reason, result.detail)
    misunderstood = {k: v for k, v in reasons.items() if v[0] in (SkipReason.CELL, SkipReason.UNKNOWN_UNIT)}
    assert misunderstood == {}
    assert len(measurements) - len(reasons) > 350
