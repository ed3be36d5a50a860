"""Fill what a published row leaves blank with the documented default of the framework that ran it.

A blank cell means the source did not say. The framework did run with *some* value, and its
documented default (or the setting its published scripts pass) is the best stand-in; each one
used is recorded on the row as an assumption, with the reason. Nothing here looks at a measured
value of our predictor: these are configuration facts, decided before any prediction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from llmp.dsl.spec import Precision, Recompute, Schedule, ZeroStage
from llmp.validate.rows import Row
from llmp.validate.skips import SkipReason, Unmodellable


class Framework(StrEnum):
    MEGATRON = "Megatron-LM"
    MEGATRON_CORE = "Megatron-Core (Transformer Engine)"
    MEGATRON_DEEPSPEED = "Megatron-DeepSpeed"
    COMPOSER = "Composer (llm-foundry)"
    NEMO = "NeMo"
    NEMO_AUTOMODEL = "NeMo AutoModel (FSDP2)"
    LLMP_MEASURE = "llmp measure (llmp's torch reference model)"
    GENERIC = "unknown framework"


FRAMEWORK_OF_SOURCE: dict[str, Framework] = {
    "llm-foundry": Framework.COMPOSER,
    "megatron-sc21-table1": Framework.MEGATRON,
    "megatron-sc21-table2": Framework.MEGATRON,
    "megatron-lm-readme-2020": Framework.MEGATRON,
    "megatron-lm-readme-gpt3-example": Framework.MEGATRON,
    "megatron-lm-examples-llama": Framework.MEGATRON_CORE,
    "bloom-176b-tr11": Framework.MEGATRON_DEEPSPEED,
    "mt-nlg-530b": Framework.MEGATRON_DEEPSPEED,
    "nemo-24.07-perf-summary": Framework.NEMO,
    "nemo-automodel-perf-summary": Framework.NEMO_AUTOMODEL,
    "llmp measure": Framework.LLMP_MEASURE,
}
"""Which framework produced each published source (``source`` column); others are GENERIC."""

SOURCE_RECOMPUTE: dict[str, tuple[Recompute, str]] = {
    "megatron-sc21-table2": (Recompute.FULL, ("the paper's FLOP convention (96·B·s·l·h², Table 2 as Table 1) counts a "
                             "recomputed forward, and a 175B/530B model's activations would not fit in 80 GB without it")),
    "mt-nlg-530b": (Recompute.FULL, ("the quoted TFLOP/s per GPU follow Megatron's 96·B·s·l·h² convention, which "
                    "counts the recomputed forward of activation checkpointing")),
    "megatron-lm-readme-2020": (Recompute.FULL, ("Megatron-LM's example GPT-2 scripts of 2020 pass "
                                "--checkpoint-activations, and the README's TFLOP/s match the 96·B·s·l·h² count "
                                "that includes the recomputed forward")),
}
"""Sources whose blank ``recompute`` is settled by the source itself rather than the framework default."""

PRECISIONS: dict[str, Precision] = {"bf16": Precision.BF16, "fp16": Precision.FP16, "fp8": Precision.FP8,
                                    "fp32": Precision.FP32, "tf32": Precision.TF32}

@dataclass(frozen=True, kw_only=True, slots=True)
class TrainPlan:
    """The train and parallel blocks to write for a row."""

    precision: Precision
    global_batch: int
    micro_batch: int
    recompute: Recompute
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vp: int
    schedule: Schedule
    sequence_parallel: bool
    zero: ZeroStage
    tp_comm_overlap: bool
    assumptions: tuple[str, ...] = ()


def framework_of(row: Row) -> Framework:
    return FRAMEWORK_OF_SOURCE.get(row.text("source"), Framework.GENERIC)


def zero_stage(text: str) -> ZeroStage | None:
    """``zero_stage_or_fsdp`` cell → stage (``FSDP FULL_SHARD`` → fsdp, ``ZeRO-1 (...)`` → 1); None if unreadable."""
    t = text.strip().lower()
    if t == "none":
        return ZeroStage.NONE
    if "fsdp" in t:
        # SHARD_GRAD_OP shards gradients and optimizer states but keeps whole parameters: ZeRO-2.
        return ZeroStage.Z2 if "shard_grad_op" in t else ZeroStage.FSDP
    m = re.search(r"zero-?([0-3])", t)
    if m:
        return ZeroStage.NONE if m.group(1) == "0" else ZeroStage(m.group(1))
    return None


def _precision(row: Row, fw: Framework, notes: list[str]) -> Precision:
    dtype = row.text("dtype").lower()
    if dtype in PRECISIONS:
        return PRECISIONS[dtype]
    if dtype:
        raise Unmodellable(SkipReason.UNSUPPORTED_DTYPE, f"dtype {dtype}: no such training precision in llmp "
                           f"(supported: {', '.join(PRECISIONS)})")
    stated = row.text("precision").lower()
    if stated in PRECISIONS:  # a bare precision name, as `llmp measure` writes it (fp32 on a CPU)
        notes.append(f"dtype blank: {stated} from the precision column")
        return PRECISIONS[stated]
    notes.append("dtype blank: fp16 mixed precision assumed (the 16-bit tensor-core peak; "
                 + ("Megatron-LM before 2021 trained with --fp16 only)" if fw is Framework.MEGATRON else
                    "bf16 runs at the same peak on A100/H100)"))
    return Precision.FP16


def _layout(row: Row, notes: list[str]) -> tuple[int, int, int, int, int, int]:
    n = row.integer("num_gpus")
    if n is None:
        raise Unmodellable(SkipReason.MISSING_LAYOUT, "num_gpus blank")
    degrees = {c: row.integer(c) for c in ("tp", "pp", "cp", "dp", "ep", "vp")}
    if degrees["tp"] is None and degrees["pp"] is None and degrees["dp"] is None:
        raise Unmodellable(SkipReason.MISSING_LAYOUT, "tp, pp and dp are all blank (the source gives no layout)")
    filled = []
    for axis in ("tp", "pp", "cp", "ep", "vp"):
        if degrees[axis] is None:
            degrees[axis] = 1
            filled.append(f"{axis} = 1")
    tp, pp, cp = degrees["tp"], degrees["pp"], degrees["cp"]
    assert tp is not None and pp is not None and cp is not None
    if degrees["dp"] is None:
        degrees["dp"] = max(1, n // (tp * pp * cp))
        filled.append(f"dp = num_gpus/(tp·pp·cp) = {degrees['dp']}")
    if filled:
        notes.append(f"layout blanks filled with framework defaults: {', '.join(filled)}")
    dp, ep, vp = degrees["dp"], degrees["ep"], degrees["vp"]
    assert dp is not None and ep is not None and vp is not None
    return tp, pp, dp, cp, ep, vp


def _micro_batch(row: Row, global_batch: int, dp: int, pp: int, notes: list[str]) -> int:
    mb = row.integer("micro_batch")
    if mb is not None:
        return mb
    if pp == 1 and global_batch % dp == 0:
        mb = global_batch // dp
        notes.append(f"micro_batch blank: global_batch/dp = {mb} (no pipeline, one microbatch per step; "
                     "Megatron-LM of 2020 had no gradient accumulation)")
        return mb
    notes.append("micro_batch blank: 1 (pipeline-parallel runs of Megatron/DeepSpeed use micro-batch 1 at this scale)")
    return 1


def _recompute(row: Row, fw: Framework, notes: list[str]) -> Recompute:
    cell = row.text("recompute").lower()
    if cell:
        try:
            return Recompute(cell)
        except ValueError:
            raise Unmodellable(SkipReason.SPEC_ERROR, f"recompute {cell!r} is not none/selective/full") from None
    if row.text("source") in SOURCE_RECOMPUTE:
        value, why = SOURCE_RECOMPUTE[row.text("source")]
        notes.append(f"recompute blank: {value} ({why})")
        return value
    notes.append(f"recompute blank: none ({fw} default: activation recomputation is off unless requested)")
    return Recompute.NONE


def _zero(row: Row, fw: Framework, notes: list[str]) -> ZeroStage:
    cell = row.text("zero_stage_or_fsdp")
    if cell:
        stage = zero_stage(cell)
        if stage is None:
            raise Unmodellable(SkipReason.SPEC_ERROR, f"zero_stage_or_fsdp {cell!r} not understood "
                               "(expected none, ZeRO-<n>, FSDP, FSDP2 or FSDP SHARD_GRAD_OP)")
        return stage
    if fw in (Framework.NEMO, Framework.MEGATRON_CORE):
        notes.append("zero blank: 1 (NeMo/Megatron-Core performance recipes use the distributed optimizer, "
                     "which shards optimizer states over dp)")
        return ZeroStage.Z1
    notes.append(f"zero blank: none ({fw} default: optimizer states replicated)")
    return ZeroStage.NONE


def plan_train(row: Row) -> TrainPlan:
    """The train/parallel blocks for ``row``; raises :class:`Unmodellable` when they cannot be built."""
    fw = framework_of(row)
    notes: list[str] = []
    precision = _precision(row, fw, notes)
    tp, pp, dp, cp, ep, vp = _layout(row, notes)
    global_batch = row.integer("global_batch")
    if global_batch is None:
        raise Unmodellable(SkipReason.MISSING_BATCH, "global_batch blank")
    micro_batch = _micro_batch(row, global_batch, dp, pp, notes)
    recompute = _recompute(row, fw, notes)
    zero = _zero(row, fw, notes)
    schedule = Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B
    if pp > 1 and vp == 1:
        notes.append("schedule: 1F1B (the Megatron/DeepSpeed default for pp > 1 without virtual stages)")
    sp_cell = row.text("sequence_parallel").lower()
    modern = fw in (Framework.NEMO, Framework.MEGATRON_CORE)
    if sp_cell:
        sequence_parallel = sp_cell in ("true", "1", "yes")
    else:
        sequence_parallel = modern and tp > 1
        if tp > 1:
            notes.append(f"sequence_parallel blank: {str(sequence_parallel).lower()} "
                         + ("(NeMo/Megatron-Core recipes enable it with tp > 1)" if modern
                            else f"({fw} default: off; the source predates or does not use it)"))
    tp_comm_overlap = modern and tp > 1
    if tp_comm_overlap:
        notes.append("tp_comm_overlap: true (NeMo/Megatron-Core performance recipes overlap TP communication "
                     "with GEMMs through Transformer Engine userbuffers)")
    return TrainPlan(precision=precision, global_batch=global_batch, micro_batch=micro_batch, recompute=recompute,
                     tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, schedule=schedule,
                     sequence_parallel=sequence_parallel, zero=zero, tp_comm_overlap=tp_comm_overlap,
                     assumptions=(f"framework: {fw} (from source {row.text('source')!r})", *notes))
