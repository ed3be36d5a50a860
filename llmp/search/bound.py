"""Lower bounds on each layout's step time, from a few priced graphs instead of one per layout.

A search ranks thousands of layouts that differ in how the model is cut (tp, pp, vp, dp,
micro-batch, recompute, ZeRO, schedule), and a step time takes milliseconds each to compose. The
work of one microbatch through one transformer layer does not depend on how the layers are
spread over pipeline ranks or how the data-parallel replicas shard their optimizer, so layouts
that agree on everything but :data:`PIPELINE` share it. For each such group (a *key*) this
module prices one representative spec with the whole model on one stage (:func:`bounds`) and
keeps, per layer kind and for the embedding and the head, a *floor* of one microbatch's forward
and backward: their compute and the communication no overlap hides (``compose.overlap``),
without the ops whose size the pipeline fields change (the ZeRO-3/FSDP parameter gathers and
gradient scatters, the per-microbatch loss all-reduce over the data-parallel replicas, the
gradient accumulation into a ZeRO-sharded buffer: :func:`_floor_ops`). What is left is the same
in every layout of the key, so a layout's passes each take at least their floors. Every layout
is then bounded from below by two facts of any pipeline timeline:

* work: all ranks together run ``m`` microbatches through every layer, embedding and head, so
  the busiest rank computes at least the average, ``m * C / pp``;
* fill and drain (GPipe, 1F1B, interleaved 1F1B with the even split): the last rank starts only
  after the first microbatch's forward has crossed the ``pp - 1`` ranks before it, then runs its
  own ``m * vp`` chunk passes, and its last backward still has to cross those ``pp - 1`` ranks
  again: ``(m vp + pp - 1)`` chunk forward-and-backward times (Narayanan et al. 2021, SC21,
  §2.2, the pipeline bubble).

The gradient sync and the optimizer come after the last backward. :class:`Tails` adds them on
demand, for the layouts a search is about to check: a rank's once-per-step ops read its
parameters, not its activations, so layouts that differ only in :data:`TAIL_FREE` share them,
and one priced set of those ops (:func:`~llmp.analytic.graph.decompose_ranks`) bounds every
layout of such a *class* as :func:`layout_bound` bounds one layout from its whole graph, with
the floors in place of its passes. Calibration overhead is added as it is to the step. A key
whose representative cannot be priced gets the bound 0, which prunes nothing.
``tests/property/search/test_prune_properties.py`` checks the bounds against the composed step of every
feasible layout of small grids and the pruned search against the exhaustive one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmp.analytic.grads import GRAD_ACCUMULATE
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Collective
from llmp.analytic.layout import Axis
from llmp.analytic.op import Op, OpGraph, Overlap, Part, Scope
from llmp.analytic.pricing import price
from llmp.analytic.structure import structure_of
from llmp.compose.overlap import ChunkWork, OverlapRules, chunk_work, layer_floor
from llmp.compose.posterior import scaled
from llmp.compose.predictor import ROOFLINE_ONLY
from llmp.compose.tail import bucket_spans, rank_tail, tail_terms
from llmp.dsl import checks
from llmp.errors import LlmpError
from llmp.search import space
from llmp.search.space import Grid
from llmp.spec import specpath
from llmp.spec.spec import Schedule, Spec

PIPELINE = frozenset({"parallel.pp", "parallel.vp", "parallel.dp", "parallel.schedule", "parallel.zero",
                      "parallel.microbatch_group", "train.global_batch"})
"""Fields that place or shard the layers but do not change one layer's work per microbatch
(its compute and its tensor-, context- and expert-parallel communication)."""
TAIL_FREE = frozenset({"train.micro_batch", "train.recompute", "parallel.sequence_parallel"})
"""Fields a pipeline rank's once-per-step ops do not read: their sizes are the rank's
parameters, gradients and optimizer states (``llmp.analytic.stage.rank_ops``), not activations."""
FILL_SCHEDULES = frozenset({Schedule.GPIPE.value, Schedule.ONE_F_ONE_B.value, Schedule.INTERLEAVED.value})
"""Schedules that run each microbatch's forward through the ranks in order and its backward in
reverse, one chunk per rank in turn (the zero-bubble and V schedules place chunks otherwise)."""
SLACK = 1e-9
"""Relative margin for rounding: the bound sums the same op times in another order."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class KeyCompute:
    """Floors of one microbatch's passes (seconds), from one representative of a key."""

    fwd: tuple[float, ...]
    """Per layer kind: one layer's forward."""
    bwd: tuple[float, ...]
    """Per layer kind: one layer's backward (with its recomputed forward)."""
    first: tuple[float, float]
    """The embedding's forward and backward (the first chunk's)."""
    last: tuple[float, float]
    """The head's forward and backward (the last chunk's, with any multi-token prediction)."""
    layers: tuple[int, ...]
    """Layers of each kind in the whole model."""
    fwd_compute: tuple[float, ...]
    """Per layer kind: the compute-stream seconds of one layer's forward floor (what can hide a
    ZeRO-3 prefetch at most, with the gradient accumulation)."""
    bwd_compute: tuple[float, ...]
    fwd_host: tuple[float, ...]
    """Per layer kind: the host's seconds to issue one layer's forward floor ops."""
    bwd_host: tuple[float, ...]
    first_host: tuple[float, float]
    last_host: tuple[float, float]

    @property
    def total(self) -> float:
        """Through the whole model: every layer, the embedding and the head, forward and backward,
        on the slower of the device and the host (each pass is paced by its slower stream)."""
        device = sum(self.first) + sum(self.last) + sum(n * (f + b) for n, f, b in zip(self.layers, self.fwd, self.bwd))
        host = (sum(self.first_host) + sum(self.last_host)
                + sum(n * (f + b) for n, f, b in zip(self.layers, self.fwd_host, self.bwd_host)))
        return max(device, host)

    @property
    def layer(self) -> float:
        """Through one layer of the cheapest kind, forward and backward, each pass on its slower stream."""
        return min(max(f, fh) + max(b, bh) for f, b, fh, bh in zip(self.fwd, self.bwd, self.fwd_host, self.bwd_host))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Bounds:
    """Per configuration of a grid: the bound of :func:`bounds` and the floors it came from."""

    step: np.ndarray
    """Lower bound on the step time (seconds; 0 where none is known)."""
    key: np.ndarray
    """Index of the configuration's key in ``computes`` (-1: none could be priced)."""
    computes: tuple[KeyCompute, ...]
    overhead: Any
    """The calibration's posterior (None: none), for the per-step overhead a step adds
    (``overhead_at``)."""

    def with_overhead(self, bound: np.ndarray) -> np.ndarray:
        """``bound`` plus the overhead a step of that length gets."""
        return bound if self.overhead is None else bound + self.overhead.overhead_at(bound)


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


def _pipelined(op: Op) -> bool:
    """An op whose size the :data:`PIPELINE` fields change: a collective over the data-parallel
    or pipeline group (ZeRO-3/FSDP gathers and scatters, the per-microbatch loss all-reduce;
    those groups grow with dp and pp) or the gradient accumulation (ZeRO shards its buffer over
    dp). None of them is the partner that hides a collective, so leaving them out of a pass
    only shortens it, by their own time."""
    if isinstance(op.work, Collective):
        return op.axis in (Axis.DP, Axis.PP)
    return op.name.rsplit(".", 1)[-1] == GRAD_ACCUMULATE


def _floor_ops(graph: OpGraph, indices: Sequence[int], times: Sequence[float]) -> list[tuple[Op, float]]:
    """The ops at ``indices`` (with their times) but the :func:`_pipelined` ones."""
    return [(graph.ops[i], times[i]) for i in indices if not _pipelined(graph.ops[i])]


def _compute(rep: Spec, scale: Any) -> KeyCompute:
    graph = decompose(rep, structure_of(rep))
    times = [float(t) for t in price(graph, rep).time]
    if scale is not None:
        times = scale(graph, times)
    rules = OverlapRules.of(rep)

    def floors(scope: Scope, part: Part, kind: int | None = None) -> tuple[float, float]:
        indices = graph.indices(scope, part) if kind is None else graph.layer_indices(part, kind)
        device, host = layer_floor(_floor_ops(graph, indices, times), rules)
        return float(device), float(host)

    def floor(scope: Scope, part: Part, kind: int | None = None) -> float:
        return floors(scope, part, kind)[0]

    def host(scope: Scope, part: Part, kind: int | None = None) -> float:
        return floors(scope, part, kind)[1]

    def compute(part: Part, kind: int) -> float:
        return float(sum(op.count * t for op, t in _floor_ops(graph, graph.layer_indices(part, kind), times)
                         if not isinstance(op.work, Collective)))

    kinds = range(len(graph.chunk_kinds[0]))
    return KeyCompute(fwd=tuple(floor(Scope.LAYER, Part.FORWARD, k) for k in kinds),
                      bwd=tuple(floor(Scope.LAYER, Part.BACKWARD, k) for k in kinds),
                      first=(floor(Scope.FIRST, Part.FORWARD), floor(Scope.FIRST, Part.BACKWARD)),
                      last=(floor(Scope.LAST, Part.FORWARD), floor(Scope.LAST, Part.BACKWARD)),
                      layers=tuple(int(n) for n in graph.chunk_kinds[0]),
                      fwd_compute=tuple(compute(Part.FORWARD, k) for k in kinds),
                      bwd_compute=tuple(compute(Part.BACKWARD, k) for k in kinds),
                      fwd_host=tuple(host(Scope.LAYER, Part.FORWARD, k) for k in kinds),
                      bwd_host=tuple(host(Scope.LAYER, Part.BACKWARD, k) for k in kinds),
                      first_host=(host(Scope.FIRST, Part.FORWARD), host(Scope.FIRST, Part.BACKWARD)),
                      last_host=(host(Scope.LAST, Part.FORWARD), host(Scope.LAST, Part.BACKWARD)))


def _calibration(calibration: Any) -> tuple[Any, Any]:
    """The per-op scaling of ``calibration`` (None without one) and its posterior (None without
    one), whose ``overhead_at`` a bound takes at the bound: it grows with the step, so a bound
    plus it bounds the step plus it."""
    if calibration is None:
        return None, None
    post = calibration.basis(ROOFLINE_ONLY).posterior
    factors = np.asarray(post.mean[:-1])

    def scale(graph: Any, times: Sequence[Any]) -> Any:
        return scaled(graph, times, factors)

    return scale, post


def bounds(spec: Spec, grid: Grid, rows: np.ndarray, calibration: Any = None) -> Bounds:
    """Lower bounds on the step times of ``rows`` of the grid, and their keys' floors."""
    out = np.zeros(grid.size)
    key = np.full(grid.size, -1)
    computes: list[KeyCompute] = []
    scale, post = _calibration(calibration)
    if len(rows) == 0:
        return Bounds(step=out, key=key, computes=(), overhead=post)
    numeric = frozenset(specpath.paths(spec))
    key_paths = [p for p in grid.columns if p not in PIPELINE]
    for group in space.groups(grid, key_paths, rows):
        try:
            rep = _representative(spec, grid, int(group[0]), numeric)
            checks.check(rep, lambda _path: None)
            found = _compute(rep, scale)
        except LlmpError:
            continue  # no bound for this key: its layouts are all evaluated
        key[group] = len(computes)
        computes.append(found)
        b = _bound(spec, grid, group, found)
        out[group] = b if post is None else b + post.overhead_at(b)
    return Bounds(step=out, key=key, computes=tuple(computes), overhead=post)


def _column(spec: Spec, grid: Grid, path: str, rows: np.ndarray) -> np.ndarray:
    if path in grid.columns:
        return np.asarray(grid.columns[path][rows])
    return np.full(len(rows), specpath.get(spec, path))


def _microbatches(spec: Spec, grid: Grid, rows: np.ndarray) -> np.ndarray:
    batch = _column(spec, grid, "train.global_batch", rows).astype(float)
    mb = _column(spec, grid, "train.micro_batch", rows).astype(float)
    return batch / (mb * _column(spec, grid, "parallel.dp", rows).astype(float))


def _bound(spec: Spec, grid: Grid, rows: np.ndarray, key: KeyCompute) -> np.ndarray:
    pp = _column(spec, grid, "parallel.pp", rows).astype(float)
    vp = _column(spec, grid, "parallel.vp", rows).astype(float)
    schedule = np.asarray(grid.columns["parallel.schedule"][rows] if "parallel.schedule" in grid.columns
                          else np.full(len(rows), spec.parallel.schedule.value), dtype=str)
    m = _microbatches(spec, grid, rows)
    work = m * key.total / pp
    p = spec.parallel
    default_split = (p.stage_layers is None and p.first_stage_layers is None and p.last_stage_layers is None
                     and not p.account_for_embedding and not p.account_for_loss and not p.partition)
    chunk_layers = float(spec.model.layers) / (pp * vp)
    even = default_split & (chunk_layers == np.floor(chunk_layers)) & np.isin(schedule, list(FILL_SCHEDULES))
    fill = np.where(even, (m * vp + pp - 1) * chunk_layers * key.layer, 0.0)
    return np.maximum(work, fill) * (1.0 - SLACK)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class _Class:
    """What bounds every layout of one class (:class:`Tails`) besides its key's floors and its
    microbatches: its chunks and ranks, its ops that the floors leave out, and its ranks' tails."""

    chunks: np.ndarray
    """(chunks, kinds): layers of each kind in each chunk."""
    held: np.ndarray
    """(chunks, ranks): 1 where the rank holds the chunk."""
    vp: int
    fill: bool
    """The schedule fills and drains (:data:`FILL_SCHEDULES`)."""
    extra: np.ndarray
    """(2, kinds): per layer, forward and backward, the :func:`_pipelined` ops but the prefetched
    ZeRO-3/FSDP ones (seconds)."""
    extra_compute: np.ndarray
    """(2, kinds): the compute among them (the gradient accumulation)."""
    prefetch: np.ndarray
    """(2, kinds): per layer, the prefetched ZeRO-3/FSDP gathers and scatters."""
    ends: np.ndarray
    """(2, 2): the :func:`_pipelined` ops of the embedding and of the head, forward and backward."""
    sync: np.ndarray
    """Per rank: gradient sync exposed whole."""
    last: np.ndarray
    """Per rank: its last gradient bucket (0 without bucketed reductions)."""
    spans: np.ndarray
    """Per rank: all its gradient buckets (0 without)."""
    share: np.ndarray
    """Per rank: ``1 - 1 / buckets``, the share of the buckets a backward can hide (0 without:
    then ``max(last, spans - B share)`` is 0)."""
    update: float
    """The slowest rank's update, without gathers hidden behind the next forward."""


class Tails:
    """Raises the bounds of a grid's layouts with what their keys' floors leave out, one class of
    layouts (those that differ only in :data:`TAIL_FREE`) at a time, when a layout of the class
    is about to be checked (:meth:`refine`): the ops that the pipeline fields size, the layers'
    placement on the ranks, and the ranks' gradient sync and update, from one priced graph of
    the class."""

    def __init__(self, spec: Spec, grid: Grid, rows: np.ndarray, found: Bounds, calibration: Any = None) -> None:
        self.spec, self.grid, self.found = spec, grid, found
        self.scale, _ = _calibration(calibration)
        self.numeric = frozenset(specpath.paths(spec))
        cls = space.group_index(grid, [p for p in grid.columns if p not in TAIL_FREE])
        rows = rows[found.key[rows] >= 0]
        order = np.argsort(cls[rows], kind="stable")
        cuts = np.flatnonzero(np.diff(cls[rows][order])) + 1
        self.members = {int(cls[g[0]]): g for g in np.split(rows[order], cuts) if len(g)}
        self.cls = cls
        self.done: set[int] = set()
        self.floors = {f: np.array([getattr(c, f) for c in found.computes], float).reshape(len(found.computes), -1)
                       if found.computes else np.zeros((0, 0))
                       for f in ("fwd", "bwd", "first", "last", "fwd_compute", "bwd_compute", "fwd_host", "bwd_host",
                                 "first_host", "last_host")}

    def refine(self, bound: np.ndarray, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Raise ``bound`` (per configuration, seconds) over the classes of ``rows`` not yet seen;
        returns the configurations whose bound it raised."""
        raised = []
        for i in (int(r) for r in rows):
            c = int(self.cls[i])
            if c in self.done or c not in self.members:
                continue
            try:
                found = self._class(i)
            except LlmpError:
                continue  # this layout cannot run (a rule on its micro-batch): try the class's next one
            self.done.add(c)
            if found is not None:
                members = self.members[c]
                bound[members] = np.maximum(bound[members], self._bound(found, members))
                raised.append(members)
        return np.concatenate(raised) if raised else np.zeros(0, dtype=int)

    def _class(self, row: int) -> _Class | None:
        s = space.row_spec(self.spec, self.grid.columns, row, None, self.numeric)
        checks.check(s, lambda _path: None)
        st = structure_of(s)
        if s.parallel.schedule is Schedule.DUALPIPE:
            return None  # its pairs of passes overlap: no bound from whole passes (layout_bound)
        try:
            graph = decompose(s, st)
            times = [float(t) for t in price(graph, s).time]
        except LlmpError:
            return None
        if self.scale is not None:
            times = self.scale(graph, times)
        kinds = len(st.kinds)
        extra, extra_compute, prefetch = np.zeros((2, kinds)), np.zeros((2, kinds)), np.zeros((2, kinds))
        ends = np.zeros((2, 2))
        for j, part in enumerate((Part.FORWARD, Part.BACKWARD)):
            for i in graph.indices(Scope.LAYER, part):
                op = graph.ops[i]
                if _pipelined(op):
                    total = op.count * times[i]
                    if op.overlap is Overlap.PREFETCH:
                        prefetch[j, op.kind] += total
                    else:
                        extra[j, op.kind] += total
                        if not isinstance(op.work, Collective):
                            extra_compute[j, op.kind] += total
            for e, scope in enumerate((Scope.FIRST, Scope.LAST)):
                ends[e, j] = sum(graph.ops[i].count * times[i] for i in graph.indices(scope, part)
                                 if _pipelined(graph.ops[i]))
        rules = OverlapRules.of(s)
        per_ops: dict[tuple[int, ...], tuple[float, ...]] = {}  # ranks of one class run the same ops
        for r in range(st.pp):
            ops = graph.indices(Scope.RANK, r)
            if ops not in per_ops:
                terms = tail_terms(graph, times, rules, r)
                last, spans, buckets = bucket_spans(terms.bucketed) if terms.bucketed else (0.0, 0.0, 1)
                per_ops[ops] = (sum(terms.sync.values()), last, spans, 1 - 1 / buckets, sum(terms.update.values()))
        sync, last, spans, share, update = (np.array(col, float) for col in
                                            zip(*(per_ops[graph.indices(Scope.RANK, r)] for r in range(st.pp))))
        held = np.zeros((st.chunks, st.pp))
        for r, chunks in enumerate(st.placement):
            held[list(chunks), r] = 1
        return _Class(chunks=np.array(st.chunk_kinds, float), held=held, vp=st.vp,
                      fill=s.parallel.schedule.value in FILL_SCHEDULES, extra=extra, extra_compute=extra_compute,
                      prefetch=prefetch, ends=ends, sync=sync, last=last, spans=spans, share=share,
                      update=float(update.max()))

    def _bound(self, c: _Class, rows: np.ndarray) -> np.ndarray:
        """The bound of :func:`layout_bound` with each chunk's passes bounded from the floors.

        A chunk's pass takes at least, per layer kind, its ``n`` layers' floors and left-out ops,
        the first layer's prefetch and ``n - 1`` times what of the next one's the layer's compute
        cannot hide (``compose.overlap``: the compute is at most the floor's and the gradient
        accumulation's); plus the embedding's or the head's. A rank busy ``F + B`` seconds per
        microbatch ends its last backward after at least ``m (F + B)`` and then syncs
        ``max(last, spans - W share)`` more, ``W <= B`` being its last backward's compute, whose
        gradients the buckets hide behind: ``m (F + B) + max(last, spans - B share)`` grows with
        ``F`` and ``B`` (``m >= 1 > share``), so their bounds bound it."""
        k = self.found.key[rows]
        f = self.floors
        m = _microbatches(self.spec, self.grid, rows)[:, None]
        n = c.chunks
        repeat = np.where(n > 0, n - 1, 0.0)
        passes = []
        for j, (floor, compute) in enumerate((("fwd", "fwd_compute"), ("bwd", "bwd_compute"))):
            exposed = np.maximum(0.0, c.prefetch[j] - f[compute][k] - c.extra_compute[j])  # (rows, kinds)
            p = (f[floor][k] + c.extra[j]) @ n.T + (n > 0) @ c.prefetch[j] + exposed @ repeat.T
            p[:, 0] += f["first"][k][:, j] + c.ends[0, j]
            p[:, -1] += f["last"][k][:, j] + c.ends[1, j]
            host = f[f"{floor}_host"][k] @ n.T
            host[:, 0] += f["first_host"][k][:, j]
            host[:, -1] += f["last_host"][k][:, j]
            passes.append(np.maximum(p, host))  # (rows, chunks): each pass on its slower stream
        fwd, bwd = passes
        busy_f, busy_b = fwd @ c.held, bwd @ c.held  # (rows, ranks)
        synced = m * (busy_f + busy_b) + c.sync + np.maximum(c.last, c.spans - busy_b * c.share)
        bound = synced.max(axis=1)
        if c.fill:
            pp = c.held.shape[1]
            fill = ((pp - 1) * (fwd.min(axis=1) + bwd.min(axis=1)) + m[:, 0] * c.vp * (fwd + bwd).min(axis=1)
                    + (c.sync + c.last).min())
            bound = np.maximum(bound, fill)
        return self.found.with_overhead((bound + c.update) * (1.0 - SLACK))


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
