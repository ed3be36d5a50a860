"""The operators of one transformer layer: forward, backward, recompute and their collectives.

A layer is its attention branch (:mod:`~llmp.analytic.attention`) and its MLP, dense
(:mod:`~llmp.analytic.mlp`) or a mixture of experts (:mod:`~llmp.analytic.moe`), joined by a
sequential or a parallel residual, written into a :class:`~llmp.analytic.block.Block`; then what it
re-runs before its backward (:mod:`~llmp.analytic.recompute`) and its gradient and ZeRO-3 traffic
(:mod:`~llmp.analytic.grads`). A model whose layers differ (:mod:`~llmp.analytic.kinds`) gets one
set of layer ops per kind: dense or MoE MLP, full or sliding-window attention; multi-head latent
attention replaces the QKV projection where the model has an ``mla`` block.

What a layer's own ops say about its weights is read off them here, so memory, the optimizer and
the gradient sync count exactly what the graph runs: the weights its low-precision GEMMs quantise
(:func:`lowp_weights`) and LoRA's adapters (:func:`adapter_weights`, :func:`adapter_tensors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic import kinds, shard
from llmp.analytic.attention import attention
from llmp.analytic.block import Block, Context, bias, dropout_add, norm, tp_in, tp_out
from llmp.analytic.grads import grad_accumulate, zero3
from llmp.analytic.kernels import Elementwise, Family, Kernel
from llmp.analytic.kinds import LayerKind
from llmp.analytic.mlp import mlp
from llmp.analytic.moe import moe
from llmp.analytic.op import Op, Part, Scope
from llmp.analytic.recompute import Matmul, matmuls, recomputed_forward


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
        core = attention(blk, kind, reduce=False)
        if not m.shared_norm:
            norm(blk, "mlp.norm")
    else:
        core = attention(blk, kind)
        norm(blk, "mlp.norm")
    if kind.moe:
        moe(blk)
    else:
        mlp(blk, "mlp", m.ffn_hidden, rows=ctx.tokens, bwd_comm=tp_in(blk, "mlp", "mlp.fc1"))
    if m.parallel_residual:
        if not ctx.spec.train.fused_bias_dropout_add:
            bias(blk, "mlp", ctx.sp_tokens * m.hidden)
        if ctx.st.dropout:
            blk.kernel("mlp.dropout", Family.ELEMENTWISE, variant=Elementwise.DROPOUT,
                       elements=ctx.sp_tokens * m.hidden)
        blk.kernel("mlp.branch_sum", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.sp_tokens * m.hidden)
        tp_out(blk, "mlp", "mlp.fc2")
        blk.kernel("mlp.residual", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=ctx.sp_tokens * m.hidden)
    else:
        if not kind.moe:
            tp_out(blk, "mlp", "mlp.fc2")
        dropout_add(blk, "mlp")
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
    (:func:`~llmp.analytic.recompute.recomputed_forward`). The embedding and the head are never
    recomputed.
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


def op_sac_matmuls(ctx: Context, kind: LayerKind | None = None) -> tuple[Matmul, ...]:
    """Every matmul of the forward of one dense-MLP layer of ``kind`` (default: the model's first
    kind) and whether op-level SAC saves it (:func:`llmp.analytic.recompute.matmuls`). The memory
    model reads the same list (:mod:`llmp.compose.memory`)."""
    kind = ctx.st.kinds[0] if kind is None else kind
    blk = Block(ctx, Scope.LAYER, "layer")
    core = _layer_body(ctx, kind, blk)
    assert not kind.moe, "op-level SAC is modelled for dense-MLP layers only"
    return matmuls(ctx, blk.fwd, core)


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
