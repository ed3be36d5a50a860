"""What a training stack does in one step, as data: the :class:`Profile` of one stack.

A step is not only the model and the hardware: the stack decides which kernels launch (an
unfused attention with a fused masked softmax, FlashAttention, cuDNN; fused or eager norms,
RoPE, bias-activation, cross-entropy), what overlaps (TP communication, DP gradient reduction,
the distributed optimizer's parameter all-gather, FSDP prefetch) and the fixed work of every
step (gradient clipping, zeroing gradients, the loss all-reduce, fp16 loss scaling).

Every :class:`Item` carries the value and where the stack's code or documentation says so
(``owner/repo@ref:path (symbol)`` or a URL). No value is chosen to make a published step time
come out right: each is what the cited code does. Items whose name is a field of the spec's
``train`` or ``parallel`` block are that field's default under this stack (a spec's explicit
field wins); the rest are facts the operator graph reads directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from llmp.spec.spec import Stack


class ZeroGrad(StrEnum):
    """How gradients are cleared before a step."""

    MEMSET = "memset"
    """A memset of the contiguous gradient buffer (Megatron ``zero_grad_buffer``)."""
    SET_TO_NONE = "set_to_none"
    """``grad = None``: no kernel (torch ``zero_grad(set_to_none=True)``, DeepSpeed, FSDP)."""


class ClipScale(StrEnum):
    """After the global-norm reduction, how the gradients are scaled."""

    ALWAYS = "always"
    """One read-write pass every step (torch ``clip_grad_norm_`` multiplies by the clamped coefficient)."""
    CONDITIONAL = "conditional"
    """Only when the norm exceeds the threshold (Megatron ``clip_coeff < 1``): not counted."""
    WITH_UNSCALE = "with_unscale"
    """One read-write pass every step that also removes the fp16 loss scale (DeepSpeed
    ``unscale_and_clip_grads``)."""


class LossSync(StrEnum):
    """What the stack communicates to report the loss."""

    PER_MICROBATCH = "per_microbatch"
    """An all-reduce over dp of the loss after every microbatch on the last stage (Megatron-LM
    ``average_losses_across_data_parallel_group`` in the loss function)."""
    PER_STEP = "per_step"
    """One all-reduce over dp on the last stage per step (Megatron-Core ``train_step``)."""
    PIPELINE_BROADCAST = "pipeline_broadcast"
    """An all-reduce over dp on the last stage, then a broadcast to every pipeline stage
    (DeepSpeed ``PipelineEngine._aggregate_total_loss``)."""
    NONE = "none"
    """Nothing every step (logged every few steps only)."""


class Unscale(StrEnum):
    """fp16 dynamic loss scaling: how the gradients are checked for inf/nan and unscaled."""

    CHECK_AND_UNSCALE = "check_and_unscale"
    """One read-write pass (``torch._amp_foreach_non_finite_check_and_unscale_``) and an all-reduce
    of the found-inf flag (Megatron, torch GradScaler)."""
    NONE = "none"
    """No loss-scaling work (llmp's generic profile)."""
    CHECK_THEN_CLIP_PASS = "check_then_clip_pass"
    """A read pass for the inf check and its all-reduce; the unscale is folded into the clip
    scale pass (DeepSpeed ``has_overflow`` then ``unscale_and_clip_grads``)."""


class SelectiveRecompute(StrEnum):
    """What ``recompute = selective`` re-runs before a layer's backward (``recompute = full``
    re-runs the whole forward under every stack)."""

    CORE_ATTENTION = "core_attention"
    """The attention core: scores, mask, softmax, dropout and the product with V, or the one fused
    kernel (Korthikanti et al. 2022 §5; Megatron ``--recompute-granularity selective``)."""
    OP_SAC = "op_sac"
    """PyTorch op-level selective activation checkpointing with torchtitan's policy: the outputs of
    every other matmul (the 1st, 3rd, ... of the layer in execution order), of the SDPA kernel and
    of reduce-scatters are saved; every other op of the layer is re-run, up to the last one whose
    output the backward needs (the layer's closing residual add is not)."""


class HostStyle(StrEnum):
    """Which torch replica of the layer's host path (:mod:`llmp.measure.host`) a stack's code
    matches: its dispatch cost per kernel is that replica's, measured."""

    MEGATRON = "megatron"
    """Megatron's layer: tensor-parallel region functions, custom autograd functions for the
    GEMM, the fused LayerNorm and softmax, TorchScript fusions, an RNG-tracker fork around the
    attention dropout."""
    TORCH = "torch"
    """A plain eager block of ``nn.Module`` layers and ``torch.nn.functional`` calls."""


@dataclass(frozen=True, slots=True)
class Item:
    """One fact about a stack and where its code or documentation says so."""

    value: Any
    source: str
    note: str = ""
    """Why, and how it changed across versions."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """One training stack (see the module docstring). Field names that are also ``train`` or
    ``parallel`` fields of a spec are that field's default under this stack."""

    stack: Stack
    title: str
    versions: str
    """Which releases (and which published runs) this profile describes."""
    # train fields
    attention: Item
    fused_norm: Item
    fused_bias_act: Item
    fused_bias_dropout_add: Item
    fused_rope: Item
    fused_cross_entropy: Item
    grad_accum_fusion: Item
    optimizer_kernel: Item
    grad_clip: Item
    vocab_divisible_by: Item
    cuda_graphs: Item
    # parallel fields
    zero: Item
    cp_comm: Item
    tp_comm_overlap: Item
    dp_overlap: Item
    dp_bucket_size: Item
    param_gather_overlap: Item
    fsdp_prefetch: Item
    partition: Item
    """DeepSpeed pipeline ``partition_method`` ("" = Megatron's equal split)."""
    pipe_module: Item
    """Whose DeepSpeed PipelineModule layer list ``partition`` splits."""
    # facts the graph reads (no spec field)
    attentions: Item
    """The attention kernels this stack can launch (a spec asking for another is an error)."""
    fused_softmax_max_seq: Item
    """Longest sequence the fused causal softmax kernel accepts; longer falls back to eager."""
    vocab_pad_tp: Item
    """The vocab is padded to ``vocab_divisible_by * tp`` (else to ``vocab_divisible_by``)."""
    zero_grad: Item
    clip_scale: Item
    loss_sync: Item
    fp16_unscale: Item
    fsdp: Item
    """The stack can shard parameters (ZeRO-3 / FSDP)."""
    userbuffers: Item
    """The stack can overlap TP collectives with GEMMs (TransformerEngine userbuffers)."""
    pipeline_zero_max: Item
    """Highest ZeRO stage this stack runs together with pipeline parallelism."""
    selective_recompute: Item
    """What ``recompute = selective`` re-runs (:class:`SelectiveRecompute`)."""
    fp32_grads: Item
    """The training precisions under which the stack accumulates and reduces gradients in FP32 (with
    master weights); under the others they are in the model's 16-bit dtype. ``train.fp32_grads`` overrides."""

    host_style: Item
    """Whose layer code the host runs per kernel (:class:`HostStyle`): sets the measured dispatch
    cost of each launch (:mod:`llmp.stacks.host`)."""
    pipeline_host_sync: Item
    """The host waits for the device after every pipeline send/receive, so each pipeline task
    starts on an empty queue (host and device of one task overlap only within it)."""
    batch_host_sync: Item
    """Loading each microbatch waits for the device (a copy from pageable host memory, which the
    CUDA runtime orders after all queued work): the forwards of the chunks that read the batch
    (the first, for tokens; the last, for labels) start on an empty queue."""

    fp32_loss_logits: Item
    """The loss upcasts the logits to FP32 and calls ``F.cross_entropy``: at the start of the backward
    log_softmax's FP32 copy and the FP32 gradients of nll_loss and log_softmax are alive together, 12
    bytes per logit. Otherwise the loss keeps the model-dtype logits and an FP32 softmax (Megatron's
    in-place vocab-parallel cross-entropy)."""
    lowp_saved_input: Item
    """A low-precision GEMM keeps its input quantised for the weight gradient (TransformerEngine's
    modules: :meth:`~llmp.analytic.lowp.Recipe.saved_input_bytes`), not in BF16 (torchao's
    ``Float8Linear``, which saves the high-precision input and casts it again in the backward)."""

    def items(self) -> tuple[tuple[str, Item], ...]:
        """Every item by name, in declaration order."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self) if isinstance(getattr(self, f.name), Item))

    def default_text(self, name: str) -> str:
        """The .llmp text of item ``name`` (a spec default is evaluated like user text)."""
        value = getattr(self, name).value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, StrEnum):
            return value.value
        if isinstance(value, str):
            return json.dumps(value)  # a string field: written as a quoted .llmp string
        if isinstance(value, float):
            return f"{value!r} B"  # the only real-valued item is a size in bytes
        return str(value)


DEFAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "train": ("attention", "fused_norm", "fused_bias_act", "fused_bias_dropout_add", "fused_rope",
              "fused_cross_entropy", "grad_accum_fusion", "optimizer_kernel", "grad_clip", "vocab_divisible_by",
              "cuda_graphs"),
    "parallel": ("zero", "cp_comm", "tp_comm_overlap", "dp_overlap", "dp_bucket_size", "param_gather_overlap",
                 "fsdp_prefetch", "partition", "pipe_module"),
}
"""Spec fields whose default comes from the stack profile, by section."""
