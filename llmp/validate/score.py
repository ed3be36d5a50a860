"""Predict every mapped measurement and score the prediction: per-row error and aggregates.

The error of a row is ``predicted / measured − 1`` on the step time (positive = llmp too slow).
Aggregates are reported per source, per stack and per GPU, never mixed across validation levels,
with the worst rows named. Where a row gives a measured memory peak, llmp's memory per GPU is
compared with it (:class:`MemoryCheck`), and an out-of-memory verdict on a run that ran is counted
as a failure. :func:`attribution` relates the error to the prediction's own breakdown (exposed
communication, bubble, recompute, ...) to say which part of the model the misses come from; it
only describes the errors, nothing is fitted to them.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from llmp.analytic.correction import Residuals
from llmp.compose import predict
from llmp.compose.calibration_file import as_calibration
from llmp.compose.prediction import MemoryReport
from llmp.compose.predictor import choose_residuals
from llmp.errors import InfeasibleError, InputError, LlmpError
from llmp.progress import Progress, tick
from llmp.residuals import store
from llmp.spec.spec import Spec
from llmp.validate import metrics
from llmp.validate.mapping import Mapped, Skipped, map_measurement
from llmp.validate.notes import MemoryKind, MemoryReading
from llmp.validate.rows import Measurement, Row, drop_copies, group_measurements, join_memory, read_csvs
from llmp.validate.skips import SkipReason

GIB = 2.0**30


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryCheck:
    """llmp's memory per GPU against a measured peak of one row."""

    kind: MemoryKind
    measured: float
    """Bytes, as the row gives them."""
    predicted: float
    """Bytes llmp predicts for the same quantity: for allocator statistics (allocated, reserved) the
    tensors llmp counts without its CUDA-context and NCCL-buffer overhead, which live outside
    PyTorch's caching allocator; for device memory, llmp's total."""
    error: float | None
    """``predicted / measured − 1``; None when the two are not the same GPU (see ``note``)."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "measured_bytes": self.measured, "predicted_bytes": self.predicted,
                "error": self.error, "note": self.note}


def check_memory(readings: Sequence[MemoryReading], memory: MemoryReport, pp: int) -> MemoryCheck | None:
    """Compare ``memory`` (llmp's fullest GPU) with the most specific measured peak, if any.

    Allocated bytes are preferred to reserved ones (the caching allocator's reserve adds cached,
    fragmented blocks llmp does not model), both to device-level figures. A figure the source logged
    on one rank only is compared only when that rank is llmp's fullest: Megatron logs memory on the
    last rank (its tensorboard writer, ``args.rank == world_size - 1``: the last pipeline stage).
    """
    order = (MemoryKind.ALLOCATED, MemoryKind.RESERVED, MemoryKind.DEVICE)
    found = sorted(readings, key=lambda r: order.index(r.kind))
    if not found:
        return None
    r = found[0]
    predicted = memory.total if r.kind is MemoryKind.DEVICE else memory.total - memory.overhead
    if r.one_rank and pp > 1 and memory.rank != pp - 1:
        return MemoryCheck(kind=r.kind, measured=r.bytes, predicted=predicted, error=None,
                           note=(f"the source logs one rank (the last pipeline stage); llmp's fullest GPU is "
                                 f"pipeline rank {memory.rank}: not compared"))
    return MemoryCheck(kind=r.kind, measured=r.bytes, predicted=predicted, error=predicted / r.bytes - 1.0,
                       note=f"measured: {r.text}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Scored:
    """One predicted measurement."""

    mapped: Mapped
    predicted_s: float
    """Predicted step time."""
    breakdown: dict[str, float]
    """The prediction's step-time breakdown, seconds by category."""
    band: tuple[float, float] | None = None
    """The prediction's [low, high] step time (equal to the point without residual models)."""
    memory: MemoryReport | None = None
    """llmp's memory on the fullest GPU."""
    memory_check: MemoryCheck | None = None
    """The comparison with the row's measured memory peak, when it gives one."""

    @property
    def oom_failure(self) -> bool:
        """llmp says the run does not fit, yet it ran: a reported failure."""
        return self.memory is not None and self.memory.oom

    @property
    def stack(self) -> str:
        return self.mapped.spec.train.stack.value

    @property
    def memory_error(self) -> float | None:
        return self.memory_check.error if self.memory_check is not None else None

    @property
    def measured_s(self) -> float:
        return self.mapped.measured_s

    @property
    def error(self) -> float:
        """``predicted / measured − 1`` on step time: > 0 means llmp predicts a slower step."""
        return self.predicted_s / self.measured_s - 1.0

    @property
    def key(self) -> str:
        return self.mapped.metric_row.key

    @property
    def source(self) -> str:
        return self.mapped.metric_row.text("source")

    @property
    def gpu(self) -> str:
        return self.mapped.metric_row.text("gpu_id")

    @property
    def predicted_metric(self) -> float:
        """The prediction in the published metric's own unit."""
        return metrics.metric_value(self.mapped.reading, self.predicted_s, self.mapped.context)

    @property
    def layout(self) -> str:
        p, t = self.mapped.spec.parallel, self.mapped.spec.train
        return f"tp{p.tp} pp{p.pp} dp{p.dp} cp{p.cp} mb{t.micro_batch} gb{t.global_batch}"

    def to_dict(self) -> dict[str, Any]:
        """The input row's own columns plus the score (the ``--json`` row contract)."""
        row = self.mapped.metric_row
        measured_value = self.mapped.reading.value
        return {
            **row.to_dict(),
            "key": self.key,
            "stack": self.stack,
            "metric": self.mapped.reading.name,
            "unit": "s",
            "predicted": self.predicted_s,
            "measured": self.measured_s,
            "error": self.error,
            "predicted_metric": self.predicted_metric,
            "measured_metric": measured_value,
            "metric_error": self.predicted_metric / measured_value - 1.0,
            "band": list(self.band) if self.band is not None else None,
            "memory_per_gpu_bytes": self.memory.total if self.memory is not None else None,
            "oom": self.oom_failure,
            "memory_error": self.memory_error,
            "memory": self.memory_check.to_dict() if self.memory_check is not None else None,
            "breakdown": dict(self.breakdown),
            "assumptions": list(self.mapped.assumptions),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Stats:
    """Error statistics of a set of rows (fractions, not percent)."""

    rows: int
    mape: float
    """Mean |error|."""
    median: float
    """Median |error|."""
    max: float
    """Largest |error|."""
    bias: float
    """Mean signed error (> 0: llmp too slow on average)."""
    worst: str
    """Key of the row with the largest |error|."""

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "mape": self.mape, "median": self.median, "max": self.max,
                "bias": self.bias, "worst": self.worst}


def summarize(rows: Sequence[Scored]) -> Stats:
    """Statistics of ``rows`` (at least one)."""
    errors = [abs(r.error) for r in rows]
    worst = max(rows, key=lambda r: abs(r.error))
    return Stats(rows=len(rows), mape=statistics.fmean(errors), median=statistics.median(errors),
                 max=max(errors), bias=statistics.fmean(r.error for r in rows), worst=worst.key)


@dataclass(frozen=True, kw_only=True, slots=True)
class Attribution:
    """How the signed error goes with one breakdown category's share of the predicted step."""

    category: str
    mean_share: float
    """Mean fraction of the predicted step time spent in the category."""
    correlation: float | None
    """Pearson r between the share and the signed error (None when the share never varies)."""
    slope: float | None
    """Least-squares change of signed error per unit share (descriptive, fitted to nothing else)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """Everything ``llmp validate`` found."""

    rows: tuple[Scored, ...]
    skipped: tuple[Skipped, ...]

    @property
    def overall(self) -> Stats | None:
        return summarize(self.rows) if self.rows else None

    def by(self, key: Callable[[Scored], str]) -> dict[str, Stats]:
        groups: dict[str, list[Scored]] = {}
        for r in self.rows:
            groups.setdefault(key(r), []).append(r)
        return {k: summarize(v) for k, v in sorted(groups.items())}

    @property
    def by_source(self) -> dict[str, Stats]:
        return self.by(lambda r: r.source)

    @property
    def by_gpu(self) -> dict[str, Stats]:
        return self.by(lambda r: r.gpu)

    @property
    def by_stack(self) -> dict[str, Stats]:
        return self.by(lambda r: r.stack)

    @property
    def memory_rows(self) -> tuple[Scored, ...]:
        """Rows whose measured memory peak llmp's memory was compared with."""
        return tuple(r for r in self.rows if r.memory_error is not None)

    @property
    def memory(self) -> Stats | None:
        """Memory error statistics over :attr:`memory_rows` (None without any)."""
        rows = self.memory_rows
        if not rows:
            return None
        errors = [r.memory_error for r in rows if r.memory_error is not None]
        worst = max(rows, key=lambda r: abs(r.memory_error or 0.0))
        return Stats(rows=len(rows), mape=statistics.fmean(abs(e) for e in errors),
                     median=statistics.median(abs(e) for e in errors), max=max(abs(e) for e in errors),
                     bias=statistics.fmean(errors), worst=worst.key)

    @property
    def oom_failures(self) -> tuple[Scored, ...]:
        """Rows llmp says do not fit in memory, although the run ran."""
        return tuple(r for r in self.rows if r.oom_failure)

    def worst(self, n: int = 5) -> tuple[Scored, ...]:
        return tuple(sorted(self.rows, key=lambda r: abs(r.error), reverse=True)[:n])

    @property
    def skip_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.skipped:
            counts[s.reason.value] = counts.get(s.reason.value, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (keys are part of the CLI contract)."""
        overall = self.overall
        return {
            "rows": [r.to_dict() for r in self.rows],
            "mape": overall.mape if overall else None,
            "median": overall.median if overall else None,
            "max": overall.max if overall else None,
            "bias": overall.bias if overall else None,
            "by_source": {k: v.to_dict() for k, v in self.by_source.items()},
            "by_stack": {k: v.to_dict() for k, v in self.by_stack.items()},
            "by_gpu": {k: v.to_dict() for k, v in self.by_gpu.items()},
            "memory": self.memory.to_dict() if self.memory is not None else None,
            "oom_failures": [r.key for r in self.oom_failures],
            "worst": [{"key": r.key, "source": r.source, "model": r.mapped.metric_row.text("model_name"),
                       "error": r.error} for r in self.worst()],
            "skip_counts": self.skip_counts,
            "skipped": [{"row": s.measurement.config.to_dict(), "key": s.measurement.config.key,
                         "lines": [r.line for r in s.measurement.rows], "reason": s.reason.value,
                         "detail": s.detail} for s in self.skipped],
            "attribution": [{"category": a.category, "mean_share": a.mean_share, "correlation": a.correlation,
                             "slope": a.slope} for a in attribution(self.rows)],
        }


def pearson(xs: Sequence[float], ys: Sequence[float]) -> tuple[float | None, float | None]:
    """(Pearson r, least-squares slope of ys on xs); (None, None) when either does not vary."""
    if len(xs) < 3:
        return None, None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-18 or syy <= 1e-18:
        return None, None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return sxy / math.sqrt(sxx * syy), sxy / sxx


def attribution(rows: Sequence[Scored]) -> tuple[Attribution, ...]:
    """Per breakdown category: mean share of the predicted step, and its correlation with the error."""
    categories = sorted({c for r in rows for c in r.breakdown})
    out = []
    for c in categories:
        shares = [r.breakdown.get(c, 0.0) / r.predicted_s for r in rows]
        r_, slope = pearson(shares, [r.error for r in rows])
        out.append(Attribution(category=c, mean_share=statistics.fmean(shares), correlation=r_, slope=slope))
    return tuple(out)


ResidualsFor = Callable[[Spec], Residuals | None]
"""Which residual store corrects a spec's prediction (e.g. the shipped default of its GPU)."""


def residuals_for(choice: ResidualsFor | Residuals | str | os.PathLike[str] | None) -> ResidualsFor | None:
    """Each row's residual store from ``choice``: ``"default"`` (as ``llmp predict``: the store
    shipped for the row's GPU, else the cross-GPU one), ``None`` or ``"none"`` (the roofline alone),
    a store directory (read once for every row), a loaded store, or a function of the spec."""
    if choice is None or choice == "none":
        return None
    if choice == "default":
        return lambda spec: choose_residuals("default", spec)[0]
    if isinstance(choice, (str, os.PathLike)):
        fitted = store.load(choice)
        return lambda spec: fitted
    if hasattr(choice, "correct"):  # a loaded store (the Residuals protocol)
        given = cast(Residuals, choice)
        return lambda spec: given
    return cast(ResidualsFor, choice)


def score(mapped: Mapped, residuals: Residuals | None = None, calibration: Any = None) -> Scored | Skipped:
    """Predict one mapped measurement; a prediction llmp refuses becomes a :class:`Skipped`
    (``calibration``: an ``llmp calibrate`` file; rows of another GPU or stack are skipped)."""
    if calibration is not None:
        try:
            calibration.check(mapped.spec)
        except InputError as err:
            return Skipped(measurement=mapped.measurement, reason=SkipReason.CALIBRATION, detail=err.message)
    try:
        prediction = predict(mapped.spec, residuals=residuals, calibration=calibration)
    except InfeasibleError as err:
        return Skipped(measurement=mapped.measurement, reason=SkipReason.INFEASIBLE, detail=err.render())
    except LlmpError as err:
        return Skipped(measurement=mapped.measurement, reason=SkipReason.PREDICT_ERROR, detail=err.render())
    seconds = float(prediction.step_time_s)
    if not math.isfinite(seconds) or seconds <= 0:
        return Skipped(measurement=mapped.measurement, reason=SkipReason.PREDICT_ERROR,
                       detail=f"predicted step time {seconds!r} is not a positive number")
    low, high = (float(x) for x in prediction.band)
    check = check_memory(mapped.memory, prediction.memory, int(mapped.spec.parallel.pp))
    return Scored(mapped=mapped, predicted_s=seconds, breakdown={k: float(v) for k, v in prediction.breakdown.items()},
                  band=(low, high), memory=prediction.memory, memory_check=check)


def select_sources(measurements: Iterable[Measurement], sources: Sequence[str]) -> tuple[Measurement, ...]:
    """The measurements of the named sources (all when ``sources`` is empty)."""
    ms = tuple(measurements)
    if not sources:
        return ms
    known = sorted({m.config.text("source") for m in ms})
    unknown = [s for s in sources if s not in known]
    if unknown:
        raise InputError(f"no rows with source {', '.join(repr(u) for u in unknown)}", label="unknown source",
                         hint=f"sources in these files: {', '.join(known)}")
    return tuple(m for m in ms if m.config.text("source") in sources)


def validate(paths: Sequence[str], *, residuals: ResidualsFor | Residuals | str | os.PathLike[str] | None = "default",
             sources: Sequence[str] = (), calibration: Any = None, progress: Progress | None = None) -> Report:
    """Read ``paths``, map and predict every measurement, and score it (the API of ``llmp validate``).

    ``residuals`` picks the residual store for each mapped spec (:func:`residuals_for`; by default
    the one ``llmp predict`` applies); ``calibration`` applies an ``llmp calibrate`` file (loaded
    once) to every row; ``progress`` is told of each measurement done (:mod:`llmp.progress`).
    """
    residuals = residuals_for(residuals)
    if calibration is not None:
        calibration = as_calibration(calibration)
    measurements, copies = read_measurements(paths, sources)
    scored: list[Scored] = []
    skipped: list[Skipped] = []
    for done, m in enumerate(measurements):
        tick(progress, done, len(measurements))
        mapped = map_measurement(m)
        result = (score(mapped, residuals(mapped.spec) if residuals is not None else None, calibration)
                  if isinstance(mapped, Mapped) else mapped)
        if isinstance(result, Scored):
            scored.append(result)
        else:
            skipped.append(result)
    tick(progress, len(measurements), len(measurements))
    return Report(rows=tuple(scored), skipped=(*skipped, *copies))


def _memory_row(row: Row) -> bool:
    return metrics.is_memory(row.text("metric_name"), row.text("metric_unit"))


def read_measurements(paths: Sequence[str], sources: Sequence[str] = ()) -> tuple[tuple[Measurement, ...],
                                                                                 tuple[Skipped, ...]]:
    """The measurements in ``paths`` (only ``sources`` when given), and the rows set aside while
    reading: exact copies of an earlier row, each a :class:`Skipped` naming the row it repeats
    (``llmp validate`` and ``llmp calibrate`` read their rows the same way)."""
    rows, copies = drop_copies(read_csvs(tuple(paths)))
    measurements = select_sources(join_memory(group_measurements(rows), _memory_row), sources)
    skipped = tuple(Skipped(measurement=Measurement(rows=(copy,)), reason=SkipReason.DUPLICATE,
                            detail=f"every cell equals row {first.key}: the measurement is counted once")
                    for copy, first in copies if not sources or copy.text("source") in sources)
    return measurements, skipped


def skip_summary(skipped: Sequence[Skipped], shown: int = 8) -> str:
    """``reason: count (file:line, ...)`` per reason, most frequent first: what a skip note or an
    error names, so that no dropped row goes unmentioned (``shown`` rows per reason, then a count)."""
    by: dict[str, list[str]] = {}
    for s in skipped:
        by.setdefault(s.reason.value, []).append(s.measurement.lines)
    parts = []
    for reason, keys in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        more = f", and {len(keys) - shown} more" if len(keys) > shown else ""
        parts.append(f"{reason}: {len(keys)} ({', '.join(keys[:shown])}{more})")
    return "; ".join(parts)
