"""The step time as one SymPy expression of the spec's symbols (for sensitivity analysis).

The simulated timeline (:mod:`~llmp.compose.schedule`) is exact for any stage times; this closed
form replaces it by the textbook makespans, in terms of the per-chunk forward and backward
times ``F_g``, ``B_g``, ``m`` microbatches, ``pp`` ranks and ``vp`` chunks per rank. With an
even split chunks come in three kinds (the first, with the embedding; middle ones; the last, with
the head) and ``pp`` may stay a symbol; with an uneven split every chunk is its own:

* GPipe (a flow shop of identical jobs, exact for any stage times):
  ``sum F + sum B + (m - 1) (max F + max B)``;
* 1F1B: ``sum (F + B) + (m - 1) max (F + B)``, i.e. ``(m + pp - 1)(F + B)`` for uniform stages
  (Narayanan et al. 2021, eq. 1: bubble fraction ``(pp - 1) / m``): the slowest stage sets the
  pace;
* interleaved 1F1B: ``m max_r W_r + (pp - 1) max (F + B)`` with ``W_r`` a rank's work per
  microbatch, i.e. ``(m + (pp - 1) / vp) W`` for uniform stages (ibid., §2.2).

The last microbatch's backward runs down the chunks, so rank ``r`` ends its last backward
``B_0 + ... + B_{r-1}`` before rank 0; each rank then adds its exposed gradient sync, the slowest
sync starts the optimizer, the slowest update ends the step, as in :mod:`~llmp.compose.step`. So
the expression equals the simulated step time whenever stages are uniform (always for ``pp = 1``),
and for GPipe whenever rank 0 is the last to finish its sync. For uneven 1F1B and interleaved
stages it is an estimate: on 20,000 random 1F1B stage times (pp 2-8, m 1-16) it was above the
simulation in 66% of draws, equal in 33% and below in 1% (by at most 13%).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import sympy as sp

from llmp.analytic.algebra import vmax
from llmp.analytic.graph import rank_classes
from llmp.analytic.symbolic import cost
from llmp.compose.overlap import OverlapRules, chunk_work, rank_tail
from llmp.dsl.spec import Schedule, Spec


def pipeline_time(schedule: Schedule, fwd: Sequence[Any], bwd: Sequence[Any], m: Any, pp: Any, vp: Any) -> Any:
    """Makespan of the pipeline from per-chunk times.

    ``fwd``/``bwd`` list (only,) for one chunk, (first, last) for two, (first, middle, last) for
    more, a middle entry standing for every chunk between the first and the last; or one entry
    per chunk in model order (numbers ``pp`` and ``vp``; for three chunks or fewer both readings
    agree).
    """
    if len(fwd) == 1:
        return m * (fwd[0] + bwd[0])
    work = [f + b for f, b in zip(fwd, bwd)]
    explicit = len(work) > 3

    def total(xs: Sequence[Any]) -> Any:
        if explicit:
            return _sum(xs)
        return xs[0] + xs[-1] + ((pp * vp - 2) * xs[1] if len(xs) == 3 else 0)

    def most(xs: Sequence[Any]) -> Any:
        return vmax(*dict.fromkeys(xs))

    if schedule is Schedule.GPIPE:
        return total(fwd) + total(bwd) + (m - 1) * (most(fwd) + most(bwd))
    if schedule is Schedule.INTERLEAVED and vp != 1:
        if explicit:
            ranks = [_sum(work[r::pp]) for r in range(pp)]
        else:  # the first holds the first chunk, the last the last one, all others middle chunks
            ranks = [work[0] + (vp - 1) * work[1], vp * work[1], work[2] + (vp - 1) * work[1]]
        return m * most(ranks) + (pp - 1) * most(work)
    return total(work) + (m - 1) * most(work)


def _sum(xs: Sequence[Any]) -> Any:
    """``sum(xs)`` with equal terms counted once and multiplied (cheap on long SymPy lists)."""
    return sum(n * x for x, n in Counter(xs).items())


def step_time_expr(spec: Spec) -> sp.Expr:
    """Closed-form step time of ``spec`` in its symbols; substitute ``cost(spec).point`` for its value."""
    sc = cost(spec)
    graph, times = sc.graph, [c.time for c in sc.ops]
    st, sym = graph.structure, sc.spec
    rules = OverlapRules.of(spec)
    m, pp, vp = sym.microbatches, sym.parallel.pp, sym.parallel.vp
    n = st.chunks
    if st.even:  # three kinds of chunk; pp and vp may stay symbols
        flags = {1: ((True, True),), 2: ((True, False), (False, True))}.get(
            n, ((True, False), (False, False), (False, True)))
        kinds = [chunk_work(graph, times, rules, first=f, last=lst, layers=graph.chunk_kinds[0]) for f, lst in flags]
        of_chunk = [kinds[0]] + [kinds[min(1, len(kinds) - 1)]] * (n - 2) + [kinds[-1]] if n > 1 else kinds
        pipe = pipeline_time(spec.parallel.schedule, [k.fwd.total for k in kinds], [k.bwd.total for k in kinds],
                             m, pp, vp)
    else:
        kinds_of: dict[tuple[bool, bool, Any], Any] = {}
        for g in range(n):
            key = (g == 0, g == n - 1, graph.chunk_kinds[g])
            if key not in kinds_of:
                kinds_of[key] = chunk_work(graph, times, rules, first=key[0], last=key[1], layers=key[2])
        of_chunk = [kinds_of[(g == 0, g == n - 1, graph.chunk_kinds[g])] for g in range(n)]
        pipe = pipeline_time(spec.parallel.schedule, [w.fwd.total for w in of_chunk],
                             [w.bwd.total for w in of_chunk], m, st.pp, st.vp)
    syncs, updates = [], []
    for _, ranks in rank_classes(st):
        r = ranks[0]  # the earliest rank of a class ends its backward last
        if st.even:  # in kinds, pp and vp symbolic
            mid = of_chunk[1].bwd if n > 2 else None
            between = (pp - 2) if r == st.pp - 1 else r - 1  # middle chunks before rank r's own
            back = 0 if r == 0 else of_chunk[0].bwd.total + (between * mid.total if mid else 0)
            own = of_chunk[0] if r == 0 else of_chunk[-1] if r == st.pp - 1 else of_chunk[1]
            window = own.bwd.compute + ((vp - 1) * mid.compute if mid else 0)
        else:
            back = _sum([w.bwd.total for w in of_chunk[:r]])
            window = _sum([w.bwd.compute for w in of_chunk[r::st.pp]])
        tail = rank_tail(graph, times, rules, r, window)
        syncs.append(pipe - back + sum(tail.sync.values()))
        updates.append(sum(tail.update.values()))
    return sp.sympify(vmax(*syncs) + vmax(*updates))
