"""The nodes of a pipeline schedule: its table entry's steps as nodes, their dependencies and an
order to time them in.

:mod:`~llmp.analytic.schedules` says, per rank, which F, B and W tasks run in which order. This
module turns them into nodes. Dependencies: a forward needs the previous chunk's forward of the
same microbatch (in the microbatch's model copy), a backward needs the next chunk's backward (the
last chunk's needs its own forward), a W needs its own B. DualPipe's overlapped pair is one node
running an F and a B: it starts once both inputs have arrived (a zero-length node on the rank waits
for the B's) and both outputs leave when it ends.

A node's time is one of a few per-chunk durations (:attr:`Plan.keys`: the F, B, W or whole
backward of a model chunk, or a pair), so plans depend only on ``(schedule, pp, vp,
microbatches)`` (and the interleaved schedule's microbatch group) and are cached (built from the
steps as arrays, :func:`nodes`, a few numpy calls per plan instead of several per node). Timing
them is :mod:`~llmp.compose.timeline`'s; what each rank holds in flight, which memory weighs, is
read from the plan here (:func:`in_flight`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
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
