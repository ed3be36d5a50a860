"""The attention branch of a layer: its norm, the QKV projection (or multi-head latent attention's
projections, :func:`_mla`), rotary embedding, the attention core as the stack launches it (fused
or unfused), the context-parallel exchanges around the core, and the output projection.

:func:`attention` returns the names of the core's ops: what ``recompute = selective`` re-runs
(:mod:`~llmp.analytic.recompute`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llmp.analytic import finetune
from llmp.analytic.block import Block, Context, dropout_add, norm, tp_in, tp_out
from llmp.analytic.kernels import AttentionKernel, CollectiveKind, Elementwise, Family, SoftmaxKind
from llmp.analytic.kinds import LayerKind
from llmp.analytic.layout import Axis
from llmp.analytic.op import Overlap, Part
from llmp.spec.model import Position
from llmp.spec.spec import Attention, CpComm


def at_most(x: Any, bound: float) -> bool:
    """``x <= bound`` for a number; for a sweep's array, for every value; a free symbol counts as
    within the bound (the graph's shape must not depend on a symbol)."""
    try:
        return bool(np.all(np.asarray(x, dtype=float) <= bound))
    except TypeError:
        return True


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
    Attention.CUDNN: AttentionKernel.CUDNN, Attention.FLASH1: AttentionKernel.FLASH1,
    Attention.TRITON: AttentionKernel.TRITON,
    # torch SDPA's default backend order puts its FlashAttention-2 kernels first on NVIDIA GPUs
    # (pytorch/pytorch@v2.4.0 aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, priority_order).
    Attention.SDPA: AttentionKernel.FLASH2,
}
"""The fused kernel each attention choice launches."""


def attention(blk: Block, kind: LayerKind, *, reduce: bool = True) -> list[str]:
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
        tp_out(blk, "attn", "attn.proj")
        dropout_add(blk, "attn")
    else:
        dropout_add(blk, "attn", residual=False)
    return core_ops
