"""What a search returns: ranked configurations, the Pareto front and why points were dropped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmp.compose.band import LEVEL
from llmp.search.rank import COST_DEFINITION, Objective
from llmp.spec import schema
from llmp.units import (
    BANDWIDTH,
    COMPUTE,
    COUNT,
    FREQUENCY,
    POWER,
    SIZE,
    TIME,
    format_bytes,
    format_count,
    format_quantity,
    format_time,
)

_SI_UNIT = {SIZE: "B", BANDWIDTH: "B/s", COMPUTE: "FLOP/s", TIME: "s", FREQUENCY: "Hz", POWER: "W"}


def set_text(path: str, value: Any) -> str:
    """``--set`` text that reproduces one field of a configuration (SI values with their unit)."""
    if isinstance(value, bool):
        return f"{path}={'true' if value else 'false'}"
    if isinstance(value, (int, float)):
        fdef = schema.field_at(path)
        unit = _SI_UNIT.get(fdef.dim, "") if fdef is not None and fdef.kind is schema.Kind.REAL else ""
        number = str(int(value)) if float(value).is_integer() else f"{value:.12g}"
        return f"{path}={number}{' ' + unit if unit else ''}"
    return f"{path}={value}"


def _show(path: str, value: Any) -> str:
    """A field's value for a table: its own unit (``3.35 TB/s``), ``yes``/``no``, or the option."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        fdef = schema.field_at(path)
        return format_quantity(value, fdef.dim if fdef is not None and fdef.kind is schema.Kind.REAL else COUNT)
    return str(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """One evaluated configuration."""

    config: Mapping[str, Any]
    """The varied fields (and those derived from them, e.g. ``parallel.dp``) at this point."""
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory_per_gpu_bytes: float
    gpus: int
    cost: float
    predicted_step_time_s: float | None = None
    """The step as ``llmp predict`` predicts it (residual models applied), for the configurations
    shown; ``step_time_s`` is the roofline composition every configuration was priced by."""
    band_s: tuple[float, float] | None = None
    """``llmp predict``'s band of that step (at :attr:`SearchResult.band_level`), for those shown."""

    def objective_value(self, objective: Objective) -> float:
        """The objective on the predicted step (where there is one), smaller is better: tokens per
        step and GPUs are the configuration's, so step time, cost and seconds per token all scale
        with the step."""
        slower = (self.predicted_step_time_s or self.step_time_s) / self.step_time_s
        return {Objective.STEP_TIME: self.step_time_s * slower, Objective.TOKENS_PER_S: slower / self.tokens_per_s,
                Objective.COST: self.cost * slower}[objective]

    def interval(self, objective: Objective) -> tuple[float, float, float]:
        """(low, point, high) of :meth:`objective_value` over the band of the step."""
        value = self.objective_value(objective)
        point = self.predicted_step_time_s or self.step_time_s
        low, high = self.band_s if self.band_s is not None else (point, point)
        return value * low / point, value, value * high / point

    def overrides(self) -> list[str]:
        """``--set`` arguments that turn the spec into this configuration."""
        return [set_text(p, v) for p, v in self.config.items()]

    def to_dict(self, rank: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {} if rank is None else {"rank": rank}
        out.update({"config": dict(self.config), "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
                    "mfu": self.mfu, "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "gpus": self.gpus,
                    "cost": self.cost, "set": self.overrides(), "predicted_step_time_s": self.predicted_step_time_s,
                    "band_s": None if self.band_s is None else list(self.band_s)})
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    """A ranked search over a space of configurations."""

    source: str
    objective: Objective
    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    """Each varied field and its candidate values (per GPU count for layouts, merged)."""
    columns: tuple[str, ...]
    """Fields shown in tables: the varied ones and derived ones that change across the space."""
    size: int
    """Configurations in the space."""
    feasible: int
    """Configurations found to run and fit in memory (of those checked: pruned ones are not)."""
    groups: int
    """Structural groups evaluated (one vectorised evaluation each)."""
    infeasible: Mapping[str, int]
    """Reason → configurations dropped for it (of those checked)."""
    pruned: int
    """Configurations left out unchecked because their lower bound on the step time shows they
    can reach neither the ranking nor the Pareto front (:mod:`llmp.search.prune`)."""
    ranked: tuple[Candidate, ...]
    """The best configurations, best first."""
    pareto: tuple[Candidate, ...]
    pareto_axes: tuple[str, str]
    """(x, y) the front minimises, e.g. (``gpus``, ``step_time_s``)."""
    seconds: float
    """Wall time of the search."""
    memory_limit_bytes: float | None
    """The --max-memory limit (None: each GPU's own capacity)."""
    gpu_hour_price: float
    notes: tuple[str, ...]
    ranked_by: str = ""
    """The residual store the shown configurations were predicted and ordered with ("": ordered by
    the roofline composition alone)."""
    band_level: float = LEVEL
    """The level of the shown configurations' bands (``llmp predict``'s)."""

    def top_two(self) -> bool | None:
        """Whether the best two are indistinguishable at :attr:`band_level`: either one's objective
        lies inside the other's band of it (None: fewer than two shown with a band). Their bands
        share the model's common errors (the composition term, the host), so this reads cautiously:
        two layouts it calls indistinguishable may still differ in the same direction everywhere."""
        if len(self.ranked) < 2 or self.ranked[0].band_s is None or self.ranked[1].band_s is None:
            return None
        a, b = (c.interval(self.objective) for c in self.ranked[:2])
        return a[0] <= b[1] <= a[2] or b[0] <= a[1] <= b[2]

    @property
    def configs_per_s(self) -> float:
        return self.size / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "objective": self.objective.value, "cost_definition": COST_DEFINITION,
            "gpu_hour_price": self.gpu_hour_price,
            "space": {"size": self.size, "axes": [{"path": p, "values": list(v)} for p, v in self.axes]},
            "feasible": self.feasible, "structural_groups": self.groups, "infeasible": dict(self.infeasible),
            "pruned": self.pruned,
            "memory_limit_bytes": self.memory_limit_bytes,
            "results": [c.to_dict(i + 1) for i, c in enumerate(self.ranked)], "ranked_by": self.ranking(),
            "band_level": self.band_level, "top_two_indistinguishable": self.top_two(),
            "pareto": {"axes": list(self.pareto_axes), "points": [c.to_dict() for c in self.pareto]},
            "seconds": self.seconds, "configs_per_s": self.configs_per_s, "notes": list(self.notes),
        }

    def ranking(self) -> str:
        """Which model ordered the results, in words."""
        if not self.ranked_by:
            return "the roofline composition (no residual models), which every configuration was priced by"
        return (f"the roofline composition (every configuration, no residual models) chose these {len(self.ranked)}; "
                f"llmp predict's step time with residuals {self.ranked_by} orders them (the 'predict' column, "
                "what each reproduce command prints)")

    def _rows(self, candidates: tuple[Candidate, ...], numbered: bool) -> list[str]:
        paths = list(self.columns)
        heads = [p.rsplit(".", 1)[-1] for p in paths]
        widths = [max(len(h), *(len(_show(p, c.config.get(p, ""))) for c in candidates)) for p, h in zip(paths, heads)]
        lead = "  #  " if numbered else ""
        predicted = any(c.predicted_step_time_s is not None for c in candidates)
        banded = any(c.band_s is not None for c in candidates)
        band_head = f"band ({self.band_level:.0%})"
        lines = [lead + "  ".join(h.rjust(w) for h, w in zip(heads, widths)) + (f"{'predict':>10}" if predicted else "")
                 + (f"{band_head:>21}" if banded else "")
                 + f"{'roofline':>10}{'tokens/s':>11}{'MFU':>7}{'mem/GPU':>11}{'GPUs':>6}{'cost':>10}"]
        for i, c in enumerate(candidates, start=1):
            lead = f"{i:>3}  " if numbered else ""
            cells = "  ".join(_show(p, c.config.get(p, "")).rjust(w) for p, w in zip(paths, widths))
            if predicted:
                shown = "-" if c.predicted_step_time_s is None else format_time(c.predicted_step_time_s)
                cells += f"{shown:>10}"
            if banded:
                span = "-" if c.band_s is None else f"{format_time(c.band_s[0])} - {format_time(c.band_s[1])}"
                cells += f"{span:>21}"
            lines.append(lead + cells + f"{format_time(c.step_time_s):>10}{format_count(c.tokens_per_s):>11}"
                         f"{c.mfu:>7.1%}{format_bytes(c.memory_per_gpu_bytes, binary=True):>11}{c.gpus:>6}"
                         f"{c.cost:>10.4g}")
        return lines

    def to_table(self, pareto: bool = False) -> str:
        limit = "each GPU's capacity" if self.memory_limit_bytes is None else format_bytes(
            self.memory_limit_bytes, binary=True)
        lines = [(f"searched {self.size} configurations of {self.source} in {format_time(self.seconds)} "
                 f"({format_count(self.configs_per_s)} per second); {self.feasible} feasible"
                 f"{' of those checked' if self.pruned else ''} "
                 f"(memory limit: {limit})")]
        for reason, count in sorted(self.infeasible.items(), key=lambda kv: -kv[1]):
            lines.append(f"  dropped {count:>6}: {reason}")
        if self.pruned:
            lines.append(f"  pruned  {self.pruned:>6}: a lower bound on their step time rules them out of the "
                         f"top {len(self.ranked)} and the Pareto front (not checked; --exhaustive checks them)")
        if not self.ranked:
            lines.append("no configuration can run: see the reasons above")
            return "\n".join(lines)
        lines += ["", f"best by {self.objective.value} ({COST_DEFINITION})", f"ranking: {self.ranking()}; "
                  "tokens/s, MFU and cost are the roofline's", *self._rows(self.ranked, True)]
        verdict = self.top_two()
        if verdict is not None:
            level = f"{self.band_level:.0%}"
            lines.append(f"#1 and #2 are indistinguishable at {level}: one's point lies inside the other's band; "
                         "measure both before choosing" if verdict else f"#1 is ahead of #2 beyond the {level} band")
        best = self.ranked[0]
        sets = " ".join(f"--set {s!r}" if " " in s else f"--set {s}" for s in best.overrides())
        lines += ["", f"reproduce the best: llmp predict {self.source} " + sets]
        if pareto:
            lines += ["", f"Pareto front ({self.pareto_axes[1]} vs {self.pareto_axes[0]}, both minimised)",
                      *self._rows(self.pareto, False)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
