"""One training step: chunk work, the pipeline timeline, gradient sync, optimizer, breakdown.

Given each op's time per call (after residual factors), :func:`compose` builds the forward and
backward task time of every pipeline chunk from its own layer count (compute plus exposed
communication, by the overlap rules; an uneven split gives chunks different times, and the
slowest stage then sets the pace of the timeline), times the schedule's tasks, and ends the step on each rank with its exposed gradient
sync; the optimizer starts once every rank has synced (the gradient-norm all-reduce across the
model-parallel ranks makes the optimizer step collective) and the step ends when the slowest
rank's update ends.

The breakdown follows the rank that finishes the gradient sync last: its compute by family,
its exposed communication by axis, its idle time (``bubble``: pipeline fill and drain, waiting
on slower stages or on sends), then the update of the slowest rank. It sums to the step time.
Times may be floats (one prediction) or numpy arrays (a sweep, chosen per configuration).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.graph import OpGraph
from llmp.compose.overlap import ChunkWork, OverlapRules, RankTail, chunk_work, merge, rank_tail
from llmp.compose.schedule import Plan, Timeline, plan, simulate
from llmp.dsl.spec import Schedule


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """The composed step: total, breakdown and the pieces the trace and tables need."""

    step_time: Any
    breakdown: dict[str, Any]
    """Seconds by category; sums to ``step_time``."""
    timeline: Timeline
    works: tuple[ChunkWork, ...]
    """Per global chunk."""
    layers: tuple[Any, ...]
    """Transformer layers of each global chunk."""
    tails: tuple[RankTail, ...]
    """Per pipeline rank."""
    sync_start: tuple[Any, ...]
    """Per rank: when its last backward ends (its gradient sync tail starts)."""
    update_start: Any
    """When the optimizer starts on every rank."""
    critical_rank: Any


def schedule_plan(graph: OpGraph, schedule: Schedule) -> Plan:
    """The task plan of ``graph``'s pipeline (interleaving with one chunk per rank is 1F1B)."""
    st = graph.structure
    return plan(schedule if st.vp > 1 or schedule is not Schedule.INTERLEAVED else Schedule.ONE_F_ONE_B,
                st.pp, st.vp, st.microbatches)


def _argmax(values: Sequence[Any]) -> Any:
    if any(isinstance(v, np.ndarray) for v in values):
        return np.argmax(np.stack(np.broadcast_arrays(*values)), axis=0)
    return max(range(len(values)), key=lambda i: values[i])


def _pick(values: Sequence[Any], idx: Any) -> Any:
    if isinstance(idx, np.ndarray):  # not np.choose: it takes at most 64 choices (pp = 64 has 64 ranks)
        stacked = np.stack(np.broadcast_arrays(*[np.asarray(v, float) for v in values], idx)[:-1])
        return np.take_along_axis(stacked, idx[None], axis=0)[0]
    return values[idx]


def _pick_dicts(dicts: Sequence[dict[str, Any]], idx: Any) -> dict[str, Any]:
    keys = sorted(set().union(*dicts))
    return {k: _pick([d.get(k, 0) for d in dicts], idx) for k in keys}


def compose(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, schedule: Schedule) -> Step:
    """Compose per-op times (floats or arrays, aligned with ``graph.ops``) into one step."""
    st = graph.structure
    pp, chunks, m = st.pp, st.chunks, st.microbatches
    kinds: dict[tuple[bool, bool, Any], ChunkWork] = {}
    works = []
    for g in range(chunks):
        key = (g == 0, g == chunks - 1, graph.chunk_layers[g])
        if key not in kinds:
            kinds[key] = chunk_work(graph, times, rules, first=key[0], last=key[1], layers=key[2])
        works.append(kinds[key])
    arrays = any(isinstance(t, np.ndarray) for t in times)
    p = schedule_plan(graph, schedule)
    tl = simulate(p, [w.fwd.total for w in works], [w.bwd.total for w in works],
                  np.maximum if arrays else None)
    busy, tails, syncs, updates = [], [], [], []
    for r in range(pp):
        mine = [works[g] for g in range(r, chunks, pp)]
        busy.append(merge(*(w.fwd.by_category for w in mine), *(w.bwd.by_category for w in mine), scale=m))
        tail = rank_tail(graph, times, rules, r, sum(w.bwd.compute for w in mine), sum(w.fwd.compute for w in mine))
        tails.append(tail)
        syncs.append(tl.rank_end[r] + sum(tail.sync.values()))
        updates.append(sum(tail.update.values()))
    crit, slow = _argmax(syncs), _argmax(updates)
    sync_end, update = _pick(syncs, crit), _pick(updates, slow)
    before = merge(_pick_dicts(busy, crit), _pick_dicts([t.sync for t in tails], crit))
    breakdown = merge(before, _pick_dicts([t.update for t in tails], slow))
    breakdown["bubble"] = sync_end - sum(before.values())
    return Step(step_time=sync_end + update, breakdown=breakdown, timeline=tl, works=tuple(works),
                layers=tuple(graph.chunk_layers), tails=tuple(tails), sync_start=tl.rank_end, update_start=sync_end, critical_rank=crit)
