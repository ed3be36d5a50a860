"""The pipeline timing as it was before schedules became table entries (llmp 3359424), kept as an
oracle: GPipe, 1F1B and interleaved 1F1B written out per schedule with forward and backward
tasks only. The table (llmp.analytic.schedules) must reproduce its timelines, in-flight counts and
composed steps exactly."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.op import OpGraph
from llmp.compose.overlap import OverlapRules, chunk_work, merge
from llmp.compose.step import _argmax, _pick, _pick_dicts
from llmp.compose.tail import rank_tail
from llmp.spec.spec import Schedule


@dataclass(frozen=True, slots=True)
class Plan:
    """Tasks of one step and the order to time them in."""

    pp: int
    vp: int
    microbatches: int
    rank: tuple[int, ...]
    chunk: tuple[int, ...]
    """Global chunk index ``g`` of each task."""
    forward: tuple[bool, ...]
    microbatch: tuple[int, ...]
    dep: tuple[int, ...]
    """Index of the task this one waits for on another rank (-1: none)."""
    order: tuple[int, ...]
    """All tasks in an order where every dependency comes first."""
    duration: tuple[int, ...]
    """Index of each task's duration in ``[*fwd, *bwd]`` (``g``, or ``g + chunks`` backward)."""
    peak_in_flight: tuple[int, ...]
    """Per rank: most (chunk, microbatch) forwards whose backward has not run yet."""


def _orders(schedule: Schedule, pp: int, vp: int, m: int) -> list[list[tuple[int, int, bool]]]:
    """Per rank: (local chunk, microbatch, forward?) in execution order."""
    out = []
    for r in range(pp):
        if schedule is Schedule.GPIPE:
            seq = [(0, j, True) for j in range(m)] + [(0, j, False) for j in range(m)]
        elif schedule is Schedule.INTERLEAVED and vp > 1:
            total = m * vp

            def fwd(i: int) -> tuple[int, int, bool]:
                return ((i // pp) % vp, (i // (pp * vp)) * pp + i % pp, True)

            def bwd(i: int) -> tuple[int, int, bool]:
                return (vp - 1 - (i // pp) % vp, (i // (pp * vp)) * pp + i % pp, False)

            warm = min(2 * (pp - r - 1) + (vp - 1) * pp, total)
            seq = [fwd(i) for i in range(warm)]
            for i in range(total - warm):
                seq += [fwd(warm + i), bwd(i)]
            seq += [bwd(i) for i in range(total - warm, total)]
        else:
            warm = min(pp - r - 1, m)
            seq = [(0, j, True) for j in range(warm)]
            for i in range(m - warm):
                seq += [(0, warm + i, True), (0, i, False)]
            seq += [(0, j, False) for j in range(m - warm, m)]
        out.append(seq)
    return out


@functools.cache
def plan(schedule: Schedule, pp: int, vp: int, microbatches: int) -> Plan:
    """The tasks of a schedule and a dependency-respecting order to time them in."""
    m, chunks = microbatches, pp * vp
    orders = _orders(schedule, pp, vp, m)
    index: dict[tuple[int, int, bool], int] = {}
    rank, chunk, forward, micro = [], [], [], []
    for r, seq in enumerate(orders):
        for k, j, f in seq:
            index[(k * pp + r, j, f)] = len(rank)
            rank.append(r)
            chunk.append(k * pp + r)
            forward.append(f)
            micro.append(j)
    dep = []
    for g, j, f in zip(chunk, micro, forward):
        if f:
            dep.append(index[(g - 1, j, True)] if g > 0 else -1)
        else:
            dep.append(index[(g + 1, j, False)] if g < chunks - 1 else index[(g, j, True)])
    lists = [[index[(k * pp + r, j, f)] for k, j, f in seq] for r, seq in enumerate(orders)]
    done = [False] * len(rank)
    pos = [0] * pp
    order: list[int] = []
    while len(order) < len(rank):
        moved = False
        for r in range(pp):
            seq = lists[r]
            while pos[r] < len(seq) and (dep[seq[pos[r]]] < 0 or done[dep[seq[pos[r]]]]):
                i = seq[pos[r]]
                done[i] = True
                order.append(i)
                pos[r] += 1
                moved = True
        assert moved, f"{schedule} schedule deadlocks for pp={pp} vp={vp} m={m}"
    peaks = []
    for seq in orders:
        live = peak = 0
        for _, _, f in seq:
            live += 1 if f else -1
            peak = max(peak, live)
        peaks.append(peak)
    return Plan(pp=pp, vp=vp, microbatches=m, rank=tuple(rank), chunk=tuple(chunk), forward=tuple(forward),
                microbatch=tuple(micro), dep=tuple(dep), order=tuple(order), peak_in_flight=tuple(peaks),
                duration=tuple(g if f else g + chunks for g, f in zip(chunk, forward)))


@dataclass(frozen=True, slots=True)
class Timeline:
    """Start and end of every task (``Plan`` order of indices), and when each rank finishes."""

    plan: Plan
    start: tuple[Any, ...]
    end: tuple[Any, ...]
    rank_end: tuple[Any, ...]


def simulate(p: Plan, fwd: Sequence[Any], bwd: Sequence[Any],
             maximum: Callable[[Any, Any], Any] | None = None) -> Timeline:
    """Time every task: ``fwd[g]`` / ``bwd[g]`` are the durations of chunk ``g``'s tasks.

    Durations are floats, or arrays with ``maximum=numpy.maximum`` (one timeline per column).
    """
    n = len(p.rank)
    start: list[Any] = [0] * n
    end: list[Any] = [0] * n
    free: list[Any] = [0] * p.pp
    durations = [*fwd, *bwd]
    kind, rank, dep = p.duration, p.rank, p.dep
    if maximum is None:  # floats: the comparison inline is several times faster than max()
        durations = [float(x) for x in durations]  # numpy scalars would make each step ~4x slower
        for i in p.order:
            r = rank[i]
            s = free[r]
            d = dep[i]
            if d >= 0 and end[d] > s:
                s = end[d]
            start[i] = s
            end[i] = free[r] = s + durations[kind[i]]
    else:
        for i in p.order:
            r = rank[i]
            d = dep[i]
            s = maximum(free[r], end[d]) if d >= 0 else free[r]
            start[i] = s
            end[i] = free[r] = s + durations[kind[i]]
    return Timeline(plan=p, start=tuple(start), end=tuple(end), rank_end=tuple(free))


@functools.cache
def layers_in_flight(p: Plan, layers: tuple[int, ...]) -> tuple[int, ...]:
    """Per rank: the most transformer layers whose forward activations it holds at once (chunk
    ``g`` has ``layers[g]``): ``peak_in_flight`` weighted by each pass's layers, for uneven chunks."""
    live, peak = [0] * p.pp, [0] * p.pp
    for r, g, forward in zip(p.rank, p.chunk, p.forward):
        live[r] += layers[g] if forward else -layers[g]
        peak[r] = max(peak[r], live[r])
    return tuple(peak)


def step(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, schedule: Schedule) -> tuple[Any, dict[str, Any]]:
    """Step time and breakdown as ``llmp.compose.step.compose`` computed them (same chunk work and
    rank tails, the old plan and timeline)."""
    st = graph.structure
    pp, chunks, m = st.pp, st.chunks, st.microbatches
    kinds: dict[tuple[bool, bool, Any], Any] = {}
    works = []
    for g in range(chunks):
        key = (g == 0, g == chunks - 1, graph.chunk_kinds[g])  # main's chunk_work takes layers per kind
        if key not in kinds:
            kinds[key] = chunk_work(graph, times, rules, first=key[0], last=key[1], layers=key[2])
        works.append(kinds[key])
    arrays = any(isinstance(t, np.ndarray) for t in times)
    flat = schedule if st.vp > 1 or schedule is not Schedule.INTERLEAVED else Schedule.ONE_F_ONE_B
    tl = simulate(plan(flat, st.pp, st.vp, st.microbatches), [w.fwd.total for w in works],
                  [w.bwd.total for w in works], np.maximum if arrays else None)
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
    return sync_end + update, breakdown
