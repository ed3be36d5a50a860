"""Pipeline schedules as task orders, and the event timeline they produce.

A task is the forward or backward of one microbatch on one chunk. Chunk ``g`` of ``pp * vp``
lives on rank ``g % pp`` (Megatron's interleaving: rank ``r`` holds chunks ``r, r + pp, ...``).
Dependencies: a forward needs the previous chunk's forward of the same microbatch, a backward
needs the next chunk's backward (the last chunk's backward needs its own forward). Each rank
runs its tasks in the order its schedule prescribes:

* ``gpipe``: all forwards, then all backwards (Huang et al. 2019);
* ``1f1b``: ``pp - r - 1`` warm-up forwards, then one forward / one backward, then the
  remaining backwards (PipeDream-Flush; Narayanan et al. 2021, Megatron
  ``forward_backward_pipelining_without_interleaving``);
* ``interleaved``: Megatron's interleaved 1F1B over ``vp`` chunks per rank, warm-up
  ``2 (pp - r - 1) + (vp - 1) N`` virtual microbatches, chunks cycled every ``N`` microbatches
  (``N = microbatch_group``, default ``pp``; a last group takes the remaining microbatches:
  Megatron-Core ``get_schedule_table`` and ``get_pp_rank_microbatches``).

A task starts when its rank is free and its dependency has ended; the bubble is whatever idle
time that leaves. Orders and the dependency-respecting execution sequence depend only on
``(schedule, pp, vp, microbatches)`` and are cached; the timing pass is a loop of max/plus that
runs on floats (one prediction) or numpy arrays (a sweep, ``maximum=np.maximum``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmp.analytic.algebra import vmax
from llmp.dsl.spec import Schedule


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


def _interleaved_table(m: int, vp: int, group: int) -> list[tuple[int, int]]:
    """(local chunk, microbatch) of each virtual microbatch: each group of ``group`` microbatches
    runs on chunk 0, then chunk 1, ...; the last group takes what remains (NVIDIA/Megatron-LM@00611e6:
    megatron/core/pipeline_parallel/schedules.py, get_schedule_table)."""
    table = []
    for start in range(0, m, group):
        stop = min(m, start + group)
        table += [(k, j) for k in range(vp) for j in range(start, stop)]
    return table


def _orders(schedule: Schedule, pp: int, vp: int, m: int, group: int) -> list[list[tuple[int, int, bool]]]:
    """Per rank: (local chunk, microbatch, forward?) in execution order."""
    out = []
    table = _interleaved_table(m, vp, group) if schedule is Schedule.INTERLEAVED and vp > 1 else []
    for r in range(pp):
        if schedule is Schedule.GPIPE:
            seq = [(0, j, True) for j in range(m)] + [(0, j, False) for j in range(m)]
        elif table:
            # The backward of virtual microbatch i runs chunk vp - 1 - k of table[i]; each chunk's
            # backwards take its microbatches in the order its forwards ran them.
            fwd = [(k, j, True) for k, j in table]
            bwd = [(vp - 1 - k, j, False) for k, j in table]
            total = len(table)
            warm = min(2 * (pp - r - 1) + (vp - 1) * group, total)
            seq = fwd[:warm]
            for i in range(total - warm):
                seq += [fwd[warm + i], bwd[i]]
            seq += bwd[total - warm:]
        else:
            warm = min(pp - r - 1, m)
            seq = [(0, j, True) for j in range(warm)]
            for i in range(m - warm):
                seq += [(0, warm + i, True), (0, i, False)]
            seq += [(0, j, False) for j in range(m - warm, m)]
        out.append(seq)
    return out


@functools.cache
def plan(schedule: Schedule, pp: int, vp: int, microbatches: int, group: int | None = None) -> Plan:
    """The tasks of a schedule and a dependency-respecting order to time them in (``group``: the
    interleaved schedule's microbatch group, default ``pp``)."""
    m, chunks = microbatches, pp * vp
    orders = _orders(schedule, pp, vp, m, pp if group is None else group)
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


def in_flight(p: Plan, chunk_bytes: tuple[Any, ...]) -> tuple[Any, ...]:
    """Per rank: the most activation bytes it holds at once when chunk ``g``'s forward keeps
    ``chunk_bytes[g]`` until its backward (numbers, arrays or expressions): ``peak_in_flight``
    weighted by what each pass keeps, for chunks that differ."""
    live: list[Any] = [0] * p.pp
    peak: list[Any] = [0] * p.pp
    for r, g, forward in zip(p.rank, p.chunk, p.forward):
        live[r] = live[r] + (chunk_bytes[g] if forward else -chunk_bytes[g])
        peak[r] = vmax(peak[r], live[r])
    return tuple(peak)
