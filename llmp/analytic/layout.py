"""Where the ranks of each parallel axis sit: group sizes, members per NVLink domain, link tier.

Placement (the team contract, ``ParallelSpec``): ranks are numbered with tensor parallelism
innermost, so a TP group is consecutive ranks; then context parallel, then the expert-parallel
slice of data parallelism, then pipeline, then the rest of data parallelism outermost. Each axis
is a set of mesh dims ``(stride, size)``; a group's members are the rank offsets
``sum(j_i * stride_i)``. Megatron-Core's own default order is ``tp-cp-ep-dp-pp`` (pipeline
outermost); the order here is one constant, :data:`MESH_ORDER`.

Consecutive ranks fill a node (``gpus_per_node``), and consecutive nodes an NVLink domain
(``node.nvlink_domain``: the whole switch fabric, 72 GPUs on a GB200 NVL72 rack of 4-GPU trays;
the node itself otherwise). A group whose members all share one domain runs on the ``intra``
link (tier ``intra``); any group that reaches beyond its domain runs across the NICs (tier
``inter``), priced by :mod:`~llmp.analytic.collectives` as NCCL runs it over the members each
domain holds. Groups of any size are allowed: a tp group of 8 on Perlmutter's 4-GPU nodes spans
two nodes, and every tp > 1 on TACC Vista (one GPU per node) crosses InfiniBand.

:func:`placement` counts members exactly by laying out every rank, so groups that straddle a
domain boundary unevenly (tp 16 on 72-GPU domains: some groups hold 8 + 8) are seen: a tier is
``inter`` if any group of the axis crosses, and ``ranks_per_node`` is the fewest members one
domain holds of any crossing group (its NIC rails carry the ring's inter-domain hop).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from llmp.analytic.kernels import Tier
from llmp.dsl.spec import Spec

if TYPE_CHECKING:
    from llmp.analytic.structure import Structure


class Axis(StrEnum):
    """A parallel mesh axis; also the breakdown category of its exposed communication."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    PP = "pp"
    DP = "dp"


MESH_ORDER: tuple[str, ...] = ("etp", "tp_rest", "cp", "ep", "pp", "dp_rest")
"""Mesh dims, innermost first. ``etp`` and ``tp_rest`` = tp / etp make up tensor parallelism (an
expert's matrices are split over the ``etp`` innermost TP ranks); ``ep`` is the expert-parallel
slice of dp; ``dp_rest`` = dp / ep."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """The process group of one collective: its size and its footprint on an NVLink domain."""

    size: Any
    ranks_per_node: Any
    """Members sharing one NVLink domain (the node, unless ``nvlink_domain`` is larger): the whole
    group when the tier is ``intra``; the fewest a domain holds when the group crosses domains."""
    tier: Tier


# The dims each communication group spans. Gradients of dense weights are reduced over every
# replica of the weight: all of dp (ep slice and the rest) and cp (Megatron's
# data-parallel-with-context-parallel group). Expert weights are replicated only over cp and
# dp / ep (their expert-data-parallel group), and over the tp / etp TP ranks that hold the same
# slice of an expert. ``etp_ep`` is the all-gather dispatcher's group (Megatron ``tp_ep_group``).
_GROUP_DIMS: dict[str, tuple[str, ...]] = {
    "tp": ("etp", "tp_rest"), "cp": ("cp",), "ep": ("ep",), "pp": ("pp",),
    "dp": ("cp", "ep", "dp_rest"), "expert_dp": ("tp_rest", "cp", "dp_rest"),
    "etp": ("etp",), "etp_ep": ("etp", "ep"),
}

GROUP_NAMES: tuple[str, ...] = tuple(_GROUP_DIMS)


def mesh_sizes(spec: Spec) -> dict[str, Any]:
    """Mesh dim → size (``dp_rest`` = dp / ep)."""
    p = spec.parallel
    return {"etp": p.expert_tp, "tp_rest": p.tp / p.expert_tp, "cp": p.cp, "ep": p.ep, "pp": p.pp,
            "dp_rest": p.dp / p.ep}


def group_size(spec: Spec, name: str) -> Any:
    """Members of group ``name`` (an expression when the degrees are symbols)."""
    return _size(mesh_sizes(spec), name)


def _size(sizes: dict[str, Any], name: str) -> Any:
    out: Any = 1
    for dim in _GROUP_DIMS[name]:
        out = out * sizes[dim]
    return out


@functools.cache
def placement(sizes: tuple[int, ...], domain: int) -> dict[str, tuple[int, int, Tier]]:
    """Group name → (size, members per domain, tier) for mesh dim ``sizes`` (in
    :data:`MESH_ORDER`) and ``domain`` GPUs per NVLink domain, counted over every rank."""
    ranks = np.arange(int(np.prod(sizes))).reshape(sizes[::-1])  # axis 0 = outermost dim
    axis_of = {dim: len(MESH_ORDER) - 1 - i for i, dim in enumerate(MESH_ORDER)}
    out = {}
    for name, dims in _GROUP_DIMS.items():
        mine = sorted(axis_of[d] for d in dims)  # outer to inner: members in increasing rank order
        others = [a for a in range(len(sizes)) if a not in mine]
        n = int(np.prod([sizes[len(MESH_ORDER) - 1 - a] for a in mine]))
        members = np.transpose(ranks, others + mine).reshape(-1, n) // domain
        row = np.repeat(np.arange(len(members)), n)
        keys, counts = np.unique(row * (int(members.max()) + 1) + members.ravel(), return_counts=True)
        groups_of_key = keys // (int(members.max()) + 1)
        spans = np.bincount(groups_of_key)
        if spans.max() == 1:
            out[name] = (n, n, Tier.INTRA)
        else:
            crossing = spans[groups_of_key] > 1
            out[name] = (n, int(counts[crossing].min()), Tier.INTER)
    return out


def _whole(value: Any, what: str) -> int:
    f = float(value)
    assert f == int(f), f"{what} = {f} is not whole (structure_of checks this)"
    return int(f)


def groups_of(spec: Spec) -> dict[str, tuple[int, int, Tier]]:
    """:func:`placement` of a spec with numeric degrees."""
    sizes = mesh_sizes(spec)
    return placement(tuple(_whole(sizes[d], d) for d in MESH_ORDER),
                     _whole(spec.cluster.node.domain, "node.nvlink_domain"))


def group(spec: Spec, name: str, st: Structure) -> Group:
    """Group ``name`` (``tp``, ``cp``, ``ep``, ``pp``, ``dp``, ``expert_dp``, ``etp``, ``etp_ep``) of ``spec``: its size
    from the spec (numbers, arrays or symbols), its footprint and tier from the structure."""
    return Group(size=group_size(spec, name), ranks_per_node=st.ranks_per_node(name), tier=st.tier(name))


def groups(spec: Spec, st: Structure) -> dict[str, Group]:
    """Every group of :data:`GROUP_NAMES` (:func:`group`), from one reading of the mesh."""
    sizes, footprints, tiers = mesh_sizes(spec), dict(st.footprints), dict(st.tiers)
    return {name: Group(size=_size(sizes, name), ranks_per_node=footprints[name], tier=tiers[name])
            for name in GROUP_NAMES}
