"""Decide a published row's model architecture: which ``arch`` and which per-family details.

The schema has no architecture column. What decides, strongest first: the architecture columns;
what the row's notes state (``GPT (LayerNorm, GeLU MLP)``, ``--swiglu``, ``untie-embeddings``,
``rotary 25%``, ... read by :mod:`~llmp.validate.notes`); the model family read from the name (a
keyed table of the families that appear in published tables, each with the public config it
follows); for names no family claims, the columns: grouped-query attention or an MLP ratio other
than 4 means a Llama-style (SwiGLU) model, otherwise GPT-style, unless the notes name the MLP.
Every decision is written down as an assumption on the row, and what the spec language cannot
express is named, not hidden.

Mixture-of-experts rows: the schema has ``moe_experts`` and ``moe_topk`` but no expert width,
shared experts, dense layers, attention variant or windows. :data:`MOE_FAMILIES` holds the public
configs of the MoE models met in published tables (each cited); a MoE row takes them from its
family, after checking that the row's own architecture columns agree with that config. A MoE row
of no known family is predicted as a generic MoE of the shape its columns give, with Megatron-Core's
defaults for everything they leave out (:func:`_plan_generic_moe`); every such default is written
on the row, and those rows carry :data:`GENERIC_MOE` so the reports score them as their own slice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from llmp.spec.model import Activation, Arch, Norm, Position, Router
from llmp.spec.spec import Stack
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
    dropout: float | None = None
    """The attention and hidden dropout its framework's configuration runs when the run does not say
    (None: none)."""
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
           tied_embeddings=True, vocab=50304, dropout=0.1,
           vocab_reason="NeMo GPT-3 uses the GPT-2 BPE tokenizer (50257) padded to a multiple of 128 = 50304",
           citation="NeMo GPTConfig: learned absolute positions, LayerNorm, GELU, biases, shared embeddings; "
                    "dropout 0.1 (NVIDIA/NeMo@v1.23.0:examples/nlp/language_modeling/conf/megatron_gpt_config.yaml: "
                    "hidden_dropout 0.1, attention_dropout 0.1)"),
    Family(name="Megatron GPT", pattern=r"gpt[ -](?!oss|neox)", arch=Arch.GPT, position=Position.LEARNED, bias=True,
           tied_embeddings=True, vocab=51200, dropout=0.1,
           vocab_reason="Megatron-LM pads the GPT-2 BPE vocabulary (50257) to a multiple of 128·tp; the SC21 and "
                        "2020 README runs state 51,200",
           citation="Megatron-LM GPT: LayerNorm, GELU, learned positions, biases, output layer tied to the embedding; "
                    "dropout 0.1 (NVIDIA/Megatron-LM@v2.6:megatron/arguments.py: --attention-dropout and "
                    "--hidden-dropout default 0.1, as in Megatron-Core's megatron/training/arguments.py and "
                    "microsoft/Megatron-DeepSpeed's arguments.py; no published run here changes them)"),
    Family(name="BLOOM", pattern=r"bloom", arch=Arch.GPT, position=Position.ALIBI, bias=True, tied_embeddings=True,
           citation="BLOOM-176B (bigscience tr11): ALiBi, tied embeddings, biases",
           unmodelled=("embedding LayerNorm",)),
    Family(name="Megatron-Turing NLG", pattern=r"megatron-turing", arch=Arch.GPT, position=Position.LEARNED,
           bias=True, tied_embeddings=True, dropout=0.1,
           citation="MT-NLG 530B: Megatron GPT architecture, trained with Megatron-DeepSpeed (its arguments.py: "
                    "--attention-dropout and --hidden-dropout default 0.1)"),
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
    dropout: float | None = None
    head_dim: int | None = None
    """None: the arch default (hidden / heads)."""
    window: int | None = None
    full_attention_every: int | None = None
    mtp_layers: int | None = None
    """Multi-token prediction modules (None: none)."""
    moe: tuple[tuple[str, Any], ...] = ()
    """The ``moe { }`` fields; empty for a dense model."""
    mla: tuple[tuple[str, Any], ...] = ()
    """The ``mla { }`` fields; empty for standard attention."""
    layouts: tuple[tuple[tuple[int, int], str], ...] = ()
    """The model's recipe pipeline layouts for Megatron-Core, by (pp, vp) (Megatron-Core layout strings)."""
    etp: int | None = None
    """The expert tensor-parallel degree its Megatron-Core recipes run (None: not known)."""
    recipe_source: str = ""
    """Where the layouts and the expert tensor-parallel degree come from."""
    assumptions: tuple[str, ...] = field(default=())


@dataclass(frozen=True, kw_only=True, slots=True)
class MoeFamily:
    """A mixture-of-experts model's public config: what the schema's columns leave out."""

    name: str
    pattern: str
    """Regular expression matched (case-insensitively) at the start of ``model_name``."""
    citation: str
    columns: tuple[tuple[str, int], ...]
    """Architecture columns the config fixes (``layers``, ``hidden``, ...): a row must agree."""
    kv_heads: int
    head_dim: int | None = None
    """None: hidden / heads."""
    ffn_hidden: int
    """The dense MLP width (dense layers; unused when every layer is MoE)."""
    moe: tuple[tuple[str, Any], ...]
    """The model's ``moe { }`` fields beyond experts and top_k."""
    mla: tuple[tuple[str, int], ...] = ()
    """The ``mla { }`` fields, for multi-head latent attention."""
    model: tuple[tuple[str, Any], ...] = ()
    """Further ``model`` fields (bias, window, full_attention_every, mtp_layers)."""
    unmodelled: tuple[str, ...] = ()
    layouts: tuple[tuple[tuple[int, int], str], ...] = ()
    """Pipeline layouts its Megatron-Core recipes run, by (pp, vp)."""
    etp: int | None = None
    """The expert tensor-parallel degree its Megatron-Core recipes run."""
    recipe_source: str = ""


_BRIDGE_DSV3 = ("NVIDIA-NeMo/Megatron-Bridge@05d003f:src/megatron/bridge/recipes/deepseek/deepseek_v3.py, "
                "_deepseek_v3_common: expert_tensor_parallel_size = 1 and layout_map; pp 8 x vp 4 and pp 2 x vp 8 "
                "from the performance configs, "
                "NVIDIA-NeMo/Megatron-Bridge@0426418:scripts/performance/configs/deepseek/"
                "deepseek_workload_base_configs.py, DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1 and _GB300_V1 pp_layout")
_DSV3_LAYOUTS = (
    ((4, 1), "Et*16|t*16|t*16|t*13mL"),
    *(((pp, vp), "Et*8|(t*8|)*6t*5mL") for pp, vp in ((8, 1), (4, 2))),
    *(((pp, vp), "Et*4|(t*4|)*14tmL") for pp, vp in ((16, 1), (8, 2), (4, 4), (2, 8))),
    ((8, 4), "Et|(tt|)*30mL"),
)
"""DeepSeek-V3's 61 layers and its MTP module over the pipeline, as Megatron-Bridge lays them out."""

_DSV3_MLA = (("q_lora_rank", 1536), ("kv_lora_rank", 512), ("qk_nope_head_dim", 128), ("qk_rope_head_dim", 64),
             ("v_head_dim", 128))

MOE_FAMILIES: tuple[MoeFamily, ...] = (
    MoeFamily(name="DeepSeek-V3", pattern=r"deepseek[-_ ]?v3",
              citation="deepseek-ai/DeepSeek-V3 config.json (DeepSeek-V3 technical report, arXiv:2412.19437 §4.2): "
                       "MLA, 3 dense layers of 18432, 256 routed experts of 2048 + 1 shared, top-8, sigmoid scores "
                       "with the expert bias (noaux_tc), one multi-token prediction module "
                       "(num_nextn_predict_layers 1)",
              columns=(("layers", 61), ("hidden", 7168), ("heads", 128), ("moe_experts", 256), ("moe_topk", 8)),
              kv_heads=128, ffn_hidden=18432,
              moe=(("expert_ffn_hidden", 2048), ("shared_experts", 1), ("first_dense_layers", 3),
                   ("router", Router.SIGMOID), ("expert_bias", True)),
              mla=_DSV3_MLA, model=(("mtp_layers", 1),), layouts=_DSV3_LAYOUTS, etp=1, recipe_source=_BRIDGE_DSV3),
    MoeFamily(name="Kimi K2", pattern=r"kimi[-_ ]?k2",
              citation="moonshotai/Kimi-K2-Base config.json (DeepSeek-V3 architecture): MLA, 1 dense layer of "
                       "18432, 384 routed experts of 2048 + 1 shared, top-8, sigmoid scores with the expert bias",
              columns=(("layers", 61), ("hidden", 7168), ("heads", 64), ("moe_experts", 384), ("moe_topk", 8)),
              kv_heads=64, ffn_hidden=18432,
              moe=(("expert_ffn_hidden", 2048), ("shared_experts", 1), ("first_dense_layers", 1),
                   ("router", Router.SIGMOID), ("expert_bias", True)),
              mla=_DSV3_MLA),
    MoeFamily(name="Qwen3-30B-A3B", pattern=r"qwen[-_ ]?3[-_ ]?(?:moe[-_ ]?)?30b",
              citation="Qwen/Qwen3-30B-A3B config.json (Qwen3 technical report, arXiv:2505.09388 Table 2): head_dim "
                       "128, 128 experts of 768, top-8, no shared expert, every layer MoE",
              columns=(("layers", 48), ("hidden", 2048), ("heads", 32), ("moe_experts", 128), ("moe_topk", 8)),
              kv_heads=4, head_dim=128, ffn_hidden=6144, moe=(("expert_ffn_hidden", 768),),
              unmodelled=("per-head QK RMSNorm",)),
    MoeFamily(name="Qwen3-235B-A22B", pattern=r"qwen[-_ ]?3[-_ ]?(?:moe[-_ ]?)?235b",
              citation="Qwen/Qwen3-235B-A22B config.json (Qwen3 technical report Table 2): head_dim 128, 128 experts "
                       "of 1536, top-8, no shared expert, every layer MoE",
              columns=(("layers", 94), ("hidden", 4096), ("heads", 64), ("moe_experts", 128), ("moe_topk", 8)),
              kv_heads=4, head_dim=128, ffn_hidden=12288, moe=(("expert_ffn_hidden", 1536),),
              unmodelled=("per-head QK RMSNorm",)),
    MoeFamily(name="gpt-oss-20b", pattern=r"gpt[-_ ]?oss[-_ ]?20b",
              citation="openai/gpt-oss-20b config.json (gpt-oss model card, arXiv:2508.10925 Table 1): head_dim 64, "
                       "32 experts of 2880, top-4, attention and expert biases, a 128-token window in every other "
                       "layer (layer_types)",
              columns=(("layers", 24), ("hidden", 2880), ("heads", 64), ("moe_experts", 32), ("moe_topk", 4)),
              kv_heads=8, head_dim=64, ffn_hidden=2880, moe=(("expert_ffn_hidden", 2880),),
              model=(("bias", True), ("window", 128), ("full_attention_every", 2)),
              unmodelled=("attention sinks (one learned logit per head)", "clamped SwiGLU")),
    MoeFamily(name="gpt-oss-120b", pattern=r"gpt[-_ ]?oss[-_ ]?120b",
              citation="openai/gpt-oss-120b config.json (gpt-oss model card Table 1): head_dim 64, 128 experts of "
                       "2880, top-4, attention and expert biases, a 128-token window in every other layer",
              columns=(("layers", 36), ("hidden", 2880), ("heads", 64), ("moe_experts", 128), ("moe_topk", 4)),
              kv_heads=8, head_dim=64, ffn_hidden=2880, moe=(("expert_ffn_hidden", 2880),),
              model=(("bias", True), ("window", 128), ("full_attention_every", 2)),
              unmodelled=("attention sinks (one learned logit per head)", "clamped SwiGLU")),
    MoeFamily(name="Mixtral 8x7B", pattern=r"mixtral[-_ ]?8x7b",
              citation="mistralai/Mixtral-8x7B-v0.1 config.json (Jiang et al. 2024 Table 1): 8 experts of 14336, "
                       "top-2",
              columns=(("layers", 32), ("hidden", 4096), ("heads", 32), ("moe_experts", 8), ("moe_topk", 2)),
              kv_heads=8, ffn_hidden=14336, moe=(("expert_ffn_hidden", 14336),)),
    MoeFamily(name="Mixtral 8x22B", pattern=r"mixtral[-_ ]?8x22b",
              citation="mistralai/Mixtral-8x22B-v0.1 config.json: 8 experts of 16384, top-2",
              columns=(("layers", 56), ("hidden", 6144), ("heads", 48), ("moe_experts", 8), ("moe_topk", 2)),
              kv_heads=8, ffn_hidden=16384, moe=(("expert_ffn_hidden", 16384),)),
)
"""MoE models met in published tables, first match wins."""


def moe_family_of(model_name: str) -> MoeFamily | None:
    """The first MoE family whose pattern matches the start of ``model_name`` (case-insensitive)."""
    return next((f for f in MOE_FAMILIES if re.match(f.pattern, model_name.strip(), re.IGNORECASE)), None)


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
                                 "parallel_residual", "dropout")
"""Model fields a family or a note may set (the arch gives the rest)."""


def plan_model(row: Row, notes: Notes | None = None) -> ModelPlan:
    """The model block for ``row`` (and what its ``notes`` state); raises :class:`Unmodellable` when
    the columns do not define one."""
    notes = notes if notes is not None else Notes()
    name = row.text("model_name")
    experts = row.integer("moe_experts")
    if experts is not None and experts > 1:
        return _plan_moe(row, name)
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
    chosen: dict[str, Any] = {f: getattr(fam, f) if fam else None for f in MODEL_FIELDS}
    for f, fact in notes.section("model").items():
        if f in MODEL_FIELDS:
            if chosen[f] is not None and chosen[f] != fact.value:
                said.append(f"{f} = {_show(fact.value)} from the notes ({fact.text!r}) over the family's "
                            f"{_show(chosen[f])}")
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
            raise Unmodellable(SkipReason.MISSING_ARCHITECTURE,
                               "vocab blank and the model family's tokenizer is unknown")
        vocab = fam.vocab
        said.append(f"vocab blank: {vocab} ({fam.vocab_reason})")
    return ModelPlan(name=name, arch=arch, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     ffn_hidden=ffn, vocab=vocab, seq_len=seq_len, assumptions=tuple(said), **chosen)


def _plan_moe(row: Row, name: str) -> ModelPlan:
    """A MoE row's model from its family's public config (see the module docstring)."""
    fam = moe_family_of(name)
    if fam is None:
        return _plan_generic_moe(row, name)
    fixed = dict(fam.columns)
    clash = [f"{c} {row.integer(c)} (config {v})" for c, v in fam.columns
             if row.integer(c) is not None and row.integer(c) != v]
    if clash:
        raise Unmodellable(SkipReason.MOE, f"{name!r} matches the {fam.name} family but the row disagrees with its "
                           f"config: {', '.join(clash)}")
    missing = [c for c in ("vocab", "seq_len") if row.integer(c) is None]
    if missing:
        raise Unmodellable(SkipReason.MISSING_ARCHITECTURE, f"{', '.join(missing)} blank")
    said = [f"architecture: {fam.name} MoE family → arch = llama ({fam.citation})"]
    said.extend(f"not modelled: {what}" for what in fam.unmodelled)
    for column, value in (("kv_heads", fam.kv_heads), ("ffn_hidden", fam.ffn_hidden)):
        if row.integer(column) is None:
            said.append(f"{column} blank: {value} ({fam.name} config)")
        elif row.integer(column) != value:
            raise Unmodellable(SkipReason.MOE, f"{name!r}: {column} {row.integer(column)} differs from the "
                               f"{fam.name} config's {value}")
    moe = (("experts", fixed["moe_experts"]), ("top_k", fixed["moe_topk"]), *fam.moe)
    said.append("moe: " + ", ".join(f"{k} = {_show(v)}" for k, v in moe) + f" ({fam.name} config)")
    if fam.mla:
        said.append("mla: " + ", ".join(f"{k} = {v}" for k, v in fam.mla) + f" ({fam.name} config)")
    extra = dict(fam.model)
    if extra.get("mtp_layers"):
        said.append(f"mtp_layers = {extra['mtp_layers']} ({fam.name} config)")
    return ModelPlan(name=name, arch=Arch.LLAMA, layers=fixed["layers"], hidden=fixed["hidden"], heads=fixed["heads"],
                     kv_heads=fam.kv_heads, ffn_hidden=fam.ffn_hidden, vocab=row.integer("vocab") or 0,
                     seq_len=row.integer("seq_len") or 0, head_dim=fam.head_dim, bias=extra.get("bias"),
                     window=extra.get("window"), full_attention_every=extra.get("full_attention_every"),
                     mtp_layers=extra.get("mtp_layers"), moe=moe, mla=fam.mla, layouts=fam.layouts, etp=fam.etp,
                     recipe_source=fam.recipe_source, assumptions=tuple(said))


GENERIC_MOE = "architecture: generic MoE"
"""How a generic MoE row's first assumption starts (reports slice on it)."""

_MCORE_CONFIG = "NVIDIA/Megatron-LM@00caa53:megatron/core/transformer/transformer_config.py"
_MCORE_ARGS = "NVIDIA/Megatron-LM@00caa53:megatron/training/arguments.py"


def _plan_generic_moe(row: Row, name: str) -> ModelPlan:
    """A MoE row of no known family: the shape its columns give, every layer a MoE layer of
    ``moe_experts`` experts of width ``ffn_hidden``, ``moe_topk`` per token, and Megatron-Core's
    defaults for what the columns leave out, each written on the row."""
    missing = [c for c in ("layers", "hidden", "heads", "seq_len", "vocab", "moe_topk") if row.integer(c) is None]
    if row.integer("ffn_hidden") is None:
        missing.append("ffn_hidden (the expert width)")
    if missing:
        raise Unmodellable(SkipReason.MISSING_ARCHITECTURE, f"{', '.join(missing)} blank: a MoE of no known family "
                           f"({name!r}) needs its shape from the columns")
    layers, hidden, heads, seq_len, vocab, experts, top_k, ffn = (row.integer(c) for c in (
        "layers", "hidden", "heads", "seq_len", "vocab", "moe_experts", "moe_topk", "ffn_hidden"))
    assert None not in (layers, hidden, heads, seq_len, vocab, experts, top_k, ffn)
    if top_k > experts:  # type: ignore[operator]
        raise Unmodellable(SkipReason.MOE, f"moe_topk {top_k} > moe_experts {experts}")
    said = [f"{GENERIC_MOE} of the row's shape: no known MoE family for {name!r} (known: "
            f"{', '.join(f.name for f in MOE_FAMILIES)}); arch = llama (RMSNorm, SwiGLU, rotary, no biases: the "
            "architecture of every MoE family llmp knows)",
            f"expert width = ffn_hidden {ffn}: Megatron-Core's moe_ffn_hidden_size defaults to ffn_hidden_size "
            f"({_MCORE_CONFIG}, TransformerConfig.__post_init__); dense layers none, so ffn_hidden is only the "
            "experts'",
            f"every layer a MoE layer, no dense first layers (Megatron --moe-layer-freq default 1, {_MCORE_ARGS})",
            "no shared experts (Megatron --moe-shared-expert-intermediate-size default None)",
            "router: softmax over the top-k logits, no expert bias, no load-balancing loss (Megatron "
            "--moe-router-score-function softmax, --moe-aux-loss-coeff 0.0 defaults), dropless (no capacity "
            "factor), a balanced load (imbalance 1)",
            "attention: grouped-query as the columns give it (no MLA, no window)"]
    kv_heads = row.integer("kv_heads")
    if kv_heads is None:
        kv_heads = heads
        said.append("kv_heads blank: multi-head attention assumed (kv_heads = heads, Megatron default)")
    moe: tuple[tuple[str, Any], ...] = (("experts", experts), ("top_k", top_k), ("expert_ffn_hidden", ffn))
    return ModelPlan(name=name, arch=Arch.LLAMA, layers=layers, hidden=hidden, heads=heads,  # type: ignore[arg-type]
                     kv_heads=kv_heads, ffn_hidden=ffn, vocab=vocab, seq_len=seq_len, moe=moe,  # type: ignore[arg-type]
                     assumptions=tuple(said))


MTP_STACKS: dict[Stack, str] = {
    Stack.NEMO_AUTOMODEL: ("NeMo AutoModel's DeepSeek-V3 model builds no multi-token prediction module "
                           "(NVIDIA-NeMo/Automodel@05e0902:nemo_automodel/components/models/deepseek_v3/model.py)"),
}
"""Stacks that train a model without the multi-token prediction modules its config has, and why."""


def for_stack(model: ModelPlan, stack: Stack) -> ModelPlan:
    """``model`` as ``stack`` builds it: without its multi-token prediction modules where the stack
    has none (:data:`MTP_STACKS`)."""
    if not model.mtp_layers or stack not in MTP_STACKS:
        return model
    return replace(model, mtp_layers=None,
                   assumptions=(*model.assumptions, f"mtp_layers = 0: {MTP_STACKS[stack]}"))


def _show(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(getattr(value, "value", value))
