"""What the recipes behind published sources set that their rows leave blank.

A published table states a run's layout and batch but rarely every setting its recipe chose:
whether the forward is recomputed, whether sequence parallelism is on, how the pipeline splits the
layers, in which dtype gradients are reduced. Where the source's own recipe (its launcher
configs, training scripts or paper) settles such a setting, it is written here once, with the
citation, and :mod:`llmp.validate.frameworks` applies it to the row, recording the citation as an
assumption. These are configuration facts of the sources, never tuned to a measured value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llmp.spec.spec import Attention, Precision, Recompute, Stack

SOURCE_RECOMPUTE: dict[str, tuple[Recompute, str]] = {
    "megatron-sc21-table2": (Recompute.FULL, ("the paper's FLOP convention (96·B·s·l·h², Table 2 as Table 1) counts a "
                                              "recomputed forward, and a 175B/530B model's activations would not fit "
                                              "in 80 GB without it")),
    "mt-nlg-530b": (Recompute.FULL, ("the quoted TFLOP/s per GPU follow Megatron's 96·B·s·l·h² convention, which "
                    "counts the recomputed forward of activation checkpointing")),
    "megatron-lm-readme-2020": (Recompute.FULL, ("Megatron-LM's example GPT-2 scripts of 2020 pass "
                                "--checkpoint-activations, and the README's TFLOP/s match the 96·B·s·l·h² count "
                                "that includes the recomputed forward")),
    "nemo-automodel-perf-summary": (Recompute.FULL, (
        "the page's pre-training configuration files set distributed.activation_checkpointing: True, "
        "AutoModel's whole-layer checkpointing (NVIDIA-NeMo/Automodel:examples/llm_benchmark/llama3_3/"
        "custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml, listed under 'Configuration Files' of "
        "docs/performance-summary.mdx)")),
}
"""Sources whose blank ``recompute`` is settled by the source itself."""

RECIPE_SEQUENCE_PARALLEL: dict[Stack, str] = {
    Stack.NEMO: ("NeMo 2 / Megatron-Bridge performance recipes set sequence_parallel=True whenever tp > 1 "
                 "(NVIDIA/NeMo@v2.0.0:nemo/collections/llm/recipes/llama3_70b.py, "
                 "MegatronStrategy(sequence_parallel=True))"),
    Stack.MEGATRON_CORE: ("Megatron-LM's examples scripts pass --sequence-parallel with tp > 1 "
                          "(NVIDIA/Megatron-LM@core_r0.9.0:examples/llama/train_llama3_8b_h100_fp8.sh)"),
}
"""Stacks whose published recipes turn sequence parallelism on with tp > 1 (sequence_parallel has no
stack default in the language: Megatron's own default is off)."""



SOURCE_PARTITION: dict[str, tuple[str, str]] = {
    "bloom-176b-tr11": ("type:transformer|embedding", (
        "BLOOM-176B's training script passes --pp-partition-method 'type:transformer|embedding' "
        "(bigscience-workshop/bigscience@003b250:train/tr11-176B-ml/tr11-176B-ml.slurm, GPT_ARGS), which "
        "bigscience-workshop/Megatron-DeepSpeed's pipeline model hands to DeepSpeed's PipelineModule "
        "(partition_method = args.pp_partition_method, else 'type:transformer'): the two tied embeddings "
        "count as layers, so the first and last stage take one transformer layer fewer")),
}
"""Sources whose run states DeepSpeed's partition method (the row itself does not)."""


MEGATRON_RECIPES = frozenset({Stack.MEGATRON_CORE, Stack.NEMO})
"""Stacks whose published runs come from Megatron-Core recipes (NeMo 2, Megatron-Bridge, Megatron-LM's
examples): Megatron-Core refuses layers that do not divide the chunks, so every such run set a split,
which a row that does not state one leaves to the model's own recipe layouts
(:attr:`~llmp.validate.models.ModelPlan.layouts`) or to :func:`llmp.analytic.split.recipe_split`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceRecipe:
    """A ``train`` field the recipe behind one published row sets, where the row does not say."""

    source: str
    model_name: str = ""
    """Only the source's rows of this model ("": every model)."""
    fields: tuple[tuple[str, Any], ...]
    why: str
    precision: Precision | None = None
    """Only the source's rows of this precision (None: all of them)."""
    precision_text: str = ""
    """Only the source's rows whose ``precision`` cell starts with a match of this pattern ("": all)."""

    def applies(self, source: str, model_name: str, precision: Precision, precision_text: str) -> bool:
        return (source == self.source and self.model_name in ("", model_name)
                and self.precision in (None, precision)
                and (not self.precision_text or re.match(self.precision_text, precision_text) is not None))


_MLM_LLAMA_FP8 = ("Megatron-LM's Llama FP8 example passes --fp8-param-gather with the distributed optimizer "
                  "(NVIDIA/Megatron-LM@157006d:examples/llama/train_llama3_8b_h100_fp8.sh, DTYPE_ARGS and DDP_ARGS)")
_MLM_LLAMA_NEMO = ("the README's FP8 table 'follows those defined in NeMo Framework's performance scripts' "
                   "(NVIDIA/Megatron-LM@20441fa:examples/llama/README.md, Configuration), whose FP8 precision "
                   "recipe sets fp8_param_gather = True (NVIDIA/NeMo@0a07447:nemo/collections/llm/recipes/"
                   "precision/mixed_precision.py, bf16_with_fp8_mixed), as the 8B script passes --fp8-param-gather "
                   "(NVIDIA/Megatron-LM@157006d:examples/llama/train_llama3_8b_h100_fp8.sh)")

_NFL = "NVIDIA/NeMo-Framework-Launcher"
_NEMO_24_07 = "nemo-24.07-perf-summary"
_NEMO_BF16_GRADS: tuple[tuple[str, str], ...] = (
    ("GPT3-5B", f"{_NFL}@329df4a:examples/training/gpt/h100/5b_fp8_8node.sh (8 nodes, tp 1, mbs 4)"),
    ("GPT3-20B", f"{_NFL}@329df4a:examples/training/gpt/h100/20b_fp8_8node.sh (8 nodes, tp 2, mbs 2)"),
    ("GPT3-175B", f"{_NFL}@edc9045:examples/training/gpt/h100/175b_fp8_16node.sh (16 nodes, tp 4, pp 8, gbs 256); "
                  f"{_NFL}@1e46ac6:launcher_scripts/conf/training/gpt3/175b_fp8_performance.yaml (gbs 2048, "
                  "optim.grad_sync_dtype: bf16)"),
    ("LLAMA2-7B", f"{_NFL}@7d6e2df:examples/training/llama/h100/llama2_7b_fp8.sh (1 node, gbs 128)"),
    ("LLAMA2-13B", f"{_NFL}@edc9045:examples/training/llama/h100/llama2_13b_fp8.sh (1 node, gbs 128)"),
    ("LLAMA2-70B", f"{_NFL}@1ee3eb3:examples/training/llama/h100/llama2_70b_fp8.sh (8 nodes, gbs 128)"),
    ("LLAMA3-8B", f"{_NFL}@329df4a:examples/training/llama/h100/llama3_8b_fp8.sh (1 node, gbs 128)"),
    ("LLAMA3-70B", f"{_NFL}@4a9b61b:examples/training/llama/h100/llama3_70b_fp8.sh (8 nodes, gbs 128)"),
)
"""NeMo 24.07 FP8 rows whose H100 launcher script reduces gradients in BF16
(``+training.model.optim.grad_sync_dtype=bf16``); the Nemotron-8B/22B FP8 scripts
(``nemotron_{8b,22b}_fp8.sh`` at edc9045) do not, and keep NeMo 1's FP32 default."""

_NEMO1_REMAINDERS = (
    "NeMo 1 hands its Apex distributed optimizer BF16 parameters and FP32 state and asks it to keep only "
    "the parameters' 16-bit remainders (NVIDIA/NeMo r2.0.0: nemo/collections/nlp/models/language_modeling/"
    "megatron_base_model.py, MegatronBaseModel.setup_optimization: optim dtype defaults to fp32, model dtype "
    "is bf16 under megatron_amp_O2, so store_params = False, store_param_remainders = True; "
    "NVIDIA/apex apex/contrib/optimizers/distributed_fused_adam.py, StateBucket: an int16 "
    "param_remainders_shard and no FP32 params_shard)")
_NEMO_DISTRIBUTED_FUSED_ADAM: tuple[tuple[str, str], ...] = (
    ("GPT3-5B", f"{_NFL}@00af8f2:launcher_scripts/conf/training/gpt3/5b.yaml"),
    ("GPT3-20B", f"{_NFL}@056a90e:launcher_scripts/conf/training/gpt3/20b.yaml"),
    ("GPT3-175B", f"{_NFL}@056a90e:launcher_scripts/conf/training/gpt3/175b.yaml"),
    ("LLAMA2-7B", f"{_NFL}@064e676:launcher_scripts/conf/training/llama/llama2_7b.yaml"),
    ("LLAMA2-13B", f"{_NFL}@0446d2c:launcher_scripts/conf/training/llama/llama2_13b.yaml"),
    ("LLAMA2-70B", f"{_NFL}@0446d2c:launcher_scripts/conf/training/llama/llama2_70b.yaml"),
    ("LLAMA3-8B", f"{_NFL}@14860f7:launcher_scripts/conf/training/llama/llama3_8b.yaml"),
    ("Nemotron-8B", f"{_NFL}@089b90e:launcher_scripts/conf/training/nemotron/nemotron_8b.yaml"),
    ("Nemotron-22B", f"{_NFL}@089b90e:launcher_scripts/conf/training/nemotron/nemotron_22b.yaml"),
)
"""NeMo 24.07 rows whose launcher config trains with Apex ``distributed_fused_adam`` (trainer
precision bf16, ``megatron_amp_O2: true``). Llama 3 70B (llama3_70b.yaml at 3dd3561) and
Nemotron-4 340B (nemotron_340b.yaml at 3be81fc) use ``mcore_distributed_optim``: Megatron-Core's
distributed optimizer, whose FP32 main parameters are whole (NeMo passes no optimizer dtype to its
OptimizerConfig: nemo/core/classes/modelPT.py, setup_megatron_optimization)."""

_FOUNDRY_DRIVER = "mosaicml/llm-foundry@12a6319:scripts/train/benchmarking/submit_benchmarks.py"
_FOUNDRY_TRITON = (
    "the table's Precision cell reads 'bf16', not 'amp_bf16': the first benchmark driver passed --precisions "
    "(bf16 | fp16) to Composer as given, with --fsdp_config_mixed_precision PURE and --attn_impl default "
    f"'triton' (model.attn_impl = args.attn_impl; image mosaicml/pytorch:1.13.1) ({_FOUNDRY_DRIVER}); the later "
    "driver passes 'amp_' + precision and attn_impl 'flash' with flash-attn 2 "
    "(mosaicml/llm-foundry@51652ea:scripts/train/benchmarking/submit_benchmarks.py, pip_install '.[gpu-flash2]')")

SOURCE_RECIPES: tuple[SourceRecipe, ...] = (
    SourceRecipe(source="llm-foundry", fields=(("attention", Attention.TRITON),), precision_text=r"(bf16|fp16)\b",
                 why=_FOUNDRY_TRITON),
    SourceRecipe(source=_NEMO_24_07, model_name="Nemotron-340B", fields=(("fp32_grads", False),),
                 why=("NeMo's Nemotron-4 340B training config reduces gradients in BF16 "
                      f"({_NFL}@3be81fc:launcher_scripts/conf/training/nemotron/nemotron_340b.yaml, "
                      "optim: mcore_distributed_optim, grad_sync_dtype: bf16; NeMo 1 sets "
                      "grad_reduce_in_fp32 = grad_sync_dtype == 'fp32')")),
    *(SourceRecipe(source=_NEMO_24_07, model_name=name, fields=(("fp32_grads", False),), precision=Precision.FP8,
                   why=(f"NeMo's H100 FP8 launcher script for the model reduces gradients in BF16 ({where}: "
                        "+training.model.optim.grad_sync_dtype=bf16, the grad_sync_dtype of Apex "
                        "DistributedFusedAdam, whose contiguous gradient buffer then holds BF16)"))
      for name, where in _NEMO_BF16_GRADS),
    *(SourceRecipe(source=_NEMO_24_07, model_name=name, fields=(("master_remainders", True),),
                   why=f"{where} trains with optim: distributed_fused_adam and megatron_amp_O2: true; "
                       f"{_NEMO1_REMAINDERS}")
      for name, where in _NEMO_DISTRIBUTED_FUSED_ADAM),
    SourceRecipe(source="megatron-lm-examples-llama", model_name="LLAMA3-8B", fields=(("fp8_param_gather", True),),
                 why=_MLM_LLAMA_FP8, precision=Precision.FP8),
    *(SourceRecipe(source="megatron-lm-examples-llama", model_name=name, fields=(("fp8_param_gather", True),),
                   why=_MLM_LLAMA_NEMO, precision=Precision.FP8) for name in ("LLAMA3-70B", "LLAMA3-405B")),
)
"""Recipe settings of published rows the row itself does not state."""
