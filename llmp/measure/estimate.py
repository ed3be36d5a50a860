"""``llmp sample --plan``: how many GPU-minutes a sampling run takes, before renting the GPUs.

The cases are the run's own (the same :class:`~llmp.measure.sampling.SampleConfig`, so the same
design prefix, dtypes and ranges as ``llmp sample`` with the same flags), and each is priced the
way the sampler spends time on it:

* a kernel case: building its input sets (``bench.build``: as many sets as cover twice the last-level
  cache, at most 8, each written once at memory bandwidth), :data:`CASE_OVERHEAD_S` of set-up, then
  ``warm-up + 1 + repeats`` calls (``timing.time_calls``: repeats fill ``target_s``, between 5 and
  30), each call at the catalog device's roofline (``roofline.roofline`` against ``roofline.ceiling``
  with the tiles quantized on the device's SMs, as ``residuals.features.roofline_seconds`` and so
  ``llmp predict`` price it; a dtype the device has no peak for, at its FP32 vector peak).
  One round: on a GPU the sampler never retries; on a shared CPU it may retry up to twice, so a CPU
  plan is a lower bound. Each case occupies one GPU.
* a collective case: ``2 + 7`` calls of every group of its shape at once, each call at the
  analytic model's time on the catalog node's links (``analytic.collectives.time``), plus a barrier
  of the whole world before each timed call (a 4-byte all-reduce). Each case occupies every GPU.

This is the one module of the kit besides ``from_spec`` that needs the catalog (the DSL): planning
happens on a laptop, measuring on the GPU node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmp.analytic import collectives as analytic_collectives
from llmp.analytic import kernels, roofline
from llmp.analytic.kernels import Collective, CollectiveKind, Family, Kernel, Pass, Tier
from llmp.dsl import catalog
from llmp.errors import InputError
from llmp.hardware.catalog import canonical, catalog_ids
from llmp.hardware.spec import Device, Dtype, Node
from llmp.measure import collectives, design, devices, sampling

CASE_OVERHEAD_S = 0.02
"""Seconds of one kernel case outside its timed calls and input fill (Python, the row's fsync'd
append): 17 ms measured on the dev VM's CPU (39 tiny cases, 2026-11-28)."""
TIMING_WARMUP = 3
"""Untimed calls per round: ``timing.time_calls``' 2 warm-up calls and the call that sizes the repeats."""
MIN_REPEATS, MAX_REPEATS = 5, 30
"""``timing.time_calls``' bounds on the timed calls of a round."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyPlan:
    """The cases of one kernel family (or the collectives) and the device time they take."""

    family: str
    cases: int
    strata: int
    """(operator, pass) strata the cases cover (collectives: (kind, tier))."""
    gpu_s: float
    """GPU-seconds: a kernel case's time on one GPU, a collective case's time on every GPU."""
    wall_s: float
    """Seconds of the run this family takes with the plan's ranks (kernel cases split over them)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What ``llmp sample`` with these flags would measure, and for how long."""

    device_id: str
    node_id: str | None
    nodes: int
    ranks_per_node: int
    per_family: int | None
    """Cases per kernel family (``--budget``), or None when ``per_stratum`` sets the design."""
    per_stratum: int | None
    """k cases per (operator, pass) (``--per-operator``)."""
    families: tuple[FamilyPlan, ...]

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def gpu_minutes(self) -> float:
        return sum(f.gpu_s for f in self.families) / 60

    @property
    def wall_minutes(self) -> float:
        return sum(f.wall_s for f in self.families) / 60

    def to_dict(self) -> dict[str, object]:
        return {"device_id": self.device_id, "node_id": self.node_id, "nodes": self.nodes,
                "ranks_per_node": self.ranks_per_node, "per_family": self.per_family,
                "per_operator": self.per_stratum, "gpu_minutes": self.gpu_minutes, "wall_minutes": self.wall_minutes,
                "families": [{"family": f.family, "cases": f.cases, "strata": f.strata, "gpu_minutes": f.gpu_s / 60,
                              "wall_minutes": f.wall_s / 60} for f in self.families]}

    def to_table(self) -> str:
        k = (f"k = {self.per_stratum} per (operator, pass)" if self.per_stratum is not None
             else f"{self.per_family} cases per family")
        lines = [f"sampling plan on {self.device_id}: {k}, {self.nodes} node(s) x {self.ranks_per_node} ranks",
                 f"{'family':<15}{'strata':>7}{'cases':>7}{'GPU-min':>10}{'wall min':>10}"]
        for f in self.families:
            lines.append(f"{f.family:<15}{f.strata:>7}{f.cases:>7}{f.gpu_s / 60:>10.2f}{f.wall_s / 60:>10.2f}")
        cases = sum(f.cases for f in self.families)
        lines.append(f"{'total':<15}{'':>7}{cases:>7}{self.gpu_minutes:>10.2f}{self.wall_minutes:>10.2f}")
        lines.append("estimated from the catalog roofline (warm-up and repeats included); nothing was measured")
        return "\n".join(lines)


def kernel(case: design.Case) -> Kernel:
    """The analytic kernel a design case times (a GEMM's role is no variant there: the fit reads the
    sample row the same way, ``residuals.dataset.kernel_of``)."""
    variant = "" if case.family == "gemm" or case.variant == "-" else case.variant
    return Kernel.make(Family(case.family), Dtype(case.dtype), Pass(case.pass_), variant, **dict(case.dims))


def call_s(case: design.Case, device: Device) -> tuple[float, float]:
    """(seconds of one call at the device's roofline, bytes one input set holds)."""
    k = kernel(case)
    cost = kernels.cost(k)
    try:
        peak = roofline.ceiling(k, cost.tensor_core, device)[0]
    except KeyError:  # no peak for the dtype (tf32 on a CPU): the vector FP32 peak
        peak = device.peak_flops[Dtype.FP32]
    seconds = roofline.roofline(k, cost, peak=float(peak), mem_bandwidth=float(device.mem_bandwidth),
                                launch_overhead=float(device.launch_overhead), grid=roofline.Grid.of(device))
    return float(seconds), float(cost.bytes)


def catalog_device(device_id: str) -> Device:
    """The catalog device ``--device-id`` names."""
    if canonical(device_id) not in catalog_ids()["gpu"]:
        raise InputError(f"'{device_id}' is not a catalog device",
                         hint=f"catalog devices: {', '.join(catalog_ids()['gpu'])}")
    return catalog.gpu(device_id)


def catalog_node(device: Device, node_id: str | None) -> Node:
    """The catalog node ``--node-id`` names, built of ``device`` (its links price the collectives)."""
    theirs = ", ".join(n.id for n in catalog.nodes_with(device.id)) or "none"
    if node_id is None:
        raise InputError("--plan with collectives needs the node they run on: --node-id ID",
                         hint=f"catalog nodes of {device.id}: {theirs}; or leave collectives out of --families")
    if node_id not in catalog_ids()["node"]:
        raise InputError(f"'{node_id}' is not a catalog node", hint=f"catalog nodes of {device.id}: {theirs}")
    node = catalog.node(node_id)
    if node.gpu.id != device.id:
        raise InputError(f"catalog node '{node_id}' holds device '{node.gpu.id}', not '{device.id}'",
                         hint=f"catalog nodes of {device.id}: {theirs}")
    return node


def kernel_case_s(case: design.Case, device: Device, *, target_s: float, memory_cap: int) -> float:
    """Seconds ``llmp sample`` spends on one kernel case (module docstring)."""
    call, footprint = call_s(case, device)
    repeats = min(MAX_REPEATS, max(MIN_REPEATS, target_s / max(call, 1e-7)))
    sets = max(1, min(8, math.ceil(2 * float(device.l2_cache) / max(footprint, 1)), memory_cap // max(footprint, 1)))
    fill = sets * footprint / float(device.mem_bandwidth)
    return CASE_OVERHEAD_S + fill + (TIMING_WARMUP + repeats) * call


def collective_case_s(case: collectives.CollectiveCase, links: analytic_collectives.Links, world: int,
                      nodes: int) -> float:
    """Seconds one collective case takes on every rank (module docstring)."""
    s = case.shape
    call = float(analytic_collectives.time(Collective(kind=CollectiveKind(case.kind), bytes=case.bytes, group=s.size,
                                                      ranks_per_node=s.per_node, tier=Tier(s.tier)), links))
    per_node = world // nodes
    barrier = float(analytic_collectives.time(Collective(
        kind=CollectiveKind.ALL_REDUCE, bytes=4, group=world, ranks_per_node=per_node,
        tier=Tier.INTRA if nodes == 1 else Tier.INTER), links))
    return (collectives.WARMUP + collectives.REPEATS) * call + collectives.REPEATS * barrier


def estimate(config: sampling.SampleConfig, *, device_id: str | None, collectives_too: bool, per_stratum: int,
             node_id: str | None, nodes: int, ranks_per_node: int | None) -> Plan:
    """The plan of ``llmp sample`` with ``config`` (and its collectives) on catalog device ``device_id``."""
    kind = config.device
    device_id = device_id or (devices.CPU_ID if kind == "cpu" else None)
    if device_id is None:
        raise InputError("--plan --device cuda needs the GPU to price: --device-id ID",
                         hint="a catalog gpu id, e.g. --device-id h100_sxm5_80gb (llmp/hardware/catalog/)")
    device = catalog_device(device_id)
    if (kind == "cpu") != (device.id == devices.CPU_ID):
        raise InputError(f"--device {kind} samples {'the CPU' if kind == 'cpu' else 'GPUs'}, but --device-id "
                         f"{device_id} is {'a GPU' if kind == 'cpu' else 'the CPU'}",
                         hint="--device cuda --device-id GPU_ID for a GPU, --device cpu for this CPU")
    dtypes = sampling.check_dtypes(kind, config.dtypes)
    node = None
    if collectives_too:
        node = catalog_node(device, node_id or (devices.CPU_NODE_ID if device.id == devices.CPU_ID else None))
    # Ranks per node: --nproc; else the node's GPUs (cuda), two CPU processes for CPU collectives
    # (the launcher's default), one process for kernels alone.
    per_node = ranks_per_node or (1 if node is None else int(node.gpus_per_node) if kind == "cuda" else 2)
    world = nodes * per_node
    ranges = config.ranges or design.RANGES[kind]
    cases = design.design(config.families, ranges, tuple(dtypes), config.seed, config.per_family,
                          config.per_stratum)
    rows = []
    for family in config.families:
        mine = [c for c in cases if c.family == family]
        gpu_s = sum(kernel_case_s(c, device, target_s=config.target_s, memory_cap=config.memory_cap) for c in mine)
        rows.append(FamilyPlan(family=family, cases=len(mine), strata=len({c.stratum for c in mine}), gpu_s=gpu_s,
                               wall_s=gpu_s / world))
    if node is not None:
        if world < 2:
            raise InputError(f"collectives need at least 2 ranks; the plan has {nodes} node(s) x {per_node}",
                             hint="give --nproc 2 or more, or --nodes 2 or more")
        links = analytic_collectives.Links.between(node, node.inter)  # as llmp fit prices them
        plan = collectives.plan(per_node, nodes, kind, per_stratum, config.seed)
        wall = sum(collective_case_s(c, links, world, nodes) for c in plan)
        rows.insert(0, FamilyPlan(family="collectives", cases=len(plan),
                                  strata=len({(c.kind, c.shape.tier) for c in plan}), gpu_s=wall * world, wall_s=wall))
    return Plan(device_id=device.id, node_id=node.id if node is not None else None, nodes=nodes,
                ranks_per_node=per_node, per_family=None if config.per_stratum is not None else config.per_family,
                per_stratum=config.per_stratum, families=tuple(rows))
