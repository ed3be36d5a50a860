"""``llmp import-hf config.json [-o OUT.llmp]``: a Hugging Face config → a .llmp model block.

Reads only the local ``config.json`` (no network, no remote code) and maps its keys onto the
model fields of docs/language.md. Supported ``model_type`` values are the keys of
:data:`FAMILIES`; anything else is an error that lists them. Where the config describes
something llmp does not model (QKV biases, QK-norm, partial rotary, dense layers between MoE
layers) the output says so in a comment instead of silently dropping it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmp.dsl.includes import read_file
from llmp.errors import InputError
from llmp.grammar import BLOCK_KINDS
from llmp.units import UNITS


@dataclass(frozen=True, slots=True)
class Family:
    """How one ``model_type`` spells the model fields."""

    arch: str
    keys: dict[str, tuple[str, ...]]
    """Model field → config keys to try in order (first present wins)."""
    moe: dict[str, str] | None = None
    """MoE field → config key, for MoE families."""


_LLAMA_KEYS = {"layers": ("num_hidden_layers",), "hidden": ("hidden_size",),
               "heads": ("num_attention_heads",), "kv_heads": ("num_key_value_heads",),
               "head_dim": ("head_dim",), "ffn_hidden": ("intermediate_size",),
               "vocab": ("vocab_size",), "seq_len": ("max_position_embeddings",)}
_QWEN_MOE = {"experts": "num_experts", "top_k": "num_experts_per_tok",
             "expert_ffn_hidden": "moe_intermediate_size"}

FAMILIES: dict[str, Family] = {
    "llama": Family("llama", _LLAMA_KEYS),
    "mistral": Family("llama", _LLAMA_KEYS),
    "mixtral": Family("llama", _LLAMA_KEYS, {"experts": "num_local_experts",
                                              "top_k": "num_experts_per_tok",
                                              "expert_ffn_hidden": "intermediate_size"}),
    "qwen2": Family("llama", _LLAMA_KEYS),
    "qwen3": Family("llama", _LLAMA_KEYS),
    "qwen2_moe": Family("llama", _LLAMA_KEYS, _QWEN_MOE),
    "qwen3_moe": Family("llama", _LLAMA_KEYS, _QWEN_MOE),
    "gpt2": Family("gpt", {"layers": ("n_layer",), "hidden": ("n_embd",), "heads": ("n_head",),
                           "ffn_hidden": ("n_inner",), "vocab": ("vocab_size",),
                           "seq_len": ("n_positions", "n_ctx")}),
    "gpt_neox": Family("gpt", {"layers": ("num_hidden_layers",), "hidden": ("hidden_size",),
                               "heads": ("num_attention_heads",),
                               "ffn_hidden": ("intermediate_size",), "vocab": ("vocab_size",),
                               "seq_len": ("max_position_embeddings",)}),
}

_OPTIONAL = {"kv_heads", "head_dim", "ffn_hidden"}
"""Fields whose absence (or null) means the arch default (kv_heads = heads, ...)."""


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="a Hugging Face config.json")
    parser.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    parser.add_argument("--name", help="model id in the .llmp file (default: from the config)")
    parser.add_argument("--seq-len", type=int, metavar="N",
                        help="training sequence length (default: the config's maximum context)")


def run(args: argparse.Namespace) -> int:
    config = read_config(args.config)
    if args.name is not None and not valid_id(args.name):
        raise InputError(f"--name {args.name!r} is not a usable .llmp id",
                         hint="use letters, digits and _, not starting with a digit, and not a "
                              "keyword or unit (model, gpu, s, B, ...)")
    text = to_llmp(config, name=args.name or default_name(config, args.config),
                   seq_len=args.seq_len, source=Path(args.config).name)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot write {args.output}: {err.strerror or err}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def read_config(path: str) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`InputError` for unreadable or non-object JSON."""
    text = read_file(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON: {err.msg} at line {err.lineno} column "
                         f"{err.colno}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} holds a JSON {type(data).__name__}, not a config object")
    return data


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
                         hint=f"supported model_type values: {', '.join(FAMILIES)}")
    return model_type, FAMILIES[model_type]


def _int(config: dict[str, Any], keys: tuple[str, ...], field: str, model_type: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"config key {key!r} = {value!r} is not a positive integer "
                             f"(needed for {field})")
        return value
    if field in _OPTIONAL:
        return None
    raise InputError(f"the config has no {' or '.join(map(repr, keys))} (model_type "
                     f"{model_type!r} needs it for {field})")


def model_fields(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(.llmp model fields in order, explanatory comments) for a config dict."""
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
        if config.get("attention_bias") or model_type.startswith("qwen2"):
            notes.append("the attention QKV projections carry biases; llmp counts none "
                         "(a few thousand parameters per layer)")
        if model_type.startswith("qwen3"):
            notes.append("per-head QK RMSNorm is not modelled (2 * head_dim weights per layer)")
    if family.moe is not None:
        fields["moe"] = _moe(config, family.moe, model_type, notes)
    return fields, notes


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


def _moe(config: dict[str, Any], keys: dict[str, str], model_type: str,
         notes: list[str]) -> dict[str, int]:
    moe = {name: _int(config, (key,), f"moe.{name}", model_type) for name, key in keys.items()}
    shared = config.get("shared_expert_intermediate_size")
    if shared:
        width = moe["expert_ffn_hidden"]
        assert width is not None
        if shared % width:
            raise InputError(f"shared_expert_intermediate_size {shared} is not a multiple of "
                             f"the expert width {width}; llmp models shared experts of that width")
        moe["shared_experts"] = shared // width
        notes.append(f"the shared expert of width {shared} is written as {shared // width} "
                     f"shared experts of width {width} (same parameters and FLOPs)")
    if config.get("decoder_sparse_step", 1) != 1 or config.get("mlp_only_layers"):
        notes.append("some layers are dense in this model; llmp makes every layer MoE")
    return {k: v for k, v in moe.items() if v is not None}


def to_llmp(config: dict[str, Any], *, name: str, seq_len: int | None = None,
            source: str = "config.json") -> str:
    """The .llmp text of a model block for ``config``."""
    fields, notes = model_fields(config)
    if seq_len is not None:
        fields["seq_len"] = seq_len
    lines = [f"# Imported by `llmp import-hf` from {source} "
             f"(model_type = \"{config['model_type']}\").",
             *(f"# Note: {note}." for note in notes)]
    if seq_len is None:
        lines.append("# seq_len is the model's maximum context; set your training length.")
    lines.append(f"model {name} {{")
    for key, value in fields.items():
        if key == "moe":
            inner = "  ".join(f"{k} = {_literal(v)}" for k, v in value.items())
            lines.append(f"  moe {{ {inner} }}")
        else:
            lines.append(f"  {key} = {_literal(value)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
