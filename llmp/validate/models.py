"""Decide a published row's model architecture: which ``arch`` and which per-family details.

The schema has no architecture column. What decides, strongest first: the architecture columns;
what the row's notes state (``GPT (LayerNorm, GeLU MLP)``, ``--swiglu``, ``untie-embeddings``,
``rotary 25%``, ... read by :mod:`~llmp.validate.notes`); the model family read from the name (a
keyed table of the families that appear in published tables, each with the public config it
follows); for names no family claims, the columns: grouped-query attention or an MLP ratio other
than 4 means a Llama-style (SwiGLU) model, otherwise GPT-style, unless the notes name the MLP.
Every decision is written down as an assumption on the row, and what the spec language cannot
express is named, not hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llmp.dsl.spec import Activation, Arch, Norm, Position
from llmp.validate.notes import Notes
from llmp.validate.rows import Row
from llmp.validate.skips import SkipReason, Unmodellable


@dataclass(frozen=True, kw_only=True, slots=True)
class Family:
    """A model family: its architecture in the spec language and what the spec leaves out."""

    name: str
    pattern: str
    """Regular expression matched (case-insensitively) at the start of ``model_name``."""
    arch: Arch
    norm: Norm | None = None
    """Overrides of the arch's defaults; ``None`` keeps the default of ``arch``."""
    activation: Activation | None = None
    position: Position | None = None
    bias: bool | None = None
    tied_embeddings: bool | None = None
    rotary_pct: float | None = None
    parallel_residual: bool | None = None
    vocab: int | None = None
    """Vocabulary of the family's tokenizer (padded as its framework pads it), for blank cells."""
    vocab_reason: str = ""
    citation: str = ""
    unmodelled: tuple[str, ...] = ()
    """Details of the real model that the spec language does not express."""


FAMILIES: tuple[Family, ...] = (
    Family(name="MPT", pattern=r"mpt-", arch=Arch.GPT, position=Position.LEARNED, bias=True, tied_embeddings=True,
           citation="llm-foundry scripts/train/yamls/pretrain/mpt-<size>.yaml with MPTConfig defaults (learned "
                    "positions, biases, tied embeddings); the table's NumParams match this count exactly"),
    Family(name="GPT-3 (NeMo)", pattern=r"gpt3-", arch=Arch.GPT, position=Position.LEARNED, bias=True,
           tied_embeddings=True, vocab=50304,
           vocab_reason="NeMo GPT-3 uses the GPT-2 BPE tokenizer (50257) padded to a multiple of 128 = 50304",
           citation="NeMo GPTConfig: learned absolute positions, LayerNorm, GELU, biases, shared embeddings"),
    Family(name="Megatron GPT", pattern=r"gpt[ -](?!oss|neox)", arch=Arch.GPT, position=Position.LEARNED, bias=True,
           tied_embeddings=True, vocab=51200,
           vocab_reason="Megatron-LM pads the GPT-2 BPE vocabulary (50257) to a multiple of 128·tp; the SC21 and "
                        "2020 README runs state 51,200",
           citation="Megatron-LM GPT: LayerNorm, GELU, learned positions, biases, output layer tied to the embedding"),
    Family(name="BLOOM", pattern=r"bloom", arch=Arch.GPT, position=Position.ALIBI, bias=True, tied_embeddings=True,
           citation="BLOOM-176B (bigscience tr11): ALiBi, tied embeddings, biases",
           unmodelled=("embedding LayerNorm",)),
    Family(name="Megatron-Turing NLG", pattern=r"megatron-turing", arch=Arch.GPT, position=Position.LEARNED,
           bias=True, tied_embeddings=True, citation="MT-NLG 530B: Megatron GPT architecture"),
    Family(name="OPT", pattern=r"opt-", arch=Arch.GPT, activation=Activation.RELU, position=Position.LEARNED,
           bias=True, tied_embeddings=True, vocab=50272, vocab_reason="OPT tokenizer vocabulary (50272)",
           citation="OPT (Zhang et al. 2022): ReLU MLP, learned positions, tied embeddings"),
    Family(name="Nemotron-4", pattern=r"nemotron[-_ ]?(?:4\b|\d+(?:\.\d+)?b\b)", arch=Arch.GPT,
           activation=Activation.SQUARED_RELU, position=Position.ROTARY, rotary_pct=0.5, bias=False,
           tied_embeddings=False, vocab=256000,
           vocab_reason="Nemotron tokenizer vocabulary (256,000 SentencePiece tokens)",
           citation="NeMo NemotronConfig (NVIDIA/NeMo@v2.0.0:nemo/collections/llm/gpt/model/nemotron.py): "
                    "LayerNorm (1p), squared-ReLU MLP without a gate (activation_func squared_relu), rotary "
                    "positions on half of each head (rotary_percent 0.5), no biases, untied output layer",
           unmodelled=("LayerNorm1p (zero-centred gamma: the same kernel)",)),
    Family(name="GPT-NeoX", pattern=r"(?:gpt[-_ ]?)?neox|pythia", arch=Arch.GPT, position=Position.ROTARY,
           rotary_pct=0.25, parallel_residual=True, tied_embeddings=False,
           citation="GPT-NeoX-20B and Pythia (EleutherAI/gpt-neox configs/20B.yml): rotary on 25% of each head, "
                    "parallel attention and MLP residual, untied output layer"),
    Family(name="Llama", pattern=r"llama", arch=Arch.LLAMA,
           citation="Llama configs: RMSNorm, SwiGLU, rotary positions, no biases, untied output layer"),
    Family(name="Qwen2.5", pattern=r"qwen2\.5", arch=Arch.LLAMA,
           citation="Qwen2.5 configs: Llama-style (RMSNorm, SwiGLU, rotary)", unmodelled=("QKV projection biases",)),
)
"""Families met in published tables, first match wins (so ``GPT3-`` precedes ``GPT ``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelPlan:
    """The model block to write for a row, with the reasons for every filled-in field."""

    name: str
    arch: Arch
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    norm: Norm | None = None
    activation: Activation | None = None
    position: Position | None = None
    bias: bool | None = None
    tied_embeddings: bool | None = None
    rotary_pct: float | None = None
    parallel_residual: bool | None = None
    assumptions: tuple[str, ...] = field(default=())


def family_of(model_name: str) -> Family | None:
    """The first family whose pattern matches the start of ``model_name`` (case-insensitive)."""
    return next((f for f in FAMILIES if re.match(f.pattern, model_name.strip(), re.IGNORECASE)), None)


def _inferred_arch(row: Row, notes: Notes) -> tuple[Arch, str]:
    stated = notes.get("model.activation")
    if stated is not None:
        arch = Arch.LLAMA if stated.value is Activation.SWIGLU else Arch.GPT
        return arch, f"the notes name the MLP ({stated.text!r})"
    heads, kv, hidden, ffn = (row.integer(c) for c in ("heads", "kv_heads", "hidden", "ffn_hidden"))
    if kv is not None and heads is not None and kv < heads:
        return Arch.LLAMA, f"kv_heads {kv} < heads {heads} (grouped-query attention)"
    if ffn is not None and hidden and ffn != 4 * hidden:
        return Arch.LLAMA, f"ffn_hidden/hidden = {ffn / hidden:.4g}, not 4 (SwiGLU-sized MLP)"
    return Arch.GPT, "multi-head attention and a 4x MLP (or no MLP width given)"


MODEL_FIELDS: tuple[str, ...] = ("norm", "activation", "position", "bias", "tied_embeddings", "rotary_pct",
                                 "parallel_residual")
"""Model fields a family or a note may set (the arch gives the rest)."""


def plan_model(row: Row, notes: Notes | None = None) -> ModelPlan:
    """The model block for ``row`` (and what its ``notes`` state); raises :class:`Unmodellable` when
    the columns do not define one."""
    notes = notes if notes is not None else Notes()
    name = row.text("model_name")
    missing = [c for c in ("layers", "hidden", "heads", "seq_len") if row.integer(c) is None]
    if missing:
        raise Unmodellable(SkipReason.MISSING_ARCHITECTURE,
                           f"{', '.join(missing)} blank (the source or the model's public config does not give them)")
    layers, hidden, heads, seq_len = (row.integer(c) for c in ("layers", "hidden", "heads", "seq_len"))
    assert layers is not None and hidden is not None and heads is not None and seq_len is not None
    fam = family_of(name)
    said: list[str] = []
    if fam is None:
        arch, why = _inferred_arch(row, notes)
        said.append(f"architecture: no known family for {name!r}; arch = {arch} inferred: {why}")
    else:
        arch = fam.arch
        said.append(f"architecture: {fam.name} family → arch = {arch} ({fam.citation})")
        said.extend(f"not modelled: {what}" for what in fam.unmodelled)
    chosen = {f: getattr(fam, f) if fam else None for f in MODEL_FIELDS}
    for f, fact in notes.section("model").items():
        if f in MODEL_FIELDS:
            if chosen[f] is not None and chosen[f] != fact.value:
                said.append(f"{f} = {_show(fact.value)} from the notes ({fact.text!r}) over the family's {_show(chosen[f])}")
            else:
                said.append(f"{f} = {_show(fact.value)} (notes: {fact.text!r})")
            chosen[f] = fact.value

    kv_heads = row.integer("kv_heads")
    if kv_heads is None:
        kv_heads = heads
        said.append("kv_heads blank: multi-head attention assumed (kv_heads = heads, Megatron/NeMo default)")
    ffn = row.integer("ffn_hidden")
    gated = (chosen["activation"] or (Activation.SWIGLU if arch is Arch.LLAMA else Activation.GELU)).gated
    if ffn is None:
        if gated:
            raise Unmodellable(SkipReason.MISSING_ARCHITECTURE, "ffn_hidden blank for a SwiGLU (gated) MLP")
        ffn = 4 * hidden
        said.append(f"ffn_hidden blank: 4·hidden = {ffn} (GPT default MLP width)")
    vocab = row.integer("vocab")
    padded = notes.get("model.vocab")
    if padded is not None:
        said.append(f"vocab = {padded.value}: the padded embedding the notes state ({padded.text!r}); "
                    f"tokenizer vocab {vocab if vocab is not None else 'not given'}")
        vocab = int(padded.value)
    elif vocab is None:
        if fam is None or fam.vocab is None:
            raise Unmodellable(SkipReason.MISSING_ARCHITECTURE, "vocab blank and the model family's tokenizer is unknown")
        vocab = fam.vocab
        said.append(f"vocab blank: {vocab} ({fam.vocab_reason})")
    return ModelPlan(name=name, arch=arch, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     ffn_hidden=ffn, vocab=vocab, seq_len=seq_len, assumptions=tuple(said), **chosen)


def _show(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(getattr(value, "value", value))
