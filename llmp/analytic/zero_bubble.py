"""The zero-bubble schedules of Qi et al. 2024 (arXiv 2401.10241), ZB-H1 and ZB-V: a backward's
weight gradient (W) runs apart from its input gradient (B), later, where a rank would otherwise
idle. Their orders, closed forms and requirements, for :data:`~llmp.analytic.schedules.TABLE`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from llmp.analytic.schedule_steps import Orders, Step, Times, b_step, f_step, w_step
from llmp.spec.algebra import vmax


def zb_h1(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
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
    seq = [f_step(r, j) for j in range(warm)]
    waiting: deque[int] = deque()

    def backward(j: int, hold: bool) -> None:
        seq.append(b_step(r, j))
        waiting.append(j)
        if not hold:
            seq.append(w_step(r, waiting.popleft()))

    for i in range(m - warm):
        seq.append(f_step(r, warm + i))
        backward(i, hold=i < r)
    for j in range(m - warm, m):
        backward(j, hold=False)
    seq += [w_step(r, j) for j in waiting]
    return seq


def zb_h1_makespan(t: Times) -> Any:
    # Uniform stages: m (F + B + W) + (pp - 1)(F + B - W) (Qi et al. 2024 §2.1: 1F1B's bubble,
    # (pp - 1)(F + B + W), less two W per stage), while a held-back W fits beside a forward and a
    # backward (W <= min(F, B)); beyond that the simulated order loses (pp - 1) max(F, B). Exact
    # for uniform stages with m >= pp; grouped stages: the slowest chunk paces the m microbatches
    # and every other chunk adds its fill-and-drain share.
    work = [f + b + w for f, b, w in zip(t.f, t.b, t.w)]
    lost = [vmax(f + b - w, f, b) for f, b, w in zip(t.f, t.b, t.w)]
    return t.m * t.most(work) + t.total(lost) - t.most(lost)


def zb_v(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
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
            seq.append(f_step(c0, f0))
            f0 += 1
        for _ in range(r):
            seq += [f_step(c1, f1), f_step(c0, f0)]
            f1, f0 = f1 + 1, f0 + 1
        for _ in range(pp - r):
            seq += [f_step(c1, f1), b_step(c1, b1), w_step(c1, b1)]
            f1, b1 = f1 + 1, b1 + 1
        while f1 < f0 or f0 < n:
            if f0 < n:
                seq.append(f_step(c0, f0))
                f0 += 1
            seq += [b_step(c0, b0), w_step(c0, b0), f_step(c1, f1), b_step(c1, b1), w_step(c1, b1)]
            b0, f1, b1 = b0 + 1, f1 + 1, b1 + 1
        w0, w1 = b0, b1
        for _ in range(r):
            seq += [b_step(c0, b0), b_step(c1, b1)]
            b0, b1 = b0 + 1, b1 + 1
        for _ in range(pp - r):
            seq += [b_step(c0, b0), w_step(c0, w0)]
            b0, w0 = b0 + 1, w0 + 1
        seq += [w_step(c1, j) for j in range(w1, b1)] + [w_step(c0, j) for j in range(w0, b0)]
        out.append([s for s in seq if s.microbatch < m])
    return out


def zb_v_makespan(t: Times) -> Any:
    # Qi et al. 2024 §6: with T_F = T_B = T_W no rank idles between its first and its last task;
    # the ranks still start one chunk forward apart down the V's first arm. For uniform chunks
    # with F <= B and W <= B the simulated order of ``zb_v`` loses (pp - 1) max(B, 2 (B - W)) to
    # a rank's work (fitted on the timeline; exact in that range, an estimate elsewhere).
    work = [f + b + w for f, b, w in zip(t.f, t.b, t.w)]
    lost = [vmax(b, 2 * (b - w)) for b, w in zip(t.b, t.w)]
    return t.m * t.most(t.mirrored(work)) + (t.pp - 1) * t.most(lost)


def zb_v_requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
    if vp != 2:
        return f"schedule = zb_v needs vp = 2 (two model chunks per pipeline rank, in a V), got vp({vp})"
    return None
