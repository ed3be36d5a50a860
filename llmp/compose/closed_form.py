"""The step time as one SymPy expression of the spec's symbols (for sensitivity analysis).

The simulated timeline (:mod:`~llmp.compose.schedule`) is exact for any stage times; this closed
form replaces it by the textbook makespans, in terms of the per-chunk forward and backward
times ``F_g``, ``B_g`` (chunks come in three kinds: the first, with the embedding; middle ones;
the last, with the head), ``m`` microbatches, ``pp`` ranks and ``vp`` chunks per rank:

* GPipe (a flow shop of identical jobs, exact for any stage times):
  ``sum F + sum B + (m - 1) (max F + max B)``;
* 1F1B: ``sum (F + B) + (m - 1) max (F + B)``, i.e. ``(m + pp - 1)(F + B)`` for uniform stages
  (Narayanan et al. 2021, eq. 1: bubble fraction ``(pp - 1) / m``);
* interleaved 1F1B: ``m max_r W_r + (pp - 1) max (F + B)`` with ``W_r`` a rank's work per
  microbatch, i.e. ``(m + (pp - 1) / vp) W`` for uniform stages (ibid., §2.2).

Rank ``r`` ends its last backward ``r`` chunk-backwards before rank 0 (uniform stages); each rank
then adds its exposed gradient sync, the slowest sync starts the optimizer, the slowest update
ends the step, as in :mod:`~llmp.compose.step`. So the expression equals the simulated step time
whenever stages are uniform (always for ``pp = 1``), and for GPipe whenever rank 0 is the last
to finish its sync; for uneven 1F1B stages it is an upper estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy as sp

from llmp.analytic.algebra import vmax
from llmp.analytic.graph import RankKind
from llmp.analytic.symbolic import cost
from llmp.compose.overlap import OverlapRules, chunk_work, rank_tail
from llmp.dsl.spec import Schedule, Spec


def pipeline_time(schedule: Schedule, fwd: Sequence[Any], bwd: Sequence[Any], m: Any, pp: Any, vp: Any) -> Any:
    """Makespan of the pipeline from per-chunk times of each chunk kind.

    ``fwd``/``bwd`` list (only,) for one chunk, (first, last) for two, (first, middle, last) for
    more; a middle entry stands for every chunk between the first and the last.
    """
    if len(fwd) == 1:
        return m * (fwd[0] + bwd[0])
    work = [f + b for f, b in zip(fwd, bwd)]

    def total(xs: Sequence[Any]) -> Any:
        return xs[0] + xs[-1] + ((pp * vp - 2) * xs[1] if len(xs) == 3 else 0)

    if schedule is Schedule.GPIPE:
        return total(fwd) + total(bwd) + (m - 1) * (vmax(*fwd) + vmax(*bwd))
    if schedule is Schedule.INTERLEAVED and vp != 1:
        # ranks: the first holds the first chunk, the last the last one, all others middle chunks
        ranks = (work[0] + (vp - 1) * work[1], vp * work[1], work[2] + (vp - 1) * work[1])
        return m * vmax(*ranks) + (pp - 1) * vmax(*work)
    return total(work) + (m - 1) * vmax(*work)


def step_time_expr(spec: Spec) -> sp.Expr:
    """Closed-form step time of ``spec`` in its symbols; substitute ``cost(spec).point`` for its value."""
    sc = cost(spec)
    graph, times = sc.graph, [c.time for c in sc.ops]
    st, sym = graph.structure, sc.spec
    rules = OverlapRules.of(spec)
    m, pp, vp = sym.microbatches, sym.parallel.pp, sym.parallel.vp
    flags = {1: ((True, True),), 2: ((True, False), (False, True))}.get(
        st.chunks, ((True, False), (False, False), (False, True)))
    kinds = [chunk_work(graph, times, rules, first=f, last=lst) for f, lst in flags]
    pipe = pipeline_time(spec.parallel.schedule, [k.fwd.total for k in kinds], [k.bwd.total for k in kinds], m, pp, vp)
    middle = kinds[1] if len(kinds) == 3 else kinds[-1]
    syncs, updates = [], []
    for kind in graph.rank_kinds():
        if kind is RankKind.ONLY:
            window, end = vp * kinds[0].bwd.compute, pipe
        else:
            own = {RankKind.FIRST: kinds[0], RankKind.MIDDLE: middle, RankKind.LAST: kinds[-1]}[kind]
            window = own.bwd.compute + (vp - 1) * middle.bwd.compute
            back = {RankKind.FIRST: 0, RankKind.MIDDLE: 1, RankKind.LAST: pp - 1}[kind]
            end = pipe - back * middle.bwd.total
        tail = rank_tail(graph, times, rules, kind, window)
        syncs.append(end + sum(tail.sync.values()))
        updates.append(sum(tail.update.values()))
    return sp.sympify(vmax(*syncs) + vmax(*updates))
