"""Decide a published row's model architecture: which ``arch`` and which per-family details.

The schema has no architecture column, so the family is read from the model name (a keyed table
of the families that appear in published tables, each with the public config it follows) and,
for names no family claims, from the columns: grouped-query attention or an MLP ratio other
than 4 means a Llama-style (SwiGLU) model, otherwise GPT-style. Every decision is written down as
an assumption on the row, and what the spec language cannot express is named, not hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llmp.dsl.spec import Activation, Arch, Norm, Position
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
    Family(name="Megatron GPT", pattern=r"gpt[ -](?!oss)", arch=Arch.GPT, position=Position.LEARNED, bias=True,
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
    Family(name="Nemotron", pattern=r"nemotron-\d", arch=Arch.GPT, activation=Activation.RELU,
           position=Position.ROTARY, bias=False, tied_embeddings=False, vocab=256000,
           vocab_reason="Nemotron tokenizer vocabulary (256,000 SentencePiece tokens)",
           citation="NeMo NemotronConfig: LayerNorm (1p), squared-ReLU MLP, rotary positions, no biases, untied",
           unmodelled=("squared ReLU (modelled as ReLU)", "rotary on half of each head (rotary_percent 0.5)")),
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
    assumptions: tuple[str, ...] = field(default=())


def family_of(model_name: str) -> Family | None:
    """The first family whose pattern matches the start of ``model_name`` (case-insensitive)."""
    return next((f for f in FAMILIES if re.match(f.pattern, model_name.strip(), re.IGNORECASE)), None)


def _inferred_arch(row: Row) -> tuple[Arch, str]:
    heads, kv, hidden, ffn = (row.integer(c) for c in ("heads", "kv_heads", "hidden", "ffn_hidden"))
    if kv is not None and heads is not None and kv < heads:
        return Arch.LLAMA, f"kv_heads {kv} < heads {heads} (grouped-query attention)"
    if ffn is not None and hidden and ffn != 4 * hidden:
        return Arch.LLAMA, f"ffn_hidden/hidden = {ffn / hidden:.4g}, not 4 (SwiGLU-sized MLP)"
    return Arch.GPT, "multi-head attention and a 4x MLP (or no MLP width given)"


def plan_model(row: Row) -> ModelPlan:
    """The model block for ``row``; raises :class:`Unmodellable` when the columns do not define one."""
    name = row.text("model_name")
    missing = [c for c in ("layers", "hidden", "heads", "seq_len") if row.integer(c) is None]
    if missing:
        raise Unmodellable(SkipReason.MISSING_ARCHITECTURE,
                           f"{', '.join(missing)} blank (the source or the model's public config does not give them)")
    layers, hidden, heads, seq_len = (row.integer(c) for c in ("layers", "hidden", "heads", "seq_len"))
    assert layers is not None and hidden is not None and heads is not None and seq_len is not None
    fam = family_of(name)
    notes: list[str] = []
    if fam is None:
        arch, why = _inferred_arch(row)
        notes.append(f"architecture: no known family for {name!r}; arch = {arch} inferred from the columns: {why}")
    else:
        arch = fam.arch
        notes.append(f"architecture: {fam.name} family → arch = {arch} ({fam.citation})")
        notes.extend(f"not modelled: {what}" for what in fam.unmodelled)

    kv_heads = row.integer("kv_heads")
    if kv_heads is None:
        kv_heads = heads
        notes.append("kv_heads blank: multi-head attention assumed (kv_heads = heads, Megatron/NeMo default)")
    ffn = row.integer("ffn_hidden")
    if ffn is None:
        if arch is not Arch.GPT:
            raise Unmodellable(SkipReason.MISSING_ARCHITECTURE, "ffn_hidden blank for a SwiGLU (Llama-style) model")
        ffn = 4 * hidden
        notes.append(f"ffn_hidden blank: 4·hidden = {ffn} (GPT default MLP width)")
    vocab = row.integer("vocab")
    if vocab is None:
        if fam is None or fam.vocab is None:
            raise Unmodellable(SkipReason.MISSING_ARCHITECTURE, "vocab blank and the model family's tokenizer is unknown")
        vocab = fam.vocab
        notes.append(f"vocab blank: {vocab} ({fam.vocab_reason})")
    return ModelPlan(
        name=name, arch=arch, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn,
        vocab=vocab, seq_len=seq_len,
        norm=fam.norm if fam else None, activation=fam.activation if fam else None,
        position=fam.position if fam else None, bias=fam.bias if fam else None,
        tied_embeddings=fam.tied_embeddings if fam else None, assumptions=tuple(notes))
