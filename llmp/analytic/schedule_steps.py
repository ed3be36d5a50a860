"""What a pipeline schedule is written in: the :class:`Step` s of each rank's order (an F, a B with
or without its W, a W), and the per-chunk task :class:`Times` its closed form reads. Each
schedule's module (:mod:`~llmp.analytic.gpipe_1f1b`, :mod:`~llmp.analytic.zero_bubble`,
:mod:`~llmp.analytic.dualpipe`) builds its orders and makespan from these; the table that names
them is :mod:`~llmp.analytic.schedules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from llmp.analytic.op import Task
from llmp.spec.algebra import vmax


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


def f_step(c: int, j: int, paired: bool = False) -> Step:
    """The forward of chunk ``c`` on microbatch ``j`` (``paired``: overlapped with the next B)."""
    return Step(Task.F, c, j, paired=paired)


def bw_step(c: int, j: int) -> Step:
    """The whole backward (B with its W) of chunk ``c`` on microbatch ``j``."""
    return Step(Task.B, c, j, with_w=True)


def b_step(c: int, j: int) -> Step:
    """The input gradient alone (its W runs later) of chunk ``c`` on microbatch ``j``."""
    return Step(Task.B, c, j)


def w_step(c: int, j: int) -> Step:
    """The weight gradient of chunk ``c`` on microbatch ``j``, run apart from its B."""
    return Step(Task.W, c, j)


Orders = list[list[Step]]
"""Per pipeline rank, its steps in order."""


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
