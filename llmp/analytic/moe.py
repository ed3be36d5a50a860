"""A MoE MLP as Megatron-Core runs it (``MoELayer``: router, token dispatcher, experts, shared
experts; NVIDIA/Megatron-LM@0014f13:megatron/core/transformer/moe/token_dispatcher.py, experts.py
``TEGroupedMLP``).

The layer takes the rank's own tokens: its sequence shard ``b s / (cp tp)`` (MoE with tensor
parallelism needs sequence parallelism) or ``b s / cp`` without TP. The router scores them; each
token goes to ``top_k`` experts, ``experts / ep`` of which live on each expert-parallel rank; an
expert's matrices are split over ``etp`` ranks of the TP group. The busiest rank's experts take
``imbalance`` times a balanced share of the routed rows (capped at the capacity factor when tokens
beyond it are dropped), and that rank sets the pace of the grouped GEMMs and of the exchanges.

* ``alltoall`` (``MoEAlltoAllTokenDispatcher``): permute (gather the tokens into one row per
  (token, expert)), all-to-all over ep of the rows and of their FP32 probabilities, all-gather
  of both over etp, sort the received chunks by local expert (with more than one local
  expert); experts; then sort back, reduce-scatter over etp, all-to-all, unpermute (scale each
  row by its probability and sum a token's rows).
* ``allgather`` (``MoEAllGatherTokenDispatcher``): all-gather the tokens and the FP32
  probabilities over etp x ep, permute the rows of the local experts; experts; unpermute,
  reduce-scatter over etp x ep.
* ``deepep`` (``MoEFlexTokenDispatcher`` with DeepEP): one fused dispatch kernel over the etp x ep
  group (Megatron's ``tp_ep_group``: the routing map is replicated over the etp ranks, so a token
  goes to each of them) sends each token once per destination expert-parallel rank
  (:func:`~llmp.analytic.routing.dispatch_copies`), the received tokens are permuted to the local
  experts; combine is the mirror.

The local experts run as one grouped GEMM per matrix (``TEGroupedMLP``; a batch of
``experts / ep`` GEMMs of equal rows: the balanced share). Shared experts (``SharedExpertMLP``)
are a dense MLP of ``shared_experts x expert_ffn_hidden`` on every token, tensor-parallel like
any MLP.
"""

from __future__ import annotations

from typing import Any

from llmp.analytic.block import Block, Context, tp_in, tp_out
from llmp.analytic.kernels import CollectiveKind, Elementwise, Family
from llmp.analytic.layout import Axis
from llmp.analytic.mlp import mlp
from llmp.analytic.op import Part
from llmp.spec.model import Router
from llmp.spec.spec import Dispatcher


def _router(blk: Block, rows: Any) -> None:
    """The gate on the rank's ``rows`` tokens (Megatron-Core ``TopKRouter``, NVIDIA/Megatron-LM@005742f:
    megatron/core/transformer/moe/router.py; ``topk_softmax_with_capacity`` in moe_utils.py).

    Gating GEMM (hidden -> experts, weight replicated over TP); the scores: softmax over the
    top-k logits (``topk`` first, then ``softmax`` of the k values: Megatron's default without
    ``--moe-router-pre-softmax``, Mixtral), or a sigmoid of every logit (DeepSeek-V3), plus the
    expert bias when the model balances with one; top-k over the experts with the scatter of the
    chosen scores into the [tokens, experts] probabilities (read and write the scores: one copy).
    The load-balancing loss recomputes the scores (``compute_routing_scores_for_aux_loss``: a
    softmax over all experts and a top-k) and reduces them per expert (a read). The balanced
    gate has none of it: its indices are an ``arange``.
    """
    ctx = blk.ctx
    m = ctx.spec.model
    e = m.moe
    assert e is not None
    if e.router is Router.BALANCED:
        return
    scores = rows * e.experts
    blk.gemm("moe.router", rows, e.experts, m.hidden, dtype=ctx.wide)
    if e.router is Router.SIGMOID:
        # A one-input elementwise function: priced as the GELU kernel (same traffic, one launch).
        blk.kernel("moe.router.sigmoid", Family.ELEMENTWISE, variant=Elementwise.GELU, elements=scores)
    if e.expert_bias:
        blk.kernel("moe.router.expert_bias", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=scores)
    blk.kernel("moe.router.topk", Family.COPY, elements=scores)
    if e.router is Router.SOFTMAX:
        blk.kernel("moe.router.softmax", Family.SOFTMAX, rows=rows, cols=e.top_k)
    if e.aux_loss:
        blk.kernel("moe.router.aux_scores", Family.SOFTMAX, rows=rows, cols=e.experts)
        blk.kernel("moe.router.aux_reduce", Family.COPY, elements=scores / 2)


def _a2a(blk: Block, name: str, nbytes: Any, group: str = "ep") -> None:
    """An all-to-all over the expert-parallel group (``etp_ep`` for DeepEP), forward and its mirror in
    the backward (blocking: Megatron waits for the tokens before the experts run)."""
    blk.comm(f"moe.{name}", CollectiveKind.ALL_TO_ALL, nbytes, group, Axis.EP)
    blk.bwd_comm(blk.collective(f"moe.{name}_grad", CollectiveKind.ALL_TO_ALL, nbytes, group, Axis.EP,
                                part=Part.BACKWARD))


def _etp(blk: Block, name: str, kind: CollectiveKind, nbytes: Any, group: str = "etp") -> None:
    """A gather (or reduce-scatter) over the expert tensor-parallel group around the experts; its
    backward is the other one of the pair."""
    back = CollectiveKind.REDUCE_SCATTER if kind is CollectiveKind.ALL_GATHER else CollectiveKind.ALL_GATHER
    blk.comm(f"moe.{name}", kind, nbytes, group, Axis.EP)
    blk.bwd_comm(blk.collective(f"moe.{name}_grad", back, nbytes, group, Axis.EP, part=Part.BACKWARD))


def moe(blk: Block) -> None:
    """A MoE MLP's ops (module docstring): the router on the rank's own tokens, the dispatch to the
    experts, the local experts' grouped GEMMs, the combine back, then the shared experts."""
    ctx = blk.ctx
    p = ctx.spec.parallel
    e = ctx.spec.model.moe
    assert e is not None
    rows = ctx.sp_tokens
    local_experts = e.experts / p.ep
    routed = rows * e.top_k * e.load * p.expert_tp  # rows the busiest rank's local experts compute
    _router(blk, rows)
    _dispatch(blk, rows, routed)
    mlp(blk, "moe.experts", e.expert_ffn_hidden, rows=routed / local_experts, batch=local_experts, tp=p.expert_tp)
    _combine(blk, rows, routed)
    if ctx.st.shared_experts:
        mlp(blk, "moe.shared", e.shared_experts * e.expert_ffn_hidden, rows=ctx.tokens,
            bwd_comm=tp_in(blk, "moe.shared", "moe.shared.fc1"))
        tp_out(blk, "moe.shared", "moe.shared.fc2")
        blk.kernel("moe.shared_add", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=rows * ctx.spec.model.hidden)


def _gathered(ctx: Context, rows: Any) -> Any:
    """Bytes of every token of the etp x ep group, which the ``allgather`` dispatcher gathers."""
    p = ctx.spec.parallel
    return rows * p.expert_tp * p.ep * ctx.spec.model.hidden * ctx.e


def _spread(ctx: Context) -> bool:
    """The experts are spread over ranks (expert or expert-tensor parallel)."""
    return ctx.st.active("ep") or ctx.st.active("etp")


def _dispatch(blk: Block, rows: Any, routed: Any) -> None:
    """The dispatcher's way from the rank's ``rows`` tokens to the ``routed`` rows of its local
    experts (module docstring)."""
    ctx = blk.ctx
    m, p = ctx.spec.model, ctx.spec.parallel
    e = m.moe
    assert e is not None
    h, etp = m.hidden, p.expert_tp
    if p.dispatcher is Dispatcher.ALLGATHER:
        if ctx.st.active("etp_ep"):
            _etp(blk, "dispatch_all_gather", CollectiveKind.ALL_GATHER, _gathered(ctx, rows), "etp_ep")
            # the FP32 probabilities of every token for every expert travel along
            _etp(blk, "dispatch_probs_all_gather", CollectiveKind.ALL_GATHER, rows * etp * p.ep * e.experts * 4,
                 "etp_ep")
        blk.kernel("moe.permute", Family.COPY, elements=routed * h)
    elif p.dispatcher is Dispatcher.DEEPEP:
        if ctx.st.active("etp_ep"):  # the probabilities travel in the same kernel
            _a2a(blk, "ep_dispatch", rows * ctx.st.dispatch_copies * etp * e.load * h * ctx.e, "etp_ep")
        blk.kernel("moe.permute", Family.COPY, elements=routed * h)
    else:
        blk.kernel("moe.permute", Family.COPY, elements=rows * e.top_k * h)
        if ctx.st.active("ep"):
            _a2a(blk, "ep_dispatch", rows * ctx.st.dispatch_copies * e.load * h * ctx.e)
            _a2a(blk, "ep_dispatch_probs", rows * e.top_k * e.load * 4)
        if ctx.st.active("etp"):
            _etp(blk, "etp_all_gather", CollectiveKind.ALL_GATHER, routed * h * ctx.e)
            _etp(blk, "etp_probs_all_gather", CollectiveKind.ALL_GATHER, routed * 4)
        if _spread(ctx) and ctx.st.local_experts > 1:
            blk.kernel("moe.sort_chunks", Family.COPY, elements=routed * h)


def _combine(blk: Block, rows: Any, routed: Any) -> None:
    """The dispatcher's way back from the local experts' ``routed`` rows to the rank's ``rows``
    tokens: :func:`_dispatch` mirrored."""
    ctx = blk.ctx
    m, p = ctx.spec.model, ctx.spec.parallel
    e = m.moe
    assert e is not None
    h, etp = m.hidden, p.expert_tp
    if p.dispatcher is Dispatcher.ALLGATHER:
        blk.kernel("moe.unpermute", Family.COPY, elements=routed * h)
        if ctx.st.active("etp_ep"):
            _etp(blk, "combine_reduce_scatter", CollectiveKind.REDUCE_SCATTER, _gathered(ctx, rows), "etp_ep")
    elif p.dispatcher is Dispatcher.DEEPEP:
        blk.kernel("moe.unpermute", Family.COPY, elements=routed * h)
        if ctx.st.active("etp_ep"):
            _a2a(blk, "ep_combine", rows * ctx.st.dispatch_copies * etp * e.load * h * ctx.e, "etp_ep")
    else:
        if _spread(ctx) and ctx.st.local_experts > 1:
            blk.kernel("moe.unsort_chunks", Family.COPY, elements=routed * h)
        if ctx.st.active("etp"):
            _etp(blk, "etp_reduce_scatter", CollectiveKind.REDUCE_SCATTER, routed * h * ctx.e)
        if ctx.st.active("ep"):
            _a2a(blk, "ep_combine", rows * ctx.st.dispatch_copies * e.load * h * ctx.e)
        # Read a token's top_k rows, write the token: (top_k + 1) rows moved, half a copy each.
        blk.kernel("moe.unpermute", Family.COPY, elements=(e.top_k + 1) * rows * h / 2)
