"""The type of a spec's structural facts, :class:`Structure`: what fixes the shape of its operator
graph and its schedule (:mod:`~llmp.analytic.structure` derives and checks them).

Kept apart from the derivation so that the operator graph's types (:mod:`~llmp.analytic.op`) and
the placement (:mod:`~llmp.analytic.layout`), which the derivation itself reads, can name the type
with a plain import: the derivation sits above them, the type below.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmp.analytic.kernels import Tier
from llmp.analytic.kinds import LayerKind
from llmp.spec.spec import world_size


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
