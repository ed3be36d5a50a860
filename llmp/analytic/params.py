"""Parameter counts of a model, in closed form (exact for the architectures llmp models).

``count`` is the model as its paper counts it (DeepSeek-V3's 671 B); multi-token prediction
modules are trained alongside but counted apart (:func:`mtp_params`; DeepSeek-V3 §4.2: "the
total parameters ... 671B ... MTP module ... 14B" including its own copies of the embedding and
head, which training shares with the main model).
"""

from __future__ import annotations

from typing import Any

from llmp.analytic import kinds
from llmp.analytic.kinds import LayerKind
from llmp.analytic.shard import mlp_matrices, norms_per_layer
from llmp.spec.model import ModelSpec, Norm, Position, Router
from llmp.spec.spec import FinetuneSpec


def _norm(m: ModelSpec) -> int:
    """Parameters per element of a norm: a weight, and a bias for LayerNorm."""
    return 2 if m.norm is Norm.LAYERNORM else 1


def attention_params(m: ModelSpec) -> Any:
    """Q, K, V and output projections (and their biases).

    GQA: Q and O are hidden x (heads x head_dim), K and V hidden x (kv_heads x head_dim). MLA
    (DeepSeek-V2 §2.1): the query down projection hidden x q_lora_rank and its RMSNorm, the up
    projection q_lora_rank x heads (nope + rope) (or hidden x heads (nope + rope) without a query
    compression), the key/value down projection hidden x (kv_lora_rank + rope) and its RMSNorm,
    the up projection kv_lora_rank x heads (nope + v), the output heads v x hidden.
    """
    h = m.hidden
    a = m.mla
    if a is None:
        q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
        bias = (q + 2 * kv + h) if m.bias else 0
        return h * (2 * q + 2 * kv) + bias
    qk = m.heads * a.qk_head_dim
    query = h * qk if a.q_lora_rank == 0 else a.q_lora_rank * (h + 1 + qk)
    kv = (h * (a.kv_lora_rank + a.qk_rope_head_dim)
          + a.kv_lora_rank * (1 + m.heads * (a.qk_nope_head_dim + a.v_head_dim)))
    return query + kv + m.heads * a.v_head_dim * h


def mlp_params(m: ModelSpec, width: Any) -> Any:
    """One MLP of inner ``width``: two matrices, or three for a gated MLP (SwiGLU), and biases."""
    mats = mlp_matrices(m)
    bias = (width * (mats - 1) + m.hidden) if m.bias else 0
    return mats * m.hidden * width + bias


def router_params(m: ModelSpec) -> Any:
    """The gate: hidden x experts (and a bias where the model has biases: gpt-oss); the balanced
    gate has no weights."""
    e = m.moe
    assert e is not None
    if e.router is Router.BALANCED:
        return 0
    return m.hidden * e.experts + (e.experts if m.bias else 0)


def layer_params(m: ModelSpec, kind: LayerKind | None = None) -> Any:
    """Parameters of one transformer layer of ``kind`` (default: the model's only kind):
    attention, its norms, and a dense MLP of ``ffn_hidden`` or the MoE (router, routed and shared
    experts of ``expert_ffn_hidden``)."""
    kind = kind if kind is not None else _only(m)
    norms = norms_per_layer(m) * _norm(m) * m.hidden
    if not kind.moe:
        return attention_params(m) + mlp_params(m, m.ffn_hidden) + norms
    e = m.moe
    assert e is not None
    experts = (e.experts + e.shared_experts) * mlp_params(m, e.expert_ffn_hidden)
    return attention_params(m) + experts + router_params(m) + norms


def _only(m: ModelSpec) -> LayerKind:
    kind = kinds.uniform(m)
    if kind is None:
        raise ValueError(f"model {m.name} has layers of several kinds: give the kind")
    return kind


def _layers_by_kind(m: ModelSpec) -> list[tuple[LayerKind, Any]]:
    one = kinds.uniform(m)
    if one is not None:
        return [(one, m.layers)]
    seq = kinds.sequence(m)
    return [(k, sum(x == k for x in seq)) for k in kinds.kinds(m)]


def embedding_params(m: ModelSpec, vocab: Any = None) -> Any:
    """Token embedding, learned positions, the final norm and (if untied) the output head.
    ``vocab``: the embedding's rows as trained (the padded vocab, :func:`llmp.stacks.padded_vocab`);
    default ``m.vocab``."""
    rows = m.vocab if vocab is None else vocab
    tokens = rows * m.hidden
    positions = m.seq_len * m.hidden if m.position is Position.LEARNED else 0
    final_norm = _norm(m) * m.hidden
    head = 0 if m.tied_embeddings else rows * m.hidden
    return tokens + positions + final_norm + head


def mtp_params(m: ModelSpec) -> Any:
    """The multi-token prediction modules (DeepSeek-V3 §2.2): per module the norms of the hidden
    state and of the shifted tokens' embedding, the projection 2 hidden -> hidden, one transformer
    layer (of the kind the next layer would have: MoE in DeepSeek-V3) and its final norm; the
    embedding and the output head are shared with the main model."""
    if isinstance(m.mtp_layers, int) and m.mtp_layers == 0:
        return 0
    block = layer_params(m, kinds.of_layer(m, int(m.layers)))
    return m.mtp_layers * (block + 2 * m.hidden * m.hidden + 3 * _norm(m) * m.hidden)


def count(m: ModelSpec, vocab: Any = None) -> Any:
    """Total parameters of the model as published (``vocab``: the padded vocab, see
    :func:`embedding_params`); multi-token prediction modules are :func:`mtp_params`."""
    return sum(n * layer_params(m, k) for k, n in _layers_by_kind(m)) + embedding_params(m, vocab)


def active(m: ModelSpec, vocab: Any = None) -> Any:
    """Parameters touched per token (MoE layers: top_k + shared experts instead of all experts)."""
    e = m.moe
    if e is None:
        return count(m, vocab)
    moe_layers = sum(n for k, n in _layers_by_kind(m) if k.moe)
    idle = (e.experts - e.top_k) * mlp_params(m, e.expert_ffn_hidden)
    return count(m, vocab) - moe_layers * idle


def tensors(m: ModelSpec, kind: LayerKind | None = None, q_compressed: bool | None = None) -> tuple[Any, Any]:
    """Parameter tensors per layer of ``kind`` and outside the layers, as Megatron-style modules
    hold them (fused QKV and fused gate+up weights; a bias and a LayerNorm bias are tensors of
    their own): what a per-tensor optimizer loops over. ``q_compressed``: MLA's query has a
    compression (the structure's flag; None: from the value)."""
    kind = kind if kind is not None else _only(m)
    if m.mla is not None and q_compressed is None:
        q_compressed = not (isinstance(m.mla.q_lora_rank, int) and m.mla.q_lora_rank == 0)
    attention = 2 if m.mla is None else (7 if q_compressed else 5)  # MLA: projections, norms, output
    mlps = 1 if not kind.moe else (m.moe.experts + m.moe.shared_experts)  # type: ignore[union-attr]
    router = 1 if kind.moe and m.moe.router is not Router.BALANCED else 0  # type: ignore[union-attr]
    matrices = attention + 2 * mlps + router
    biases = (2 + 2 * mlps) if m.bias else 0
    norms = norms_per_layer(m) * _norm(m)
    outside = (1 + (0 if m.tied_embeddings else 1) + (1 if m.position is Position.LEARNED else 0) + _norm(m))
    return matrices + biases + norms, outside


def _adapter(ft: FinetuneSpec, field: str, k: Any, n: Any) -> Any:
    """A LoRA adapter beside a ``k x n`` weight: A (k x rank) and B (rank x n), if ``field`` adapts it."""
    return ft.lora_rank * (k + n) if getattr(ft, field) else 0


def lora_params(m: ModelSpec, ft: FinetuneSpec, kind: LayerKind | None = None) -> Any:
    """LoRA adapter parameters of one transformer layer of ``kind`` (default: the model's only kind),
    or 0 when ``ft`` trains every weight: ``rank (in + out)`` beside each adapted weight (fused QKV;
    MLA's five projections; the gate and up matrices fused as fc1; each routed and shared expert).
    The graph's adapters (:func:`llmp.analytic.layer.adapter_weights`) hold these, split by tp."""
    if not ft.lora:
        return 0
    kind = kind if kind is not None else _only(m)
    h, a = m.hidden, m.mla
    if a is None:
        qkv = _adapter(ft, "lora_qkv", h, (m.heads + 2 * m.kv_heads) * m.head_dim)
        out = m.heads * m.head_dim
    else:
        qk = m.heads * a.qk_head_dim
        query = (_adapter(ft, "lora_qkv", h, qk) if a.q_lora_rank == 0
                 else _adapter(ft, "lora_qkv", h, a.q_lora_rank) + _adapter(ft, "lora_qkv", a.q_lora_rank, qk))
        qkv = (query + _adapter(ft, "lora_qkv", h, a.kv_lora_rank + a.qk_rope_head_dim)
               + _adapter(ft, "lora_qkv", a.kv_lora_rank, m.heads * (a.qk_nope_head_dim + a.v_head_dim)))
        out = m.heads * a.v_head_dim
    up = mlp_matrices(m) - 1  # fc1 computes gate and up together for a gated MLP

    def mlp(width: Any) -> Any:
        return _adapter(ft, "lora_fc1", h, up * width) + _adapter(ft, "lora_fc2", width, h)

    if not kind.moe:
        ffn = mlp(m.ffn_hidden)
    else:
        e = m.moe
        assert e is not None
        shared = isinstance(e.shared_experts, int) and e.shared_experts == 0
        ffn = e.experts * mlp(e.expert_ffn_hidden) + (0 if shared else mlp(e.shared_experts * e.expert_ffn_hidden))
    return qkv + _adapter(ft, "lora_proj", out, h) + ffn


def trainable_params(m: ModelSpec, ft: FinetuneSpec | None, vocab: Any = None) -> Any:
    """Parameters a step trains: the whole model (:func:`count`), or with LoRA its adapters alone
    (:func:`lora_params` over the layers; the multi-token prediction modules get none)."""
    if ft is None or not ft.lora:
        return count(m, vocab)
    return sum(n * lora_params(m, ft, k) for k, n in _layers_by_kind(m))
