"""Pipeline schedules as data: one table entry per schedule.

Pipeline work is tasks per model chunk and microbatch (:class:`~llmp.analytic.op.Task`): ``F``
(forward), ``B`` (input gradient) and ``W`` (weight gradient). A schedule is one :class:`Entry`:

* ``shape``: which pipeline rank holds each chunk: Megatron's loop (chunk ``g`` on rank
  ``g % pp``) or a V (rank ``r`` holds chunks ``r`` and ``2 pp - 1 - r``); ``copies``: DualPipe
  keeps two copies of the model, one per direction, so placement chunk ``c`` runs model chunk
  ``c % (pp vp)`` and the microbatches split between the copies (first half, second half);
* ``requires``: what it needs of ``pp``, ``vp`` and the microbatches (and of Megatron's microbatch
  group, for the interleaved schedule), said as the error;
* ``orders``: per pipeline rank, the :class:`Step` s it runs in order. A step is an F, a B (with
  its W, as one backward, unless the schedule runs the W apart later), a W, or (DualPipe) an F
  overlapped with the B that follows it;
* ``makespan``: its closed form over per-chunk task times (:class:`Times`), for
  :mod:`~llmp.compose.closed_form`.

Everything downstream reads the entry: the event timeline (:mod:`~llmp.compose.schedule`),
memory (activations in flight, the chunks and copies a rank holds), the Perfetto trace (W tasks
as their own slices) and the closed forms. Adding a schedule is adding an entry here and its
name to :class:`~llmp.spec.spec.Schedule`.

The orders follow the implementations cited in each entry; when they leave a choice open (which
deferred W to run), the oldest waiting W runs first, as both zero-bubble runtimes do (a FIFO
queue: deepseek-ai/DualPipe ``WeightGradStore.pop``, sail-sg ``WeightGradStore``).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from llmp.analytic.op import Task
from llmp.spec.algebra import vmax
from llmp.spec.spec import Schedule


class Step(NamedTuple):
    """One unit of work of a pipeline rank."""

    task: Task
    chunk: int
    """Placement chunk (``copies * pp * vp`` of them; model chunk ``chunk % (pp * vp)``)."""
    microbatch: int
    with_w: bool = False
    """A B that computes the weight gradients too (one backward, as GPipe and 1F1B run it)."""
    paired: bool = False
    """An F overlapped with the B that follows it (DualPipe's forward-backward chunk pair)."""


def _f(c: int, j: int, paired: bool = False) -> Step:
    return Step(Task.F, c, j, paired=paired)


def _bw(c: int, j: int) -> Step:
    return Step(Task.B, c, j, with_w=True)


def _b(c: int, j: int) -> Step:
    return Step(Task.B, c, j)


def _w(c: int, j: int) -> Step:
    return Step(Task.W, c, j)


class Shape(StrEnum):
    """Where the placement chunks live."""

    LOOP = "loop"
    """Chunk ``c`` on rank ``c % pp`` (Megatron's interleaving; a stage per rank for vp = 1)."""
    V = "v"
    """``2 pp`` chunks in a V: chunk ``c`` on rank ``c`` for ``c < pp``, else ``2 pp - 1 - c``."""


Orders = list[list[Step]]


@dataclass(frozen=True, slots=True)
class Times:
    """Per-chunk task times for the closed forms, as ``closed_form`` groups the chunks: one entry
    for one chunk; (first, last) for two; (first, middle, last) for more, a middle entry standing
    for every chunk between the first and the last; or one entry per chunk in model order
    (``explicit``). ``b`` is the input gradient alone and ``w`` the weight gradient (for
    schedules that run W apart), ``bw`` the whole backward (for those that do not)."""

    f: tuple[Any, ...]
    b: tuple[Any, ...]
    w: tuple[Any, ...]
    bw: tuple[Any, ...]
    fb: tuple[Any, ...]
    """A DualPipe pair: the chunk's forward overlapped with the whole backward of its mirror
    chunk (the other stage its rank holds)."""
    m: Any
    pp: Any
    vp: Any
    explicit: bool

    def total(self, xs: Sequence[Any]) -> Any:
        """The sum over every chunk of the model."""
        if self.explicit:
            return _sum(xs)
        return xs[0] + xs[-1] + ((self.pp * self.vp - 2) * xs[1] if len(xs) == 3 else 0)

    @staticmethod
    def most(xs: Sequence[Any]) -> Any:
        """The largest over the chunks."""
        return vmax(*dict.fromkeys(xs))

    def ranks(self, xs: Sequence[Any]) -> list[Any]:
        """Per rank (under Megatron's loop), the sum over its chunks; for grouped chunks the first
        rank, the middle ones and the last."""
        if self.explicit:
            return [_sum(xs[r::self.pp]) for r in range(self.pp)]
        return [xs[0] + (self.vp - 1) * xs[1], self.vp * xs[1], xs[-1] + (self.vp - 1) * xs[1]]

    def mirrored(self, xs: Sequence[Any]) -> list[Any]:
        """Per rank of a V or of DualPipe's two copies (chunks ``g`` and ``pp vp - 1 - g``
        together), the sum over its two chunks; grouped: the rank holding the first and last
        chunk, and the ranks holding two middle ones."""
        if self.explicit:
            n = len(xs)
            return [xs[g] + xs[n - 1 - g] for g in range(n // 2)]
        return [xs[0] + xs[-1], *((2 * xs[1],) if len(xs) == 3 else ())]


def _sum(xs: Sequence[Any]) -> Any:
    """``sum(xs)`` with equal terms counted once and multiplied (cheap on long SymPy lists)."""
    counts: dict[Any, int] = {}
    for x in xs:
        counts[x] = counts.get(x, 0) + 1
    return sum(n * x for x, n in counts.items())


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One schedule."""

    schedule: Schedule
    title: str
    source: str
    """Where its order comes from (paper and code)."""
    orders: Callable[[int, int, int, int | None], Orders]
    """``(pp, vp, microbatches, group)`` -> per rank, its steps in order. ``group`` is Megatron's
    microbatch group of the interleaved schedule (``parallel.microbatch_group``; None: pp), which
    only that entry reads."""
    requires: Callable[[int, int, int | None, int | None], str | None]
    """``(pp, vp, microbatches, group)`` -> the unmet precondition as an error message, or None
    (the microbatches may be unknown yet: None)."""
    makespan: Callable[[Times], Any]
    """Closed-form time from the first task's start to the last task's end."""
    shape: Shape = Shape.LOOP
    copies: int = 1
    splits_w: bool = False
    """Some B runs without its W, which runs later as a task of its own."""
    staggered: bool = True
    """The ranks end one chunk backward apart down the pipeline (rank ``r`` that many before rank
    0, as 1F1B drains); else about together (the held-back weight gradients fill the drain)."""
    hint: str = ""
    """How to meet ``requires``."""
    period: Callable[[int, int | None], int] = lambda pp, group: 1
    """``(pp, group)`` -> microbatches per round of the steady state: the order repeats, shifted
    by this many microbatches, once per round (:mod:`~llmp.compose.periodic` checks it)."""

    def rank_of(self, c: int, pp: int, vp: int) -> int:
        """The pipeline rank of placement chunk ``c``."""
        if self.shape is Shape.V:
            return c if c < pp else 2 * pp - 1 - c
        return c % pp

    def chunk_ranks(self, pp: int, vp: int) -> tuple[int, ...]:
        """The rank holding each placement chunk."""
        return tuple(self.rank_of(c, pp, vp) for c in range(self.copies * pp * vp))

    def placement(self, pp: int, vp: int) -> tuple[tuple[int, ...], ...]:
        """Per rank, the model chunks whose parameters it holds (a chunk on two ranks is copied)."""
        held: list[list[int]] = [[] for _ in range(pp)]
        for c, r in enumerate(self.chunk_ranks(pp, vp)):
            held[r].append(c % (pp * vp))
        return tuple(tuple(sorted(h)) for h in held)


# --- GPipe, 1F1B, interleaved 1F1B --------------------------------------------------------------


def _gpipe(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    return [[_f(r, j) for j in range(m)] + [_bw(r, j) for j in range(m)] for r in range(pp)]


def _one_f_one_b(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    out = []
    for r in range(pp):
        warm = min(pp - r - 1, m)
        seq = [_f(r, j) for j in range(warm)]
        for i in range(m - warm):
            seq += [_f(r, warm + i), _bw(r, i)]
        seq += [_bw(r, j) for j in range(m - warm, m)]
        out.append(seq)
    return out


def _interleaved_table(m: int, vp: int, group: int) -> list[tuple[int, int]]:
    """(local chunk, microbatch) of each virtual microbatch: each group of ``group`` microbatches
    runs on chunk 0, then chunk 1, ...; the last group takes what remains (NVIDIA/Megatron-LM@00611e6:
    megatron/core/pipeline_parallel/schedules.py, get_schedule_table)."""
    table = []
    for start in range(0, m, group):
        stop = min(m, start + group)
        table += [(k, j) for k in range(vp) for j in range(start, stop)]
    return table


def _interleaved(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    # Megatron-Core forward_backward_pipelining_with_interleaving: warm-up 2 (pp - r - 1) + (vp - 1)
    # N virtual microbatches (N = group, default pp), then one forward and one backward at a time.
    # The backward of virtual microbatch i runs chunk vp - 1 - k of table[i]; each chunk's
    # backwards take its microbatches in the order its forwards ran them.
    if vp == 1:
        return _one_f_one_b(pp, vp, m)
    group = pp if group is None else group
    table = _interleaved_table(m, vp, group)
    total = len(table)
    out = []
    for r in range(pp):
        fwd = [_f(k * pp + r, j) for k, j in table]
        bwd = [_bw((vp - 1 - k) * pp + r, j) for k, j in table]
        warm = min(2 * (pp - r - 1) + (vp - 1) * group, total)
        seq = fwd[:warm]
        for i in range(total - warm):
            seq += [fwd[warm + i], bwd[i]]
        seq += bwd[total - warm:]
        out.append(seq)
    return out


def _flat(t: Times) -> list[Any]:
    return [f + bw for f, bw in zip(t.f, t.bw)]


def _gpipe_makespan(t: Times) -> Any:
    # A flow shop of identical jobs: exact for any stage times.
    return t.total(t.f) + t.total(t.bw) + (t.m - 1) * (t.most(t.f) + t.most(t.bw))


def _one_f_one_b_makespan(t: Times) -> Any:
    # (m + pp - 1)(F + B) for uniform stages (Narayanan et al. 2021, eq. 1); the slowest stage
    # sets the pace.
    work = _flat(t)
    return t.total(work) + (t.m - 1) * t.most(work)


def _interleaved_makespan(t: Times) -> Any:
    # (m + (pp - 1) / vp) W for uniform stages, W a rank's work per microbatch (ibid., §2.2).
    if t.vp == 1:
        return _one_f_one_b_makespan(t)
    work = _flat(t)
    return t.m * t.most(t.ranks(work)) + (t.pp - 1) * t.most(work)


def _loop_only(name: str) -> Callable[[int, int, int | None, int | None], str | None]:
    def requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
        if vp > 1:
            return f"vp({vp}) > 1 needs schedule = interleaved or zb_v (got {name})"
        return None
    return requires


def _interleaved_requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
    # Megatron-Core's rules (NVIDIA/Megatron-LM@00611e6:megatron/core/pipeline_parallel/
    # schedules.py, forward_backward_pipelining_with_interleaving): each chunk runs ``group``
    # microbatches in a row (--microbatch-group-size-per-virtual-pipeline-stage, default pp), with
    # pp <= group <= microbatches; a last, shorter group must still hold at least pp microbatches
    # ("Otherwise, it introduces dependency bubbles"). With the default group this is the familiar
    # "microbatches divisible by pp".
    if vp == 1:
        return "schedule = interleaved needs vp > 1 (model chunks per pipeline rank)"
    if pp == 1:
        return "schedule = interleaved needs pp > 1"
    if m is None:
        return None
    n = pp if group is None else group
    if not pp <= n <= m:
        return f"the interleaved schedule needs pp({pp}) <= microbatch_group({n}) <= microbatches({m})"
    if 0 < m % n < pp:
        return (f"the interleaved schedule's last group of microbatches({m}) % microbatch_group({n}) = {m % n} "
                f"is shorter than pp({pp})")
    return None


# --- Zero bubble: ZB-H1 and ZB-V ----------------------------------------------------------------


def _zb_h1(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    # Qi et al. 2024, "Zero Bubble Pipeline Parallelism" (arXiv 2401.10241), §2.1 and Fig. 3
    # (top): 1F1B's warm-up and steady state, with rank r's first r W passes held back so that
    # every rank keeps pp microbatches in flight; the held-back Ws fill the cool-down. The order is
    # microsoft/Megatron-DeepSpeed megatron/core/pipeline_parallel/deepspeed_zbh1_schedule.py
    # (``ZeroBubbleH1Pipeline.steps``, exact semantics): warm-up F, r x (F, B), (F, B, W) while
    # forwards remain, then (B, W), then the waiting Ws.
    return [_zb_h1_rank(r, pp, m) for r in range(pp)]


def _zb_h1_rank(r: int, pp: int, m: int) -> list[Step]:
    """Rank ``r``'s order of passes under ZB-H1."""
    warm = min(pp - r - 1, m)
    seq = [_f(r, j) for j in range(warm)]
    waiting: deque[int] = deque()

    def backward(j: int, hold: bool) -> None:
        seq.append(_b(r, j))
        waiting.append(j)
        if not hold:
            seq.append(_w(r, waiting.popleft()))

    for i in range(m - warm):
        seq.append(_f(r, warm + i))
        backward(i, hold=i < r)
    for j in range(m - warm, m):
        backward(j, hold=False)
    seq += [_w(r, j) for j in waiting]
    return seq


def _zb_h1_makespan(t: Times) -> Any:
    # Uniform stages: m (F + B + W) + (pp - 1)(F + B - W) (Qi et al. 2024 §2.1: 1F1B's bubble,
    # (pp - 1)(F + B + W), less two W per stage), while a held-back W fits beside a forward and a
    # backward (W <= min(F, B)); beyond that the simulated order loses (pp - 1) max(F, B). Exact
    # for uniform stages with m >= pp; grouped stages: the slowest chunk paces the m microbatches
    # and every other chunk adds its fill-and-drain share.
    work = [f + b + w for f, b, w in zip(t.f, t.b, t.w)]
    lost = [vmax(f + b - w, f, b) for f, b, w in zip(t.f, t.b, t.w)]
    return t.m * t.most(work) + t.total(lost) - t.most(lost)


def _zb_v(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    # Qi et al. 2024 §6 (ZB-V, Fig. 8): two chunks per rank in a V, rank r holding chunks r and
    # 2 pp - 1 - r, so the first rank runs the first forward and the last backward. The order is
    # sail-sg/zero-bubble-pipeline-parallelism megatron/core/pipeline_parallel/handcrafted_zb_v
    # (``get_zb_v_schedule``): planned for max(2 pp - 1, m) microbatches, the ones beyond m
    # dropped.
    n = max(2 * pp - 1, m)
    out = []
    for r in range(pp):
        c0, c1 = r, 2 * pp - 1 - r
        seq: list[Step] = []
        f0 = f1 = b0 = b1 = 0
        for _ in range(2 * (pp - r) - 1):
            seq.append(_f(c0, f0))
            f0 += 1
        for _ in range(r):
            seq += [_f(c1, f1), _f(c0, f0)]
            f1, f0 = f1 + 1, f0 + 1
        for _ in range(pp - r):
            seq += [_f(c1, f1), _b(c1, b1), _w(c1, b1)]
            f1, b1 = f1 + 1, b1 + 1
        while f1 < f0 or f0 < n:
            if f0 < n:
                seq.append(_f(c0, f0))
                f0 += 1
            seq += [_b(c0, b0), _w(c0, b0), _f(c1, f1), _b(c1, b1), _w(c1, b1)]
            b0, f1, b1 = b0 + 1, f1 + 1, b1 + 1
        w0, w1 = b0, b1
        for _ in range(r):
            seq += [_b(c0, b0), _b(c1, b1)]
            b0, b1 = b0 + 1, b1 + 1
        for _ in range(pp - r):
            seq += [_b(c0, b0), _w(c0, w0)]
            b0, w0 = b0 + 1, w0 + 1
        seq += [_w(c1, j) for j in range(w1, b1)] + [_w(c0, j) for j in range(w0, b0)]
        out.append([s for s in seq if s.microbatch < m])
    return out


def _zb_v_makespan(t: Times) -> Any:
    # Qi et al. 2024 §6: with T_F = T_B = T_W no rank idles between its first and its last task;
    # the ranks still start one chunk forward apart down the V's first arm. For uniform chunks
    # with F <= B and W <= B the simulated order of ``_zb_v`` loses (pp - 1) max(B, 2 (B - W)) to
    # a rank's work (fitted on the timeline; exact in that range, an estimate elsewhere).
    work = [f + b + w for f, b, w in zip(t.f, t.b, t.w)]
    lost = [vmax(b, 2 * (b - w)) for b, w in zip(t.b, t.w)]
    return t.m * t.most(t.mirrored(work)) + (t.pp - 1) * t.most(lost)


def _zb_v_requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
    if vp != 2:
        return f"schedule = zb_v needs vp = 2 (two model chunks per pipeline rank, in a V), got vp({vp})"
    return None


# --- DualPipe -----------------------------------------------------------------------------------


def _dualpipe(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    # DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv 2412.19437) §3.2.1 and Fig. 5; the
    # order is deepseek-ai/DualPipe dualpipe/dualpipe.py (``DualPipe.step``, steps 1-8). Rank r
    # holds stage r of the copy fed at rank 0 and stage pp - 1 - r of the copy fed at rank pp - 1;
    # its "phase 0" is the copy in which it is among the first half of the stages. Step 4's pairs
    # (``_forward_backward_chunk``) run a forward and a full backward overlapped; the middle ranks
    # run their first pair apart. Backwards with ``enable_zb`` leave their W for a later
    # ``_weight_chunk``.
    return [_dualpipe_rank(r, pp, m) for r in range(pp)]


def _dualpipe_rank(r: int, pp: int, m: int) -> list[Step]:
    """Rank ``r``'s order of passes under DualPipe."""
    half, per_copy = pp // 2, m // 2
    h = min(r, pp - 1 - r)
    second = r >= half
    chunk = (2 * pp - 1 - r, r) if second else (r, 2 * pp - 1 - r)
    base = (per_copy, 0) if second else (0, per_copy)
    f, b = [0, 0], [0, 0]
    waiting: deque[tuple[int, int]] = deque()
    seq: list[Step] = []

    def fwd(ph: int, paired: bool = False) -> None:
        seq.append(_f(chunk[ph], base[ph] + f[ph], paired))
        f[ph] += 1

    def bwd(ph: int, zb: bool = False) -> None:
        c, j = chunk[ph], base[ph] + b[ph]
        b[ph] += 1
        if zb:
            seq.append(_b(c, j))
            waiting.append((c, j))
        else:
            seq.append(_bw(c, j))

    def weight() -> None:
        seq.append(_w(*waiting.popleft()))

    for _ in range(2 * (half - h - 1)):                       # step 1: nF0
        fwd(0)
    for _ in range(h + 1):                                    # step 2: nF0F1
        fwd(0)
        fwd(1)
    for _ in range(half - h - 1):                             # step 3: nB1W1F1
        bwd(1, zb=True)
        weight()
        fwd(1)
    for i in range(per_copy - pp + h + 1):                    # step 4: nF0B1F1B0
        fwd(0, paired=not (i == 0 and h == half - 1))
        bwd(1)
        fwd(1, paired=True)
        bwd(0)
    for _ in range(half - h - 1):                             # step 5: nB1F1B0
        bwd(1)
        fwd(1, paired=True)
        bwd(0)
    zb = False
    for i in range(h + 1):                                    # step 6: nB1B0
        if i == (h + 1) // 2 and h % 2 == 1:
            zb = True
        bwd(1, zb)
        if i == (h + 1) // 2 and h % 2 == 0:
            zb = True
        bwd(0, zb)
    for _ in range(half - h - 1):                             # step 7: nWB0
        weight()
        bwd(0, zb=True)
    for _ in range(h + 1):                                    # step 8: nW
        weight()
    return seq


def _dualpipe_requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
    # deepseek-ai/DualPipe ``DualPipe.step``: ``num_ranks % 2 == 0``, ``num_chunks % 2 == 0 and
    # num_chunks >= num_ranks * 2``.
    if vp != 1:
        return f"schedule = dualpipe places one stage of each model copy on a rank: vp must be 1, got vp({vp})"
    if pp % 2:
        return f"schedule = dualpipe needs an even pp (ranks pair up from both ends), got pp({pp})"
    if m is not None and (m % 2 or m < 2 * pp):
        return (f"schedule = dualpipe needs an even number of microbatches, at least 2 * pp({pp}) = {2 * pp}, "
                f"got microbatches({m})")
    return None


def _dualpipe_makespan(t: Times) -> Any:
    # DeepSeek-V3 Table 2 (and deepseek-ai/DualPipe README): bubble (pp / 2 - 1)(F&B + B - 3 W),
    # B the whole backward, F&B a forward-backward pair; each rank runs m / 2 microbatches through
    # each of its two stages. Taken per rank with its own two stages' times (the ranks holding
    # the embedding and the head are the heavier), the slowest rank ending the pipeline. The
    # timeline of ``_dualpipe`` reproduces it for uniform stages whose input gradient takes as
    # long as the forward; otherwise it differs by about |F - (B - W)| per pair of ranks.
    def rank(xs: Sequence[Any]) -> list[Any]:
        return [vmax(a, b) for a, b in zip(xs, reversed(xs))][:max(1, len(xs) // 2 + len(xs) % 2)]

    work = t.mirrored([f + bw for f, bw in zip(t.f, t.bw)])
    lost = [fb + bw - 3 * w for fb, bw, w in zip(rank(t.fb), rank(t.bw), rank(t.w))]
    return vmax(*(t.m / 2 * x + (t.pp / 2 - 1) * y for x, y in zip(work, lost)))


TABLE: dict[Schedule, Entry] = {e.schedule: e for e in (
    Entry(schedule=Schedule.GPIPE, title="GPipe", orders=_gpipe, requires=_loop_only("gpipe"),
          makespan=_gpipe_makespan, hint="set schedule = interleaved, or vp = 1",
          source="Huang et al. 2019, GPipe (arXiv 1811.06965): all forwards, then all backwards"),
    Entry(schedule=Schedule.ONE_F_ONE_B, title="1F1B", orders=_one_f_one_b, requires=_loop_only("1f1b"),
          makespan=_one_f_one_b_makespan, hint="set schedule = interleaved, or vp = 1",
          source="Narayanan et al. 2021 (arXiv 2104.04473) §2.2, PipeDream-Flush; Megatron-LM "
                 "forward_backward_pipelining_without_interleaving"),
    Entry(schedule=Schedule.INTERLEAVED, title="interleaved 1F1B", orders=_interleaved,
          requires=_interleaved_requires, makespan=_interleaved_makespan,
          period=lambda pp, group: pp if group is None else group,  # a chunk runs a group in a row
          hint="set vp = 2 or more and pp > 1 (or use 1f1b), and microbatches Megatron-LM accepts: at least "
               "microbatch_group (default pp; at least pp), whole groups or a last group of at least pp (change "
               "global_batch, micro_batch or microbatch_group)",
          source="Narayanan et al. 2021 §2.2; Megatron-LM forward_backward_pipelining_with_interleaving"),
    Entry(schedule=Schedule.ZB_H1, title="ZB-H1", orders=_zb_h1, requires=_loop_only("zb_h1"),
          makespan=_zb_h1_makespan, splits_w=True, staggered=False, hint="set vp = 1, or use zb_v with vp = 2",
          source="Qi et al. 2024 (arXiv 2401.10241) §2.1; Megatron-DeepSpeed deepspeed_zbh1_schedule.py"),
    Entry(schedule=Schedule.ZB_V, title="ZB-V", orders=_zb_v, requires=_zb_v_requires, makespan=_zb_v_makespan,
          shape=Shape.V, splits_w=True, staggered=False, hint="set vp = 2",
          source="Qi et al. 2024 §6; sail-sg/zero-bubble-pipeline-parallelism handcrafted_zb_v"),
    Entry(schedule=Schedule.DUALPIPE, title="DualPipe", orders=_dualpipe, requires=_dualpipe_requires,
          makespan=_dualpipe_makespan, shape=Shape.V, copies=2, splits_w=True, staggered=False,
          period=lambda pp, group: 2,  # one microbatch of each copy per round
          hint="set vp = 1, an even pp, and global_batch for an even number of microbatches >= 2 * pp",
          source="DeepSeek-V3 Technical Report (arXiv 2412.19437) §3.2.1; deepseek-ai/DualPipe"),
)}


def entry(schedule: Schedule) -> Entry:
    """The table entry of ``schedule``."""
    return TABLE[schedule]


@functools.cache
def steps(schedule: Schedule, pp: int, vp: int, m: int, group: int | None = None) -> tuple[tuple[Step, ...], ...]:
    """Each rank's steps (cached: they depend only on these numbers; ``group``: the interleaved
    schedule's microbatch group, default pp)."""
    return tuple(tuple(seq) for seq in entry(schedule).orders(pp, vp, m, group))
