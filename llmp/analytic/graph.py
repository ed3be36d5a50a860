"""The operator graph of one training step: what runs, where, when and how often.

:func:`decompose` lists the operators of one microbatch on one pipeline chunk (forward, backward,
recompute, the collectives between them) plus the once-per-step work of each pipeline rank
(gradient sync, optimizer). Each :class:`Op` is a kernel or a collective with a *scope* that
says where it repeats:

* ``layer``: once per transformer layer of a chunk (a chunk has ``layers / (pp * vp)`` layers);
* ``first`` / ``last``: once per microbatch on the chunk holding the embedding / the head;
* ``boundary``: once per microbatch between consecutive chunks (pipeline send/recv);
* ``rank``: once per step on one kind of pipeline rank (``rank_kind``: only, first, middle, last).

``count`` is the multiplicity inside the scope (``cp - 1`` ring steps, gradient buckets, ...).
Dims are whatever the spec holds: numbers (one prediction), numpy arrays (a sweep) or SymPy
symbols (closed forms); the shape of the graph is fixed by the spec's :class:`Structure`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.analytic.kernels import Collective, Family, Kernel
from llmp.analytic.layout import Axis
from llmp.analytic.structure import Structure, structure_of
from llmp.dsl.spec import Spec


class Phase(StrEnum):
    FWD = "fwd"
    BWD_ACT = "bwd_act"
    """Gradient with respect to activations (dgrad) and the backward of non-GEMM kernels."""
    BWD_W = "bwd_w"
    """Gradient with respect to weights (wgrad)."""
    OPTIM = "optim"
    COMM = "comm"


class Stream(StrEnum):
    COMPUTE = "compute"
    COMM = "comm"


class Part(StrEnum):
    """When in the step an op runs."""

    FORWARD = "fwd"
    BACKWARD = "bwd"
    """The backward of a microbatch, including recomputed forward work."""
    GRAD_SYNC = "grad_sync"
    """After the last backward: gradient reduction across replicas."""
    UPDATE = "update"
    """After gradient sync: optimizer step and parameter all-gather."""


class Scope(StrEnum):
    LAYER = "layer"
    FIRST = "first"
    LAST = "last"
    BOUNDARY = "boundary"
    RANK = "rank"


class RankKind(StrEnum):
    """Pipeline ranks that differ in their once-per-step work."""

    ONLY = "only"
    """pp = 1: the one rank holds everything."""
    FIRST = "first"
    MIDDLE = "middle"
    LAST = "last"


class Overlap(StrEnum):
    """How much of a collective's time is exposed (the rules live in ``llmp.compose.overlap``)."""

    NONE = "exposed"
    """Blocks the compute stream for its whole duration."""
    TP = "tp"
    """Exposed, unless ``tp_comm_overlap`` hides it behind its partner GEMM."""
    PARTNER = "partner"
    """Always overlapped with its partner op: only the excess over the partner is exposed."""
    PREFETCH = "prefetch"
    """ZeRO-3/FSDP per-layer gather/scatter, prefetched one layer ahead."""
    BUCKETED = "bucketed"
    """Gradient buckets reduced while the last backward still runs."""
    NEXT_FORWARD = "next_forward"
    """The distributed optimizer's parameter all-gather, hidden behind the next step's first
    forward (Megatron-Core ``overlap_param_gather``): only its excess over that forward is exposed."""


COMPUTE_FAMILIES: tuple[str, ...] = tuple(f.value for f in Family if f is not Family.OPTIMIZER)


@dataclass(frozen=True, kw_only=True, slots=True)
class Op:
    """One operator: a kernel or a collective, where it runs and how often."""

    name: str
    """Dotted name, e.g. ``layer.attn.qkv.dgrad``; recomputed ops start with ``recompute.``."""
    work: Kernel | Collective
    phase: Phase
    part: Part
    scope: Scope
    count: Any = 1
    """Calls per scope unit (per layer, per microbatch, per step)."""
    rank_kind: RankKind | None = None
    """For ``rank``-scope ops: which pipeline ranks run it."""
    axis: Axis | None = None
    """For collectives: the parallel axis (its breakdown category)."""
    overlap: Overlap = Overlap.NONE
    partner: str = ""
    """Name of the op (same scope and part) whose time can hide this collective."""
    recompute: bool = False

    @property
    def stream(self) -> Stream:
        return Stream.COMM if isinstance(self.work, Collective) else Stream.COMPUTE

    @property
    def category(self) -> str:
        """Breakdown category: op family, ``recompute``, ``optimizer`` or the collective's axis."""
        if isinstance(self.work, Collective):
            assert self.axis is not None
            return self.axis.value
        if self.work.family is Family.OPTIMIZER:
            return "optimizer"
        return "recompute" if self.recompute else self.work.family.value

    @property
    def family(self) -> str:
        """Kernel family or collective kind (the residual model's grouping)."""
        return self.work.family.value if isinstance(self.work, Kernel) else self.work.kind.value


@dataclass(frozen=True, kw_only=True, slots=True)
class OpGraph:
    """The operators of one step; ``ops`` are ordered as they run within their scope and part."""

    ops: tuple[Op, ...]
    structure: Structure
    layers_per_chunk: Any
    """Transformer layers in one pipeline chunk: layers / (pp * vp)."""
    groups: dict[tuple[Scope, Part | RankKind], tuple[int, ...]]
    """Indices of the ops of each (scope, part), and of each (rank scope, rank kind)."""

    @classmethod
    def of(cls, ops: tuple[Op, ...], structure: Structure, layers_per_chunk: Any) -> OpGraph:
        groups: dict[tuple[Scope, Part | RankKind], list[int]] = {}
        for i, op in enumerate(ops):
            key = (op.scope, op.rank_kind if op.scope is Scope.RANK else op.part)
            groups.setdefault(key, []).append(i)
        return cls(ops=ops, structure=structure, layers_per_chunk=layers_per_chunk,
                   groups={k: tuple(v) for k, v in groups.items()})

    def indices(self, scope: Scope, part: Part | RankKind) -> tuple[int, ...]:
        """Positions in ``ops`` of one scope's ops for one part (or, for ``rank``, one rank kind)."""
        return self.groups.get((scope, part), ())

    def __iter__(self):  # noqa: ANN204 - a plain iterator over ops
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def rank_kinds(self) -> tuple[RankKind, ...]:
        return rank_kinds(self.structure.pp)


def rank_kinds(pp: int) -> tuple[RankKind, ...]:
    """The kinds of pipeline ranks present: only; first, last; or first, middle, last."""
    if pp == 1:
        return (RankKind.ONLY,)
    return (RankKind.FIRST, RankKind.LAST) if pp == 2 else (RankKind.FIRST, RankKind.MIDDLE, RankKind.LAST)


def rank_kind_of(rank: int, pp: int) -> RankKind:
    """The kind of pipeline rank ``rank`` (0-based) among ``pp``."""
    if pp == 1:
        return RankKind.ONLY
    if rank == 0:
        return RankKind.FIRST
    return RankKind.LAST if rank == pp - 1 else RankKind.MIDDLE


def decompose(spec: Spec, structure: Structure | None = None) -> OpGraph:
    """The operator graph of ``spec``.

    ``structure`` defaults to the spec's own (which needs numeric degrees); pass it explicitly
    when the spec holds symbols or arrays.
    """
    from llmp.analytic import layer, stage  # the builders import the types above

    st = structure if structure is not None else structure_of(spec)
    ctx = layer.Context.of(spec, st)
    ops = (*layer.layer_ops(ctx), *stage.embedding_ops(ctx), *stage.head_ops(ctx),
           *stage.boundary_ops(ctx), *stage.rank_ops(ctx))
    per_chunk = spec.model.layers / (spec.parallel.pp * spec.parallel.vp)
    return OpGraph.of(tuple(ops), st, per_chunk)
