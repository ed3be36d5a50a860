"""Layer kinds: which transformer layers differ from which, and how many of each a chunk holds.

Most models repeat one layer. Some do not: DeepSeek-V3 starts with three dense-MLP layers before
its MoE layers (``first_k_dense_replace``), Llama 4 Maverick alternates dense and MoE layers
(``interleave_moe_layer_step = 2``), gpt-oss alternates sliding-window and full attention
(``layer_types``). A :class:`LayerKind` is what makes one layer's operators differ from
another's: a dense or MoE MLP, full or windowed attention. The operator graph builds one set of
layer operators per kind present (:mod:`~llmp.analytic.layer`) and each pipeline chunk runs them
as many times as it holds layers of that kind.

Layer ``i`` (0-based) has a MoE MLP when ``i >= moe.first_dense_layers`` and ``(i + 1) % moe.every
== 0`` (Hugging Face ``Llama4TextConfig``: ``moe_layers = range(step - 1, layers, step)``;
DeepSeek-V3 ``DeepseekV3DecoderLayer``: ``layer_idx >= first_k_dense_replace``); it attends to a
window when ``model.window > 0`` unless ``full_attention_every = n > 0`` and ``(i + 1) % n == 0``
(gpt-oss ``layer_types``: sliding, full, sliding, full, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.spec.model import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerKind:
    """What distinguishes a layer's operators."""

    moe: bool
    """The MLP is a mixture of experts (else the dense MLP of ``model.ffn_hidden``)."""
    windowed: bool
    """The attention sees the last ``model.window`` tokens (else the whole causal context)."""


def _is_zero(x: Any) -> bool:
    return isinstance(x, int | float) and x == 0


def _is_one(x: Any) -> bool:
    return isinstance(x, int | float) and x == 1


def uniform(m: ModelSpec) -> LayerKind | None:
    """The kind of every layer when all layers are alike (decidable with symbolic sizes), else None."""
    moe = m.moe is not None
    if m.moe is not None and not (_is_zero(m.moe.first_dense_layers) and _is_one(m.moe.every)):
        return None
    windowed = not _is_zero(m.window)
    if windowed and not _is_zero(m.full_attention_every):
        return None
    return LayerKind(moe=moe, windowed=windowed)


def of_layer(m: ModelSpec, i: int) -> LayerKind:
    """The kind of layer ``i`` (0-based; the model's fields must be numbers)."""
    moe = m.moe is not None and i >= int(m.moe.first_dense_layers) and (i + 1) % int(m.moe.every) == 0
    full = int(m.full_attention_every) > 0 and (i + 1) % int(m.full_attention_every) == 0
    return LayerKind(moe=moe, windowed=int(m.window) > 0 and not full)


def sequence(m: ModelSpec) -> tuple[LayerKind, ...]:
    """The kind of every layer, in model order (numbers only)."""
    return tuple(of_layer(m, i) for i in range(int(m.layers)))


def kinds(m: ModelSpec) -> tuple[LayerKind, ...]:
    """The distinct kinds of the model's layers, in order of first appearance."""
    one = uniform(m)
    if one is not None:
        return (one,)
    return tuple(dict.fromkeys(sequence(m)))


def counts(m: ModelSpec, chunk_layers: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Layers of each kind (in :func:`kinds` order) in each chunk; chunk ``g`` holds the next
    ``chunk_layers[g]`` layers in model order."""
    present = kinds(m)
    seq = sequence(m)
    out, start = [], 0
    for n in chunk_layers:
        mine = seq[start:start + n]
        out.append(tuple(sum(k == kind for k in mine) for kind in present))
        start += n
    return tuple(out)


def label(kind: LayerKind, present: tuple[LayerKind, ...]) -> str:
    """The op-name prefix of a kind's layer: ``layer`` when all layers are alike, else what sets
    it apart (``dense_layer``, ``moe_layer``, ``window_layer``, ``full_layer``, ``moe_window_layer``)."""
    if len(present) == 1:
        return "layer"
    parts = []
    if len({k.moe for k in present}) > 1:
        parts.append("moe" if kind.moe else "dense")
    if len({k.windowed for k in present}) > 1:
        parts.append("window" if kind.windowed else "full")
    return "_".join(parts) + "_layer"
