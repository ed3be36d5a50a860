"""What a free-text cell of a published row means: a small grammar of meanings, not a list of strings.

Cells are written by many hands: the sharding cell alone reads ``none (Megatron DDP)``,
``DDP (FSDP=0)``, ``FSDP2 (FSDP=8)``, ``zero1``, ``ZeRO-3 (DeepSpeed)``, ``Megatron distributed
optimizer (ZeRO-1-like)`` or ``FSDP SHARD_GRAD_OP``. Each cell is lower-cased and cut into
*signals* (words or ``key=value`` pairs that carry a meaning: a ZeRO stage, an FSDP strategy, a
sharding degree, a framework name); the signals are then combined by rules that say which one wins
(an explicit degree of 0 means "not sharded" whatever word precedes it; a ZeRO stage over a DDP
wrapper is that stage). A cell with no signal, or with signals that contradict each other, raises
:class:`CellError`: the row is then skipped with the cell named, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from llmp.spec.spec import Precision, Recompute, ZeroStage


class CellError(ValueError):
    """A cell whose meaning cannot be read (no known signal, or contradicting signals)."""


def normalize(text: str) -> str:
    """Lower case, ``-``/``_``/``.`` kept, every other run of punctuation or space one space."""
    return " ".join(re.sub(r"[^a-z0-9_=.+%\-/]+", " ", text.lower()).split())


# ---- sharding (zero_stage_or_fsdp) -----------------------------------------------------------

class Framework(StrEnum):
    """A framework a sharding cell names (it hints at the stack that ran the row)."""

    DEEPSPEED = "DeepSpeed"
    MEGATRON = "Megatron"
    TORCH_FSDP = "PyTorch FSDP"
    TORCH_FSDP2 = "PyTorch FSDP2"
    FAIRSCALE = "FairScale"


@dataclass(frozen=True, kw_only=True, slots=True)
class Sharding:
    """The meaning of a ``zero_stage_or_fsdp`` cell."""

    stage: ZeroStage
    degree: int | None = None
    """Ranks the states are sharded over, when the cell states it (``FSDP2 (FSDP=8)``)."""
    framework: Framework | None = None
    because: str = ""
    """The signals that decided it, for the row's assumptions."""


_FSDP_STRATEGY = {
    "full_shard": ZeroStage.FSDP, "fully_shard": ZeroStage.FSDP, "shard_grad_op": ZeroStage.Z2,
    "no_shard": ZeroStage.NONE, "hybrid_shard": ZeroStage.FSDP, "hsdp": ZeroStage.FSDP,
    # Megatron-Core's --data-parallel-sharding-strategy (custom FSDP): what is sharded.
    "optim_grads_params": ZeroStage.FSDP, "optim_grads": ZeroStage.Z2,
}
"""Sharding-strategy words → stage (PyTorch ``ShardingStrategy`` names, Megatron FSDP strategies)."""

_UNMODELLED_SHARDING = ("offload", "infinity", "zero++", "zeropp", "hpz", "mics")
"""Modifiers that change time and memory in ways llmp does not model: such a cell is not guessed."""

_NO_SHARDING = frozenset({"none", "no", "off", "false", "0", "ddp", "dp", "replicated", "n/a", "na"})


def sharding(cell: str) -> Sharding:
    """The meaning of a ``zero_stage_or_fsdp`` cell; raises :class:`CellError` if it has none or two."""
    text = normalize(cell)
    if not text:
        raise CellError("blank")
    if re.fullmatch(r"[\d\s()]+", text) and text != "0":
        raise CellError(f"{cell!r} is a bare number: a ZeRO stage or an FSDP sharding size? (write ZeRO-<n>, "
                        "FSDP=<n> or none)")
    for word in _UNMODELLED_SHARDING:
        if word in text:
            raise CellError(f"{word!r}: sharding with {word} is not modelled")
    stages: dict[ZeroStage, str] = {}

    def found(stage: ZeroStage, why: str) -> None:
        stages.setdefault(stage, why)

    for m in re.finditer(r"\bzero[-_ ]?(?:stage[-_ ]?)?([0-3])(?![0-9])", text):
        found(ZeroStage.NONE if m.group(1) == "0" else ZeroStage(m.group(1)), m.group(0))
    for m in re.finditer(r"\bstage[-_ ]?([0-3])\b", text):
        found(ZeroStage.NONE if m.group(1) == "0" else ZeroStage(m.group(1)), m.group(0))
    if re.search(r"\bdistributed[-_ ]optimi[sz]er\b|\bdist[-_ ]?opt(?:imi[sz]er)?\b", text):
        found(ZeroStage.Z1, "distributed optimizer (optimizer states sharded over dp)")
    strategy = next((w for w in _FSDP_STRATEGY if re.search(rf"\b{w}\b", text)), None)
    if strategy is not None:
        found(_FSDP_STRATEGY[strategy], strategy)
    elif re.search(r"\b(fsdp[12]?|fully[-_ ]sharded?)\b", text):
        found(ZeroStage.FSDP, "FSDP (parameters, gradients and optimizer states sharded)")
    stated = re.search(r"\b(?:fsdp|shard(?:ing)?)[-_ ]?(?:size|degree)?\s*=\s*(\d+)\b", text)
    degree = int(stated.group(1)) if stated else None
    framework = _framework(text)
    if stated and degree == 0:  # an explicit sharding degree of 0: plain data parallelism, whatever word precedes it
        return Sharding(stage=ZeroStage.NONE, degree=0, framework=framework, because=f"{stated.group(0)}: not sharded")
    sharded = {s: w for s, w in stages.items() if s is not ZeroStage.NONE}
    if len(sharded) > 1:
        raise CellError("contradicting signals: " + ", ".join(sharded.values()))
    if sharded:
        ((stage, why),) = sharded.items()
        return Sharding(stage=stage, degree=degree, framework=framework, because=why)
    words = set(text.replace("(", " ").split())
    if ZeroStage.NONE in stages or words & _NO_SHARDING:
        why = stages.get(ZeroStage.NONE) or ", ".join(sorted(words & _NO_SHARDING))
        return Sharding(stage=ZeroStage.NONE, degree=degree, framework=framework, because=why)
    raise CellError("no sharding named (expected none/DDP, ZeRO-<n>, a distributed optimizer, FSDP or an "
                    "FSDP strategy such as FULL_SHARD)")


def _framework(text: str) -> Framework | None:
    if "deepspeed" in text:
        return Framework.DEEPSPEED
    if "fairscale" in text:
        return Framework.FAIRSCALE
    if "megatron" in text:
        return Framework.MEGATRON
    if re.search(r"\bfsdp2\b|fully_shard\b", text):
        return Framework.TORCH_FSDP2
    if re.search(r"\bfsdp1?\b", text):
        return Framework.TORCH_FSDP
    return None


# ---- booleans (sequence_parallel, ...) ------------------------------------------------------

_TRUE = frozenset({"yes", "y", "true", "on", "enabled", "enable", "1", "sp"})
_FALSE = frozenset({"no", "n", "false", "off", "disabled", "disable", "0", "none"})


def boolean(cell: str) -> bool:
    """``yes``/``no``/``true``/``False``/``on``/``1``..., a parenthesised remark ignored (``yes (tp > 1)``)."""
    head = normalize(cell.split("(", 1)[0])
    words = set(head.split())
    if words and words <= _TRUE:
        return True
    if words and words <= _FALSE:
        return False
    raise CellError("expected yes/no, true/false, on/off or 1/0")


# ---- recompute -----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class RecomputeCell:
    """The meaning of a ``recompute`` cell."""

    recompute: Recompute
    because: str = ""


def recompute(cell: str) -> RecomputeCell:
    """``none``/``full``/``selective`` and their spellings (``full (uniform)``, ``selective op``, ``yes``)."""
    text = normalize(cell).replace("_", " ")
    if not text:
        raise CellError("blank")
    if re.search(r"\boffload|\bcpu\b", text):
        raise CellError("activation offloading is not modelled")
    if re.search(r"\b\d+\s*(?:of|/)\s*\d+\s*layers?\b|\bpartial\b", text) or (
            re.search(r"\bnum[-_ ]layers\b", text) and not re.search(r"\buniform\b", text)):
        raise CellError("recomputation of only some layers is not expressible (recompute is none, selective or full)")
    kinds: dict[Recompute, str] = {}
    if re.search(r"\bselective\b|\bsac\b|\bcore[-_ ]attn\b", text):
        kinds[Recompute.SELECTIVE] = "selective"
    if re.search(r"\bfull\b|\buniform\b|\bblock\b", text):
        kinds[Recompute.FULL] = "full"
    if not kinds and re.search(r"checkpoint[- ]activations|use checkpoint\s*=\s*true|activation checkpoint(?:ing)?\s*"
                               r"[:=]?\s*true", text):
        kinds[Recompute.FULL] = ("activation checkpointing on: every layer's forward re-run (Megatron "
                                 "--checkpoint-activations, Composer/AutoModel activation_checkpointing: True)")
    words = set(text.split())
    if not kinds:
        if words & {"none", "no", "off", "false", "0", "disabled"}:
            kinds[Recompute.NONE] = "none"
        elif words & {"yes", "true", "on", "enabled", "1"} or "checkpointing" in text:
            kinds[Recompute.FULL] = ("activation checkpointing on: every layer's forward re-run (Composer/HF "
                                     "activation_checkpointing, Megatron --checkpoint-activations)")
    if len(kinds) != 1:
        raise CellError("contradicting signals" if kinds else "expected none, selective or full")
    ((value, why),) = kinds.items()
    return RecomputeCell(recompute=value, because=why)


# ---- precision (precision and dtype) -----------------------------------------------------------

class Dtype(StrEnum):
    """Number formats a precision cell may name, narrowest first."""

    NVFP4 = "nvfp4"
    MXFP8 = "mxfp8"
    FP8 = "fp8"
    FP16 = "fp16"
    BF16 = "bf16"
    TF32 = "tf32"
    FP32 = "fp32"


_DTYPE_WORDS: tuple[tuple[str, Dtype], ...] = (
    (r"nvfp4|fp4", Dtype.NVFP4), (r"mxfp8|fp8[- ]mx|mx[- ]?fp8", Dtype.MXFP8),
    (r"fp8(?:[- ](?:cs|ds|bs))?|float8|e4m3|e5m2", Dtype.FP8),
    (r"fp16|float16|half", Dtype.FP16), (r"bf16|bfloat16", Dtype.BF16), (r"tf32|tensorfloat32", Dtype.TF32),
    (r"fp32|float32|full precision|single precision", Dtype.FP32),
)
"""Format words, most specific first: a span read as one format is not read again (``FP8-MX`` is MXFP8,
not also FP8; ``FP8-CS``/``FP8-DS`` are FP8 with current or delayed scaling, as Megatron-Bridge's
performance tables spell them)."""
_WIDTH = {Dtype.NVFP4: 4, Dtype.MXFP8: 8, Dtype.FP8: 8, Dtype.FP16: 16, Dtype.BF16: 16, Dtype.TF32: 19, Dtype.FP32: 32}

PRECISIONS: dict[Dtype, Precision] = {Dtype.BF16: Precision.BF16, Dtype.FP16: Precision.FP16, Dtype.FP8: Precision.FP8,
                                      Dtype.FP32: Precision.FP32, Dtype.TF32: Precision.TF32,
                                      Dtype.MXFP8: Precision.MXFP8, Dtype.NVFP4: Precision.NVFP4}
"""Formats llmp trains in (each cell format is a training precision)."""


_FORMAT_LIKE = re.compile(r"(?<![a-z0-9])(?:fp|bf|float|bfloat|half|int|uint|tf|mxfp|nvfp|mxint|e\dm)\d+[a-z0-9]*")
"""A word shaped like a number format (``fp13``, ``int4``, ``float24``): when it is none of
:data:`_DTYPE_WORDS`, the cell names a format llmp does not know, and guessing one would score
another run."""


def dtypes_named(cell: str) -> tuple[Dtype, ...]:
    """Every number format the text names (``amp_bf16`` and ``bfloat16`` both name bf16); raises
    :class:`CellError` for a format-like word that is no format llmp knows (``fp13``)."""
    text = normalize(cell).replace("_", " ")
    named = []
    for pattern, dtype in _DTYPE_WORDS:
        regex = rf"(?<![a-z0-9])(?:amp )?(?:{pattern})(?![a-z0-9])"
        if re.search(regex, text):
            named.append(dtype)  # a format inside a longer word ("fp8" in "mxfp8") is not named
            text = re.sub(regex, " ", text)
    unknown = _FORMAT_LIKE.search(text)
    if unknown:
        raise CellError(f"{cell!r} names {unknown.group(0)!r}, a number format llmp does not know "
                        f"(formats: {', '.join(d.value for d in Dtype)})")
    return tuple(named)


def compute_dtype(cell: str) -> Dtype | None:
    """The format GEMMs run in: the narrowest one a precision cell names (mixed-precision cells name
    their FP32 master weights or optimizer states as well: ``fp16 weights, fp32 Adam state``);
    None when the cell names none (``mixed precision (type not stated)``). Two different 16-bit
    formats contradict each other."""
    named = dtypes_named(cell)
    if not named:
        return None
    narrowest = min(_WIDTH[d] for d in named)
    at = sorted({d for d in named if _WIDTH[d] == narrowest})
    if len(at) > 1:
        raise CellError(f"{cell!r} names both {' and '.join(d.value for d in at)} (alternatives, not one run)")
    return at[0]


_FAMILY = {Dtype.MXFP8: Dtype.FP8, Dtype.NVFP4: Dtype.NVFP4}
"""Block-scaled formats and the family a normalised ``dtype`` cell may name them by (MXFP8 is an FP8
format with a shared 8-bit exponent per 32 values: OCP Microscaling Formats v1.0)."""


def training_dtype(dtype_cell: str, precision_cell: str) -> Dtype | None:
    """The format GEMMs run in, from the normalised ``dtype`` column and the free-text ``precision``
    column together; a block-scaled format in one and its family in the other is the block-scaled one
    (``fp8`` beside ``FP8-MX`` is MXFP8). Raises :class:`CellError` quoting both when they disagree."""
    from_dtype, from_text = compute_dtype(dtype_cell), compute_dtype(precision_cell)
    if from_dtype is None or from_text is None or from_dtype is from_text:
        return from_dtype or from_text
    for specific, general in ((from_text, from_dtype), (from_dtype, from_text)):
        if _FAMILY.get(specific) is general:
            return specific
    raise CellError(f"dtype {dtype_cell!r} and precision {precision_cell!r} name different formats "
                    f"({from_dtype} vs {from_text})")

