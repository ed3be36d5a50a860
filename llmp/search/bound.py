"""A lower bound on each layout's step time, from a few priced graphs instead of one per layout.

A search ranks thousands of layouts that differ in how the model is cut (tp, pp, vp, dp,
micro-batch, recompute, ZeRO, schedule), and a step time takes milliseconds each to compose. The
compute of one microbatch through one transformer layer does not depend on how the layers are
spread over pipeline ranks or how the data-parallel replicas shard their optimizer, so layouts
that agree on everything but :data:`PIPELINE` share it. For each such group (a *key*) this
module prices one representative spec with the whole model on one stage, and bounds every layout
of the group from below by two facts of any pipeline timeline, each task lasting at least its
compute (exposed communication only adds, ``compose.overlap``):

* work: all ranks together run ``m`` microbatches through every layer, embedding and head, so
  the busiest rank computes at least the average, ``m * C / pp``;
* fill and drain (GPipe, 1F1B, interleaved 1F1B with the even split): the last rank starts only
  after the first microbatch's forward has crossed the ``pp - 1`` ranks before it, then runs its
  own ``m * vp`` chunk passes, and its last backward still has to cross those ``pp - 1`` ranks
  again: ``(m vp + pp - 1)`` chunk forward-and-backward times (Narayanan et al. 2021, SC21,
  §2.2, the pipeline bubble).

Gradient sync, the optimizer and any calibration overhead only add to the step (overhead is
added to the bound as it is to the step). A key whose representative cannot be priced gets the
bound 0, which prunes nothing. ``tests/search/test_bound.py`` checks the bound against the
composed step of every feasible layout of small grids and the pruned search against the
exhaustive one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmp.analytic import specpath
from llmp.analytic.graph import decompose
from llmp.analytic.op import OpGraph, Part
from llmp.analytic.pricing import price
from llmp.analytic.structure import structure_of
from llmp.compose.overlap import ChunkWork, OverlapRules, chunk_work, layer_floor, rank_tail
from llmp.dsl import checks
from llmp.dsl.spec import Schedule, Spec
from llmp.errors import LlmpError
from llmp.search import space
from llmp.search.space import Grid

PIPELINE = frozenset({"parallel.pp", "parallel.vp", "parallel.dp", "parallel.schedule", "parallel.zero",
                      "parallel.microbatch_group", "train.global_batch"})
"""Fields that place or shard the layers but do not change one layer's work per microbatch
(its compute and its tensor-, context- and expert-parallel communication)."""
FILL_SCHEDULES = frozenset({Schedule.GPIPE.value, Schedule.ONE_F_ONE_B.value, Schedule.INTERLEAVED.value})
"""Schedules that run each microbatch's forward through the ranks in order and its backward in
reverse, one chunk per rank in turn (the zero-bubble and V schedules place chunks otherwise)."""
SLACK = 1e-9
"""Relative margin for rounding: the bound sums the same op times in another order."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class KeyCompute:
    """Compute seconds of one microbatch, from one representative of a key."""

    total: float
    """Through the whole model: every layer, the embedding and the head, forward and backward."""
    layer: float
    """Through one transformer layer, forward and backward, of the cheapest layer kind."""


def _representative(spec: Spec, grid: Grid, row: int, numeric: frozenset[str]) -> Spec:
    """Row ``row`` with its layers on one stage (pp = vp = 1, 1F1B) and one microbatch per step."""
    s = space.row_spec(spec, grid.columns, row, None, numeric)
    p = s.parallel
    dp = int(p.dp * p.pp)
    parallel = dataclasses.replace(p, pp=1, vp=1, dp=dp, schedule=Schedule.ONE_F_ONE_B, microbatch_group=None,
                                   stage_layers=None, first_stage_layers=None, last_stage_layers=None,
                                   account_for_embedding=False, account_for_loss=False)
    train = dataclasses.replace(s.train, global_batch=int(s.train.micro_batch) * dp)
    return dataclasses.replace(s, parallel=parallel, train=train)


def _compute(rep: Spec, scale: Any) -> KeyCompute:
    graph = decompose(rep, structure_of(rep))
    times = [float(t) for t in price(graph, rep).time]
    if scale is not None:
        times = scale(graph, times)
    rules = OverlapRules.of(rep)
    counts = graph.chunk_kinds[0]
    ends = chunk_work(graph, times, rules, first=True, last=True, layers=tuple(0 for _ in counts))
    per_kind = [sum(layer_floor([(graph.ops[i], times[i]) for i in graph.layer_indices(part, kind)], rules)
                    for part in (Part.FORWARD, Part.BACKWARD)) for kind in range(len(counts))]
    total = ends.fwd.total + ends.bwd.total + sum(n * t for n, t in zip(counts, per_kind))
    return KeyCompute(total=float(total), layer=float(min(per_kind)))


def step_bound(spec: Spec, grid: Grid, rows: np.ndarray, calibration: Any = None) -> np.ndarray:
    """Lower bounds on the step times of ``rows`` of the grid (seconds; 0 where none is known)."""
    out = np.zeros(grid.size)
    if len(rows) == 0:
        return out
    scale, overhead = None, 0.0
    if calibration is not None:
        from llmp.compose.posterior import scaled
        from llmp.compose.predictor import ROOFLINE_ONLY

        post = calibration.basis(ROOFLINE_ONLY).posterior
        factors = np.asarray(post.mean[:-1])

        def scale(graph: Any, times: Sequence[Any]) -> Any:
            return scaled(graph, times, factors)

        overhead = float(post.overhead_s)
    numeric = frozenset(specpath.paths(spec))
    key_paths = [p for p in grid.columns if p not in PIPELINE]
    for group in space.groups(grid, key_paths, rows):
        try:
            rep = _representative(spec, grid, int(group[0]), numeric)
            checks.check(rep, lambda _path: None)
            key = _compute(rep, scale)
        except LlmpError:
            continue  # no bound for this key: its layouts are all evaluated
        out[group] = _bound(spec, grid, group, key) + overhead
    return out


def _column(spec: Spec, grid: Grid, path: str, rows: np.ndarray) -> np.ndarray:
    if path in grid.columns:
        return np.asarray(grid.columns[path][rows])
    return np.full(len(rows), specpath.get(spec, path) if path in specpath.paths(spec) else None)


def _bound(spec: Spec, grid: Grid, rows: np.ndarray, key: KeyCompute) -> np.ndarray:
    pp = _column(spec, grid, "parallel.pp", rows).astype(float)
    vp = _column(spec, grid, "parallel.vp", rows).astype(float)
    dp = _column(spec, grid, "parallel.dp", rows).astype(float)
    mb = _column(spec, grid, "train.micro_batch", rows).astype(float)
    batch = _column(spec, grid, "train.global_batch", rows).astype(float)
    schedule = np.asarray(grid.columns["parallel.schedule"][rows] if "parallel.schedule" in grid.columns
                          else np.full(len(rows), spec.parallel.schedule.value), dtype=str)
    m = batch / (mb * dp)
    work = m * key.total / pp
    p = spec.parallel
    default_split = (p.stage_layers is None and p.first_stage_layers is None and p.last_stage_layers is None
                     and not p.account_for_embedding and not p.account_for_loss and not p.partition)
    chunk_layers = float(spec.model.layers) / (pp * vp)
    even = default_split & (chunk_layers == np.floor(chunk_layers)) & np.isin(schedule, list(FILL_SCHEDULES))
    fill = np.where(even, (m * vp + pp - 1) * chunk_layers * key.layer, 0.0)
    return np.maximum(work, fill) * (1.0 - SLACK)


def layout_bound(graph: OpGraph, times: Sequence[float], spec: Spec) -> float:
    """A lower bound on the step time of one layout from its own priced graph, without the
    pipeline timeline (which, with memory, is most of what composing a step costs).

    Each rank runs every microbatch through each of its chunks, forward and backward, then its
    gradient sync; the update of the slowest rank starts after every rank has synced. So the step
    lasts at least the busiest rank's passes and sync, plus the slowest update; and with the fill
    and drain of :data:`FILL_SCHEDULES` at least the last rank's passes between the first forward
    reaching it and the last backward leaving rank 0. The gradient sync is taken with the whole
    backward as its overlap window (a split W only shrinks it) and passes are whole (a split
    backward only exposes more). DualPipe overlaps pairs of passes, so it gets no bound here (0).
    """
    st = graph.structure
    if spec.parallel.schedule is Schedule.DUALPIPE:
        return 0.0
    rules = OverlapRules.of(spec)
    kinds: dict[tuple[bool, bool, Any], ChunkWork] = {}
    works = []
    for g in range(st.chunks):
        key = (g == 0, g == st.chunks - 1, graph.chunk_kinds[g])
        if key not in kinds:
            kinds[key] = chunk_work(graph, times, rules, first=key[0], last=key[1], layers=key[2])
        works.append(kinds[key])
    m = st.microbatches
    busy, syncs, updates = [], [], []
    for r in range(st.pp):
        mine = [works[g] for g in st.placement[r]]
        tail = rank_tail(graph, times, rules, r, sum(w.bwd.compute for w in mine), sum(w.fwd.compute for w in mine))
        busy.append(m * sum(w.fwd.total + w.bwd.total for w in mine) + sum(tail.sync.values()))
        syncs.append(sum(tail.sync.values()))
        updates.append(sum(tail.update.values()))
    bound = max(busy)
    if spec.parallel.schedule.value in FILL_SCHEDULES:
        f = min(w.fwd.total for w in works)
        b = min(w.bwd.total for w in works)
        bound = max(bound, (st.pp - 1) * (f + b) + m * st.vp * min(w.fwd.total + w.bwd.total for w in works)
                    + min(syncs))
    return float(bound + max(updates)) * (1.0 - SLACK)
