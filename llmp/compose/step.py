"""One training step: chunk work, the pipeline timeline, gradient sync, optimizer, breakdown.

Given each op's time per call (after residual factors), :func:`compose` builds the task times
of every pipeline chunk from its own layer count (forward and backward, and the backward's B and
W apart when the schedule splits them; compute plus exposed communication, by the overlap rules;
an uneven split gives chunks different times, and the slowest stage then sets the pace of the
timeline), times the schedule's tasks, and ends the step on each rank with its exposed gradient
sync (bucketed reductions hide behind the rank's last weight-gradient work); the optimizer
starts once every rank has synced (the gradient-norm all-reduce across the model-parallel ranks
makes the optimizer step collective) and the step ends when the slowest rank's update ends.

The breakdown follows the rank that finishes the gradient sync last: its compute by family,
its exposed communication by axis, its idle time (``bubble``: pipeline fill and drain, waiting
on slower stages or on sends), then the update of the slowest rank. It sums to the step time.
Times may be floats (one prediction) or numpy arrays (a sweep, chosen per configuration).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.op import OpGraph, Scope
from llmp.compose.overlap import (
    ChunkWork,
    OverlapRules,
    PassWork,
    chunk_works,
    merge,
    paired,
)
from llmp.compose.periodic import rank_end
from llmp.compose.schedule import Key, Kind, Plan, plan
from llmp.compose.tail import RankTail, rank_tail
from llmp.compose.timeline import Timeline, simulate
from llmp.spec.spec import Schedule


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """The composed step: total, breakdown and the pieces the trace and tables need."""

    step_time: Any
    breakdown: dict[str, Any]
    """Seconds by category; sums to ``step_time``."""
    plan: Plan
    durations: tuple[Any, ...]
    """The time of each of the plan's durations (``plan.keys``)."""
    works: tuple[ChunkWork, ...]
    """Per model chunk."""
    passes: tuple[PassWork, ...]
    """The work of each of the plan's durations (``timeline.plan.keys``)."""
    layers: tuple[Any, ...]
    """Transformer layers of each model chunk."""
    tails: tuple[RankTail, ...]
    """Per pipeline rank."""
    sync_start: tuple[Any, ...]
    """Per rank: when its last pipeline task ends (its gradient sync tail starts)."""
    update_start: Any
    """When the optimizer starts on every rank."""
    critical_rank: Any

    @property
    def timeline(self) -> Timeline:
        """Every task's start and end (timed on demand: the step itself needs only each rank's
        end, :func:`~llmp.compose.periodic.rank_end`)."""
        arrays = any(isinstance(d, np.ndarray) for d in self.durations)
        return simulate(self.plan, self.durations, np.maximum if arrays else None)


def schedule_plan(graph: OpGraph, schedule: Schedule) -> Plan:
    """The task plan of ``graph``'s pipeline."""
    st = graph.structure
    return plan(schedule, st.pp, st.vp, st.microbatches, st.microbatch_group)


def _argmax(values: Sequence[Any]) -> Any:
    if any(isinstance(v, np.ndarray) for v in values):
        return np.argmax(np.stack(np.broadcast_arrays(*values)), axis=0)
    return max(range(len(values)), key=lambda i: values[i])


def _pick(values: Sequence[Any], idx: Any) -> Any:
    if isinstance(idx, np.ndarray):  # not np.choose: it takes at most 64 choices (pp = 64 has 64 ranks)
        stacked = np.stack(np.broadcast_arrays(*[np.asarray(v, float) for v in values], idx)[:-1])
        return np.take_along_axis(stacked, idx[None], axis=0)[0]
    return values[idx]


def _pick_dicts(dicts: Sequence[Mapping[str, Any]], idx: Any) -> dict[str, Any]:
    keys = sorted(set().union(*dicts))
    return {k: _pick([d.get(k, 0) for d in dicts], idx) for k in keys}


def _pass(key: Key, works: Sequence[ChunkWork], contention: float) -> PassWork:
    kind, g, h = key
    w = works[g]
    if kind is Kind.F:
        return w.fwd
    if kind is Kind.BW:
        return w.bwd
    if kind in (Kind.B, Kind.W):
        part = w.b if kind is Kind.B else w.w
        assert part is not None, "chunk work lacks the split backward"
        return part
    if kind is Kind.FB:
        return paired(w.fwd, works[h].bwd, contention)
    return PassWork(by_category={}, compute=0)


@dataclass(frozen=True, slots=True)
class _Layout:
    """What :func:`compose` reads of the graph and the plan besides the times: kept in the graph's
    memo, so a warm prediction only adds up numbers."""

    chunk_keys: tuple[tuple[bool, bool, Any], ...]
    """The distinct (first, last, layers of each kind) of the chunks, in order of first use."""
    chunk_of: tuple[int, ...]
    """Per model chunk, its index in ``chunk_keys``."""
    same_tail: tuple[int, ...]
    """Per pipeline rank, the first rank with the same once-per-step ops and chunks (so the same
    tail, whatever the times)."""
    used_keys: tuple[int, ...]
    """The durations some rank runs (``plan.rank_work``), in order."""


def _layout(graph: OpGraph, p: Plan) -> _Layout:
    key = ("layout", p)
    cached = graph.memo.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    st = graph.structure
    keys: dict[tuple[bool, bool, Any], int] = {}
    chunk_of = tuple(keys.setdefault((g == 0, g == st.chunks - 1, graph.chunk_kinds[g]), len(keys))
                     for g in range(st.chunks))
    seen: dict[Any, int] = {}
    same_tail = tuple(seen.setdefault((graph.indices(Scope.RANK, r), tuple(chunk_of[g] for g in st.placement[r])), r)
                      for r in range(st.pp))
    used = tuple(sorted({k for r in range(st.pp) for k, _ in p.rank_work[r]}))
    graph.memo[key] = out = _Layout(chunk_keys=tuple(keys), chunk_of=chunk_of, same_tail=same_tail, used_keys=used)
    return out


def _categories(graph: OpGraph, p: Plan, lay: _Layout, passes: Sequence[PassWork]) -> list[str]:
    """The categories of the durations some rank runs, sorted: which categories a pass has follows
    from the ops alone (not their times), so they are kept in the graph's memo."""
    key = ("categories", p)
    cached = graph.memo.get(key)
    if cached is None:
        cached = graph.memo[key] = sorted({c for k in lay.used_keys for c in passes[k].by_category})
    return cached  # type: ignore[no-any-return]


def compose(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, schedule: Schedule) -> Step:
    """Compose per-op times (floats or arrays, aligned with ``graph.ops``) into one step."""
    st = graph.structure
    pp = st.pp
    p = schedule_plan(graph, schedule)
    lay = _layout(graph, p)
    kinds = chunk_works(graph, times, rules, lay.chunk_keys, p.splits_w)
    works = [kinds[i] for i in lay.chunk_of]
    passes = tuple(_pass(key, works, rules.contention) for key in p.keys)
    arrays = any(issubclass(c, np.ndarray) for c in set(map(type, times)))  # a set of a few types
    totals: dict[int, Any] = {}  # a pass shared by several durations is added up once
    durations = tuple(totals[id(x)] if id(x) in totals else totals.setdefault(id(x), x.total) for x in passes)
    ends = rank_end(p, durations, arrays)
    tails: list[RankTail] = []
    syncs: list[Any] = []
    updates: list[Any] = []
    for r in range(pp):
        same = lay.same_tail[r]
        if same == r:
            mine = [works[g] for g in st.placement[r]]
            tail = rank_tail(graph, times, rules, r, sum(w.weight_pass.compute for w in mine),
                             sum(w.fwd.compute for w in mine))
            update = sum(tail.update.values())
        else:
            tail, update = tails[same], updates[same]
        tails.append(tail)
        syncs.append(ends[r] + sum(tail.sync.values()))
        updates.append(update)
    crit, slow = _argmax(syncs), _argmax(updates)
    if isinstance(crit, np.ndarray) and crit.size and (crit == crit.flat[0]).all():
        crit = int(crit.flat[0])  # one rank is critical in every column: only its work is summed

    def busy(r: int) -> dict[str, Any]:
        done: dict[str, Any] = defaultdict(int)
        for k, n in p.rank_work[r]:
            for cat, v in passes[k].by_category.items():
                done[cat] += v * n
        return dict(done)

    if isinstance(crit, np.ndarray):
        work = _pick_dicts([busy(r) for r in range(pp)], crit)
    else:
        critical = busy(crit)
        work = {c: critical.get(c, 0) for c in _categories(graph, p, lay, passes)}
    sync_end, update = _pick(syncs, crit), _pick(updates, slow)
    before = merge(work, _pick_dicts([t.sync for t in tails], crit))
    breakdown = merge(before, _pick_dicts([t.update for t in tails], slow))
    breakdown["bubble"] = sync_end - sum(before.values())
    return Step(step_time=sync_end + update, breakdown=breakdown, plan=p, durations=durations, works=tuple(works),
                passes=passes, layers=tuple(graph.chunk_layers), tails=tuple(tails), sync_start=ends,
                update_start=sync_end, critical_rank=crit)
