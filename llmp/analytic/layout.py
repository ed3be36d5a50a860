"""Where the ranks of each parallel axis sit: group sizes, members per NVLink domain, link tier.

Placement (the team contract, ``ParallelSpec``): ranks are numbered with tensor parallelism
innermost, so a TP group is consecutive ranks; then context parallel, then the data-parallel
replicas the expert groups need (``dp_in``, below), then pipeline, then the rest of data
parallelism outermost. Each axis is a set of mesh dims; a group's members are the ranks that
differ only along its dims. Megatron-Core's own default order is ``tp-cp-ep-dp-pp`` (pipeline
outermost); the order here is one constant, :data:`MESH_ORDER`.

Attention and expert layers have different meshes (MoE parallel folding, Megatron-Core): the
attention (dense) mesh is ``tp x cp x dp x pp``; the expert mesh is ``etp x ep x edp x pp``, laid
out over the same ranks with ``edp = tp cp dp / (etp ep)``. Megatron builds the two with two rank
generators, ``RankGenerator(tp, ep=1, dp, pp, cp, order)`` and ``RankGenerator(tp=etp, ep, dp=edp,
pp, cp=1, order)``, and asserts that their pipeline groups are the same
(NVIDIA/Megatron-LM@00caa53:megatron/core/parallel_state.py, ``initialize_model_parallel``;
``--expert-tensor-parallel-size`` defaults to tp). So inside one pipeline stage the stage's ranks,
in increasing order, are ``tp x cp x dp`` for attention and ``etp x ep x edp`` for the experts,
innermost first ("The EPxTP group in MoE is a sub-group of DPxCPxTP in Attention",
NVIDIA/Megatron-LM@022bcb5:megatron/core/transformer/moe/README.md, "MoE Parallel Folding"). llmp
builds the expert mesh exactly so, over each stage's ranks. ``dp_in`` is the fewest data-parallel
replicas whose ranks hold whole ``etp x ep`` groups (``etp ep / gcd(etp ep, tp cp)``, which divides
dp whenever ``etp ep`` divides ``tp cp dp``), placed inside pipeline so that an expert group spans
consecutive ranks as it does in Megatron's pipeline-outermost order; with ``ep`` a divisor of dp
and ``etp = tp`` it is ``ep``, the expert-parallel slice of dp of unfolded MoE.

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
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from llmp.analytic.kernels import Tier
from llmp.analytic.shape import Structure
from llmp.spec.spec import Spec


class Axis(StrEnum):
    """A parallel mesh axis; also the breakdown category of its exposed communication."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    PP = "pp"
    DP = "dp"
    OFFLOAD = "offload"
    """Copies between a GPU and host memory, and a host-side optimizer (offloading)."""


MESH_ORDER: tuple[str, ...] = ("tp", "cp", "dp_in", "pp", "dp_out")
"""Dims of the attention (dense) mesh, innermost first: ``dp_in`` x ``dp_out`` = dp, ``dp_in`` the
replicas that hold whole expert groups (module docstring)."""

EXPERT_ORDER: tuple[str, ...] = ("etp", "ep", "edp")
"""Dims of the expert mesh inside one pipeline stage, innermost first (Megatron's expert rank
generator with its default order ``tp-cp-ep-dp-pp``: cp = 1 there, tp = etp, dp = edp)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """The process group of one collective: its size and its footprint on an NVLink domain."""

    size: Any
    ranks_per_node: Any
    """Members sharing one NVLink domain (the node, unless ``nvlink_domain`` is larger): the whole
    group when the tier is ``intra``; the fewest a domain holds when the group crosses domains."""
    tier: Tier


# The dims each communication group spans. Gradients of dense weights are reduced over every
# replica of the weight: dp and cp (Megatron's data-parallel-with-context-parallel group). Expert
# weights are replicated over their expert-data-parallel group (``edp``). ``etp_ep`` is the
# all-gather and flex dispatchers' group (Megatron ``tp_ep_group``).
_DENSE_DIMS: dict[str, tuple[str, ...]] = {
    "tp": ("tp",), "cp": ("cp",), "pp": ("pp",), "dp": ("cp", "dp_in", "dp_out")}
_EXPERT_DIMS: dict[str, tuple[str, ...]] = {
    "ep": ("ep",), "expert_dp": ("edp",), "etp": ("etp",), "etp_ep": ("etp", "ep")}

GROUP_NAMES: tuple[str, ...] = (*_DENSE_DIMS, *_EXPERT_DIMS)


def group_size(spec: Spec, name: str) -> Any:
    """Members of group ``name`` (an expression when the degrees are symbols, arrays over a sweep)."""
    p = spec.parallel
    sizes = {"tp": p.tp, "cp": p.cp, "pp": p.pp, "dp": p.dp * p.cp, "ep": p.ep, "etp": p.expert_tp,
             "etp_ep": p.expert_tp * p.ep, "expert_dp": p.tp * p.cp * p.dp / (p.expert_tp * p.ep)}
    return sizes[name]


def dp_in(tp: int, cp: int, etp: int, ep: int) -> int:
    """Data-parallel replicas placed inside the pipeline dim: the fewest whose ``tp cp dp_in``
    ranks hold whole ``etp x ep`` expert groups (module docstring)."""
    return etp * ep // math.gcd(etp * ep, tp * cp)


def members(dense: tuple[int, ...], expert: tuple[int, int]) -> dict[str, np.ndarray]:
    """Group name → its groups' member ranks (one row per group, members in increasing order) for
    attention-mesh dim sizes ``dense`` (in :data:`MESH_ORDER`) and expert degrees ``expert`` =
    (etp, ep)."""
    ranks = np.arange(int(np.prod(dense))).reshape(dense[::-1])  # axis 0 = outermost dim
    axis_of = {dim: len(MESH_ORDER) - 1 - i for i, dim in enumerate(MESH_ORDER)}
    out = {name: _rows(ranks, tuple(axis_of[d] for d in dims)) for name, dims in _DENSE_DIMS.items()}
    # The expert mesh: each stage's ranks in increasing order, split etp x ep x edp innermost first.
    etp, ep = expert
    pp = dense[MESH_ORDER.index("pp")]
    stages = np.moveaxis(ranks, axis_of["pp"], 0).reshape(pp, -1)
    experts = stages.reshape(pp, -1, ep, etp)  # axes: pp, then EXPERT_ORDER outermost first
    expert_axis = {dim: len(EXPERT_ORDER) - i for i, dim in enumerate(EXPERT_ORDER)}
    out.update({name: _rows(experts, tuple(expert_axis[d] for d in dims)) for name, dims in _EXPERT_DIMS.items()})
    return out


def _rows(ranks: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The groups whose members differ along ``axes`` of the rank array: one row per group."""
    others = [a for a in range(ranks.ndim) if a not in axes]
    n = int(np.prod([ranks.shape[a] for a in axes]))
    return np.transpose(ranks, others + sorted(axes)).reshape(-1, n)


def _footprint(groups: np.ndarray, domain: int) -> tuple[int, int, Tier]:
    """(size, fewest members per domain of a crossing group, tier) of ``groups`` (one row each)."""
    n = groups.shape[1]
    domains = groups // domain
    width = int(domains.max()) + 1
    row = np.repeat(np.arange(len(domains)), n)
    keys, counts = np.unique(row * width + domains.ravel(), return_counts=True)
    groups_of_key = keys // width
    spans = np.bincount(groups_of_key)
    if spans.max() == 1:
        return n, n, Tier.INTRA
    crossing = spans[groups_of_key] > 1
    return n, int(counts[crossing].min()), Tier.INTER


@functools.cache
def placement(dense: tuple[int, ...], expert: tuple[int, int], domain: int) -> dict[str, tuple[int, int, Tier]]:
    """Group name → (size, members per domain, tier) for attention-mesh dim sizes ``dense`` (in
    :data:`MESH_ORDER`), expert degrees ``expert`` = (etp, ep) and ``domain`` GPUs per NVLink
    domain, counted over every rank (:func:`members`)."""
    return {name: _footprint(rows, domain) for name, rows in members(dense, expert).items()}


def _whole(value: Any, what: str) -> int:
    f = float(value)
    assert f == int(f), f"{what} = {f} is not whole (structure_of checks this)"
    return int(f)


def groups_of(spec: Spec) -> dict[str, tuple[int, int, Tier]]:
    """:func:`placement` of a spec with numeric degrees."""
    p = spec.parallel
    tp, cp, dp, pp, etp, ep = (_whole(x, name) for x, name in (
        (p.tp, "tp"), (p.cp, "cp"), (p.dp, "dp"), (p.pp, "pp"), (p.expert_tp, "etp"), (p.ep, "ep")))
    inner = dp_in(tp, cp, etp, ep)
    assert dp % inner == 0, f"dp({dp}) % dp_in({inner}): the expert mesh does not tile dp (rules.py checks this)"
    domain = _whole(spec.cluster.node.domain, "node.nvlink_domain")
    return placement((tp, cp, inner, pp, dp // inner), (etp, ep), domain)


def group(spec: Spec, name: str, st: Structure) -> Group:
    """Group ``name`` (``tp``, ``cp``, ``ep``, ``pp``, ``dp``, ``expert_dp``, ``etp``, ``etp_ep``) of ``spec``: its size
    from the spec (numbers, arrays or symbols), its footprint and tier from the structure."""
    return Group(size=group_size(spec, name), ranks_per_node=st.ranks_per_node(name), tier=st.tier(name))


def groups(spec: Spec, st: Structure) -> dict[str, Group]:
    """Every group of :data:`GROUP_NAMES` (:func:`group`), from one reading of the mesh."""
    footprints, tiers = dict(st.footprints), dict(st.tiers)
    return {name: Group(size=group_size(spec, name), ranks_per_node=footprints[name], tier=tiers[name])
            for name in GROUP_NAMES}
