"""Read what a row's ``notes`` state about the run: a table of patterns, each mapped to spec fields.

Notes carry what the schema has no column for: the architecture (``GPT (LayerNorm, GeLU MLP)``,
``--swiglu``, ``--normalization RMSNorm``, ``rotary 25%``, ``parallel residual``, ``untie-embeddings``,
``vocab ... padded to a multiple of 128*TP``), the flags a run passed (``--attention-backend=unfused``,
``--no-gradient-accumulation-fusion``, ``--tp-comm-overlap``, ...), how the pipeline stages split the
layers (``--decoder-first-pipeline-num-layers=2``, ``--account-for-embedding-in-pipeline-split``,
``--pp-partition-method 'type:transformer|embedding'``) and measured memory peaks
(``golden mem-max-allocated-bytes max 56.36 GiB``). Each :data:`PATTERNS` entry is one statement
a note can make, the spec field it sets and what it means. A field stated twice with different
values is a contradiction: :func:`read` raises :class:`~llmp.validate.cells.CellError` rather than
pick one. Statements llmp reads but does not model are returned as ``unmodelled`` so the row says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.spec.model import Activation, Norm, Position
from llmp.spec.spec import Attention, Recompute, ZeroStage
from llmp.validate.cells import CellError


@dataclass(frozen=True, kw_only=True, slots=True)
class Fact:
    """One spec field a note states."""

    path: str
    """``section.field`` of the spec (``model.activation``, ``train.attention``, ``parallel.zero``)."""
    value: Any
    text: str
    """The words of the note that state it."""


class MemoryKind(StrEnum):
    """What a memory figure counts (PyTorch caching-allocator statistics)."""

    ALLOCATED = "allocated"
    """``torch.cuda.max_memory_allocated``: bytes in live tensors at the peak."""
    RESERVED = "reserved"
    """``torch.cuda.max_memory_reserved``: bytes the caching allocator holds (live + cached blocks)."""
    DEVICE = "device"
    """Memory in use on the device as the driver sees it (``nvidia-smi``): the allocator's reserve
    plus the CUDA context and NCCL's buffers; also any figure that does not say which."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryReading:
    """A measured peak of memory per GPU."""

    kind: MemoryKind
    bytes: float
    text: str
    one_rank: bool = False
    """The source logged one rank only (Megatron logs the last rank: its tensorboard writer)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Pattern:
    """A statement a note can make: a regular expression and the fields it sets."""

    name: str
    regex: str
    """Matched case-insensitively against the notes."""
    sets: Callable[[re.Match[str], str], dict[str, Any]]
    """``(match, whole notes) -> {"section.field": value}``."""


def _const(**fields: Any) -> Callable[[re.Match[str], str], dict[str, Any]]:
    values = {k.replace("__", "."): v for k, v in fields.items()}
    return lambda match, notes: values


def _attention_backend(match: re.Match[str], notes: str) -> dict[str, Any]:
    """Megatron-Core ``--attention-backend``: ``flash`` (TE FlashAttention), ``fused`` (TE cuDNN),
    ``unfused``/``local`` (baddbmm + Megatron's FusedScaleMaskSoftmax, or torch softmax with
    ``--no-masked-softmax-fusion``), ``auto`` (TE decides: the stack default).
    NVIDIA/Megatron-LM@core_r0.10.0:megatron/training/arguments.py (--attention-backend);
    megatron/core/transformer/dot_product_attention.py (DotProductAttention: FusedScaleMaskSoftmax)."""
    backend = match.group(1).lower()
    if backend == "auto":
        return {}
    if backend == "flash":
        return {"train.attention": Attention.FLASH2}
    if backend == "fused":
        return {"train.attention": Attention.CUDNN}
    return {"train.attention": _unfused(notes)}


def _unfused(notes: str) -> Attention:
    no_fusion = re.search(r"--no-masked-softmax-fusion", notes, re.IGNORECASE)
    return Attention.UNFUSED if no_fusion else Attention.UNFUSED_FUSED_SOFTMAX


def _local_impl(match: re.Match[str], notes: str) -> dict[str, Any]:
    """``--transformer-impl local``: Megatron-Core's own layers (``get_gpt_layer_local_spec``: Apex
    FusedLayerNorm, DotProductAttention with the fused masked softmax, no TE userbuffers) unless an
    attention backend is named too."""
    if re.search(r"--attention-backend", notes, re.IGNORECASE):
        return {}
    return {"train.attention": _unfused(notes)}


def _rotary_fraction(match: re.Match[str], notes: str) -> dict[str, Any]:
    found = match.groupdict()
    number = float(found.get("num") or found["num2"])
    percent = bool(found.get("pct") or found.get("pct2"))
    fraction = number / 100 if percent else number
    if not 0 < fraction <= 1:
        raise CellError(f"rotary fraction {match.group(0)!r} is not in (0, 1]")
    return {"model.rotary_pct": fraction, "model.position": Position.ROTARY}


def _vocab_multiple(match: re.Match[str], notes: str) -> dict[str, Any]:
    return {"train.vocab_divisible_by": int((match.group(1) or match.group(2)).replace(",", ""))}


def _padded_vocab(match: re.Match[str], notes: str) -> dict[str, Any]:
    """An explicit padded size: the embedding has that many rows whatever the stack's multiple."""
    return {"model.vocab": int((match.group("n") or match.group("n2")).replace(",", "")), "train.vocab_divisible_by": 1}


PATTERNS: tuple[Pattern, ...] = (
    # --- architecture ---
    Pattern(name="squared ReLU", regex=r"squared[-_ ]?relu|relu[²2]\b|relu\s*\^\s*2|--squared-relu",
            sets=_const(model__activation=Activation.SQUARED_RELU)),
    Pattern(name="SwiGLU", regex=r"--swiglu\b|\bswiglu\b|"
                                 r"\bsilu[-_ ]?glu\b", sets=_const(model__activation=Activation.SWIGLU)),
    Pattern(name="GELU", regex=r"(?<!bias-)\bgelu\b(?![-_ ]?glu)",
            sets=_const(model__activation=Activation.GELU)),
    Pattern(name="ReLU", regex=r"(?<!squared[-_ ])(?<!squared)\brelu\b(?![²2]|\s*\^)",
            sets=_const(model__activation=Activation.RELU)),
    Pattern(name="RMSNorm", regex=r"--normalization[= ]+rmsnorm|\brmsnorm\b|\brms[-_ ]norm\b",
            sets=_const(model__norm=Norm.RMSNORM)),
    Pattern(name="LayerNorm", regex=r"--normalization[= ]+layernorm|(?<!embedding )\blayer[-_ ]?norm(?:1p)?\b",
            sets=_const(model__norm=Norm.LAYERNORM)),
    Pattern(name="partial rotary", regex=r"\b(?:rotary|rope)[-_ ]?(?:percent(?:age)?|pct|fraction)[ :=]*"
                                         r"(?P<num>\d+(?:\.\d+)?)\s*(?P<pct>%)?",
            sets=_rotary_fraction),
    Pattern(name="partial rotary (percent)",
            regex=r"\b(?:rotary|rope)[ :=]+(?P<num>\d+(?:\.\d+)?)\s*(?P<pct>%)|"
                  r"(?P<num2>\d+(?:\.\d+)?)\s*(?P<pct2>%)\s*(?:partial[-_ ])?(?:rotary|rope)\b",
            sets=_rotary_fraction),
    Pattern(name="rotary", regex=r"(?<!-)\b(?:rotary|rope)\b(?![-_]fusion)|--position-embedding-type[= ]+rope",
            sets=_const(model__position=Position.ROTARY)),
    Pattern(name="ALiBi", regex=r"\balibi\b", sets=_const(model__position=Position.ALIBI)),
    Pattern(name="learned positions", regex=r"learned[-_ ](?:absolute|positions?|positional)|"
                                            r"--position-embedding-type[= ]+learned",
            sets=_const(model__position=Position.LEARNED)),
    Pattern(name="parallel residual", regex=r"parallel[-_ ]residual|parallel[-_ ]attn\b|"
                                            r"parallel attention(?: and mlp)?\b",
            sets=_const(model__parallel_residual=True)),
    Pattern(name="untied embeddings", regex=r"untie[d]?[-_ ](?:the[-_ ])?(?:input[-_ ])?embeddings?|"
                                            r"--untie-embeddings-and-output-weights|"
                                            r"tie[-_ ]word[-_ ]embeddings[ :=]+false",
            sets=_const(model__tied_embeddings=False)),
    Pattern(name="tied embeddings", regex=r"(?<![a-z])tied[-_ ](?:input[-_ ])?embeddings?|"
                                          r"shared[-_ ](?:input[-_ ])?embeddings?|"
                                          r"tie[-_ ]word[-_ ]embeddings[ :=]+true",
            sets=_const(model__tied_embeddings=True)),
    Pattern(name="no biases", regex=r"--disable-bias-linear|"
                                     r"(?<!-)\bno[-_ ]bias(?:es)?\b(?![-_](?:gelu|swiglu|dropout))|\bbias[-_ ]free\b|"
                                     r"\bwithout bias(?:es)?\b",
            sets=_const(model__bias=False)),
    Pattern(name="dropout", regex=r"--(?:attention|hidden)-dropout[= ]+(\d*\.?\d+)|"
                                  r"\b(?:attention|hidden)_dropout[ :=]+(\d*\.?\d+)",
            sets=lambda m, n: {"model.dropout": float(m.group(1) or m.group(2))}),
    Pattern(name="vocab padding multiple", regex=r"padded (?:by [\w-]+ )?to a multiple of\s*(\d[\d,]*)|"
                                                 r"--make-vocab-size-divisible-by[= ]+(\d+)",
            sets=_vocab_multiple),
    Pattern(name="padded vocab",
            regex=r"(?:vocab(?:ulary)?|embedding)[^;]{0,40}?padded to (?!a multiple)(?P<n>\d[\d,]{2,})|"
                                       r"embedding (?P<n2>\d[\d,]{2,})\s*=\s*padded",
            sets=_padded_vocab),
    # --- what the stack ran (Megatron flags, recipe statements) ---
    Pattern(name="attention backend", regex=r"--attention-backend[= ]+(flash|fused|unfused|local|auto)\b",
            sets=_attention_backend),
    Pattern(name="local transformer implementation", regex=r"--transformer-impl[= ]+local\b", sets=_local_impl),
    Pattern(name="no gradient-accumulation fusion", regex=r"--no-gradient-accumulation-fusion",
            sets=_const(train__grad_accum_fusion=False)),
    Pattern(name="fused cross-entropy", regex=r"--cross-entropy-loss-fusion\b",
            sets=_const(train__fused_cross_entropy=True)),
    Pattern(name="FP32 gradient reduction",
            regex=r"--accumulate-allreduce-grads-in-fp32\b|grad_reduce_in_fp32[ :=]+(?P<on>true|false)\b|"
                  r"grad_sync_dtype[ :=]+(?P<dtype>fp32|bf16|fp16)\b",
            sets=lambda m, n: {"train.fp32_grads": (m.group("on") or "true").lower() == "true"
                               if m.group("dtype") is None else m.group("dtype").lower() == "fp32"}),
    Pattern(name="FP8 parameters",
            regex=r"--fp8-param-gather\b|fp8_param_gather[ :=]+true\b|fp8_params[ :=]+true\b",
            sets=_const(train__fp8_param_gather=True)),
    Pattern(name="no bias-activation fusion", regex=r"--no-bias-(?:gelu|swiglu)-fusion",
            sets=_const(train__fused_bias_act=False)),
    Pattern(name="no RoPE fusion", regex=r"--no-rope-fusion", sets=_const(train__fused_rope=False)),
    Pattern(name="no gradient clipping", regex=r"\bno (?:grad(?:ient)?[-_ ])?clipping\b|--clip-grad[= ]+0(?:\.0)?\b",
            sets=_const(train__grad_clip=False)),
    Pattern(name="TP communication overlap", regex=r"--tp-comm-overlap\b", sets=_const(parallel__tp_comm_overlap=True)),
    Pattern(name="overlapped gradient reduce", regex=r"--overlap-grad-reduce\b",
            sets=_const(parallel__dp_overlap=True)),
    Pattern(name="overlapped parameter gather", regex=r"--overlap-param-gather\b",
            sets=_const(parallel__param_gather_overlap=True)),
    Pattern(name="distributed optimizer", regex=r"--use-distributed-optimizer\b",
            sets=_const(parallel__zero=ZeroStage.Z1)),
    Pattern(name="sequence parallel", regex=r"--sequence-parallel\b", sets=_const(parallel__sequence_parallel=True)),
    Pattern(name="recompute granularity", regex=r"--recompute-granularity[= ]+(full|selective)\b",
            sets=lambda m, n: {"train.recompute": Recompute(m.group(1).lower())}),
    # --- how the pipeline stages split the layers (Megatron-Core / NeMo, DeepSpeed) ---
    Pattern(name="first pipeline stage layers",
            regex=r"--decoder-first-pipeline-num-layers[= ]+(\d+)|num_layers_in_first_pipeline_stage[ :=]+(\d+)",
            sets=lambda m, n: {"parallel.first_stage_layers": int(m.group(1) or m.group(2))}),
    Pattern(name="last pipeline stage layers",
            regex=r"--decoder-last-pipeline-num-layers[= ]+(\d+)|num_layers_in_last_pipeline_stage[ :=]+(\d+)",
            sets=lambda m, n: {"parallel.last_stage_layers": int(m.group(1) or m.group(2))}),
    Pattern(name="embedding counted in the pipeline split",
            regex=r"--account-for-embedding-in-pipeline-split\b|account_for_embedding_in_pipeline_split[ :=]+true\b",
            sets=_const(parallel__account_for_embedding=True)),
    Pattern(name="loss counted in the pipeline split",
            regex=r"--account-for-loss-in-pipeline-split\b|account_for_loss_in_pipeline_split[ :=]+true\b",
            sets=_const(parallel__account_for_loss=True)),
    Pattern(name="interleaved microbatch group",
            regex=r"--microbatch-group-size-per-virtual-pipeline-stage[= ]+(\d+)|"
                  r"microbatch_group_size_per_vp_stage[ :=]+(\d+)",
            sets=lambda m, n: {"parallel.microbatch_group": int(m.group(1) or m.group(2))}),
    Pattern(name="DeepSpeed partition method",
            regex=r"(?:--pp-partition-method|partition_method)[ :=]+['\"]?"
                  r"(?P<method>(?:uniform|parameters|type:[^'\"\s;,]+))",
            # DeepSpeed PipelineModule(partition_method=...); Megatron-DeepSpeed passes --pp-partition-method
            # (bigscience-workshop/bigscience@003b250:train/tr11-176B-ml/tr11-176B-ml.slurm, GPT_ARGS)
            sets=lambda m, n: {"parallel.partition": m.group("method")}),
    Pattern(name="torch.compile", regex=r"(?<!no )(?<!without )\btorch\.compile\b|--training\.compile\b|"
                                        r"\bcompile[ =:]+true\b",
            # torchtitan compiles each TransformerBlock with fullgraph=True (pytorch/torchtitan@v0.1.0:
            # torchtitan/parallelisms/parallelize_llama.py, apply_compile); Inductor generates one Triton
            # kernel per chain of pointwise ops: the RMSNorm, SiLU * up and the rotary embedding.
            sets=_const(train__fused_norm=True, train__fused_bias_act=True, train__fused_rope=True)),
)
"""Every statement read from notes; each is tested on real and synthetic note text."""

UNMODELLED: tuple[tuple[str, str], ...] = (
    (r"--deterministic-mode\b", "--deterministic-mode (deterministic kernels, e.g. cuDNN attention backward)"),
    (r"NCCL_ALGO=Ring\b", "NCCL_ALGO=Ring (ring collectives forced)"),
    (r"--fp8-param-gather\b", "--fp8-param-gather (FP8 parameter all-gather)"),
    (r"\basync[-_ ]?tp\b|enable_async_tensor_parallel", "asynchronous tensor parallelism (torchtitan AsyncTP)"),
    (r"--calculate-per-token-loss\b", "--calculate-per-token-loss"),
    (r"embedding layer ?norm", "embedding LayerNorm"),
)
"""Statements recognised but not modelled: the row keeps them as ``not modelled`` assumptions."""

UNEXPRESSIBLE: tuple[tuple[str, str], ...] = (
    (r"\bcpu[-_ ]offload(?:ing)?\b(?![^;]{0,12}\b(?:false|off|no)\b)|"
     r"offload[-_ ](?:optimizer|params|activations)[ :=]+true",
     "CPU offloading of parameters, optimizer states or activations"),
)
"""Statements that change the step in a way the spec language cannot express: the row is skipped."""

_MEMORY = re.compile(
    r"(?P<what>mem(?:ory)?[-_ ]max[-_ ](?P<kind>allocated|reserved)(?:[-_ ]bytes)?|"
    r"max[-_ ](?P<kind2>allocated|reserved)(?:[-_ ]memory)?|peak (?P<kind3>allocated|reserved) memory)"
    r"[^;\d]{0,24}?(?P<num>\d+(?:\.\d+)?)\s*"
    r"(?P<unit>GiB|GB|MiB|MB|TiB)(?P<rest>[^;]{0,40})", re.IGNORECASE)
_UNIT_BYTES = {"gib": 2**30, "gb": 1e9, "mib": 2**20, "mb": 1e6, "tib": 2**40}


@dataclass(frozen=True, kw_only=True, slots=True)
class Notes:
    """What a measurement's notes state."""

    facts: tuple[Fact, ...] = ()
    unmodelled: tuple[str, ...] = ()
    unexpressible: tuple[str, ...] = ()
    memory: tuple[MemoryReading, ...] = ()
    denied: tuple[tuple[str, str], ...] = ()
    """Terms the notes deny, with their words (``("SwiGLU", "not SwiGLU")``): read as not stated."""

    def get(self, path: str) -> Fact | None:
        return next((f for f in self.facts if f.path == path), None)

    def section(self, section: str) -> dict[str, Fact]:
        """Facts of one spec section by field name."""
        return {f.path.split(".", 1)[1]: f for f in self.facts if f.path.startswith(section + ".")}


NEGATED_TERM = r"[\w.+-]+(?:[ -](?:glu|mlp|norm|fusion|embeddings?))?"
NEGATIONS: tuple[str, ...] = (
    rf"\b(?:not|never|instead of|rather than)\s+(?P<term>{NEGATED_TERM})",
    rf"\((?P<term>{NEGATED_TERM})\s+(?:commented out|disabled|removed|off)\b",
    rf"\b(?P<term>{NEGATED_TERM})\s+(?:is |was )?(?:commented out|disabled|removed)\b",
)
"""A term the notes deny: ``activation gelu (not SwiGLU)``, ``(swiglu commented out in yml)``,
``SwiGLU disabled``. The term is blanked before the statements are read, so a denied architecture is
not read as stated; flags that say "no" themselves (``--no-rope-fusion``, ``no biases``) are statements
of their own in :data:`PATTERNS`, not negations."""


def negated(text: str) -> tuple[tuple[str, str], ...]:
    """``(term, words)`` for every term ``text`` denies (see :data:`NEGATIONS`)."""
    out = []
    for regex in NEGATIONS:
        for m in re.finditer(regex, text, re.IGNORECASE):
            if _states(m.group("term")):
                out.append((m.group("term"), m.group(0).strip("() ")))
    return tuple(dict.fromkeys(out))


def _states(term: str) -> bool:
    """Whether ``term`` is something a :data:`PATTERNS` entry reads (``not stated`` denies nothing)."""
    return any(re.search(p.regex, term, re.IGNORECASE) for p in PATTERNS)


def _blank_negated(text: str) -> str:
    def blank(m: re.Match[str]) -> str:
        term = m.group("term")
        return m.group(0).replace(term, " " * len(term)) if _states(term) else m.group(0)

    for regex in NEGATIONS:
        text = re.sub(regex, blank, text, flags=re.IGNORECASE)
    return text


def read(text: str) -> Notes:
    """Every statement of :data:`PATTERNS` in ``text`` (terms the notes deny left out, see
    :data:`NEGATIONS`); raises CellError on a contradiction."""
    denied = negated(text)
    text = _blank_negated(text)
    facts: dict[str, Fact] = {}
    for pattern in PATTERNS:
        for match in re.finditer(pattern.regex, text, re.IGNORECASE):
            for path, value in pattern.sets(match, text).items():
                said = match.group(0).strip()
                old = facts.get(path)
                if old is None:
                    facts[path] = Fact(path=path, value=value, text=said)
                elif old.value != value and not _refines(path, old, pattern):
                    raise CellError(f"notes state {path} both {_show(old.value)} ({old.text!r}) and "
                                    f"{_show(value)} ({said!r})")
    unmodelled = tuple(what for regex, what in UNMODELLED if re.search(regex, text, re.IGNORECASE))
    unexpressible = tuple(what for regex, what in UNEXPRESSIBLE if re.search(regex, text, re.IGNORECASE))
    return Notes(facts=tuple(facts.values()), unmodelled=unmodelled, unexpressible=unexpressible,
                 memory=memory_readings(text), denied=denied)


def _refines(path: str, old: Fact, pattern: Pattern) -> bool:
    """A later, more specific statement of the same field that does not contradict the first: an
    explicit padded size after a padding multiple (the size is the multiple applied)."""
    return path == "train.vocab_divisible_by" and pattern.name == "padded vocab"


def _show(value: Any) -> str:
    return value.value if isinstance(value, StrEnum) else str(value)


def memory_readings(text: str) -> tuple[MemoryReading, ...]:
    """Measured memory peaks stated in ``text`` (``mem-max-allocated-bytes max 56.36 GiB``)."""
    out = []
    for m in _MEMORY.finditer(text):
        kind = MemoryKind((m.group("kind") or m.group("kind2") or m.group("kind3")).lower())
        value = float(m.group("num")) * _UNIT_BYTES[m.group("unit").lower()]
        out.append(MemoryReading(kind=kind, bytes=value, text=m.group(0).strip(),
                                 one_rank="one rank" in (m.group("rest") or "").lower()))
    return tuple(out)
