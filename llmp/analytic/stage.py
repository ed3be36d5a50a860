"""Operators outside the transformer layers: embedding, head, pipeline sends and per-step work.

* Embedding (first chunk): vocab-parallel lookup (each TP rank looks up its vocab shard, then an
  all-reduce, or a reduce-scatter with SP, combines them; Shoeybi et al. 2019), learned
  positions, dropout.
* Head (last chunk): final norm, logits GEMM over the vocab shard (computed even with tied
  embeddings), vocab-parallel cross-entropy with its three small all-reduces of per-token
  scalars (max, sum of exps, target logit; Megatron ``vocab_parallel_cross_entropy``); then each
  multi-token prediction module (:func:`mtp_ops`).
* Pipeline boundary: the activation ``[micro_batch, seq_len / cp, hidden]`` (``/ tp`` with SP)
  sent forward, and its gradient sent back, once per microbatch per boundary.
* Per rank and step: gradient reduction over the data-parallel replicas, bucketed; the tied
  embedding's all-reduce between first and last stage (pp > 1); the optimizer over the local
  shard; with ZeRO-1/2 the parameter all-gather after the update (FP8 parameters gathered as
  FP8). A rank's parameters are those
  of its own layers (an uneven split gives ranks different shares), plus the embedding on the
  first rank and the head on the last.
* The fixed work the training stack does every step (its profile, :mod:`llmp.stacks`):
  clearing the gradients, fp16 loss scaling (the inf/nan check, its all-reduce and the
  unscale), gradient clipping (the global norm: a pass over the gradients and an all-reduce; the
  scale pass) and the loss all-reduce for reporting. Dynamic loss scaling's skipped steps are
  ignored: every step is taken to update.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from llmp.analytic import offload, shard
from llmp.analytic.block import Block, Context, norm, tp_in
from llmp.analytic.grads import grad_accumulate, grad_bytes, zero3
from llmp.analytic.kernels import (
    Collective,
    CollectiveKind,
    Elementwise,
    Family,
    Fusion,
    Kernel,
    Pass,
    Tier,
)
from llmp.analytic.layer import adapter_tensors, lowp_weights, trainable, transformer_layer
from llmp.analytic.layout import Axis
from llmp.analytic.op import Op, Overlap, Part, Phase, RankKind, Scope, rank_classes
from llmp.analytic.params import tensors
from llmp.analytic.shape import Structure
from llmp.hardware.spec import Dtype
from llmp.spec.algebra import vmax
from llmp.spec.model import Position
from llmp.spec.spec import Optimizer, OptimizerKernel, Precision, ZeroStage
from llmp.stacks import ClipScale, LossSync, Unscale, ZeroGrad


def embedding_ops(ctx: Context) -> list[Op]:
    """The first chunk's embedding, per microbatch (scope ``first``)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    blk = Block(ctx, Scope.FIRST, "embedding")
    trained = not ctx.tuning.frozen  # a frozen embedding (LoRA) has no backward at all
    blk.kernel("lookup", Family.EMBEDDING, bwd_phase=Phase.BWD_W, backward=trained, tokens=ctx.tokens,
               hidden=m.hidden, vocab=ctx.vocab / p.tp)
    if m.position is Position.LEARNED:
        blk.kernel("positions", Family.EMBEDDING, bwd_phase=Phase.BWD_W, backward=trained, tokens=ctx.tokens,
                   hidden=m.hidden, vocab=m.seq_len)
        blk.kernel("add_positions", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.tokens * m.hidden)
    if ctx.st.active("tp"):
        kind = CollectiveKind.REDUCE_SCATTER if p.sequence_parallel else CollectiveKind.ALL_REDUCE
        blk.comm("tp_combine", kind, ctx.tokens * m.hidden * ctx.e, "tp", Axis.TP)
    if ctx.st.dropout:
        blk.kernel("dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=ctx.sp_tokens * m.hidden)
    grads = shard.embedding(m, p, ctx.vocab) if trained else 0
    grad_accumulate(blk, grads)
    gathers, scatters = zero3(blk, shard.embedding(m, p, ctx.vocab), "embedding", grads=grads)
    ops = blk.ops()
    return [*ops[:len(blk.fwd)], *gathers, *ops[len(blk.fwd):], *scatters]


def head_ops(ctx: Context) -> list[Op]:
    """The last chunk's final norm, logits and loss, per microbatch (scope ``last``)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    blk = Block(ctx, Scope.LAST, "head")
    norm(blk, "norm")
    blk.gemm("logits", ctx.tokens, ctx.vocab / p.tp, m.hidden, dtype=ctx.wide,
             bwd_comm=tp_in(blk, "logits", "logits"))
    variant = Fusion.FUSED if ctx.spec.train.fused_cross_entropy else Fusion.UNFUSED
    blk.kernel("cross_entropy", Family.CROSS_ENTROPY, variant=variant, tokens=ctx.tokens, vocab=ctx.vocab / p.tp)
    if ctx.st.active("tp"):
        blk.comm("ce_all_reduce", CollectiveKind.ALL_REDUCE, 4 * ctx.tokens, "tp", Axis.TP, count=3)
    if ctx.profile.loss_sync.value is LossSync.PER_MICROBATCH and ctx.st.active("dp"):
        # Megatron-LM's loss_func averages the loss over dp after every microbatch (blocking).
        blk.comm("loss_all_reduce", CollectiveKind.ALL_REDUCE, 4, "dp", Axis.DP)
    grads = 0 if ctx.tuning.frozen else shard.head(m, p, ctx.st.pp, ctx.vocab)  # LoRA: a frozen head
    grad_accumulate(blk, grads)
    gathers, scatters = zero3(blk, shard.head(m, p, ctx.st.pp, ctx.vocab), "head", grads=grads)
    ops = blk.ops()
    return [*ops[:len(blk.fwd)], *gathers, *ops[len(blk.fwd):], *scatters, *mtp_ops(ctx)]


def mtp_ops(ctx: Context) -> list[Op]:
    """Multi-token prediction on the last chunk, per microbatch (DeepSeek-V3 §2.2, Fig. 3;
    Megatron-Core ``MultiTokenPredictionLayer``, megatron/core/transformer/multi_token_prediction.py).

    Module ``k`` predicts the token ``k + 1`` ahead: it looks up the embedding of the tokens
    shifted by ``k`` (the shared table), normalises it and the previous depth's hidden state
    (``enorm``, ``hnorm``), projects their concatenation 2 hidden -> hidden (``eh_proj``,
    column-parallel), runs one transformer layer, its final norm and the shared output head with
    the cross-entropy of its own loss. Megatron places the modules on the last pipeline stage.
    """
    m, p = ctx.spec.model, ctx.spec.parallel
    kind = ctx.st.mtp_kind
    if kind is None:
        return []
    ops: list[Op] = []
    for depth in range(ctx.st.mtp_layers):
        blk = Block(ctx, Scope.LAST, f"mtp{depth}")
        blk.kernel("embedding", Family.EMBEDDING, bwd_phase=Phase.BWD_W, tokens=ctx.tokens, hidden=m.hidden,
                   vocab=ctx.vocab / p.tp)
        if ctx.st.active("tp"):
            kind_ = CollectiveKind.REDUCE_SCATTER if p.sequence_parallel else CollectiveKind.ALL_REDUCE
            blk.comm("embedding_tp_combine", kind_, ctx.tokens * m.hidden * ctx.e, "tp", Axis.TP)
        norm(blk, "enorm")
        norm(blk, "hnorm")
        bwd = tp_in(blk, "eh_proj", "eh_proj", width=2 * m.hidden)
        blk.gemm("eh_proj", ctx.tokens, m.hidden / p.tp, 2 * m.hidden, bwd_comm=bwd)
        if ctx.st.active("tp"):  # back to the sequence shard: gather the output columns
            blk.comm("eh_proj.tp_all_gather", CollectiveKind.ALL_GATHER, ctx.tokens * m.hidden * ctx.e, "tp",
                     Axis.TP, overlap=Overlap.TP, partner="eh_proj")
        ops += blk.ops()
        ops += transformer_layer(ctx, kind, Block(ctx, Scope.LAST, f"mtp{depth}.layer"))
        out = Block(ctx, Scope.LAST, f"mtp{depth}.head")
        norm(out, "norm")
        out.gemm("logits", ctx.tokens, ctx.vocab / p.tp, m.hidden, dtype=ctx.wide,
                 bwd_comm=tp_in(out, "logits", "logits"))
        variant = Fusion.FUSED if ctx.spec.train.fused_cross_entropy else Fusion.UNFUSED
        out.kernel("cross_entropy", Family.CROSS_ENTROPY, variant=variant, tokens=ctx.tokens, vocab=ctx.vocab / p.tp)
        if ctx.st.active("tp"):
            out.comm("ce_all_reduce", CollectiveKind.ALL_REDUCE, 4 * ctx.tokens, "tp", Axis.TP, count=3)
        ops += out.ops()
    return ops


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
    if not ctx.st.active(group) or p.zero in (ZeroStage.Z3, ZeroStage.FSDP) or _none(params):
        return []
    total = params * grad_bytes(ctx)
    buckets = vmax(1, total / p.dp_bucket_size)
    kind_ = CollectiveKind.REDUCE_SCATTER if _sharded(ctx) else CollectiveKind.ALL_REDUCE
    return [Op(name=f"step.{label}_grad_{kind_.value}", work=ctx.collective(kind_, total / buckets, group),
               phase=Phase.COMM, part=Part.GRAD_SYNC, scope=Scope.RANK, rank_kind=kind, ranks=ranks, count=buckets,
               axis=Axis.DP, overlap=Overlap.BUCKETED if p.dp_overlap else Overlap.NONE)]


def _none(params: Any) -> bool:
    """No parameters at all (LoRA without adapters on this rank)."""
    return isinstance(params, int | float) and params == 0


def _tied_sync(ctx: Context, kind: RankKind, ranks: tuple[int, ...]) -> list[Op]:
    """With tied embeddings and pp > 1, first and last stage all-reduce the embedding gradient
    (none for a frozen embedding)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    if ctx.tuning.frozen or not (m.tied_embeddings and ctx.st.pp > 1 and kind in (RankKind.FIRST, RankKind.LAST)):
        return []
    tier = ctx.groups["pp"].tier
    work = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=ctx.vocab * m.hidden / p.tp * grad_bytes(ctx),
                      group=2, ranks_per_node=2 if tier is Tier.INTRA else 1, tier=tier)
    return [Op(name="step.tied_embedding_all_reduce", work=work, phase=Phase.COMM, part=Part.GRAD_SYNC,
               scope=Scope.RANK, rank_kind=kind, ranks=ranks, axis=Axis.PP)]


def _copy_sync(ctx: Context, kind: RankKind, ranks: tuple[int, ...], params: shard.LocalParams) -> list[Op]:
    """With two copies of the model (DualPipe), each rank's gradients are summed with those of the
    rank holding the other copy of its stages (rank ``pp - 1 - r``): one all-reduce of the
    gradients the GPU owns over that pair, after the data-parallel reduction (deepseek-ai/DualPipe
    examples/example_dualpipe.py adds each copy's gradient to the other's; DeepSeek-V3 §3.2.1)."""
    if not ctx.st.copied:
        return []
    tier = ctx.groups["pp"].tier
    owned = _local(ctx, params) if _sharded(ctx) and ctx.st.active("dp") else params.total
    work = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=owned * grad_bytes(ctx), group=2,
                      ranks_per_node=2 if tier is Tier.INTRA else 1, tier=tier)
    return [Op(name="step.model_copy_grad_all_reduce", work=work, phase=Phase.COMM, part=Part.GRAD_SYNC,
               scope=Scope.RANK, rank_kind=kind, ranks=ranks, axis=Axis.PP)]


# The elementwise steps of torch's Adam(W) without fusion (pytorch/pytorch@v2.4.0
# torch/optim/adamw.py, _multi_tensor_adamw and _single_tensor_adamw): decoupled weight decay
# (param.mul_), exp_avg.lerp_(grad), exp_avg_sq.mul_, exp_avg_sq.addcmul_(grad, grad), sqrt,
# div_ by the bias correction, add_ eps, param.addcdiv_(exp_avg, denom). One-input in-place steps
# move the bytes of a copy; steps with more inputs are priced as a two-input add (addcdiv reads
# three tensors: one pass short). SGD with momentum: buf.mul_().add_(grad), param.add_(buf).
_ADAM_STEPS: tuple[tuple[str, Family], ...] = (
    ("weight_decay", Family.COPY), ("exp_avg", Family.ELEMENTWISE), ("exp_avg_sq_scale", Family.COPY),
    ("exp_avg_sq", Family.ELEMENTWISE), ("sqrt", Family.COPY), ("bias_correction", Family.COPY),
    ("eps", Family.COPY), ("update", Family.ELEMENTWISE))
_SGD_STEPS: tuple[tuple[str, Family], ...] = (
    ("momentum_scale", Family.COPY), ("momentum", Family.ELEMENTWISE), ("update", Family.ELEMENTWISE))


def _optimizer_ops(ctx: Context, kind: RankKind, ranks: tuple[int, ...], local: Any, layers: tuple[Any, ...],
                   first: bool, last: bool) -> list[Op]:
    """The update over ``local`` parameters as the stack launches it: one fused multi-tensor
    kernel, or torch's elementwise steps (``foreach``: one multi-tensor launch each;
    ``per_tensor``: one launch per parameter tensor each) on FP32 states."""
    t = ctx.spec.train
    variant = "sgd" if t.optimizer is Optimizer.SGD else "adam"
    if _none(local):
        return []
    if t.optimizer_kernel is OptimizerKernel.FUSED:
        return [Op(name="step.optimizer", work=Kernel.make(Family.OPTIMIZER, ctx.act, variant=variant, params=local),
                   phase=Phase.OPTIM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks)]
    steps = _SGD_STEPS if t.optimizer is Optimizer.SGD else _ADAM_STEPS
    if t.optimizer is Optimizer.ADAM:
        steps = steps[1:]  # Adam adds L2 decay to the gradient inside exp_avg: no decay pass
    count: Any = 1
    if t.optimizer_kernel is OptimizerKernel.PER_TENSOR and ctx.tuning.frozen:
        # LoRA: the adapters' A and B alone
        count = sum(n * adapter_tensors(ctx, kind) for n, kind in zip(layers, ctx.st.kinds))
    elif t.optimizer_kernel is OptimizerKernel.PER_TENSOR:
        per_kind = [tensors(ctx.spec.model, kind, ctx.st.q_compressed) for kind in ctx.st.kinds]
        count = sum(n * per_layer for n, (per_layer, _) in zip(layers, per_kind)) + (
            per_kind[0][1] if (first or last) else 0)
    ops = []
    for name, family in steps:
        dims = {"elements": local / count}
        work = (Kernel.make(family, Dtype.FP32, **dims) if family is Family.COPY
                else Kernel.make(family, Dtype.FP32, variant=Elementwise.ADD, **dims))
        ops.append(Op(name=f"step.optimizer.{name}", work=work, phase=Phase.OPTIM, part=Part.UPDATE,
                      scope=Scope.RANK, rank_kind=kind, ranks=ranks, count=count))
    return ops


def _update(ctx: Context, kind: RankKind, ranks: tuple[int, ...], params: shard.LocalParams,
            layers: tuple[Any, ...], first: bool, last: bool) -> list[Op]:
    """The optimizer over this GPU's shard; ZeRO-1/2 then all-gather the updated parameters
    (hidden behind the next step's first forward with ``param_gather_overlap``)."""
    p = ctx.spec.parallel
    local = _local(ctx, params)
    share = offload.gpu_share(ctx)  # the rest is updated on the host (offload.rank_ops)
    ops = _optimizer_ops(ctx, kind, ranks, local * share, layers, first, last) if share else []
    ops += offload.rank_ops(ctx, kind, ranks, local)
    if p.zero in (ZeroStage.Z1, ZeroStage.Z2):
        overlap = Overlap.NEXT_FORWARD if p.param_gather_overlap else Overlap.NONE
        dense, expert = _gathered_bytes(ctx, params, layers)
        for label, nbytes, group in (("dense", dense, "dp"), ("expert", expert, "expert_dp")):
            if ctx.st.active(group) and (label == "dense" or ctx.spec.model.moe is not None):
                ops.append(Op(name=f"step.{label}_param_all_gather",
                              work=ctx.collective(CollectiveKind.ALL_GATHER, nbytes, group),
                              phase=Phase.COMM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks,
                              axis=Axis.DP, overlap=overlap))
    return ops


def _gathered_bytes(ctx: Context, params: shard.LocalParams, layers: tuple[Any, ...]) -> tuple[Any, Any]:
    """(dense, expert) bytes of the ZeRO-1/2 parameter all-gather on a rank holding ``params`` and
    ``layers`` of each kind: each parameter in the model dtype, except that FP8 parameters
    (``fp8_param_gather``) travel as their FP8 data (:meth:`~llmp.analytic.lowp.Recipe.gather_bytes`;
    the MTP layers' weights counted in the model dtype). Gradients are reduced in their own dtype
    elsewhere (:func:`~llmp.analytic.grads.grad_bytes`)."""
    e, recipe = ctx.e, ctx.recipe
    if recipe is None or not recipe.fp8_params or ctx.tuning.frozen:  # LoRA's adapters are never FP8
        return params.dense * e, params.expert * e
    per_kind = [lowp_weights(ctx, kind) for kind in ctx.st.kinds]
    lowp_dense = sum(n * w.dense for n, w in zip(layers, per_kind))
    lowp_expert = sum(n * w.expert for n, w in zip(layers, per_kind))
    narrow = recipe.gather_bytes(e)
    return ((params.dense - lowp_dense) * e + lowp_dense * narrow,
            (params.expert - lowp_expert) * e + lowp_expert * narrow)


def _local(ctx: Context, params: shard.LocalParams) -> Any:
    """Parameters whose optimizer state (and, from ZeRO-1 on, gradients to clip) this GPU owns."""
    dense_shard = ctx.groups["dp"].size if _sharded(ctx) else 1
    expert_shard = ctx.groups["expert_dp"].size if _sharded(ctx) else 1
    return params.dense / dense_shard + params.expert / expert_shard


def _model_parallel(ctx: Context, *, with_dp: bool) -> Collective:
    """A tiny all-reduce over the ranks that hold different gradients: tp x pp (Megatron's
    model-parallel group), and dp too when the gradients are sharded over it."""
    tp, pp, dp = ctx.groups["tp"], ctx.groups["pp"], ctx.groups["dp"]
    members = [tp, pp] + ([dp] if with_dp else [])
    size: Any = 1
    per_node: Any = 1
    for g in members:
        size, per_node = size * g.size, per_node * g.ranks_per_node
    tier = Tier.INTER if any(g.tier is Tier.INTER and ctx.st.group_size(n) > 1
                             for g, n in zip(members, ("tp", "pp", "dp"))) else Tier.INTRA
    return Collective(kind=CollectiveKind.ALL_REDUCE, bytes=4, group=size, ranks_per_node=per_node, tier=tier)


def _step_work(ctx: Context, kind: RankKind, ranks: tuple[int, ...], params: shard.LocalParams) -> list[Op]:
    """The stack's fixed per-step work on one kind of rank (module docstring), before the update.

    Passes over gradients run on the gradients the GPU holds: all of its replica's with no
    ZeRO, its shard with ZeRO-2/3 and FSDP. With ZeRO-1 the optimizer (and so the check, the
    norm and the scale) works on the GPU's shard of the reduced gradients. A read-only pass
    (the norm, the inf check) moves the bytes of a copy of half the elements; a memset (zeroing)
    likewise; a read-write pass moves those of a copy.
    """
    prof, t = ctx.profile, ctx.spec.train
    sharded = _sharded(ctx) and ctx.st.active("dp")
    grads = _local(ctx, params) if sharded else params.total
    gdt = Dtype.FP32 if grad_bytes(ctx) == 4 else ctx.act
    ops: list[Op] = []

    def kernel(name: str, elements: Any) -> None:
        ops.append(Op(name=f"step.{name}", work=Kernel.make(Family.COPY, gdt, Pass.FWD, elements=elements),
                      phase=Phase.OPTIM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks))

    def reduce(name: str) -> None:
        ops.append(Op(name=f"step.{name}", work=_model_parallel(ctx, with_dp=sharded), phase=Phase.COMM,
                      part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks,
                      axis=Axis.DP if sharded else Axis.PP))

    if prof.zero_grad.value is ZeroGrad.MEMSET:
        # The whole gradient buffer is cleared: sharded only from ZeRO-2 on.
        partitioned = ctx.spec.parallel.zero in (ZeroStage.Z2, ZeroStage.Z3, ZeroStage.FSDP) and sharded
        kernel("zero_grad", (grads if partitioned else params.total) / 2)
    scale_pass = False
    if t.precision is Precision.FP16 and prof.fp16_unscale.value is not Unscale.NONE:
        if prof.fp16_unscale.value is Unscale.CHECK_AND_UNSCALE:
            kernel("unscale_check", grads)
        else:
            kernel("inf_check", grads / 2)
            scale_pass = True
        reduce("found_inf_all_reduce")
    if t.grad_clip:
        kernel("grad_norm", grads / 2)
        reduce("grad_norm_all_reduce")
        scale_pass = scale_pass or prof.clip_scale.value in (ClipScale.ALWAYS, ClipScale.WITH_UNSCALE)
    if scale_pass:
        kernel("grad_scale", grads)
    last = kind in (RankKind.ONLY, RankKind.LAST)
    sync = prof.loss_sync.value
    if last and sync in (LossSync.PER_STEP, LossSync.PIPELINE_BROADCAST) and ctx.st.active("dp"):
        ops.append(Op(name="step.loss_all_reduce", work=ctx.collective(CollectiveKind.ALL_REDUCE, 4, "dp"),
                      phase=Phase.COMM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks,
                      axis=Axis.DP))
    if sync is LossSync.PIPELINE_BROADCAST and ctx.st.active("pp"):
        # dist.broadcast from the last stage to the pipeline group: priced as an all-reduce of 4 bytes.
        ops.append(Op(name="step.loss_broadcast", work=ctx.collective(CollectiveKind.ALL_REDUCE, 4, "pp"),
                      phase=Phase.COMM, part=Part.UPDATE, scope=Scope.RANK, rank_kind=kind, ranks=ranks,
                      axis=Axis.PP))
    return ops


def _rank_layers(st: Structure, chunk_kinds: tuple[tuple[Any, ...], ...], rank: int) -> tuple[Any, ...]:
    """Layers of each kind held by pipeline rank ``rank`` (the chunks its schedule places on it:
    ``rank, rank + pp, ...`` under Megatron's loop; both model copies' under DualPipe)."""
    mine = [chunk_kinds[g] for g in st.placement[rank]]
    return tuple(sum(c[k] for c in mine) for k in range(len(mine[0])))


def rank_ops(ctx: Context, chunk_kinds: tuple[tuple[Any, ...], ...]) -> list[Op]:
    """Once-per-step work of every class of pipeline rank (scope ``rank``); ``chunk_kinds`` are
    the layers of each kind in each chunk (a rank holds the chunks of ``structure.placement``)."""
    pp = ctx.st.pp
    classes = rank_classes(ctx.st)
    split_kinds = {k for k in RankKind if sum(kind is k for kind, _ in classes) > 1}
    ops: list[Op] = []
    for kind, ranks in classes:
        first = kind in (RankKind.ONLY, RankKind.FIRST)
        last = kind in (RankKind.ONLY, RankKind.LAST)
        layers = _rank_layers(ctx.st, chunk_kinds, ranks[0])
        params = shard.rank(ctx.spec.model, ctx.spec.parallel, pp=pp, layers=layers, first=first, last=last,
                            vocab=ctx.vocab, kinds_present=ctx.st.kinds, mtp_kind=ctx.st.mtp_kind,
                            q_compressed=ctx.st.q_compressed)
        # what has gradients, states and an update: with LoRA the adapters alone
        params = trainable(ctx, params, layers)
        mine = [*_tied_sync(ctx, kind, ranks), *_grad_sync(ctx, kind, ranks, params.dense, "dp", "dense")]
        if ctx.spec.model.moe is not None:
            mine += _grad_sync(ctx, kind, ranks, params.expert, "expert_dp", "expert")
        mine += _copy_sync(ctx, kind, ranks, params)
        mine += _step_work(ctx, kind, ranks, params)
        mine += _update(ctx, kind, ranks, params, layers, first, last)
        if kind in split_kinds:  # middle ranks holding different layers: name each class's ops
            suffix = "@ranks " + ",".join(map(str, ranks))
            mine = [dataclasses.replace(op, name=op.name + suffix, partner=op.partner + suffix if op.partner else "")
                    for op in mine]
        ops += mine
    return ops
