"""Memory per GPU: weights, gradients, optimizer states, activations, logits, framework overhead.

States (Rajbhandari et al. 2020, ZeRO §3.1; Megatron-LM ``docs/distrib_optimizer.md``): weights
in the model dtype, plus a low-precision recipe's quantised copies of its GEMM weights, which with
``fp8_param_gather`` replace those weights' BF16 parameters (:mod:`llmp.analytic.lowp`); gradients
in FP32 where the stack keeps FP32 main grads for the precision
(:func:`~llmp.analytic.grads.grad_bytes`: Megatron's for BF16 and FP8 runs) else in the model
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
  (``Tsp top_k load etp``, :func:`~llmp.analytic.moe.moe`) at ``f / etp``, plus those
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
keeps what the attention-core selective mode keeps: :func:`~llmp.analytic.recompute.recomputed_forward`).
Its loss upcasts the logits to FP32 and calls ``F.cross_entropy``: log_softmax keeps an FP32 copy,
and at the start of the backward the gradient of nll_loss and that of log_softmax (FP32 each) are
alive with it, 12 bytes per logit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import offload, shard
from llmp.analytic.activations import kept_bytes, weight_grad_bytes
from llmp.analytic.block import Context
from llmp.analytic.grads import grad_bytes
from llmp.analytic.layer import lowp_weights, trainable
from llmp.analytic.op import RankKind, rank_kind_of
from llmp.analytic.shape import Structure
from llmp.analytic.structure import chunk_kind_layers
from llmp.compose.schedule import Plan, in_flight
from llmp.spec.algebra import vmax, vmin
from llmp.spec.spec import (
    Optimizer,
    Precision,
    Spec,
    ZeroStage,
)

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
    host: Any = 0
    """Bytes that GPU keeps in host memory instead (offloading; not in :attr:`total`)."""

    @property
    def total(self) -> Any:
        return self.weights + self.grads + self.optimizer + self.activations + self.logits + self.overhead

    @property
    def oom(self) -> Any:
        return self.total > self.capacity


def logits_bytes(ctx: Context) -> Any:
    """Bytes per logit element on the last rank at the loss (see the module docstring):
    torchtitan's ``F.cross_entropy`` on FP32 logits (pytorch/torchtitan@v0.1.0:torchtitan/models/
    llama/model.py ``self.output(h).float()``; train.py ``loss_fn`` and ``del pred`` before
    ``loss.backward()``) 12, Megatron's in-place vocab-parallel cross-entropy the model-dtype logits
    plus its FP32 softmax: the stack profile's ``fp32_loss_logits``."""
    return 12 if ctx.profile.fp32_loss_logits.value else ctx.e + 4


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


def checkpoint_bytes_per_param(spec: Spec) -> int:
    """Bytes per parameter in a checkpoint: the weight as :func:`memory` stores it plus its optimizer
    state (moments, master copy), each saved once whatever ZeRO or FSDP shards (Megatron's
    distributed checkpoint and PyTorch DCP save every shard once); for ``llmp plan``'s checkpoints."""
    e = 4 if spec.train.precision in (Precision.FP32, Precision.TF32) else 2
    return _weight_bytes(spec, e) + _state_bytes(spec)


def _overhead(st: Structure) -> int:
    """The CUDA context and the NCCL buffers of every communicator with more than one member; a MoE
    model's expert mesh has its own (Megatron-Core creates the expert tensor-parallel and expert
    data-parallel groups apart from tp and dp: megatron/core/parallel_state.py)."""
    names = ("tp", "cp", "ep", "pp", "dp", *(("etp", "expert_dp") if st.local_experts else ()))
    return CUDA_CONTEXT_BYTES + NCCL_BYTES_PER_GROUP * sum(1 for name in names if st.active(name))


def _classes(st: Structure) -> tuple[int, ...]:
    """Per chunk, a class number shared by the chunks that keep the same activations: those
    holding as many layers of each kind, the last one apart when the prediction modules run in it."""
    seen: dict[tuple[tuple[int, ...], bool], int] = {}
    last = st.chunks - 1
    return tuple(seen.setdefault((c, g == last and st.mtp_layers > 0), len(seen)) for g, c in enumerate(st.chunk_kinds))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Activations:
    """What the activations of a rank are made of, the same for every rank: the bytes a chunk's
    pass keeps until its backward, the working memory of the largest layer, the share offloaded,
    and (where the passes differ or free in two steps) each rank's held bytes."""

    per_kind: tuple[tuple[Any, ...], ...]
    """Per chunk, its layers of each kind."""
    chunk_bytes: list[Any]
    """Per chunk, the bytes one pass keeps on the GPU until its backward."""
    working: Any
    """The working memory of the layer running (or of its reloaded activations)."""
    share: Any
    """The share of the kept activations offloaded to host memory."""
    held: tuple[Any, ...] | None
    """Per rank, the most bytes its passes hold at once (None: ``peak_in_flight`` passes of chunk 0)."""
    mtp_kept: Any = 0
    """What one prediction module's pass keeps."""


def _activations(ctx: Context, st: Structure, p: Plan) -> _Activations:
    """The activations of the plan's passes (see the module docstring)."""
    per_kind = chunk_kind_layers(ctx.spec, st)
    kept_working = [kept_bytes(ctx, kind) for kind in st.kinds]
    working = vmax(*(w for _, w in kept_working)) if len(kept_working) > 1 else kept_working[0][1]
    share = offload.activation_fraction(ctx)
    if share:
        # Offloaded layers keep nothing on the GPU between their forward and backward; the layer
        # whose activations are back for its backward holds them meanwhile.
        reload = vmax(*(k for k, _ in kept_working)) if len(kept_working) > 1 else kept_working[0][0]
        working = vmax(working, reload)
        kept_working = [(k * (1 - share), w) for k, w in kept_working]
    chunk_bytes = [sum(n * k for n, (k, _) in zip(counts, kept_working)) for counts in per_kind]
    mtp_kept: Any = 0
    if st.mtp_kind is not None:
        mtp_kept, mtp_working = kept_bytes(ctx, st.mtp_kind)
        working = vmax(working, mtp_working)
    held: tuple[Any, ...] | None
    if p.splits_w:
        # B and W apart: a pass frees its activations in two steps (see the module docstring);
        # the prediction modules run in the last chunk's passes.
        apart = [weight_grad_bytes(ctx, kind) for kind in st.kinds]
        waiting = [sum(n * a for n, a in zip(counts, apart)) for counts in per_kind]
        if st.mtp_kind is not None:
            chunk_bytes[-1] += st.mtp_layers * mtp_kept
            waiting[-1] += st.mtp_layers * weight_grad_bytes(ctx, st.mtp_kind)
        held = in_flight(p, chunk_bytes, waiting, _classes(st))
    else:
        held = None if st.even else in_flight(p, chunk_bytes, classes=_classes(st))
    return _Activations(per_kind=per_kind, chunk_bytes=chunk_bytes, working=working, share=share, held=held,
                        mtp_kept=mtp_kept)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Holding:
    """What every rank's parameters cost per parameter, and how ZeRO shards them: the numbers
    :meth:`states` reads for each rank's layers."""

    ctx: Context
    sharded: int
    """The ZeRO level: 1 shards optimizer states, 2 gradients too, 3 parameters too."""
    dp: Any
    edp: Any
    """The expert data-parallel degree, which shards the experts' parameters."""
    layer: Any
    """The largest layer's parameters (gathered two at a time under ZeRO-3 and FSDP)."""
    weight_bytes: int
    grad_per: Any
    state_per: int

    @classmethod
    def of(cls, ctx: Context, st: Structure) -> _Holding:
        spec = ctx.spec
        m, par, zero = spec.model, spec.parallel, spec.parallel.zero
        sharded = {ZeroStage.NONE: 0, ZeroStage.Z1: 1, ZeroStage.Z2: 2, ZeroStage.Z3: 3, ZeroStage.FSDP: 3}[zero]
        layers = [shard.layer(m, par, kind, st.q_compressed).total for kind in st.kinds]
        layer = vmax(*layers) if len(layers) > 1 else layers[0]
        return cls(ctx=ctx, sharded=sharded, dp=ctx.groups["dp"].size, edp=ctx.groups["expert_dp"].size,
                   layer=layer, weight_bytes=_weight_bytes(spec, ctx.e), grad_per=grad_bytes(ctx),
                   state_per=_state_bytes(spec))

    def split(self, params: shard.LocalParams, level: int, bytes_per: Any) -> Any:
        """``bytes_per`` of each parameter a rank holds, less what ZeRO stage ``level`` or above shards."""
        return bytes_per * (params.dense / (self.dp if self.sharded >= level else 1)
                            + params.expert / (self.edp if self.sharded >= level else 1))

    def states(self, first: bool, last: bool, counts: tuple[Any, ...]) -> tuple[Any, Any, Any, Any]:
        """(weights, gradients, optimizer states, what is offloaded of them) of a rank holding
        ``counts`` layers of each kind on the GPU, and in host memory (:mod:`llmp.analytic.offload`):
        the optimizer's fraction, the sharded gradients but a bucket, the sharded parameters."""
        ctx, spec, st, e, split = self.ctx, self.ctx.spec, self.ctx.st, self.ctx.e, self.split
        m, par, t, sharded = spec.model, spec.parallel, spec.train, self.sharded
        params = shard.rank(m, par, pp=st.pp, layers=counts, first=first, last=last, vocab=ctx.vocab,
                            kinds_present=st.kinds, mtp_kind=st.mtp_kind, q_compressed=st.q_compressed)
        gathered = 2 * self.layer * e if sharded == 3 else 0
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
        trained = trainable(ctx, params, counts)
        if ctx.tuning.frozen:
            # LoRA: the frozen base in its load dtype beside the adapters (llmp.analytic.finetune),
            # which alone have gradients and optimizer states
            weights = split(params, 3, e) + split(trained, 3, self.weight_bytes)
        else:
            weights = split(params, 3, self.weight_bytes)
        grads, optimizer = split(trained, 2, self.grad_per), split(trained, 1, self.state_per)
        host = t.offload_optimizer * optimizer
        optimizer = optimizer - host
        if t.offload_grads:
            bucket = vmin(grads, par.dp_bucket_size)
            host, grads = host + grads - bucket, bucket
        if t.offload_params and sharded == 3:
            host, weights = host + weights, 0
        return weights + gathered + _lowp_copies(ctx, counts, sharded == 3), grads, optimizer, host


def memory(spec: Spec, st: Structure, p: Plan) -> Memory:
    """Memory of the fullest GPU, over the pipeline ranks."""
    ctx = Context.of(spec, st)
    par, mtp = spec.parallel, st.mtp_layers
    a = _activations(ctx, st, p)
    holding = _Holding.of(ctx, st)
    overhead = _overhead(st)
    # Ranks holding the same layers at the same end of the pipeline hold the same parameters, worked
    # out once: the middle ranks of a deep pipeline differ only in their activations.
    held_states: dict[tuple[bool, bool, tuple[Any, ...]], tuple[Any, Any, Any, Any]] = {}
    capacity = spec.cluster.gpu.memory
    ranks: list[tuple[Any, ...]] = []  # per rank: the fields of its Memory, in order, and its total
    for r, (first, last, chunks) in enumerate(_ranks(st)):
        mine = [a.per_kind[g] for g in chunks]
        counts = tuple(sum(c[k] for c in mine) for k in range(len(st.kinds)))
        if (first, last, counts) not in held_states:
            held_states[first, last, counts] = holding.states(first, last, counts)
        weights, grads, optimizer, host = held_states[first, last, counts]
        acts = p.peak_in_flight[r] * a.chunk_bytes[0] if a.held is None else a.held[r]
        logits = logits_bytes(ctx) * ctx.tokens * ctx.vocab / par.tp if last else 0
        if last and mtp:
            # Each prediction module keeps its layer and its own logits for its loss's backward.
            if not p.splits_w:  # else counted with the last chunk's passes
                acts = acts + p.peak_in_flight[r] * mtp * a.mtp_kept
            logits = logits * (1 + mtp)
        activations = acts + a.working
        if a.share:  # what the rank's in-flight passes keep on the host instead (share < 1: rules.py)
            host = host + acts * a.share / (1 - a.share)
        # Memory.total, in its order
        ranks.append((weights, grads, optimizer, activations, logits, r, host,
                      weights + grads + optimizer + activations + logits + overhead))
    return _fullest(ranks, overhead, capacity)


def _fullest(ranks: list[tuple[Any, ...]], overhead: Any, capacity: Any) -> Memory:
    """The fullest of the ranks' rows (per configuration over a sweep)."""
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
    weights, grads, optimizer, activations, logits, r, host, _ = row
    return Memory(weights=weights, grads=grads, optimizer=optimizer, activations=activations, logits=logits,
                  overhead=overhead, capacity=capacity, rank=r, host=host)


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
        fields = ("weights", "grads", "optimizer", "activations", "logits", "overhead", "capacity", "rank", "host")
        return Memory(**{f: np.where(pick, getattr(b, f), getattr(a, f)) for f in fields})
    return b if pick else a
