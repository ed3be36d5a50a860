"""The result of a prediction: a typed record with a JSON form and a readable table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmp.analytic.layout import Axis
from llmp.analytic.op import COMPUTE_FAMILIES
from llmp.compose.band import Band
from llmp.compose.overlap import categories
from llmp.compose.step import Step
from llmp.errors import InfeasibleError
from llmp.units import format_bytes, format_count, format_time, plural

COMPUTE = COMPUTE_FAMILIES
"""Every kernel family but the optimizer's: the categories ``compute_s`` adds up."""
COMM = tuple(a.value for a in Axis)
"""Every parallel axis (and offloading's copies): the categories ``exposed_comm_s`` adds up."""

MFU_CONVENTION = ("model FLOPs per token = 6 N + 12 L (heads head_dim) s (PaLM, Chowdhery et al. 2022, "
                  "app. B; Megatron's count without recompute), N = parameters in matmuls (layers and the "
                  "output head), no causal halving; MFU = model FLOPs per step / (step time x GPUs x dense "
                  "peak of the training precision)")


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryReport:
    """Bytes on the fullest GPU."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    logits: float
    overhead: float
    """CUDA context, workspaces and NCCL buffers."""
    total: float
    capacity: float
    oom: bool
    rank: int
    """Pipeline rank of the fullest GPU."""
    host: float = 0.0
    """Bytes that GPU keeps in host memory instead (offloading; not in ``total``)."""

    def to_dict(self) -> dict[str, Any]:
        return {f"{k}_bytes": getattr(self, k) for k in ("weights", "grads", "optimizer", "activations", "logits",
                                                         "overhead", "total", "capacity", "host")} | {
            "oom": self.oom, "pipeline_rank": self.rank}


@dataclass(frozen=True, kw_only=True, slots=True)
class OpRow:
    """One op with its per-call cost and how often it runs."""

    name: str
    family: str
    category: str
    phase: str
    scope: str
    rank_kind: str | None
    count: float
    flops: float
    bytes: float
    roofline_s: float
    """Analytic time of one call (roofline or alpha-beta)."""
    factor: float
    """Residual correction applied (1 without residual models)."""
    covered: bool
    bound: str
    """compute, memory or latency (kernels); network (collectives)."""

    @property
    def time_s(self) -> float:
        return self.roofline_s * self.factor

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte moved (None for an op without both)."""
        return self.flops / self.bytes if self.bytes > 0 and self.flops > 0 else None

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__}
        out["time_s"] = self.time_s
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class ResidualUse:
    """Which residual store corrected a prediction and how far it reached."""

    id: str
    path: str
    """Where the store was read from ("" for a store that is not a directory)."""
    scope: str
    """"per-device" (fitted for this device), "cross-GPU" (hardware-normalised, serves any device)
    or "custom" (a ``analytic.correction.Residuals`` that is not a store)."""
    covered: tuple[str, ...]
    """Op families of this spec it corrected."""
    out_of_domain: tuple[str, ...]
    """Ops (by name) whose shape lies outside what their model was fitted on: corrected by
    extrapolation, with a widened band."""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "scope": self.scope, "covered": list(self.covered),
                "out_of_domain_count": len(self.out_of_domain), "out_of_domain": list(self.out_of_domain)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    spec_hash: str
    source: str
    residuals: str
    """Residual model id, or "roofline only (no residual models)"."""
    uncorrected: tuple[str, ...]
    """Op families no residual model corrected (all of them without residual models)."""
    residuals_note: str = ""
    """How the store was chosen, or why none applies (``llmp.residuals.store.choose``)."""
    residual_store: ResidualUse | None = None
    calibration: tuple[str, ...] = ()
    """The ceilings behind the analytic times: per tensor-core kernel kind, the measured rate
    (with its source) or the datasheet peak; per link crossed, its measured efficiency or line
    rate (``llmp.compose.calibration``)."""
    mfu_convention: str = MFU_CONVENTION
    stack: str = "generic"
    """The training stack whose profile decided the kernels, overlaps and per-step work."""
    calibrated_by: str = ""
    """The ``llmp calibrate`` file that corrected this prediction and what it applied ("": none,
    a zero-shot prediction)."""
    measured: tuple[str, ...] = ()
    """Collectives this machine's own measurements priced (no residual correction on top), and
    those of a measured machine that fell outside its measurements (``llmp.compose.measured``)."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in ((k, getattr(self, k)) for k in self.__slots__)}
        out["residual_store"] = self.residual_store.to_dict() if self.residual_store else None
        return out


class Report:
    """The band, the op table and the provenance of a prediction, each built on first use and then kept.

    ``llmp predict`` prints all three, but a sweep, a layout search or a library loop over specs
    reads only the step time: the band's draws run the whole pipeline timeline a few hundred times
    (three quarters of a warm Llama 3 70B prediction), and building a row per op, hashing the spec
    and writing the calibration notes is another fifth, all of it unread there.
    """

    __slots__ = ("_make_ops", "_make_provenance", "_make_uncertainty", "_ops", "_provenance", "_uncertainty")

    def __init__(self, ops: Callable[[], tuple[OpRow, ...]], provenance: Callable[[], Provenance],
                 uncertainty: Callable[[], Band]) -> None:
        self._make_ops, self._make_provenance, self._make_uncertainty = ops, provenance, uncertainty
        self._ops: tuple[OpRow, ...] | None = None
        self._provenance: Provenance | None = None
        self._uncertainty: Band | None = None

    @property
    def ops(self) -> tuple[OpRow, ...]:
        if self._ops is None:
            self._ops = self._make_ops()
        return self._ops

    @property
    def provenance(self) -> Provenance:
        if self._provenance is None:
            self._provenance = self._make_provenance()
        return self._provenance

    @property
    def uncertainty(self) -> Band:
        if self._uncertainty is None:
            self._uncertainty = self._make_uncertainty()
        return self._uncertainty


@dataclass(frozen=True, kw_only=True, slots=True)
class Prediction:
    """One training step: time, throughput, utilisation, where the time goes, memory, band."""

    step_time_s: float
    tokens_per_s: float
    mfu: float
    """Model FLOPs utilisation (see ``provenance.mfu_convention``)."""
    hfu: float
    """Hardware FLOPs utilisation: FLOPs the kernels execute (recompute included, causal
    attention halved) over the same peak."""
    caveats: tuple[str, ...] = ()
    """What the headline must say beside the numbers (:mod:`llmp.compose.caveats`): a GPU with no
    measured ceilings, an MFU past any published run, why MFU exceeds HFU."""
    breakdown: Mapping[str, float]
    """Seconds by category (compute by op family, recompute, optimizer, exposed communication by
    axis, bubble); sums to ``step_time_s``."""
    memory: MemoryReport
    derived: Mapping[str, Any]
    """Quantities computed from the spec: world size, microbatches, tokens per step, parameters."""
    step: Step
    """The composed step (timeline, chunk work) for the trace export."""
    report: Report
    """Builds :attr:`uncertainty`, :attr:`ops` and :attr:`provenance` when they are first read."""

    @property
    def uncertainty(self) -> Band:
        """The band with its level and where its width comes from (drawn on first use: the same
        seed, so the same band whenever it is read)."""
        return self.report.uncertainty

    @property
    def band(self) -> tuple[float, float]:
        """[low, high] step time at ``uncertainty.level`` (``compose.band``)."""
        u = self.report.uncertainty
        return u.low, u.high

    @property
    def ops(self) -> tuple[OpRow, ...]:
        """Every op with its per-call cost, factor and bound (built on first use)."""
        return self.report.ops

    @property
    def provenance(self) -> Provenance:
        """Spec hash, residual store, calibration notes (built on first use)."""
        return self.report.provenance

    @property
    def total_s(self) -> float:
        return self.step_time_s

    @property
    def compute_s(self) -> float:
        return sum(self.breakdown.get(k, 0.0) for k in COMPUTE)

    @property
    def exposed_comm_s(self) -> float:
        return sum(self.breakdown.get(k, 0.0) for k in COMM)

    @property
    def bubble_s(self) -> float:
        return self.breakdown.get("bubble", 0.0)

    @property
    def host_s(self) -> float:
        """Seconds the device waits for the host thread to issue its kernels (``host``)."""
        return self.breakdown.get("host", 0.0)

    @property
    def recompute_s(self) -> float:
        return self.breakdown.get("recompute", 0.0)

    @property
    def optimizer_s(self) -> float:
        return self.breakdown.get("optimizer", 0.0)

    @property
    def memory_per_gpu_bytes(self) -> float:
        return self.memory.total

    def require_fit(self) -> Prediction:
        """This prediction, or :class:`~llmp.errors.InfeasibleError` when it does not fit in memory
        (for sweeps that skip such layouts; ``predict`` itself only flags it)."""
        m = self.memory
        if m.oom:
            raise InfeasibleError(f"needs {format_bytes(m.total, binary=True)} per GPU on pipeline rank {m.rank}, "
                                  f"more than the {format_bytes(m.capacity, binary=True)} the GPU has",
                                  hint="shard more (zero, tp, pp), recompute activations or shrink micro_batch")
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON form; keys per the CLI contract (DESIGN.md)."""
        return {
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s, "mfu": self.mfu, "hfu": self.hfu,
            "caveats": list(self.caveats),
            "memory_per_gpu_bytes": self.memory.total, "oom": self.memory.oom,
            "breakdown": dict(self.breakdown),
            "summary": {"compute_s": self.compute_s, "recompute_s": self.recompute_s,
                        "exposed_comm_s": self.exposed_comm_s, "bubble_s": self.bubble_s,
                        "optimizer_s": self.optimizer_s, "host_s": self.host_s},
            "memory": self.memory.to_dict(), "band": list(self.band), "band_level": self.uncertainty.level,
            "band_detail": self.uncertainty.to_dict(), "derived": dict(self.derived),
            "provenance": self.provenance.to_dict(), "ops": [row.to_dict() for row in self.ops],
        }

    def to_table(self) -> str:
        """A readable plain-text report."""
        d, t = self.derived, self.step_time_s
        lines = [
            f"step time      {format_time(t)}   band [{format_time(self.band[0])}, {format_time(self.band[1])}] "
            f"({self.uncertainty.level:.0%})",
            f"throughput     {format_count(self.tokens_per_s)} tokens/s   "
            f"({format_count(self.tokens_per_s / d['world_size'])} per GPU)",
            f"utilisation    MFU {self.mfu:.1%}   HFU {self.hfu:.1%}",
            *(f"  note: {c}" for c in self.caveats),
            f"layout         {plural(d['world_size'], 'GPU')}, "
            f"{plural(d['microbatches'], 'microbatch', 'microbatches')} of {d['micro_batch']}, "
            f"{format_count(d['tokens_per_step'])} tokens/step, {format_count(d['parameters'])} parameters, "
            f"{format_count(d['model_flops_per_step'])}FLOP model FLOPs/step",
            "",
            "where the time goes (critical rank)",
        ]
        for key in (*categories(), "overhead"):
            v = self.breakdown.get(key, 0.0)
            if v > 1e-9 * t:
                lines.append(f"  {key:<15}{format_time(v):>12}  {v / t:6.1%}")
        m = self.memory
        lines += ["", f"memory per GPU (pipeline rank {m.rank})" + ("   ** OUT OF MEMORY **" if m.oom else "")]
        for key in ("weights", "grads", "optimizer", "activations", "logits", "overhead"):
            v = getattr(m, key)
            if v > 0:
                lines.append(f"  {key:<15}{format_bytes(v, binary=True):>12}")
        capacity = format_bytes(m.capacity, binary=True)
        lines.append(f"  {'total':<15}{format_bytes(m.total, binary=True):>12}  of {capacity} "
                     f"({m.total / m.capacity:.0%})")
        if m.host > 0:
            lines.append(f"  {'host (offload)':<15}{format_bytes(m.host, binary=True):>12}  in host memory, not above")
        p = self.provenance
        lines += ["", f"spec {p.source} (sha256 {p.spec_hash})", f"residuals: {p.residuals}"]
        store = p.residual_store
        if store is not None:
            lines.append(f"  {store.scope} store{f' at {store.path}' if store.path else ''}")
            lines.append(f"  corrected op families: {', '.join(store.covered) or 'none'}")
        if p.residuals_note:
            lines.append(f"  {p.residuals_note}")
        if p.uncorrected:
            lines.append(f"uncorrected op families: {', '.join(p.uncorrected)}")
        if store is not None and store.out_of_domain:
            names = store.out_of_domain
            shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
            lines.append(f"outside the fitted shapes (band widened): {len(names)} op{'s' if len(names) > 1 else ''}: "
                         f"{shown}")
        if p.measured:
            lines += ["collectives:", *(f"  {note}" for note in p.measured)]
        if p.calibration:
            lines += ["analytic ceilings:", *(f"  {note}" for note in p.calibration)]
        lines += ["", *self.uncertainty.describe()]
        if p.calibrated_by:
            lines.append(f"calibrated by {p.calibrated_by}")
        return "\n".join(lines)
