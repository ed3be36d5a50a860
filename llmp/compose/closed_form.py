"""The step time as one SymPy expression of the spec's symbols (for sensitivity analysis).

The simulated timeline (:mod:`~llmp.compose.timeline`) is exact for any stage times; this closed
form replaces it by each schedule's makespan formula (its table entry's ``makespan``,
:mod:`~llmp.analytic.schedules`), in terms of the per-chunk task times (``F``, ``B``, ``W``, the
whole backward, DualPipe's pair), ``m`` microbatches, ``pp`` ranks and ``vp`` chunks per rank.
With an even split chunks come in three kinds (the first, with the embedding; middle ones; the
last, with the head) and ``pp`` may stay a symbol; with an uneven split every chunk is its own:

* GPipe (a flow shop of identical jobs, exact for any stage times):
  ``sum F + sum B + (m - 1) (max F + max B)``;
* 1F1B: ``sum (F + B) + (m - 1) max (F + B)``, i.e. ``(m + pp - 1)(F + B)`` for uniform stages
  (Narayanan et al. 2021, eq. 1: bubble fraction ``(pp - 1) / m``): the slowest stage sets the
  pace;
* interleaved 1F1B: ``m max_r W_r + (pp - 1) max (F + B)`` with ``W_r`` a rank's work per
  microbatch, i.e. ``(m + (pp - 1) / vp) W`` for uniform stages (ibid., §2.2);
* ZB-H1: ``m (F + B + W) + (pp - 1)(F + B - W)`` for uniform stages (Qi et al. 2024 §2.1);
* ZB-V: a rank's two chunks ``m`` times plus ``(pp - 1) max(B, 2 (B - W))``;
* DualPipe: ``m / 2`` times a rank's two stages plus ``(pp / 2 - 1)(F&B + B - 3 W)``
  (DeepSeek-V3 Table 2); each entry says where its formula is exact.

Under 1F1B-like drains the last microbatch's backward runs down the chunks, so rank ``r`` ends
its last backward ``B_0 + ... + B_{r-1}`` before rank 0; under the zero-bubble schedules and
DualPipe the ranks end together. Each rank then adds its exposed gradient sync (hidden behind its
last weight-gradient work), the slowest sync starts the optimizer, the slowest update ends the
step, as in :mod:`~llmp.compose.step`. So the expression equals the simulated step time whenever
stages are uniform (always for ``pp = 1``) and the entry's formula is exact, and for GPipe
whenever rank 0 is the last to finish its sync. For uneven 1F1B and interleaved stages it is an
estimate: on 20,000 random 1F1B stage times (pp 2-8, m 1-16) it was above the simulation in 66%
of draws, equal in 33% and below in 1% (by at most 13%).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import sympy as sp

from llmp.analytic.op import OpGraph, rank_classes
from llmp.analytic.schedule_steps import Times
from llmp.analytic.schedules import Shape, entry
from llmp.analytic.symbolic import cost
from llmp.compose.overlap import ChunkWork, OverlapRules, chunk_work, paired
from llmp.compose.prediction import OpRow
from llmp.compose.tail import rank_tail
from llmp.spec.algebra import vmax
from llmp.spec.spec import Schedule, Spec


def pipeline_time(schedule: Schedule, fwd: Sequence[Any], bwd: Sequence[Any], m: Any, pp: Any, vp: Any,
                  weight: Sequence[Any] | None = None) -> Any:
    """Makespan of the pipeline from per-chunk times.

    ``fwd``/``bwd`` list (only,) for one chunk, (first, last) for two, (first, middle, last) for
    more, a middle entry standing for every chunk between the first and the last; or one entry
    per chunk in model order (numbers ``pp`` and ``vp``; for three chunks or fewer both readings
    agree). ``bwd`` is the whole backward; ``weight`` its weight-gradient part, which the
    schedules that run W apart need (their B is then ``bwd - weight``). A DualPipe pair is taken
    to overlap nothing here.
    """
    w = tuple(weight) if weight is not None else (0,) * len(bwd)
    b = tuple(x - y for x, y in zip(bwd, w))
    mirror = tuple(reversed(bwd)) if len(bwd) > 3 else (bwd[-1], *bwd[1:-1], bwd[0])
    return makespan(schedule, Times(f=tuple(fwd), b=b, w=w, bw=tuple(bwd),
                                    fb=tuple(f + x for f, x in zip(fwd, mirror)),
                                    m=m, pp=pp, vp=vp, explicit=len(fwd) > 3))


def makespan(schedule: Schedule, t: Times) -> Any:
    """The schedule's closed-form makespan (one chunk: its tasks ``m`` times in a row)."""
    e = entry(schedule)
    if len(t.f) == 1:
        return t.m * (t.f[0] + (t.b[0] + t.w[0] if e.splits_w else t.bw[0]))
    return e.makespan(t)


def _times(works: Sequence[ChunkWork], m: Any, pp: Any, vp: Any, contention: float) -> Times:
    """The task times of ``works`` (grouped chunks, or one per chunk in model order)."""
    mirror = list(reversed(works)) if len(works) > 3 else [works[-1], *works[1:-1], works[0]]
    return Times(f=tuple(w.fwd.total for w in works),
                 b=tuple((w.b if w.b is not None else w.bwd).total for w in works),
                 w=tuple((w.w.total if w.w is not None else 0) for w in works),
                 bw=tuple(w.bwd.total for w in works),
                 fb=tuple(paired(w.fwd, x.bwd, contention).total for w, x in zip(works, mirror)),
                 m=m, pp=pp, vp=vp, explicit=len(works) > 3)


def step_time_expr(spec: Spec, corrected: Sequence[OpRow] | None = None) -> sp.Expr:
    """Closed-form step time of ``spec`` in its symbols; substitute ``cost(spec).point`` for its value.

    ``corrected``: ``Prediction.ops`` of ``spec``, whose residual factors multiply each op's time,
    held at their values at the point, so the expression there is ``llmp predict``'s step time.
    None: the bare roofline composition.
    """
    sc = cost(spec)
    graph, times = sc.graph, [c.time for c in sc.ops]
    if corrected is not None:
        times = [t if f == 1.0 else t * sp.Float(f) for t, f in zip(times, _factors(graph, corrected))]
    st, sym = graph.structure, sc.spec
    rules = OverlapRules.of(spec)
    e = entry(spec.parallel.schedule)
    m, pp, vp = sym.microbatches, sym.parallel.pp, sym.parallel.vp
    n = st.chunks
    if st.even:  # three kinds of chunk; pp and vp may stay symbols
        flags = {1: ((True, True),), 2: ((True, False), (False, True))}.get(
            n, ((True, False), (False, False), (False, True)))
        kinds = [chunk_work(graph, times, rules, first=f, last=lst, layers=graph.chunk_kinds[0], split=e.splits_w)
                 for f, lst in flags]
        of_chunk = [kinds[0]] + [kinds[min(1, len(kinds) - 1)]] * (n - 2) + [kinds[-1]] if n > 1 else kinds
        pipe = makespan(spec.parallel.schedule, _times(kinds, m, pp, vp, rules.contention))
    else:
        kinds_of: dict[tuple[bool, bool, Any], Any] = {}
        for g in range(n):
            key = (g == 0, g == n - 1, graph.chunk_kinds[g])
            if key not in kinds_of:
                kinds_of[key] = chunk_work(graph, times, rules, first=key[0], last=key[1], layers=key[2],
                                           split=e.splits_w)
        of_chunk = [kinds_of[(g == 0, g == n - 1, graph.chunk_kinds[g])] for g in range(n)]
        pipe = makespan(spec.parallel.schedule, _times(of_chunk, m, st.pp, st.vp, rules.contention))
    syncs, updates = [], []
    for _, ranks in rank_classes(st):
        r = ranks[0]  # the earliest rank of a class ends its backward last
        if st.even and e.shape is Shape.LOOP:  # in kinds, pp and vp symbolic
            mid = of_chunk[1] if n > 2 else None
            between = (pp - 2) if r == st.pp - 1 else r - 1  # middle chunks before rank r's own
            back = 0 if r == 0 else of_chunk[0].bwd.total + (between * mid.bwd.total if mid else 0)
            own = of_chunk[0] if r == 0 else of_chunk[-1] if r == st.pp - 1 else of_chunk[1]
            window = own.weight_pass.compute + ((vp - 1) * mid.weight_pass.compute if mid else 0)
        else:
            back = _sum([w.bwd.total for w in of_chunk[:r]])
            window = _sum([of_chunk[g].weight_pass.compute for g in st.placement[r]])
        tail = rank_tail(graph, times, rules, r, window)
        syncs.append(pipe - (back if e.staggered else 0) + sum(tail.sync.values()))
        updates.append(sum(tail.update.values()))
    return sp.sympify(vmax(*syncs) + vmax(*updates))


def _factors(graph: OpGraph, rows: Sequence[OpRow]) -> list[float]:
    """Each op's residual factor from a prediction's rows, matched by name, scope and rank kind
    (the graph on symbols may hold ops the numbers leave out, such as a middle rank's when
    ``pp = 2``: they run nowhere, factor 1)."""
    by_key: dict[tuple[str, str, str | None], list[float]] = defaultdict(list)
    for r in rows:
        by_key[(r.name, r.scope, r.rank_kind)].append(r.factor)
    taken: Counter[tuple[str, str, str | None]] = Counter()
    out = []
    for op in graph.ops:
        key = (op.name, op.scope.value, op.rank_kind.value if op.rank_kind else None)
        found = by_key.get(key, ())
        out.append(found[taken[key]] if taken[key] < len(found) else 1.0)
        taken[key] += 1
    return out


def _sum(xs: Sequence[Any]) -> Any:
    """``sum(xs)`` with equal terms counted once and multiplied (cheap on long SymPy lists)."""
    return sum(n * x for x, n in Counter(xs).items())
