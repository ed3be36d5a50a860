"""Bytes one transformer layer keeps for its backward, per microbatch: the activation formulas of
:mod:`llmp.compose.memory` (its docstring derives them), here so that the operator graph can also
price what offloading them moves (:mod:`llmp.analytic.offload`)."""

from __future__ import annotations

from typing import Any

from llmp.analytic.block import Context
from llmp.analytic.kinds import LayerKind
from llmp.analytic.layer import op_sac_matmuls
from llmp.spec.model import Activation, Router
from llmp.spec.spec import Recompute
from llmp.stacks import SelectiveRecompute


def _inputs(ctx: Context, elements: Any, readers: tuple[bool, ...] = (False,), kept: bool = False) -> Any:
    """Bytes a layer keeps of a tensor of ``elements`` that ``readers`` linear layers' GEMMs take as
    input, for their weight gradients: in 16-bit training (or under a stack whose low-precision
    library saves the BF16 input) the one model-dtype tensor they share; under a TE low-precision
    recipe each reader's own quantised copy (:meth:`~llmp.analytic.lowp.Recipe.saved_input_bytes`;
    a reader is True where it is column-parallel under sequence parallelism), plus the model-dtype
    tensor where another consumer keeps it (``kept``: flash attention its output, the MoE router
    its input)."""
    recipe = ctx.recipe
    if recipe is None or not ctx.profile.lowp_saved_input.value:
        return ctx.e * elements
    saved = sum(recipe.saved_input_bytes(gathered) for gathered in readers)
    return elements * (saved + (ctx.e if kept else 0))


def _gemm_inputs(ctx: Context, kind: LayerKind, core_out: bool) -> Any:
    """Bytes of the inputs of a layer's linear GEMMs as its forward keeps them for the weight
    gradients (:func:`_inputs`): the two norm outputs (sharded with SP; Megatron-Core's
    ``TELayerNormColumnParallelLinear`` for QKV and fc1 quantises each once, in the fused norm),
    the attention output (proj's input; ``core_out``: the attention kernel keeps it too), fc2's
    input (the activation's output, which no one else keeps), MLA's compressed q and kv after
    their norms (the up projections' inputs), a MoE layer's permuted expert inputs and its
    experts' and shared experts' fc2 inputs.

    Megatron-Core's MLA (NVIDIA/Megatron-LM@core_r0.9.0: megatron/core/models/gpt/
    gpt_layer_specs.py, ``get_gpt_layer_with_transformer_engine_spec``) norms the input with a
    plain ``TENorm`` and projects it with two ``TELinear`` (``linear_q_down_proj`` or
    ``linear_q_proj``, and ``linear_kv_down_proj``), each saving a quantised copy; a MoE layer's
    ``TENorm`` output is the input of the router's BF16 gating GEMM (kept in BF16) and of the shared
    experts' fc1 (a quantised copy)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    tsp, t, h = ctx.sp_tokens, ctx.tokens, m.hidden
    sp = bool(p.sequence_parallel)
    if ctx.tuning.frozen and m.mla is None and not kind.moe:
        return _lora_inputs(ctx, core_out)
    if m.mla is None:
        attention = _inputs(ctx, tsp * h, (sp,))
    else:
        a = m.mla
        attention = (_inputs(ctx, tsp * h, (sp and not ctx.st.q_compressed, False))
                     + _inputs(ctx, tsp * a.q_lora_rank, (sp,)) + _inputs(ctx, tsp * a.kv_lora_rank, (sp,)))
    attention = attention + _inputs(ctx, t * ctx.o_width, kept=core_out)
    if not kind.moe:
        return attention + _inputs(ctx, tsp * h, (sp,)) + _inputs(ctx, t * m.ffn_hidden / p.tp)
    mo = m.moe
    assert mo is not None
    rows = tsp * mo.top_k * mo.load * p.expert_tp
    shared = mo.shared_experts * mo.expert_ffn_hidden
    norm_out = _inputs(ctx, tsp * h, (sp,) if ctx.st.shared_experts else (), kept=mo.router is not Router.BALANCED)
    return (attention + norm_out + _inputs(ctx, rows * h) + _inputs(ctx, rows * mo.expert_ffn_hidden / p.expert_tp)
            + _inputs(ctx, t * shared / p.tp))


def _lora_inputs(ctx: Context, core_out: bool) -> Any:
    """:func:`_gemm_inputs` of a LoRA layer (standard attention, dense MLP): a frozen linear layer
    keeps no input, since it computes no weight gradient (TransformerEngine's ``_Linear`` saves its
    input only ``if weight.requires_grad``, autograd's ``mm`` only the operands the wanted gradients
    read); an adapted one keeps its input in the model dtype for its adapter's ``A`` (adapters run
    outside the low-precision recipe) and each adapter its ``m x rank`` output ``x A`` for ``B``.
    MLA and MoE layers keep what pre-training keeps (an overestimate under LoRA)."""
    m, p = ctx.spec.model, ctx.spec.parallel
    tsp, t, h, e = ctx.sp_tokens, ctx.tokens, m.hidden, ctx.e
    adapted = ctx.tuning.adapted
    shard = {"qkv": 1, "proj": p.tp, "fc1": 1, "fc2": p.tp}  # the row-parallel adapters' A output is split
    inputs = {"qkv": tsp * h, "proj": t * ctx.o_width, "fc1": tsp * h, "fc2": t * m.ffn_hidden / p.tp}
    kept = sum(e * (inputs[g] + t * ctx.tuning.rank / shard[g]) for g in inputs if g in adapted)
    if core_out and "proj" not in adapted:  # the fused attention kernel keeps its output anyway
        kept = kept + e * inputs["proj"]
    return kept


def layer_activation_bytes(ctx: Context, kind: LayerKind | None = None) -> Any:
    """Bytes one layer of ``kind`` (default: the first kind) keeps for the backward of one
    microbatch (see the module docstring): the inputs of its linear GEMMs as the forward stores them
    (:func:`_gemm_inputs`) and everything else in the model dtype."""
    spec = ctx.spec
    m, p, t = spec.model, spec.parallel, spec.train
    kind = kind if kind is not None else ctx.st.kinds[0]
    e, tokens, tsp, h = ctx.e, ctx.tokens, ctx.sp_tokens, m.hidden
    inner = 3 if m.activation is Activation.SWIGLU else 2
    # flash attention saves its output for its backward; the unfused core and a recomputed one do not
    core_out = t.attention.fused and t.recompute is not Recompute.SELECTIVE
    kept = _gemm_inputs(ctx, kind, core_out)
    attention = e * (2 * tsp * h + tokens * (ctx.q_width + ctx.kv_width + ctx.v_width))
    if m.mla is not None:  # the compressed q and kv before their norms, and the shared rope key
        a = m.mla
        attention += e * tsp * (a.q_lora_rank + a.kv_lora_rank + 2 * a.qk_rope_head_dim)
    if not kind.moe:  # fc1's output (the activation's input)
        mlp = e * tokens * (inner - 1) * m.ffn_hidden / p.tp
    else:
        mo = m.moe
        assert mo is not None
        rows = tsp * mo.top_k * mo.load * p.expert_tp
        mlp = e * (inner - 1) * (rows * mo.expert_ffn_hidden / p.expert_tp
                                 + tokens * mo.shared_experts * mo.expert_ffn_hidden / p.tp)
    masks = 2 * tsp * h if ctx.st.dropout else 0
    heads, seq_q = m.heads / p.tp, m.seq_len / p.cp
    if t.attention.fused:
        scores = 4 * t.micro_batch * heads * seq_q
    elif t.recompute is Recompute.NONE:
        per = e + ((1 + e) if ctx.st.dropout else 0)
        scores = per * t.micro_batch * heads * seq_q * m.seq_len
    else:
        scores = 0
    return kept + attention + mlp + masks + scores


def weight_grad_bytes(ctx: Context, kind: LayerKind | None = None) -> Any:
    """Bytes one layer of ``kind`` (default: the first kind) keeps from a microbatch's B to its W,
    for schedules that run them apart: the inputs of its weight GEMMs as the forward stored them
    (:func:`_gemm_inputs`: the two norm outputs, sharded with SP; the attention output; fc2's input)
    and the gradients of their outputs (QKV, proj, fc1, fc2; the row-parallel outputs' sharded with
    SP, before the backward re-gathers them). Qi et al. 2024 Table 1: ``32 s b h`` for GPT (14 of
    inputs, 18 of gradients). MLA adds its compressed q and kv (the up projections' inputs, the down
    projections' output gradients) and the rope key; a MoE layer the router's output gradient and,
    on the busiest rank's routed rows, the permuted expert inputs and the experts' MLPs split over
    etp, as :func:`layer_activation_bytes` counts them."""
    m, p = ctx.spec.model, ctx.spec.parallel
    kind = kind if kind is not None else ctx.st.kinds[0]
    t, tsp, h = ctx.tokens, ctx.sp_tokens, m.hidden
    up = 2 if m.activation.gated else 1  # fc1 computes gate and up together for a gated MLP

    def mlp(rows: Any, width: Any, out_rows: Any, tp: Any) -> Any:
        """fc1's and fc2's output gradients of an MLP ``width / tp`` wide."""
        return rows * up * width / tp + out_rows * h

    grads = t * (ctx.q_width + ctx.kv_width + ctx.v_width) + tsp * h
    if m.mla is not None:
        a = m.mla
        grads += tsp * (a.q_lora_rank + a.kv_lora_rank + 2 * a.qk_rope_head_dim)
    if not kind.moe:
        ffn = mlp(t, m.ffn_hidden, tsp, p.tp)
    else:
        mo = m.moe
        assert mo is not None
        rows = tsp * mo.top_k * mo.load * p.expert_tp
        router = tsp * mo.experts if mo.router is not Router.BALANCED else 0
        ffn = router + mlp(rows, mo.expert_ffn_hidden, rows, p.expert_tp)
        if ctx.st.shared_experts:
            ffn = ffn + mlp(t, mo.shared_experts * mo.expert_ffn_hidden, tsp, p.tp)
    return _gemm_inputs(ctx, kind, core_out=False) + ctx.e * (grads + ffn)


def op_sac_bytes(ctx: Context, kind: LayerKind | None = None) -> Any:
    """Bytes one dense-MLP layer of ``kind`` (default: the first kind) keeps under op-level
    selective activation checkpointing (torchtitan's ``selective_ac_option = 'op'``): the layer's
    input, the outputs of the matmuls the policy saves (:func:`~llmp.analytic.layer.op_sac_matmuls`,
    the list the recompute is built from: wq, wv, w1, w2 for a SwiGLU Llama), the SDPA output and
    its log-sum-exp, and with tp the reduce-scatter outputs (pytorch/torchtitan@v0.1.0:torchtitan/
    parallelisms/parallelize_llama.py, ``_save_list``). With tp the row-parallel outputs (wo, w2)
    are full-width partial sums. A MoE layer under op-level SAC keeps what the attention-core
    selective mode keeps (:func:`~llmp.analytic.recompute.recomputed_forward`)."""
    spec = ctx.spec
    m, p = spec.model, spec.parallel
    e, h = ctx.e, m.hidden
    kept = sum(mm.rows * mm.width for mm in op_sac_matmuls(ctx, kind) if mm.saved)
    scattered = 2 * h / p.tp if p.tp > 1 else 0
    lse = 4 * spec.train.micro_batch * (m.heads / p.tp) * (m.seq_len / p.cp)
    return e * (ctx.sp_tokens * h + kept + ctx.tokens * ctx.o_width + ctx.sp_tokens * scattered) + lse


def kept_bytes(ctx: Context, kind: LayerKind) -> tuple[Any, Any]:
    """(bytes a layer of ``kind`` keeps per microbatch in flight, bytes it holds while its own
    backward runs) under the spec's recomputation."""
    spec = ctx.spec
    per_layer = layer_activation_bytes(ctx, kind)
    if spec.train.recompute is Recompute.FULL:
        return ctx.e * ctx.sp_tokens * spec.model.hidden, per_layer
    if (spec.train.recompute is Recompute.SELECTIVE and not kind.moe
            and ctx.profile.selective_recompute.value is SelectiveRecompute.OP_SAC):
        return op_sac_bytes(ctx, kind), per_layer
    return per_layer, 0
