"""Parameters held by one GPU: the model's weights split by tensor, expert and pipeline parallelism.

Same shapes as :mod:`llmp.analytic.params` (which counts the whole model), divided the way
Megatron divides them: column- and row-parallel matrices and their column biases by ``tp``;
norms, row-parallel biases, the MoE router and learned positions replicated on every TP rank;
K and V replicated when ``kv_heads < tp`` (each rank keeps one KV head); routed experts split
``experts / ep`` per rank and each expert's matrices by ``tp`` (expert tensor parallel = tp).
The first pipeline rank holds the word embedding (vocab-parallel) and learned positions; the
last holds the final norm and the output head, which with tied embeddings and ``pp > 1`` is a
copy of the embedding kept in sync by an all-reduce (Megatron), and with ``pp = 1`` is the
embedding itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic.algebra import vmax
from llmp.dsl.spec import ModelSpec, Norm, ParallelSpec, Position


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


def layer(m: ModelSpec, p: ParallelSpec) -> LocalParams:
    """One transformer layer on one GPU."""
    q = m.heads * m.head_dim / p.tp
    kv = kv_heads_local(m, p) * m.head_dim
    attn = m.hidden * (2 * q + 2 * kv) + ((q + 2 * kv + m.hidden) if m.bias else 0)
    norms = norms_per_layer(m) * (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    if m.moe is None:
        return LocalParams(dense=attn + norms + _mlp(m, p.tp, m.ffn_hidden), expert=0)
    e = m.moe
    router = m.hidden * e.experts
    shared = e.shared_experts * _mlp(m, p.tp, e.expert_ffn_hidden)
    experts = e.experts / p.ep * _mlp(m, p.tp, e.expert_ffn_hidden)
    return LocalParams(dense=attn + norms + router + shared, expert=experts)


def norms_per_layer(m: ModelSpec) -> int:
    """Norms in one layer: two, or one where a parallel residual shares it (GPT-J, PaLM)."""
    return 1 if (m.parallel_residual and m.shared_norm) else 2


def embedding(m: ModelSpec, p: ParallelSpec, vocab: Any = None) -> Any:
    """Word embedding (vocab-parallel) and learned positions: the first pipeline rank.
    ``vocab``: the embedding's rows (the padded vocab, :attr:`Spec.padded_vocab`); default ``m.vocab``."""
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
         vocab: Any = None) -> LocalParams:
    """Everything one GPU of a pipeline rank holds: its ``layers`` transformer layers, plus the
    embedding on the first rank and the head on the last (``first``/``last``); ``vocab`` is the
    padded vocabulary the stack allocates (default: the model's)."""
    lay = layer(m, p)
    dense = (layers * lay.dense + (embedding(m, p, vocab) if first else 0)
             + (head(m, p, pp, vocab) if last else 0))
    return LocalParams(dense=dense, expert=layers * lay.expert)
