"""Pipeline schedules as data: one table entry per schedule.

Pipeline work is tasks per model chunk and microbatch (:class:`~llmp.analytic.op.Task`): ``F``
(forward), ``B`` (input gradient) and ``W`` (weight gradient). A schedule is one :class:`Entry`:

* ``shape``: which pipeline rank holds each chunk: Megatron's loop (chunk ``g`` on rank
  ``g % pp``) or a V (rank ``r`` holds chunks ``r`` and ``2 pp - 1 - r``); ``copies``: DualPipe
  keeps two copies of the model, one per direction, so placement chunk ``c`` runs model chunk
  ``c % (pp vp)`` and the microbatches split between the copies (first half, second half);
* ``requires``: what it needs of ``pp``, ``vp`` and the microbatches (and of Megatron's microbatch
  group, for the interleaved schedule), said as the error;
* ``orders``: per pipeline rank, the :class:`~llmp.analytic.schedule_steps.Step` s it runs in
  order. A step is an F, a B (with its W, as one backward, unless the schedule runs the W apart
  later), a W, or (DualPipe) an F overlapped with the B that follows it;
* ``makespan``: its closed form over per-chunk task times
  (:class:`~llmp.analytic.schedule_steps.Times`), for :mod:`~llmp.compose.closed_form`.

Everything downstream reads the entry: the event timeline (:mod:`~llmp.compose.schedule`),
memory (activations in flight, the chunks and copies a rank holds), the Perfetto trace (W tasks
as their own slices) and the closed forms. Adding a schedule is adding an entry here, its orders
and closed form in a module of their own (as :mod:`~llmp.analytic.gpipe_1f1b`,
:mod:`~llmp.analytic.zero_bubble`, :mod:`~llmp.analytic.dualpipe`), and its name to
:class:`~llmp.spec.spec.Schedule`.

The orders follow the implementations cited in each entry; when they leave a choice open (which
deferred W to run), the oldest waiting W runs first, as both zero-bubble runtimes do (a FIFO
queue: deepseek-ai/DualPipe ``WeightGradStore.pop``, sail-sg ``WeightGradStore``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.analytic.dualpipe import dualpipe, dualpipe_makespan, dualpipe_requires
from llmp.analytic.gpipe_1f1b import (
    gpipe,
    gpipe_makespan,
    interleaved,
    interleaved_makespan,
    interleaved_requires,
    one_f_one_b,
    one_f_one_b_makespan,
)
from llmp.analytic.schedule_steps import Orders, Step, Times
from llmp.analytic.zero_bubble import zb_h1, zb_h1_makespan, zb_v, zb_v_makespan, zb_v_requires
from llmp.spec.spec import Schedule


class Shape(StrEnum):
    """Where the placement chunks live."""

    LOOP = "loop"
    """Chunk ``c`` on rank ``c % pp`` (Megatron's interleaving; a stage per rank for vp = 1)."""
    V = "v"
    """``2 pp`` chunks in a V: chunk ``c`` on rank ``c`` for ``c < pp``, else ``2 pp - 1 - c``."""


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


def _loop_only(name: str) -> Callable[[int, int, int | None, int | None], str | None]:
    def requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
        if vp > 1:
            return f"vp({vp}) > 1 needs schedule = interleaved or zb_v (got {name})"
        return None
    return requires


TABLE: dict[Schedule, Entry] = {e.schedule: e for e in (
    Entry(schedule=Schedule.GPIPE, title="GPipe", orders=gpipe, requires=_loop_only("gpipe"),
          makespan=gpipe_makespan, hint="set schedule = interleaved, or vp = 1",
          source="Huang et al. 2019, GPipe (arXiv 1811.06965): all forwards, then all backwards"),
    Entry(schedule=Schedule.ONE_F_ONE_B, title="1F1B", orders=one_f_one_b, requires=_loop_only("1f1b"),
          makespan=one_f_one_b_makespan, hint="set schedule = interleaved, or vp = 1",
          source="Narayanan et al. 2021 (arXiv 2104.04473) §2.2, PipeDream-Flush; Megatron-LM "
                 "forward_backward_pipelining_without_interleaving"),
    Entry(schedule=Schedule.INTERLEAVED, title="interleaved 1F1B", orders=interleaved,
          requires=interleaved_requires, makespan=interleaved_makespan,
          period=lambda pp, group: pp if group is None else group,  # a chunk runs a group in a row
          hint="set vp = 2 or more and pp > 1 (or use 1f1b), and microbatches Megatron-LM accepts: at least "
               "microbatch_group (default pp; at least pp), whole groups or a last group of at least pp (change "
               "global_batch, micro_batch or microbatch_group)",
          source="Narayanan et al. 2021 §2.2; Megatron-LM forward_backward_pipelining_with_interleaving"),
    Entry(schedule=Schedule.ZB_H1, title="ZB-H1", orders=zb_h1, requires=_loop_only("zb_h1"),
          makespan=zb_h1_makespan, splits_w=True, staggered=False, hint="set vp = 1, or use zb_v with vp = 2",
          source="Qi et al. 2024 (arXiv 2401.10241) §2.1; Megatron-DeepSpeed deepspeed_zbh1_schedule.py"),
    Entry(schedule=Schedule.ZB_V, title="ZB-V", orders=zb_v, requires=zb_v_requires, makespan=zb_v_makespan,
          shape=Shape.V, splits_w=True, staggered=False, hint="set vp = 2",
          source="Qi et al. 2024 §6; sail-sg/zero-bubble-pipeline-parallelism handcrafted_zb_v"),
    Entry(schedule=Schedule.DUALPIPE, title="DualPipe", orders=dualpipe, requires=dualpipe_requires,
          makespan=dualpipe_makespan, shape=Shape.V, copies=2, splits_w=True, staggered=False,
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
