"""A block's weight gradients and sharded parameters beyond its GEMMs: the bytes a gradient element
takes (:func:`grad_bytes`), the kernel that accumulates each microbatch's gradients without
gradient-accumulation fusion (:func:`grad_accumulate`), and ZeRO-3/FSDP's parameter all-gathers
and gradient reduce-scatters (:func:`zero3`). The transformer layer and the embedding and head
blocks (:mod:`~llmp.analytic.stage`) add them alike.
"""

from __future__ import annotations

from typing import Any

from llmp.analytic import shard
from llmp.analytic.block import Block, Context
from llmp.analytic.kernels import CollectiveKind, Elementwise, Family, Kernel, Pass
from llmp.analytic.layout import Axis
from llmp.analytic.op import Op, Overlap, Part, Scope
from llmp.hardware.spec import Dtype
from llmp.spec.spec import Precision, ZeroStage


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
