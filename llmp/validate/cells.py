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


# ---- network (interconnect_inter) --------------------------------------------------------------
#
# A network cell is read as a list of *clauses* (split at role labels such as ``Compute:`` or
# ``Storage+Management:`` and at ``,`` ``;`` ``+``), each clause a small sentence of quantities and
# roles: a count of NICs (``8x``, ``4 NICs``, ``(4 OPA links per node)``), a rate per NIC (``400Gb/s``,
# ``200 Gb / Sec``, ``100GbE``, ``NDR400``, ``3.2 Tbps``; bytes per second ``GB/s`` are x8), a scope
# (per GPU, per node, per NIC), a fabric (InfiniBand and its generations, RoCE, Slingshot, ...) and a
# role (compute, storage, management, the scale-up NVLink fabric, the PCIe host bus). The compute
# fabric is what is left once storage, management, front-end Ethernet beside an RDMA fabric, NVLink
# and PCIe clauses are set aside; its per-node rate is count x rate per NIC, whatever the order.


class Fabric(StrEnum):
    """Scale-out network technologies a cell may name."""

    INFINIBAND = "InfiniBand"
    ROCE = "RoCE"
    SLINGSHOT = "Slingshot"
    OMNI_PATH = "Omni-Path"
    EFA = "EFA"
    SPECTRUM_X = "Spectrum-X"
    ETHERNET = "Ethernet"
    """Plain Ethernet (no RDMA named): front-end networking when an RDMA fabric is named beside it."""


class Role(StrEnum):
    """What a clause of a network cell describes."""

    COMPUTE = "compute"
    STORAGE = "storage"
    MANAGEMENT = "management"
    FRONT_END = "front-end Ethernet"
    SCALE_UP = "scale-up fabric (NVLink / xGMI), not the inter-node network"
    HOST_BUS = "host bus (PCIe), not a network"


_FABRICS: tuple[tuple[str, Fabric], ...] = (
    (r"\broce(?:v?2)?\b|\brocev2\b", Fabric.ROCE),
    (r"slingshot", Fabric.SLINGSHOT),
    (r"omni-?path|\bopa\b", Fabric.OMNI_PATH),
    (r"\befa\b|elastic fabric adapter", Fabric.EFA),
    (r"spectrum-?x", Fabric.SPECTRUM_X),
    (r"infini-?band|\bib\b|\b(?:[ehnx]dr|fdr|qdr)(?:\d+)?\b|quantum-?(?:2|x800)", Fabric.INFINIBAND),
    (r"ethernet|\d\s*gbe\b|\bgbe\b|gige|gigabit|gbase", Fabric.ETHERNET),
)
"""Fabric words, most specific first (a VPI card named ``InfiniBand NDR/Ethernet`` is InfiniBand)."""

GENERATION_GBPS: dict[str, float] = {"qdr": 40, "fdr": 56, "edr": 100, "hdr100": 100, "hdr": 200, "ndr200": 200,
                                     "ndr": 400, "xdr": 800}
"""InfiniBand generations → data rate of one 4x port, Gb/s (InfiniBand Trade Association roadmap: QDR 40,
FDR 56, EDR 100, HDR 200, NDR 400, XDR 800; HDR100 and NDR200 are the split-port variants)."""

IMPLIED_GBPS: dict[Fabric, tuple[float, str]] = {
    Fabric.SLINGSHOT: (200, "an HPE Slingshot 11 NIC runs at 200 Gb/s (NERSC Perlmutter, CSCS Alps: "
                            "data/hardware/hardware_systems.csv)"),
    Fabric.OMNI_PATH: (100, "Intel Omni-Path Architecture 100 Series: 100 Gb/s per port"),
}
"""Fabrics with one line rate, for a cell that counts NICs without a rate (``4 OPA links``)."""

_SCALE_UP = r"nvlink|nvswitch|nvl\d+|xgmi|infinity fabric|c2c"
_HOST_BUS = r"pci-?e|\bpci\b"
_RDMA = r"\brdma\b|\bback-?end\b|\bcompute\b|\bhca\b"
_LABEL = re.compile(r"(?i)\b((?:storage|management|mgmt|compute|front-?end|back-?end|in-?band|out-of-band)"
                    r"(?:\s*(?:\+|/|&|and)\s*(?:storage|management|mgmt|compute))*)\s*:")
_RATE = re.compile(r"(?<![A-Za-z0-9.])(?:(?P<mult>\d+)\s*[xX×]\s*)?(?P<num>\d+(?:\.\d+)?)\s*(?P<prefix>[TtGgMm])"
                   r"(?P<unit>bits?\s*/\s*s(?:ec)?|bps|b\s*/\s*sec(?:ond)?|b\s*/\s*s\b|B\s*/\s*s(?:ec)?|Bps|"
                   r"bit\b|b[Ee]\b|BE\b|base|b\b|(?=[\s,;)/]|$))")
_COUNT = re.compile(r"(?i)(?<![\w.-])(\d+)\s*[x×]\s*(?=[a-z(])|"
                    r"(?<![\w.-])(\d+)\s+(?:[a-z0-9-]+\s+){0,3}?(?:nics?|hcas?|links?|ports?|rails?|adapters?|cards?)\b")
_PER_GPU = r"per[- ]gpu|/\s*gpu\b|each gpu|gpu each|per accelerator|per device"
_PER_NODE = r"per[- ](?:node|server|host|system)|/\s*node\b|node[- ](?:to[- ])?node|injection|aggregate|total"


@dataclass(frozen=True, kw_only=True, slots=True)
class Clause:
    """One clause of a network cell, read."""

    text: str
    role: Role
    fabric: Fabric | None = None
    count: int | None = None
    """NICs (links) the clause counts in a node."""
    link_gbps: float | None = None
    """Rate of one NIC, Gb/s per direction (stated, or implied by the fabric's generation)."""
    node_gbps: float | None = None
    """The clause's bandwidth per node, when its scope is known."""
    why: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class NetworkCell:
    """The meaning of an ``interconnect_inter`` cell: the compute fabric between nodes."""

    fabric: Fabric | None = None
    generation: str | None = None
    """InfiniBand generation named (``ndr``, ``hdr``, ...)."""
    links: int | None = None
    link_gbps: float | None = None
    node_gbps: float | None = None
    """Bandwidth per node per direction, Gb/s (None: not stated, or its scope not stated)."""
    set_aside: tuple[str, ...] = ()
    """Clauses that are not the compute fabric, each with the role it was read as."""
    because: str = ""


def _split(cell: str) -> list[tuple[Role | None, str]]:
    """Clauses with the role their label gives (None: no label)."""
    pieces: list[tuple[Role | None, str]] = []
    marks = list(_LABEL.finditer(cell))
    starts = [(0, None)] + [(m.end(), _label_role(m.group(1))) for m in marks]
    ends = [m.start() for m in marks] + [len(cell)]
    for (start, role), end in zip(starts, ends):
        for clause in _top_level_split(cell[start:end]):
            if clause.strip(" .-"):
                pieces.append((role, clause.strip()))
    return pieces


def _label_role(label: str) -> Role:
    low = label.lower()
    if "compute" in low or "back" in low:
        return Role.COMPUTE
    if "storage" in low:
        return Role.STORAGE
    if "front" in low:
        return Role.FRONT_END
    return Role.MANAGEMENT


def _top_level_split(text: str) -> list[str]:
    """Split at ``,`` ``;`` and `` + `` outside parentheses."""
    out, depth, start = [], 0, 0
    for m in re.finditer(r"[(),;]|\s\+\s", text):
        depth += (m.group() == "(") - (m.group() == ")")
        if depth == 0 and m.group() not in "()":
            out.append(text[start:m.start()])
            start = m.end()
    return [*out, text[start:]]


def _fabric(low: str) -> tuple[Fabric | None, str | None]:
    generation = re.search(r"\b(hdr100|ndr200|[ehnx]dr|fdr|qdr)(\d*)\b", low)
    for pattern, fabric in _FABRICS:
        if re.search(pattern, low):
            return fabric, generation.group(1) if generation else None
    return None, None


def _rates(text: str, generation: str | None, low: str) -> list[tuple[float, int | None, str]]:
    """Every rate of one NIC a clause states: ``(Gb/s, count attached as '8x400', the words)``."""
    out = []
    for m in _RATE.finditer(text):
        unit = m.group("unit")
        scale = {"t": 1000.0, "g": 1.0, "m": 1e-3}[m.group("prefix").lower()]
        is_bytes = unit.startswith("B") and ("/" in unit or unit.endswith("ps"))
        if unit == "" and m.group("prefix") in "Tt":
            continue  # "3.2 T" with no unit is not read as a rate
        if unit.startswith("B") and not is_bytes and not unit.upper().startswith("BE"):
            continue  # "80GB": a capacity, not a rate
        gbps = float(m.group("num")) * scale * (8 if is_bytes else 1)
        mult = int(m.group("mult")) if m.group("mult") else None
        out.append((gbps, mult, m.group(0).strip()))
    named = re.search(r"\b(?:hdr100|ndr200|[ehnx]dr|fdr|qdr)(\d+)\b", low)
    if named:
        out.append((float(named.group(1)), None, named.group(0)))
    if not out and generation is not None:
        out.append((GENERATION_GBPS[generation], None, f"{generation.upper()} (implied)"))
    return out


def _clause(role: Role | None, text: str, gpus_per_node: int) -> Clause:
    low = text.lower()
    fabric, generation = _fabric(low)
    if role is None and fabric is None and re.search(_SCALE_UP, low):
        return Clause(text=text, role=Role.SCALE_UP)
    if role is None and re.search(_SCALE_UP, low) and fabric is Fabric.ETHERNET:
        fabric = None
    if fabric is None and re.search(_SCALE_UP, low):
        return Clause(text=text, role=Role.SCALE_UP)
    if fabric is None and re.search(_HOST_BUS, low) and not re.search(_RDMA, low):
        return Clause(text=text, role=Role.HOST_BUS)
    rates = _rates(text, generation, low)
    counts = {int(m.group(1) or m.group(2)) for m in _COUNT.finditer(text)}
    if role is None:
        role = Role.FRONT_END if fabric is Fabric.ETHERNET and not re.search(_RDMA, low) else Role.COMPUTE
    if len(counts) > 1:
        raise CellError(f"clause {text!r} counts {' and '.join(map(str, sorted(counts)))} NICs")
    count = counts.pop() if counts else None
    per_card = {r * (m if (m and count is not None) else 1) for r, m, _ in rates}
    if count is None:
        attached = {m for _, m, _ in rates if m}
        count = attached.pop() if len(attached) == 1 else None
    if not rates and fabric in IMPLIED_GBPS and count is not None:
        per_card = {IMPLIED_GBPS[fabric][0]}
    if len(per_card) > 1:
        raise CellError(f"clause {text!r} gives {len(per_card)} different rates per NIC "
                        f"({', '.join(f'{r:g}' for r in sorted(per_card))} Gb/s)")
    link = per_card.pop() if per_card else None
    if link is None:
        return Clause(text=text, role=role, fabric=fabric, count=count,
                      why="no bandwidth stated" + (f" ({count} NICs)" if count else ""))
    if re.search(_PER_GPU, low):
        return Clause(text=text, role=role, fabric=fabric, count=gpus_per_node, link_gbps=link,
                      node_gbps=link * gpus_per_node, why=f"{link:g} Gb/s per GPU x {gpus_per_node} GPUs")
    if count is not None:
        return Clause(text=text, role=role, fabric=fabric, count=count, link_gbps=link, node_gbps=count * link,
                      why=f"{count} x {link:g} Gb/s")
    if re.search(_PER_NODE, low):
        return Clause(text=text, role=role, fabric=fabric, link_gbps=link, node_gbps=link,
                      why=f"{link:g} Gb/s per node")
    return Clause(text=text, role=role, fabric=fabric, link_gbps=link,
                  why=f"{link:g} Gb/s, bandwidth scope (per GPU, per node or per NIC) not stated")


def _merged(clauses: list[tuple[Role | None, str]]) -> list[tuple[Role | None, str]]:
    """A clause that only names a fabric or a role (``InfiniBand``, ``RoCE v2``) and the next clause
    that only states quantities (``400 Gbps per GPU``) are one statement."""
    out: list[tuple[Role | None, str]] = []
    for role, text in clauses:
        bare = _fabric(text.lower())[0] is None and not re.search(_SCALE_UP + "|" + _HOST_BUS, text.lower())
        if out and bare and role is None and out[-1][0] is None and re.search(_SCALE_UP, out[-1][1].lower()) \
                and _fabric(out[-1][1].lower())[0] is None:
            out[-1] = (role, f"{out[-1][1]}, {text}")  # "18x NVLink, 14.4 TB/s aggregated": the same fabric
        elif out and bare and role == out[-1][0] and re.search(r"\d", text) and (
                not re.search(r"\d", out[-1][1])
                or (not _RATE.search(out[-1][1]) and _RATE.search(text) and not _COUNT.search(text))):
            out[-1] = (role, f"{out[-1][1]}, {text}")
        else:
            out.append((role, text))
    return out


def network(cell: str, gpus_per_node: int) -> NetworkCell:
    """The compute fabric an ``interconnect_inter`` cell states; raises :class:`CellError` (quoting the
    cell) when it names two compute fabrics with nothing to tell them apart, or contradicts itself."""
    if not cell.strip():
        return NetworkCell(because="blank")
    try:
        clauses = [_clause(role, text, gpus_per_node) for role, text in _merged(_split(cell))]
    except CellError as err:
        raise CellError(f"{cell!r}: {err}") from None
    rdma = any(c.role is Role.COMPUTE and c.fabric is not Fabric.ETHERNET for c in clauses)
    compute = [c for c in clauses if c.role is Role.COMPUTE]
    front = [c for c in clauses if c.role is Role.FRONT_END]
    if not rdma and not compute and front:  # only Ethernet named: that is the network
        compute, front = front, []
    aside = [c for c in clauses if c.role not in (Role.COMPUTE, Role.FRONT_END)] + front
    if len(compute) > 1:
        compute = _one_compute(cell, compute, gpus_per_node, aside)
    said = tuple(f"{c.role} {c.text!r}" for c in aside)
    if not compute:
        return NetworkCell(set_aside=said, because="no scale-out network named"
                           + (f" (set aside: {'; '.join(said)})" if said else ""))
    (c,) = compute
    generation = _fabric(c.text.lower())[1]
    because = c.why + (f" ({c.fabric}{' ' + generation.upper() if generation else ''})" if c.fabric else "")
    if said:
        because += f"; set aside: {'; '.join(said)}"
    return NetworkCell(fabric=c.fabric, generation=generation, links=c.count, link_gbps=c.link_gbps,
                       node_gbps=c.node_gbps, set_aside=said, because=because)


def _one_compute(cell: str, compute: list[Clause], gpus_per_node: int, aside: list[Clause]) -> list[Clause]:
    """Several unlabelled clauses could be the compute fabric: the one with a NIC per GPU (rail-optimised
    compute fabrics give each GPU its own NIC; storage and management cards are fewer), else refuse."""
    quantified = [c for c in compute if c.node_gbps is not None or c.count is not None]
    if len(quantified) <= 1 and len({c.fabric for c in compute}) <= 2:
        named = [c for c in compute if c.fabric is not None and c.fabric is not Fabric.ETHERNET]
        if quantified and (not named or quantified[0].fabric in (None, *[n.fabric for n in named])):
            keep = quantified[0]
            aside.extend(Clause(text=c.text, role=Role.STORAGE, fabric=c.fabric) for c in compute if c is not keep)
            merged = Clause(text=", ".join(c.text for c in compute), role=Role.COMPUTE,
                            fabric=keep.fabric or (named[0].fabric if named else None), count=keep.count,
                            link_gbps=keep.link_gbps, node_gbps=keep.node_gbps, why=keep.why)
            aside[:] = [a for a in aside if a.text not in merged.text]
            return [merged]
        if not quantified and len({c.fabric for c in compute}) == 1:
            return [compute[0]]
    per_gpu = [c for c in quantified if c.count == gpus_per_node]
    if len(per_gpu) == 1:
        aside.extend(Clause(text=c.text, role=Role.STORAGE, fabric=c.fabric) for c in compute if c is not per_gpu[0])
        return per_gpu
    raise CellError(f"{cell!r} names {len(compute)} networks ({'; '.join(c.text for c in compute)}) and does not "
                    "say which carries the training traffic: label it (\"Compute: 8x ...\") or keep only that one")
