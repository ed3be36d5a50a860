"""The operator graph's types: an :class:`Op` (a kernel or a collective with a scope, a phase, a
pipeline :class:`Task` and an overlap rule) and the :class:`OpGraph` of one step, which
:func:`~llmp.analytic.graph.decompose` builds. Kept apart from the builder so the builders
(``layer.py``, ``stage.py``) and the schedule table import the types without importing themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from llmp.analytic.kernels import Collective, Family, Kernel
from llmp.analytic.layout import Axis
from llmp.analytic.shape import Structure


class Phase(StrEnum):
    FWD = "fwd"
    BWD_ACT = "bwd_act"
    """Gradient with respect to activations (dgrad) and the backward of non-GEMM kernels."""
    BWD_W = "bwd_w"
    """Gradient with respect to weights (wgrad)."""
    OPTIM = "optim"
    COMM = "comm"


class Task(StrEnum):
    """The pipeline task a per-microbatch op belongs to (Qi et al. 2024, "Zero Bubble Pipeline
    Parallelism", arXiv 2401.10241, §2.1): a schedule orders these per chunk and microbatch."""

    F = "F"
    """Forward (with its collectives)."""
    B = "B"
    """Input gradient: the dgrad GEMMs, the backward of the non-GEMM kernels, the recomputed
    forward and the backward collectives on the input gradient's path."""
    W = "W"
    """Weight gradient: the wgrad GEMMs, the embedding's backward, gradient accumulation and the
    collectives of weight gradients (ZeRO-3's per-layer reduce-scatter)."""


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
    """Holds the embedding and the head: the one rank of pp = 1, or rank 0 of a schedule that
    places the first and the last chunk together (ZB-V's V shape, DualPipe's two copies)."""
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
    """For ``rank``-scope ops: which kind of pipeline rank runs it."""
    ranks: tuple[int, ...] = ()
    """For ``rank``-scope ops: the pipeline ranks that run it (each once per step)."""
    axis: Axis | None = None
    """For collectives: the parallel axis (its breakdown category)."""
    overlap: Overlap = Overlap.NONE
    partner: str = ""
    """Name of the op (same scope and part) whose time can hide this collective."""
    recompute: bool = False
    kind: int = 0
    """For ``layer``-scope ops: the index of their layer kind in ``Structure.kinds``."""
    weight_grads: bool = False
    """A collective of weight gradients (ZeRO-3/FSDP's reduce-scatter): it runs in the W task."""

    @property
    def task(self) -> Task | None:
        """The pipeline task of a per-microbatch op: ``F`` for the forward part; in the backward
        ``W`` for weight-gradient work (phase ``bwd_w``, or a collective of weight gradients) and
        ``B`` for the rest; None for the once-per-step work of a rank."""
        if self.part is Part.FORWARD:
            return Task.F
        if self.part is Part.BACKWARD:
            return Task.W if self.phase is Phase.BWD_W or self.weight_grads else Task.B
        return None

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
    chunk_layers: tuple[Any, ...]
    """Transformer layers of each pipeline chunk in model order (on the ranks of
    ``structure.placement``): ``layers / (pp * vp)`` each for an even split (symbolic if
    ``layers`` is), else the split's counts."""
    groups: dict[tuple[Scope, Part | Task | int], tuple[int, ...]]
    """Indices of the ops of each (scope, part) and (scope, task), and of each (rank scope,
    pipeline rank)."""
    chunk_kinds: tuple[tuple[Any, ...], ...] = ()
    """Layers of each kind (``structure.kinds`` order) in each chunk; one kind: ``chunk_layers``."""
    memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """What composition derives from the ops alone (``llmp.compose.overlap``), kept with the graph
    so that each warm prediction on it reuses it."""

    @classmethod
    def of(cls, ops: tuple[Op, ...], structure: Structure, chunk_layers: tuple[Any, ...],
           chunk_kinds: tuple[tuple[Any, ...], ...] | None = None) -> OpGraph:
        groups: dict[tuple[Scope, Part | Task | int], list[int]] = {}
        for i, op in enumerate(ops):
            scope = op.scope
            if scope is Scope.RANK:
                for r in op.ranks:
                    groups.setdefault((scope, r), []).append(i)
                continue
            groups.setdefault((scope, op.part), []).append(i)
            task = op.task
            if task is not None:  # a once-per-step op outside the rank scope has none
                groups.setdefault((scope, task), []).append(i)
        return cls(ops=ops, structure=structure, chunk_layers=chunk_layers,
                   groups={k: tuple(v) for k, v in groups.items()},
                   chunk_kinds=chunk_kinds if chunk_kinds is not None else tuple((n,) for n in chunk_layers))

    @property
    def layers_per_chunk(self) -> Any:
        """Mean layers per chunk: ``layers / (pp * vp)``."""
        return sum(self.chunk_layers) / len(self.chunk_layers)

    @property
    def kind_layers(self) -> tuple[Any, ...]:
        """Layers of each kind in the whole model."""
        return tuple(sum(c[k] for c in self.chunk_kinds) for k in range(len(self.chunk_kinds[0])))

    def indices(self, scope: Scope, part: Part | Task | int) -> tuple[int, ...]:
        """Positions in ``ops`` of one scope's ops for one part or task (or, for ``rank``, one
        pipeline rank), in the order they run."""
        return self.groups.get((scope, part), ())

    def layer_indices(self, part: Part | Task, kind: int) -> tuple[int, ...]:
        """Positions of the ``layer``-scope ops of one part (or task) and one layer kind (kept in
        :attr:`memo`: every prediction on the graph asks again)."""
        key = ("layer", part, kind)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = tuple(i for i in self.indices(Scope.LAYER, part) if self.ops[i].kind == kind)
        return out  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)


def rank_kind_of(st: Structure, rank: int) -> RankKind:
    """The kind of pipeline rank ``rank``: whether it holds the first chunk (the embedding), the
    last (the head), both or neither, as the schedule places the chunks."""
    first, last = st.holds(rank, 0), st.holds(rank, st.chunks - 1)
    if first and last:
        return RankKind.ONLY
    if first:
        return RankKind.FIRST
    return RankKind.LAST if last else RankKind.MIDDLE


def rank_classes(st: Structure) -> tuple[tuple[RankKind, tuple[int, ...]], ...]:
    """Pipeline ranks grouped by what their once-per-step work depends on: their kind (the first
    holds the embedding, the last the head) and their layer count. An even split under Megatron's
    placement gives only; first, last; or first, middle (ranks 1 .. pp - 2), last."""
    classes: dict[tuple[RankKind, int], list[int]] = {}
    for r in range(st.pp):
        classes.setdefault((rank_kind_of(st, r), st.stage_layers(r)), []).append(r)
    return tuple((kind, tuple(ranks)) for (kind, _), ranks in classes.items())
