"""A pipeline rank's once-per-step work after its last backward: the gradient synchronisation
and the optimizer's update, each op by the rule that exposes it (whole, bucketed behind the last
backward, or gathered behind the next step's first forward).

Apart from :mod:`~llmp.compose.overlap`, which prices the passes each microbatch repeats, because
these ops run once per step and reach the step through the schedule's end of each rank
(:func:`~llmp.compose.step.compose`, the closed form and the search's bounds read them alike).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmp.analytic.op import OpGraph, Overlap, Part, Scope
from llmp.compose.overlap import OverlapRules, charged, host_seconds, larger
from llmp.spec.algebra import positive_part, vmax


@dataclass(frozen=True, kw_only=True, slots=True)
class RankTail:
    """A pipeline rank's once-per-step work after its last backward, by category."""

    sync: Mapping[str, Any]
    """Exposed gradient synchronisation (before the optimizer)."""
    update: Mapping[str, Any]
    """Optimizer and post-update parameter gathers."""



@dataclass(frozen=True, kw_only=True, slots=True)
class TailTerms:
    """A pipeline rank's once-per-step ops, by how their time reaches the step (:func:`rank_tail`)."""

    sync: Mapping[str, Any]
    """Gradient synchronisation exposed whole, by category."""
    bucketed: tuple[tuple[Any, Any], ...]
    """Bucketed gradient reductions (with ``dp_overlap``): (buckets, seconds per bucket) of each."""
    update: Mapping[str, Any]
    """Optimizer and parameter gathers after the sync, by category."""
    next_forward: tuple[tuple[str, Any], ...]
    """Parameter gathers hidden behind the next step's first forward: (category, seconds)."""
    update_host: Any = 0
    """Seconds the device waits for the host to issue the update: it starts after the step's
    synchronisation (the gradient-norm or found-inf ``.item()``), on an empty queue."""


def tail_terms(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, rank: int) -> TailTerms:
    """The once-per-step ops of pipeline rank ``rank`` sorted by the rule that exposes them."""
    sync: dict[str, Any] = defaultdict(int)
    update: dict[str, Any] = defaultdict(int)
    bucketed: list[tuple[Any, Any]] = []  # (count, seconds per bucket)
    gathers: list[tuple[str, Any]] = []
    host: Any = 0.0
    device: Any = 0
    lead: Any = None  # the update's max-plus lead of the host over the device (see _run)
    for i, rule, category, count, h, partner in _tail_rules(graph, rules, rank):
        t = times[i]
        if rule == _GATHER:
            gathers.append((category, count * t))
        elif rule == _UPDATE and partner >= 0:  # runs beside its partner: only its excess shows
            update[category] += positive_part(count * t - graph.ops[partner].count * times[partner])
        elif rule == _UPDATE:
            update[category] += count * t
            if h:
                host = host + count * h * rules.host_scale
                lead = host - device if lead is None else larger(lead, host - device)
            device = device + count * t
        elif rule == _BUCKETED:
            bucketed.append((count, t))
        else:
            sync[category] += count * t
    waits = 0 if lead is None else positive_part(lead)
    return TailTerms(sync=dict(sync), bucketed=tuple(bucketed), update=dict(update), next_forward=tuple(gathers),
                     update_host=waits)


# How a once-per-step op reaches the step (:func:`tail_terms`).
_GATHER, _UPDATE, _BUCKETED, _SYNC = range(4)


def _tail_rules(graph: OpGraph, rules: OverlapRules,
                rank: int) -> tuple[tuple[int, int, str, Any, Any, int], ...]:
    """Per once-per-step op of ``rank``: (position, rule, category, count, host seconds per call,
    the position of the update op it runs beside with ``Overlap.PARTNER``, else -1); from the ops
    alone, so kept in the graph's memo."""
    key = ("tail", rank, rules.dp_overlap, rules.host)
    cached = graph.memo.get(key)
    if cached is None:
        rows = []
        mine = graph.indices(Scope.RANK, rank)
        by_name = {graph.ops[i].name: i for i in mine}
        for i in mine:
            op = graph.ops[i]
            if op.part is Part.UPDATE and op.overlap is Overlap.NEXT_FORWARD:
                rule = _GATHER
            elif op.part is Part.UPDATE:
                rule = _UPDATE
            elif op.overlap is Overlap.BUCKETED and rules.dp_overlap:
                rule = _BUCKETED
            else:
                rule = _SYNC
            partner = by_name.get(op.partner, -1) if op.overlap is Overlap.PARTNER and rule == _UPDATE else -1
            rows.append((i, rule, op.category, op.count, host_seconds(op, rules.host), partner))
        cached = graph.memo[key] = tuple(rows)
    return cached  # type: ignore[no-any-return]


def bucket_spans(bucketed: Sequence[tuple[Any, Any]]) -> tuple[Any, Any, Any]:
    """(last bucket's seconds, all buckets' seconds, buckets) of bucketed reductions."""
    last = vmax(*(t for _, t in bucketed)) if len(bucketed) > 1 else bucketed[0][1]
    return last, sum(n * t for n, t in bucketed), sum(n for n, _ in bucketed)


def rank_tail(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, rank: int, window: Any,
              forward: Any = 0) -> RankTail:
    """Gradient sync and update of pipeline rank ``rank``; ``window`` is the compute time of its
    last microbatch's backward, behind which bucketed reductions hide; ``forward`` that of one
    microbatch's forward, behind which ``next_forward`` gathers hide."""
    terms = tail_terms(graph, times, rules, rank)
    sync: dict[str, Any] = defaultdict(int, terms.sync)
    update: dict[str, Any] = defaultdict(int, terms.update)
    for category, t in terms.next_forward:
        update[category] += charged(t, positive_part(t - forward), rules.contention)
    if rules.host is not None:
        update["host"] += terms.update_host
    if terms.bucketed:
        last, total, buckets = bucket_spans(terms.bucketed)
        sync["dp"] += charged(total, vmax(last, total - window * (1 - 1 / buckets)), rules.contention)
    return RankTail(sync=dict(sync), update=dict(update))
