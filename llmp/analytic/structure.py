"""The structural facts of a spec: what decides the *shape* of the operator graph.

Numeric fields enter the cost formulas as values or symbols; a few numeric facts instead decide
which operators exist and how the step is scheduled: the pipeline depth and chunks, the layers
of each chunk (:mod:`~llmp.analytic.split`), the number of microbatches, which axes have degree
> 1 (a degree-1 axis has no collective), the link tier and NVLink-domain footprint of each group
(:mod:`~llmp.analytic.layout`), the kinds of layer and how many of each every chunk holds
(:mod:`~llmp.analytic.kinds`) and whether dropout or shared experts exist. :class:`Structure`
holds them, so the graph can be built from symbols or arrays while its shape stays fixed; sweeps
group their configurations by it.

:func:`structure_of` also checks that the layout can run at all and says why not: the layout
rules are :mod:`~llmp.analytic.rules`', the same that ``llmp.load`` applies.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llmp.analytic import kinds as layer_kinds
from llmp.analytic import layout, routing, rules, split
from llmp.analytic.kernels import Tier
from llmp.analytic.kinds import LayerKind
from llmp.errors import InfeasibleError, SpecError
from llmp.spec.spec import Spec, world_size


@dataclass(frozen=True, kw_only=True, slots=True)
class Structure:
    """Integer and boolean facts that fix the operator graph and the schedule."""

    pp: int
    vp: int
    microbatches: int
    """Microbatches per pipeline per step (gradient-accumulation steps)."""
    microbatch_group: int
    """Interleaved schedule: microbatches each chunk runs in a row (``pp`` unless the spec says)."""
    degrees: tuple[tuple[str, int], ...]
    """Axis degrees: dp, tp, pp, cp, ep, vp."""
    groups: tuple[tuple[str, int], ...]
    """Communication group name → size: tp, cp, ep, pp, dp (= dp x cp), expert_dp (= dp x cp / ep)."""
    tiers: tuple[tuple[str, Tier], ...]
    """Group name → link tier (inside one NVLink domain, or across the NICs)."""
    footprints: tuple[tuple[str, int], ...]
    """Group name → members per NVLink domain (the fewest, for a group that crosses domains)."""
    chunk_layers: tuple[int, ...]
    """Transformer layers of each pipeline chunk, in model order."""
    kinds: tuple[LayerKind, ...]
    """The distinct kinds of layer (dense or MoE MLP, full or windowed attention)."""
    chunk_kinds: tuple[tuple[int, ...], ...]
    """Layers of each kind (in ``kinds`` order) in each chunk."""
    placement: tuple[tuple[int, ...], ...]
    """Per pipeline rank, the chunks it holds, as the schedule places them (Megatron: chunks
    ``r, r + pp, ...``; ZB-V: ``r`` and ``2 pp - 1 - r``; DualPipe: stage ``r`` of one model
    copy and stage ``pp - 1 - r`` of the other)."""
    dropout: bool
    shared_experts: bool
    mtp_layers: int = 0
    """Multi-token prediction modules on the last chunk."""
    mtp_kind: LayerKind | None = None
    """The kind of each multi-token prediction module's layer (the kind the next layer would have)."""
    q_compressed: bool = False
    """Multi-head latent attention with a query compression (``mla.q_lora_rank > 0``)."""
    local_experts: int = 0
    """Routed experts on each expert-parallel rank (0 for a dense model)."""
    dispatch_copies: float = 0.0
    """Rows of a MoE token on the wire (:func:`~llmp.analytic.routing.dispatch_copies`)."""

    def degree(self, axis: str) -> int:
        return dict(self.degrees)[axis]

    def group_size(self, name: str) -> int:
        return dict(self.groups)[name]

    @property
    def world_size(self) -> int:
        d = dict(self.degrees)
        return int(world_size(d["dp"], d["tp"], d["pp"], d["cp"]))

    def tier(self, name: str) -> Tier:
        return dict(self.tiers)[name]

    def ranks_per_node(self, name: str) -> int:
        return dict(self.footprints)[name]

    @property
    def even(self) -> bool:
        """Every chunk holds the same number of layers of each kind."""
        return len(set(self.chunk_kinds)) == 1

    def stage_layers(self, rank: int) -> int:
        """Layers held by pipeline rank ``rank`` (all its chunks)."""
        return sum(self.chunk_layers[g] for g in self.placement[rank])

    def holds(self, rank: int, chunk: int) -> bool:
        """Pipeline rank ``rank`` holds chunk ``chunk`` (chunk 0 has the embedding, the last the head)."""
        return chunk in self.placement[rank]

    @property
    def copied(self) -> bool:
        """Some chunk is held by two ranks (DualPipe's two model copies): their gradients are summed."""
        held = [g for chunks in self.placement for g in chunks]
        return len(held) > len(set(held))

    def active(self, name: str) -> bool:
        """The group has more than one member, so its collectives exist."""
        return self.group_size(name) > 1

    @property
    def chunks(self) -> int:
        """Pipeline chunks in the whole model (stages x virtual stages)."""
        return self.pp * self.vp


def _number(value: Any, what: str) -> float:
    try:
        return float(value)
    except TypeError:
        raise SpecError(f"{what} decides the shape of the operator graph and must be a number, got {value}",
                        hint="give it a value with --set (symbols may stand for the other fields)") from None


def _int(value: Any, what: str) -> int:
    f = _number(value, what)
    if f != int(f):
        raise InfeasibleError(f"{what} = {f:g} is not a whole number")
    return int(f)


def _raise_first(violations: Iterator[rules.Violation]) -> None:
    broken = next(violations, None)
    if broken is not None:
        raise InfeasibleError(broken.message, label=broken.label, hint=broken.hint)


def structure_of(spec: Spec) -> Structure:
    """The structure of a spec with numeric values; raises when the layout cannot run."""
    m, p = spec.model, spec.parallel
    deg = {name: _int(getattr(p, name), f"parallel.{name}") for name in ("dp", "tp", "pp", "cp", "ep", "vp")}
    _int(m.layers, "model.layers")
    _int(spec.cluster.world_size, "cluster world size")
    for name in ("heads", "kv_heads", "seq_len"):
        _int(getattr(m, name), f"model.{name}")
    _raise_first(rules.layout(spec))
    micro = _int(spec.microbatches, "microbatches = global_batch / (micro_batch * dp)")
    group = deg["pp"] if p.microbatch_group is None else _int(p.microbatch_group, "parallel.microbatch_group")
    _raise_first(rules.runnable(spec, micro, group))
    moe = m.moe
    for name in ("window", "full_attention_every", "mtp_layers"):
        _int(getattr(m, name), f"model.{name}")
    if moe is not None:
        for name in ("experts", "first_dense_layers", "every", "top_k"):
            _int(getattr(moe, name), f"model.moe.{name}")
    _int(p.expert_tp, "parallel.etp")
    from llmp.analytic.schedules import entry

    schedule = entry(p.schedule)
    _int(spec.cluster.node.domain, "node.nvlink_domain")
    placed = layout.groups_of(spec)
    chunks = split.split(spec).chunks
    present = layer_kinds.kinds(m)
    mtp = _int(m.mtp_layers, "model.mtp_layers")
    per_chunk = ((n,) for n in chunks) if len(present) == 1 else layer_kinds.counts(m, chunks)
    dropout = _number(m.dropout, "model.dropout") > 0
    shared = moe is not None and _int(moe.shared_experts, "model.moe.shared_experts") > 0
    return Structure(pp=deg["pp"], vp=deg["vp"], microbatches=micro, microbatch_group=group, degrees=tuple(deg.items()),
                     groups=tuple((n, g[0]) for n, g in placed.items()),
                     tiers=tuple((n, g[2]) for n, g in placed.items()),
                     footprints=tuple((n, g[1]) for n, g in placed.items()), chunk_layers=chunks,
                     kinds=present, chunk_kinds=tuple(per_chunk), placement=schedule.placement(deg["pp"], deg["vp"]),
                     dropout=dropout, shared_experts=shared,
                     mtp_layers=mtp, mtp_kind=layer_kinds.of_layer(m, int(m.layers)) if mtp else None,
                     q_compressed=m.mla is not None and _int(m.mla.q_lora_rank, "model.mla.q_lora_rank") > 0,
                     local_experts=_int(moe.experts, "model.moe.experts") // deg["ep"] if moe is not None else 0,
                     dispatch_copies=routing.dispatch_copies(spec) if moe is not None else 0.0)


def chunk_layers(spec: Spec, st: Structure) -> tuple[Any, ...]:
    """Layers of each chunk as the cost formulas see them: ``layers / (pp * vp)`` from the spec
    when the split is even and the layers alike (a symbol stays a symbol), else the structure's
    counts."""
    if st.even and len(st.kinds) == 1:
        p = spec.parallel
        return (spec.model.layers / (p.pp * p.vp),) * st.chunks
    return st.chunk_layers


def chunk_kind_layers(spec: Spec, st: Structure) -> tuple[tuple[Any, ...], ...]:
    """Layers of each kind in each chunk, as the cost formulas see them: symbolic like
    :func:`chunk_layers` when every layer is alike; with several kinds, the structure's counts,
    scaled by ``layers`` over their total when ``layers`` is a symbol (a derivative with respect to
    the layers grows every kind in proportion)."""
    if len(st.kinds) == 1:
        return tuple((n,) for n in chunk_layers(spec, st))
    layers = spec.model.layers
    if isinstance(layers, int):
        return st.chunk_kinds
    scale = layers / sum(st.chunk_layers)
    return tuple(tuple(n * scale for n in counts) for counts in st.chunk_kinds)
