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

A collective that runs beside compute is not free: its kernels hold SMs (one CTA per NCCL channel)
and memory bandwidth the compute kernels would use, so the compute it overlaps runs slower. Over
the span where the two run together (``min(t, p)``), the compute stream loses the fraction
:attr:`OverlapRules.contention` of its rate; the loss is charged to the collective's category,
since the step pays it for that communication.

Pipeline sends block the sending stage (Megatron's batched isend/irecv waits), so they add to
the chunk's task time and delay the receiver. The optimizer runs after the gradient sync.

The functions are generic: per-op times may be numbers, numpy arrays or SymPy expressions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmp.analytic import kernels
from llmp.analytic.kernels import Family, Kernel
from llmp.analytic.layout import Axis
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
from llmp.spec.algebra import positive_part, vmax
from llmp.spec.spec import Spec
from llmp.stacks.host import HostRules

NON_COMPUTE = ("recompute", "optimizer")

CONTENTION = 0.189
"""Fraction of its rate the compute stream loses while a collective runs beside it: the mean
slowdown of compute kernels overlapped with NCCL collectives, measured against the same kernels
alone on A100, H100, MI250 and MI210 running GPT and Llama layers (mean 18.9%, at most 40.0%:
Lee et al., "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
Learning", arXiv 2507.03114, abstract). It is the share of SMs NCCL's CTAs take: 24 of an H100's
132 (NVIDIA developer forum, "Compute-communication overlap causes severe GEMM performance
degradation because of tail effect": an FSDP-style all-gather launched 24 blocks), DeepSeek-V3's
20 of 132 for its all-to-all (arXiv 2412.19437 §3.2.2). An operator measurement, not a step time."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlapRules:
    """Which overlaps the framework performs (defaults from ``spec.parallel``)."""

    tp_comm_overlap: bool = False
    dp_overlap: bool = True
    host: HostRules | None = None
    """The host thread that issues the kernels (:mod:`llmp.stacks.host`); None: the device never
    waits for it (the CPU device, which is its own host, or a caller pricing the device alone)."""
    host_scale: Any = 1.0
    """Multiplies every host cost: how much slower (> 1) the run's host CPU is than the one the
    costs were measured on. A number, or an array (the band's draws, a calibration's posterior)."""
    contention: float = CONTENTION
    """The compute stream's loss of rate while a collective overlaps it (:data:`CONTENTION`);
    0 prices overlap as free."""

    @classmethod
    def of(cls, spec: Spec) -> OverlapRules:
        return cls(tp_comm_overlap=spec.parallel.tp_comm_overlap, dp_overlap=spec.parallel.dp_overlap,
                   host=HostRules.of(spec))


@dataclass(frozen=True, kw_only=True, slots=True)
class PassWork:
    """Seconds of one microbatch through one chunk in one direction, by breakdown category."""

    by_category: Mapping[str, Any]
    compute: Any
    """Compute-stream seconds (families and recompute) that no collective of the pass already
    hides behind, and the device's wait for the host: the cover left for collectives outside it
    (gradient buckets, the next step's parameter gather, DualPipe's paired all-to-all)."""

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


# What a pass does with each op: run on the compute stream, prefetch, or a collective that its
# partner may hide (``Overlap.PARTNER``, or ``TP`` with ``tp_comm_overlap``) or not.
_COMPUTE, _PREFETCH, _HIDES, _EXPOSED = range(4)

Static = tuple[tuple[Any, ...], tuple[tuple[int, int, str, int, Any, int], ...]]
"""What :func:`_run` reads of a group's ops besides their times (:func:`_static`)."""


def host_seconds(op: Op, host: HostRules | None) -> Any:
    """Seconds the host thread spends issuing one call of ``op``: each kernel launch costs the
    dispatch of the pass it runs in and the launch itself (:class:`~llmp.stacks.host.HostRules`);
    a collective is one launch; a quantization kernel, issued from C++ inside the GEMM's module
    call, only its launch. Ops of a layer replayed from a CUDA graph cost the host nothing."""
    if host is None or (host.graphs and op.scope is Scope.LAYER):
        return 0.0
    if isinstance(op.work, Kernel):
        launches = kernels.cost(op.work).launches
        if op.work.family is Family.QUANTIZE:
            return launches * host.launch  # type: ignore[no-any-return]
    else:
        launches = 1
    if op.part is Part.FORWARD:
        rate = host.forward
    elif op.part is Part.BACKWARD:
        rate = host.recompute if op.recompute else host.backward
    else:
        rate = host.step
    return launches * (rate + host.launch)  # type: ignore[no-any-return]


def _static(ops: Sequence[Op], rules: OverlapRules) -> Static:
    """What :func:`_run` reads of ``ops`` besides their times: each op's count, and per op what
    it does, the op whose total it takes (the last of its name), its category, its partner's
    position (the last op of the partner's name; -1: none), its host seconds per call and where in
    the sequence the device spends its exposed time: a collective hidden behind a partner that runs
    before it is exposed from the partner on (the two run side by side), so the device's pacing
    never moves later when the partner gets faster."""
    last = {op.name: j for j, op in enumerate(ops)}
    rows = []
    for j, op in enumerate(ops):
        if op.stream is Stream.COMPUTE:
            what = _COMPUTE
        elif op.overlap is Overlap.PREFETCH:
            what = _PREFETCH
        elif op.overlap is Overlap.PARTNER or (op.overlap is Overlap.TP and rules.tp_comm_overlap):
            what = _HIDES
        else:
            what = _EXPOSED
        partner = last.get(op.partner, -1)
        at = partner if what == _HIDES and 0 <= partner < j else j
        rows.append((what, last[op.name], op.category, partner, host_seconds(op, rules.host), at))
    return tuple(op.count for op in ops), tuple(rows)


def charged(total: Any, exposed: Any, contention: float) -> Any:
    """Seconds a collective of ``total`` seconds costs the step when ``exposed`` of them show: the
    exposed part, and the rate the compute loses beside the part it hides (``contention``)."""
    return exposed + contention * (total - exposed)


def larger(a: Any, b: Any) -> Any:
    """``max(a, b)``: Python's on two floats (the numeric path's hot loop), else :func:`vmax`."""
    return (a if a > b else b) if type(a) is float and type(b) is float else vmax(a, b)


@dataclass(frozen=True, slots=True)
class Run:
    """A group of ops run ``repeat`` times: device seconds by category, the compute left free to
    hide other work, and the host thread's share (:func:`_run`)."""

    categories: dict[str, Any]
    free: Any
    host: Any
    """Seconds the host spends issuing the group."""
    device: Any
    """Seconds the device is busy with it (compute and the communication it waits for)."""
    latency: Any
    """Seconds from the host starting the group on an empty device queue to the device finishing
    it: ``max_k (host before and at op k + device from op k on)``, between ``max(host, device)``
    and ``host + device`` (the two streams overlap, and each op needs both in turn)."""


def _run(static: Static, times: Sequence[Any], repeat: Any, host_scale: Any, contention: float) -> Run:
    """Category seconds of a group of ops (one scope, one part; their :func:`_static` form and
    their times) run ``repeat`` times, the compute seconds still free to hide other work, and the
    host thread's pacing.

    Each second of compute hides at most one collective: the ZeRO-3/FSDP prefetch hides behind
    the compute that the TP and partner collectives did not already take, and the windows built
    from the pass (the data-parallel buckets behind the last backward, the next step's parameter
    gather behind the first forward, DualPipe's pair) get only what neither took. (Counting the
    same GEMM as cover twice made a faster GEMM lengthen the step: a TP collective it hid less of
    became exposed, and so did the prefetch or the gradient buckets.)

    The host issues the ops in order and the device runs each once it is issued and the previous
    one is done, so the device ends at ``max_k (H_k + D_k..)`` (max-plus). For ``repeat`` copies of
    the group in a row that is the first copy's latency plus ``(repeat - 1) max(H, D)``: the
    slower of the two streams sets the pace (exact for the max-plus recurrence, whatever the
    count)."""
    counts, rows = static
    totals = [n * t for n, t in zip(counts, times)]
    acc: dict[str, Any] = {}
    compute: Any = 0
    covering: Any = 0
    prefetch: dict[str, Any] = {}
    busy: list[Any] = [0] * len(rows)  # device seconds at each position of the sequence
    for (what, own, category, partner, _, at) in rows:
        total = totals[own]
        if what == _COMPUTE:
            acc[category] = acc.get(category, 0) + total
            compute += total
            busy[at] += total
        elif what == _PREFETCH:
            prefetch[category] = prefetch.get(category, 0) + total
        else:
            if what == _HIDES:
                left = total - (totals[partner] if partner >= 0 else 0)
                # positive_part inline for a float (max((x, 0)) keeps x unless 0 > x)
                hidden = total - ((0 if 0 > left else left) if type(left) is float else positive_part(left))
            else:
                hidden = 0
            shown = charged(total, total - hidden, contention)
            busy[at] += shown
            acc[category] = acc.get(category, 0) + shown
            covering += hidden
    host, device, lead = _host_lead(rows, counts, busy, host_scale)
    out = {k: v * repeat for k, v in acc.items()} if repeat != 1 else acc
    free, gather, shown = _prefetched(prefetch, compute - covering, repeat, contention, out)
    steady = device + shown  # device seconds of each further copy
    total = sum(out.values())
    if lead is None:  # no host work: the device alone
        return Run(categories=out, free=free, host=0.0, device=total, latency=total)
    latency = device + larger(lead, gather)
    if repeat != 1:
        latency = latency + (repeat - 1) * larger(host, steady)
    return Run(categories=out, free=free, host=host * repeat, device=total, latency=latency)


def _host_lead(rows: Sequence[tuple[int, int, str, int, Any, int]], counts: Sequence[Any], busy: Sequence[Any],
               host_scale: Any) -> tuple[Any, Any, Any]:
    """(host seconds, device seconds, lead) of one copy of a group: the lead is the max over k of
    the host's seconds up to and with op k less the device's before op k (None: no host work)."""
    host: Any = 0.0
    device: Any = 0
    lead: Any = None
    for (_, _, _, _, h, _), n, b in zip(rows, counts, busy):
        if h:
            host = host + n * h * host_scale
            ahead = host - device
            lead = ahead if lead is None else larger(lead, ahead)
        device = device + b
    return host, device, lead


def _prefetched(prefetch: Mapping[str, Any], free: Any, repeat: Any, contention: float,
                out: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Add ``repeat`` copies' prefetched work to ``out``; return the compute still free over the
    copies, the first copy's gathers (exposed, before its compute) and each further copy's
    device seconds of prefetch (exposed, and the contention of what hides).

    Each kind of prefetched work (the ZeRO-3/FSDP gathers; offloaded activations' copies, which
    TransformerEngine overlaps with the next layer the same way) hides behind the compute the
    kinds before it left; the first layer's (or the last one's) is exposed."""
    if not prefetch:
        return free * repeat, 0, 0
    left, used, shown_all, gather = free, 0, 0, 0
    for category, gathers in prefetch.items():
        exposed = positive_part(gathers - left)
        shown = charged(gathers, exposed, contention)  # each further copy's
        out[category] = out.get(category, 0) + gathers + (repeat - 1) * shown
        left, used, shown_all = left - (gathers - exposed), used + (gathers - exposed), shown_all + shown
        gather = gather + gathers
    return free * repeat - (repeat - 1) * used, gather, shown_all


def layer_floor(ops: Sequence[tuple[Op, Any]], rules: OverlapRules) -> tuple[Any, Any]:
    """Seconds that one layer's ``ops`` (one part, with their times) add to any chunk's pass at
    least, on each stream: the device's (their compute and the communication no overlap hides,
    without the ZeRO-3/FSDP prefetch, which only adds) and the host's (issuing them). A pass is
    paced by the slower stream, so a chunk's pass takes at least the larger of the two sums over
    its layers, embedding and head, and a search can bound a layout's step from one priced layer
    (``llmp.search.bound``)."""
    kept = [(op, t) for op, t in ops if op.overlap is not Overlap.PREFETCH]
    run = _run(_static([op for op, _ in kept], rules), [t for _, t in kept], 1, rules.host_scale, rules.contention)
    return run.device, run.host


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
    runs: dict[int, Run] = {}  # by the group's (interned) identity
    out = []
    for first, last, layers in chunks:
        passes: dict[Part | Task, PassWork] = {}
        for part, groups in _chunk_groups(graph, rules, first, last, layers, split):
            by_cat: dict[str, Any] = defaultdict(int)
            compute: Any = 0
            host: Any = 0.0
            device: Any = 0
            latency: Any = 0
            timed = False
            for group in groups:
                done = runs.get(id(group))
                if done is None:
                    static, indices, repeat = group
                    done = runs[id(group)] = _run(static, [times[i] for i in indices], repeat, rules.host_scale,
                                                  rules.contention)
                for k, v in done.categories.items():
                    by_cat[k] += v
                compute += done.free
                # max-plus in sequence: this group's device end is the later of the previous
                # groups' end plus its device time and the host reaching it plus its latency
                latency = larger(latency + done.device, host + done.latency) if timed else latency + done.latency
                timed = True
                host = host + done.host
                device = device + done.device
            if rules.host is not None:
                empty = rules.host.pipeline_sync or (rules.host.batch_sync and part is Part.FORWARD and (first or last))
                paced = latency if empty else larger(host, device)
                by_cat["host"] = paced - device
                # The device idles while it waits for the host: time collectives outside the pass
                # (gradient buckets, the next step's gather) can use as well as its compute.
                compute = compute + by_cat["host"]
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
    key = ("chunk", first, last, layers, split, rules.tp_comm_overlap, rules.host)
    cached = graph.memo.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    counts = layers if isinstance(layers, tuple) else (layers,)
    out = []
    for part in (Part.FORWARD, Part.BACKWARD, *((Task.B, Task.W) if split else ())):
        # A chunk may hold no layers (Megatron's embedding-only first chunk), or none of a kind:
        # then those layer ops do not run, not even a ZeRO-3 prefetch. In the order they run:
        # the embedding, the layers and the head going forward, the reverse going back, then
        # the send to the neighbouring chunk.
        layer_groups = [(graph.layer_indices(part, k), n) for k, n in enumerate(counts) if n != 0]
        ends = {Scope.FIRST: first, Scope.LAST: last}
        before, after = (Scope.FIRST, Scope.LAST) if part is Part.FORWARD else (Scope.LAST, Scope.FIRST)
        groups: list[tuple[tuple[int, ...], Any]] = [
            *([(graph.indices(before, part), 1)] if ends[before] else []), *layer_groups,
            *([(graph.indices(after, part), 1)] if ends[after] else [])]
        if (part is Part.FORWARD and not last) or (part in (Part.BACKWARD, Task.B) and not first):
            groups.append((graph.indices(Scope.BOUNDARY, part), 1))
        out.append((part, tuple(_group(graph, rules, indices, repeat) for indices, repeat in groups)))
    graph.memo[key] = result = tuple(out)
    return result


def _group(graph: OpGraph, rules: OverlapRules, indices: tuple[int, ...], repeat: Any) -> Group:
    """The (:func:`_static` form, positions, repeat) of ops at ``indices``, one object per graph."""
    key = ("group", indices, repeat, type(repeat), rules.tp_comm_overlap, rules.host)
    cached = graph.memo.get(key)
    if cached is None:
        cached = graph.memo[key] = (_static([graph.ops[i] for i in indices], rules), indices, repeat)
    return cached  # type: ignore[no-any-return]


def paired(f: PassWork, bw: PassWork, contention: float) -> PassWork:
    """A forward and a whole backward of two microbatches run as one overlapped pair (DualPipe).

    DeepSeek-V3 (arXiv 2412.19437 §3.2.1) splits both chunks into attention, all-to-all dispatch,
    MLP and all-to-all combine (and the backward's into input and weight parts) and interleaves
    the two so that "both all-to-all and PP communication can be fully hidden": the pair's expert
    (``ep``) and pipeline (``pp``) communication runs behind its computation, and only what
    exceeds that computation is exposed (all-to-all first), and what it hides slows that
    computation by ``contention`` (DeepSeek-V3 gives its all-to-all 20 of the H800's 132 SMs).
    Other exposed collectives stay exposed.
    """
    cats = merge(f.by_category, bw.by_category)
    compute = f.compute + bw.compute
    ep, pp = cats.get("ep", 0), cats.get("pp", 0)
    if "ep" in cats:
        cats["ep"] = charged(ep, positive_part(ep - compute), contention)
    if "pp" in cats:
        cats["pp"] = charged(pp, positive_part(pp - positive_part(compute - ep)), contention)
    return PassWork(by_category=cats, compute=compute)


def categories() -> tuple[str, ...]:
    """Breakdown categories in display order (``bubble`` last)."""
    return (*COMPUTE_FAMILIES, *NON_COMPUTE, *(a.value for a in Axis), "host", "bubble")


def merge(*parts: Mapping[str, Any], scale: Any = 1) -> dict[str, Any]:
    """Sum category mappings, times ``scale``."""
    out: dict[str, Any] = defaultdict(int)
    for part in parts:
        for k, v in part.items():
            out[k] += v * scale
    return dict(out)
