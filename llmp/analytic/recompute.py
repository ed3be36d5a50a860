"""What a layer re-runs before its backward (activation recomputation), as the stack recomputes it:
``recompute = full`` its whole forward, ``selective`` the attention core or torchtitan's op-level
selective activation checkpointing (SAC), which saves every other matmul's output
(:func:`matmuls`).

The re-run ops are the layer's forward ops renamed ``recompute.*``, placed in the backward.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from llmp.analytic import finetune
from llmp.analytic.block import Context
from llmp.analytic.kernels import Collective, CollectiveKind, Elementwise, Family, Kernel
from llmp.analytic.kinds import LayerKind
from llmp.analytic.op import Op, Overlap, Part
from llmp.spec.spec import Recompute
from llmp.stacks import SelectiveRecompute


def recomputed_forward(ctx: Context, kind: LayerKind, fwd: list[Op], core: list[str]) -> list[Op]:
    """The forward work a layer of ``kind`` re-runs before its backward, as the stack recomputes it.

    ``full``: every forward op but FSDP's prefetched parameter gathers. ``selective`` by the
    stack's :class:`~llmp.stacks.SelectiveRecompute`: the attention core (and the context-parallel
    ring exchanges that feed it; Korthikanti et al. 2022 §5, Megatron-Core
    ``--recompute-granularity selective``), or torchtitan's op-level SAC (:func:`matmuls`):
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


def matmuls(ctx: Context, fwd: list[Op], core: list[str]) -> tuple[Matmul, ...]:
    """Every matmul of a dense-MLP layer's forward ``fwd`` (``core``: its attention core's ops) and
    whether op-level SAC saves it: torchtitan counts ``aten.mm`` calls per checkpointed layer and
    saves the odd ones (``meta[mm_count] % 2 == 0`` is recomputed after the increment;
    pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/parallelize_llama.py, _custom_policy). For
    SwiGLU that saves wq, wv, w1, w2 and re-runs wk, wo, w3. The memory model reads the same list
    (:func:`llmp.analytic.layer.op_sac_matmuls`)."""
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
    by_op: dict[str, list[Matmul]] = {}
    for mm in matmuls(ctx, fwd, core):
        by_op.setdefault(mm.op, []).append(mm)
    redo: list[Op] = []
    renamed: dict[str, str] = {}
    for op in fwd:
        if op.overlap is Overlap.PREFETCH:
            continue
        if op.name in core and saved_core:
            continue
        if isinstance(op.work, Collective) and op.work.kind is CollectiveKind.REDUCE_SCATTER:
            continue
        if op.name in by_op:
            assert isinstance(op.work, Kernel)
            for mm in by_op[op.name]:
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


def _recomputed(ops: list[Op]) -> list[Op]:
    """Forward ops run again in the backward (activation recomputation)."""
    out = []
    for op in ops:
        partner = f"recompute.{op.partner}" if op.partner else ""
        out.append(Op(name=f"recompute.{op.name}", work=op.work, phase=op.phase, part=Part.BACKWARD,
                      scope=op.scope, count=op.count, axis=op.axis, overlap=op.overlap,
                      partner=partner, recompute=True, kind=op.kind))
    return out
