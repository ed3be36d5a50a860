"""When each pipeline rank finishes, at a cost that does not grow with the microbatches.

Past its warm-up, a schedule's order repeats: ``q`` more microbatches (:attr:`Entry.period
<llmp.analytic.schedules.Entry.period>`) add one *round* to each rank's order, the previous round's
tasks with their microbatches shifted by ``q``, placed before the cool-down, whose tasks shift by
``q`` too. The timeline is max-plus (:func:`~llmp.compose.timeline.simulate`: a node ends at the
later of its rank's previous node and its dependency, plus its duration), so:

  if, in a plan of ``m'`` microbatches, the last ``c`` rounds (``R``) end exactly ``delta`` later
  than the ``c`` rounds before them (``R'``), and no node of ``R`` or of the cool-down reads a node
  from before ``R'``, then every further ``c`` rounds inserted end ``delta`` later again (the
  same max-plus map takes each block of ``c`` rounds to the next, and it commutes with adding a
  constant to every time), and the cool-down, a max-plus function of the last two blocks, ends
  ``delta`` later per block: the rank ends of ``m = m' + t c q`` microbatches are those of ``m'``
  plus ``t delta``.

:func:`rank_end` finds the rounds by comparing the orders of ``m' - q``, ``m'`` and ``m' + q``
microbatches (the longest common prefix places the new round; everything after it must be the
old order shifted by ``q``; :func:`_rounds`, on the nodes as arrays: only the plan of an ``m'``
that passes is built), times the plan of ``m'`` (:data:`ROUNDS` past the fewest that show the
order repeating, twice as many each time the timeline has not settled into its period by then,
which takes longer when two ranks' works nearly tie), and extrapolates. It looks for ``m'``
only as far as that first plan stays within half of the ``m`` microbatches (past there it
could not gain), and times the whole plan instead where the order does not repeat so by then
(GPipe runs its forwards and its backwards as two loops; a plan of few microbatches), or where
the timeline has not settled before the plans tried add up to the whole one (so it never costs
more than twice the whole timeline). On arrays (the band's draws, a sweep's configurations)
each column settles on its own; the columns not settled yet go on to the next plan. The check
allows a spread of :data:`TOL` relative to the times, so the result equals the full timeline to
float rounding: the max-plus map does not expand differences, so a spread ``e`` grows to at
most ``t e``. Only a timeline that repeats with the fewest rounds that show the order repeating
in that range is extrapolated (``c``, tried in turn of 1, 2, ``pp`` and ``2 pp``: one round for
every schedule but ZB-H1, ``pp`` rounds there, its deferred W reaching ``pp - 1`` rounds back);
one that alternates between two states is timed whole. The result holds for any ``c`` the check
passes with, so which ``c`` is found changes only the cost.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.schedules import entry
from llmp.compose.schedule import Plan, nodes, plan
from llmp.compose.timeline import end_times, ends
from llmp.spec.spec import Schedule

TOL = 1e-12
"""Largest spread of ``R``'s delays over ``R'``, relative to their end times, taken as none."""
ROUNDS = 1
"""Rounds past the fewest that show the order repeating, timed first (then 2x, 4x, ... while
not settled, as long as all the plans timed add up to no more than the whole one)."""
SEARCH = 32
"""Plans tried, from the shortest valid one up, for the first whose order repeats."""


@dataclass(frozen=True, slots=True)
class Rounds:
    """A plan whose last ``c`` rounds can be repeated: which nodes they are."""

    plan: Plan
    tail: np.ndarray
    """The nodes of the last ``c`` rounds (``R``)."""
    prior: np.ndarray
    """Per node of ``tail``, the same task ``c`` rounds before (``R'``)."""
    last: tuple[int, ...]
    """Each rank's last node."""
    microbatches: int
    """Microbatches the ``c`` rounds run: ``c q``."""
    keep: tuple[int, ...]
    """``tail``, ``prior`` and ``last`` in turn: the nodes whose ends the check reads."""


@functools.lru_cache(maxsize=8)
def _labels(schedule: Schedule, pp: int, vp: int, m: int, group: int | None) -> tuple[np.ndarray, list[int]]:
    """The plan's nodes, a row each, as (kind, chunk, copy, microbatch within the copy, and the same
    for a pair's backward: chunk -1 and zeros when none): what stays equal, or shifts by ``q``,
    between plans; and each rank's first node, then their number. From the nodes alone, not the
    plan (:func:`~llmp.compose.schedule.nodes`), kept for the last few: :func:`_rounds` compares
    each plan with its neighbours ``q`` apart, then those with theirs (read only)."""
    x = nodes(schedule, pp, vp, m, group)
    chunks, copies = pp * vp, entry(schedule).copies
    copy, pair_copy = x.microbatch * copies // m, x.pair_microbatch * copies // m
    pair = x.pair_chunk >= 0
    labels = np.stack([x.kind, x.chunk % chunks, copy, x.microbatch - copy * m // copies,
                       np.where(pair, x.pair_chunk % chunks, -1), pair_copy,
                       x.pair_microbatch - pair_copy * m // copies], axis=1)
    return labels, x.starts.tolist()


def _shift(labels: np.ndarray, s: int) -> np.ndarray:
    """The labels with each microbatch (and a pair's backward's) ``s`` later."""
    out = labels.copy()
    out[:, 3] += s
    out[:, 6] += np.where(out[:, 4] >= 0, s, 0)
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool((a == b).all())


def _prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many rows ``a`` and ``b`` share from the start."""
    n = min(len(a), len(b))
    differ = np.flatnonzero((a[:n] != b[:n]).any(axis=1))
    return int(differ[0]) if differ.size else n


@functools.cache
def _rounds(schedule: Schedule, pp: int, vp: int, m: int, group: int | None, c: int) -> Rounds | None:
    """The last ``c`` rounds of the plan of ``m`` microbatches, if its order repeats there (module
    docstring), else None. The orders are compared on the nodes; only a plan that passes is built."""
    e = entry(schedule)
    q = e.period(pp, group)
    if m - q < 1 or any(e.requires(pp, vp, x, group) for x in (m - q, m, m + q)):
        return None
    (shorter, sa), (labels, sb), (longer, sn) = (_labels(schedule, pp, vp, x, group) for x in (m - q, m, m + q))
    s = q // e.copies
    shorter_s, labels_s = _shift(shorter, s), _shift(labels, s)
    tail: list[np.ndarray] = []
    prior: list[np.ndarray] = []
    n = sb[-1]
    later = np.zeros(n, dtype=bool)   # R and the cool-down
    known = np.zeros(n, dtype=bool)   # what they may read: R', R and the cool-down
    for r in range(pp):
        first, stop = sb[r], sb[r + 1]
        a, b, z = shorter[sa[r]:sa[r + 1]], labels[first:stop], longer[sn[r]:sn[r + 1]]
        ell = len(b) - len(a)
        at = _prefix(a, b)
        end = at + ell                      # the last round ends here; the cool-down follows
        if ell <= 0 or len(z) - len(b) != ell or not _same(b[end:], shorter_s[sa[r] + at:sa[r + 1]]):
            return None
        if not _same(z[:end], b[:end]) or not _same(z[end:], labels_s[first + at:stop]):
            return None
        lo, mid = end - 2 * c * ell, end - c * ell
        if lo < 0 or not _same(b[lo:mid], _shift(b[mid:end], -c * s)):
            return None
        tail.append(np.arange(first + mid, first + end))
        prior.append(np.arange(first + lo, first + mid))
        known[first + lo:stop] = True
        later[first + mid:stop] = True
    dep = nodes(schedule, pp, vp, m, group).dep
    reads = np.flatnonzero(later)  # a rank's nodes are consecutive: its previous node is i - 1
    needs = dep[reads]
    if not known[reads - 1].all() or not known[needs[needs >= 0]].all():
        return None
    tails, priors, last = np.concatenate(tail), np.concatenate(prior), [x - 1 for x in sb[1:]]
    return Rounds(plan=plan(schedule, pp, vp, m, group), tail=tails, prior=priors, last=tuple(last),
                  microbatches=c * q, keep=(*tails.tolist(), *priors.tolist(), *last))


@functools.cache
def _base(schedule: Schedule, pp: int, vp: int, group: int | None, c: int, residue: int, most: int) -> int | None:
    """The fewest microbatches, ``residue`` modulo ``c q`` and at most ``most``, after which the
    order repeats with ``2 c`` whole rounds (:func:`_rounds`); None if none of the first
    :data:`SEARCH` does."""
    step = c * entry(schedule).period(pp, group)
    m = residue or step
    for _ in range(SEARCH):
        if m > most:
            return None
        if _rounds(schedule, pp, vp, m, group, c) is not None:
            return m
        m += step
    return None


def _delay(tail: Sequence[float], prior: Sequence[float]) -> tuple[float, bool]:
    """The delay of ``R`` over ``R'`` in a timing of a plan (the ends of ``Rounds.tail`` and
    ``Rounds.prior``), and whether it is uniform."""
    delays = list(map(operator.sub, tail, prior))
    most = max(delays)
    return most, most - min(delays) <= TOL * max(map(abs, tail))


def _delays(r: Rounds, tail: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_delay` per column, from the ends of ``r.tail`` and ``r.prior`` (a row each)."""
    top = np.maximum(tail.max(axis=0), -tail.min(axis=0))  # the largest |end|, without a copy
    delay = tail - prior
    most = delay.max(axis=0)
    return most, most - delay.min(axis=0) <= TOL * top


@functools.cache
def _last(p: Plan) -> tuple[int, ...]:
    """Each rank's last node (a rank's nodes are consecutive)."""
    last = [0] * p.pp
    for i, r in enumerate(p.rank):
        last[r] = i
    return tuple(last)


def rank_end(p: Plan, durations: Sequence[Any], arrays: bool = False) -> tuple[Any, ...]:
    """When each rank of ``p`` ends its last task: ``simulate(p, durations).rank_end`` (floats, or
    arrays with ``arrays``, one timeline per column), timing only a plan a few rounds past the
    warm-up where the timeline repeats (module docstring)."""
    return timed(p, durations, arrays)[0]


def timed(p: Plan, durations: Sequence[Any], arrays: bool = False) -> tuple[tuple[Any, ...], int]:
    """:func:`rank_end`, and the most microbatches of a plan it timed (``p.microbatches`` when it
    timed the whole plan)."""
    tries = _tries(p)
    if not arrays:
        for r, most, t, rows in tries:
            kept = ends(r.plan, list(map(durations.__getitem__, rows)), r.keep)
            nt = len(r.tail)
            delay, ok = _delay(kept[:nt], kept[nt:2 * nt])
            if ok:
                return tuple(x + t * delay for x in kept[2 * nt:]), most
        return ends(p, durations, _last(p)), p.microbatches
    shape = np.broadcast_shapes(*(np.shape(x) for x in durations))
    cols = np.empty((len(durations), *shape))
    for i, x in enumerate(durations):
        cols[i] = x  # broadcast
    cols = cols.reshape(len(durations), -1)
    out = np.zeros((p.pp, cols.shape[1]))
    pending = np.ones(cols.shape[1], dtype=bool)
    for r, most, t, rows in tries:
        nt = len(r.tail)
        mine = cols.take(rows, axis=0)
        end = end_times(r.plan, mine if pending.all() else mine[:, pending], r.keep)
        delays, settled = _delays(r, end[:nt], end[nt:2 * nt])
        idx = np.flatnonzero(pending)[settled]
        out[:, idx] = end[2 * nt:][:, settled] + t * delays[settled]
        pending[idx] = False
        if not pending.any():
            return tuple(x.reshape(shape) for x in out), most
    out[:, pending] = end_times(p, cols[:, pending], _last(p))
    return tuple(x.reshape(shape) for x in out), p.microbatches


@functools.cache
def _tries(p: Plan) -> tuple[tuple[Rounds, int, int, list[int]], ...]:
    """The short plans :func:`timed` times in turn until the timeline has settled, from the plan
    alone: each with its microbatches, the blocks of rounds it extrapolates by (``t``) and, per
    duration of the short plan, its row in ``p``'s durations."""
    e = entry(p.schedule)
    q = e.period(p.pp, p.group)
    m = p.microbatches
    row = {k: i for i, k in enumerate(p.keys)}

    # The fewest rounds whose repeating shows (ZB-H1 runs a W up to pp - 1 rounds late), among
    # bases short enough to gain: the first plan timed, ROUNDS past the base, is at most half.
    def base(c: int) -> int | None:
        step = c * q
        return _base(p.schedule, p.pp, p.vp, p.group, c, m % step, m // 2 - -(-ROUNDS // c) * step)

    c = next((c for c in dict.fromkeys((1, 2, p.pp, 2 * p.pp)) if base(c) is not None), None)
    rounds, most, spent = ROUNDS, 0, 0  # the plans timed take at most as long as the whole one
    out = []
    while c is not None:
        step = c * q
        first = base(c)
        assert first is not None
        mp = first + -(-rounds // c) * step
        rounds *= 2
        if 2 * mp > m or spent + mp > m:
            break
        r = _rounds(p.schedule, p.pp, p.vp, mp, p.group, c)
        if mp <= most or r is None:
            continue
        if any(k not in row for k in r.plan.keys):  # a task the long plan lacks: time it whole
            break
        most, spent = mp, spent + mp
        out.append((r, most, (m - mp) // step, [row[k] for k in r.plan.keys]))
    return tuple(out)
