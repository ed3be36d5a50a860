"""Turn a published metric into the time of one optimizer step, and back.

llmp predicts step time; sources report iteration time, throughput or FLOP rates. Each conversion
here is the source's own definition inverted, nothing fitted: tokens/s/GPU → step time is
``global_batch · seq_len / (tokens_per_sec_per_gpu · num_gpus)``. FLOP-rate metrics are used only
where the source states its FLOP count (:data:`FLOP_CONVENTIONS`), because sources count FLOPs
differently (with or without attention, recompute, the LM head).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

TOKENS_300B = 300e9
"""Megatron SC21 Table 2 reports days to train on 300 billion tokens."""


class Metric(StrEnum):
    """Time-like metric names of the schema (README of validation/), in order of preference."""

    ITERATION_TIME_S = "iteration_time_s"
    ITERATION_TIME_MS = "iteration_time_ms"
    TOKENS_PER_SEC = "tokens_per_sec"
    TOKENS_PER_SEC_PER_GPU = "tokens_per_sec_per_gpu"
    SAMPLES_PER_SEC = "samples_per_sec"
    ACHIEVED_TFLOPS_PER_GPU = "achieved_tflops_per_gpu"
    """Only with the source's own FLOP formula (:data:`FLOP_CONVENTIONS`)."""
    TRAINING_DAYS_300B_TOKENS = "training_days_300B_tokens"


PREFERENCE: tuple[Metric, ...] = tuple(Metric)
"""Direct times first, then throughputs (exact given batch and GPUs), then FLOP rates, then days
(which Megatron SC21 derived from the FLOP rate with an approximate formula)."""


def megatron_sc21_flops(*, global_batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """FLOPs per step as Narayanan et al. 2021 (arXiv 2104.04473, §5.1 eq. 3) count them.

    ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))``: forward, backward and one recomputed forward of
    every GEMM, attention scores and the logits layer. Their "achieved TFLOP/s per GPU" is this
    count over (step time · GPUs), so dividing it by the reported rate recovers the step time.
    """
    b, s, l, h, v = global_batch, seq_len, layers, hidden, vocab
    return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))


@dataclass(frozen=True, kw_only=True, slots=True)
class FlopConvention:
    """A source's stated way of counting FLOPs per step."""

    metric: Metric
    formula: Callable[..., float]
    citation: str


FLOP_CONVENTIONS: dict[str, FlopConvention] = {
    source: FlopConvention(
        metric=Metric.ACHIEVED_TFLOPS_PER_GPU, formula=megatron_sc21_flops,
        citation="Narayanan et al. 2021 eq. 3: 96·B·s·l·h²·(1 + s/6h + V/16lh) FLOPs per step")
    for source in ("megatron-sc21-table1", "megatron-sc21-table2", "megatron-lm-readme-gpt3-example")
}
"""Sources (``source`` column) whose FLOP-rate metric can be inverted with their own formula."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepContext:
    """What a conversion needs besides the metric value."""

    num_gpus: int
    global_batch: int | None = None
    """Sequences per step."""
    seq_len: int | None = None
    flops_per_step: float | None = None
    """The source's own FLOP count for one step (FLOP-rate metrics only)."""


def _tokens(ctx: StepContext) -> float:
    if ctx.global_batch is None or ctx.seq_len is None:
        raise ValueError("global_batch and seq_len are needed to convert a throughput")
    return float(ctx.global_batch * ctx.seq_len)


def _flops(ctx: StepContext) -> float:
    if ctx.flops_per_step is None:
        raise ValueError("the source's FLOP count per step is needed to convert a FLOP rate")
    return ctx.flops_per_step


def _relation(metric: Metric, ctx: StepContext) -> tuple[float, int]:
    """``(c, p)`` with ``value = c * seconds**p``: every time-like metric is a step time
    (p = 1) or an amount of work per step divided by it (p = -1)."""
    match metric:
        case Metric.ITERATION_TIME_S:
            return 1.0, 1
        case Metric.ITERATION_TIME_MS:
            return 1e3, 1
        case Metric.TOKENS_PER_SEC:
            return _tokens(ctx), -1
        case Metric.TOKENS_PER_SEC_PER_GPU:
            return _tokens(ctx) / ctx.num_gpus, -1
        case Metric.SAMPLES_PER_SEC:
            if ctx.global_batch is None:
                raise ValueError("global_batch is needed to convert samples/s")
            return float(ctx.global_batch), -1
        case Metric.ACHIEVED_TFLOPS_PER_GPU:
            return _flops(ctx) / (1e12 * ctx.num_gpus), -1
        case Metric.TRAINING_DAYS_300B_TOKENS:
            return TOKENS_300B / (86400.0 * _tokens(ctx)), 1
    raise AssertionError(metric)


def step_time(metric: Metric, value: float, ctx: StepContext) -> float:
    """Seconds per optimizer step implied by ``value`` of ``metric``."""
    c, p = _relation(metric, ctx)
    return value / c if p == 1 else c / value


def metric_value(metric: Metric, seconds: float, ctx: StepContext) -> float:
    """The value of ``metric`` that a step of ``seconds`` implies (the inverse of :func:`step_time`)."""
    c, p = _relation(metric, ctx)
    return c * seconds if p == 1 else c / seconds
