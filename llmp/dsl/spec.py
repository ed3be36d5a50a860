"""The resolved, typed spec: what every later stage reads. Nothing downstream sees DSL text.

Numbers are SI and already unit-checked. A numeric field holds a SymPy expression only when the
spec left a symbol free (``hidden = symbol``) or derived a field from one; otherwise it is a
plain ``int``/``float``. Field names are the names used in the DSL, in ``--set section.field``
paths and in SymPy symbols.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import sympy as sp

from llmp.hardware.spec import Cluster, Dtype

Count = int | sp.Expr
Real = float | sp.Expr


class Arch(StrEnum):
    GPT = "gpt"
    """LayerNorm, GELU MLP, learned positions, biases (GPT-2/3, Megatron GPT, MPT)."""
    LLAMA = "llama"
    """RMSNorm, SwiGLU MLP, rotary positions, GQA, no biases (Llama, Mistral, Qwen)."""


class Norm(StrEnum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class Activation(StrEnum):
    GELU = "gelu"
    SWIGLU = "swiglu"
    RELU = "relu"


class Position(StrEnum):
    LEARNED = "learned"
    ROTARY = "rotary"
    ALIBI = "alibi"
    NONE = "none"


class Schedule(StrEnum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class PipeModule(StrEnum):
    """The DeepSpeed ``PipelineModule`` whose layer list a DeepSpeed ``partition`` method splits.

    Its list is more than the transformer layers: embedding, head and a few parameter-free
    functions are items too, and ``uniform`` counts them and ``type:`` matches their names.
    """

    GPT_NEOX = "gpt_neox"
    """GPT-NeoX ``GPT2ModelPipe`` (megatron/model/gpt2_model.py ``init_specs``): EmbeddingPipe,
    the function ``_pre_transformer_block``, the layers, ``_post_transformer_block``, NormPipe,
    then ParallelLinearPipe (or EmbeddingPipe again when tied). Run on EleutherAI's DeeperSpeed,
    the DeepSpeed fork GPT-NeoX pins."""
    MEGATRON_DEEPSPEED = "megatron_deepspeed"
    """Megatron-DeepSpeed ``GPTModelPipe`` (megatron/model/gpt_model.py): ``_to_float16``,
    EmbeddingPipe, a transpose lambda, the layers, ``undo``, the final LayerNorm, EmbeddingPipe
    again (tied head), ``float16_to_fp32``. Run on microsoft/DeepSpeed."""


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class ZeroStage(StrEnum):
    """Optimizer/gradient/parameter sharding over the data-parallel axis."""

    NONE = "none"
    Z1 = "1"
    """Optimizer states sharded."""
    Z2 = "2"
    """Optimizer states and gradients sharded."""
    Z3 = "3"
    """Optimizer states, gradients and parameters sharded (ZeRO-3)."""
    FSDP = "fsdp"
    """PyTorch FSDP FULL_SHARD: same traffic and memory as ZeRO-3."""


class Optimizer(StrEnum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD = "sgd"


class Precision(StrEnum):
    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    @property
    def compute_dtype(self) -> Dtype:
        """The dtype whose peak rate GEMMs and attention run at."""
        return Dtype(self.value)

    @property
    def activation_bytes(self) -> int:
        """Bytes per activation element (FP8 training keeps activations in BF16)."""
        return {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}[self.value]


@dataclass(frozen=True, kw_only=True, slots=True)
class MoeSpec:
    """Mixture-of-experts MLP; ``None`` on the model means dense."""

    experts: Count
    """Routed experts per MoE layer."""
    top_k: Count
    """Experts each token is routed to."""
    expert_ffn_hidden: Count
    """Inner width of one expert's MLP."""
    shared_experts: Count = 0
    """Always-on experts (DeepSeek style), each of width ``expert_ffn_hidden``."""
    capacity_factor: Real = 1.0
    """Token slots per expert relative to a perfectly balanced load."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A decoder-only transformer."""

    name: str
    arch: Arch
    layers: Count
    hidden: Count
    heads: Count
    kv_heads: Count
    """Key/value heads (= heads for MHA; fewer for GQA; 1 for MQA)."""
    head_dim: Count
    """Per-head width; defaults to hidden / heads."""
    ffn_hidden: Count
    """MLP inner width (per matrix for SwiGLU)."""
    vocab: Count
    seq_len: Count
    norm: Norm
    activation: Activation
    position: Position
    tied_embeddings: bool
    bias: bool
    """Linear layers carry biases (GPT) or not (Llama)."""
    dropout: Real = 0.0
    moe: MoeSpec | None = None

    @property
    def is_moe(self) -> bool:
        return self.moe is not None


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelSpec:
    """How the model is split over the devices (Megatron order: tp innermost, then cp, ep, pp, dp)."""

    dp: Count = 1
    tp: Count = 1
    pp: Count = 1
    cp: Count = 1
    """Context (sequence) parallel degree for attention."""
    ep: Count = 1
    """Expert parallel degree (carved out of dp x cp)."""
    vp: Count = 1
    """Virtual pipeline chunks per pipeline rank (interleaved schedule)."""
    sequence_parallel: bool = False
    zero: ZeroStage = ZeroStage.NONE
    schedule: Schedule = Schedule.ONE_F_ONE_B
    tp_comm_overlap: bool = False
    """TP collectives overlapped with GEMMs (TransformerEngine userbuffers); exposed otherwise."""
    dp_overlap: bool = True
    """DP gradient reduction overlapped with backward, bucket by bucket."""
    dp_bucket_size: Real = 25e6 * 4
    """Bytes per gradient bucket (PyTorch DDP default 25 MB)."""
    stage_layers: tuple[int, ...] | None = None
    """Transformer layers of each pipeline stage (``pp`` entries; each a multiple of ``vp``) or of
    each model chunk in model order (``pp * vp`` entries). None: derived (see
    :mod:`llmp.analytic.split`)."""
    first_stage_layers: Count | None = None
    """Layers on the first pipeline stage (Megatron ``--decoder-first-pipeline-num-layers``)."""
    last_stage_layers: Count | None = None
    """Layers on the last pipeline stage (Megatron ``--decoder-last-pipeline-num-layers``)."""
    account_for_embedding: bool = False
    """The embedding counts as one layer in the split (Megatron
    ``--account-for-embedding-in-pipeline-split``): the first chunk gets one layer fewer."""
    account_for_loss: bool = False
    """The output layer and loss count as one layer (Megatron
    ``--account-for-loss-in-pipeline-split``): the last chunk gets one layer fewer."""
    partition: str = ""
    """DeepSpeed ``partition_method``: ``uniform``, ``parameters`` or ``type:REGEX``; "" = none."""
    pipe_module: PipeModule = PipeModule.GPT_NEOX
    """Whose pipeline layer list a DeepSpeed ``partition`` splits."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSpec:
    """One optimizer step of training."""

    precision: Precision = Precision.BF16
    optimizer: Optimizer = Optimizer.ADAMW
    global_batch: Count
    """Sequences per optimizer step."""
    micro_batch: Count = 1
    """Sequences per microbatch per data-parallel replica."""
    recompute: Recompute = Recompute.NONE
    flash_attention: bool = True
    master_weights: bool = True
    """Mixed precision keeps an FP32 copy of the weights in the optimizer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Sweep:
    """A list of candidate values a spec declared for one field (``tp = [1, 2, 4, 8]``)."""

    path: str
    """``section.field`` as ``--set`` spells it."""
    values: tuple[Any, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    """Everything needed to predict one training step."""

    model: ModelSpec
    train: TrainSpec
    parallel: ParallelSpec
    cluster: Cluster
    sweeps: tuple[Sweep, ...] = ()
    """Declared sweep lists; each field holds its first value until ``search`` varies it."""
    symbols: tuple[str, ...] = ()
    """Paths of fields left free (``= symbol``) for sensitivity analysis."""
    source: str = "<spec>"
    """File the spec came from (for provenance and messages)."""

    # Derived quantities: computed, never typed in.
    @property
    def world_size(self) -> Count:
        p = self.parallel
        return p.dp * p.tp * p.pp * p.cp

    @property
    def microbatches(self) -> Count:
        """Microbatches per pipeline per step (gradient-accumulation steps)."""
        return self.train.global_batch / (self.train.micro_batch * self.parallel.dp)

    @property
    def tokens_per_step(self) -> Count:
        return self.train.global_batch * self.model.seq_len

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (SI numbers, enum spellings, free symbols as text)."""
        from llmp.dsl.serialize import spec_to_dict  # serialize imports this module

        return spec_to_dict(self)
