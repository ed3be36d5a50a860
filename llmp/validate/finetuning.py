"""Fine-tuning rows: what a published fine-tuning run trained and how its samples filled a sequence.

A row is a fine-tuning run when its ``model_name`` carries a task tag (``[LoRA]``, ``[SFT]``,
``[PEFT]``: NeMo's tables tag them so) or its notes say so (``LoRA fine-tuning``). The schema has no
column for the adapters or the data, so the row's ``train.finetune`` block comes from, strongest
first: the recipe the source ran (:data:`RECIPES`, each cited: the launcher script or benchmark
configuration behind the published number), the stack's LoRA defaults, and the dataset the notes
name (:data:`DATASETS`: its mean sample length when the notes say the samples were packed). Every
choice is an assumption on the row; nothing here reads a measured value. Preference optimisation
(``[DPO]``) runs a reference model beside the trained one and is refused.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.spec.spec import FinetuneMethod, Recompute, Schedule, ZeroStage
from llmp.validate.frameworks import TrainPlan, value_text
from llmp.validate.rows import Measurement
from llmp.validate.skips import SkipReason, Unmodellable


class Task(StrEnum):
    SFT = "sft"
    """Supervised fine-tuning of every weight."""
    LORA = "lora"
    """LoRA adapters beside frozen weights."""


TAGS: dict[str, Task] = {"sft": Task.SFT, "lora": Task.LORA, "peft": Task.LORA}
"""``[Tag]`` suffixes of ``model_name`` that mark a fine-tuning run, and its task (NeMo's ``PEFT``
scheme of the published tables is LoRA)."""

REFUSED_TAGS: dict[str, str] = {
    "dpo": ("direct preference optimisation runs a frozen reference model's forward beside the trained "
            "model's on chosen and rejected answers: llmp models one model's training step"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Dataset:
    """A fine-tuning dataset named in notes, with the mean length of one packed sample."""

    name: str
    pattern: str
    """Regular expression matched (case-insensitively) in the notes."""
    sample_len: int
    why: str


_NFL = "NVIDIA/NeMo-Framework-Launcher"

DATASETS: tuple[Dataset, ...] = (
    Dataset(name="SQuAD v1.1", pattern=r"\bsquad", sample_len=200, why=(
        "SQuAD v1.1's mean context is 137 tokens and question 11 (MRQA 2019 shared task, Fisch et al., "
        "arXiv:1910.09753, Table 1: word tokens), its answers a few words, and NeMo's SQuAD sample joins "
        "context, question and answer ('{input} {output}', input 'context Q: question': "
        f"{_NFL}@0da9ad9:launcher_scripts/conf/peft/llama/sft.yaml, data.train_ds); about 160 words at an "
        "assumed 1.25 Llama SentencePiece tokens per word, rounded to 200 tokens (an assumption, not a "
        "tokenised count; the attention core of 200-token samples is a few tenths of a percent of the "
        "step's FLOPs, so the step barely depends on it)")),
)
"""Datasets met in published fine-tuning rows."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Recipe:
    """What the recipe behind a source's fine-tuning rows sets, where the row does not say."""

    source: str
    task: Task
    model: str = ""
    """Regular expression matched (case-insensitively) at the start of ``model_name``; "" any."""
    finetune: tuple[tuple[str, Any], ...] = ()
    """``finetune { }`` fields (the adapters)."""
    train: tuple[tuple[str, Any], ...] = ()
    """``train`` fields (``recompute`` is the plan's own)."""
    parallel: tuple[tuple[str, Any], ...] = ()
    """``parallel`` fields (``sequence_parallel`` is the plan's own)."""
    packed: bool | None = None
    """The recipe packs samples (True), feeds whole sequences (False), or does not say (None: the notes)."""
    why: str


_NEMO1_LORA = (
    f"NeMo 24.07's LoRA scripts ({_NFL}@97f45c1:examples/peft/llama/h100/7b_1node_lora.sh and 13b_1node_lora.sh, "
    f"{_NFL}@329df4a:examples/peft/llama/h100/70b_1node_lora.sh) run peft_scheme=lora on peft=llama/sft, whose "
    f"lora_tuning sets adapter_dim 32 and no target_modules ({_NFL}@0da9ad9:launcher_scripts/conf/peft/llama/"
    "sft.yaml), so NeMo 1 adapts attention_qkv alone (NVIDIA/NeMo@f7f901f:nemo/collections/nlp/parts/"
    "peft_config.py, get_target_modules default ['attention_qkv']); they swap the optimizer for "
    "fused_adam and delete the distributed optimizer's options (no ZeRO), and pack the data "
    "(packed_sequence=true, max_seq_length=4096); not modelled: fp8_params=true (the frozen weights kept in "
    "FP8 alone, which llmp expresses only with a distributed optimizer)")
_NEMO1_SFT = (
    "keeps peft=llama/sft's optimizer, distributed_fused_adam with grad_sync_dtype bf16 (ZeRO-1, gradients "
    f"reduced in BF16: {_NFL}@0da9ad9:launcher_scripts/conf/peft/llama/sft.yaml, optim), keeps the weights in "
    "FP8 (fp8_params=true, TransformerEngine fp8_model_init, gathered as FP8 by the distributed optimizer) and "
    "packs the data (packed_sequence=true, max_seq_length=4096); not modelled: the optimizer's BF16 state "
    "(optim.dtype bf16)")
_AM = "NVIDIA-NeMo/Automodel"
_AM_LORA = ("PeftConfig target_modules '*_proj' (every q/k/v/o and gate/up/down projection: all four "
            "llmp modules), dim 16; MockIterableDataset of seq_len 4096, whole sequences (no packing)")


def _sft(model: str, script: str, parallel: tuple[tuple[str, Any], ...], said: str) -> Recipe:
    return Recipe(source="nemo-24.07-perf-summary", task=Task.SFT, model=model,
                  train=(("fp32_grads", False), ("fp8_param_gather", True)),
                  parallel=(("zero", ZeroStage.Z1), *parallel), packed=True,
                  why=f"NeMo 24.07's SFT script {_NFL}@{script}{said} {_NEMO1_SFT}")


def _automodel(model: str, config: str, recompute: Recompute, sequence_parallel: bool | None) -> Recipe:
    said = f"{_AM}@{config}: {_AM_LORA}"
    said += (", distributed.activation_checkpointing: true (AutoModel's whole-layer checkpointing)"
             if recompute is Recompute.FULL else ", no activation_checkpointing")
    parallel: tuple[tuple[str, Any], ...] = ()
    if sequence_parallel is not None:
        said += f", sequence_parallel: {str(sequence_parallel).lower()} with tp_size 2"
        parallel = (("sequence_parallel", sequence_parallel),)
    return Recipe(source="nemo-automodel-perf-summary", task=Task.LORA, model=model,
                  finetune=(("lora_rank", 16),), train=(("recompute", recompute),), parallel=parallel, packed=False,
                  why=said)


RECIPES: tuple[Recipe, ...] = (
    Recipe(source="nemo-24.07-perf-summary", task=Task.LORA,
           finetune=(("lora_rank", 32), ("lora_proj", False), ("lora_fc1", False), ("lora_fc2", False)),
           parallel=(("zero", ZeroStage.NONE),), packed=True, why=_NEMO1_LORA),
    _sft(r"llama2-7b", "1ee3eb3:examples/peft/llama/h100/7b_1node.sh", (), " (tp 1, pp 1)"),
    _sft(r"llama2-13b", "7d6e2df:examples/peft/llama/h100/13b_1node.sh", (("vp", 10),),
         " (tp 1, pp 4, virtual_pipeline_model_parallel_size 10)"),
    _sft(r"llama2-70b", "1ee3eb3:examples/peft/llama/h100/70b_2node.sh",
         (("vp", 20), ("sequence_parallel", True), ("tp_comm_overlap", True)),
         " (tp 4, pp 4, virtual_pipeline_model_parallel_size 20, sequence_parallel=true, ub_tp_comm_overlap=true)"),
    _automodel(r"llama ?3\S* 8b", "e05319e:examples/llm_benchmark/llama3_1/llama3_1_8b_peft_benchmark.yaml",
               Recompute.NONE, None),
    _automodel(r"qwen ?2\.5 7b", "4f5f864:examples/llm_benchmark/qwen/qwen2_5_7b_peft_benchmark.yaml",
               Recompute.NONE, None),
    _automodel(r"llama ?3\S* 70b 2-node",
               "dbfdfa1:examples/llm_benchmark/llama3_3/custom_llama3_3_70b_instruct_peft_benchmark_2nodes.yaml",
               Recompute.FULL, True),
    _automodel(r"llama ?3\S* 70b",
               "9892fa9:examples/llm_benchmark/llama3_3/custom_llama3_3_70b_instruct_peft_benchmark.yaml",
               Recompute.FULL, True),
    _automodel(r"qwen ?2\.5 32b 2-node",
               "a2b5808:examples/llm_benchmark/qwen/custom_qwen2_5_32b_peft_benchmark_2nodes.yaml",
               Recompute.FULL, False),
    _automodel(r"qwen ?2\.5 32b", "6b7342a:examples/llm_benchmark/qwen/custom_qwen2_5_32b_peft_benchmark.yaml",
               Recompute.FULL, False),
)
"""Fine-tuning recipes behind published rows, first match wins."""

LORA_DEFAULTS = ("NeMo 2 / Megatron-Bridge's LoRA defaults: dim 32, target_modules linear_qkv, linear_proj, "
                 "linear_fc1, linear_fc2 (NVIDIA/NeMo@0044d77:nemo/collections/llm/peft/lora.py, class LoRA)")


@dataclass(frozen=True, kw_only=True, slots=True)
class FinetunePlan:
    """The ``finetune { }`` block to write for a fine-tuning row, and the train plan it adjusts."""

    fields: tuple[tuple[str, Any], ...]
    train: TrainPlan


def task_of(m: Measurement) -> Task | None:
    """The fine-tuning task of ``m`` (None: pre-training): a ``model_name`` tag, else the notes."""
    name = m.config.text("model_name")
    tags = {t.lower() for t in re.findall(r"\[([A-Za-z]+)\]", name)}
    for tag in tags & set(REFUSED_TAGS):
        raise Unmodellable(SkipReason.FINE_TUNING, f"model_name {name!r}: [{tag.upper()}]: {REFUSED_TAGS[tag]}")
    found = [TAGS[t] for t in tags if t in TAGS]
    if found:
        return found[0]
    # the notes must name the task of this run ("LoRA fine-tuning", "supervised fine-tuning"): a note that
    # only mentions LoRA (AutoModel's pre-training rows: "LoRA rows use Llama 3.3 70B Instruct") is not one
    if re.search(r"\b(?:lora|peft)\s+fine[- ]?tun", m.notes, re.IGNORECASE):
        return Task.LORA
    if re.search(r"\b(?:supervised|sft)\s+fine[- ]?tun", m.notes, re.IGNORECASE):
        return Task.SFT
    return None


def _recipe(m: Measurement, task: Task) -> Recipe | None:
    row = m.config
    return next((r for r in RECIPES if r.source == row.text("source") and r.task is task
                 and re.match(r.model, row.text("model_name").strip(), re.IGNORECASE)), None)


def _packing(m: Measurement, recipe: Recipe | None, seq_len: int, said: list[str]) -> int:
    """``sample_len``: the named dataset's mean sample when the run packed its samples, else 0."""
    notes = m.notes
    stated = re.search(r"\bpack(?:ed|ing)?\b", notes, re.IGNORECASE)
    packed = recipe.packed if recipe is not None and recipe.packed is not None else bool(stated)
    if not packed:
        if recipe is not None and recipe.packed is False:
            said.append("sample_len = 0: the recipe feeds whole sequences of seq_len (no packing)")
        else:
            said.append("sample_len = 0: the row does not say its samples were packed (whole sequences of seq_len)")
        return 0
    data = next((d for d in DATASETS if re.search(d.pattern, notes, re.IGNORECASE)), None)
    if data is None:
        said.append("sample_len = 0: the samples were packed, but the row names no dataset llmp knows, so the "
                    f"attention is priced as one causal sequence of {seq_len} (an upper bound)")
        return 0
    length = min(data.sample_len, seq_len)
    said.append(f"sample_len = {length}: {data.name} packed to {seq_len} tokens ({data.why})")
    return length


def plan(m: Measurement, task: Task, train: TrainPlan, seq_len: int) -> FinetunePlan:
    """The ``finetune { }`` fields of a fine-tuning row and its train plan with the recipe's settings
    (see the module docstring); every choice is added to the plan's assumptions."""
    recipe = _recipe(m, task)
    said = [f"fine-tuning row ({task.value}): "
            + (f"recipe of {recipe.source}: {recipe.why}" if recipe is not None else "no recipe known for the source")]
    fields: dict[str, Any] = {"method": FinetuneMethod.LORA if task is Task.LORA else FinetuneMethod.FULL}
    if task is Task.LORA:
        if recipe is None:
            said.append(f"LoRA adapters: {LORA_DEFAULTS}")
        fields.update(recipe.finetune if recipe is not None else ())
        adapted = [f.removeprefix("lora_") for f in ("lora_qkv", "lora_proj", "lora_fc1", "lora_fc2")
                   if fields.get(f, True)]
        said.append(f"method = lora, lora_rank = {fields.get('lora_rank', 32)}, adapters on {', '.join(adapted)} "
                    "(LoRA alpha scales the adapter's output and costs nothing)")
    else:
        said.append("method = full: every weight trains (supervised fine-tuning)")
    fields["sample_len"] = _packing(m, recipe, seq_len, said)
    if recipe is None:
        return FinetunePlan(fields=tuple(fields.items()), train=dataclasses.replace(
            train, assumptions=(*train.assumptions, *said)))
    return FinetunePlan(fields=tuple(fields.items()), train=_with_recipe(m, train, recipe, said))


CELLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "recompute": ("recompute", ("recompute blank",)),
    "sequence_parallel": ("sequence_parallel", ("sequence_parallel blank",)),
    "zero": ("zero_stage_or_fsdp", ("zero_stage_or_fsdp blank",)),
    "vp": ("vp", ("schedule: 1F1B",)),
    "tp_comm_overlap": ("", ("tp_comm_overlap = ",)),
    "fp32_grads": ("", ()),
    "fp8_param_gather": ("", ()),
}
"""A recipe field -> the row's cell that states it (a stated cell wins over the recipe) and the
beginnings of the notes the pre-training plan wrote for it, which the recipe's value replaces."""


def _with_recipe(m: Measurement, train: TrainPlan, recipe: Recipe, said: list[str]) -> TrainPlan:
    """``train`` with the fields the recipe sets and the row's cells leave blank."""
    values = {f: v for f, v in (*recipe.train, *recipe.parallel)
              if not (CELLS[f][0] and m.config.text(CELLS[f][0]))}
    stale = tuple(p for f in values for p in CELLS[f][1])
    kept = tuple(a for a in train.assumptions if not a.startswith(stale))
    for f, v in values.items():
        said.append(f"{f} = {value_text(v)} (the recipe)")
    trains = {f: v for f, v in values.items() if f in dict(recipe.train) and f != "recompute"}
    other = {f: v for f, v in values.items() if f in dict(recipe.parallel) and f not in ("sequence_parallel", "vp")}
    vp = values.get("vp", train.vp)
    return dataclasses.replace(
        train, recompute=values.get("recompute", train.recompute),
        sequence_parallel=values.get("sequence_parallel", train.sequence_parallel), vp=vp,
        schedule=Schedule.INTERLEAVED if vp > 1 else train.schedule,
        train={**train.train, **trains},
        parallel={**train.parallel, **other}, assumptions=(*kept, *said))
