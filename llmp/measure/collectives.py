"""Collective micro-benchmarks through ``torch.distributed``, in the group shapes layouts make.

Runs inside ``llmp sample`` started by torchrun (one process per device; ``llmp sample --families
collectives`` on one machine starts torchrun itself), gloo on CPU, NCCL on GPUs.

Group shapes. A layout's process groups are either inside a node (a tp or ep group of g
consecutive ranks: ``ranks_per_node = g``, tier ``intra``) or span nodes: g / r nodes with r
members each, the members of a node strided by ``local_size / r`` (a dp or pp group over nodes
holding one rank of each node, r = 1: "ranks strided by the node size"; with tp = 4 on 8-GPU nodes
a dp group holds 2 ranks of each node; a tp group wider than a node holds all of them), tier
``inter`` (:mod:`llmp.analytic.layout` places ranks so). :func:`shapes` lists the shapes a world of
``nodes`` x ``local_size`` ranks can hold: g and r powers of two (and the whole node or world),
as degrees are. Each case runs every group of its shape at once, every rank in one group
(:func:`groups`), because in a training step every group of an axis communicates at the same time
and shares the node's NICs: the analytic model gives each GPU ``inter / gpus_per_node`` of them
(:mod:`llmp.analytic.collectives`), which only a case with every rank busy measures.

Sizes are drawn log-uniformly (Halton) over :data:`SIZE_RANGE` and snapped to 4 KiB, divisible
into the group's chunks; ``bytes`` follows ``kernels.Collective``: the all-reduce buffer, the
all-gather output, the reduce-scatter input, the all-to-all send buffer, the point-to-point
message. ``per_stratum`` cases are drawn per (kind, tier), the stratum adaptation counts
(``residuals.model.stratum_of``). Each call is timed on every rank after a barrier of the whole
world; a call's time is the maximum over ranks (the collective ends when its slowest member does);
the row is the median over repeats. Rank 0 writes ``DIR/collectives.csv`` (the same resume rules as
the kernel sampler). Torch and numpy only.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from llmp.errors import LlmpError
from llmp.measure import devices, ranks, timing
from llmp.measure.design import halton
from llmp.residuals import samplefile

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
COLUMNS = ("key", "kind", "bytes", "group", "ranks_per_node", "tier", "dtype", "backend", "time_s", "p10_s",
           "p90_s", "repeats", "error")
DESIGN_VERSION = "halton-collectives-v2"
SIZE_RANGE = {"cpu": (2**12, 2**24), "cuda": (2**12, 2**30)}
"""Message sizes per device kind. GPU: 4 KiB to 1 GiB holds every message the analytic layer sends
for the example layouts (from a 14 KiB cross-entropy all-reduce and 8-48 MiB cp, pp and tp
activations to dp gradient buckets) up to 1 GiB; the larger ones (ZeRO parameter all-gathers of
whole models, GBs) are bandwidth-bound, their time linear in bytes, so the largest size measured
speaks for them (``tests/unit/measure/test_collective_design.py`` checks both). CPU: 4 KiB to 16 MiB keeps a
gloo call under a second on a shared core."""
REPEATS = 7
"""Timed calls per case (after 2 warm-up calls); the median of 7 is robust to two outliers."""
WARMUP = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """The shape of every group of one collective case: members, and members per node."""

    size: int
    per_node: int
    """Members one node holds (``Collective.ranks_per_node``)."""

    @property
    def tier(self) -> str:
        return "intra" if self.size == self.per_node else "inter"

    @property
    def nodes(self) -> int:
        return self.size // self.per_node


def _powers(limit: int, start: int) -> list[int]:
    """Powers of two from ``start`` that divide ``limit``, and ``limit`` itself (a degree's values)."""
    out = {limit} if limit >= start else set()
    p = start
    while p <= limit:
        if limit % p == 0:
            out.add(p)
        p *= 2
    return sorted(out)


def shapes(local_size: int, nodes: int) -> tuple[Shape, ...]:
    """The group shapes a world of ``nodes`` nodes of ``local_size`` ranks holds (module docstring)."""
    intra = [Shape(size=g, per_node=g) for g in _powers(local_size, 2)]
    inter = [Shape(size=n * r, per_node=r) for n in _powers(nodes, 2) for r in _powers(local_size, 1)]
    return tuple(intra + inter)


def groups(shape: Shape, local_size: int, nodes: int) -> list[list[int]]:
    """Every rank of the world in one group of ``shape``, placed as layouts place them."""
    if shape.tier == "intra":
        g = shape.size
        return [[node * local_size + o * g + i for i in range(g)] for node in range(nodes)
                for o in range(local_size // g)]
    stride = local_size // shape.per_node
    return [[(block * shape.nodes + j) * local_size + o + i * stride for j in range(shape.nodes)
             for i in range(shape.per_node)]
            for block in range(nodes // shape.nodes) for o in range(stride)]


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveCase:
    kind: str
    bytes: int
    shape: Shape
    dtype: str

    @property
    def key(self) -> str:
        """The resume key (the same for a shape whatever the world that measured it)."""
        s = self.shape
        return f"{self.kind}/{self.dtype}/g={s.size}/rpn={s.per_node}/{s.tier}/bytes={self.bytes}"


def plan(local_size: int, nodes: int, device_kind: str, per_stratum: int, seed: int) -> list[CollectiveCase]:
    """``per_stratum`` cases per (kind, tier), spread over the tier's shapes and message sizes."""
    lo, hi = SIZE_RANGE[device_kind]
    dtype = "fp32" if device_kind == "cpu" else "bf16"
    every = shapes(local_size, nodes)
    out: list[CollectiveCase] = []
    for j, kind in enumerate(KINDS):
        for t, tier in enumerate(("intra", "inter")):
            options = [s for s in every if s.tier == tier and (kind != "send_recv" or s.size == 2)]
            if not options:
                continue
            seen: set[str] = set()
            for a, b in halton(per_stratum, 2, seed * 100 + 10 * t + j):
                shape = options[min(int(b * len(options)), len(options) - 1)]
                size = round(float(np.exp(np.log(lo) + a * (np.log(hi) - np.log(lo)))) / 4096) * 4096
                chunk = 4096 * shape.size
                size = max(chunk, size // chunk * chunk)  # divisible into the group's chunks
                case = CollectiveCase(kind=kind, bytes=size, shape=shape, dtype=dtype)
                if case.key not in seen:
                    seen.add(case.key)
                    out.append(case)
    return out


def _op(case: CollectiveCase, group: dist.ProcessGroup, members: list[int], rank: int,
        dev: torch.device) -> Callable[[], object]:
    """A zero-argument callable issuing this rank's part of the collective (buffers allocated once)."""
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[case.dtype]
    elems = case.bytes // torch.tensor([], dtype=dt).element_size()
    g = case.shape.size
    if case.kind == "all_reduce":
        x = torch.randn(elems, dtype=dt, device=dev)
        return lambda: dist.all_reduce(x, group=group)
    if case.kind == "all_gather":
        x, out = torch.randn(elems // g, dtype=dt, device=dev), torch.empty(elems, dtype=dt, device=dev)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # the name in torch >= 2.13
        return lambda: gather(out, x, group=group)
    if case.kind == "reduce_scatter":
        x, out = torch.randn(elems, dtype=dt, device=dev), torch.empty(elems // g, dtype=dt, device=dev)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, x, group=group)
    if case.kind == "all_to_all":
        x, out = torch.randn(elems, dtype=dt, device=dev), torch.empty(elems, dtype=dt, device=dev)
        return lambda: dist.all_to_all_single(out, x, group=group)
    x = torch.randn(elems, dtype=dt, device=dev)  # send_recv: the first member sends to the second
    if rank == members[0]:
        return lambda: dist.send(x, dst=members[1])
    return lambda: dist.recv(x, src=members[0])


def _time_case(fn: Callable[[], object], dev: torch.device, repeats: int) -> tuple[float, float, float]:
    """Per-call time, max over the world, median/p10/p90 over repeats (every group starts together)."""
    times = torch.zeros(repeats, dtype=torch.float64)
    for _ in range(WARMUP):
        fn()
    for i in range(repeats):
        dist.barrier()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        times[i] = time.perf_counter() - t0
    reduce_on = times.to(dev) if dev.type == "cuda" else times
    dist.all_reduce(reduce_on, op=dist.ReduceOp.MAX)
    per_call = sorted(reduce_on.cpu().tolist())
    return statistics.median(per_call), per_call[int(0.1 * (repeats - 1))], per_call[round(0.9 * (repeats - 1))]


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveConfig:
    """What to measure; built by ``llmp sample`` from its flags."""

    out: Path
    per_stratum: int = 12
    """Cases per (kind, tier) (``--budget``)."""
    seed: int = 0
    repeats: int = REPEATS
    device_id: str | None = None
    node_id: str | None = None
    """Catalog node the ranks run on (its links are what the fit compares against)."""
    deadline: float | None = None
    """``time.monotonic()`` past which no new case starts (rank 0's clock decides for all)."""
    progress: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveReport:
    measured: int
    existing: int
    remaining: int


def run(world: ranks.World, dev: torch.device, config: CollectiveConfig) -> CollectiveReport:
    """Measure the cases not on disk yet; every rank of an initialised process group calls this."""
    assert world.size >= 2, "collectives need at least 2 ranks (llmp sample checks --nproc and the world)"
    cases = plan(world.local_size, world.nodes, dev.type, config.per_stratum, config.seed)
    appender = None
    error: LlmpError | None = None
    todo_keys: list[list[str] | None] = [None]  # rank 0 fills it, the broadcast hands it to every rank
    if world.rank == 0:
        env = timing.environment(dev, torch.get_num_threads())
        meta = {**env, "device_id": config.device_id or devices.catalog_id(dev.type, str(env["device_name"])),
                "node_id": config.node_id, "seed": config.seed, "design": DESIGN_VERSION, "world": world.size,
                "ranks_per_node": world.local_size, "backend": dist.get_backend(),
                "timing": "perf_counter around each call after a barrier of the world (device synchronised); "
                          "every group of the shape at once; max over ranks per call; median over repeats"}
        try:
            appender = samplefile.Appender(config.out / "collectives.csv", COLUMNS, meta, sync=True)
            todo_keys = [[c.key for c in cases if c.key not in appender.keys]]
        except LlmpError as err:  # another setup's file in DIR
            error = err
    ranks.agree(error)
    dist.broadcast_object_list(todo_keys, src=0)
    received = set(todo_keys[0] or ())
    todo = [c for c in cases if c.key in received]
    made: dict[Shape, tuple[dist.ProcessGroup, list[int]]] = {}
    measured = 0
    try:
        for case in todo:
            stop = torch.tensor([int(config.deadline is not None and time.monotonic() > config.deadline)], device=dev)
            dist.broadcast(stop, src=0)  # rank 0's clock decides, so every rank stops at the same case
            if int(stop.item()):
                break
            if case.shape not in made:  # every rank creates every group of the shape, in the same order
                every = groups(case.shape, world.local_size, world.nodes)
                mine, _ = dist.new_subgroups_by_enumeration(every)
                made[case.shape] = (mine, next(m for m in every if world.rank in m))
            group, members = made[case.shape]
            med, p10, p90 = _time_case(_op(case, group, members, world.rank, dev), dev, config.repeats)
            measured += 1
            if appender is not None:
                appender.append({"key": case.key, "kind": case.kind, "bytes": case.bytes, "group": case.shape.size,
                                 "ranks_per_node": case.shape.per_node, "tier": case.shape.tier,
                                 "dtype": case.dtype, "backend": dist.get_backend(), "time_s": f"{med:.6e}",
                                 "p10_s": f"{p10:.6e}", "p90_s": f"{p90:.6e}", "repeats": config.repeats,
                                 "error": ""})
                if config.progress:
                    print(f"collectives {measured}/{len(todo)} {case.kind} g={case.shape.size} "
                          f"rpn={case.shape.per_node} {case.bytes} B: {med * 1e3:.3f} ms", file=sys.stderr, flush=True)
    finally:
        if appender is not None:
            appender.close()
    return CollectiveReport(measured=measured, existing=len(cases) - len(todo), remaining=len(todo) - measured)
