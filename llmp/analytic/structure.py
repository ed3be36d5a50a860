"""The structural facts of a spec: what decides the *shape* of the operator graph.

Numeric fields enter the cost formulas as values or symbols; a few numeric facts instead decide
which operators exist and how the step is scheduled: the pipeline depth and chunks, the layers
of each chunk (:mod:`~llmp.analytic.split`), the number of microbatches, which axes have degree
> 1 (a degree-1 axis has no collective), the link tier and NVLink-domain footprint of each group
(:mod:`~llmp.analytic.layout`), the kinds of layer and how many of each every chunk holds
(:mod:`~llmp.analytic.kinds`) and whether dropout or shared experts exist. :class:`~llmp.analytic.shape.Structure`
holds them, so the graph can be built from symbols or arrays while its shape stays fixed; sweeps
group their configurations by it.

:func:`structure_of` also checks that the layout can run at all and says why not: the layout
rules are :mod:`~llmp.analytic.rules`', the same that ``llmp.load`` applies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from llmp.analytic import kinds as layer_kinds
from llmp.analytic import layout, routing, rules, split
from llmp.analytic.schedules import entry
from llmp.analytic.shape import Structure
from llmp.errors import InfeasibleError, SpecError
from llmp.spec.spec import Spec


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
