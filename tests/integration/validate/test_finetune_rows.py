"""Fine-tuning rows of validation/ (NeMo 24.07 SFT and LoRA, NeMo AutoModel LoRA) map to
``train.finetune`` specs with their recipes' settings written on the row, and predict."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import published_rows as P
import pytest

from llmp.compose import predict
from llmp.spec.spec import FinetuneMethod, Recompute, Schedule, ZeroStage
from llmp.validate.mapping import Mapped, map_measurement
from llmp.validate.rows import group_measurements, read_csv

VALIDATION = Path(__file__).parents[3] / "validation"
FILES = ("nemo_24_07_perf_summary.csv", "nemo_automodel_perf_summary.csv")


@functools.cache
def _rows() -> dict[str, Mapped]:
    """Every fine-tuning measurement of the two files, mapped, by model name."""
    out = {}
    for name in FILES:
        for m in group_measurements(read_csv(VALIDATION / name)):
            model = m.config.text("model_name")
            if "[LoRA]" in model or "[SFT]" in model:
                mapped = map_measurement(m)
                assert isinstance(mapped, Mapped), f"{model} skipped: {mapped.reason}: {mapped.detail}"
                out[model] = mapped
    return out


def _said(m: Mapped, *fragments: str) -> bool:
    return any(all(f in a for f in fragments) for a in m.assumptions)


def test_every_fine_tuning_row_of_both_files_maps_and_predicts():
    rows = _rows()
    assert len(rows) == 12  # 3 SFT and 3 LoRA of NeMo 24.07, 6 LoRA of AutoModel
    for name, m in rows.items():
        ft = m.spec.train.finetune
        assert ft is not None and ft.method is (FinetuneMethod.LORA if "[LoRA]" in name else FinetuneMethod.FULL)
        p = predict(m.spec, residuals=None)
        assert math.isfinite(p.step_time_s) and p.step_time_s > 0


def test_nemo_24_07_lora_runs_nemo_1s_qkv_adapter_of_rank_32_without_zero_on_packed_squad():
    m = _rows()["LLAMA2-7B [LoRA]"]
    ft = m.spec.train.finetune
    assert ft is not None and ft.lora_rank == 32 and ft.sample_len == 200
    assert (ft.lora_qkv, ft.lora_proj, ft.lora_fc1, ft.lora_fc2) == (True, False, False, False)
    assert m.spec.parallel.zero is ZeroStage.NONE
    assert _said(m, "get_target_modules default ['attention_qkv']", "adapter_dim 32")
    assert _said(m, "sample_len = 200", "SQuAD v1.1", "MRQA 2019")


def test_nemo_24_07_sft_runs_each_scripts_layout_and_the_distributed_optimizer():
    rows = _rows()
    small, big = rows["LLAMA2-13B [SFT]"].spec, rows["LLAMA2-70B [SFT]"].spec
    assert small.parallel.vp == 10 and small.parallel.schedule is Schedule.INTERLEAVED
    assert big.parallel.vp == 20 and big.parallel.sequence_parallel and big.parallel.tp_comm_overlap
    for spec in (small, big):
        assert spec.parallel.zero is ZeroStage.Z1 and spec.train.fp32_grads is False and spec.train.fp8_param_gather
        assert spec.train.finetune is not None and spec.train.finetune.sample_len == 200
    assert not _said(rows["LLAMA2-70B [SFT]"], "sequence_parallel blank")  # the recipe's value replaced it


@pytest.mark.parametrize("model, recompute, sequence_parallel", [
    ("Llama3 8B [LoRA]", Recompute.NONE, False), ("Qwen2.5 7B [LoRA]", Recompute.NONE, False),
    ("Llama3 70B [LoRA]", Recompute.FULL, True), ("Llama3 70B 2-node [LoRA]", Recompute.FULL, True),
    ("Qwen2.5 32B [LoRA]", Recompute.FULL, False), ("Qwen2.5 32B 2-node [LoRA]", Recompute.FULL, False),
])
def test_automodel_lora_rows_follow_their_benchmark_configs(model, recompute, sequence_parallel):
    m = _rows()[model]
    ft = m.spec.train.finetune
    assert ft is not None and ft.lora_rank == 16 and ft.sample_len == 0
    assert ft.lora_qkv and ft.lora_proj and ft.lora_fc1 and ft.lora_fc2
    assert m.spec.train.recompute is recompute and m.spec.parallel.sequence_parallel is sequence_parallel
    assert _said(m, "NVIDIA-NeMo/Automodel@", "examples/llm_benchmark/", "'*_proj'")


def test_a_lora_row_of_an_unknown_source_takes_the_stacks_defaults_and_says_so(map_snippet):
    text = P.edit(P.edit(P.NEMO_LORA, "source", "some-lab-blog"), "source_ref", "a blog post")
    m = map_snippet(text)
    assert isinstance(m, Mapped)
    ft = m.spec.train.finetune
    assert ft is not None and ft.lora_rank == 32 and ft.lora_qkv and ft.lora_fc2 and ft.sample_len == 0
    assert _said(m, "no recipe known") and _said(m, "LoRA defaults", "linear_qkv")


def test_the_notes_alone_can_say_a_row_fine_tunes(map_snippet):
    text = P.edit(P.edit(P.NEMO_LORA, "model_name", "LLAMA2-7B"), "notes",
                  "LoRA fine-tuning of Llama 2; samples packed to 4096 tokens, dataset SQuAD")
    m = map_snippet(text)
    assert isinstance(m, Mapped) and m.spec.train.finetune is not None
    assert m.spec.train.finetune.lora_rank == 32 and m.spec.train.finetune.sample_len == 200


def test_a_note_that_only_mentions_lora_is_not_a_fine_tuning_run(map_snippet):
    notes = ("section 'Pre-Training Performance'; LBS=1, GA=4; (LoRA rows use Llama 3.3 70B Instruct per config "
             "file name; same shape); the page's fine-tuning section is another table")
    m = map_snippet(P.edit(P.AUTOMODEL_LLAMA3_70B, "notes", notes))
    assert isinstance(m, Mapped) and m.spec.train.finetune is None
