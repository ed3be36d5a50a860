"""A Hugging Face ``config.json`` → the text of a .llmp model block (``llmp import-hf``).

Reads only the local ``config.json`` (no network, no remote code) and maps its keys onto the
model fields of docs/language.md. Supported ``model_type`` values are the keys of
:data:`FAMILIES`; anything else is an error that lists them. Where the config describes
something llmp does not model (QKV biases, QK-norm, partial rotary, chunked attention) the output
says so in a comment instead of silently dropping it.

Mixture-of-experts configs (each family's ``configuration_*.py`` in huggingface/transformers):

* Mixtral ``num_local_experts``, ``num_experts_per_tok``, the expert width ``intermediate_size``;
* Qwen2/3-MoE ``num_experts``, ``moe_intermediate_size``, ``shared_expert_intermediate_size``,
  ``decoder_sparse_step`` (layer ``i`` is MoE when ``(i + 1) % step == 0``), ``mlp_only_layers``;
* DeepSeek-V2/V3 and Kimi K2 ``n_routed_experts``, ``n_shared_experts``, ``moe_intermediate_size``,
  ``first_k_dense_replace``, ``moe_layer_freq``, ``scoring_func``, ``topk_method`` (``noaux_tc``:
  the expert-bias balancing), ``aux_loss_alpha``, ``num_nextn_predict_layers`` and the MLA widths
  ``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``;
* gpt-oss ``num_local_experts``, ``num_experts_per_tok``, ``sliding_window`` and ``layer_types``;
* Llama 4 (its ``text_config``) ``num_local_experts``, ``interleave_moe_layer_step``, the expert
  width ``intermediate_size`` and the dense width ``intermediate_size_mlp``, one shared expert.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llmp import files
from llmp.errors import InputError
from llmp.grammar import BLOCK_KINDS
from llmp.spec.values import MAXIMA
from llmp.units import UNITS

Extras = Callable[[dict[str, Any], str, dict[str, Any], list[str]], None]
"""Family-specific reading: (config, model_type, fields to fill, notes)."""


@dataclass(frozen=True, slots=True)
class Family:
    """How one ``model_type`` spells the model fields."""

    arch: str
    keys: dict[str, tuple[str, ...]]
    """Model field → config keys to try in order (first present wins)."""
    moe: dict[str, str] | None = None
    """MoE field → config key, for MoE families."""
    extras: Extras | None = None
    """What the family spells its own way (MLA, windows, dense layers, ...)."""


_LLAMA_KEYS: dict[str, tuple[str, ...]] = {"layers": ("num_hidden_layers",), "hidden": ("hidden_size",),
               "heads": ("num_attention_heads",), "kv_heads": ("num_key_value_heads",),
               "head_dim": ("head_dim",), "ffn_hidden": ("intermediate_size",),
               "vocab": ("vocab_size",), "seq_len": ("max_position_embeddings",)}
_QWEN_MOE = {"experts": "num_experts", "top_k": "num_experts_per_tok",
             "expert_ffn_hidden": "moe_intermediate_size"}
_DEEPSEEK_KEYS = {k: v for k, v in _LLAMA_KEYS.items() if k not in ("kv_heads", "head_dim")}
_DEEPSEEK_MOE = {"experts": "n_routed_experts", "top_k": "num_experts_per_tok",
                 "expert_ffn_hidden": "moe_intermediate_size"}
_LLAMA4_KEYS = {**_LLAMA_KEYS, "ffn_hidden": ("intermediate_size_mlp",)}
_LLAMA4_MOE = {"experts": "num_local_experts", "top_k": "num_experts_per_tok",
               "expert_ffn_hidden": "intermediate_size"}
_MIXTRAL_MOE = {"experts": "num_local_experts", "top_k": "num_experts_per_tok",
                "expert_ffn_hidden": "intermediate_size"}


def _window(config: dict[str, Any], model_type: str, fields: dict[str, Any], notes: list[str]) -> None:
    """Mistral's ``sliding_window`` (every layer windowed); Qwen's only with ``use_sliding_window``."""
    window = config.get("sliding_window")
    if model_type.startswith("qwen") and not config.get("use_sliding_window"):
        return
    if window is not None:
        fields["window"] = _positive(window, "sliding_window")
        if model_type.startswith("qwen") and config.get("max_window_layers") is not None:
            notes.append("Qwen windows only the layers from max_window_layers on; llmp windows every layer")


def _aux(config: dict[str, Any], key: str, moe: dict[str, Any], notes: list[str]) -> None:
    coef = config.get(key)
    if isinstance(coef, int | float) and not isinstance(coef, bool) and coef > 0:
        moe["aux_loss"] = True
        notes.append(f"{key} = {coef}: the router's load-balancing loss is computed")


def _mixtral(config: dict[str, Any], model_type: str, fields: dict[str, Any], notes: list[str]) -> None:
    _window(config, model_type, fields, notes)
    _aux(config, "router_aux_loss_coef", fields["moe"], notes)


def _qwen_moe(config: dict[str, Any], model_type: str, fields: dict[str, Any], notes: list[str]) -> None:
    moe = fields["moe"]
    shared = config.get("shared_expert_intermediate_size")
    if shared:
        width = moe["expert_ffn_hidden"]
        if shared % width:
            raise InputError(f"shared_expert_intermediate_size {shared} is not a multiple of "
                             f"the expert width {width}; llmp models shared experts of that width")
        moe["shared_experts"] = shared // width
        notes.append(f"the shared expert of width {shared} is written as {shared // width} "
                     f"shared experts of width {width} (same parameters and FLOPs; its sigmoid gate "
                     "is not modelled)")
    step = config.get("decoder_sparse_step", 1)
    if step != 1:
        moe["every"] = _positive(step, "decoder_sparse_step")
    dense = sorted(config.get("mlp_only_layers") or [])
    if dense:
        if dense != list(range(len(dense))):
            raise InputError(f"mlp_only_layers {dense} are not the leading layers; llmp places dense layers "
                             "first (first_dense_layers) or every n-th (every)")
        moe["first_dense_layers"] = len(dense)
    _window(config, model_type, fields, notes)
    _aux(config, "router_aux_loss_coef", moe, notes)
    if model_type.startswith("qwen3"):
        notes.append("per-head QK RMSNorm is not modelled (2 * head_dim weights per layer)")


def _deepseek(config: dict[str, Any], model_type: str, fields: dict[str, Any], notes: list[str]) -> None:
    moe = fields["moe"]
    moe["shared_experts"] = _count0(config.get("n_shared_experts"), "n_shared_experts")
    first = _count0(config.get("first_k_dense_replace"), "first_k_dense_replace")
    if first:
        moe["first_dense_layers"] = first
    freq = config.get("moe_layer_freq", 1)
    if freq != 1:
        moe["every"] = _positive(freq, "moe_layer_freq")
        notes.append(f"moe_layer_freq = {freq}: DeepSeek makes layer i MoE when i % {freq} == 0, llmp when "
                     f"(i + 1) % {freq} == 0 (the same count)")
    scoring = config.get("scoring_func", "softmax")
    if scoring not in ("softmax", "sigmoid"):
        raise InputError(f"scoring_func {scoring!r} is neither softmax nor sigmoid")
    moe["router"] = scoring
    if config.get("topk_method") == "noaux_tc":
        moe["expert_bias"] = True
    _aux(config, "aux_loss_alpha", moe, notes)
    if config.get("n_group", 1) not in (None, 1):
        notes.append(f"group-limited routing (n_group = {config['n_group']}, topk_group = "
                     f"{config.get('topk_group')}) picks the same number of experts: not modelled")
    mla: dict[str, int | None] = {"q_lora_rank": _count0(config.get("q_lora_rank"), "q_lora_rank")}
    for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        mla[key] = _int(config, (key,), f"mla.{key}", model_type)
    fields["mla"] = mla
    mtp = _count0(config.get("num_nextn_predict_layers"), "num_nextn_predict_layers")
    if mtp:
        fields["mtp_layers"] = mtp


def _gpt_oss(config: dict[str, Any], model_type: str, fields: dict[str, Any], notes: list[str]) -> None:
    fields["bias"] = bool(config.get("attention_bias", True))
    window = config.get("sliding_window")
    if window is not None:
        fields["window"] = _positive(window, "sliding_window")
        types = config.get("layer_types")
        layers = fields["layers"]
        if types is None:  # GptOssConfig's default: sliding, full, sliding, full, ...
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
        fields["full_attention_every"] = _full_every(types, layers)
    _aux(config, "router_aux_loss_coef", fields["moe"], notes)
    notes.append("the attention sinks (one learned logit per head) and the clamped SwiGLU are not modelled "
                 "(negligible cost)")


def _full_every(types: list[Any], layers: int) -> int:
    """``full_attention_every`` for a ``layer_types`` list: 0 when every layer is windowed, ``n``
    when layers n-1, 2n-1, ... attend to the whole sequence."""
    if len(types) != layers or not all(t in ("sliding_attention", "full_attention") for t in types):
        raise InputError(f"layer_types must list {layers} entries of 'sliding_attention' or 'full_attention'")
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    if not full:
        return 0
    n = full[0] + 1
    if full != list(range(n - 1, layers, n)):
        raise InputError(f"layer_types puts full attention in layers {full}: llmp supports every n-th layer "
                         "(full_attention_every)")
    return n


def _llama4(config: dict[str, Any], model_type: str, fields: dict[str, Any], notes: list[str]) -> None:
    moe = fields["moe"]
    moe["shared_experts"] = 1  # Llama4TextMoe: one shared expert of the expert width
    moe["router"] = "sigmoid"
    step = config.get("interleave_moe_layer_step", 1)
    if step != 1:
        moe["every"] = _positive(step, "interleave_moe_layer_step")
    if "ffn_hidden" not in fields:
        fields["ffn_hidden"] = moe["expert_ffn_hidden"]
    chunk = config.get("attention_chunk_size")
    if chunk:
        notes.append(f"chunked attention ({chunk} tokens) in three of every four layers is not modelled: "
                     f"the same as full causal attention for sequences up to {chunk}")
    notes.append("the L2 QK norm of the rotary layers is not modelled (no parameters, negligible cost)")


FAMILIES: dict[str, Family] = {
    "llama": Family("llama", _LLAMA_KEYS),
    "mistral": Family("llama", _LLAMA_KEYS, extras=_window),
    "mixtral": Family("llama", _LLAMA_KEYS, _MIXTRAL_MOE, _mixtral),
    "qwen2": Family("llama", _LLAMA_KEYS),
    "qwen3": Family("llama", _LLAMA_KEYS),
    "qwen2_moe": Family("llama", _LLAMA_KEYS, _QWEN_MOE, _qwen_moe),
    "qwen3_moe": Family("llama", _LLAMA_KEYS, _QWEN_MOE, _qwen_moe),
    "deepseek_v2": Family("llama", _DEEPSEEK_KEYS, _DEEPSEEK_MOE, _deepseek),
    "deepseek_v3": Family("llama", _DEEPSEEK_KEYS, _DEEPSEEK_MOE, _deepseek),
    "kimi_k2": Family("llama", _DEEPSEEK_KEYS, _DEEPSEEK_MOE, _deepseek),
    "gpt_oss": Family("llama", _LLAMA_KEYS, _MIXTRAL_MOE, _gpt_oss),
    "llama4_text": Family("llama", _LLAMA4_KEYS, _LLAMA4_MOE, _llama4),
    "gpt2": Family("gpt", {"layers": ("n_layer",), "hidden": ("n_embd",), "heads": ("n_head",),
                           "ffn_hidden": ("n_inner",), "vocab": ("vocab_size",),
                           "seq_len": ("n_positions", "n_ctx")}),
    "gpt_neox": Family("gpt", {"layers": ("num_hidden_layers",), "hidden": ("hidden_size",),
                               "heads": ("num_attention_heads",),
                               "ffn_hidden": ("intermediate_size",), "vocab": ("vocab_size",),
                               "seq_len": ("max_position_embeddings",)}),
}

NESTED = {"llama4": "text_config"}
"""Multimodal model types whose language model is a nested config (read in its place)."""

_OPTIONAL = {"kv_heads", "head_dim", "ffn_hidden"}
"""Fields whose absence (or null) means the arch default (kv_heads = heads, ...)."""


def import_hf(path: str, *, name: str | None = None, seq_len: int | None = None) -> str:
    """The .llmp model block for the config at ``path`` (the API of ``llmp import-hf``): its id
    ``name`` (default: from the config) and training ``seq_len`` (default: the config's maximum
    context). :class:`InputError` for an unreadable config, an unusable id or a config llmp
    cannot map, naming the key and the fix."""
    config = read_config(path)
    if name is not None and not valid_id(name):
        raise InputError(f"--name {name!r} is not a usable .llmp id",
                         hint="use letters, digits and _, not starting with a digit, and not a "
                              "keyword or unit (model, gpu, s, B, ...)")
    return to_llmp(config, name=name or default_name(config, path), seq_len=seq_len, source=Path(path).name)


def read_config(path: str) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`InputError` for unreadable or non-object JSON."""
    data = files.parse_json(files.read_text(path, CONFIG), str(path))
    if not isinstance(data, dict):
        raise InputError(f"{path} holds a JSON {type(data).__name__}, not a config object")
    return data


CONFIG = replace(files.JSON, what="a Hugging Face config.json")

_RESERVED = frozenset({*BLOCK_KINDS, "use", "true", "false", "symbol", *UNITS})


def valid_id(text: str) -> bool:
    """Whether ``text`` can be written as a block id (a name that is no keyword or unit)."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) is not None and text not in _RESERVED


def default_name(config: dict[str, Any], path: str) -> str:
    """An id from ``_name_or_path``, else the config's folder, else the model type."""
    for candidate in (str(config.get("_name_or_path") or "").rstrip("/").split("/")[-1],
                      Path(path).resolve().parent.name, str(config.get("model_type", ""))):
        ident = re.sub(r"[^a-z0-9_]+", "_", candidate.lower()).strip("_")
        if ident and ident[0].isdigit():
            ident = f"m_{ident}"
        if ident:
            return ident if valid_id(ident) else f"{ident}_model"
    return "imported_model"


def _family(config: dict[str, Any]) -> tuple[str, Family]:
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        shown = repr(model_type) if model_type is not None else "no model_type"
        raise InputError(f"unsupported model type: {shown}",
                         hint=f"supported model_type values: {', '.join([*FAMILIES, *NESTED])}")
    return model_type, FAMILIES[model_type]


def language_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config of the language model: the nested one of a multimodal model (Llama 4's
    ``text_config``, with its ``model_type``), else the config itself."""
    key = NESTED.get(config.get("model_type"))  # type: ignore[arg-type]
    if key is None:
        return config
    inner = config.get(key)
    if not isinstance(inner, dict):
        raise InputError(f"model_type {config['model_type']!r} needs a {key!r} object in the config")
    return inner


def _positive(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"config key {key!r} = {value!r} is not a positive integer")
    return value


def _count0(value: Any, key: str) -> int:
    """A count that may be 0 or absent (null reads as 0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"config key {key!r} = {value!r} is not a whole number")
    return value


def _int(config: dict[str, Any], keys: tuple[str, ...], field: str, model_type: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"config key {key!r} = {value!r} is not a positive integer "
                             f"(needed for {field})")
        most = MAXIMA.get(f"model.{field}")
        if most is not None and value > most:
            raise InputError(f"config key {key!r} = {value} is beyond any real model "
                             f"(model.{field} at most {most:.0e})")
        return value
    if field in _OPTIONAL:
        return None
    raise InputError(f"the config has no {' or '.join(map(repr, keys))} (model_type "
                     f"{model_type!r} needs it for {field})")


def model_fields(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(.llmp model fields in order, explanatory comments) for a config dict."""
    config = language_config(config)
    model_type, family = _family(config)
    notes: list[str] = []
    fields: dict[str, Any] = {"arch": family.arch}
    for name, keys in family.keys.items():
        value = _int(config, keys, name, model_type)
        if value is not None:
            fields[name] = value
    if family.arch == "gpt":
        fields.update(_gpt_extras(config, model_type, notes))
    else:
        fields["tied_embeddings"] = bool(config.get("tie_word_embeddings", False))
        if model_type.startswith("qwen2") or (config.get("attention_bias") and model_type != "gpt_oss"):
            notes.append("the attention QKV projections carry biases; llmp counts none "
                         "(a few thousand parameters per layer)")
        if model_type == "qwen3":
            notes.append("per-head QK RMSNorm is not modelled (2 * head_dim weights per layer)")
    activation = _activation(config, family.arch, notes)
    if activation is not None and activation != ("gelu" if family.arch == "gpt" else "swiglu"):
        fields["activation"] = activation
    if family.moe is not None:
        fields["moe"] = {name: _int(config, (key,), f"moe.{name}", model_type) for name, key in family.moe.items()}
    if family.extras is not None:
        family.extras(config, model_type, fields, notes)
    _check_shapes(fields)
    return fields, notes


def _check_shapes(fields: dict[str, Any]) -> None:
    """The relations the language checks on load (dsl/checks.py), refused here before a file
    that no llmp command could read is written."""
    heads, kv = fields.get("heads"), fields.get("kv_heads")
    if heads and kv and (kv > heads or heads % kv):
        raise InputError(f"the config has {heads} attention heads and {kv} key/value heads (kv_heads); "
                         "key/value heads must divide the attention heads")
    if heads and "head_dim" not in fields and fields.get("hidden", 0) % heads:
        raise InputError(f"hidden size {fields['hidden']} is not a multiple of the {heads} heads, "
                         "and the config gives no head_dim")
    moe = fields.get("moe") or {}
    if moe.get("experts") and moe.get("top_k") and moe["top_k"] > moe["experts"]:
        raise InputError(f"each token is routed to {moe['top_k']} experts (top_k) of only {moe['experts']}")


_GATED = {"silu": "swiglu", "swish": "swiglu", "swiglu": "swiglu"}
"""``hidden_act`` of a gated MLP (the llama families: ``act(gate(x)) * up(x)``, as each family's
``modeling_*.py`` applies ``ACT2FN[config.hidden_act]``) → the llmp activation."""
_GATED_GELU = frozenset({"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_accurate", "gelu_python"})
"""A gated GELU (GeGLU): the same three matrices as SwiGLU; llmp prices it as SwiGLU and says so."""
_PLAIN = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu",
          "gelu_accurate": "gelu", "gelu_python": "gelu", "quick_gelu": "gelu", "relu": "relu",
          "relu2": "squared_relu"}
"""``activation_function`` / ``hidden_act`` of a two-matrix MLP (GPT-2, GPT-NeoX) → the llmp activation
(the names are transformers' ``ACT2FN`` keys; ``relu2`` is squared ReLU)."""
_ACT_KEYS = ("hidden_act", "activation_function")


def _activation(config: dict[str, Any], arch: str, notes: list[str]) -> str | None:
    """The llmp ``activation`` for the config's own activation name; None where the config names none
    (the arch default applies). An activation llmp does not price is refused, never guessed."""
    key = next((k for k in _ACT_KEYS if config.get(k) is not None), None)
    if key is None:
        return None
    name = config[key]
    table = _GATED if arch == "llama" else _PLAIN
    if isinstance(name, str) and name in table:
        return table[name]
    if arch == "llama" and isinstance(name, str) and name in _GATED_GELU:
        notes.append(f"{key} = {name!r}: a gated GELU (GeGLU), priced as SwiGLU (the same three matrices)")
        return "swiglu"
    known = ", ".join(sorted({*table, *(_GATED_GELU if arch == "llama" else ())}))
    raise InputError(f"config key {key!r} = {name!r} is an activation llmp does not model for this "
                     f"{'gated' if arch == 'llama' else 'two-matrix'} MLP",
                     hint=f"activations it reads here: {known}; or write the model block by hand with "
                          "activation = gelu | swiglu | relu | squared_relu (docs/language.md)")


def _gpt_extras(config: dict[str, Any], model_type: str, notes: list[str]) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    if model_type == "gpt_neox":
        extras["position"] = "rotary"
        extras["tied_embeddings"] = bool(config.get("tie_word_embeddings", False))
        if config.get("rotary_pct", 1.0) != 1.0:
            notes.append(f"rotary_pct = {config['rotary_pct']}: only part of each head is "
                         "rotated (rotary cost is negligible either way)")
        if config.get("use_parallel_residual"):
            notes.append("parallel attention + MLP residual: same operators, same cost")
    else:
        extras["tied_embeddings"] = bool(config.get("tie_word_embeddings", True))
        dropout = config.get("resid_pdrop")
        if isinstance(dropout, int | float) and not isinstance(dropout, bool) and dropout > 0:
            extras["dropout"] = dropout
    return extras


def to_llmp(config: dict[str, Any], *, name: str, seq_len: int | None = None,
            source: str = "config.json") -> str:
    """The .llmp text of a model block for ``config``."""
    fields, notes = model_fields(config)
    if seq_len is not None:
        fields["seq_len"] = seq_len
    lines = [f"# Imported by `llmp import-hf` from {source} "
             f"(model_type = \"{language_config(config)['model_type']}\").",
             *(f"# Note: {note}." for note in notes)]
    if seq_len is None:
        lines.append("# seq_len is the model's maximum context; set your training length.")
    lines.append(f"model {name} {{")
    for key, value in fields.items():
        if key in ("moe", "mla"):
            inner = "  ".join(f"{k} = {_literal(v)}" for k, v in value.items() if v is not None)
            lines.append(f"  {key} {{ {inner} }}")
        else:
            lines.append(f"  {key} = {_literal(value)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
