"""Parameter counts of a model, in closed form (exact for the architectures llmp models)."""

from __future__ import annotations

from typing import Any

from llmp.dsl.spec import Activation, ModelSpec, Norm, Position


def layer_params(m: ModelSpec) -> Any:
    """Parameters of one transformer layer (attention + MLP + two norms).

    Attention: Q and O are hidden x (heads*head_dim); K and V are hidden x (kv_heads*head_dim).
    MLP: two matrices hidden x ffn (GELU/ReLU) or three (SwiGLU: gate, up, down), or per MoE:
    router hidden x experts plus (experts + shared) expert MLPs of width expert_ffn_hidden.
    """
    q_width = m.heads * m.head_dim
    kv_width = m.kv_heads * m.head_dim
    attn = m.hidden * (2 * q_width + 2 * kv_width)
    mats = 3 if m.activation is Activation.SWIGLU else 2
    if m.moe is None:
        mlp = mats * m.hidden * m.ffn_hidden
        mlp_bias = (m.ffn_hidden * (mats - 1) + m.hidden) if m.bias else 0
    else:
        experts = m.moe.experts + m.moe.shared_experts
        mlp = experts * mats * m.hidden * m.moe.expert_ffn_hidden + m.hidden * m.moe.experts
        mlp_bias = experts * (m.moe.expert_ffn_hidden * (mats - 1) + m.hidden) if m.bias else 0
    attn_bias = (2 * q_width + 2 * kv_width) if m.bias else 0
    norms = 2 * (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    return attn + attn_bias + mlp + mlp_bias + norms


def embedding_params(m: ModelSpec) -> Any:
    """Token embedding, learned positions, the final norm and (if untied) the output head."""
    tokens = m.vocab * m.hidden
    positions = m.seq_len * m.hidden if m.position is Position.LEARNED else 0
    final_norm = (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    head = 0 if m.tied_embeddings else m.vocab * m.hidden
    return tokens + positions + final_norm + head


def count(m: ModelSpec) -> Any:
    """Total parameters."""
    return m.layers * layer_params(m) + embedding_params(m)


def active(m: ModelSpec) -> Any:
    """Parameters touched per token (MoE: top_k + shared experts instead of all experts)."""
    if m.moe is None:
        return count(m)
    mats = 3 if m.activation is Activation.SWIGLU else 2
    idle = (m.moe.experts - m.moe.top_k) * mats * m.hidden * m.moe.expert_ffn_hidden
    return count(m) - m.layers * idle
