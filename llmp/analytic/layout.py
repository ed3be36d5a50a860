"""Where the ranks of each parallel axis sit: group sizes, ranks per node and the link tier.

Placement (the team contract, ``ParallelSpec``): ranks are numbered with tensor parallelism
innermost, so a TP group is consecutive ranks inside one node; then context parallel, then the
expert-parallel slice of data parallelism, then pipeline, then the rest of data parallelism
outermost. Each axis is a set of mesh dims ``(stride, size)``; a group's members are the rank
offsets ``sum(j_i * stride_i)``. Megatron-Core's own default order is ``tp-cp-ep-dp-pp``
(pipeline outermost); the order here is one constant, :data:`MESH_ORDER`.

A node holds ``gpus_per_node`` consecutive ranks, so a dim with stride ``st`` contributes
``min(size, max(1, gpus_per_node / st))`` members to one node (dims are nested: each stride is
a multiple of the previous stride times size). A group whose members all fit in a node runs on
the intra-node link (tier ``intra``); otherwise on the network (tier ``inter``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.analytic.algebra import vmax, vmin
from llmp.analytic.kernels import Tier
from llmp.dsl.spec import Spec


class Axis(StrEnum):
    """A parallel mesh axis; also the breakdown category of its exposed communication."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    PP = "pp"
    DP = "dp"


MESH_ORDER: tuple[str, ...] = ("tp", "cp", "ep", "pp", "dp_rest")
"""Mesh dims, innermost first. ``ep`` is the expert-parallel slice of dp; ``dp_rest`` = dp / ep."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """The process group of one collective: its size and its footprint on a node."""

    size: Any
    ranks_per_node: Any
    tier: Tier


def _mesh(spec: Spec) -> dict[str, tuple[Any, Any]]:
    """dim name → (stride, size), strides as products of the inner sizes."""
    p = spec.parallel
    sizes = {"tp": p.tp, "cp": p.cp, "ep": p.ep, "pp": p.pp, "dp_rest": p.dp / p.ep}
    out: dict[str, tuple[Any, Any]] = {}
    stride: Any = 1
    for name in MESH_ORDER:
        out[name] = (stride, sizes[name])
        stride = stride * sizes[name]
    return out


# The dims each communication group spans. Gradients of dense weights are reduced over every
# replica of the weight: all of dp (ep slice and the rest) and cp (Megatron's
# data-parallel-with-context-parallel group). Expert weights are replicated only over cp and
# dp / ep (their expert-data-parallel group).
_GROUP_DIMS: dict[str, tuple[str, ...]] = {
    "tp": ("tp",), "cp": ("cp",), "ep": ("ep",), "pp": ("pp",),
    "dp": ("cp", "ep", "dp_rest"), "expert_dp": ("cp", "dp_rest"),
}


def _numeric(x: Any) -> float | None:
    try:
        return float(x)
    except TypeError:
        return None


def group(spec: Spec, name: str, tier: Tier | None = None) -> Group:
    """The group ``name`` (``tp``, ``cp``, ``ep``, ``pp``, ``dp``, ``expert_dp``) of ``spec``.

    ``tier`` must be given when the spec's degrees are symbols or arrays (the tier is a
    structural choice, fixed per structure); otherwise it is computed here.
    """
    mesh = _mesh(spec)
    gpn = spec.cluster.node.gpus_per_node
    size: Any = 1
    per_node: Any = 1
    for dim in _GROUP_DIMS[name]:
        stride, n = mesh[dim]
        size = size * n
        per_node = per_node * vmin(n, vmax(1, gpn / stride))
    if tier is None:
        s, r = _numeric(size), _numeric(per_node)
        assert s is not None and r is not None, "tier needed for symbolic or array degrees"
        tier = Tier.INTRA if r >= s else Tier.INTER
    return Group(size=size, ranks_per_node=per_node, tier=tier)


GROUP_NAMES: tuple[str, ...] = tuple(_GROUP_DIMS)
