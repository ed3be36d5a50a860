"""Overlap rules: how much of each collective's time the compute stream actually waits for.

Per op (``Op.overlap``), with ``t`` the collective's time and ``p`` its partner compute op's:

* ``exposed``: all of ``t`` (blocking collectives: EP all-to-all, the embedding's TP combine,
  the cross-entropy all-reduces, ZeRO-1/2 parameter all-gather, the tied-embedding sync);
* ``tp``: all of ``t`` unless ``parallel.tp_comm_overlap`` (TransformerEngine userbuffers), which
  hides it behind its partner GEMM: ``max(0, t - p)``;
* ``partner``: always overlapped, ``max(0, t - p)``: Megatron's asynchronous backward TP
  collectives (input re-gather behind dgrad, input-gradient reduction behind wgrad) and the
  context-parallel K/V ring behind the attention core;
* ``prefetch`` (ZeRO-3/FSDP, per layer): the gather for layer ``i + 1`` runs during layer ``i``,
  so a chunk of ``L`` layers exposes the first gather (and last scatter) plus
  ``(L - 1) * max(0, c - compute_per_layer)``;
* ``bucketed`` (data-parallel gradients): buckets are reduced as the last backward produces
  them; with ``nb`` buckets of time ``t_b`` and ``W`` seconds of that backward, the exposed time
  is ``max(t_b, nb * t_b - W * (1 - 1/nb))``: at least the last bucket, and whatever of the whole
  reduction outlasts the backward after the first bucket fills. Off (``dp_overlap = false``):
  all of it.
* ``next_forward`` (the distributed optimizer's parameter all-gather with ``param_gather_overlap``):
  it runs while the next step's first microbatch goes forward through the rank's chunks, so only
  ``max(0, t - F)`` is exposed, ``F`` being that forward's compute.

Pipeline sends block the sending stage (Megatron's batched isend/irecv waits), so they add to
the chunk's task time and delay the receiver. The optimizer runs after the gradient sync.

The functions are generic: per-op times may be numbers, numpy arrays or SymPy expressions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmp.analytic.algebra import positive_part, vmax
from llmp.analytic.op import (
    COMPUTE_FAMILIES,
    Op,
    OpGraph,
    Overlap,
    Part,
    Scope,
    Stream,
    Task,
)
from llmp.dsl.spec import Spec

NON_COMPUTE = ("recompute", "optimizer")


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlapRules:
    """Which overlaps the framework performs (defaults from ``spec.parallel``)."""

    tp_comm_overlap: bool = False
    dp_overlap: bool = True

    @classmethod
    def of(cls, spec: Spec) -> OverlapRules:
        return cls(tp_comm_overlap=spec.parallel.tp_comm_overlap, dp_overlap=spec.parallel.dp_overlap)


@dataclass(frozen=True, kw_only=True, slots=True)
class PassWork:
    """Seconds of one microbatch through one chunk in one direction, by breakdown category."""

    by_category: Mapping[str, Any]
    compute: Any
    """Compute-stream seconds (families and recompute) that no collective of the pass already
    hides behind: the cover left for collectives outside it (gradient buckets, the next step's
    parameter gather, DualPipe's paired all-to-all)."""

    @property
    def total(self) -> Any:
        return sum(self.by_category.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkWork:
    """One microbatch on one chunk: its forward and backward, and the backward's two tasks when
    the schedule runs them apart."""

    fwd: PassWork
    bwd: PassWork
    """The whole backward: input and weight gradients together (tasks B and W as one)."""
    b: PassWork | None = None
    """Task B alone (input gradient), for schedules that run W apart. A collective that hides
    behind a wgrad GEMM in the whole backward (Megatron's input-gradient reduction) has no
    wgrad beside it here and is exposed."""
    w: PassWork | None = None
    """Task W alone (weight gradients, their accumulation and ZeRO-3's gradient reduce-scatter)."""

    @property
    def weight_pass(self) -> PassWork:
        """The pass that produces the chunk's weight gradients: W when apart, else the backward."""
        return self.w if self.w is not None else self.bwd


@dataclass(frozen=True, kw_only=True, slots=True)
class RankTail:
    """A pipeline rank's once-per-step work after its last backward, by category."""

    sync: Mapping[str, Any]
    """Exposed gradient synchronisation (before the optimizer)."""
    update: Mapping[str, Any]
    """Optimizer and post-update parameter gathers."""


# What a pass does with each op: run on the compute stream, prefetch, or a collective that its
# partner may hide (``Overlap.PARTNER``, or ``TP`` with ``tp_comm_overlap``) or not.
_COMPUTE, _PREFETCH, _HIDES, _EXPOSED = range(4)


def _static(ops: Sequence[Op], rules: OverlapRules) -> tuple[tuple[Any, ...], tuple[tuple[int, int, str, int], ...]]:
    """What :func:`_pass` reads of ``ops`` besides their times: each op's count, and per op what
    it does, the op whose total it takes (the last of its name) its category and its partner's
    position (the last op of the partner's name; -1: none)."""
    last = {op.name: j for j, op in enumerate(ops)}
    rows = []
    for op in ops:
        if op.stream is Stream.COMPUTE:
            what = _COMPUTE
        elif op.overlap is Overlap.PREFETCH:
            what = _PREFETCH
        elif op.overlap is Overlap.PARTNER or (op.overlap is Overlap.TP and rules.tp_comm_overlap):
            what = _HIDES
        else:
            what = _EXPOSED
        rows.append((what, last[op.name], op.category, last.get(op.partner, -1)))
    return tuple(op.count for op in ops), tuple(rows)


def _pass(ops: Sequence[tuple[Op, Any]], rules: OverlapRules, repeat: Any) -> tuple[dict[str, Any], Any]:
    """Category seconds of ``ops`` (one scope, one part) run ``repeat`` times; and the compute
    seconds still free to hide other work.

    Each second of compute hides at most one collective: the ZeRO-3/FSDP prefetch hides behind
    the compute that the TP and partner collectives did not already take, and the windows built
    from the pass (the data-parallel buckets behind the last backward, the next step's parameter
    gather behind the first forward, DualPipe's pair) get only what neither took. (Counting the
    same GEMM as cover twice made a faster GEMM lengthen the step: a TP collective it hid less of
    became exposed, and so did the prefetch or the gradient buckets.)
    """
    return _run(_static([op for op, _ in ops], rules), [t for _, t in ops], repeat)


def _run(static: tuple[tuple[Any, ...], tuple[tuple[int, int, str, int], ...]], times: Sequence[Any],
         repeat: Any) -> tuple[dict[str, Any], Any]:
    """:func:`_pass` from the ops' :func:`_static` form and their times."""
    counts, rows = static
    totals = [n * t for n, t in zip(counts, times)]
    acc: dict[str, Any] = {}
    compute: Any = 0
    covering: Any = 0
    prefetch: dict[str, Any] = {}
    for what, own, category, partner in rows:
        total = totals[own]
        if what == _COMPUTE:
            acc[category] = acc.get(category, 0) + total
            compute += total
        elif what == _PREFETCH:
            prefetch[category] = prefetch.get(category, 0) + total
        else:
            if what == _HIDES:
                left = total - (totals[partner] if partner >= 0 else 0)
                # positive_part inline for a float (max((x, 0)) keeps x unless 0 > x)
                hidden = total - ((0 if 0 > left else left) if type(left) is float else positive_part(left))
            else:
                hidden = 0
            acc[category] = acc.get(category, 0) + (total - hidden)
            covering += hidden
    out = {k: v * repeat for k, v in acc.items()}
    free = compute - covering
    if not prefetch:
        return out, free * repeat
    # Each kind of prefetched work (the ZeRO-3/FSDP gathers; offloaded activations' copies, which
    # TransformerEngine overlaps with the next layer the same way) hides behind the compute the
    # kinds before it left; the first layer's (or the last one's) is exposed.
    left, used = free, 0
    for category, gathers in prefetch.items():
        exposed = positive_part(gathers - left)
        out[category] = out.get(category, 0) + gathers + (repeat - 1) * exposed
        left, used = left - (gathers - exposed), used + (gathers - exposed)
    return out, free * repeat - (repeat - 1) * used


def layer_floor(ops: Sequence[tuple[Op, Any]], rules: OverlapRules) -> Any:
    """Seconds that one layer's ``ops`` (one part, with their times) add to any chunk's pass at
    least: their compute and the communication no overlap hides, without the ZeRO-3/FSDP prefetch
    (which only adds). A chunk of ``n`` such layers takes at least ``n`` times this, so a search
    can bound a layout's step from one priced layer (``llmp.search.bound``)."""
    cats, _ = _pass([(op, t) for op, t in ops if op.overlap is not Overlap.PREFETCH], rules, 1)
    return sum(cats.values())


def chunk_work(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, *, first: bool, last: bool,
               layers: Any, split: bool = False) -> ChunkWork:
    """Forward and backward work of one microbatch on one chunk of ``layers`` transformer layers
    (a count, or a tuple of counts per layer kind, ``OpGraph.chunk_kinds``; ``first``/``last``: it
    holds the embedding / the head; the sends to the next and previous chunk follow from that);
    with ``split`` also tasks B and W on their own."""
    return chunk_works(graph, times, rules, ((first, last, layers),), split)[0]


def chunk_works(graph: OpGraph, times: Sequence[Any], rules: OverlapRules,
                chunks: Sequence[tuple[bool, bool, Any]], split: bool = False) -> list[ChunkWork]:
    """:func:`chunk_work` of each (first, last, layers) of ``chunks``: a group of ops that several
    chunks run alike (the layers of a kind, the sends between chunks) is added up once for all."""
    runs: dict[int, tuple[dict[str, Any], Any]] = {}  # by the group's (interned) identity
    out = []
    for first, last, layers in chunks:
        passes: dict[Part | Task, PassWork] = {}
        for part, groups in _chunk_groups(graph, rules, first, last, layers, split):
            by_cat: dict[str, Any] = defaultdict(int)
            compute: Any = 0
            for group in groups:
                done = runs.get(id(group))
                if done is None:
                    static, indices, repeat = group
                    done = runs[id(group)] = _run(static, [times[i] for i in indices], repeat)
                cats, comp = done
                for k, v in cats.items():
                    by_cat[k] += v
                compute += comp
            passes[part] = PassWork(by_category=dict(by_cat), compute=compute)
        out.append(ChunkWork(fwd=passes[Part.FORWARD], bwd=passes[Part.BACKWARD], b=passes.get(Task.B),
                             w=passes.get(Task.W)))
    return out


Group = tuple[Any, tuple[int, ...], Any]
Groups = tuple[tuple[Part | Task, tuple[Group, ...]], ...]


def _chunk_groups(graph: OpGraph, rules: OverlapRules, first: bool, last: bool, layers: Any, split: bool) -> Groups:
    """Per pass of a chunk, the groups of ops it runs: their :func:`_static` form, positions and
    repeat (the layers of a kind, or 1). From the graph's structure alone, so kept in its memo; a
    group is the same object in every chunk that runs it (:func:`chunk_works` adds it up once)."""
    key = ("chunk", first, last, layers, split, rules.tp_comm_overlap)
    cached = graph.memo.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    counts = layers if isinstance(layers, tuple) else (layers,)
    out = []
    for part in (Part.FORWARD, Part.BACKWARD, *((Task.B, Task.W) if split else ())):
        # A chunk may hold no layers (Megatron's embedding-only first chunk), or none of a kind:
        # then those layer ops do not run, not even a ZeRO-3 prefetch.
        groups: list[tuple[tuple[int, ...], Any]] = [
            (graph.layer_indices(part, k), n) for k, n in enumerate(counts) if n != 0]
        if first:
            groups.append((graph.indices(Scope.FIRST, part), 1))
        if last:
            groups.append((graph.indices(Scope.LAST, part), 1))
        if (part is Part.FORWARD and not last) or (part in (Part.BACKWARD, Task.B) and not first):
            groups.append((graph.indices(Scope.BOUNDARY, part), 1))
        out.append((part, tuple(_group(graph, rules, indices, repeat) for indices, repeat in groups)))
    graph.memo[key] = result = tuple(out)
    return result


def _group(graph: OpGraph, rules: OverlapRules, indices: tuple[int, ...], repeat: Any) -> Group:
    """The (:func:`_static` form, positions, repeat) of ops at ``indices``, one object per graph."""
    key = ("group", indices, repeat, type(repeat), rules.tp_comm_overlap)
    cached = graph.memo.get(key)
    if cached is None:
        cached = graph.memo[key] = (_static([graph.ops[i] for i in indices], rules), indices, repeat)
    return cached  # type: ignore[no-any-return]


def paired(f: PassWork, bw: PassWork) -> PassWork:
    """A forward and a whole backward of two microbatches run as one overlapped pair (DualPipe).

    DeepSeek-V3 (arXiv 2412.19437 §3.2.1) splits both chunks into attention, all-to-all dispatch,
    MLP and all-to-all combine (and the backward's into input and weight parts) and interleaves
    the two so that "both all-to-all and PP communication can be fully hidden": the pair's expert
    (``ep``) and pipeline (``pp``) communication runs behind its computation, and only what
    exceeds that computation is exposed (all-to-all first). Other exposed collectives stay
    exposed; the SMs the communication kernels take from the computation are not modelled.
    """
    cats = merge(f.by_category, bw.by_category)
    compute = f.compute + bw.compute
    ep, pp = cats.get("ep", 0), cats.get("pp", 0)
    if "ep" in cats:
        cats["ep"] = positive_part(ep - compute)
    if "pp" in cats:
        cats["pp"] = positive_part(pp - positive_part(compute - ep))
    return PassWork(by_category=cats, compute=compute)


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


def tail_terms(graph: OpGraph, times: Sequence[Any], rules: OverlapRules, rank: int) -> TailTerms:
    """The once-per-step ops of pipeline rank ``rank`` sorted by the rule that exposes them."""
    sync: dict[str, Any] = defaultdict(int)
    update: dict[str, Any] = defaultdict(int)
    bucketed: list[tuple[Any, Any]] = []  # (count, seconds per bucket)
    gathers: list[tuple[str, Any]] = []
    for i, rule, category, count, partner in _tail_rules(graph, rules, rank):
        t = times[i]
        if rule == _GATHER:
            gathers.append((category, count * t))
        elif rule == _UPDATE and partner >= 0:  # runs beside its partner: only its excess shows
            update[category] += positive_part(count * t - graph.ops[partner].count * times[partner])
        elif rule == _UPDATE:
            update[category] += count * t
        elif rule == _BUCKETED:
            bucketed.append((count, t))
        else:
            sync[category] += count * t
    return TailTerms(sync=dict(sync), bucketed=tuple(bucketed), update=dict(update), next_forward=tuple(gathers))


# How a once-per-step op reaches the step (:func:`tail_terms`).
_GATHER, _UPDATE, _BUCKETED, _SYNC = range(4)


def _tail_rules(graph: OpGraph, rules: OverlapRules, rank: int) -> tuple[tuple[int, int, str, Any, int], ...]:
    """Per once-per-step op of ``rank``: (position, rule, category, count, the position of the update
    op it runs beside with ``Overlap.PARTNER``, else -1); from the ops alone, so kept in the graph's
    memo."""
    key = ("tail", rank, rules.dp_overlap)
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
            rows.append((i, rule, op.category, op.count, partner))
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
        update[category] += positive_part(t - forward)
    if terms.bucketed:
        last, total, buckets = bucket_spans(terms.bucketed)
        sync["dp"] += vmax(last, total - window * (1 - 1 / buckets))
    return RankTail(sync=dict(sync), update=dict(update))


def categories() -> tuple[str, ...]:
    """Breakdown categories in display order (``bubble`` last)."""
    return (*COMPUTE_FAMILIES, *NON_COMPUTE, "tp", "cp", "ep", "pp", "dp", "offload", "bubble")


def merge(*parts: Mapping[str, Any], scale: Any = 1) -> dict[str, Any]:
    """Sum category mappings, times ``scale``."""
    out: dict[str, Any] = defaultdict(int)
    for part in parts:
        for k, v in part.items():
            out[k] += v * scale
    return dict(out)
