"""The operators of one transformer layer: forward, backward, recompute and their collectives.

Shapes per GPU for one microbatch (``b`` sequences of ``s`` tokens), Megatron layout:

* context parallelism splits the sequence: every op sees ``tokens = b * s / cp`` rows, except
  that the attention core of a local query block attends to the full key length ``s``;
* tensor parallelism splits heads and the MLP width by ``tp`` (column-parallel QKV and fc1,
  row-parallel proj and fc2; Shoeybi et al. 2019); Q width ``heads * head_dim / tp``, K and V
  width ``max(kv_heads, tp) / tp * head_dim`` (GQA; KV heads replicated when tp > kv_heads);
* sequence parallelism (Korthikanti et al. 2022) additionally splits norms, dropout and residual
  adds by ``tp`` (``sp_tokens``) and turns each TP all-reduce into a reduce-scatter plus an
  all-gather.

Biases cost no kernel of their own: Megatron adds them in the GEMM epilogue or fuses them into
bias-GELU / bias-dropout-add. SwiGLU's gate and up matrices run as one GEMM of width
``2 * ffn / tp`` (Megatron-Core ``linear_fc1``); the FLOPs equal two GEMMs of ``ffn / tp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import layout, shard
from llmp.analytic.graph import Op, Overlap, Part, Phase, Scope
from llmp.analytic.kernels import (AttentionKernel, Collective, CollectiveKind, Elementwise, Family, Fusion, Kernel, Pass,
                                   SoftmaxKind)
from llmp.analytic.layout import Axis
from llmp.analytic.structure import Structure
from llmp.dsl.spec import Activation, Attention, Norm, Position, Precision, Recompute, Spec, ZeroStage
from llmp.hardware.spec import Dtype
from llmp.stacks import Profile, profile

_ACTIVATION = {Activation.GELU: Elementwise.GELU, Activation.RELU: Elementwise.RELU,
               Activation.SWIGLU: Elementwise.SWIGLU, Activation.SQUARED_RELU: Elementwise.SQUARED_RELU}


def at_most(x: Any, bound: float) -> bool:
    """``x <= bound`` for a number; for a sweep's array, for every value; a free symbol counts as
    within the bound (the graph's shape must not depend on a symbol)."""
    try:
        return bool(np.all(np.asarray(x, dtype=float) <= bound))
    except TypeError:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    """Per-GPU shapes and dtypes shared by every builder."""

    spec: Spec
    st: Structure
    tokens: Any
    """Token rows of one microbatch on one GPU: micro_batch * seq_len / cp."""
    sp_tokens: Any
    """Rows of norms, dropout and residual adds: tokens / tp with sequence parallelism."""
    q_width: Any
    kv_width: Any
    act: Dtype
    """Activation storage dtype (element-wise kernels, messages)."""
    gemm: Dtype
    """Dtype whose peak GEMMs run at."""
    attn: Dtype
    """Dtype of the attention core (FP8 training keeps attention in BF16)."""
    groups: dict[str, layout.Group]
    vocab: Any
    """Rows of the embedding and head: the vocab padded as the stack pads it."""
    profile: Profile
    """The stack's profile (facts with no spec field)."""

    @classmethod
    def of(cls, spec: Spec, st: Structure) -> Context:
        m, p, prec = spec.model, spec.parallel, spec.train.precision
        tokens = spec.train.micro_batch * m.seq_len / p.cp
        act = {Precision.FP32: Dtype.FP32, Precision.TF32: Dtype.FP32, Precision.FP16: Dtype.FP16}.get(prec, Dtype.BF16)
        groups = {name: layout.group(spec, name, st) for name in layout.GROUP_NAMES}
        return cls(spec=spec, st=st, tokens=tokens,
                   sp_tokens=tokens / p.tp if p.sequence_parallel else tokens,
                   q_width=m.heads * m.head_dim / p.tp,
                   kv_width=shard.kv_heads_local(m, p) * m.head_dim,
                   act=act, gemm=prec.compute_dtype,
                   attn=Dtype.BF16 if prec is Precision.FP8 else prec.compute_dtype, groups=groups,
                   vocab=spec.padded_vocab, profile=profile(spec.train.stack))

    @property
    def e(self) -> int:
        return self.act.bytes

    def collective(self, kind: CollectiveKind, nbytes: Any, group: str) -> Collective:
        g = self.groups[group]
        return Collective(kind=kind, bytes=nbytes, group=g.size, ranks_per_node=g.ranks_per_node, tier=g.tier)


class Block:
    """Collects the forward ops of a block in order and their backward ops in reverse order."""

    def __init__(self, ctx: Context, scope: Scope, prefix: str) -> None:
        self.ctx, self.scope, self.prefix = ctx, scope, prefix
        self.fwd: list[Op] = []
        self._bwd: list[list[Op]] = []

    def _op(self, name: str, work: Kernel | Collective, phase: Phase, part: Part, **kw: Any) -> Op:
        return Op(name=f"{self.prefix}.{name}", work=work, phase=phase, part=part, scope=self.scope, **kw)

    def gemm(self, name: str, m: Any, n: Any, k: Any, *, batch: Any = 1, weights: bool = True,
             dtype: Dtype | None = None, bwd_comm: tuple[Op, ...] = ()) -> None:
        """Y[m,n] = X[m,k] W[k,n]; backward dgrad (m,k,n) then ``bwd_comm``, then wgrad (k,n,m).
        The dgrad is task B's, the wgrad task W's (phase ``bwd_w``), or B's when the second
        operand is an activation (``weights = false``: its "weight gradient" is an input gradient)."""
        dt = dtype or self.ctx.gemm
        fwd = Kernel.make(Family.GEMM, dt, m=m, n=n, k=k, batch=batch)
        self.fwd.append(self._op(name, fwd, Phase.FWD, Part.FORWARD))
        self._bwd.append([
            self._op(f"{name}.dgrad", Kernel.make(Family.GEMM, dt, Pass.BWD, m=m, n=k, k=n, batch=batch),
                     Phase.BWD_ACT, Part.BACKWARD),
            *bwd_comm,
            self._op(f"{name}.wgrad", Kernel.make(Family.GEMM, dt, Pass.BWD, m=k, n=n, k=m, batch=batch),
                     Phase.BWD_W if weights else Phase.BWD_ACT, Part.BACKWARD)])

    def kernel(self, name: str, family: Family, *, dtype: Dtype | None = None, variant: str = "",
               bwd_phase: Phase = Phase.BWD_ACT, **dims: Any) -> None:
        """A non-GEMM kernel and its backward (the same kernel with ``pass_ = bwd``)."""
        dt = dtype or self.ctx.act
        self.fwd.append(self._op(name, Kernel.make(family, dt, Pass.FWD, variant, **dims), Phase.FWD, Part.FORWARD))
        self._bwd.append([self._op(f"{name}.bwd", Kernel.make(family, dt, Pass.BWD, variant, **dims),
                                   bwd_phase, Part.BACKWARD)])

    def collective(self, name: str, kind: CollectiveKind, nbytes: Any, group: str, axis: Axis, *,
                   part: Part = Part.FORWARD, overlap: Overlap = Overlap.NONE, partner: str = "",
                   count: Any = 1, weight_grads: bool = False) -> Op:
        """A collective op of this block (not yet placed); ``weight_grads``: it moves weight
        gradients (task W)."""
        return self._op(name, self.ctx.collective(kind, nbytes, group), Phase.COMM, part, axis=axis,
                        overlap=overlap, partner=f"{self.prefix}.{partner}" if partner else "", count=count,
                        weight_grads=weight_grads)

    def comm(self, name: str, kind: CollectiveKind, nbytes: Any, group: str, axis: Axis, *,
             part: Part = Part.FORWARD, overlap: Overlap = Overlap.NONE, partner: str = "",
             count: Any = 1) -> Op:
        """A collective; a forward one is appended here, a backward one is returned to place."""
        op = self.collective(name, kind, nbytes, group, axis, part=part, overlap=overlap,
                             partner=partner, count=count)
        if part is Part.FORWARD:
            self.fwd.append(op)
        return op

    def last_in_backward(self, name: str, kernel: Kernel) -> None:
        """A backward-only kernel that runs after every other op of the block's backward."""
        self._bwd.insert(0, [self._op(name, kernel, Phase.BWD_W, Part.BACKWARD)])

    def bwd_comm(self, *ops: Op) -> None:
        """Backward collectives that run where the block's backward reaches this point."""
        self._bwd.append(list(ops))

    def ops(self) -> list[Op]:
        return self.fwd + [op for group in reversed(self._bwd) for op in group]


def norm(blk: Block, name: str) -> None:
    """A norm: one fused kernel, or for RMSNorm without fusion eager PyTorch's chain
    (``Fusion.UNFUSED``; a LayerNorm is one kernel in Apex and in torch alike)."""
    ctx = blk.ctx
    rms = ctx.spec.model.norm is Norm.RMSNORM
    variant = Fusion.UNFUSED if rms and not ctx.spec.train.fused_norm else Fusion.FUSED
    blk.kernel(name, Family.NORM, variant=variant, tokens=ctx.sp_tokens, hidden=ctx.spec.model.hidden, rms=rms)


def tp_in(blk: Block, name: str, gemm: str) -> tuple[Op, ...]:
    """Entering a column-parallel GEMM. Returns the backward collectives for the GEMM's dgrad.

    With SP: all-gather the sequence shards (forward); backward re-gathers the input for the
    wgrad (hidden behind dgrad, Megatron's async grad) and reduce-scatters the input gradient
    (hidden behind wgrad). Without SP: the forward is the identity and the backward all-reduces
    the input gradient, overlapped with wgrad (Megatron's async tensor-parallel all-reduce).
    """
    ctx = blk.ctx
    if not ctx.st.active("tp"):
        return ()
    full = ctx.tokens * ctx.spec.model.hidden * ctx.e
    if ctx.spec.parallel.sequence_parallel:
        blk.comm(f"{name}.tp_all_gather", CollectiveKind.ALL_GATHER, full, "tp", Axis.TP,
                 overlap=Overlap.TP, partner=gemm)
        return (blk.comm(f"{name}.tp_input_all_gather", CollectiveKind.ALL_GATHER, full, "tp", Axis.TP,
                         part=Part.BACKWARD, overlap=Overlap.PARTNER, partner=f"{gemm}.dgrad"),
                blk.comm(f"{name}.tp_grad_reduce_scatter", CollectiveKind.REDUCE_SCATTER, full, "tp", Axis.TP,
                         part=Part.BACKWARD, overlap=Overlap.PARTNER, partner=f"{gemm}.wgrad"))
    return (blk.comm(f"{name}.tp_grad_all_reduce", CollectiveKind.ALL_REDUCE, full, "tp", Axis.TP,
                     part=Part.BACKWARD, overlap=Overlap.PARTNER, partner=f"{gemm}.wgrad"),)


def _tp_out(blk: Block, name: str, gemm: str) -> None:
    """Leaving a row-parallel GEMM: all-reduce (or reduce-scatter with SP) the partial sums.

    Backward: with SP, all-gather the output gradient before the GEMM's dgrad; else identity.
    """
    ctx = blk.ctx
    if not ctx.st.active("tp"):
        return
    full = ctx.tokens * ctx.spec.model.hidden * ctx.e
    if ctx.spec.parallel.sequence_parallel:
        blk.comm(f"{name}.tp_reduce_scatter", CollectiveKind.REDUCE_SCATTER, full, "tp", Axis.TP,
                 overlap=Overlap.TP, partner=gemm)
        blk.bwd_comm(blk.comm(f"{name}.tp_grad_all_gather", CollectiveKind.ALL_GATHER, full, "tp", Axis.TP,
                              part=Part.BACKWARD, overlap=Overlap.TP, partner=f"{gemm}.dgrad"))
    else:
        blk.comm(f"{name}.tp_all_reduce", CollectiveKind.ALL_REDUCE, full, "tp", Axis.TP,
                 overlap=Overlap.TP, partner=gemm)


def _bias(blk: Block, name: str, elements: Any) -> None:
    """A broadcast bias add as its own kernel (a stack that does not fuse it into the next op).
    It moves the bytes of a copy (read the activation, write it; the bias vector is negligible),
    so it is priced as one."""
    if blk.ctx.spec.model.bias:
        blk.kernel(f"{name}.bias", Family.COPY, elements=elements)


def _dropout_add(blk: Block, name: str, *, residual: bool = True) -> None:
    """After a row-parallel GEMM: bias, dropout and the residual add.

    Fused (Megatron ``bias_dropout_add_fused_train``): the bias is inside, dropout (when the
    model has it) and the add are the kernels llmp has always counted. Unfused (GPT-NeoX
    ``get_bias_dropout_add``): the bias add is a kernel of its own. ``residual = false`` is the
    attention branch of a parallel residual, which adds no residual (``residual=None``).
    """
    ctx = blk.ctx
    n = ctx.sp_tokens * ctx.spec.model.hidden
    if not ctx.spec.train.fused_bias_dropout_add:
        _bias(blk, name, n)
    if ctx.st.dropout:
        blk.kernel(f"{name}.dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=n)
    if residual:
        blk.kernel(f"{name}.residual", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=n)


def _rotary(blk: Block) -> None:
    """Rotary embedding of q and k on the rotated part of each head (``rotary_pct``).

    Fused (TE/Apex fused RoPE): one kernel. Unfused: eager ``t * cos + rotate_half(t) * sin``
    (``Elementwise.ROTARY_UNFUSED``). A partial rotary (GPT-NeoX ``rotary_ndims``) slices the
    rotated dims off q and k and joins them back with ``torch.cat``: one copy of q and of k
    (EleutherAI/gpt-neox megatron/model/transformer.py, ParallelSelfAttention.forward).
    """
    ctx = blk.ctx
    m = ctx.spec.model
    variant = Elementwise.ROTARY if ctx.spec.train.fused_rope else Elementwise.ROTARY_UNFUSED
    qk = ctx.tokens * (ctx.q_width + ctx.kv_width)
    blk.kernel("attn.rotary", Family.ELEMENTWISE, variant=variant, elements=qk * m.rotary_pct)
    if not at_most(-m.rotary_pct, -1):  # rotary_pct < 1
        blk.kernel("attn.rotary_cat", Family.COPY, elements=qk)


def _core(blk: Block) -> str:
    """The attention core as the stack launches it; returns the name of its last op.

    Fused kernels (flash2, flash3, cudnn, sdpa): one kernel, causal with the full key length (a
    load-balanced CP rank does 1/cp of the causal work). Unfused (Megatron ``ParallelAttention``,
    GPT-NeoX ``ParallelSelfAttention.attention``): ``baddbmm`` scores over (batch x heads), the
    full s x s matrix (a dense GEMM computes the masked half too), then either Megatron's fused
    scale + causal mask + softmax kernel, or ``masked_fill_`` of the mask and a plain softmax
    (also where the sequence is longer than the fused kernel accepts), dropout on the
    probabilities, ``bmm`` with V.
    """
    ctx = blk.ctx
    m, p, t = ctx.spec.model, ctx.spec.parallel, ctx.spec.train
    heads = m.heads / p.tp
    seq_q = m.seq_len / p.cp
    batch = t.micro_batch
    if t.attention.fused:
        blk.kernel("attn.core", Family.ATTENTION, variant=_FUSED_KERNEL[t.attention], dtype=ctx.attn, batch=batch,
                   heads=heads,
                   kv_heads=ctx.kv_width / m.head_dim, seq_q=seq_q, seq_kv=m.seq_len,
                   head_dim=m.head_dim, causal=True, flash=True)
        return "attn.core"
    bh = batch * heads
    scores = bh * seq_q * m.seq_len
    blk.gemm("attn.scores", seq_q, m.seq_len, m.head_dim, batch=bh, weights=False, dtype=ctx.attn)
    fused = (t.attention is Attention.UNFUSED_FUSED_SOFTMAX
             and at_most(m.seq_len, ctx.profile.fused_softmax_max_seq.value))
    if fused:
        blk.kernel("attn.softmax", Family.SOFTMAX, variant=SoftmaxKind.CAUSAL_FUSED, rows=bh * seq_q, cols=m.seq_len)
    else:
        blk.kernel("attn.mask", Family.ELEMENTWISE, variant=Elementwise.MASKED_FILL, elements=scores)
        blk.kernel("attn.softmax", Family.SOFTMAX, rows=bh * seq_q, cols=m.seq_len)
    if ctx.st.dropout:
        blk.kernel("attn.prob_dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=scores)
    blk.gemm("attn.context", seq_q, m.head_dim, m.seq_len, batch=bh, weights=False, dtype=ctx.attn)
    return "attn.context"


_FUSED_KERNEL: dict[Attention, AttentionKernel] = {
    Attention.FLASH2: AttentionKernel.FLASH2, Attention.FLASH3: AttentionKernel.FLASH3,
    Attention.CUDNN: AttentionKernel.CUDNN,
    # torch SDPA's default backend order puts its FlashAttention-2 kernels first on NVIDIA GPUs
    # (pytorch/pytorch@v2.4.0 aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, priority_order).
    Attention.SDPA: AttentionKernel.FLASH2,
}
"""The fused kernel each attention choice launches."""


def _attention(blk: Block, *, reduce: bool = True) -> list[str]:
    """Norm, QKV, rotary, the attention core, proj. Returns the names of the core's ops (what
    ``recompute = selective`` recomputes). ``reduce = false``: a parallel-residual branch, whose
    proj output is summed with the MLP's before one TP reduction."""
    ctx = blk.ctx
    m, p = ctx.spec.model, ctx.spec.parallel
    norm(blk, "attn.norm")
    bwd = tp_in(blk, "attn", "attn.qkv")
    blk.gemm("attn.qkv", ctx.tokens, ctx.q_width + 2 * ctx.kv_width, m.hidden, bwd_comm=bwd)
    if m.position is Position.ROTARY:
        _rotary(blk)
    start = len(blk.fwd)
    core = _core(blk)
    if ctx.st.active("cp"):
        # Ring attention (Liu et al. 2023; Megatron CP): cp - 1 exchanges of the local K and V
        # block, overlapped with the attention of the block in hand; backward also returns dK, dV.
        seq_q, batch = m.seq_len / p.cp, ctx.spec.train.micro_batch
        kv_block = 2 * batch * seq_q * ctx.kv_width * ctx.e
        blk.comm("attn.cp_ring", CollectiveKind.SEND_RECV, kv_block, "cp", Axis.CP,
                 overlap=Overlap.PARTNER, partner=core, count=p.cp - 1)
        blk.bwd_comm(blk.comm("attn.cp_ring_grad", CollectiveKind.SEND_RECV, 2 * kv_block, "cp", Axis.CP,
                              part=Part.BACKWARD, overlap=Overlap.PARTNER,
                              partner=f"{core}.bwd" if core == "attn.core" else f"{core}.dgrad",
                              count=p.cp - 1))
    core_ops = [op.name for op in blk.fwd[start:]]
    blk.gemm("attn.proj", ctx.tokens, m.hidden, ctx.q_width)
    if reduce:
        _tp_out(blk, "attn", "attn.proj")
        _dropout_add(blk, "attn")
    else:
        _dropout_add(blk, "attn", residual=False)
    return core_ops


def _mlp(blk: Block, tag: str, width: Any, *, rows: Any, batch: Any = 1,
         bwd_comm: tuple[Op, ...] = ()) -> None:
    """fc1 (fused gate+up for SwiGLU), activation, fc2 on ``rows`` tokens, ``width / tp`` wide.

    The activation with its bias is one kernel when the stack fuses them (Megatron bias-GELU,
    bias-SwiGLU, Liger SwiGLU). Unfused: the bias add is its own kernel (GPT-NeoX
    ``activation_func(intermediate + bias)``) and SwiGLU is eager ``silu(a) * b`` (torchtitan
    ``FeedForward``): a silu kernel, priced as the one-input GELU kernel (same traffic, one
    launch), and a two-input multiply, priced as an add.
    """
    ctx = blk.ctx
    m, tp = ctx.spec.model, ctx.spec.parallel.tp
    act = _ACTIVATION[m.activation]
    fc1 = 2 * width / tp if act is Elementwise.SWIGLU else width / tp
    out = batch * rows * width / tp
    blk.gemm(f"{tag}.fc1", rows, fc1, m.hidden, batch=batch, bwd_comm=bwd_comm)
    if ctx.spec.train.fused_bias_act:
        blk.kernel(f"{tag}.act", Family.ELEMENTWISE, variant=act, elements=out)
    else:
        _bias(blk, f"{tag}.fc1", batch * rows * fc1)
        if act is Elementwise.SWIGLU:
            blk.kernel(f"{tag}.act.silu", Family.ELEMENTWISE, variant=Elementwise.GELU, elements=out)
            blk.kernel(f"{tag}.act.mul", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=out)
        else:
            blk.kernel(f"{tag}.act", Family.ELEMENTWISE, variant=act, elements=out)
    blk.gemm(f"{tag}.fc2", rows, m.hidden, width / tp, batch=batch)


def _moe(blk: Block, bwd_comm: tuple[Op, ...]) -> None:
    """Router, token dispatch (all-to-all over ep), local experts as one grouped GEMM, combine.

    Every TP rank holds the layer's ``tokens`` (after the SP all-gather) and routes them; the TP
    ranks split the dispatch, so each sends ``tokens / tp * top_k * capacity_factor`` rows. Each
    local expert receives ``ep * tokens * top_k * capacity_factor / experts`` rows: the balanced
    share of the EP group's routed tokens, padded to the capacity factor, and computes its
    ``1 / tp`` slice of the expert width on them (expert tensor parallel = tp).
    """
    ctx = blk.ctx
    m, p = ctx.spec.model, ctx.spec.parallel
    e = m.moe
    assert e is not None
    blk.gemm("moe.router", ctx.tokens, e.experts, m.hidden, bwd_comm=bwd_comm)
    blk.kernel("moe.router_softmax", Family.SOFTMAX, rows=ctx.tokens, cols=e.experts)
    routed = ctx.tokens / p.tp * e.top_k * e.capacity_factor * m.hidden
    blk.kernel("moe.permute", Family.COPY, elements=routed)
    if ctx.st.active("ep"):
        blk.comm("moe.ep_dispatch", CollectiveKind.ALL_TO_ALL, routed * ctx.e, "ep", Axis.EP)
        blk.bwd_comm(blk.collective("moe.ep_dispatch_grad", CollectiveKind.ALL_TO_ALL, routed * ctx.e,
                                    "ep", Axis.EP, part=Part.BACKWARD))
    rows = ctx.tokens * p.ep * e.top_k * e.capacity_factor / e.experts
    _mlp(blk, "moe.experts", e.expert_ffn_hidden, rows=rows, batch=e.experts / p.ep)
    if ctx.st.active("ep"):
        blk.comm("moe.ep_combine", CollectiveKind.ALL_TO_ALL, routed * ctx.e, "ep", Axis.EP)
        blk.bwd_comm(blk.collective("moe.ep_combine_grad", CollectiveKind.ALL_TO_ALL, routed * ctx.e,
                                    "ep", Axis.EP, part=Part.BACKWARD))
    blk.kernel("moe.unpermute", Family.COPY, elements=routed)
    if ctx.st.shared_experts:
        _mlp(blk, "moe.shared", e.shared_experts * e.expert_ffn_hidden, rows=ctx.tokens)


def _recomputed(ops: list[Op]) -> list[Op]:
    """Forward ops run again in the backward (activation recomputation)."""
    out = []
    for op in ops:
        partner = f"recompute.{op.partner}" if op.partner else ""
        out.append(Op(name=f"recompute.{op.name}", work=op.work, phase=op.phase, part=Part.BACKWARD,
                      scope=op.scope, count=op.count, axis=op.axis, overlap=op.overlap,
                      partner=partner, recompute=True))
    return out


def zero3(blk: Block, params: Any, name: str) -> tuple[Op, ...]:
    """ZeRO-3/FSDP: gather a block's parameters before its forward and again before its
    backward, and reduce-scatter its gradients after the backward (Rajbhandari et al. 2020,
    §5.3). Places the forward gather first in the block; returns the two backward ops."""
    ctx = blk.ctx
    if ctx.spec.parallel.zero not in (ZeroStage.Z3, ZeroStage.FSDP) or not ctx.st.active("dp"):
        return ()
    overlap = Overlap.PREFETCH if blk.scope is Scope.LAYER else Overlap.NONE
    full = params * ctx.e
    blk.fwd.insert(0, blk.collective(f"{name}.zero_all_gather", CollectiveKind.ALL_GATHER, full, "dp",
                                     Axis.DP, overlap=overlap))
    return (blk.collective(f"{name}.zero_grad_all_gather", CollectiveKind.ALL_GATHER, full, "dp", Axis.DP,
                           part=Part.BACKWARD, overlap=overlap),
            blk.collective(f"{name}.zero_grad_reduce_scatter", CollectiveKind.REDUCE_SCATTER,
                           params * grad_bytes(ctx), "dp", Axis.DP, part=Part.BACKWARD, overlap=overlap,
                           weight_grads=True))


def grad_bytes(ctx: Context) -> int:
    """Bytes per gradient element: FP32 main grads for BF16 with master weights (Megatron's
    ``accumulate_allreduce_grads_in_fp32``, set for bf16), else the model dtype."""
    t = ctx.spec.train
    return 4 if (t.precision is Precision.BF16 and t.master_weights) else ctx.e


def layer_ops(ctx: Context) -> list[Op]:
    """One transformer layer's ops (scope ``layer``): forward, then recompute, then backward.

    Sequential residual: ``x = x + attn(norm1(x)); x = x + mlp(norm2(x))``, a TP reduction after
    each branch. Parallel residual (GPT-NeoX ``gpt_j_residual``, GPT-J, PaLM): both branches read
    ``x`` through their own norm (one shared norm with ``shared_norm``), their outputs are summed
    (the attention output's bias-dropout without residual, then the MLP's bias-dropout-add onto
    it), reduced over TP once, and added to ``x`` once.

    ``recompute = selective`` re-runs the attention core (Korthikanti et al. 2022 §5; Megatron-Core
    ``--recompute-granularity selective`` with its default ``--recompute-modules core_attn``):
    the scores, mask, softmax, dropout and the product with V, or the fused kernel, and the
    context-parallel ring exchanges that feed it. ``recompute = full`` re-runs each layer's whole
    forward (norms, GEMMs, TP collectives, everything but FSDP's prefetched gathers) before its
    backward (Megatron ``--recompute-granularity full --recompute-method uniform
    --recompute-num-layers 1``; GPT-NeoX/DeepSpeed ``checkpoint_activations`` with
    ``checkpoint_num_layers = 1``); the embedding and the head are never recomputed.
    """
    m = ctx.spec.model
    blk = Block(ctx, Scope.LAYER, "layer")
    if m.parallel_residual:
        core = _attention(blk, reduce=False)
        if not m.shared_norm:
            norm(blk, "mlp.norm")
    else:
        core = _attention(blk)
        norm(blk, "mlp.norm")
    if m.moe is None:
        _mlp(blk, "mlp", m.ffn_hidden, rows=ctx.tokens, bwd_comm=tp_in(blk, "mlp", "mlp.fc1"))
        fc2 = "mlp.fc2"
    else:
        _moe(blk, tp_in(blk, "mlp", "moe.router"))
        fc2 = "moe.experts.fc2"
    if m.parallel_residual:
        if not ctx.spec.train.fused_bias_dropout_add:
            _bias(blk, "mlp", ctx.sp_tokens * m.hidden)
        if ctx.st.dropout:
            blk.kernel("mlp.dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=ctx.sp_tokens * m.hidden)
        blk.kernel("mlp.branch_sum", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.sp_tokens * m.hidden)
        _tp_out(blk, "mlp", fc2)
        blk.kernel("mlp.residual", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.sp_tokens * m.hidden)
    else:
        _tp_out(blk, "mlp", fc2)
        _dropout_add(blk, "mlp")
    local = shard.layer(m, ctx.spec.parallel).total
    grad_accumulate(blk, local)
    gather, scatter = zero3(blk, local, "layer") or (None, None)
    ops = blk.ops()
    fwd = [op for op in ops if op.part is Part.FORWARD]
    bwd = [op for op in ops if op.part is Part.BACKWARD]
    recompute = ctx.spec.train.recompute
    if recompute is Recompute.FULL:
        redo = [op for op in fwd if op.overlap is not Overlap.PREFETCH]
    elif recompute is Recompute.SELECTIVE:
        redo = [op for op in fwd if op.name in core]
    else:
        redo = []
    head = [gather] if gather else []
    tail = [scatter] if scatter else []
    return fwd + head + _recomputed(redo) + bwd + tail


def grad_accumulate(blk: Block, params: Any) -> None:
    """Without gradient-accumulation fusion, each microbatch's weight gradients are added into
    the gradient buffer by a kernel of their own (Megatron without ``gradient_accumulation_fusion``:
    ``main_grad.add_(grad)``; DeepSpeed/FSDP: autograd's ``AccumulateGrad``), over the GPU's
    gradients of the block (its shard under ZeRO-2/3 and FSDP). Counted every microbatch (the
    first one's is an assignment in autograd: one add too many per step)."""
    ctx = blk.ctx
    if ctx.spec.train.grad_accum_fusion:
        return
    zero = ctx.spec.parallel.zero
    sharded = zero in (ZeroStage.Z2, ZeroStage.Z3, ZeroStage.FSDP) and ctx.st.active("dp")
    local = params / ctx.groups["dp"].size if sharded else params
    dtype = Dtype.FP32 if grad_bytes(ctx) == 4 else ctx.act
    blk.last_in_backward("grad_accumulate",
                         Kernel.make(Family.ELEMENTWISE, dtype, Pass.BWD, Elementwise.ADD, elements=local))
