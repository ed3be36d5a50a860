"""Memory per GPU: weights, gradients, optimizer states, activations, logits, framework overhead.

States (Rajbhandari et al. 2020, ZeRO §3.1; Megatron-LM ``docs/distrib_optimizer.md``): weights
in the model dtype; gradients in FP32 for BF16 with master weights (Megatron's main grads) else
in the model dtype; Adam keeps two FP32 moments (SGD one) plus an FP32 master copy unless the
model itself is FP32 or ``master_weights = false``. ZeRO-1 shards the optimizer states over the
data-parallel replicas (dp x cp; dp x cp / ep for expert weights), ZeRO-2 also the gradients,
ZeRO-3/FSDP also the weights, which are then gathered one layer at a time (the layer in use and
the prefetched next one are held whole).

Activations of one layer for one microbatch, bytes (Korthikanti et al. 2022, §4, generalised):
with ``e`` bytes per element, ``T = b s / cp`` tokens on the GPU, ``Tsp = T / tp`` with sequence
parallelism (else ``T``), per-GPU widths ``q = heads d / tp``, ``kv = max(kv_heads, tp) d / tp``:

* ``2 e Tsp h``: the inputs of the two norms;
* ``2 e Tsp h``: the norm outputs that feed QKV and fc1 (kept sharded with SP, re-gathered in bwd);
* ``e T (q + 2 kv)``: Q, K, V (the attention core's inputs);
* ``e T q``: the attention output (proj's input);
* MLP: ``e T 2 f / tp`` (GELU: fc1 output and activation output) or ``e T 3 f / tp`` (SwiGLU:
  gate, up and the product); MoE experts the same on ``T top_k capacity`` rows, plus the
  permuted expert inputs ``e T top_k capacity h``;
* dropout masks, 1 byte per element: ``2 Tsp h`` (after attention and after the MLP);
* unfused attention (`attention = unfused*`) without selective recompute: the scores ``e b heads/tp (s/cp) s`` for
  softmax's output, and with dropout its mask and output ``(1 + e)`` as much again (the
  ``5 a s / h`` term); flash attention keeps only the FP32 log-sum-exp per row.

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
op-level selective activation checkpointing (SAC): per layer it keeps the layer's input, the output
of every *other* matmul (the 1st, 3rd, 5th, ... in execution order), the attention kernel's output
and log-sum-exp, and recomputes everything else. Its loss upcasts the logits to FP32 and calls
``F.cross_entropy``: log_softmax keeps an FP32 copy, and at the start of the backward the gradient
of nll_loss and that of log_softmax (FP32 each) are alive with it, 12 bytes per logit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import shard
from llmp.analytic.algebra import vmax
from llmp.analytic.graph import RankKind, rank_kind_of
from llmp.analytic.layer import Context, grad_bytes
from llmp.analytic.structure import Structure, chunk_layers
from llmp.compose.schedule import Plan, in_flight, layers_in_flight
from llmp.dsl.spec import Activation, Optimizer, Precision, Recompute, Spec, Stack, ZeroStage

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


def layer_activation_bytes(ctx: Context) -> Any:
    """Bytes one layer keeps for the backward of one microbatch (see the module docstring)."""
    spec = ctx.spec
    m, p, t = spec.model, spec.parallel, spec.train
    e, tokens, tsp, h = ctx.e, ctx.tokens, ctx.sp_tokens, m.hidden
    inner = 3 if m.activation is Activation.SWIGLU else 2
    attention = e * (4 * tsp * h + tokens * (2 * ctx.q_width + 2 * ctx.kv_width))
    if m.moe is None:
        mlp = e * tokens * inner * m.ffn_hidden / p.tp
    else:
        mo = m.moe
        rows = tokens * mo.top_k * mo.capacity_factor
        mlp = e * (rows * inner * mo.expert_ffn_hidden / p.tp + rows * h
                   + tokens * inner * mo.shared_experts * mo.expert_ffn_hidden / p.tp)
    masks = 2 * tsp * h if ctx.st.dropout else 0
    heads, seq_q = m.heads / p.tp, m.seq_len / p.cp
    if t.attention.fused:
        scores = 4 * t.micro_batch * heads * seq_q
    elif t.recompute is Recompute.NONE:
        per = e + ((1 + e) if ctx.st.dropout else 0)
        scores = per * t.micro_batch * heads * seq_q * m.seq_len
    else:
        scores = 0
    return attention + mlp + masks + scores


def weight_grad_bytes(ctx: Context) -> Any:
    """Bytes one layer keeps from a microbatch's B to its W, for schedules that run them apart:
    the inputs of its weight GEMMs as the forward stored them (the two norm outputs, sharded with
    SP; the attention output; fc2's input) and the gradients of their outputs (QKV, proj, fc1,
    fc2; the row-parallel outputs' sharded with SP, before the backward re-gathers them). Qi et
    al. 2024 Table 1: ``32 s b h`` for GPT (14 of inputs, 18 of gradients). MoE: the router's
    output gradient and, on the routed rows, the permuted expert inputs and the experts' MLPs."""
    m, p = ctx.spec.model, ctx.spec.parallel
    t, tsp, h = ctx.tokens, ctx.sp_tokens, m.hidden
    up = 2 if m.activation.gated else 1  # fc1 computes gate and up together for a gated MLP

    def mlp(rows: Any, width: Any, out_rows: Any) -> Any:
        """fc2's input, fc1's and fc2's output gradients of an MLP ``width / tp`` wide."""
        return rows * width / p.tp + rows * up * width / p.tp + out_rows * h

    attention = 2 * tsp * h + t * ctx.q_width + t * (ctx.q_width + 2 * ctx.kv_width) + tsp * h
    if m.moe is None:
        ffn = mlp(t, m.ffn_hidden, tsp)
    else:
        mo = m.moe
        rows = t * mo.top_k * mo.capacity_factor
        ffn = t * mo.experts + rows * h + mlp(rows, mo.expert_ffn_hidden, rows)
        if ctx.st.shared_experts:
            ffn = ffn + mlp(t, mo.shared_experts * mo.expert_ffn_hidden, tsp)
    return ctx.e * (attention + ffn)


def torchtitan_sac_bytes(ctx: Context) -> Any:
    """Bytes one layer keeps under torchtitan's op-level selective activation checkpointing.

    pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/parallelize_llama.py (``_save_list``: mm, the
    SDPA flash/efficient kernels, reduce_scatter; ``_custom_policy``: "Saves output of all compute
    ops, except every second mm"); torchtitan/models/llama/model.py gives the matmul order wq, wk,
    wv, wo, w1, w3, w2 (w1, w2 without the gate w3 for an ungated MLP). With tp, the row-parallel
    outputs (wo, w2) are full-width partial sums and their reduce-scatters are kept too.
    """
    spec = ctx.spec
    m, p = spec.model, spec.parallel
    e, t, h = ctx.e, ctx.tokens, m.hidden
    f = m.ffn_hidden / p.tp
    widths = [ctx.q_width, ctx.kv_width, ctx.kv_width, h, f, *((f,) if m.activation.gated else ()), h]
    kept = sum(widths[0::2])
    scattered = 2 * h / p.tp if p.tp > 1 else 0
    lse = 4 * spec.train.micro_batch * (m.heads / p.tp) * (m.seq_len / p.cp)
    return e * (ctx.sp_tokens * h + t * (kept + ctx.q_width) + ctx.sp_tokens * scattered) + lse


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
    t = spec.train
    return 4 if (t.master_weights and t.precision not in (Precision.FP32, Precision.TF32)) else 0


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
    groups = sum(1 for name in ("tp", "cp", "ep", "pp", "dp") if st.active(name))
    return CUDA_CONTEXT_BYTES + NCCL_BYTES_PER_GROUP * groups


def memory(spec: Spec, st: Structure, p: Plan) -> Memory:
    """Memory of the fullest GPU, over the pipeline ranks."""
    ctx = Context.of(spec, st)
    m, par, zero = spec.model, spec.parallel, spec.parallel.zero
    dp, edp = ctx.groups["dp"].size, ctx.groups["expert_dp"].size
    e = ctx.e
    chunks = chunk_layers(spec, st)
    held = None if st.even or p.splits_w else layers_in_flight(p, st.chunk_layers)
    states = in_flight(p, st.chunk_layers) if p.splits_w else None
    apart = weight_grad_bytes(ctx) if p.splits_w else 0
    per_layer = layer_activation_bytes(ctx)
    if spec.train.recompute is Recompute.FULL:
        kept, working = e * ctx.sp_tokens * m.hidden, per_layer
    elif spec.train.recompute is Recompute.SELECTIVE and spec.train.stack is Stack.TORCHTITAN:
        kept, working = torchtitan_sac_bytes(ctx), per_layer
    else:
        kept, working = per_layer, 0
    sharded = {ZeroStage.NONE: 0, ZeroStage.Z1: 1, ZeroStage.Z2: 2, ZeroStage.Z3: 3, ZeroStage.FSDP: 3}[zero]
    best: Memory | None = None
    for r in range(st.pp):
        kind = rank_kind_of(st, r)
        first, last = kind in (RankKind.ONLY, RankKind.FIRST), kind in (RankKind.ONLY, RankKind.LAST)
        params = shard.rank(m, par, pp=st.pp, layers=sum(chunks[g] for g in st.placement[r]), first=first,
                            last=last, vocab=ctx.vocab)
        if states is None:
            acts = (p.peak_in_flight[r] * chunks[0] if held is None else held[r]) * kept
        else:
            acts = vmax(*(whole * kept + waiting * apart for whole, waiting in states[r]))

        def split(level: int, bytes_per: Any) -> Any:
            return bytes_per * (params.dense / (dp if sharded >= level else 1)
                                + params.expert / (edp if sharded >= level else 1))

        layer = shard.layer(m, par).total
        gathered = 2 * layer * e if sharded == 3 else 0
        if _fsdp(spec):
            # The root module's own parameters (embedding, final norm, head) are gathered from the
            # start of the forward to the end of the backward: FSDP1 keeps the root unsharded after
            # forward (pytorch/pytorch@v2.3.0:torch/distributed/fsdp/_runtime_utils.py,
            # _post_forward_reshard: "Do not free the root's parameters in the post-forward"), and
            # torchtitan's FSDP2 root re-gathers them for the head's backward
            # (pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/parallelize_llama.py, apply_fsdp).
            gathered += e * (params.total - m.layers / st.pp * layer)
        cand = Memory(
            weights=split(3, _weight_bytes(spec, e)) + gathered, grads=split(2, grad_bytes(ctx)),
            optimizer=split(1, _state_bytes(spec)),
            activations=acts + working,
            logits=logits_bytes(ctx) * ctx.tokens * ctx.vocab / par.tp if last else 0,
            overhead=_overhead(st), capacity=spec.cluster.gpu.memory, rank=r)
        best = cand if best is None else _fuller(best, cand)
    assert best is not None
    return best


def _fuller(a: Memory, b: Memory) -> Memory:
    """The fuller of two ranks' memory (per configuration over a sweep)."""
    pick = b.total > a.total
    if isinstance(pick, np.ndarray):
        fields = ("weights", "grads", "optimizer", "activations", "logits", "overhead", "capacity", "rank")
        return Memory(**{f: np.where(pick, getattr(b, f), getattr(a, f)) for f in fields})
    return b if pick else a
