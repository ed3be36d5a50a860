"""Timing a schedule's plan: when each node of :mod:`~llmp.compose.schedule`'s plan starts and
ends, and when each rank finishes.

A node starts when its rank is free and its dependency has ended; the bubble is whatever idle time
that leaves. A node's output leaves when it ends (its sends are part of its time). The timing pass
is a loop of max/plus that runs on floats (one prediction), or on numpy arrays (a sweep or the
band's draws, ``maximum=np.maximum``) a wave of independent nodes at a time (:func:`waves`,
compiled once per plan). A step needs only when each rank ends, which
:mod:`~llmp.compose.periodic` finds by timing a shorter plan and extrapolating its repeating
rounds (:func:`end_times`, :func:`ends`); the whole timeline is for traces and tests.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.compose.schedule import Kind, Plan


@dataclass(frozen=True, slots=True)
class Timeline:
    """Start and end of every node (``Plan`` order of indices; a tuple, or an array with a row
    per node when the durations are arrays), and when each rank finishes."""

    plan: Plan
    start: Any
    """A tuple, or an array with a row per node."""
    end: Any
    rank_end: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Wave:
    """Nodes that can be timed together: each waits only on nodes of earlier waves, and no two
    share a rank. Indices into a node array with one extra row, ``n``, that stays at time 0."""

    nodes: np.ndarray
    before: np.ndarray
    """The node run just before on the same rank (``n``: none)."""
    dep: np.ndarray
    """The node waited for (``n``: none)."""
    duration: np.ndarray
    """Index into the durations."""
    sources: np.ndarray
    """``before`` then ``dep``: both read in one gather."""


@functools.cache
def waves(p: Plan) -> tuple[Wave, ...]:
    """The plan's nodes in waves (a node's wave is one more than the later of its rank
    predecessor's and its dependency's), computed once per plan: the compiled form of the
    timeline that :func:`simulate` runs on arrays, a few numpy calls per wave instead of two
    per node. A pipeline of ``pp`` ranks has about ``pp`` nodes per wave, so a timeline of many
    draws or configurations costs per wave, not per node."""
    n = len(p.rank)
    wave, before, last = [0] * n, [n] * n, [-1] * p.pp
    for i in p.order:
        r, d = p.rank[i], p.dep[i]
        before[i] = n if last[r] < 0 else last[r]
        wave[i] = 1 + max(wave[last[r]] if last[r] >= 0 else 0, wave[d] if d >= 0 else 0)
        last[r] = i
    members: list[list[int]] = [[] for _ in range(max(wave, default=0))]
    for i in p.order:
        members[wave[i] - 1].append(i)
    out = []
    for m in members:
        runs, needs = [before[i] for i in m], [n if p.dep[i] < 0 else p.dep[i] for i in m]
        out.append(Wave(nodes=np.asarray(m), before=np.asarray(runs), dep=np.asarray(needs),
                        duration=np.asarray([p.duration[i] for i in m]), sources=np.asarray(runs + needs)))
    return tuple(out)


Program = tuple[int, tuple[tuple[np.ndarray, int, slice | np.ndarray], ...], int, tuple[tuple[int, int], ...]]
"""Rows of :func:`end_times`'s working array, each wave's reads, size and the rows it writes, the
first row of the nodes kept, and the rows copied at the end (a node kept twice)."""


def _fit(busy: list[bool], k: int) -> int:
    """The first of ``k`` free rows in a row of ``busy`` (grown when none are)."""
    run = 0
    for r, b in enumerate(busy):
        run = 0 if b else run + 1
        if run == k:
            return r - k + 1
    busy.extend([False] * (k - run))
    return len(busy) - k


@functools.cache
def _program(p: Plan, keys: int, keep: tuple[int, ...]) -> Program:
    """:func:`end_times` compiled for ``p`` and the nodes ``keep``: rows of one small working
    array (row 0 stays 0, rows ``1 .. keys`` hold the durations, then a row per node of ``keep``
    in that order, which :func:`end_times` returns as they are, then a row per other node while
    its end is still to be read, reused after its last read), so that each wave is one gather of
    its ``before``, ``dep`` and durations, and writes its ends into a slice where its rows follow
    each other (the first free block that fits, unless it holds a node kept), else a scatter.
    A small array, not one row per node, and no copy of the kept rows: a fresh array of a
    megabyte or more costs more in page faults on first write than all the waves' arithmetic."""
    w = waves(p)
    n = len(p.rank)
    base = 1 + keys
    home: dict[int, int] = {}
    copies = []
    for k, i in enumerate(keep):
        if i in home:
            copies.append((base + k, home[i]))
        else:
            home[i] = base + k
    last: dict[int, int] = {}  # the wave that last reads each node not kept
    for j, x in enumerate(w):
        for i in x.sources.tolist():
            if i != n and i not in home:
                last[i] = j
    free_from = base + len(keep)
    row: dict[int, int] = {n: 0, **home}
    busy: list[bool] = []  # per row past the kept ones: holds an end still to be read
    out = []
    for j, x in enumerate(w):
        sources = x.sources.tolist()
        reads = [row[i] for i in sources] + [1 + d for d in x.duration.tolist()]
        for i in dict.fromkeys(sources):  # read in one gather before the wave writes
            if last.get(i) == j:
                busy[row.pop(i) - free_from] = False
        wave = x.nodes.tolist()
        if not any(i in home for i in wave):
            at = _fit(busy, len(wave))
            rows = list(range(free_from + at, free_from + at + len(wave)))
            busy[at:at + len(wave)] = [True] * len(wave)
        else:
            rows = []
            for i in wave:
                if i in home:
                    rows.append(home[i])
                else:
                    at = _fit(busy, 1)
                    busy[at] = True
                    rows.append(free_from + at)
        for i, r in zip(wave, rows):
            if i in last:
                row[i] = r
            elif i not in home:  # read by no later wave and not kept: its row stays free
                busy[r - free_from] = False
        writes: slice | np.ndarray = np.asarray(rows)
        if rows == list(range(rows[0], rows[0] + len(rows))):
            writes = slice(rows[0], rows[0] + len(rows))
        out.append((np.asarray(reads), len(wave), writes))
    return free_from + len(busy), tuple(out), base, tuple(copies)


def end_times(p: Plan, durations: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    """The ends of the nodes ``keep`` (a row each, in that order) for ``durations`` of shape
    ``(len(p.keys), columns)``: :func:`simulate`'s ends, the same max and sum per node, with a
    gather and two numpy calls per wave (:func:`_program`; the result is a view of its working
    array); the other nodes' ends and the starts are not kept."""
    rows, program, base, copies = _program(p, len(durations), tuple(keep))
    end = np.empty((rows, durations.shape[1]))
    end[0] = 0.0
    end[1:1 + len(durations)] = durations
    for reads, k, writes in program:
        both = end.take(reads, axis=0)
        if isinstance(writes, slice):
            ends = end[writes]
            np.maximum(both[:k], both[k:2 * k], out=ends)
            ends += both[2 * k:]
        else:
            ends = np.maximum(both[:k], both[k:2 * k])
            ends += both[2 * k:]
            end[writes] = ends
    for to, source in copies:
        end[to] = end[source]
    return end[base:base + len(keep)]


def _simulate_waves(p: Plan, durations: Sequence[Any]) -> Timeline:
    """:func:`simulate` on arrays, a wave at a time: the same max and sum per node, so the same
    bits as the node-by-node loop."""
    d = np.stack(np.broadcast_arrays(*[np.asarray(x, float) for x in durations]))
    n = len(p.rank)
    start, end = np.zeros((n + 1, *d.shape[1:])), np.zeros((n + 1, *d.shape[1:]))
    for w in waves(p):
        s = np.maximum(end[w.before], end[w.dep])
        start[w.nodes] = s
        end[w.nodes] = s + d[w.duration]
    last = [n] * p.pp
    for i in p.order:
        last[p.rank[i]] = i
    return Timeline(plan=p, start=start[:n], end=end[:n], rank_end=tuple(end[i] for i in last))


def simulate(p: Plan, durations: Sequence[Any], maximum: Callable[[Any, Any], Any] | None = None) -> Timeline:
    """Time every node: ``durations[k]`` is the time of :attr:`Plan.keys` ``[k]``.

    Durations are floats, or arrays with ``maximum=numpy.maximum`` (one timeline per column,
    timed a wave at a time, :func:`waves`).
    """
    if maximum is np.maximum and p.rank:
        return _simulate_waves(p, durations)
    n = len(p.rank)
    start: list[Any] = [0] * n
    end: list[Any] = [0] * n
    free: list[Any] = [0] * p.pp
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
def _float_program(p: Plan) -> tuple[tuple[int, int, int, int], ...]:
    """:func:`simulate`'s float loop as rows in timing order: (node, the rank's previous node,
    dependency, duration index), a missing previous node or dependency pointing at the sentinel
    slots ``n`` (0, an idle rank's free time) and ``n + 1`` (-inf, never later), so each node
    is one read of each and one comparison (:func:`ends`)."""
    n = len(p.rank)
    last = [n] * p.pp
    rows = []
    for i in p.order:
        r, d = p.rank[i], p.dep[i]
        rows.append((i, last[r], d if d >= 0 else n + 1, p.duration[i]))
        last[r] = i
    return tuple(rows)


def ends(p: Plan, durations: Sequence[Any], keep: Sequence[int]) -> tuple[float, ...]:
    """:func:`simulate`'s float ends of the nodes ``keep`` (``durations`` of :attr:`Plan.keys`):
    the same comparisons and sums in the same order, so the same bits, without its starts and
    with the loop's lookups cut to a row per node (:func:`_float_program`)."""
    d = [float(x) for x in durations]  # numpy scalars would make each step ~4x slower
    n = len(p.rank)
    end: list[Any] = [0.0] * (n + 2)
    end[n], end[n + 1] = 0, -math.inf
    for i, prev, dep, k in _float_program(p):
        s = end[prev]
        e = end[dep]
        if e > s:
            s = e
        end[i] = s + d[k]
    return tuple(map(end.__getitem__, keep))


def uniform_durations(p: Plan, f: Sequence[Any], b: Sequence[Any], w: Sequence[Any] | None = None,
                      pair: Callable[[int, int], Any] | None = None) -> list[Any]:
    """Durations of ``p.keys`` from per-chunk task times: ``f[g]``, the whole backward ``b[g]``, or
    with ``w`` the input gradient ``b[g]`` and the weight gradient ``w[g]`` (a whole backward is
    then ``b[g] + w[g]``); a pair is ``pair(g, h)`` (default: its F and whole backward in turn)."""
    def whole(g: int) -> Any:
        return b[g] if w is None else b[g] + w[g]

    out = []
    for k, g, h in p.keys:
        if k is Kind.F:
            out.append(f[g])
        elif k is Kind.BW:
            out.append(whole(g))
        elif k is Kind.B:
            out.append(b[g])
        elif k is Kind.W:
            assert w is not None, "the schedule runs W apart: give the weight-gradient times"
            out.append(w[g])
        elif k is Kind.FB:
            out.append(pair(g, h) if pair else f[g] + whole(h))
        else:
            out.append(0)
    return out
