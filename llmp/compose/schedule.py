"""The event timeline of a pipeline schedule: its table entry's steps as timed nodes.

:mod:`~llmp.analytic.schedules` says, per rank, which F, B and W tasks run in which order. This
module turns them into nodes and times them. Dependencies: a forward needs the previous chunk's
forward of the same microbatch (in the microbatch's model copy), a backward needs the next
chunk's backward (the last chunk's needs its own forward), a W needs its own B. A node starts
when its rank is free and its dependency has ended; the bubble is whatever idle time that
leaves. A node's output leaves when it ends (its sends are part of its time). DualPipe's
overlapped pair is one node running an F and a B: it starts once both inputs have arrived (a
zero-length node on the rank waits for the B's) and both outputs leave when it ends.

A node's time is one of a few per-chunk durations (:attr:`Plan.keys`: the F, B, W or whole
backward of a model chunk, or a pair), so plans depend only on ``(schedule, pp, vp,
microbatches)`` (and the interleaved schedule's microbatch group) and are cached (built from the
steps as arrays, :func:`nodes`, a few numpy calls per plan instead of several per node); the timing
pass is a loop of max/plus that runs on floats (one prediction), or on numpy arrays (a sweep or
the band's draws, ``maximum=np.maximum``) a wave of independent nodes at a time (:func:`waves`,
compiled once per plan). A step needs only when each rank ends, which
:mod:`~llmp.compose.periodic` finds by timing a shorter plan and extrapolating its repeating
rounds; the whole timeline is for traces and tests.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from llmp.analytic.op import Task
from llmp.analytic.schedules import entry, steps
from llmp.spec.algebra import vmax
from llmp.spec.spec import Schedule


class Kind(StrEnum):
    """What a node runs."""

    F = "F"
    B = "B"
    """The input gradient alone (its W runs later)."""
    W = "W"
    BW = "BW"
    """The input and the weight gradient together: the backward of GPipe and 1F1B."""
    FB = "F&B"
    """A forward and a whole backward of two microbatches overlapped (DualPipe)."""
    WAIT = "wait"
    """Zero length: holds its rank until a pair's backward input has arrived."""


Key = tuple[Kind, int, int]
"""A duration: (kind, model chunk, the pair's backward chunk or -1)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The nodes of one step and the order to time them in."""

    schedule: Schedule
    pp: int
    vp: int
    microbatches: int
    chunks: int
    """Model chunks (``pp * vp``)."""
    placement: tuple[tuple[int, ...], ...]
    """Per rank, the model chunks it holds (DualPipe: one stage of each copy)."""
    rank: tuple[int, ...]
    kind: tuple[Kind, ...]
    chunk: tuple[int, ...]
    """Model chunk of each node (a pair's forward)."""
    microbatch: tuple[int, ...]
    pair: tuple[tuple[int, int] | None, ...]
    """A pair's backward: (model chunk, microbatch)."""
    dep: tuple[int, ...]
    """Index of the node this one waits for (-1: none)."""
    order: tuple[int, ...]
    """All nodes in an order where every dependency comes first."""
    duration: tuple[int, ...]
    """Index of each node's duration in :attr:`keys`."""
    keys: tuple[Key, ...]
    rank_work: tuple[tuple[tuple[int, int], ...], ...]
    """Per rank: (key index, how many nodes of it), forwards first, in chunk order."""
    splits_w: bool
    """Some B runs without its W (the weight gradients run as tasks of their own)."""
    peak_in_flight: tuple[int, ...]
    """Per rank: most (chunk, microbatch) forwards whose backward has not run yet (a B without
    its W counts as run); see :func:`in_flight` for the W's share."""
    copies: int = 1
    group: int | None = field(default=None, compare=False)
    """The interleaved schedule's microbatch group (None: pp); the nodes say all it changes."""

    def __hash__(self) -> int:
        # Plans key the caches of their waves and memory states; hashing every node on each
        # lookup would cost more than the lookup saves. Equal plans share these fields.
        return hash((self.schedule, self.pp, self.vp, self.microbatches, len(self.rank)))


KINDS = tuple(Kind)
"""The kinds in order: :class:`Nodes` holds each node's as an index into this."""
_F, _B, _W, _BW, _FB, _WAIT = (KINDS.index(k) for k in (Kind.F, Kind.B, Kind.W, Kind.BW, Kind.FB, Kind.WAIT))
_TASK = {Task.F: 0, Task.B: 1, Task.W: 2}
"""A task's code in the dependency keys (a node is found by task, placement chunk, microbatch)."""


@dataclass(frozen=True, slots=True)
class Nodes:
    """A schedule's nodes as arrays, each rank's consecutive and in its order (node ``i`` is the
    rank's step ``i``; a DualPipe pair's two steps are its wait and its pair): what :class:`Plan`
    is built from, and what :mod:`~llmp.compose.periodic` compares between microbatch counts
    without building their plans."""

    starts: np.ndarray
    """Each rank's first node, then the number of nodes (``pp + 1`` entries)."""
    kind: np.ndarray
    """Index into :data:`KINDS`."""
    chunk: np.ndarray
    """Placement chunk (its model chunk is this modulo ``pp * vp``; a pair's forward's)."""
    microbatch: np.ndarray
    pair_chunk: np.ndarray
    """A pair's backward's placement chunk (-1: not a pair)."""
    pair_microbatch: np.ndarray
    """A pair's backward's microbatch (0: not a pair)."""
    dep: np.ndarray
    """The node this one waits for (-1: none)."""


@functools.lru_cache(maxsize=16)
def nodes(schedule: Schedule, pp: int, vp: int, m: int, group: int | None = None) -> Nodes:
    """The nodes of the steps of ``schedule`` (cached for the last few, as
    :mod:`~llmp.compose.periodic` compares each microbatch count with its neighbours).
    Dependencies: a forward needs the previous chunk's forward of its microbatch (none for a
    copy's first chunk), a backward the next chunk's backward (the last chunk's: its own
    forward), a W its B; a pair's wait needs its backward's input and the pair its forward's."""
    e = entry(schedule)
    chunks = pp * vp
    placed = e.copies * chunks
    seqs = steps(schedule, pp, vp, m, group)
    starts = np.cumsum([0, *map(len, seqs)])
    rank = np.repeat(np.arange(pp), np.diff(starts))
    tasks, chunk_l, micro_l, with_w_l, paired_l = zip(*(s for seq in seqs for s in seq))
    task = np.fromiter(map(_TASK.__getitem__, tasks), dtype=np.int64, count=len(tasks))
    chunk, micro = np.asarray(chunk_l), np.asarray(micro_l)
    with_w, paired = np.asarray(with_w_l, dtype=bool), np.asarray(paired_l, dtype=bool)
    assert (np.asarray(e.chunk_ranks(pp, vp))[chunk] == rank).all(), f"{schedule}: a chunk off its rank"
    assert (chunk // chunks == micro * e.copies // m).all(), f"{schedule}: a microbatch off its copy"
    local = chunk % chunks
    need = np.where(task == 0, np.where(local > 0, chunk - 1, -1),      # F: the previous chunk's F
                    np.where(task == 1, np.where(local < chunks - 1, chunk + 1, chunk), chunk))
    need_task = np.where(task == 0, 0, np.where((task == 1) & (local == chunks - 1), 0, 1))  # the rest: a B
    need_key = np.where(need >= 0, (need_task * placed + need) * m + micro, -1)
    kind = np.where(task == 0, _F, np.where(task == 2, _W, np.where(with_w, _BW, _B)))
    own = (task * placed + chunk) * m + micro  # the key each step is found by
    assert np.unique(own).size == own.size, f"{schedule}: a task runs twice"
    node = np.arange(len(task))
    pair_chunk = np.full(len(task), -1)
    pair_micro = np.zeros(len(task), dtype=np.int64)
    first = np.flatnonzero(paired)  # a pair: an F and the whole backward after it, on one rank
    if first.size:
        second = first + 1
        assert (second < len(task)).all() and (task[second] == 1).all() and with_w[second].all() \
            and (rank[second] == rank[first]).all(), f"{schedule}: a pair is an F and a whole backward"
        node[first] = second  # both of a pair's tasks end with the pair
        kind[first], kind[second] = _WAIT, _FB
        pair_chunk[second], pair_micro[second] = chunk[second], micro[second]
        for x in (chunk, micro, need_key):  # the wait is the backward's, the pair the forward's
            x[first], x[second] = x[second], x[first].copy()
    counts = np.bincount(task, minlength=3)
    assert counts[0] == counts[1] == chunks * m, \
        f"{schedule}: every chunk runs the F and B of each of its microbatches once"
    assert counts[2] == (kind == _B).sum(), f"{schedule}: each B run apart has its W"
    table = np.full(3 * placed * m, -1)
    table[own] = node
    dep = np.where(need_key >= 0, table[need_key], -1)
    assert (dep[need_key >= 0] >= 0).all(), f"{schedule}: a task waits for one that never runs"
    out = Nodes(starts=starts, kind=kind, chunk=chunk, microbatch=micro, pair_chunk=pair_chunk,
                pair_microbatch=pair_micro, dep=dep)
    for a in (starts, kind, chunk, micro, pair_chunk, pair_micro, dep):
        a.flags.writeable = False  # cached and shared
    return out


def _order(starts: list[int], dep: list[int]) -> list[int]:
    """The nodes in an order where every dependency comes first: each rank in turn runs as far as
    its dependencies allow, until all have run."""
    n = starts[-1]
    done = bytearray(n)
    pos, stop = starts[:-1], starts[1:]
    order: list[int] = []
    while len(order) < n:
        moved = False
        for r, end in enumerate(stop):
            i = pos[r]
            while i < end:
                d = dep[i]
                if d >= 0 and not done[d]:
                    break
                done[i] = 1
                order.append(i)
                i += 1
            if i > pos[r]:
                pos[r], moved = i, True
        if not moved:  # a deadlock: the caller finds nodes missing
            break
    return order


def _steps_to_nodes(schedule: Schedule, pp: int, vp: int, m: int, group: int | None) -> Plan:
    """The plan of :func:`nodes`: their order, durations, per-rank work and peak in flight."""
    e = entry(schedule)
    chunks = pp * vp
    x = nodes(schedule, pp, vp, m, group)
    n = int(x.starts[-1])
    dep = x.dep.tolist()
    order = _order(x.starts.tolist(), dep)
    assert len(order) == n, f"{schedule} schedule deadlocks for pp={pp} vp={vp} m={m}"
    # Durations: (kind, model chunk, the pair's backward chunk or -1), numbered as they first occur;
    # a code per node that sorts as these tuples do.
    chunk = x.chunk % chunks
    pair = np.where(x.pair_chunk >= 0, x.pair_chunk % chunks, -1)
    code = (x.kind * chunks + chunk) * (chunks + 1) + pair + 1
    unique, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    seen = np.argsort(first)
    number = np.empty(len(unique), dtype=np.int64)
    number[seen] = np.arange(len(unique))
    duration = number[inverse.reshape(-1)]
    key_list = tuple((KINDS[u // (chunks + 1) // chunks], u // (chunks + 1) % chunks, u % (chunks + 1) - 1)
                     for u in unique[seen].tolist())
    rank = np.repeat(np.arange(pp), np.diff(x.starts))
    counts = np.bincount(rank * len(unique) + duration, minlength=pp * len(unique)).reshape(pp, -1)
    ranked = [k for u, k in zip(unique.tolist(), number.tolist()) if u // (chunks + 1) // chunks != _WAIT]
    rank_work = tuple(tuple((k, int(c[k])) for k in ranked if c[k]) for c in counts)
    # Per rank, the most forwards whose backward has not run: a pair holds both until it ends.
    holds = (x.kind == _F) | (x.kind == _FB)
    frees = (x.kind == _B) | (x.kind == _BW) | (x.kind == _FB)
    held = np.concatenate([[0], np.cumsum(holds.astype(np.int64) - frees)])
    peaks = tuple(int((held[a + 1:b + 1] + frees[a:b] - held[a]).max(initial=0))  # after each forward
                  for a, b in zip(x.starts[:-1].tolist(), x.starts[1:].tolist()))
    pairs: tuple[tuple[int, int] | None, ...] = (None,) * n
    if (x.pair_chunk >= 0).any():
        pairs = tuple((h, j) if h >= 0 else None for h, j in zip(pair.tolist(), x.pair_microbatch.tolist()))
    kind = tuple(map(KINDS.__getitem__, x.kind.tolist()))
    return Plan(schedule=schedule, pp=pp, vp=vp, microbatches=m, chunks=chunks, placement=e.placement(pp, vp),
                rank=tuple(rank.tolist()), kind=kind, chunk=tuple(chunk.tolist()),
                microbatch=tuple(x.microbatch.tolist()), pair=pairs, dep=tuple(dep), order=tuple(order),
                duration=tuple(duration.tolist()), keys=key_list, rank_work=rank_work,
                splits_w=bool((x.kind == _W).any()), peak_in_flight=peaks, copies=e.copies, group=group)


@functools.cache
def plan(schedule: Schedule, pp: int, vp: int, microbatches: int, group: int | None = None) -> Plan:
    """The nodes of a schedule and a dependency-respecting order to time them in (``group``: the
    interleaved schedule's microbatch group, default ``pp``)."""
    return _steps_to_nodes(schedule, pp, vp, microbatches, group)


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


@functools.cache
def _states(p: Plan, classes: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Per rank: the states of its held activations, as counts per class of chunk (``classes[g]``:
    chunk ``g``'s; chunks of a class keep the same bytes) of passes whose B has not run, then of
    passes whose B has run but not their W; reduced to the states no other state reaches or
    exceeds in every count.

    A B frees the activations only its own gradient needs and keeps what the W needs (the inputs
    and output gradients of the weight GEMMs; Qi et al. 2024 Table 1); a whole backward or a W
    frees the rest. A pair holds its forward's activations with its backward's until it ends.
    Which state is the fullest depends on the bytes of each, so memory takes the maximum over
    these.
    """
    n = max(classes) + 1
    lists: list[list[int]] = [[] for _ in range(p.pp)]
    for i, r in enumerate(p.rank):
        lists[r].append(i)
    out = []
    for r in range(p.pp):
        held = [0] * (2 * n)
        states = {tuple(held)}
        for i in lists[r]:
            k, c = p.kind[i], classes[p.chunk[i]]
            if k in (Kind.F, Kind.FB):
                held[c] += 1
                states.add(tuple(held))
            pair = p.pair[i]
            if k is Kind.FB:
                assert pair is not None
                held[classes[pair[0]]] -= 1
            elif k is Kind.BW:
                held[c] -= 1
            elif k is Kind.B:
                held[c] -= 1
                held[n + c] += 1
                states.add(tuple(held))
            elif k is Kind.W:
                held[n + c] -= 1
        out.append(tuple(sorted(_maximal(states))))
    return tuple(out)


def _maximal(states: set[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The states no other one reaches or exceeds in every count. Only a state of a larger total
    can do that, and one that does is itself maximal or below one that is: so, taking the fullest
    first, a state is kept unless a state already kept covers it (comparing against the few kept
    ones, not against every state, which made a long interleaved plan's memory take seconds)."""
    kept: list[tuple[int, ...]] = []
    for s in sorted(states, key=sum, reverse=True):
        if not any(all(a >= b for a, b in zip(o, s)) for o in kept):
            kept.append(s)
    return kept


def in_flight(p: Plan, chunk_bytes: Sequence[Any], waiting_bytes: Sequence[Any] | None = None,
              classes: tuple[int, ...] | None = None) -> tuple[Any, ...]:
    """Per rank: the most activation bytes it holds at once when chunk ``g``'s forward keeps
    ``chunk_bytes[g]`` until its backward (numbers, arrays or expressions) and, where the schedule
    runs W apart, its B keeps ``waiting_bytes[g]`` until its W (default: nothing). ``classes``
    names the chunks that keep the same bytes (default: each chunk its own), so fewer states are
    compared: ``peak_in_flight`` weighted by what each pass keeps, for chunks that differ."""
    if classes is None:
        classes = tuple(range(len(chunk_bytes)))
    first = {c: g for g, c in reversed(list(enumerate(classes)))}
    n = len(first)
    kept = [chunk_bytes[first[c]] for c in range(n)]
    waiting = [0] * n if waiting_bytes is None else [waiting_bytes[first[c]] for c in range(n)]
    out = []
    for states in _states(p, classes):
        totals = [sum(s[c] * kept[c] + s[n + c] * waiting[c] for c in range(n) if s[c] or s[n + c])
                  for s in states]
        out.append(vmax(*totals) if len(totals) > 1 else totals[0])
    return tuple(out)
