"""What a sensitivity analysis returns: typed records with a JSON form and a readable table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.spec import schema
from llmp.units import COUNT, format_quantity, format_time


def format_field(path: str, value: float) -> str:
    """A field's value in its own unit (``3.35 TB/s``, ``4096``)."""
    fdef = schema.field_at(path)
    dim = fdef.dim if fdef is not None and fdef.kind is schema.Kind.REAL else COUNT
    return format_quantity(value, dim)


def _g(x: float) -> str:
    return f"{x:.4g}"


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldSensitivity:
    """∂T/∂x and the elasticity of the step time to one field, at the operating point."""

    path: str
    value: float
    derivative: float
    """Seconds of step time per unit of the field (SI units: per byte/s, per FLOP/s, per count)."""
    elasticity: float
    """``(x / T) dT/dx``: the relative change of step time per relative change of the field."""
    integer: bool
    """A count, differentiated as if it were continuous."""
    moves: tuple[str, ...]
    """Other fields the spec derives from this one, which move with it (``parallel.dp`` for tp)."""
    derivations_known: bool
    """False when the spec's derivations could not be learned: only the field itself moved."""
    one_sided: bool
    """The point sits on a kink in this field (two branches tie): the derivative is one branch's."""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "value": self.value, "derivative": self.derivative,
                "elasticity": self.elasticity, "integer": self.integer, "moves_with": list(self.moves),
                "derivations_known": self.derivations_known, "one_sided": self.one_sided}


@dataclass(frozen=True, kw_only=True, slots=True)
class Flip:
    """Where a regime changes along one field (other fields at the point; derived ones follow)."""

    path: str
    at: float
    """The field's value at the flip (a root of the regime's boundary equation)."""
    current: float
    below: str
    above: str
    subject: str
    """What flips: an op family in a phase, or an op's roofline, or a composition term."""

    def describe(self) -> str:
        side = "above" if self.at > self.current else "below"
        now, then = (self.below, self.above) if side == "above" else (self.above, self.below)
        return (f"{self.subject}: {now} -> {then} {side} {self.path} = {format_field(self.path, self.at)} "
                f"(now {format_field(self.path, self.current)})")

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "at": self.at, "current": self.current, "below": self.below,
                "above": self.above, "subject": self.subject}


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyRegime:
    """One op family in one phase, as one aggregate roofline: compute, memory or launch bound."""

    phase: str
    family: str
    bound: str
    """``compute`` (FLOPs / peak exceed bytes / bandwidth), ``memory`` or ``latency`` (launches)."""
    busy_s: float
    """Seconds per GPU per step (roofline time summed over the family's ops)."""
    compute_s: float
    """Sum of FLOPs / peak over the family's calls."""
    memory_s: float
    """Sum of bytes / bandwidth over the family's calls."""
    launch_s: float
    flips: tuple[Flip, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "family": self.family, "bound": self.bound, "busy_s": self.busy_s,
                "compute_s": self.compute_s, "memory_s": self.memory_s, "launch_s": self.launch_s,
                "flips": [f.to_dict() for f in self.flips]}


@dataclass(frozen=True, kw_only=True, slots=True)
class CommRegime:
    """Collectives of one parallel axis: issued time against what the critical rank waits for."""

    axis: str
    issued_s: float
    """Seconds per GPU per step of the axis's collectives (average over ranks, before overlap)."""
    exposed_s: float
    """Seconds the critical rank's compute stream waits for them (the breakdown's entry)."""
    state: str
    """``hidden``, ``partly hidden`` or ``exposed``."""

    def to_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "issued_s": self.issued_s, "exposed_s": self.exposed_s, "state": self.state}


@dataclass(frozen=True, kw_only=True, slots=True)
class StepRegime:
    """What dominates the step: compute, recompute, exposed communication, bubble or optimizer."""

    dominant: str
    shares: dict[str, float]
    """Fraction of the step time per component (sums to 1)."""

    @property
    def label(self) -> str:
        return f"{self.dominant}-dominated"

    def to_dict(self) -> dict[str, Any]:
        return {"dominant": self.dominant, "label": self.label, "shares": dict(self.shares)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Sensitivity:
    """Derivatives, elasticities and regimes of one spec's step time at its operating point."""

    source: str
    step_time_s: float
    """The step time at the point (the prediction)."""
    closed_form_s: float
    """The closed form at the point; equals the prediction for uniform pipeline stages."""
    residuals: str
    """The residual store whose factors multiply the op times, held at their values at the point
    (``llmp predict``'s choice), or that none does."""
    fields: tuple[FieldSensitivity, ...]
    """Sorted by |elasticity|, largest first."""
    regimes: tuple[FamilyRegime, ...]
    comm: tuple[CommRegime, ...]
    step: StepRegime
    kinks: tuple[Flip, ...]
    """The nearest kinks of the step time along the flip fields, below and above the point."""
    free: dict[str, str]
    """For a spec with free symbols: the closed forms near the point (name → text)."""
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "step_time_s": self.step_time_s, "closed_form_s": self.closed_form_s,
                "residuals": self.residuals,
                "fields": [f.to_dict() for f in self.fields],
                "regimes": {"families": [r.to_dict() for r in self.regimes],
                            "communication": [c.to_dict() for c in self.comm],
                            "step": self.step.to_dict()},
                "flips": [k.to_dict() for k in self.kinks] + [f.to_dict() for r in self.regimes for f in r.flips],
                "free": dict(self.free), "notes": list(self.notes)}

    def to_table(self, top: int | None = None) -> str:
        lines = [(f"step time {format_time(self.step_time_s)} ({self.source}); closed form at the point "
                 f"{format_time(self.closed_form_s)}"),
                 f"residuals: {self.residuals} (factors held at their values at the point)", ""]
        moving = [f for f in self.fields if f.derivative != 0.0]
        shown = moving if top is None else moving[:top]
        lines.append(f"{'field':<28}{'value':>14}{'dT/dx':>14}{'elasticity':>12}  notes")
        for f in shown:
            notes = []
            if f.integer:
                notes.append("count, as continuous")
            if f.moves:
                notes.append("moves " + ", ".join(f.moves))
            if f.one_sided:
                notes.append("on a kink: one-sided")
            lines.append(f"{f.path:<28}{format_field(f.path, f.value):>14}{_g(f.derivative):>14}"
                         f"{f.elasticity:>12.4g}  {'; '.join(notes)}")
        idle = [f.path for f in self.fields if f.derivative == 0.0]
        if len(moving) > len(shown):
            lines.append(f"... {len(moving) - len(shown)} more (--top)")
        if idle:
            lines.append(f"zero derivative at the point: {', '.join(idle)}")
        lines += ["", f"step regime: {self.step.label}   " + "   ".join(
            f"{k} {v:.1%}" for k, v in self.step.shares.items() if v > 0)]
        lines += ["", f"{'phase':<9}{'family':<15}{'bound':<9}{'busy/GPU':>11}{'FLOP/peak':>11}{'bytes/bw':>11}"]
        for r in self.regimes:
            lines.append(f"{r.phase:<9}{r.family:<15}{r.bound:<9}{format_time(r.busy_s):>11}"
                         f"{format_time(r.compute_s):>11}{format_time(r.memory_s):>11}")
            lines += [f"    flips: {f.describe()}" for f in r.flips]
        if self.comm:
            lines += ["", f"{'axis':<6}{'issued/GPU':>12}{'exposed':>12}  state"]
            lines += [f"{c.axis:<6}{format_time(c.issued_s):>12}{format_time(c.exposed_s):>12}  {c.state}"
                      for c in self.comm]
        if self.kinks:
            lines += ["", "nearest kinks of the step time (regime changes along one field):"]
            lines += [f"  {k.describe()}" for k in self.kinks]
        if self.free:
            lines += ["", "closed forms in the free fields (other fields at their values):"]
            lines += [f"  {name} = {text}" for name, text in self.free.items()]
        lines += [""] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
