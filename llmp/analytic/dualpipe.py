"""DualPipe (DeepSeek-V3): two copies of the model fed from both ends of the pipeline, a forward
overlapped with a backward in pairs, weight gradients deferred where the order leaves room. Its
order, closed form and requirements, for :data:`~llmp.analytic.schedules.TABLE`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from llmp.analytic.schedule_steps import Orders, Step, Times, b_step, bw_step, f_step, w_step
from llmp.spec.algebra import vmax


def dualpipe(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
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
        seq.append(f_step(chunk[ph], base[ph] + f[ph], paired))
        f[ph] += 1

    def bwd(ph: int, zb: bool = False) -> None:
        c, j = chunk[ph], base[ph] + b[ph]
        b[ph] += 1
        if zb:
            seq.append(b_step(c, j))
            waiting.append((c, j))
        else:
            seq.append(bw_step(c, j))

    def weight() -> None:
        seq.append(w_step(*waiting.popleft()))

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


def dualpipe_requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
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


def dualpipe_makespan(t: Times) -> Any:
    # DeepSeek-V3 Table 2 (and deepseek-ai/DualPipe README): bubble (pp / 2 - 1)(F&B + B - 3 W),
    # B the whole backward, F&B a forward-backward pair; each rank runs m / 2 microbatches through
    # each of its two stages. Taken per rank with its own two stages' times (the ranks holding
    # the embedding and the head are the heavier), the slowest rank ending the pipeline. The
    # timeline of ``dualpipe`` reproduces it for uniform stages whose input gradient takes as
    # long as the forward; otherwise it differs by about |F - (B - W)| per pair of ranks.
    def rank(xs: Sequence[Any]) -> list[Any]:
        return [vmax(a, b) for a, b in zip(xs, reversed(xs))][:max(1, len(xs) // 2 + len(xs) % 2)]

    work = t.mirrored([f + bw for f, bw in zip(t.f, t.bw)])
    lost = [fb + bw - 3 * w for fb, bw, w in zip(rank(t.fb), rank(t.bw), rank(t.w))]
    return vmax(*(t.m / 2 * x + (t.pp / 2 - 1) * y for x, y in zip(work, lost)))
