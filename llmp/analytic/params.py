"""Parameter counts of a model, in closed form (exact for the architectures llmp models)."""

from __future__ import annotations

from typing import Any

from llmp.analytic.shard import mlp_matrices, norms_per_layer
from llmp.dsl.spec import ModelSpec, Norm, Position


def layer_params(m: ModelSpec) -> Any:
    """Parameters of one transformer layer (attention + MLP + its norms).

    Attention: Q and O are hidden x (heads*head_dim); K and V are hidden x (kv_heads*head_dim).
    MLP: two matrices hidden x ffn (GELU, ReLU, squared ReLU) or three (SwiGLU: gate, up, down),
    or per MoE: router hidden x experts plus (experts + shared) expert MLPs of width
    expert_ffn_hidden. Norms: two per layer, one when a parallel residual shares it.
    """
    q_width = m.heads * m.head_dim
    kv_width = m.kv_heads * m.head_dim
    attn = m.hidden * (2 * q_width + 2 * kv_width)
    mats = mlp_matrices(m)
    if m.moe is None:
        mlp = mats * m.hidden * m.ffn_hidden
        mlp_bias = (m.ffn_hidden * (mats - 1) + m.hidden) if m.bias else 0
    else:
        experts = m.moe.experts + m.moe.shared_experts
        mlp = experts * mats * m.hidden * m.moe.expert_ffn_hidden + m.hidden * m.moe.experts
        mlp_bias = experts * (m.moe.expert_ffn_hidden * (mats - 1) + m.hidden) if m.bias else 0
    attn_bias = (2 * q_width + 2 * kv_width) if m.bias else 0
    norms = norms_per_layer(m) * (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    return attn + attn_bias + mlp + mlp_bias + norms


def embedding_params(m: ModelSpec, vocab: Any = None) -> Any:
    """Token embedding, learned positions, the final norm and (if untied) the output head.
    ``vocab``: the embedding's rows as trained (the padded vocab, :attr:`Spec.padded_vocab`);
    default ``m.vocab``."""
    rows = m.vocab if vocab is None else vocab
    tokens = rows * m.hidden
    positions = m.seq_len * m.hidden if m.position is Position.LEARNED else 0
    final_norm = (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    head = 0 if m.tied_embeddings else rows * m.hidden
    return tokens + positions + final_norm + head


def count(m: ModelSpec, vocab: Any = None) -> Any:
    """Total parameters (``vocab``: the padded vocab, see :func:`embedding_params`)."""
    return m.layers * layer_params(m) + embedding_params(m, vocab)


def active(m: ModelSpec, vocab: Any = None) -> Any:
    """Parameters touched per token (MoE: top_k + shared experts instead of all experts)."""
    if m.moe is None:
        return count(m, vocab)
    idle = (m.moe.experts - m.moe.top_k) * mlp_matrices(m) * m.hidden * m.moe.expert_ffn_hidden
    return count(m, vocab) - m.layers * idle


def tensors(m: ModelSpec) -> tuple[Any, Any]:
    """Parameter tensors per layer and outside the layers, as Megatron-style modules hold them
    (fused QKV and fused gate+up weights; a bias and a LayerNorm bias are tensors of their own):
    what a per-tensor optimizer loops over."""
    matrices = 4 if m.moe is None else 3 + 2 * (m.moe.experts + m.moe.shared_experts)
    biases = (4 if m.moe is None else 2 + 2 * (m.moe.experts + m.moe.shared_experts)) if m.bias else 0
    norms = norms_per_layer(m) * (2 if m.norm is Norm.LAYERNORM else 1)
    outside = (1 + (0 if m.tied_embeddings else 1) + (1 if m.position is Position.LEARNED else 0)
               + (2 if m.norm is Norm.LAYERNORM else 1))
    return matrices + biases + norms, outside
