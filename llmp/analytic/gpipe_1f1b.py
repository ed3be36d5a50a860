"""GPipe, 1F1B and interleaved 1F1B: each backward runs with its weight gradient, on Megatron's loop
placement (chunk ``g`` on rank ``g % pp``). Their orders, closed forms and what the interleaved
schedule needs of the microbatches, for :data:`~llmp.analytic.schedules.TABLE`.
"""

from __future__ import annotations

from typing import Any

from llmp.analytic.schedule_steps import Orders, Times, bw_step, f_step


def gpipe(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    return [[f_step(r, j) for j in range(m)] + [bw_step(r, j) for j in range(m)] for r in range(pp)]


def one_f_one_b(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    out = []
    for r in range(pp):
        warm = min(pp - r - 1, m)
        seq = [f_step(r, j) for j in range(warm)]
        for i in range(m - warm):
            seq += [f_step(r, warm + i), bw_step(r, i)]
        seq += [bw_step(r, j) for j in range(m - warm, m)]
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


def interleaved(pp: int, vp: int, m: int, group: int | None = None) -> Orders:
    # Megatron-Core forward_backward_pipelining_with_interleaving: warm-up 2 (pp - r - 1) + (vp - 1)
    # N virtual microbatches (N = group, default pp), then one forward and one backward at a time.
    # The backward of virtual microbatch i runs chunk vp - 1 - k of table[i]; each chunk's
    # backwards take its microbatches in the order its forwards ran them.
    if vp == 1:
        return one_f_one_b(pp, vp, m)
    group = pp if group is None else group
    table = _interleaved_table(m, vp, group)
    total = len(table)
    out = []
    for r in range(pp):
        fwd = [f_step(k * pp + r, j) for k, j in table]
        bwd = [bw_step((vp - 1 - k) * pp + r, j) for k, j in table]
        warm = min(2 * (pp - r - 1) + (vp - 1) * group, total)
        seq = fwd[:warm]
        for i in range(total - warm):
            seq += [fwd[warm + i], bwd[i]]
        seq += bwd[total - warm:]
        out.append(seq)
    return out


def _flat(t: Times) -> list[Any]:
    return [f + bw for f, bw in zip(t.f, t.bw)]


def gpipe_makespan(t: Times) -> Any:
    # A flow shop of identical jobs: exact for any stage times.
    return t.total(t.f) + t.total(t.bw) + (t.m - 1) * (t.most(t.f) + t.most(t.bw))


def one_f_one_b_makespan(t: Times) -> Any:
    # (m + pp - 1)(F + B) for uniform stages (Narayanan et al. 2021, eq. 1); the slowest stage
    # sets the pace.
    work = _flat(t)
    return t.total(work) + (t.m - 1) * t.most(work)


def interleaved_makespan(t: Times) -> Any:
    # (m + (pp - 1) / vp) W for uniform stages, W a rank's work per microbatch (ibid., §2.2).
    if t.vp == 1:
        return one_f_one_b_makespan(t)
    work = _flat(t)
    return t.m * t.most(t.ranks(work)) + (t.pp - 1) * t.most(work)


def interleaved_requires(pp: int, vp: int, m: int | None, group: int | None = None) -> str | None:
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
