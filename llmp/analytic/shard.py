"""Parameters held by one GPU: the model's weights split by tensor, expert and pipeline parallelism.

Same shapes as :mod:`llmp.analytic.params` (which counts the whole model), divided the way
Megatron divides them: column- and row-parallel matrices and their column biases by ``tp``;
norms, row-parallel biases, the MoE router and learned positions replicated on every TP rank;
K and V replicated when ``kv_heads < tp`` (each rank keeps one KV head); routed experts split
``experts / ep`` per rank and each expert's matrices by ``etp`` (``parallel.etp``, default tp);
multi-head latent attention's down projections and their norms replicated (Megatron-Core TE
``parallel_mode='duplicated'``), its up projections and output split by heads. The last
pipeline rank also holds the multi-token prediction modules.
The first pipeline rank holds the word embedding (vocab-parallel) and learned positions; the
last holds the final norm and the output head, which with tied embeddings and ``pp > 1`` is a
copy of the embedding kept in sync by an all-reduce (Megatron), and with ``pp = 1`` is the
embedding itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic import kinds
from llmp.analytic.kinds import LayerKind
from llmp.spec.algebra import vmax
from llmp.spec.model import ModelSpec, Norm, Position, Router
from llmp.spec.spec import ParallelSpec


def mlp_matrices(m: ModelSpec) -> int:
    """Weight matrices of one MLP: gate, up, down for a gated MLP (SwiGLU); in and out otherwise
    (GELU, ReLU, squared ReLU)."""
    return 3 if m.activation.gated else 2


def kv_heads_local(m: ModelSpec, p: ParallelSpec) -> Any:
    """KV heads on one TP rank: kv_heads / tp, or 1 when tp > kv_heads (replicated)."""
    return vmax(m.kv_heads, p.tp) / p.tp


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalParams:
    """Parameters on one GPU of a pipeline rank, split by how they are data-parallel replicated."""

    dense: Any
    """Replicated over dp x cp: attention, norms, dense MLPs, router, embeddings, head."""
    expert: Any
    """Routed-expert weights, replicated over dp x cp / ep."""

    @property
    def total(self) -> Any:
        return self.dense + self.expert


def _mlp(m: ModelSpec, tp: Any, width: Any) -> Any:
    mats = mlp_matrices(m)
    bias = ((mats - 1) * width / tp + m.hidden) if m.bias else 0
    return mats * m.hidden * width / tp + bias


def attention(m: ModelSpec, p: ParallelSpec, q_compressed: bool | None = None) -> Any:
    """Attention projections on one GPU (see :func:`llmp.analytic.params.attention_params`).
    ``q_compressed``: MLA's query has a compression (the structure's flag, which a symbolic
    ``q_lora_rank`` cannot tell); None: decided from the value."""
    a = m.mla
    if a is None:
        q = m.heads * m.head_dim / p.tp
        kv = kv_heads_local(m, p) * m.head_dim
        return m.hidden * (2 * q + 2 * kv) + ((q + 2 * kv + m.hidden) if m.bias else 0)
    heads = m.heads / p.tp
    qk = heads * a.qk_head_dim
    if q_compressed is None:
        q_compressed = not (isinstance(a.q_lora_rank, int) and a.q_lora_rank == 0)
    query = a.q_lora_rank * (m.hidden + 1 + qk) if q_compressed else m.hidden * qk
    kv = (m.hidden * (a.kv_lora_rank + a.qk_rope_head_dim)
          + a.kv_lora_rank * (1 + heads * (a.qk_nope_head_dim + a.v_head_dim)))
    return query + kv + heads * a.v_head_dim * m.hidden


def layer(m: ModelSpec, p: ParallelSpec, kind: LayerKind | None = None,
          q_compressed: bool | None = None) -> LocalParams:
    """One transformer layer of ``kind`` on one GPU (default: the model's only kind;
    ``q_compressed``: see :func:`attention`)."""
    if kind is None:
        kind = kinds.uniform(m)
        assert kind is not None, f"model {m.name} has layers of several kinds: give the kind"
    norms = norms_per_layer(m) * (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    attn = attention(m, p, q_compressed)
    if not kind.moe:
        return LocalParams(dense=attn + norms + _mlp(m, p.tp, m.ffn_hidden), expert=0)
    e = m.moe
    assert e is not None
    router = 0 if e.router is Router.BALANCED else m.hidden * e.experts + (e.experts if m.bias else 0)
    shared = e.shared_experts * _mlp(m, p.tp, e.expert_ffn_hidden)
    experts = e.experts / p.ep * _mlp(m, p.expert_tp, e.expert_ffn_hidden)
    return LocalParams(dense=attn + norms + router + shared, expert=experts)


def mtp(m: ModelSpec, p: ParallelSpec, kind: LayerKind | None, q_compressed: bool | None = None) -> LocalParams:
    """The multi-token prediction modules on one GPU of the last pipeline rank, each a layer of
    ``kind`` (None: the model has none), the projection 2 hidden -> hidden split by tp, and three
    norms."""
    if kind is None:
        return LocalParams(dense=0, expert=0)
    block = layer(m, p, kind, q_compressed)
    extra = 2 * m.hidden * m.hidden / p.tp + 3 * (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    return LocalParams(dense=m.mtp_layers * (block.dense + extra), expert=m.mtp_layers * block.expert)


def norms_per_layer(m: ModelSpec) -> int:
    """Norms in one layer: two, or one where a parallel residual shares it (GPT-J, PaLM)."""
    return 1 if (m.parallel_residual and m.shared_norm) else 2


def embedding(m: ModelSpec, p: ParallelSpec, vocab: Any = None) -> Any:
    """Word embedding (vocab-parallel) and learned positions: the first pipeline rank.
    ``vocab``: the embedding's rows (the padded vocab, :func:`llmp.stacks.padded_vocab`); default ``m.vocab``."""
    rows = m.vocab if vocab is None else vocab
    positions = m.seq_len * m.hidden if m.position is Position.LEARNED else 0
    return rows * m.hidden / p.tp + positions


def head(m: ModelSpec, p: ParallelSpec, pp: int, vocab: Any = None) -> Any:
    """Final norm and output head: the last pipeline rank (the head is shared when tied and pp = 1)."""
    rows = m.vocab if vocab is None else vocab
    norm = (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    own_head = (not m.tied_embeddings) or pp > 1
    return norm + (rows * m.hidden / p.tp if own_head else 0)


def rank(m: ModelSpec, p: ParallelSpec, *, pp: int, layers: Any, first: bool, last: bool,
         vocab: Any = None, kinds_present: tuple[LayerKind, ...] | None = None,
         mtp_kind: LayerKind | None = None, q_compressed: bool | None = None) -> LocalParams:
    """Everything one GPU of a pipeline rank holds: its transformer layers (``layers``: a count
    when all layers are alike, else a tuple of counts per kind of ``kinds_present``, the
    structure's kinds), plus the embedding on the first rank and the head and the multi-token
    prediction modules (layers of ``mtp_kind``) on the last (``first``/``last``); ``vocab`` is the
    padded vocabulary the stack allocates (default: the model's)."""
    present = kinds_present if kinds_present is not None else kinds.kinds(m)
    counts = layers if isinstance(layers, tuple) else (layers,)
    assert len(counts) == len(present), "one layer count per kind of layer"
    dense: Any = 0
    expert: Any = 0
    for kind, n in zip(present, counts):
        lay = layer(m, p, kind, q_compressed)
        dense, expert = dense + n * lay.dense, expert + n * lay.expert
    if first:
        dense = dense + embedding(m, p, vocab)
    if last:
        extra = mtp(m, p, mtp_kind, q_compressed)
        dense, expert = dense + head(m, p, pp, vocab) + extra.dense, expert + extra.expert
    return LocalParams(dense=dense, expert=expert)
