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

A model whose layers differ (:mod:`~llmp.analytic.kinds`) gets one set of layer ops per kind:
dense or MoE MLP (:func:`_moe`), full or sliding-window attention; multi-head latent attention
(:func:`_mla`) replaces the QKV projection where the model has an ``mla`` block.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import finetune, kinds, layout, lowp, shard
from llmp.analytic.kernels import (
    AttentionKernel,
    Collective,
    CollectiveKind,
    Elementwise,
    Family,
    Fusion,
    Kernel,
    Pass,
    SoftmaxKind,
)
from llmp.analytic.kinds import LayerKind
from llmp.analytic.layout import Axis
from llmp.analytic.op import Op, Overlap, Part, Phase, Scope
from llmp.analytic.shape import Structure
from llmp.hardware.spec import Dtype
from llmp.spec.model import Activation, Norm, Position, Router
from llmp.spec.spec import Attention, CpComm, Dispatcher, Precision, Recompute, Spec, ZeroStage
from llmp.stacks import Profile, SelectiveRecompute, padded_vocab, profile

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
    """Query width on one GPU (heads / tp x the query/key head dim)."""
    kv_width: Any
    """Key width on one GPU (GQA: local kv heads x head dim; MLA: every local head's key)."""
    v_width: Any
    """Value width on one GPU (= kv_width except with MLA's own value head dim)."""
    o_width: Any
    """Attention output width on one GPU (proj's input): heads / tp x the value head dim."""
    head_dim_qk: Any
    head_dim_v: Any
    act: Dtype
    """Activation storage dtype (element-wise kernels, messages)."""
    e: int
    """Bytes per activation element (activations are FP32, FP16 or BF16: whole bytes)."""
    gemm: Dtype
    """Dtype whose peak the linear layers' GEMMs run at."""
    wide: Dtype
    """Dtype of the GEMMs a low-precision recipe leaves in BF16 (router, output head); = gemm
    otherwise."""
    attn: Dtype
    """Dtype of the attention core (low-precision recipes keep attention in BF16)."""
    recipe: lowp.Recipe | None
    """The low-precision recipe quantising the linear GEMMs' operands; None in 16/32-bit training."""
    groups: dict[str, layout.Group]
    vocab: Any
    """Rows of the embedding and head: the vocab padded as the stack pads it."""
    profile: Profile
    """The stack's profile (facts with no spec field)."""
    tuning: finetune.Tuning
    """What fine-tuning changes: frozen base weights, LoRA adapters, packed samples."""

    @classmethod
    def of(cls, spec: Spec, st: Structure) -> Context:
        m, p, prec = spec.model, spec.parallel, spec.train.precision
        tokens = spec.train.micro_batch * m.seq_len / p.cp
        act = {Precision.FP32: Dtype.FP32, Precision.TF32: Dtype.FP32, Precision.FP16: Dtype.FP16}.get(prec, Dtype.BF16)
        groups = layout.groups(spec, st)
        if m.mla is None:
            qk = v = m.head_dim
            kv = shard.kv_heads_local(m, p) * m.head_dim
        else:
            qk, v = m.mla.qk_head_dim, m.mla.v_head_dim
            kv = m.heads / p.tp * qk
        return cls(spec=spec, st=st, tokens=tokens,
                   sp_tokens=tokens / p.tp if p.sequence_parallel else tokens,
                   q_width=m.heads * qk / p.tp, kv_width=kv, v_width=kv * v / qk, o_width=m.heads * v / p.tp,
                   head_dim_qk=qk, head_dim_v=v,
                   act=act, e=act.bits // 8, gemm=prec.compute_dtype,
                   wide=Dtype.BF16 if prec.low_precision else prec.compute_dtype,
                   attn=Dtype.BF16 if prec.low_precision else prec.compute_dtype,
                   recipe=lowp.Recipe.of(spec), groups=groups,
                   vocab=padded_vocab(spec), profile=profile(spec.train.stack), tuning=finetune.Tuning.of(spec))

    def collective(self, kind: CollectiveKind, nbytes: Any, group: str) -> Collective:
        g = self.groups[group]
        return Collective(kind=kind, bytes=nbytes, group=g.size, ranks_per_node=g.ranks_per_node, tier=g.tier)


class Block:
    """Collects the forward ops of a block in order and their backward ops in reverse order."""

    def __init__(self, ctx: Context, scope: Scope, prefix: str, kind: int = 0) -> None:
        self.ctx, self.scope, self.prefix, self.kind = ctx, scope, prefix, kind
        self.fwd: list[Op] = []
        self._bwd: list[list[Op]] = []

    def _op(self, name: str, work: Kernel | Collective, phase: Phase, part: Part, **kw: Any) -> Op:
        return Op(name=f"{self.prefix}.{name}", work=work, phase=phase, part=part, scope=self.scope,
                  kind=self.kind, **kw)

    def gemm(self, name: str, m: Any, n: Any, k: Any, *, batch: Any = 1, weights: bool = True,
             dtype: Dtype | None = None, bwd_comm: tuple[Op, ...] = ()) -> None:
        """Y[m,n] = X[m,k] W[k,n]; backward dgrad (m,k,n) then ``bwd_comm``, then wgrad (k,n,m).
        The dgrad is task B's, the wgrad task W's (phase ``bwd_w``), or B's when the second
        operand is an activation (``weights = false``: its "weight gradient" is an input gradient).
        A frozen weight (LoRA's base) has no wgrad; an adapted layer GEMM gets its adapter
        (:meth:`adapter`)."""
        dt = dtype or self.ctx.gemm
        recipe = self.ctx.recipe if dt.low_precision and weights else None
        quantize_grad = []
        if recipe is not None:
            # The recipe's quantisation of the input and the weight before the forward GEMM, and
            # of the output gradient before dgrad (see :mod:`llmp.analytic.lowp`).
            for what, kernels_ in (("input", recipe.operand(batch * m * k, Pass.FWD)),
                                   ("weight", recipe.weight(batch * k * n))):
                for step, kern in kernels_:
                    self.fwd.append(self._op(f"{name}.quantize_{what}.{step}", kern, Phase.FWD, Part.FORWARD))
            quantize_grad = [self._op(f"{name}.quantize_grad.{step}", kern, Phase.BWD_ACT, Part.BACKWARD)
                             for step, kern in recipe.operand(batch * m * n, Pass.BWD)]
        fwd = Kernel.make(Family.GEMM, dt, m=m, n=n, k=k, batch=batch)
        self.fwd.append(self._op(name, fwd, Phase.FWD, Part.FORWARD))
        frozen = weights and self.ctx.tuning.frozen and finetune.ADAPTER not in name  # LoRA's adapters train
        self._bwd.append([
            *quantize_grad,
            self._op(f"{name}.dgrad", Kernel.make(Family.GEMM, dt, Pass.BWD, m=m, n=k, k=n, batch=batch),
                     Phase.BWD_ACT, Part.BACKWARD),
            *bwd_comm,
            *([] if frozen else [
                self._op(f"{name}.wgrad", Kernel.make(Family.GEMM, dt, Pass.BWD, m=k, n=n, k=m, batch=batch),
                         Phase.BWD_W if weights else Phase.BWD_ACT, Part.BACKWARD)])])
        if weights and self.scope is Scope.LAYER and self.ctx.tuning.adapts(name):
            self.adapter(name, m, n, k, batch, len(self._bwd) - 1)

    def adapter(self, name: str, m: Any, n: Any, k: Any, batch: Any, base: int) -> None:
        """LoRA's adapter beside the frozen GEMM ``name`` (``m x n x k``, ``batch`` experts), in
        the activation dtype (:mod:`llmp.analytic.finetune`): ``x A``, the all-gather (beside a
        column-parallel GEMM) or all-reduce (row-parallel) of its ``m x rank`` output over the
        layer's tensor-parallel group, ``(x A) B``, the add onto the frozen output; backward, in
        reverse, each GEMM's input and weight gradients, the collective's mirror, and after the
        frozen GEMM's backward (``base``: its place in the backward list) the add of the two ``dx``."""
        ctx = self.ctx
        shape = finetune.adapter_shape(ctx.tuning, ctx.spec.parallel, name)
        group = "etp" if ".experts." in name else "tp"
        self.gemm(f"{name}.lora_a", m, shape.a_out, k, batch=batch, dtype=ctx.wide)
        if ctx.st.active(group) and (shape.gather or shape.reduce):
            rows = batch * m * ctx.tuning.rank * ctx.e
            kind = CollectiveKind.ALL_GATHER if shape.gather else CollectiveKind.ALL_REDUCE
            back = CollectiveKind.REDUCE_SCATTER if shape.gather else CollectiveKind.ALL_REDUCE
            axis = Axis.EP if group == "etp" else Axis.TP
            self.comm(f"{name}.lora_a.tp_{kind.value}", kind, rows, group, axis)
            self.bwd_comm(self.collective(f"{name}.lora_a.tp_grad_{back.value}", back, rows, group, axis,
                                          part=Part.BACKWARD))
        self.gemm(f"{name}.lora_b", m, n, shape.b_in, batch=batch, dtype=ctx.wide)
        self.kernel(f"{name}.lora_add", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=batch * m * n,
                    backward=False)
        add = Kernel.make(Family.ELEMENTWISE, ctx.act, Pass.BWD, Elementwise.ADD, elements=batch * m * k)
        self._bwd.insert(base, [self._op(f"{name}.lora_grad_add", add, Phase.BWD_ACT, Part.BACKWARD)])

    def kernel(self, name: str, family: Family, *, dtype: Dtype | None = None, variant: str = "",
               bwd_phase: Phase = Phase.BWD_ACT, backward: bool = True, **dims: Any) -> None:
        """A non-GEMM kernel and its backward (the same kernel with ``pass_ = bwd``); ``backward =
        false``: none (an add, whose gradient passes through; a frozen embedding)."""
        dt = dtype or self.ctx.act
        self.fwd.append(self._op(name, Kernel.make(family, dt, Pass.FWD, variant, **dims), Phase.FWD, Part.FORWARD))
        if backward:
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


def tp_in(blk: Block, name: str, gemm: str, width: Any = None) -> tuple[Op, ...]:
    """Entering a column-parallel GEMM whose input is ``width`` wide (default: hidden). Returns
    the backward collectives for the GEMM's dgrad.

    With SP: all-gather the sequence shards (forward); backward re-gathers the input for the
    wgrad (hidden behind dgrad, Megatron's async grad) and reduce-scatters the input gradient
    (hidden behind wgrad). Without SP: the forward is the identity and the backward all-reduces
    the input gradient, overlapped with wgrad (Megatron's async tensor-parallel all-reduce).
    """
    ctx = blk.ctx
    if not ctx.st.active("tp"):
        return ()
    full = ctx.tokens * (ctx.spec.model.hidden if width is None else width) * ctx.e
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


def _qkv(blk: Block) -> None:
    """The fused QKV projection (column-parallel), then rotary embedding."""
    ctx = blk.ctx
    m = ctx.spec.model
    bwd = tp_in(blk, "attn", "attn.qkv")
    blk.gemm("attn.qkv", ctx.tokens, ctx.q_width + ctx.kv_width + ctx.v_width, m.hidden, bwd_comm=bwd)
    if m.position is Position.ROTARY:
        _rotary(blk)


def _mla(blk: Block) -> None:
    """Multi-head latent attention's projections (DeepSeek-V2 §2.1; Megatron-Core
    ``MLASelfAttention``, NVIDIA/Megatron-LM@003b4ce:megatron/core/transformer/
    multi_latent_attention.py).

    The down projections ``linear_q_down_proj`` (hidden -> q_lora_rank) and ``linear_kv_down_proj``
    (hidden -> kv_lora_rank + qk_rope_head_dim) are replicated on every TP rank (TE ``parallel_mode
    = 'duplicated'``) and run on the rank's own rows (its sequence shard with SP); RMSNorms
    ``q_layernorm`` / ``kv_layernorm`` follow on the compressed widths. The up projections are
    column-parallel over the heads: ``linear_q_up_proj`` (q_lora_rank -> heads x (nope + rope)) and
    ``linear_kv_up_proj`` (kv_lora_rank -> heads x (nope + v)); with SP each first all-gathers its
    compressed input (and the shared rotary key part), the narrow latent instead of the hidden
    state. Without ``q_lora_rank`` the query is projected from the hidden state directly
    (``linear_q_proj``). Rotary embedding acts on the rope dims of q and the one shared rope key;
    the fused MLA RoPE kernels (``fused_apply_mla_rope_for_q/_kv``) write whole q and k, eager
    PyTorch rotates the rope parts and joins q and k with ``torch.cat``.
    """
    ctx = blk.ctx
    m, tp = ctx.spec.model, ctx.spec.parallel.tp
    a = m.mla
    assert a is not None
    heads = m.heads / tp
    rows = ctx.sp_tokens
    if not ctx.st.q_compressed:
        bwd = tp_in(blk, "attn.q", "attn.q_proj")
        blk.gemm("attn.q_proj", ctx.tokens, heads * a.qk_head_dim, m.hidden, bwd_comm=bwd)
    else:
        blk.gemm("attn.q_down", rows, a.q_lora_rank, m.hidden)
        blk.kernel("attn.q_norm", Family.NORM, tokens=rows, hidden=a.q_lora_rank, rms=True)
        bwd = tp_in(blk, "attn.q", "attn.q_up", width=a.q_lora_rank)
        blk.gemm("attn.q_up", ctx.tokens, heads * a.qk_head_dim, a.q_lora_rank, bwd_comm=bwd)
    blk.gemm("attn.kv_down", rows, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden)
    blk.kernel("attn.kv_norm", Family.NORM, tokens=rows, hidden=a.kv_lora_rank, rms=True)
    bwd = tp_in(blk, "attn.kv", "attn.kv_up", width=a.kv_lora_rank + a.qk_rope_head_dim)
    blk.gemm("attn.kv_up", ctx.tokens, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, bwd_comm=bwd)
    qk = ctx.tokens * (ctx.q_width + ctx.kv_width)
    if ctx.spec.train.fused_rope:
        blk.kernel("attn.rotary", Family.ELEMENTWISE, variant=Elementwise.ROTARY, elements=qk)
    else:
        rope = ctx.tokens * (heads + 1) * a.qk_rope_head_dim
        blk.kernel("attn.rotary", Family.ELEMENTWISE, variant=Elementwise.ROTARY_UNFUSED, elements=rope)
        blk.kernel("attn.qk_cat", Family.COPY, elements=qk)


def _core(blk: Block, kind: LayerKind) -> str:
    """The attention core as the stack launches it; returns the name of its last op.

    Fused kernels (flash2, flash3, cudnn, sdpa): one kernel, causal with the full key length (a
    load-balanced CP rank does 1/cp of the causal work), over the last ``window`` keys in a
    sliding-window layer (FlashAttention-2 ``window_size``, cuDNN ``sliding_window_length``,
    FlexAttention's block mask all skip the tiles outside the band). Unfused (Megatron
    ``ParallelAttention``, GPT-NeoX ``ParallelSelfAttention.attention``): ``baddbmm`` scores over
    (batch x heads), the full s x s matrix (a dense GEMM computes the masked part too), then either
    Megatron's fused scale + causal mask + softmax kernel, or ``masked_fill_`` of the mask and a
    plain softmax (also where the sequence is longer than the fused kernel accepts), dropout on the
    probabilities, ``bmm`` with V.
    """
    ctx = blk.ctx
    m, t = ctx.spec.model, ctx.spec.train
    heads, seq_q = _core_shape(ctx)
    batch = t.micro_batch
    if t.attention.fused:
        # packed samples attend within themselves (llmp.analytic.finetune.packed_attention)
        batch, seq_q, seq_kv, window = finetune.packed_attention(t.finetune, batch, m.seq_len, seq_q, m.window,
                                                                 kind.windowed)
        blk.kernel("attn.core", Family.ATTENTION, variant=_FUSED_KERNEL[t.attention], dtype=ctx.attn, batch=batch,
                   heads=heads, kv_heads=ctx.kv_width / ctx.head_dim_qk, seq_q=seq_q, seq_kv=seq_kv,
                   head_dim=ctx.head_dim_qk, head_dim_v=ctx.head_dim_v, window=window, causal=True, flash=True)
        return "attn.core"
    bh = batch * heads
    scores = bh * seq_q * m.seq_len
    blk.gemm("attn.scores", seq_q, m.seq_len, ctx.head_dim_qk, batch=bh, weights=False, dtype=ctx.attn)
    fused = (t.attention is Attention.UNFUSED_FUSED_SOFTMAX
             and at_most(m.seq_len, ctx.profile.fused_softmax_max_seq.value))
    if fused:
        blk.kernel("attn.softmax", Family.SOFTMAX, variant=SoftmaxKind.CAUSAL_FUSED, rows=bh * seq_q, cols=m.seq_len)
    else:
        blk.kernel("attn.mask", Family.ELEMENTWISE, variant=Elementwise.MASKED_FILL, elements=scores)
        blk.kernel("attn.softmax", Family.SOFTMAX, rows=bh * seq_q, cols=m.seq_len)
    if ctx.st.dropout:
        blk.kernel("attn.prob_dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=scores)
    blk.gemm("attn.context", seq_q, ctx.head_dim_v, m.seq_len, batch=bh, weights=False, dtype=ctx.attn)
    return "attn.context"


def _core_shape(ctx: Context) -> tuple[Any, Any]:
    """(heads, query rows) of one rank's attention: a sequence shard of every tp head, or with
    Ulysses (``cp_comm = a2a``) the whole sequence of its 1/cp of them. Either way the rank does
    1/cp of the causal work."""
    m, p = ctx.spec.model, ctx.spec.parallel
    if ctx.st.active("cp") and p.cp_comm is CpComm.A2A:
        return m.heads / (p.tp * p.cp), m.seq_len
    return m.heads / p.tp, m.seq_len / p.cp


def _cp_sizes(ctx: Context) -> tuple[Any, Any, Any]:
    """Bytes of one rank's K and V block, of its Q, K, V, and of its attention output (its sequence
    shard: ``micro_batch * seq_len / cp`` rows of its tp heads)."""
    rows = ctx.spec.train.micro_batch * ctx.spec.model.seq_len / ctx.spec.parallel.cp
    return (rows * (ctx.kv_width + ctx.v_width) * ctx.e, rows * (ctx.q_width + ctx.kv_width + ctx.v_width) * ctx.e,
            rows * ctx.o_width * ctx.e)


def _cp_before(blk: Block) -> None:
    """What the cp ranks exchange before the attention core (``parallel.cp_comm``, TE's
    ``cp_comm_type``; see :class:`~llmp.spec.spec.CpComm`), with its backward, which runs after the
    core's backward."""
    ctx = blk.ctx
    p = ctx.spec.parallel
    kv_block, qkv, _ = _cp_sizes(ctx)
    if p.cp_comm is CpComm.ALL_GATHER:
        # The whole sequence's K and V, exposed; dK and dV reduce-scattered back.
        blk.comm("attn.cp_kv_all_gather", CollectiveKind.ALL_GATHER, p.cp * kv_block, "cp", Axis.CP)
        blk.bwd_comm(blk.comm("attn.cp_dkv_reduce_scatter", CollectiveKind.REDUCE_SCATTER, p.cp * kv_block, "cp",
                              Axis.CP, part=Part.BACKWARD))
    elif p.cp_comm is CpComm.A2A:
        # Ulysses: sequence shards of every head become whole sequences of 1/cp of the heads (an
        # all-to-all's size is the rank's own buffer); dQ, dK, dV go back the same way.
        blk.comm("attn.cp_qkv_all_to_all", CollectiveKind.ALL_TO_ALL, qkv, "cp", Axis.CP)
        blk.bwd_comm(blk.comm("attn.cp_dqkv_all_to_all", CollectiveKind.ALL_TO_ALL, qkv, "cp", Axis.CP,
                              part=Part.BACKWARD))


def _cp_after(blk: Block, core: str) -> None:
    """What the cp ranks exchange with or after the attention core, and its backward."""
    ctx = blk.ctx
    p = ctx.spec.parallel
    kv_block, _, out = _cp_sizes(ctx)
    if p.cp_comm is CpComm.P2P:
        # Ring attention (Liu et al. 2023): cp - 1 exchanges of the local K and V block, each
        # overlapped with the attention of the block in hand; the backward also returns dK, dV.
        blk.comm("attn.cp_ring", CollectiveKind.SEND_RECV, kv_block, "cp", Axis.CP,
                 overlap=Overlap.PARTNER, partner=core, count=p.cp - 1)
        blk.bwd_comm(blk.comm("attn.cp_ring_grad", CollectiveKind.SEND_RECV, 2 * kv_block, "cp", Axis.CP,
                              part=Part.BACKWARD, overlap=Overlap.PARTNER,
                              partner=f"{core}.bwd" if core == "attn.core" else f"{core}.dgrad",
                              count=p.cp - 1))
    elif p.cp_comm is CpComm.A2A:
        blk.comm("attn.cp_out_all_to_all", CollectiveKind.ALL_TO_ALL, out, "cp", Axis.CP)
        blk.bwd_comm(blk.comm("attn.cp_dout_all_to_all", CollectiveKind.ALL_TO_ALL, out, "cp", Axis.CP,
                              part=Part.BACKWARD))


_FUSED_KERNEL: dict[Attention, AttentionKernel] = {
    Attention.FLASH2: AttentionKernel.FLASH2, Attention.FLASH3: AttentionKernel.FLASH3,
    Attention.CUDNN: AttentionKernel.CUDNN,
    # torch SDPA's default backend order puts its FlashAttention-2 kernels first on NVIDIA GPUs
    # (pytorch/pytorch@v2.4.0 aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, priority_order).
    Attention.SDPA: AttentionKernel.FLASH2,
}
"""The fused kernel each attention choice launches."""


def _attention(blk: Block, kind: LayerKind, *, reduce: bool = True) -> list[str]:
    """Norm, QKV (or MLA's projections), rotary, the attention core, proj. Returns the names of
    the core's ops (what ``recompute = selective`` recomputes). ``reduce = false``: a
    parallel-residual branch, whose proj output is summed with the MLP's before one TP reduction."""
    ctx = blk.ctx
    m = ctx.spec.model
    norm(blk, "attn.norm")
    if m.mla is None:
        _qkv(blk)
    else:
        _mla(blk)
    start = len(blk.fwd)
    cp = ctx.st.active("cp")
    if cp:
        _cp_before(blk)
    core = _core(blk, kind)
    if cp:
        _cp_after(blk, core)
    core_ops = [op.name for op in blk.fwd[start:]]
    blk.gemm("attn.proj", ctx.tokens, m.hidden, ctx.o_width)
    if reduce:
        _tp_out(blk, "attn", "attn.proj")
        _dropout_add(blk, "attn")
    else:
        _dropout_add(blk, "attn", residual=False)
    return core_ops


def _mlp(blk: Block, tag: str, width: Any, *, rows: Any, batch: Any = 1,
         bwd_comm: tuple[Op, ...] = (), tp: Any = None) -> None:
    """fc1 (fused gate+up for SwiGLU), activation, fc2 on ``rows`` tokens, ``width / tp`` wide
    (``tp``: the tensor-parallel degree splitting it, default ``parallel.tp``).

    The activation with its bias is one kernel when the stack fuses them (Megatron bias-GELU,
    bias-SwiGLU, Liger SwiGLU). Unfused: the bias add is its own kernel (GPT-NeoX
    ``activation_func(intermediate + bias)``) and SwiGLU is eager ``silu(a) * b`` (torchtitan
    ``FeedForward``): a silu kernel, priced as the one-input GELU kernel (same traffic, one
    launch), and a two-input multiply, priced as an add.
    """
    ctx = blk.ctx
    m = ctx.spec.model
    tp = ctx.spec.parallel.tp if tp is None else tp
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


def _moe(blk: Block) -> None:
    """A MoE MLP as Megatron-Core runs it (``MoELayer``: router, token dispatcher, experts,
    shared experts; NVIDIA/Megatron-LM@0014f13:megatron/core/transformer/moe/token_dispatcher.py,
    experts.py ``TEGroupedMLP``).

    The layer takes the rank's own tokens: its sequence shard ``b s / (cp tp)`` (MoE with tensor
    parallelism needs sequence parallelism) or ``b s / cp`` without TP. The router scores them;
    each token goes to ``top_k`` experts, ``experts / ep`` of which live on each expert-parallel
    rank; an expert's matrices are split over ``etp`` ranks of the TP group. The busiest rank's
    experts take ``imbalance`` times a balanced share of the routed rows (capped at the capacity
    factor when tokens beyond it are dropped), and that rank sets the pace of the grouped GEMMs
    and of the exchanges.

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
    ctx = blk.ctx
    m, p = ctx.spec.model, ctx.spec.parallel
    e = m.moe
    assert e is not None
    h, etp = m.hidden, p.expert_tp
    rows = ctx.sp_tokens
    local_experts = e.experts / p.ep
    routed = rows * e.top_k * e.load * etp  # rows the busiest rank's local experts compute
    spread = ctx.st.active("ep") or ctx.st.active("etp")
    _router(blk, rows)
    if p.dispatcher is Dispatcher.ALLGATHER:
        gathered = rows * etp * p.ep * h * ctx.e
        if ctx.st.active("etp_ep"):
            _etp(blk, "dispatch_all_gather", CollectiveKind.ALL_GATHER, gathered, "etp_ep")
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
        if spread and ctx.st.local_experts > 1:
            blk.kernel("moe.sort_chunks", Family.COPY, elements=routed * h)
    _mlp(blk, "moe.experts", e.expert_ffn_hidden, rows=routed / local_experts, batch=local_experts, tp=etp)
    if p.dispatcher is Dispatcher.ALLGATHER:
        blk.kernel("moe.unpermute", Family.COPY, elements=routed * h)
        if ctx.st.active("etp_ep"):
            _etp(blk, "combine_reduce_scatter", CollectiveKind.REDUCE_SCATTER, gathered, "etp_ep")
    elif p.dispatcher is Dispatcher.DEEPEP:
        blk.kernel("moe.unpermute", Family.COPY, elements=routed * h)
        if ctx.st.active("etp_ep"):
            _a2a(blk, "ep_combine", rows * ctx.st.dispatch_copies * etp * e.load * h * ctx.e, "etp_ep")
    else:
        if spread and ctx.st.local_experts > 1:
            blk.kernel("moe.unsort_chunks", Family.COPY, elements=routed * h)
        if ctx.st.active("etp"):
            _etp(blk, "etp_reduce_scatter", CollectiveKind.REDUCE_SCATTER, routed * h * ctx.e)
        if ctx.st.active("ep"):
            _a2a(blk, "ep_combine", rows * ctx.st.dispatch_copies * e.load * h * ctx.e)
        # Read a token's top_k rows, write the token: (top_k + 1) rows moved, half a copy each.
        blk.kernel("moe.unpermute", Family.COPY, elements=(e.top_k + 1) * rows * h / 2)
    if ctx.st.shared_experts:
        _mlp(blk, "moe.shared", e.shared_experts * e.expert_ffn_hidden, rows=ctx.tokens,
             bwd_comm=tp_in(blk, "moe.shared", "moe.shared.fc1"))
        _tp_out(blk, "moe.shared", "moe.shared.fc2")
        blk.kernel("moe.shared_add", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=rows * h)


def _recomputed(ops: list[Op]) -> list[Op]:
    """Forward ops run again in the backward (activation recomputation)."""
    out = []
    for op in ops:
        partner = f"recompute.{op.partner}" if op.partner else ""
        out.append(Op(name=f"recompute.{op.name}", work=op.work, phase=op.phase, part=Part.BACKWARD,
                      scope=op.scope, count=op.count, axis=op.axis, overlap=op.overlap,
                      partner=partner, recompute=True, kind=op.kind))
    return out


def _local(params: Any | shard.LocalParams) -> shard.LocalParams:
    return params if isinstance(params, shard.LocalParams) else shard.LocalParams(dense=params, expert=0)


def zero3(blk: Block, params: Any | shard.LocalParams, name: str,
          grads: Any | shard.LocalParams | None = None) -> tuple[list[Op], list[Op]]:
    """ZeRO-3/FSDP: gather a block's parameters before its forward and again before its
    backward, and reduce-scatter its gradients after the backward (Rajbhandari et al. 2020,
    §5.3). Routed-expert weights are sharded over their own expert-data-parallel group (their
    replicas: dp x cp / ep), the rest over dp x cp. ``grads``: the parameters that have gradients
    (default all; LoRA: the adapters alone, the frozen weights are gathered but reduce nothing).
    Places the forward gathers first in the block; returns the backward gathers and the
    reduce-scatters."""
    ctx = blk.ctx
    if ctx.spec.parallel.zero not in (ZeroStage.Z3, ZeroStage.FSDP):
        return [], []
    local = _local(params)
    trained = local if grads is None else _local(grads)
    overlap = Overlap.PREFETCH if blk.scope is Scope.LAYER else Overlap.NONE
    gathers: list[Op] = []
    scatters: list[Op] = []
    parts = [("", local.dense, trained.dense, "dp")]
    if not (isinstance(local.expert, int) and local.expert == 0):
        parts.append(("expert_", local.expert, trained.expert, "expert_dp"))
    for label, n, g, group in reversed(parts):
        if not ctx.st.active(group):
            continue
        full = n * ctx.e
        blk.fwd.insert(0, blk.collective(f"{name}.{label}zero_all_gather", CollectiveKind.ALL_GATHER, full, group,
                                         Axis.DP, overlap=overlap))
        gathers.insert(0, blk.collective(f"{name}.{label}zero_grad_all_gather", CollectiveKind.ALL_GATHER, full,
                                         group, Axis.DP, part=Part.BACKWARD, overlap=overlap))
        if not (isinstance(g, int | float) and g == 0):
            scatters.insert(0, blk.collective(f"{name}.{label}zero_grad_reduce_scatter",
                                              CollectiveKind.REDUCE_SCATTER, g * grad_bytes(ctx), group, Axis.DP,
                                              part=Part.BACKWARD, overlap=overlap, weight_grads=True))
    return gathers, scatters


def grad_bytes(ctx: Context) -> int:
    """Bytes per gradient element, held and reduced over dp: FP32 where the stack keeps FP32 main
    grads for this precision (its profile's ``fp32_grads``: Megatron's ``grad_reduce_in_fp32`` for
    BF16 and FP8 runs, whose gradient-accumulation fusion adds every microbatch's wgrad into the
    FP32 ``main_grad``; FSDP's FP32 shards), or as ``train.fp32_grads`` says; else the model dtype.
    Without master weights there is no FP32 copy to accumulate next to: the model dtype."""
    t = ctx.spec.train
    if t.precision in (Precision.FP32, Precision.TF32):
        return 4
    fp32 = t.fp32_grads if t.fp32_grads is not None else t.precision in ctx.profile.fp32_grads.value
    return 4 if (fp32 and t.master_weights) else ctx.e


def layer_ops(ctx: Context, index: int = 0) -> list[Op]:
    """The ops of one transformer layer of kind ``ctx.st.kinds[index]`` (scope ``layer``)."""
    kind = ctx.st.kinds[index]
    prefix = kinds.label(kind, ctx.st.kinds)
    return transformer_layer(ctx, kind, Block(ctx, Scope.LAYER, prefix, index))


def _layer_body(ctx: Context, kind: LayerKind, blk: Block) -> list[str]:
    """Puts a layer of ``kind``'s forward and backward ops (no recompute yet) in ``blk``; returns
    the names of its attention core."""
    m = ctx.spec.model
    if m.parallel_residual:
        core = _attention(blk, kind, reduce=False)
        if not m.shared_norm:
            norm(blk, "mlp.norm")
    else:
        core = _attention(blk, kind)
        norm(blk, "mlp.norm")
    if kind.moe:
        _moe(blk)
    else:
        _mlp(blk, "mlp", m.ffn_hidden, rows=ctx.tokens, bwd_comm=tp_in(blk, "mlp", "mlp.fc1"))
    if m.parallel_residual:
        if not ctx.spec.train.fused_bias_dropout_add:
            _bias(blk, "mlp", ctx.sp_tokens * m.hidden)
        if ctx.st.dropout:
            blk.kernel("mlp.dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT,
                       elements=ctx.sp_tokens * m.hidden)
        blk.kernel("mlp.branch_sum", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.sp_tokens * m.hidden)
        _tp_out(blk, "mlp", "mlp.fc2")
        blk.kernel("mlp.residual", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.sp_tokens * m.hidden)
    else:
        if not kind.moe:
            _tp_out(blk, "mlp", "mlp.fc2")
        _dropout_add(blk, "mlp")
    return core


def transformer_layer(ctx: Context, kind: LayerKind, blk: Block) -> list[Op]:
    """One transformer layer's ops in ``blk``: forward, then recompute, then backward.

    Sequential residual: ``x = x + attn(norm1(x)); x = x + mlp(norm2(x))``, a TP reduction after
    each branch (a MoE MLP's routed output comes back on the rank's own tokens: its shared experts
    reduce over TP by themselves). Parallel residual (GPT-NeoX ``gpt_j_residual``, GPT-J, PaLM):
    both branches read ``x`` through their own norm (one shared norm with ``shared_norm``), their
    outputs are summed (the attention output's bias-dropout without residual, then the MLP's
    bias-dropout-add onto it), reduced over TP once, and added to ``x`` once.

    ``recompute = full`` re-runs each layer's whole forward (norms, GEMMs, TP and EP collectives,
    everything but FSDP's prefetched gathers) before its backward (Megatron
    ``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``;
    GPT-NeoX/DeepSpeed ``checkpoint_activations`` with ``checkpoint_num_layers = 1``).
    ``recompute = selective`` re-runs what the stack's selective mode re-runs
    (:func:`recomputed_forward`). The embedding and the head are never recomputed.
    """
    core = _layer_body(ctx, kind, blk)
    local = shard.layer(ctx.spec.model, ctx.spec.parallel, kind, ctx.st.q_compressed)
    trained = _adapters(blk.fwd) if ctx.tuning.frozen else local
    grad_accumulate(blk, trained)
    gathers, scatters = zero3(blk, local, "layer" if blk.scope is Scope.LAYER else "block", grads=trained)
    ops = blk.ops()
    fwd = [op for op in ops if op.part is Part.FORWARD]
    bwd = [op for op in ops if op.part is Part.BACKWARD]
    return fwd + gathers + recomputed_forward(ctx, kind, fwd, core) + bwd + scatters


def recomputed_forward(ctx: Context, kind: LayerKind, fwd: list[Op], core: list[str]) -> list[Op]:
    """The forward work a layer of ``kind`` re-runs before its backward, as the stack recomputes it.

    ``full``: every forward op but FSDP's prefetched parameter gathers. ``selective`` by the
    stack's :class:`~llmp.stacks.SelectiveRecompute`: the attention core (and the context-parallel
    ring exchanges that feed it; Korthikanti et al. 2022 §5, Megatron-Core
    ``--recompute-granularity selective``), or torchtitan's op-level SAC (:func:`op_sac_matmuls`):
    every op of the layer except the saved matmul outputs, the SDPA kernel (with its ring
    exchanges) and reduce-scatters, stopping after the last op whose output the backward needs.
    Op-level SAC is modelled for dense-MLP layers only (the policy llmp cites, torchtitan v0.1.0,
    has no MoE model to apply it to): a MoE layer under it re-runs its attention core, as the
    other stacks' selective mode does, and the memory model keeps that layer's activations to
    match (:mod:`llmp.compose.memory`).
    """
    recompute = ctx.spec.train.recompute
    if recompute is Recompute.FULL:
        return _recomputed([op for op in fwd if op.overlap is not Overlap.PREFETCH])
    if recompute is not Recompute.SELECTIVE:
        return []
    if ctx.profile.selective_recompute.value is SelectiveRecompute.CORE_ATTENTION or kind.moe:
        return _recomputed([op for op in fwd if op.name in core])
    return _op_sac(ctx, fwd, core)


@dataclass(frozen=True, slots=True)
class Matmul:
    """One ``aten.mm`` of a layer's forward as op-level SAC counts them: a linear module's product."""

    op: str
    """The layer op it belongs to (llmp runs q/k/v, and a gated MLP's gate and up, as one GEMM)."""
    module: str
    """The linear module (``wq``, ``wk``, ``wv``, ``wo``, ``w1``, ``w3``, ``w2`` in torchtitan's Llama)."""
    rows: Any
    width: Any
    """Output columns on this GPU."""
    saved: bool
    """Its output is kept for the backward (the 1st, 3rd, 5th, ... matmul); else it is re-run."""


def _modules(ctx: Context, op: Op) -> tuple[tuple[str, Any], ...]:
    """The linear modules one GEMM op stands for, in execution order, with their widths
    (pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py: Attention wq, wk, wv, wo;
    FeedForward w1, w3 (the gate, for SwiGLU), w2)."""
    assert isinstance(op.work, Kernel)
    n = op.work.dim("n")
    if op.name.endswith("attn.qkv"):
        return (("wq", ctx.q_width), ("wk", ctx.kv_width), ("wv", ctx.v_width))
    if op.name.endswith(".fc1") and ctx.spec.model.activation.gated:
        return (("w1", n / 2), ("w3", n / 2))
    last = op.name.rsplit(".", 1)[-1]
    return ({"proj": "wo", "fc1": "w1", "fc2": "w2"}.get(last, last), n),


def _is_mm(op: Op, core: list[str]) -> bool:
    """A linear layer's product (``aten.mm``): a GEMM outside the attention core (whose products
    are batched ``bmm``) and not an expert's grouped GEMM."""
    if (not isinstance(op.work, Kernel) or op.work.family is not Family.GEMM or op.name in core
            or finetune.ADAPTER in op.name):  # a LoRA adapter's GEMM is not a module of torchtitan's list
        return False
    try:
        return float(op.work.dim("batch")) == 1
    except TypeError:  # a free symbol for the experts per rank: grouped
        return False


def op_sac_matmuls(ctx: Context, kind: LayerKind | None = None, fwd: list[Op] | None = None,
                   core: list[str] | None = None) -> tuple[Matmul, ...]:
    """Every matmul of the forward of one dense-MLP layer of ``kind`` (default: the model's first
    kind) and whether op-level SAC saves it: torchtitan counts ``aten.mm`` calls per checkpointed
    layer and saves the odd ones (``meta[mm_count] % 2 == 0`` is recomputed after the increment;
    pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/parallelize_llama.py, _custom_policy). For
    SwiGLU that saves wq, wv, w1, w2 and re-runs wk, wo, w3. The memory model reads the same list
    (:mod:`llmp.compose.memory`)."""
    if fwd is None or core is None:
        kind = ctx.st.kinds[0] if kind is None else kind
        blk = Block(ctx, Scope.LAYER, "layer")
        core = _layer_body(ctx, kind, blk)
        fwd = blk.fwd
    assert kind is None or not kind.moe, "op-level SAC is modelled for dense-MLP layers only"
    out, count = [], 0
    for op in fwd:
        if not _is_mm(op, core):
            continue
        assert isinstance(op.work, Kernel)
        for module, width in _modules(ctx, op):
            count += 1
            out.append(Matmul(op=op.name, module=module, rows=op.work.dim("m"), width=width, saved=count % 2 == 1))
    return tuple(out)


def _op_sac(ctx: Context, fwd: list[Op], core: list[str]) -> list[Op]:
    """The recompute of torchtitan's op-level SAC (see :func:`recomputed_forward`)."""
    saved_core = ctx.spec.train.attention.fused  # the SDPA kernels are in the save list; bmm/softmax are not
    matmuls: dict[str, list[Matmul]] = {}
    for mm in op_sac_matmuls(ctx, fwd=fwd, core=core):
        matmuls.setdefault(mm.op, []).append(mm)
    redo: list[Op] = []
    renamed: dict[str, str] = {}
    for op in fwd:
        if op.overlap is Overlap.PREFETCH:
            continue
        if op.name in core and saved_core:
            continue
        if isinstance(op.work, Collective) and op.work.kind is CollectiveKind.REDUCE_SCATTER:
            continue
        if op.name in matmuls:
            assert isinstance(op.work, Kernel)
            for mm in matmuls[op.name]:
                if not mm.saved:
                    work = Kernel.make(Family.GEMM, op.work.dtype, m=mm.rows, n=mm.width, k=op.work.dim("k"), batch=1)
                    renamed.setdefault(op.name, f"{op.name}.{mm.module}")
                    redo.append(dataclasses.replace(op, name=f"{op.name}.{mm.module}", work=work))
            continue
        redo.append(op)
    # A collective that hides behind a split GEMM hides behind its first re-run product.
    redo = [dataclasses.replace(op, partner=renamed[op.partner]) if op.partner in renamed else op for op in redo]
    # Early stop (torch.utils.checkpoint): nothing after the last re-run op whose output a backward
    # reads; the layer's closing residual add (and a bias-dropout-add's add) saves nothing.
    while redo and isinstance(redo[-1].work, Kernel) and redo[-1].work.variant == Elementwise.ADD \
            and redo[-1].name.endswith("residual"):
        redo.pop()
    return _recomputed(redo)


@dataclass(frozen=True, kw_only=True, slots=True)
class LowpWeights:
    """The weights one layer quantises for its low-precision GEMMs."""

    dense: Any
    """Elements replicated over dp x cp (attention, dense and shared-expert MLPs)."""
    expert: Any
    """Routed-expert elements, replicated over the expert-data-parallel group."""
    modules: Any
    """Linear modules (one amax history each under delayed scaling)."""

    @property
    def total(self) -> Any:
        return self.dense + self.expert


def lowp_weights(ctx: Context, kind: LayerKind) -> LowpWeights:
    """The weights one layer of ``kind`` quantises for its low-precision GEMMs, read off the
    layer's own weight-quantisation ops (so memory and the parameter all-gather count exactly the
    GEMMs the graph runs in low precision); zero without a recipe."""
    if ctx.recipe is None:
        return LowpWeights(dense=0, expert=0, modules=0)
    blk = Block(ctx, Scope.LAYER, "layer")
    _layer_body(ctx, kind, blk)
    casts = [op for op in blk.fwd if ".quantize_weight." in op.name and op.name.endswith(".cast")]
    dense: Any = 0
    expert: Any = 0
    for op in casts:
        if isinstance(op.work, Kernel):
            if ".moe.experts." in op.name:
                expert = expert + op.work.dim("elements")
            else:
                dense = dense + op.work.dim("elements")
    return LowpWeights(dense=dense, expert=expert, modules=len(casts))


def _adapters(fwd: list[Op]) -> shard.LocalParams:
    """The LoRA adapter weights among a block's forward ops (``x A`` and ``(x A) B``, each ``m x n x
    k`` GEMM holding a ``k x n`` weight per expert), on this GPU: routed experts' apart."""
    dense: Any = 0
    expert: Any = 0
    for op in fwd:
        if isinstance(op.work, Kernel) and op.name.rsplit(".", 1)[-1] in ("lora_a", "lora_b"):
            n = op.work.dim("batch") * op.work.dim("k") * op.work.dim("n")
            if ".moe.experts." in op.name:
                expert = expert + n
            else:
                dense = dense + n
    return shard.LocalParams(dense=dense, expert=expert)


def adapter_weights(ctx: Context, kind: LayerKind) -> shard.LocalParams:
    """The LoRA adapter weights one layer of ``kind`` holds on one GPU (zero without LoRA): read off
    the layer's own adapter GEMMs, so the optimizer, the gradient sync and memory count exactly the
    adapters the graph runs."""
    if not ctx.tuning.adapted:
        return shard.LocalParams(dense=0, expert=0)
    blk = Block(ctx, Scope.LAYER, "layer")
    _layer_body(ctx, kind, blk)
    return _adapters(blk.fwd)


def adapter_tensors(ctx: Context, kind: LayerKind) -> int:
    """LoRA weight tensors (each adapter's A and B) in one layer of ``kind``: what a per-tensor
    optimizer loops over."""
    if not ctx.tuning.adapted:
        return 0
    blk = Block(ctx, Scope.LAYER, "layer")
    _layer_body(ctx, kind, blk)
    return sum(1 for op in blk.fwd if op.name.rsplit(".", 1)[-1] in ("lora_a", "lora_b"))


def trainable(ctx: Context, params: shard.LocalParams, layers: tuple[Any, ...]) -> shard.LocalParams:
    """The parameters with gradients, optimizer states and an update on a rank holding ``params``
    and ``layers`` of each kind: all of them, or with LoRA's frozen base only the layers'
    adapters (:mod:`llmp.analytic.finetune`)."""
    if not ctx.tuning.frozen:
        return params
    dense: Any = 0
    expert: Any = 0
    for kind, n in zip(ctx.st.kinds, layers):
        w = adapter_weights(ctx, kind)
        dense, expert = dense + n * w.dense, expert + n * w.expert
    return shard.LocalParams(dense=dense, expert=expert)


GRAD_ACCUMULATE = "grad_accumulate"
"""The name (in each block) of the kernel that adds a microbatch's weight gradients into the
gradient buffer: its size depends on how ZeRO shards that buffer over the replicas."""


def grad_accumulate(blk: Block, params: Any | shard.LocalParams) -> None:
    """Without gradient-accumulation fusion, each microbatch's weight gradients are added into
    the gradient buffer by a kernel of their own (Megatron without ``gradient_accumulation_fusion``:
    ``main_grad.add_(grad)``; DeepSpeed/FSDP: autograd's ``AccumulateGrad``), over the GPU's
    gradients of the block (its shard under ZeRO-2/3 and FSDP). Counted every microbatch (the
    first one's is an assignment in autograd: one add too many per step)."""
    ctx = blk.ctx
    local = _local(params)
    if ctx.spec.train.grad_accum_fusion or (isinstance(local.total, int | float) and local.total == 0):
        return
    zero = ctx.spec.parallel.zero
    sharded = zero in (ZeroStage.Z2, ZeroStage.Z3, ZeroStage.FSDP)
    elements = (local.dense / (ctx.groups["dp"].size if sharded else 1)
                + local.expert / (ctx.groups["expert_dp"].size if sharded else 1))
    dtype = Dtype.FP32 if grad_bytes(ctx) == 4 else ctx.act
    blk.last_in_backward(GRAD_ACCUMULATE,
                         Kernel.make(Family.ELEMENTWISE, dtype, Pass.BWD, Elementwise.ADD, elements=elements))
