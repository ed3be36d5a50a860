"""Read a published metric (its name *and* its ``metric_unit``) and turn it into the time of one step.

llmp predicts step time; sources report iteration time (in s or ms), throughput (tokens/s, per GPU
or for the job; samples/s), FLOP rates, days to train, memory peaks. The unit cell is parsed by a
small grammar (``<amount>[/<time>][/GPU]``: ``ms``, ``tokens/s/GPU``, ``tok/sec``, ``TFLOP/s/GPU``,
``samples/s``, ``PFLOP/s``, ``GiB``, ``%``, ``days``) into a dimension and a scale to SI, and the
metric name says which quantity it is (a step time, a throughput, a FLOP rate, a memory peak).
A name and a unit that disagree, or a unit the grammar does not know, are refused with the row
named, never guessed. Each conversion to step time is the source's own definition inverted,
nothing fitted: tokens/s/GPU → ``global_batch · seq_len / (value · num_gpus)``. FLOP-rate metrics
are used only where the source states its FLOP count (:data:`FLOP_CONVENTIONS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

TOKENS_300B = 300e9
"""Megatron SC21 Table 2 reports days to train on 300 billion tokens."""


class UnitError(ValueError):
    """A metric unit the grammar does not read, or one that contradicts the metric name."""


class MetricNameError(ValueError):
    """A metric name that says no quantity llmp reads (``vibes``): never scored by its unit alone."""


class Dim(StrEnum):
    """What a unit measures."""

    TIME = "time"
    TOKEN_RATE = "tokens per second"
    SAMPLE_RATE = "samples per second"
    FLOP_RATE = "FLOP per second"
    BYTES = "bytes"
    PERCENT = "percent"


@dataclass(frozen=True, kw_only=True, slots=True)
class Unit:
    """A parsed ``metric_unit``: value · ``scale`` is SI (seconds, tokens/s, FLOP/s, bytes)."""

    dim: Dim
    scale: float
    per_gpu: bool = False
    text: str = ""


_TIME = {"s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3, "msec": 1e-3,
         "millisecond": 1e-3, "milliseconds": 1e-3, "us": 1e-6, "µs": 1e-6, "microseconds": 1e-6,
         "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0, "hrs": 3600.0,
         "hour": 3600.0, "hours": 3600.0, "day": 86400.0, "days": 86400.0}
_COUNT = {"token": Dim.TOKEN_RATE, "tokens": Dim.TOKEN_RATE, "tok": Dim.TOKEN_RATE, "toks": Dim.TOKEN_RATE,
          "sample": Dim.SAMPLE_RATE, "samples": Dim.SAMPLE_RATE, "sequence": Dim.SAMPLE_RATE,
          "sequences": Dim.SAMPLE_RATE, "seq": Dim.SAMPLE_RATE, "seqs": Dim.SAMPLE_RATE}
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}
_BYTES = {"b": 1.0, "bytes": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2.0**10, "mib": 2.0**20,
          "gib": 2.0**30, "tib": 2.0**40}
_GPU = frozenset({"gpu", "gpus", "device", "devices", "chip", "chips", "accelerator", "rank"})


def parse_unit(text: str) -> Unit:
    """``metric_unit`` → :class:`Unit`; raises :class:`UnitError` for text it does not read."""
    raw = text.strip()
    t = raw.lower().replace(" per ", "/").replace("·", "/").replace(" ", "")
    if t in ("%", "percent", "pct"):
        return Unit(dim=Dim.PERCENT, scale=1.0, text=raw)
    parts = [p for p in t.split("/") if p]
    if not parts:
        raise UnitError("blank")
    per_gpu = False
    while len(parts) > 1 and parts[-1] in _GPU:
        per_gpu = True
        parts.pop()
    head, rest = parts[0], parts[1:]
    if head in _TIME and not rest:
        return Unit(dim=Dim.TIME, scale=_TIME[head], per_gpu=per_gpu, text=raw)
    if head in _BYTES and not rest:
        return Unit(dim=Dim.BYTES, scale=_BYTES[head], per_gpu=per_gpu, text=raw)
    flops = re.fullmatch(r"([kmgtpe]?)flops?", head)
    if flops and (not rest or (len(rest) == 1 and rest[0] in _TIME)):
        # "TFLOPS" and "TFLOP/s" are both rates; "TFLOP/ms" is a rate per millisecond.
        per = _TIME[rest[0]] if rest else 1.0
        return Unit(dim=Dim.FLOP_RATE, scale=_PREFIX[flops.group(1)] / per, per_gpu=per_gpu, text=raw)
    count = re.fullmatch(r"([km]?)([a-z]+)", head)
    if count and count.group(2) in _COUNT and len(rest) == 1 and rest[0] in _TIME:
        return Unit(dim=_COUNT[count.group(2)], scale=_PREFIX[count.group(1)] / _TIME[rest[0]], per_gpu=per_gpu,
                    text=raw)
    raise UnitError(f"unit {raw!r} not understood (examples: s, ms, tokens/s, tokens/s/GPU, samples/s, "
                    "TFLOP/s/GPU, PFLOP/s, GiB, %)")


class Quantity(StrEnum):
    """What a metric is, read from its name and checked against its unit."""

    STEP_TIME = "step time"
    TOKEN_RATE = "throughput (tokens)"
    SAMPLE_RATE = "throughput (samples)"
    FLOP_RATE = "FLOP rate"
    MODEL_FLOP_RATE = "model FLOP rate"
    TRAINING_DAYS = "days to train 300B tokens"
    MEMORY = "memory peak"
    PERCENT = "percentage"
    AGGREGATE = "aggregate"


_NAME_RULES: tuple[tuple[str, Quantity, frozenset[Dim]], ...] = (
    (r"mfu|hfu|pct|percent|efficiency|utili[sz]ation", Quantity.PERCENT, frozenset({Dim.PERCENT})),
    (r"training[-_ ]days|days[-_ ]to[-_ ]train|days_300b", Quantity.TRAINING_DAYS, frozenset({Dim.TIME})),
    (r"\bmem|memory|allocated|reserved", Quantity.MEMORY, frozenset({Dim.BYTES})),
    (r"model[-_ ]?tflops|model[-_ ]flops|mfu_tflops", Quantity.MODEL_FLOP_RATE, frozenset({Dim.FLOP_RATE})),
    (r"flops|flop[-_ ]rate", Quantity.FLOP_RATE, frozenset({Dim.FLOP_RATE})),
    (r"tokens?[-_ ]?(?:per|/)|(?<![a-z])(?:tps|wps|tgs)(?![a-z])", Quantity.TOKEN_RATE, frozenset({Dim.TOKEN_RATE})),
    (r"samples?[-_ ]?(?:per|/)|sequences?[-_ ]?(?:per|/)|"
     r"(?<![a-z])sps(?![a-z])", Quantity.SAMPLE_RATE, frozenset({Dim.SAMPLE_RATE})),
    (r"iter(?:ation)?|step|time|latency|duration", Quantity.STEP_TIME, frozenset({Dim.TIME})),
    (r"throughput", Quantity.TOKEN_RATE, frozenset({Dim.TOKEN_RATE, Dim.SAMPLE_RATE})),
)
"""Metric-name words → quantity and the unit dimensions it may have (first match wins)."""

SCHEMA_NAMES: tuple[str, ...] = (
    "iteration_time_s", "iteration_time_ms", "tokens_per_sec_per_gpu", "tokens_per_sec", "samples_per_sec",
    "model_tflops_per_gpu", "achieved_tflops_per_gpu", "hw_tflops_per_gpu", "tflops_per_gpu", "mfu_pct", "hfu_pct",
    "pct_of_peak", "aggregate_pflops", "scaling_efficiency_pct", "training_days_300B_tokens", "mem_max_reserved_gib")
"""The metric names of the published-measurement schema (validation/README.md, "Metric names used"); other
names are read by the words of :data:`_NAME_RULES` (``step_time``, ``peak_memory``, ``throughput``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Reading:
    """One published metric, understood: its quantity and its value in SI units."""

    name: str
    """``metric_name`` as published."""
    quantity: Quantity
    value: float
    """As published."""
    unit: Unit

    @property
    def si(self) -> float:
        """The value in SI (seconds, tokens/s, samples/s, FLOP/s, bytes), per GPU if ``per_gpu``."""
        return self.value * self.unit.scale

    @property
    def per_gpu(self) -> bool:
        return self.unit.per_gpu or bool(re.search(r"per[-_ ]gpu|_gpu\b|/gpu", self.name.lower()))


def read(name: str, value: float, unit_text: str) -> Reading:
    """Understand one metric; raises :class:`UnitError` when the unit is unknown or contradicts the name,
    :class:`MetricNameError` when the name says no quantity (the unit alone never decides what a row is)."""
    unit = parse_unit(unit_text)
    lowered = name.lower()
    for pattern, quantity, dims in _NAME_RULES:
        if re.search(pattern, lowered):
            if unit.dim is Dim.SAMPLE_RATE and quantity is Quantity.TOKEN_RATE:
                quantity = Quantity.SAMPLE_RATE  # "throughput" in samples/s
            if unit.dim not in dims:
                raise UnitError(f"metric {name!r} is a {quantity} but its unit {unit_text!r} measures {unit.dim}")
            if quantity is Quantity.FLOP_RATE and not unit.per_gpu and "gpu" not in lowered:
                quantity = Quantity.AGGREGATE  # a whole job's FLOP rate (aggregate PFLOP/s)
            return Reading(name=name, quantity=quantity, value=value, unit=unit)
    raise MetricNameError(f"metric {name!r} names no quantity llmp reads (a step time, a throughput, a FLOP "
                          f"rate, a memory peak, a percentage); the schema's names: {', '.join(SCHEMA_NAMES)}")


def is_memory(name: str, unit_text: str) -> bool:
    """Whether a metric is a memory peak (a unit the grammar does not read, or a name that says no
    quantity, is not one)."""
    try:
        return read(name, 1.0, unit_text).quantity is Quantity.MEMORY
    except (UnitError, MetricNameError):
        return False


PREFERENCE: tuple[Quantity, ...] = (Quantity.STEP_TIME, Quantity.TOKEN_RATE, Quantity.SAMPLE_RATE,
                                    Quantity.FLOP_RATE, Quantity.TRAINING_DAYS)
"""Time-like quantities, most direct first: a step time; throughputs (exact given batch and GPUs);
a FLOP rate (only with the source's FLOP count); days to train (which Megatron SC21 derived from
the FLOP rate with an approximate formula)."""


def megatron_sc21_flops(*, global_batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """FLOPs per step as Narayanan et al. 2021 (arXiv 2104.04473, §5.1 eq. 3) count them.

    ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))``: forward, backward and one recomputed forward of
    every GEMM, attention scores and the logits layer. Their "achieved TFLOP/s per GPU" is this
    count over (step time · GPUs), so dividing it by the reported rate recovers the step time.
    """
    b, s, l, h, v = global_batch, seq_len, layers, hidden, vocab  # noqa: E741 - the paper's symbols
    return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))


@dataclass(frozen=True, kw_only=True, slots=True)
class FlopConvention:
    """A source's stated way of counting FLOPs per step."""

    formula: Callable[..., float]
    citation: str


FLOP_CONVENTIONS: dict[str, FlopConvention] = {
    source: FlopConvention(
        formula=megatron_sc21_flops,
        citation="Narayanan et al. 2021 eq. 3: 96·B·s·l·h²·(1 + s/6h + V/16lh) FLOPs per step")
    for source in ("megatron-sc21-table1", "megatron-sc21-table2", "megatron-lm-readme-gpt3-example")
}
"""Sources (``source`` column) whose achieved FLOP rate can be inverted with their own formula."""


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


def _relation(reading: Reading, ctx: StepContext) -> tuple[float, int]:
    """``(c, p)`` with ``si = c * seconds**p``: every time-like metric is a step time (p = 1) or an
    amount of work per step divided by it (p = -1); a per-GPU rate is the job's over the GPU count."""
    gpus = float(ctx.num_gpus) if reading.per_gpu else 1.0
    match reading.quantity:
        case Quantity.STEP_TIME:
            return 1.0, 1
        case Quantity.TOKEN_RATE:
            return _tokens(ctx) / gpus, -1
        case Quantity.SAMPLE_RATE:
            if ctx.global_batch is None:
                raise ValueError("global_batch is needed to convert samples/s")
            return float(ctx.global_batch) / gpus, -1
        case Quantity.FLOP_RATE:
            if ctx.flops_per_step is None:
                raise ValueError("the source's FLOP count per step is needed to convert a FLOP rate")
            return ctx.flops_per_step / gpus, -1
        case Quantity.TRAINING_DAYS:
            return TOKENS_300B / _tokens(ctx), 1
    raise ValueError(f"{reading.quantity} is not time-like")


def step_time(reading: Reading, ctx: StepContext) -> float:
    """Seconds per optimizer step implied by ``reading``."""
    c, p = _relation(reading, ctx)
    return reading.si / c if p == 1 else c / reading.si


def metric_value(reading: Reading, seconds: float, ctx: StepContext) -> float:
    """The value, in the metric's own unit, that a step of ``seconds`` implies (inverse of :func:`step_time`)."""
    c, p = _relation(reading, ctx)
    si = c * seconds if p == 1 else c / seconds
    return si / reading.unit.scale
