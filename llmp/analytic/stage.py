"""Operators outside the transformer layers: embedding, head, pipeline sends and per-step work.

* Embedding (first chunk): vocab-parallel lookup (each TP rank looks up its vocab shard, then an
  all-reduce, or a reduce-scatter with SP, combines them; Shoeybi et al. 2019), learned
  positions, dropout.
* Head (last chunk): final norm, logits GEMM over the vocab shard (computed even with tied
  embeddings), vocab-parallel cross-entropy with its three small all-reduces of per-token
  scalars (max, sum of exps, target logit; Megatron ``vocab_parallel_cross_entropy``).
* Pipeline boundary: the activation ``[micro_batch, seq_len / cp, hidden]`` (``/ tp`` with SP)
  sent forward, and its gradient sent back, once per microbatch per boundary.
* Per rank and step: gradient reduction over the data-parallel replicas, bucketed; the tied
  embedding's all-reduce between first and last stage (pp > 1); the optimizer over the local
  shard; with ZeRO-1/2 the parameter all-gather after the update. A rank's parameters are those
  of its own layers (an uneven split gives ranks different shares), plus the embedding on the
  first rank and the head on the last.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from llmp.analytic import shard
from llmp.analytic.algebra import vmax
from llmp.analytic.graph import Op, Overlap, Part, Phase, RankKind, Scope, rank_classes
from llmp.analytic.kernels import Collective, CollectiveKind, Elementwise, Family, Kernel, Tier
from llmp.analytic.layer import Block, Context, grad_bytes, norm, tp_in, zero3
from llmp.analytic.layout import Axis
from llmp.dsl.spec import Optimizer, Position, ZeroStage


def embedding_ops(ctx: Context) -> list[Op]:
    """The first chunk's embedding, per microbatch (scope ``first``)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    blk = Block(ctx, Scope.FIRST, "embedding")
    blk.kernel("lookup", Family.EMBEDDING, bwd_phase=Phase.BWD_W, tokens=ctx.tokens, hidden=m.hidden,
               vocab=m.vocab / p.tp)
    if m.position is Position.LEARNED:
        blk.kernel("positions", Family.EMBEDDING, bwd_phase=Phase.BWD_W, tokens=ctx.tokens, hidden=m.hidden,
                   vocab=m.seq_len)
        blk.kernel("add_positions", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.tokens * m.hidden)
    if ctx.st.active("tp"):
        kind = CollectiveKind.REDUCE_SCATTER if p.sequence_parallel else CollectiveKind.ALL_REDUCE
        blk.comm("tp_combine", kind, ctx.tokens * m.hidden * ctx.e, "tp", Axis.TP)
    if ctx.st.dropout:
        blk.kernel("dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=ctx.sp_tokens * m.hidden)
    gather = zero3(blk, shard.embedding(m, p), "embedding")
    ops = blk.ops()
    return [*ops[:len(blk.fwd)], *gather[:1], *ops[len(blk.fwd):], *gather[1:]]


def head_ops(ctx: Context) -> list[Op]:
    """The last chunk's final norm, logits and loss, per microbatch (scope ``last``)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    blk = Block(ctx, Scope.LAST, "head")
    norm(blk, "norm")
    blk.gemm("logits", ctx.tokens, m.vocab / p.tp, m.hidden, bwd_comm=tp_in(blk, "logits", "logits"))
    blk.kernel("cross_entropy", Family.CROSS_ENTROPY, tokens=ctx.tokens, vocab=m.vocab / p.tp)
    if ctx.st.active("tp"):
        blk.comm("ce_all_reduce", CollectiveKind.ALL_REDUCE, 4 * ctx.tokens, "tp", Axis.TP, count=3)
    gather = zero3(blk, shard.head(m, p, ctx.st.pp), "head")
    ops = blk.ops()
    return [*ops[:len(blk.fwd)], *gather[:1], *ops[len(blk.fwd):], *gather[1:]]


def boundary_ops(ctx: Context) -> list[Op]:
    """Pipeline send/recv between consecutive chunks, per microbatch (scope ``boundary``)."""
    if ctx.st.pp == 1:
        return []
    message = ctx.sp_tokens * ctx.spec.model.hidden * ctx.e
    work = ctx.collective(CollectiveKind.SEND_RECV, message, "pp")
    return [Op(name=f"pipeline.{name}", work=work, phase=Phase.COMM, part=part, scope=Scope.BOUNDARY, axis=Axis.PP)
            for name, part in (("send_activations", Part.FORWARD), ("send_grads", Part.BACKWARD))]


def _sharded(ctx: Context) -> bool:
    return ctx.spec.parallel.zero is not ZeroStage.NONE


def _grad_sync(ctx: Context, kind: RankKind, ranks: tuple[int, ...], params: Any, group: str,
               label: str) -> list[Op]:
    """Gradient reduction of ``params`` over ``group``, in buckets of ``dp_bucket_size`` bytes.

    The collective is priced per bucket (``count`` buckets) so the overlap rule can expose the
    last bucket and the part of the rest that outlasts the backward (PyTorch DDP, Megatron
    overlap_grad_reduce). ZeRO-3/FSDP reduce per layer instead, so nothing happens here.
    """
    p = ctx.spec.parallel
    if not ctx.st.active(group) or p.zero in (ZeroStage.Z3, ZeroStage.FSDP):
        return []
    total = params * grad_bytes(ctx)
    buckets = vmax(1, total / p.dp_bucket_size)
    kind_ = CollectiveKind.REDUCE_SCATTER if _sharded(ctx) else CollectiveKind.ALL_REDUCE
    return [Op(name=f"step.{label}_grad_{kind_.value}", work=ctx.collective(kind_, total / buckets, group),
               phase=Phase.COMM, part=Part.GRAD_SYNC, scope=Scope.RANK, rank_kind=kind, ranks=ranks, count=buckets,
               axis=Axis.DP, overlap=Overlap.BUCKETED if p.dp_overlap else Overlap.NONE)]


def _tied_sync(ctx: Context, kind: RankKind, ranks: tuple[int, ...]) -> list[Op]:
    """With tied embeddings and pp > 1, first and last stage all-reduce the embedding gradient."""
    m, p = ctx.spec.model, ctx.spec.parallel
    if not (m.tied_embeddings and ctx.st.pp > 1 and kind in (RankKind.FIRST, RankKind.LAST)):
        return []
    tier = ctx.groups["pp"].tier
    work = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=m.vocab * m.hidden / p.tp * grad_bytes(ctx),
                      group=2, ranks_per_node=2 if tier is Tier.INTRA else 1, tier=tier)
    return [Op(name="step.tied_embedding_all_reduce", work=work, phase=Phase.COMM, part=Part.GRAD_SYNC,
               scope=Scope.RANK, rank_kind=kind, ranks=ranks, axis=Axis.PP)]


def _update(ctx: Context, kind: RankKind, ranks: tuple[int, ...], params: shard.LocalParams) -> list[Op]:
    """The optimizer over this GPU's shard; ZeRO-1/2 then all-gather the updated parameters."""
    p, t = ctx.spec.parallel, ctx.spec.train
    dense_shard = ctx.groups["dp"].size if _sharded(ctx) else 1
    expert_shard = ctx.groups["expert_dp"].size if _sharded(ctx) else 1
    local = params.dense / dense_shard + params.expert / expert_shard
    variant = "sgd" if t.optimizer is Optimizer.SGD else "adam"
    ops = [Op(name="step.optimizer", work=Kernel.make(Family.OPTIMIZER, ctx.act, variant=variant, params=local),
              phase=Phase.OPTIM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks)]
    if p.zero in (ZeroStage.Z1, ZeroStage.Z2):
        for label, n, group in (("dense", params.dense, "dp"), ("expert", params.expert, "expert_dp")):
            if ctx.st.active(group) and (label == "dense" or ctx.spec.model.moe is not None):
                ops.append(Op(name=f"step.{label}_param_all_gather",
                              work=ctx.collective(CollectiveKind.ALL_GATHER, n * ctx.e, group),
                              phase=Phase.COMM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks,
                              axis=Axis.DP))
    return ops


def rank_ops(ctx: Context, chunk_layers: tuple[Any, ...]) -> list[Op]:
    """Once-per-step work of every class of pipeline rank (scope ``rank``); ``chunk_layers`` are
    the layers of each chunk (a rank holds chunks ``r, r + pp, ...``)."""
    pp = ctx.st.pp
    classes = rank_classes(ctx.st)
    split_kinds = {k for k in RankKind if sum(kind is k for kind, _ in classes) > 1}
    ops: list[Op] = []
    for kind, ranks in classes:
        first = kind in (RankKind.ONLY, RankKind.FIRST)
        last = kind in (RankKind.ONLY, RankKind.LAST)
        params = shard.rank(ctx.spec.model, ctx.spec.parallel, pp=pp, layers=sum(chunk_layers[ranks[0]::pp]),
                            first=first, last=last)
        mine = [*_tied_sync(ctx, kind, ranks), *_grad_sync(ctx, kind, ranks, params.dense, "dp", "dense")]
        if ctx.spec.model.moe is not None:
            mine += _grad_sync(ctx, kind, ranks, params.expert, "expert_dp", "expert")
        mine += _update(ctx, kind, ranks, params)
        if kind in split_kinds:  # middle ranks holding different layers: name each class's ops
            suffix = "@ranks " + ",".join(map(str, ranks))
            mine = [dataclasses.replace(op, name=op.name + suffix) for op in mine]
        ops += mine
    return ops
