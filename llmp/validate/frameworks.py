"""Which stack ran a published row, and the train/parallel blocks its cells and notes state.

The stack (:mod:`llmp.stacks`) says what a training stack does by default; this module only
decides *which* stack ran the row (from its ``source``/``source_ref``, its framework cells and its
notes, :data:`SOURCE_STACKS`) and reads what the row itself states (cells through
:mod:`~llmp.validate.cells`, notes through :mod:`~llmp.validate.notes`) and, where the row is
silent, what the recipe behind its source set (:mod:`~llmp.validate.source_recipes`). The generated
spec names the stack and writes only what the row states; every field the row leaves to the stack
is recorded as an assumption citing the profile item that decides it. Nothing here looks at a measured value:
these are configuration facts, decided before any prediction.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from llmp.analytic.split import OPTIONS, UNEVEN, Uneven, recipe_split
from llmp.spec.spec import Fp8Scaling, Precision, Recompute, Schedule, Stack, ZeroStage, replica_size
from llmp.stacks import profile
from llmp.validate import cells
from llmp.validate.cells import CellError, Framework, Sharding
from llmp.validate.models import ModelPlan
from llmp.validate.notes import Notes
from llmp.validate.rows import Measurement, Row
from llmp.validate.skips import SkipReason, Unmodellable
from llmp.validate.source_recipes import (
    MEGATRON_RECIPES,
    RECIPE_SEQUENCE_PARALLEL,
    SOURCE_PARTITION,
    SOURCE_RECIPES,
    SOURCE_RECOMPUTE,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceRule:
    """A stack recognised from the words of a row's ``source`` and ``source_ref``."""

    pattern: str
    """Regular expression, matched case-insensitively."""
    stack: Stack
    why: str


SOURCE_STACKS: tuple[SourceRule, ...] = (
    SourceRule(pattern=r"torchtitan", stack=Stack.TORCHTITAN, why="torchtitan runs"),
    SourceRule(pattern=r"automodel", stack=Stack.NEMO_AUTOMODEL, why="NeMo AutoModel (Hugging Face models on FSDP2)"),
    SourceRule(pattern=r"megatron[-_ ]?bridge", stack=Stack.NEMO,
               why="Megatron-Bridge performance recipes (NeMo 2 recipes on Megatron-Core + TE)"),
    SourceRule(pattern=r"dgx[-_ ]?cloud|\bdgxc\b|dgxc[-_ ]", stack=Stack.NEMO,
               why="NVIDIA DGX Cloud benchmarking recipes run NeMo / Megatron-Bridge"),
    SourceRule(pattern=r"\bnemo\b|nemo[-_ ]\d|nvidia/nemo\b", stack=Stack.NEMO, why="NeMo performance recipes"),
    SourceRule(pattern=r"llm[-_ ]?foundry|\bcomposer\b|mosaicml", stack=Stack.COMPOSER,
               why="llm-foundry trains with Composer on PyTorch FSDP"),
    SourceRule(pattern=r"megatron[-_ ]deepspeed|mt[-_ ]?nlg|megatron[-_ ]turing|\bbloom\b|bigscience",
               stack=Stack.MEGATRON_DEEPSPEED,
               why="BLOOM and MT-NLG were trained with Megatron-DeepSpeed"),
    SourceRule(pattern=r"gpt[-_ ]?neox|eleutherai", stack=Stack.GPT_NEOX, why="GPT-NeoX (EleutherAI)"),
    SourceRule(pattern=r"megatron[-_ ]?lm[-_ ]?(?:ci\b|functional)|functional[-_ ]tests?|golden[-_ ]values",
               stack=Stack.MEGATRON_CORE, why="Megatron-LM CI functional tests run Megatron-Core"),
    SourceRule(pattern=r"megatron[^;]*(?:sc21|2020|readme)|narayanan", stack=Stack.MEGATRON_LM,
               why="the SC21 paper and the README tables of 2020-2021 ran legacy Megatron-LM"),
    SourceRule(pattern=r"megatron[-_ ]?lm[-_ ]?examples|megatron[-_ ]?core|\bmcore\b", stack=Stack.MEGATRON_CORE,
               why="Megatron-LM's examples/ scripts run Megatron-Core with TransformerEngine"),
    SourceRule(pattern=r"llmp measure", stack=Stack.GENERIC, why="llmp's own torch reference model"),
)
"""Sources met in published tables (and their public names), first match wins; the ``source`` cell
is read before ``source_ref`` (a reference may name a README of another stack's repository)."""

NOTE_STACKS: tuple[SourceRule, ...] = (
    SourceRule(pattern=r"megatron[-_ ]deepspeed", stack=Stack.MEGATRON_DEEPSPEED,
               why="the notes name Megatron-DeepSpeed"),
    SourceRule(pattern=r"gpt[-_ ]?neox", stack=Stack.GPT_NEOX, why="the notes name GPT-NeoX"),
    SourceRule(pattern=r"torchtitan", stack=Stack.TORCHTITAN, why="the notes name torchtitan"),
    SourceRule(pattern=r"nemo[-_ ]?automodel", stack=Stack.NEMO_AUTOMODEL, why="the notes name NeMo AutoModel"),
    SourceRule(pattern=r"megatron[-_ ]?bridge|\bnemo\b", stack=Stack.NEMO,
               why="the notes name NeMo / Megatron-Bridge"),
    SourceRule(pattern=r"llm[-_ ]?foundry|\bcomposer\b", stack=Stack.COMPOSER,
               why="the notes name llm-foundry / Composer"),
    SourceRule(pattern=r"--transformer-impl|transformer_engine|megatron[-_ ]core|\bmcore\b", stack=Stack.MEGATRON_CORE,
               why="the notes name Megatron-Core flags"),
)
"""Stacks recognised from notes, for sources no :data:`SOURCE_STACKS` rule knows. A stack the notes
say ran the measurement (``measured with``, ``collected using``, ``trained with``, ``codebase``) wins
over one they only mention; two stacks named alike are not guessed between (the row is generic)."""

RAN_WITH = r"(?:measured|collected|trained|run|ran|benchmarked|obtained)\s+(?:with|using|on|in)\s+(?:the\s+)?$"
"""Words before a stack's name that say the measurement ran on it."""


def note_stack(notes: str) -> tuple[Stack, str] | None:
    """The stack the notes say ran the measurement (see :data:`NOTE_STACKS`), with the words that say it."""
    found: dict[Stack, tuple[bool, str]] = {}
    for rule in NOTE_STACKS:
        for m in re.finditer(rule.pattern, notes, re.IGNORECASE):
            cued = bool(re.search(RAN_WITH, notes[max(0, m.start() - 40):m.start()], re.IGNORECASE)) or bool(
                re.match(r"[^;]{0,12}\b(?:codebase|code base)\b", notes[m.end():], re.IGNORECASE))
            said = notes[max(0, m.start() - 30):m.end() + 12].strip()
            if rule.stack not in found or (cued and not found[rule.stack][0]):
                found[rule.stack] = (cued, f"{rule.why}: ...{said}...")
    ran = {stack: why for stack, (was, why) in found.items() if was}
    pick = ran or {stack: why for stack, (_, why) in found.items()}
    if len(pick) == 1:
        ((stack, why),) = pick.items()
        return stack, why
    return None


SPLIT_FIELDS = ("stage_layers", "first_stage_layers", "last_stage_layers", "account_for_embedding",
                "account_for_loss", "partition", "pipeline_layout")
"""``parallel`` fields that say how the pipeline stages split the layers (llmp/analytic/split.py)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainPlan:
    """The train and parallel blocks to write for a row: layout, batch, and what the row states."""

    stack: Stack
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
    train: dict[str, Any] = field(default_factory=dict)
    """Further ``train`` fields the row states (they override the stack profile)."""
    parallel: dict[str, Any] = field(default_factory=dict)
    """Further ``parallel`` fields the row states (``zero``, ``tp_comm_overlap``, ...)."""
    assumptions: tuple[str, ...] = ()


def stack_of(m: Measurement, sharding: Sharding | None, notes: Notes) -> tuple[Stack, str]:
    """The stack that ran ``m`` and why (see the module docstring)."""
    row = m.config
    rule = next((r for where in (row.text("source"), row.text("source_ref")) for r in SOURCE_STACKS
                 if re.search(r.pattern, where, re.IGNORECASE)), None)
    if sharding is not None and sharding.framework is Framework.DEEPSPEED and (
            rule is None or rule.stack not in (Stack.MEGATRON_DEEPSPEED, Stack.GPT_NEOX)):
        if sharding.stage in (ZeroStage.NONE, ZeroStage.Z1):
            return Stack.MEGATRON_DEEPSPEED, "the sharding cell names DeepSpeed (ZeRO-0/1 with Megatron's model)"
        return Stack.GENERIC, (f"the sharding cell names DeepSpeed ZeRO-{sharding.stage}, which no stack profile "
                               "models (megatron_deepspeed and gpt_neox run ZeRO-1 at most): generic")
    if rule is not None:
        return rule.stack, f"source {row.text('source')!r}: {rule.why}"
    noted = note_stack(m.notes)
    if noted is not None:
        return noted
    return Stack.GENERIC, f"no stack recognised for source {row.text('source')!r}: generic (fused kernels everywhere)"


_SCALING_WORDS: tuple[tuple[str, Fp8Scaling, str], ...] = (
    (r"block[- ]?wise|1x128|128x128", Fp8Scaling.BLOCKWISE, "the row names block scaling"),
    (r"tensorwise|fp8[-_ ]cs\b|current scaling|dynamic scaling|torchao|float8 ?nn\.linear|float8linear",
     Fp8Scaling.CURRENT,
     "the row names per-tensor current scaling (Megatron --fp8-recipe tensorwise = TE Float8CurrentScaling; "
     "torchao Float8Linear's tensorwise recipe scales from each tensor's own amax)"),
    (r"delayed|fp8[-_ ]ds\b", Fp8Scaling.DELAYED, "the row names delayed scaling"),
)


def fp8_scaling_of(row: Row, stack: Stack) -> tuple[Fp8Scaling, str]:
    """The FP8 scaling recipe an fp8 row ran, and why: named in its precision or notes, else the
    stack's default: torchao's tensorwise recipe for torchtitan (pytorch/torchtitan@v0.1.0 float8
    converter: ``Float8LinearConfig`` with dynamic scaling), TransformerEngine's ``DelayedScaling``
    for the TE stacks (Megatron ``--fp8-recipe`` default ``delayed``; NeMo and Composer's
    ``amp_fp8`` pass a ``DelayedScaling`` recipe)."""
    text = f"{row.text('precision')} {row.text('notes')}".lower()
    for pattern, scaling, because in _SCALING_WORDS:
        if re.search(pattern, text):
            return scaling, because
    if stack is Stack.TORCHTITAN:
        return Fp8Scaling.CURRENT, "torchtitan trains FP8 with torchao Float8Linear, tensorwise scaling"
    return Fp8Scaling.DELAYED, "TransformerEngine's default recipe (DelayedScaling) for a TE stack"


def precision_of(row: Row, stack: Stack, notes: list[str]) -> Precision:
    """The training precision from ``dtype`` (the normalised column) and ``precision`` (free text)."""
    try:
        dtype = cells.training_dtype(row.text("dtype"), row.text("precision"))
    except CellError as err:
        raise Unmodellable(SkipReason.CELL, f"precision/dtype: {err}") from None
    if dtype is None:
        notes.append("dtype blank: fp16 mixed precision assumed (the 16-bit tensor-core peak; "
                     + ("Megatron-LM before 2021 trained with --fp16 only)" if stack is Stack.MEGATRON_LM else
                        "bf16 runs at the same peak on A100/H100)"))
        return Precision.FP16
    if dtype not in cells.PRECISIONS:
        raise Unmodellable(SkipReason.UNSUPPORTED_DTYPE, f"dtype {dtype}: no such training precision in llmp "
                           f"(supported: {', '.join(d.value for d in cells.PRECISIONS)})")
    if not row.text("dtype"):
        notes.append(f"dtype blank: {dtype} from the precision column {row.text('precision')!r}")
    return cells.PRECISIONS[dtype]


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
        degrees["dp"] = max(1, n // replica_size(tp, pp, cp))
        filled.append(f"dp = num_gpus/(tp·pp·cp) = {degrees['dp']}")
    if filled:
        notes.append(f"layout blanks filled: {', '.join(filled)}")
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


def _recompute(row: Row, noted: Notes, notes: list[str]) -> Recompute:
    cell = row.text("recompute")
    if cell:
        try:
            read = cells.recompute(cell)
        except CellError as err:
            raise Unmodellable(SkipReason.CELL, f"recompute {cell!r} not understood: {err}") from None
        if read.because not in ("none", "full", "selective"):
            notes.append(f"recompute {cell!r}: {read.recompute} ({read.because})")
        return read.recompute
    fact = noted.get("train.recompute")
    if fact is not None:
        notes.append(f"recompute blank: {fact.value} (notes: {fact.text!r})")
        return fact.value
    if row.text("source") in SOURCE_RECOMPUTE:
        value, why = SOURCE_RECOMPUTE[row.text("source")]
        notes.append(f"recompute blank: {value} ({why})")
        return value
    notes.append("recompute blank: none (activation recomputation is off unless a run asks for it)")
    return Recompute.NONE


def sharding_of(row: Row) -> Sharding | None:
    """The ``zero_stage_or_fsdp`` cell's meaning (None when blank); an unreadable cell is a skip."""
    cell = row.text("zero_stage_or_fsdp")
    if not cell:
        return None
    try:
        return cells.sharding(cell)
    except CellError as err:
        raise Unmodellable(SkipReason.CELL, f"zero_stage_or_fsdp {cell!r} not understood: {err}") from None


def _default(stack: Stack, name: str) -> str:
    item = getattr(profile(stack), name)
    shown = profile(stack).default_text(name)
    return f"{shown} (stack {stack} default: {item.source})"


def _sequence_parallel(row: Row, stack: Stack, tp: int, noted: Notes, notes: list[str]) -> bool:
    cell = row.text("sequence_parallel")
    if cell:
        try:
            return cells.boolean(cell)
        except CellError as err:
            raise Unmodellable(SkipReason.CELL, f"sequence_parallel {cell!r} not understood: {err}") from None
    fact = noted.get("parallel.sequence_parallel")
    if fact is not None:
        return bool(fact.value)
    on = stack in RECIPE_SEQUENCE_PARALLEL and tp > 1
    if tp > 1:
        why = RECIPE_SEQUENCE_PARALLEL.get(stack, f"stack {stack}: off unless a run asks for it")
        notes.append(f"sequence_parallel blank: {str(on).lower()} ({why})")
    return on


def _split(row: Row, stack: Stack, pp: int, vp: int, noted: Notes, notes: list[str],
           model: ModelPlan | None) -> dict[str, Any]:
    """The ``parallel`` fields that split the layers over the pipeline chunks, beyond what the notes
    state: the source's own partition method; nothing where the stack's own code splits any count
    (DeepSpeed's partition, NeMo AutoModel's and torchtitan's rules: :data:`llmp.analytic.split.UNEVEN`);
    for a Megatron-Core recipe, the model's recipe layout for this pp x vp, else the recipes'
    embedding/loss accounting (:func:`llmp.analytic.split.recipe_split`). Layers that do not divide
    with nothing saying how are refused here, naming the options, rather than guessed."""
    stated = {f: fact for f, fact in noted.section("parallel").items() if f in SPLIT_FIELDS}
    if stated:
        return {}
    if row.text("source") in SOURCE_PARTITION and pp > 1:
        method, why = SOURCE_PARTITION[row.text("source")]
        notes.append(f'partition = "{method}" ({why})')
        return {"partition": method}
    layers = row.integer("layers") if model is None else model.layers
    if layers is None or layers % (pp * vp) == 0:
        return {}
    if profile(stack).partition.value:
        notes.append(f"layers({layers}) over pp({pp}): the stack's DeepSpeed partition splits them "
                     f"({_default(stack, 'partition')})")
        return {}
    rule, source = UNEVEN.get(stack, (Uneven.REFUSE, ""))
    if rule is not Uneven.REFUSE:
        notes.append(f"layers({layers}) over pp({pp}) x vp({vp}): stack {stack} splits them itself ({source})")
        return {}
    if stack in MEGATRON_RECIPES:
        mtp = (model.mtp_layers or 0) if model is not None else 0
        layout = dict(model.layouts).get((pp, vp)) if model is not None else None
        if layout is not None and model is not None and mtp == 1:
            notes.append(f'pipeline_layout = "{layout}": {model.name}\'s {layers} layers over pp({pp}) x vp({vp}) as '
                         f"its recipe lays them out ({model.recipe_source})")
            return {"pipeline_layout": layout}
        recipe = recipe_split(layers, pp, vp, mtp)
        if recipe is not None:
            notes.append(f"{', '.join(f'{f} = {value_text(v)}' for f, v in recipe.fields)}: {layers} layers do not "
                         f"divide pp({pp}) x vp({vp}) and the row does not say how; {recipe.why}")
            return dict(recipe.fields)
    raise Unmodellable(SkipReason.UNSTATED_SPLIT, (
        f"layers({layers}) do not divide pp({pp}) x vp({vp}) = {pp * vp} chunks and the row does not say how "
        f"stack {stack} split them (Megatron-LM refuses an unequal split unless told: "
        "--decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-split or "
        "--pipeline-model-parallel-layout; DeepSpeed: --pp-partition-method). llmp takes any of them: "
        f"{OPTIONS}"))


_BRIDGE_ETP = ("Megatron-Bridge's MoE recipes run the experts unsplit, expert_tensor_parallel_size = 1 "
               "(NVIDIA-NeMo/Megatron-Bridge@05d003f:src/megatron/bridge/recipes/deepseek/deepseek_v3.py, "
               "_deepseek_v3_common), against Megatron's default of tp")


def _expert_tp(stack: Stack, tp: int, cp: int, dp: int, ep: int, model: ModelPlan | None,
               notes: list[str]) -> dict[str, Any]:
    """The expert tensor-parallel degree of a MoE row on a Megatron-Core recipe (the schema has no
    column for it): the model's recipe value; else Megatron's default (tp) unless that cannot fold
    into the layout (``tp * ep`` not dividing ``tp * cp * dp``: the run folded ep into tp, so it split
    experts less), then the recipes' 1. Empty where Megatron's default stands."""
    if model is None or not model.moe or stack not in MEGATRON_RECIPES or tp == 1:
        return {}
    if model.etp is not None:
        notes.append(f"etp = {model.etp}: {model.name}'s recipe ({model.recipe_source})")
        return {"etp": model.etp}
    if (tp * cp * dp) % (tp * ep) and (tp * cp * dp) % ep == 0:
        notes.append(f"etp = 1: with Megatron's default etp = tp({tp}), etp * ep({ep}) = {tp * ep} does not divide "
                     f"tp * cp * dp = {tp * cp * dp}, so the run split its experts less; {_BRIDGE_ETP}")
        return {"etp": 1}
    return {}


def plan_train(m: Measurement, noted: Notes, model: ModelPlan | None = None) -> TrainPlan:
    """The train/parallel blocks for ``m`` (whose model is ``model``, for its pipeline split); raises
    :class:`Unmodellable` when they cannot be built."""
    row = m.config
    sharding = sharding_of(row)
    stack, why = stack_of(m, sharding, noted)
    notes: list[str] = [f"stack: {stack} ({why})"]
    precision = precision_of(row, stack, notes)
    tp, pp, dp, cp, ep, vp = _layout(row, notes)
    global_batch = row.integer("global_batch")
    if global_batch is None:
        raise Unmodellable(SkipReason.MISSING_BATCH, "global_batch blank")
    micro_batch = _micro_batch(row, global_batch, dp, pp, notes)
    recompute = _recompute(row, noted, notes)
    schedule = Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B
    if pp > 1 and vp == 1:
        notes.append("schedule: 1F1B (the Megatron/DeepSpeed default for pp > 1 without virtual stages)")
    sequence_parallel = _sequence_parallel(row, stack, tp, noted, notes)
    train = {f: fact.value for f, fact in noted.section("train").items() if f != "recompute"}
    for recipe in SOURCE_RECIPES:
        if recipe.applies(row.text("source"), row.text("model_name"), precision, row.text("precision")):
            for f, value in recipe.fields:
                if f not in train:
                    train[f] = value
                    notes.append(f"{f} = {value_text(value)} ({recipe.why})")
    if precision is Precision.FP8 and "fp8_scaling" not in train:
        scaling, because = fp8_scaling_of(row, stack)
        train["fp8_scaling"] = scaling
        notes.append(f"fp8_scaling = {scaling} ({because})")
    parallel = {f: fact.value for f, fact in noted.section("parallel").items() if f != "sequence_parallel"}
    for f, fact in (*noted.section("train").items(), *noted.section("parallel").items()):
        if f not in ("recompute", "sequence_parallel"):
            notes.append(f"{f} = {value_text(fact.value)} (notes: {fact.text!r})")
    parallel.update(_split(row, stack, pp, vp, noted, notes, model))
    if "etp" not in parallel:
        parallel.update(_expert_tp(stack, tp, cp, dp, ep, model, notes))
    if sharding is not None:
        if sharding.degree not in (None, 0, dp, dp * cp) and sharding.stage is not ZeroStage.NONE:
            raise Unmodellable(SkipReason.UNEXPRESSIBLE, f"zero_stage_or_fsdp {row.text('zero_stage_or_fsdp')!r} "
                               f"shards over {sharding.degree} ranks of dp·cp = {dp * cp} (hybrid sharding): llmp "
                               "shards over the whole data-parallel group")
        parallel["zero"] = sharding.stage
        notes.append(f"zero = {sharding.stage} (zero_stage_or_fsdp {row.text('zero_stage_or_fsdp')!r}: "
                     f"{sharding.because})")
    elif "zero" not in parallel:
        notes.append(f"zero_stage_or_fsdp blank: zero = {_default(stack, 'zero')}")
    if tp > 1 and "tp_comm_overlap" not in parallel:
        if profile(stack).tp_comm_overlap.value and not sequence_parallel:
            parallel["tp_comm_overlap"] = False
            notes.append("tp_comm_overlap = false: TransformerEngine's userbuffers overlap needs sequence "
                         "parallelism, which this run does not use (NVIDIA/NeMo@v2.0.0:nemo/lightning/pytorch/"
                         "callbacks/megatron_comm_overlap.py: disabled when sequence_parallel is False)")
        else:
            notes.append(f"tp_comm_overlap = {_default(stack, 'tp_comm_overlap')}")
    for unmodelled in noted.unmodelled:
        notes.append(f"not modelled: {unmodelled}")
    return TrainPlan(stack=stack, precision=precision, global_batch=global_batch, micro_batch=micro_batch,
                     recompute=recompute, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, schedule=schedule,
                     sequence_parallel=sequence_parallel, train=train, parallel=parallel, assumptions=tuple(notes))


def value_text(value: Any) -> str:
    """``value`` as .llmp text (enums by value, booleans lower case, strings quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)
