"""The builder every block of ops is written with: per-GPU shapes, the op collector, and the pieces
each branch of a layer is built of (its norm, the tensor-parallel collectives around its GEMMs, the
bias, dropout and residual add after it).

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
bias-GELU / bias-dropout-add (a stack that does not fuse them pays :func:`bias`).

The transformer layer (:mod:`~llmp.analytic.layer`), the embedding, head and per-step work
(:mod:`~llmp.analytic.stage`) and offloading (:mod:`~llmp.analytic.offload`) all write their ops
into a :class:`Block` over one :class:`Context`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic import finetune, layout, lowp, shard
from llmp.analytic.kernels import Collective, CollectiveKind, Elementwise, Family, Fusion, Kernel, Pass
from llmp.analytic.layout import Axis
from llmp.analytic.op import Op, Overlap, Part, Phase, Scope
from llmp.analytic.shape import Structure
from llmp.hardware.spec import Dtype
from llmp.spec.model import Norm
from llmp.spec.spec import Precision, Spec
from llmp.stacks import Profile, padded_vocab, profile


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


def tp_out(blk: Block, name: str, gemm: str) -> None:
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


def bias(blk: Block, name: str, elements: Any) -> None:
    """A broadcast bias add as its own kernel (a stack that does not fuse it into the next op).
    It moves the bytes of a copy (read the activation, write it; the bias vector is negligible),
    so it is priced as one."""
    if blk.ctx.spec.model.bias:
        blk.kernel(f"{name}.bias", Family.COPY, elements=elements)


def dropout_add(blk: Block, name: str, *, residual: bool = True) -> None:
    """After a row-parallel GEMM: bias, dropout and the residual add.

    Fused (Megatron ``bias_dropout_add_fused_train``): the bias is inside, dropout (when the
    model has it) and the add are the kernels llmp has always counted. Unfused (GPT-NeoX
    ``get_bias_dropout_add``): the bias add is a kernel of its own. ``residual = false`` is the
    attention branch of a parallel residual, which adds no residual (``residual=None``).
    """
    ctx = blk.ctx
    n = ctx.sp_tokens * ctx.spec.model.hidden
    if not ctx.spec.train.fused_bias_dropout_add:
        bias(blk, name, n)
    if ctx.st.dropout:
        blk.kernel(f"{name}.dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT, elements=n)
    if residual:
        blk.kernel(f"{name}.residual", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=n)
