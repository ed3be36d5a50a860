"""What the analytic times of a prediction were calibrated with, for its provenance.

The roofline and the alpha-beta model take their ceilings from the catalog: a GPU's measured
``achievable`` / ``flash_attention`` rates and a link's measured ``efficiency`` and
``peer_bandwidth`` where published micro-benchmarks give them, the datasheet numbers where they
do not. A user reading a prediction must see which of the two each kernel kind and each link
used, and where a measured number came from; :func:`notes` says it, one line per kernel kind
(family and dtype) and per link the step's collectives cross.
"""

from __future__ import annotations

from llmp.analytic.kernels import Collective, Kernel, Tier, cost
from llmp.analytic.op import OpGraph
from llmp.analytic.pricing import Hardware
from llmp.analytic.roofline import Ceiling
from llmp.dsl import catalog
from llmp.hardware.catalog import catalog_ids
from llmp.hardware.spec import Attainable, Dtype, Link
from llmp.spec.spec import Spec
from llmp.units import format_flops, format_rate


def notes(graph: OpGraph, spec: Spec) -> tuple[str, ...]:
    """One line per tensor-core kernel kind and per link used: calibrated (how, from what) or not."""
    hw = Hardware.of(spec)
    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for op in graph.ops:
        k = op.work
        if not isinstance(k, Kernel) or (k.family.value, k.dtype.value) in seen:
            continue
        if not cost(k).tensor_core:
            continue
        seen.add((k.family.value, k.dtype.value))
        lines.append(_kernel_note(k, hw))
    tiers = {op.work.tier for op in graph.ops if isinstance(op.work, Collective)}
    c = spec.cluster
    if tiers:  # inter-node groups also run their intra-node phases on NVLink
        lines.append(_link_note("node.intra", c.node.intra))
    if Tier.INTER in tiers:
        lines.append(_link_note("cluster.inter", c.inter))
    return tuple(lines)


def _kernel_note(k: Kernel, hw: Hardware) -> str:
    rate, which = hw.ceiling_for(k, True)
    peak = hw.device.peak_flops[k.dtype]
    head = f"{k.family.value} {k.dtype.value}"
    if which is Ceiling.PEAK:
        return (f"{head}: datasheet peak {format_flops(peak, sig=4)} (gpu {hw.device.id} has no published "
                "micro-benchmark rate for this kernel)")
    facts: Attainable | None = (hw.device.flash_attention if which is Ceiling.FLASH_ATTENTION
                                else hw.device.achievable)
    assert facts is not None
    return (f"{head}: gpu.{which.value}.{k.dtype.value} = {format_flops(rate, sig=4)}, {float(rate / peak):.0%} "
            f"of the {format_flops(peak, sig=4)} datasheet peak; a best-shape ceiling, so smaller kernels stay "
            f"optimistic ({_credit(which, k.dtype, rate, facts)})")


def _credit(which: Ceiling, dtype: Dtype, rate: object, facts: Attainable) -> str:
    """Who measured ``rate``: the catalog's source only where a catalog GPU carries this very rate
    under that source; a number typed in a spec (or with ``--set``) is never credited to one."""
    sourced = False
    for gpu in catalog.gpus().values():
        shipped = gpu.flash_attention if which is Ceiling.FLASH_ATTENTION else gpu.achievable
        if shipped is None or shipped.source != facts.source or dtype not in shipped.rates:
            continue
        if shipped.rates[dtype] == rate:
            return f"source: {facts.source}" if facts.source else "catalog value, no source given"
        sourced = True
    if sourced:
        return "written in the spec or with --set; its source measured another value, so none is cited"
    if facts.source:
        return f"written in the spec, which names its source as {facts.source!r}"
    return "written in the spec or with --set; no measurement is cited"


def _catalog_link(link: Link) -> bool:
    """Whether ``link`` is the catalog's link of its id with the catalog's efficiency."""
    if link.id not in catalog_ids()["link"]:
        return False
    return catalog.link(link.id).efficiency == link.efficiency


def _link_note(path: str, link: Link) -> str:
    head = f"{path} {link.id}"
    peer = ("" if link.peer_bandwidth is None else
            f"; pairs without a switch: {format_rate(link.peer_bandwidth)} each (peer_bandwidth)")
    if link.efficiency == 1:
        return f"{head}: line rate {format_rate(link.bandwidth)} (no measured efficiency){peer}"
    where = ("fitted on published nccl-tests measurements, see the catalog" if _catalog_link(link) else
             "written in the spec or with --set; no measurement is cited")
    return (f"{head}: efficiency {float(link.efficiency):.2f} of the {format_rate(link.bandwidth)} line rate "
            f"({where}){peer}")
