"""Cross-field checks on a resolved spec, each reported with its equation filled in.

The layout rules (degrees, widths, batches, the pipeline split) are the rulebook's,
:mod:`llmp.analytic.rules`, which every later stage applies too; here they are reported at the
field they blame. The rest are checks of values that only mean something together: measured
rates against the datasheet, links, model fields, what the training stack can do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmp.analytic import rules
from llmp.errors import Span, SpecError
from llmp.spec.model import Position
from llmp.spec.spec import FinetuneSpec, Spec, ZeroStage
from llmp.spec.values import compare as _compare
from llmp.stacks import profile

SpanOf = Callable[[str], Span | None]


class _Checker:
    def __init__(self, spec: Spec, span_of: SpanOf) -> None:
        self.spec = spec
        self.span_of = span_of

    def fail(self, message: str, paths: tuple[str, ...], label: str, hint: str | None = None
             ) -> None:
        span = next((s for s in map(self.span_of, paths) if s is not None), None)
        raise SpecError(message, span, label=label, hint=hint)


def check(spec: Spec, span_of: SpanOf) -> None:
    """Raise :class:`SpecError` on the first violated cross-field rule."""
    # The rulebook reads the pipeline split and the schedule table, which sit above the language.
    c = _Checker(spec, span_of)
    for v in rules.shape(spec):
        c.fail(v.message, v.paths, v.label, v.hint)
    _imbalance(c)
    _ceilings(c)
    _precision(c)
    _links(c)
    _model_shape(c)
    _finetune(c)
    _stack(c)
    for v in rules.stack(spec):
        c.fail(v.message, v.paths, v.label, v.hint)


def _imbalance(c: _Checker) -> None:
    moe = c.spec.model.moe
    if moe is not None and _compare(moe.imbalance, 1) == -1:
        c.fail(f"model.moe.imbalance({moe.imbalance}) < 1: the busiest rank carries at least a balanced "
               "share of the routed tokens", ("model.moe.imbalance",), "bad value", "use 1 for a balanced load")


def _ceilings(c: _Checker) -> None:
    """A measured rate needs the dtype's datasheet peak and cannot beat it."""
    gpu = c.spec.cluster.gpu
    for block in ("achievable", "flash_attention"):
        measured = getattr(gpu, block)
        if measured is None:
            continue
        for dtype, rate in measured.rates.items():
            path = f"gpu.{block}.{dtype.value}"
            peak = gpu.peak_flops.get(dtype)
            if peak is None:
                c.fail(f"{path} is given but gpu '{gpu.id}' has no {dtype.value} peak in flops",
                       (path,), "no peak", f"add flops {{ {dtype.value} = ... }} or remove {path}")
            elif _compare(rate, peak) == 1:
                c.fail(f"{path}({_rate(rate, 1e12, 'TFLOP/s')}) > gpu.flops.{dtype.value}"
                       f"({_rate(peak, 1e12, 'TFLOP/s')}): a "
                       "measured rate cannot beat the datasheet peak", (path,), "bad value",
                       "check the units and the dtype of the measurement")


_LOW_PRECISION_GPUS = {
    "fp8": "FP8 tensor cores (Ada, Hopper, Blackwell, MI300)",
    "mxfp8": "block-scaled FP8 tensor cores (Blackwell B200/B300/GB200/GB300, MI350)",
    "nvfp4": "NVFP4 tensor cores (Blackwell B200/B300/GB200/GB300)",
}


def _precision(c: _Checker) -> None:
    """A low-precision recipe needs the GPU's tensor cores for its format (a peak in the catalog:
    TransformerEngine refuses FP8 below SM 8.9 and MXFP8/NVFP4 below SM 10.0, ``check_fp8_support``
    and ``check_mxfp8_support`` in transformer_engine/pytorch/fp8.py); ``fp8_scaling`` belongs to
    precision = fp8 alone."""
    t, gpu = c.spec.train, c.spec.cluster.gpu
    if t.fp8_scaling is not None and t.precision.value != "fp8":
        c.fail(f"train.fp8_scaling = {t.fp8_scaling.value} is given but precision = {t.precision.value}: only "
               "fp8 takes a scaling recipe (mxfp8 and nvfp4 fix their block scales)",
               ("train.fp8_scaling", "train.precision"), "contradictory fields",
               "remove fp8_scaling, or set precision = fp8")
    if t.fp8_param_gather:
        _fp8_param_gather(c)
    if t.master_remainders:
        _master_remainders(c)
    dtype = t.precision.compute_dtype
    if dtype.low_precision and dtype not in gpu.peak_flops:
        have = ", ".join(d.value for d in gpu.peak_flops) or "none"
        fits = [p for p in ("nvfp4", "mxfp8", "fp8") if any(d.value == p for d in gpu.peak_flops)]
        fix = f"use precision = {fits[0]} (or bf16) on this GPU" if fits else "use precision = bf16 on this GPU"
        c.fail(f"train.precision = {dtype.value} needs {_LOW_PRECISION_GPUS[dtype.value]}, but gpu "
               f"'{gpu.id}' has no {dtype.value} peak (it declares: {have})", ("train.precision",), "no peak",
               f"{fix}, or pick a GPU that has one")


def _fp8_param_gather(c: _Checker) -> None:
    """``fp8_param_gather`` stores the weights quantised and lets the distributed optimizer
    re-quantise them from its FP32 main parameters: it needs a format llmp models it for (per-tensor
    FP8, whose parameters are TransformerEngine ``Float8Tensor`` objects, or MXFP8), the distributed
    optimizer (Megatron asserts ``--fp8-param-gather only supported with distributed optimizer``,
    NVIDIA/Megatron-LM megatron/training/arguments.py, ``validate_args``) and the FP32 master copy
    it updates from."""
    t, zero = c.spec.train, c.spec.parallel.zero
    paths = ("train.fp8_param_gather",)
    if t.precision.value not in ("fp8", "mxfp8"):
        extra = " (Megatron's --fp4-param-gather for nvfp4 is not modelled)" if t.precision.value == "nvfp4" else ""
        c.fail(f"train.fp8_param_gather = true but precision = {t.precision.value}: only FP8 training stores "
               f"its weights in FP8{extra}", (*paths, "train.precision"), "contradictory fields",
               "remove fp8_param_gather, or set precision = fp8 (or mxfp8)")
    if t.fp8_scaling is not None and t.fp8_scaling.value == "blockwise":
        c.fail("train.fp8_param_gather = true with fp8_scaling = blockwise: llmp models FP8 parameters with "
               "per-tensor scales (Float8Tensor) and MXFP8 ones, not 128x128-blocked parameters",
               (*paths, "train.fp8_scaling"), "contradictory fields",
               "remove fp8_param_gather, or use fp8_scaling = delayed or current")
    if zero.value not in ("1", "2"):
        why = ("parameters sharded by ZeRO-3/FSDP gathered in FP8 (torchao's FSDP2 float8 all-gather, "
               "Megatron FSDP) are not modelled" if zero.value in ("3", "fsdp") else
               "Megatron supports --fp8-param-gather only with the distributed optimizer")
        c.fail(f"train.fp8_param_gather = true but parallel.zero = {zero.value}: {why}",
               (*paths, "parallel.zero"), "contradictory fields",
               "set parallel.zero = 1 (the distributed optimizer), or remove fp8_param_gather")
    if not t.master_weights:
        c.fail("train.fp8_param_gather = true but master_weights = false: FP8 parameters are updated by "
               "re-quantising the optimizer's FP32 main parameters", (*paths, "train.master_weights"),
               "contradictory fields", "set master_weights = true, or remove fp8_param_gather")


def _master_remainders(c: _Checker) -> None:
    """``master_remainders`` stores the FP32 master copy as the low 16 bits a BF16 parameter lacks:
    it needs a master copy, BF16 parameters to complete it (Apex ``DistributedFusedAdam`` raises
    "requires BF16 params and FP32 optimizer state when storing parameter remainders",
    NVIDIA/apex apex/contrib/optimizers/distributed_fused_adam.py, ``__init__``; NeMo stores full
    parameters instead when they are FP8, ``fp8_params``), and an optimizer apart from the
    parameters (FSDP's sharded FP32 parameter is itself the master copy)."""
    t, zero = c.spec.train, c.spec.parallel.zero
    paths = ("train.master_remainders",)
    if not t.master_weights:
        c.fail("train.master_remainders = true but master_weights = false: there is no FP32 master copy to "
               "keep the remainders of", (*paths, "train.master_weights"), "contradictory fields",
               "set master_weights = true, or remove master_remainders")
    if t.precision.value in ("fp32", "tf32", "fp16"):
        why = ("the parameters are FP32 and are the master copy" if t.precision.value != "fp16" else
               "an FP16 parameter is not the upper half of an FP32 number, as a BF16 one is")
        c.fail(f"train.master_remainders = true but precision = {t.precision.value}: {why}",
               (*paths, "train.precision"), "contradictory fields",
               "remove master_remainders, or train with BF16 parameters (precision = bf16, fp8, mxfp8 or nvfp4)")
    if t.fp8_param_gather:
        c.fail("train.master_remainders = true with fp8_param_gather = true: FP8 parameters cannot complete an "
               "FP32 master copy (NeMo keeps full FP32 master parameters with fp8_params)",
               (*paths, "train.fp8_param_gather"), "contradictory fields",
               "remove master_remainders, or remove fp8_param_gather")
    if zero.value == "fsdp":
        c.fail("train.master_remainders = true but parallel.zero = fsdp: FSDP's sharded FP32 parameter is itself "
               "the master copy", (*paths, "parallel.zero"), "contradictory fields",
               "remove master_remainders, or use parallel.zero = 1 (a distributed optimizer)")


def _links(c: _Checker) -> None:
    """One pair of endpoints cannot get more than an endpoint's whole bandwidth."""
    cl = c.spec.cluster
    for path, link in (("node.intra", cl.node.intra), ("node.inter", cl.node.inter),
                       ("cluster.inter", cl.inter)):
        if link.peer_bandwidth is not None and _compare(link.peer_bandwidth, link.bandwidth) == 1:
            c.fail(f"{path}.peer_bandwidth({_rate(link.peer_bandwidth, 1e9, 'GB/s')}) > {path}.bandwidth"
                   f"({_rate(link.bandwidth, 1e9, 'GB/s')}) on link {link.id}: one pair of endpoints cannot "
                   "get more than an endpoint's whole bandwidth", (f"{path}.peer_bandwidth",),
                   "bad value", "peer_bandwidth is per pair, bandwidth per endpoint (all its links)")


def _rate(value: Any, scale: float, unit: str) -> str:
    """``value`` (SI) in ``unit`` for a message; a symbolic value as its expression."""
    return f"{float(value) / scale:g} {unit}" if isinstance(value, int | float) else str(value)


def _model_shape(c: _Checker) -> None:
    """Fields that only mean something together with another."""
    m = c.spec.model
    if m.position is not Position.ROTARY and _compare(m.rotary_pct, 1) == -1:
        c.fail(f"model.rotary_pct({m.rotary_pct}) < 1 but position = {m.position.value}: only rotary "
               "embedding rotates a part of each head", ("model.rotary_pct",), "contradictory fields",
               "set position = rotary, or remove rotary_pct")
    if _compare(m.full_attention_every, 0) == 1 and _compare(m.window, 0) == 0:
        c.fail(f"model.full_attention_every({m.full_attention_every}) is set but window = 0: without a window "
               "every layer attends to the whole sequence", ("model.full_attention_every",),
               "contradictory fields", "give the sliding window, e.g. window = 128")
    if m.mla is not None and m.position is not Position.ROTARY:
        c.fail(f"a mla block with position = {m.position.value}: multi-head latent attention rotates its "
               "qk_rope_head_dim dims (decoupled RoPE, DeepSeek-V2 §2.1.3)", ("model.position",),
               "contradictory fields", "set position = rotary")
    if m.shared_norm and not m.parallel_residual:
        c.fail("model.shared_norm = true needs parallel_residual = true (one norm feeding both parallel branches)",
               ("model.shared_norm",), "contradictory fields", "set parallel_residual = true, or remove shared_norm")


def _finetune(c: _Checker) -> None:
    """A fine-tuning block's fields against each other and the model: the LoRA fields need method =
    lora, a packed sample fits its sequence and needs a fused attention kernel (the varlen kernels
    that take ``cu_seqlens``; unfused scores would cover the whole packed sequence), a rank no
    wider than the model."""
    ft, m, t = c.spec.train.finetune, c.spec.model, c.spec.train
    if ft is None:
        return
    base = FinetuneSpec()
    lora = ("lora_rank", "lora_qkv", "lora_proj", "lora_fc1", "lora_fc2")
    changed = [f for f in lora if getattr(ft, f) != getattr(base, f)]
    if not ft.lora and changed:
        c.fail(f"train.finetune.{changed[0]} is set but method = {ft.method.value}: the LoRA fields describe "
               "adapters, which only method = lora trains", tuple(f"train.finetune.{f}" for f in changed),
               "contradictory fields", "set method = lora, or remove the lora_* fields")
    if ft.lora and _compare(ft.lora_rank, m.hidden) == 1:
        c.fail(f"train.finetune.lora_rank({ft.lora_rank}) > model.hidden({m.hidden}): a low-rank adapter is "
               "narrower than the layer it adapts", ("train.finetune.lora_rank",), "bad value",
               "LoRA ranks are small: 8 to 64 are usual")
    if _compare(ft.sample_len, m.seq_len) == 1:
        c.fail(f"train.finetune.sample_len({ft.sample_len}) > model.seq_len({m.seq_len}): samples are packed "
               "into one sequence of seq_len tokens", ("train.finetune.sample_len",), "bad value",
               "give the mean sample length (at most seq_len), or 0 for no packing")
    if _compare(ft.sample_len, 0) == 1 and not t.attention.fused:
        c.fail(f"train.finetune.sample_len({ft.sample_len}) packs samples but train.attention = "
               f"{t.attention.value}: only a fused kernel attends within each packed sample (cu_seqlens)",
               ("train.finetune.sample_len", "train.attention"), "contradictory fields",
               "use a fused attention kernel (flash2, flash3, cudnn, sdpa), or sample_len = 0")


def _stack(c: _Checker) -> None:
    """A field the spec set that the chosen stack cannot do (each rule cites the profile item)."""
    t, p = c.spec.train, c.spec.parallel
    prof = profile(t.stack)
    name = t.stack.value
    if t.attention not in prof.attentions.value:
        known = ", ".join(a.value for a in prof.attentions.value)
        c.fail(f"train.attention = {t.attention.value} but stack {name} launches only {known} "
               f"({prof.attentions.source})", ("train.attention", "train.stack"), "contradictory fields",
               f"pick one of {known}, or another stack")
    if t.attention.value == "unfused_fused_softmax" and t.precision.value not in ("fp16", "bf16"):
        c.fail(f"train.attention = unfused_fused_softmax needs fp16 or bf16 scores (precision = {t.precision.value}): "
               "the fused masked softmax kernel takes 16-bit inputs only", ("train.attention", "train.precision"),
               "contradictory fields", "use attention = unfused, or precision = bf16")
    if p.tp_comm_overlap and not prof.userbuffers.value:
        c.fail(f"parallel.tp_comm_overlap = true but stack {name} has no userbuffers overlap of TP "
               f"communication ({prof.userbuffers.source})", ("parallel.tp_comm_overlap", "train.stack"),
               "contradictory fields", "set tp_comm_overlap = false, or use stack = megatron_core or nemo")
    if p.zero in (ZeroStage.Z3, ZeroStage.FSDP) and not prof.fsdp.value:
        c.fail(f"parallel.zero = {p.zero.value} but stack {name} does not shard parameters ({prof.fsdp.source})",
               ("parallel.zero", "train.stack"), "contradictory fields", "use zero = 1, or an FSDP stack")
