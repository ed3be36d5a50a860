"""Memory per GPU: weights, gradients, optimizer states, activations, logits, framework overhead.

States (Rajbhandari et al. 2020, ZeRO §3.1; Megatron-LM ``docs/distrib_optimizer.md``): weights
in the model dtype, plus a low-precision recipe's quantised copies of its GEMM weights, which with
``fp8_param_gather`` replace those weights' BF16 parameters (:mod:`llmp.analytic.lowp`); gradients
in FP32 where the stack keeps FP32 main grads for the precision
(:func:`~llmp.analytic.layer.grad_bytes`: Megatron's for BF16 and FP8 runs) else in the model
dtype; Adam keeps two FP32 moments (SGD one) plus an FP32 master copy unless the model itself is
FP32 or ``master_weights = false`` (with ``master_remainders`` only its low 16 bits, which the BF16
parameter completes: Apex ``DistributedFusedAdam``'s ``store_param_remainders``). ZeRO-1 shards
the optimizer states over the data-parallel replicas (dp x cp; for expert weights their own expert
data-parallel group, edp = tp cp dp / (etp ep) under MoE parallel folding, each expert split ep ways
and its matrices etp ways: :mod:`llmp.analytic.shard`),
ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights, which are then gathered one layer at a
time (the layer in use and the prefetched next one are held whole).

Activations of one layer for one microbatch, bytes (Korthikanti et al. 2022, §4, generalised):
with ``e`` bytes per element, ``T = b s / cp`` tokens on the GPU, ``Tsp = T / tp`` with sequence
parallelism (else ``T``), per-GPU widths ``q = heads d / tp``, ``kv = max(kv_heads, tp) d / tp``:

* ``2 e Tsp h``: the inputs of the two norms;
* ``2 e Tsp h``: the norm outputs that feed QKV and fc1 (kept sharded with SP, re-gathered in bwd);
* ``e T (q + 2 kv)``: Q, K, V (the attention core's inputs);
* ``e T q``: the attention output (proj's input);
* MLP: ``e T 2 f / tp`` (GELU: fc1 output and activation output) or ``e T 3 f / tp`` (SwiGLU:
  gate, up and the product); a MoE layer's experts the same on the rows its experts compute
  (``Tsp top_k load etp``, :mod:`~llmp.analytic.layer` ``_moe``) at ``f / etp``, plus those
  permuted expert inputs ``e rows h``, and its shared experts as a dense MLP; multi-head latent
  attention also keeps its compressed q and kv before and after their norms;
* dropout masks, 1 byte per element: ``2 Tsp h`` (after attention and after the MLP);
* unfused attention (`attention = unfused*`) without selective recompute: the scores ``e b heads/tp (s/cp) s`` for
  softmax's output, and with dropout its mask and output ``(1 + e)`` as much again (the
  ``5 a s / h`` term); flash attention keeps only the FP32 log-sum-exp per row.

Under a low-precision recipe (``precision = fp8 | mxfp8 | nvfp4``) on a stack whose linear layers are
TransformerEngine modules (the profile's ``lowp_saved_input``), each linear GEMM keeps its input for the
weight gradient quantised instead: the norm outputs feeding QKV and fc1 (one copy each, quantised in
the fused norm; MLA's two down projections and a MoE layer's shared experts each their own), proj's
input, fc2's input and the experts' inputs, at
:meth:`~llmp.analytic.lowp.Recipe.saved_input_bytes` per element (one byte for per-tensor FP8, plus
block scales for blockwise FP8, MXFP8 and NVFP4). The rest stays in the model dtype: the residual
stream and norm inputs, Q, K, V, fc1's output (the activation function's input), the MoE router's
input, and the attention output where flash attention saves it for its own backward (so proj's
quantised copy comes on top of it). torchao's ``Float8Linear`` saves the BF16 input, as in BF16.

For GPT (GELU, f = 4h, MHA, dropout, e = 2, no TP) this is ``s b h (34 + 5 a s / h)``; with TP and
no SP ``s b h (10 + 24/tp + 5 a s / (h tp))``; with SP ``s b h (34 + 5 a s / h) / tp`` - the paper's
three formulas. Full recompute keeps only each layer's input ``e Tsp h`` and, during a layer's
backward, that one layer's activations. A pipeline rank holds the activations of every
microbatch it has run forward but not yet backward: the schedule's in-flight peak (1F1B: ``pp -
r`` on rank ``r``; GPipe: all ``m``; interleaved: ``(pp - r - 1) 2 + (vp - 1) pp + 1`` chunk
passes), each pass holding its own chunk's layers (an uneven split weighs them). A schedule that
runs the weight gradients apart (ZB-H1, ZB-V, DualPipe) frees a pass's activations in two steps:
its B keeps what its W needs, the inputs and output gradients of the layer's weight GEMMs
(:func:`weight_grad_bytes`; Qi et al. 2024 Table 1: ``32 s b h`` for GPT, against ``s b h (34 +
5 a s / h)`` for the whole pass), and its W frees those; the rank's peak is the fullest of its
states (:func:`llmp.compose.schedule.in_flight`). ZB-H1 holds ``pp - r`` whole passes and ``r``
waiting for their W on rank ``r``: no more than 1F1B's rank 0 while a waiting W keeps less than
a whole pass. ZB-V holds ``2 pp`` half-stage passes on rank 0 (1F1B's ``pp`` stages); DualPipe
``pp + 1`` passes of a stage (its forward-backward pair holds one more: DeepSeek-V3 Table 2's
``PP + 1``). A rank's weights, gradients and optimizer states are those of the chunks it holds:
its stages, or both model copies' under DualPipe (DeepSeek-V3 Table 2: ``2x`` parameters). The
rank holding the head (the last; rank 0 under ZB-V and DualPipe too) also holds one microbatch's
logits (model dtype) and the FP32 softmax that vocab-parallel cross-entropy saves for its backward.

PyTorch FSDP (``zero = fsdp``: FSDP1 FULL_SHARD, FSDP2 ``fully_shard``) differs from ZeRO-3 in what
it stores: the sharded parameter stays in its FP32 dtype and *is* the master copy (mixed precision
only casts the all-gathered copy to BF16), so the optimizer holds the two moments alone, and the
sharded gradient is FP32. Unsharded BF16 copies exist for the layers in use (the current one and
the prefetched next) and for the root module's own parameters (embedding, final norm, head),
which stay gathered through forward and backward.

torchtitan (``stack = torchtitan``) runs two things its own way. Its ``selective`` recompute is
op-level selective activation checkpointing (SAC, the stack profile's ``selective_recompute``): per
layer it keeps the layer's input, the output of every *other* matmul (the 1st, 3rd, 5th, ... in
execution order, the same list the recompute is built from), the attention kernel's output and
log-sum-exp, and recomputes everything else (llmp models it for dense-MLP layers; a MoE layer
keeps what the attention-core selective mode keeps: :func:`~llmp.analytic.layer.recomputed_forward`).
Its loss upcasts the logits to FP32 and calls ``F.cross_entropy``: log_softmax keeps an FP32 copy,
and at the start of the backward the gradient of nll_loss and that of log_softmax (FP32 each) are
alive with it, 12 bytes per logit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import shard
from llmp.analytic.algebra import vmax
from llmp.analytic.kinds import LayerKind
from llmp.analytic.layer import Context, grad_bytes, lowp_weights, op_sac_matmuls
from llmp.analytic.op import RankKind, rank_kind_of
from llmp.analytic.structure import Structure, chunk_kind_layers
from llmp.compose.schedule import Plan, in_flight
from llmp.dsl.spec import (
    Activation,
    Optimizer,
    Precision,
    Recompute,
    Router,
    Spec,
    Stack,
    ZeroStage,
)
from llmp.stacks import SelectiveRecompute

GIB = 2**30
CUDA_CONTEXT_BYTES = 1 * GIB
"""CUDA context, cuBLAS/cuDNN workspaces and allocator slack: "~700+ MB" of context alone
(PyTorch forum, ptrblck, discuss.pytorch.org/t/81330), rounded up to 1 GiB for workspaces."""
NCCL_BYTES_PER_GROUP = 256 * 2**20
"""NCCL buffers per communicator: NCCL_BUFFSIZE 4 MiB (NCCL docs) x send and receive x up to 32
channels; counted for each parallel group with more than one member."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Memory:
    """Bytes on the fullest GPU (numbers, or arrays over a sweep)."""

    weights: Any
    grads: Any
    optimizer: Any
    activations: Any
    logits: Any
    overhead: Any
    capacity: Any
    rank: Any
    """Pipeline rank of the fullest GPU."""

    @property
    def total(self) -> Any:
        return self.weights + self.grads + self.optimizer + self.activations + self.logits + self.overhead

    @property
    def oom(self) -> Any:
        return self.total > self.capacity


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
    selective mode keeps (:func:`~llmp.analytic.layer.recomputed_forward`)."""
    spec = ctx.spec
    m, p = spec.model, spec.parallel
    e, h = ctx.e, m.hidden
    kept = sum(mm.rows * mm.width for mm in op_sac_matmuls(ctx, kind) if mm.saved)
    scattered = 2 * h / p.tp if p.tp > 1 else 0
    lse = 4 * spec.train.micro_batch * (m.heads / p.tp) * (m.seq_len / p.cp)
    return e * (ctx.sp_tokens * h + kept + ctx.tokens * ctx.o_width + ctx.sp_tokens * scattered) + lse


def logits_bytes(ctx: Context) -> Any:
    """Bytes per logit element on the last rank at the loss (see the module docstring):
    torchtitan's ``F.cross_entropy`` on FP32 logits (pytorch/torchtitan@v0.1.0:torchtitan/models/
    llama/model.py ``self.output(h).float()``; train.py ``loss_fn`` and ``del pred`` before
    ``loss.backward()``) 12, Megatron's in-place vocab-parallel cross-entropy the model-dtype logits
    plus its FP32 softmax."""
    if ctx.spec.train.stack is Stack.TORCHTITAN:
        return 12
    return ctx.e + 4


def _fsdp(spec: Spec) -> bool:
    return spec.parallel.zero is ZeroStage.FSDP


def _master_bytes(spec: Spec) -> int:
    """Bytes per parameter of the master copy: FP32, or its low 16 bits with ``master_remainders``
    (NVIDIA/apex apex/contrib/optimizers/distributed_fused_adam.py, ``StateBucket``:
    ``param_remainders_shard`` is ``torch.int16`` and ``params_shard`` is not allocated)."""
    t = spec.train
    if not t.master_weights or t.precision in (Precision.FP32, Precision.TF32):
        return 0
    return 2 if t.master_remainders else 4


def _state_bytes(spec: Spec) -> int:
    """Optimizer bytes per parameter: the moments, and the FP32 master copy unless FSDP's sharded
    FP32 parameter is it (pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/_fsdp_param.py:
    the sharded parameter keeps its original dtype, ``param_dtype`` casts only the all-gather;
    torch/distributed/fsdp/_flat_param.py: FSDP1's low-precision ``_mp_shard`` exists only to be
    gathered)."""
    moments = 4 if spec.train.optimizer is Optimizer.SGD else 8
    return moments + (0 if _fsdp(spec) else _master_bytes(spec))


def _weight_bytes(spec: Spec, e: int) -> int:
    """Bytes per stored (sharded) parameter: FSDP keeps them in FP32 (the master copy), others in the model dtype."""
    return 4 if _fsdp(spec) and _master_bytes(spec) else e


def _overhead(st: Structure) -> int:
    """The CUDA context and the NCCL buffers of every communicator with more than one member; a MoE
    model's expert mesh has its own (Megatron-Core creates the expert tensor-parallel and expert
    data-parallel groups apart from tp and dp: megatron/core/parallel_state.py)."""
    names = ("tp", "cp", "ep", "pp", "dp", *(("etp", "expert_dp") if st.local_experts else ()))
    return CUDA_CONTEXT_BYTES + NCCL_BYTES_PER_GROUP * sum(1 for name in names if st.active(name))


def _kept(ctx: Context, kind: LayerKind) -> tuple[Any, Any]:
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


def _classes(st: Structure) -> tuple[int, ...]:
    """Per chunk, a class number shared by the chunks that keep the same activations: those
    holding as many layers of each kind, the last one apart when the prediction modules run in it."""
    seen: dict[tuple[tuple[int, ...], bool], int] = {}
    last = st.chunks - 1
    return tuple(seen.setdefault((c, g == last and st.mtp_layers > 0), len(seen)) for g, c in enumerate(st.chunk_kinds))


def memory(spec: Spec, st: Structure, p: Plan) -> Memory:
    """Memory of the fullest GPU, over the pipeline ranks."""
    ctx = Context.of(spec, st)
    m, par, zero = spec.model, spec.parallel, spec.parallel.zero
    dp, edp = ctx.groups["dp"].size, ctx.groups["expert_dp"].size
    e = ctx.e
    per_kind = chunk_kind_layers(spec, st)
    kept_working = [_kept(ctx, kind) for kind in st.kinds]
    working = vmax(*(w for _, w in kept_working)) if len(kept_working) > 1 else kept_working[0][1]
    chunk_bytes = [sum(n * k for n, (k, _) in zip(counts, kept_working)) for counts in per_kind]
    mtp = st.mtp_layers
    if st.mtp_kind is not None:
        mtp_kept, mtp_working = _kept(ctx, st.mtp_kind)
        working = vmax(working, mtp_working)
    held: tuple[Any, ...] | None
    if p.splits_w:
        # B and W apart: a pass frees its activations in two steps (see the module docstring);
        # the prediction modules run in the last chunk's passes.
        apart = [weight_grad_bytes(ctx, kind) for kind in st.kinds]
        waiting = [sum(n * a for n, a in zip(counts, apart)) for counts in per_kind]
        if st.mtp_kind is not None:
            chunk_bytes[-1] += mtp * mtp_kept
            waiting[-1] += mtp * weight_grad_bytes(ctx, st.mtp_kind)
        held = in_flight(p, chunk_bytes, waiting, _classes(st))
    else:
        held = None if st.even else in_flight(p, chunk_bytes, classes=_classes(st))
    sharded = {ZeroStage.NONE: 0, ZeroStage.Z1: 1, ZeroStage.Z2: 2, ZeroStage.Z3: 3, ZeroStage.FSDP: 3}[zero]
    layers = [shard.layer(m, par, kind, st.q_compressed).total for kind in st.kinds]
    layer = vmax(*layers) if len(layers) > 1 else layers[0]

    def split(params: shard.LocalParams, level: int, bytes_per: Any) -> Any:
        """``bytes_per`` of each parameter a rank holds, less what ZeRO stage ``level`` or above shards."""
        return bytes_per * (params.dense / (dp if sharded >= level else 1)
                            + params.expert / (edp if sharded >= level else 1))

    weight_bytes, grad_per, state_per = _weight_bytes(spec, e), grad_bytes(ctx), _state_bytes(spec)
    overhead = _overhead(st)

    def states(first: bool, last: bool, counts: tuple[Any, ...]) -> tuple[Any, Any, Any]:
        """(weights, gradients, optimizer states) of a rank holding ``counts`` layers of each kind."""
        params = shard.rank(m, par, pp=st.pp, layers=counts, first=first, last=last, vocab=ctx.vocab,
                            kinds_present=st.kinds, mtp_kind=st.mtp_kind, q_compressed=st.q_compressed)
        gathered = 2 * layer * e if sharded == 3 else 0
        if _fsdp(spec):
            # The root module's own parameters (embedding, final norm, head) are gathered from the
            # start of the forward to the end of the backward: FSDP1 keeps the root unsharded after
            # forward (pytorch/pytorch@v2.3.0:torch/distributed/fsdp/_runtime_utils.py,
            # _post_forward_reshard: "Do not free the root's parameters in the post-forward"), and
            # torchtitan's FSDP2 root re-gathers them for the head's backward
            # (pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/parallelize_llama.py, apply_fsdp).
            root = ((shard.embedding(m, par, ctx.vocab) if first else 0)
                    + (shard.head(m, par, st.pp, ctx.vocab) if last else 0))
            gathered += e * root
        return (split(params, 3, weight_bytes) + gathered + _lowp_copies(ctx, counts, sharded == 3),
                split(params, 2, grad_per), split(params, 1, state_per))

    # Ranks holding the same layers at the same end of the pipeline hold the same parameters, worked
    # out once: the middle ranks of a deep pipeline differ only in their activations.
    held_states: dict[tuple[bool, bool, tuple[Any, ...]], tuple[Any, Any, Any]] = {}
    capacity = spec.cluster.gpu.memory
    ranks: list[tuple[Any, ...]] = []  # per rank: the fields of its Memory, in order, and its total
    for r, (first, last, chunks) in enumerate(_ranks(st)):
        mine = [per_kind[g] for g in chunks]
        counts = tuple(sum(c[k] for c in mine) for k in range(len(st.kinds)))
        if (first, last, counts) not in held_states:
            held_states[first, last, counts] = states(first, last, counts)
        weights, grads, optimizer = held_states[first, last, counts]
        acts = p.peak_in_flight[r] * chunk_bytes[0] if held is None else held[r]
        logits = logits_bytes(ctx) * ctx.tokens * ctx.vocab / par.tp if last else 0
        if last and mtp:
            # Each prediction module keeps its layer and its own logits for its loss's backward.
            if not p.splits_w:  # else counted with the last chunk's passes
                acts = acts + p.peak_in_flight[r] * mtp * mtp_kept
            logits = logits * (1 + mtp)
        activations = acts + working
        # Memory.total, in its order
        ranks.append((weights, grads, optimizer, activations, logits, r,
                      weights + grads + optimizer + activations + logits + overhead))
    fullest = ranks[0]
    if not any(isinstance(x[-1], np.ndarray) for x in ranks):
        for row in ranks[1:]:
            if row[-1] > fullest[-1]:  # _fuller for numbers
                fullest = row
    else:
        best = None
        for row in ranks:
            cand = _memory(row, overhead, capacity)
            best = cand if best is None else _fuller(best, cand)
        assert best is not None
        return best
    return _memory(fullest, overhead, capacity)


def _memory(row: tuple[Any, ...], overhead: Any, capacity: Any) -> Memory:
    weights, grads, optimizer, activations, logits, r, _ = row
    return Memory(weights=weights, grads=grads, optimizer=optimizer, activations=activations, logits=logits,
                  overhead=overhead, capacity=capacity, rank=r)


@functools.lru_cache(maxsize=64)
def _ranks(st: Structure) -> tuple[tuple[bool, bool, tuple[int, ...]], ...]:
    """Per pipeline rank: whether it holds the first chunk, the last, and its chunks."""
    out = []
    for r in range(st.pp):
        kind = rank_kind_of(st, r)
        out.append((kind in (RankKind.ONLY, RankKind.FIRST), kind in (RankKind.ONLY, RankKind.LAST), st.placement[r]))
    return tuple(out)


def _lowp_copies(ctx: Context, counts: tuple[Any, ...], gathered_only: bool) -> Any:
    """Bytes a low-precision recipe adds to the weights of a rank holding ``counts`` layers of each
    kind: the quantised copies of each low-precision weight next to its BF16 parameter, or with FP8
    parameters (``fp8_param_gather``) in place of it (:meth:`~llmp.analytic.lowp.Recipe.extra_weight_bytes`),
    and the amax history (``amax_history_bytes``). Under ZeRO-3/FSDP the copies exist for the
    gathered layers only (two at a time, as the BF16 gathers); the MTP layers' copies are not counted."""
    recipe = ctx.recipe
    if recipe is None:
        return 0
    per_kind = [lowp_weights(ctx, kind) for kind in ctx.st.kinds]
    if gathered_only:
        weights = 2 * vmax(*(w.total for w in per_kind)) if len(per_kind) > 1 else 2 * per_kind[0].total
    else:
        weights = sum(n * w.total for n, w in zip(counts, per_kind))
    modules = sum(n * w.modules for n, w in zip(counts, per_kind))
    return weights * recipe.extra_weight_bytes(ctx.e) + recipe.amax_history_bytes(modules)


def _fuller(a: Memory, b: Memory) -> Memory:
    """The fuller of two ranks' memory (per configuration over a sweep)."""
    pick = b.total > a.total
    if isinstance(pick, np.ndarray):
        fields = ("weights", "grads", "optimizer", "activations", "logits", "overhead", "capacity", "rank")
        return Memory(**{f: np.where(pick, getattr(b, f), getattr(a, f)) for f in fields})
    return b if pick else a
