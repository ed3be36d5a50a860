"""Offloading to host memory: what crosses the GPU's host link, when, and what hides it.

Four things may live in host memory (``train.offload_*``), each as a stack does it:

* **activations** (``offload_activations`` layers per chunk; Megatron-Core ``--cpu-offloading
  --cpu-offloading-num-layers``, TransformerEngine's ``get_cpu_offload_context``): after a layer's
  forward its saved tensors are copied to the host on a side stream while the next layer runs,
  and copied back while the layer after it in the backward runs (NVIDIA/Megatron-LM@00caa53:
  megatron/core/transformer/transformer_config.py, ``cpu_offloading_num_layers``: "the number of
  transformer layers for which activations has to be offloaded"). Priced as a prefetch: each
  layer's copy hides behind the compute its layer leaves free, the first (last) one is exposed;
* **parameters** (``offload_params``: PyTorch FSDP ``CPUOffload(offload_params=True)``, DeepSpeed
  ZeRO-3 ``offload_param``): a layer's shard is copied to the GPU before each of its ZeRO-3/FSDP
  gathers, prefetched with them; the shard is what FSDP keeps (FP32 under FSDP, the model dtype
  under ZeRO-3);
* **gradients** (``offload_grads``): each layer's reduced gradient shard goes to the host after its
  reduce-scatter (with ``offload_params``), or the GPU's whole shard at the end of the step;
* **optimizer states** (``offload_optimizer`` = the fraction on the host; Megatron-Core
  ``--optimizer-cpu-offload --optimizer-offload-fraction``, DeepSpeed ZeRO-Offload): each step the
  fraction's gradients cross to the host (unless already there), the host runs the update over its
  states in host memory (priced on that memory traffic, as a GPU optimizer is on its own: reading
  the FP32 master, the moments and the gradient, writing the first two back and the 16-bit
  parameter), and the updated parameters cross back. With ``offload_overlap`` (Megatron-Core
  ``--overlap-cpu-optimizer-d2h-h2d``) the copies of one parameter group run beside the update of
  another, so only their excess over the update shows; otherwise they run one after another.

Every copy runs on the GPU's host link (``gpu.host_bandwidth``: PCIe, or NVLink-C2C on GH200 and
GB200), the update on ``gpu.host_memory_bandwidth``; their time is the breakdown's ``host``. What
leaves the GPU's memory is :mod:`llmp.compose.memory`'s.
"""

from __future__ import annotations

from typing import Any

from llmp.analytic import kinds as layer_kinds
from llmp.analytic import shard
from llmp.analytic.activations import kept_bytes
from llmp.analytic.block import Context
from llmp.analytic.grads import grad_bytes
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.analytic.layout import Axis
from llmp.analytic.op import Op, Overlap, Part, Phase, RankKind, Scope
from llmp.spec.spec import Optimizer, Precision, ZeroStage


def _positive(x: Any) -> bool:
    """``x > 0`` for the structural numbers (a free symbol counts as not offloading)."""
    try:
        return float(x) > 0
    except TypeError:
        return False


def _copy(nbytes: Any, tier: Tier = Tier.HOST) -> Collective:
    return Collective(kind=CollectiveKind.SEND_RECV, bytes=nbytes, group=1, ranks_per_node=1, tier=tier)


def activation_fraction(ctx: Context) -> Any:
    """The share of each chunk's layers whose activations go to the host (``offload_activations``
    over the chunk's layers, at most all of them)."""
    p, t = ctx.spec.parallel, ctx.spec.train
    if not _positive(t.offload_activations):
        return 0
    chunk = ctx.spec.model.layers / (p.pp * p.vp)
    share = t.offload_activations / chunk
    return 1 if _positive(share - 1) else share


def weight_bytes(ctx: Context) -> int:
    """Bytes per parameter of a shard in host memory: FSDP keeps its sharded parameters in FP32 (the
    master copy), ZeRO-3 in the model dtype."""
    fp32 = ctx.spec.parallel.zero is ZeroStage.FSDP and ctx.spec.train.master_weights
    return 4 if fp32 or ctx.spec.train.precision in (Precision.FP32, Precision.TF32) else ctx.e


def layer_ops(ctx: Context, index: int) -> list[Op]:
    """The copies one transformer layer of kind ``ctx.st.kinds[index]`` makes to and from the host
    per microbatch (scope ``layer``, prefetched: module docstring)."""
    kind = ctx.st.kinds[index]
    prefix = layer_kinds.label(kind, ctx.st.kinds)
    t, p = ctx.spec.train, ctx.spec.parallel
    ops: list[Op] = []

    def op(name: str, nbytes: Any, part: Part, count: Any = 1) -> None:
        ops.append(Op(name=f"{prefix}.offload.{name}", work=_copy(nbytes), phase=Phase.COMM, part=part,
                      scope=Scope.LAYER, kind=index, axis=Axis.OFFLOAD, overlap=Overlap.PREFETCH, count=count))

    share = activation_fraction(ctx)
    if _positive(share):
        kept = kept_bytes(ctx, kind)[0]
        op("activations_d2h", kept, Part.FORWARD, share)
        op("activations_h2d", kept, Part.BACKWARD, share)
    if t.offload_params and p.zero in (ZeroStage.Z3, ZeroStage.FSDP):
        local = shard.layer(ctx.spec.model, p, kind, ctx.st.q_compressed)
        owned = local.dense / ctx.groups["dp"].size + local.expert / ctx.groups["expert_dp"].size
        op("params_h2d", owned * weight_bytes(ctx), Part.FORWARD)
        op("params_grad_h2d", owned * weight_bytes(ctx), Part.BACKWARD)
        if t.offload_grads:
            op("grads_d2h", owned * grad_bytes(ctx), Part.BACKWARD)
    return ops


def _update_bytes(ctx: Context) -> int:
    """Host memory traffic per parameter of the host's update: read the FP32 master, the moments
    and the FP32 gradient, write the master and the moments, write the 16-bit parameter."""
    moments = 4 if ctx.spec.train.optimizer is Optimizer.SGD else 8
    return 2 * (4 + moments) + 4 + ctx.e


def rank_ops(ctx: Context, kind: RankKind, ranks: tuple[int, ...], owned: Any) -> list[Op]:
    """A rank's once-per-step host optimizer over the fraction ``offload_optimizer`` of the ``owned``
    parameters (those whose optimizer states this GPU holds): gradients to the host, the host's
    update, parameters back (module docstring)."""
    t = ctx.spec.train
    if not _positive(t.offload_optimizer):
        return []
    n = t.offload_optimizer * owned
    overlap = Overlap.PARTNER if t.offload_overlap else Overlap.NONE

    def op(name: str, work: Collective, overlap: Overlap = Overlap.NONE) -> Op:
        return Op(name=f"step.host_optimizer{name}", work=work, phase=Phase.COMM, part=Part.UPDATE,
                  scope=Scope.RANK, rank_kind=kind, ranks=ranks, axis=Axis.OFFLOAD, overlap=overlap,
                  partner="step.host_optimizer" if overlap is Overlap.PARTNER else "")

    ops = [op("", _copy(n * _update_bytes(ctx), Tier.HOST_MEMORY))]
    already = t.offload_grads and t.offload_params  # the layers sent their gradient shards during the backward
    if not already:
        ops.append(op(".grads_d2h", _copy(n * grad_bytes(ctx)), overlap))
    ops.append(op(".params_h2d", _copy(n * ctx.e), overlap))
    return ops


def gpu_share(ctx: Context) -> Any:
    """The fraction of the optimizer update that stays on the GPU."""
    return 1 - ctx.spec.train.offload_optimizer
