"""What a plan returns: the chosen GPU count and layout, and the run's days, GPU-hours, energy and
cost, each with the band the step-time prediction carries; and the run as it really goes
(failures, checkpoints, restarts; facility energy and CO2), each with its band too."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmp.compose.band import LEVEL
from llmp.planning.checkpoint import Checkpointing, Mode
from llmp.planning.facility import Facility
from llmp.planning.power import Power
from llmp.planning.reliability import FailureModel, Goodput, goodput
from llmp.units import format_bytes, format_count, format_time, plural

DAY = 86400.0

COSTLIER = 1.25
"""A deadline plan says so, and names the cheaper count, when it costs this many times the
GPU-hours of the cheapest count scanned: a quarter more is a budget line worth seeing."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """One GPU count: its best layout and the predicted step of that layout."""

    gpus: int
    config: Mapping[str, Any]
    """The layout's fields (``parallel.tp``, ``train.recompute``, ``cluster.nodes``, ...)."""
    overrides: tuple[str, ...]
    """``--set`` arguments that turn the spec into this layout (``llmp predict SPEC --set ...``)."""
    step_time_s: float
    """Predicted step time (residual models applied as ``llmp predict`` applies them)."""
    step_band_s: tuple[float, float]
    roofline_step_s: float
    """The step time the layout search ranked by (roofline composition)."""
    tokens_per_step: float
    mfu: float
    busy: float
    """Fraction of the step in compute kernels (see :mod:`llmp.planning.power`)."""
    memory_per_gpu_bytes: float
    space: int
    checked: int
    evaluated: int
    checkpoint: Checkpointing
    """What one checkpoint of this layout costs (:mod:`llmp.planning.checkpoint`)."""

    def wall_s(self, tokens: float) -> tuple[float, float, float]:
        """(point, low, high) seconds to train ``tokens``: tokens / tokens per step x step time."""
        steps = tokens / self.tokens_per_step
        return steps * self.step_time_s, steps * self.step_band_s[0], steps * self.step_band_s[1]

    def to_dict(self, tokens: float, deadline_s: float | None, with_failures_s: float) -> dict[str, Any]:
        """JSON of one scanned count; ``with_failures_s``: its expected wall clock with failures
        (what a deadline is met on)."""
        wall = self.wall_s(tokens)
        out: dict[str, Any] = {"gpus": self.gpus, "days": wall[0] / DAY, "days_band": [wall[1] / DAY, wall[2] / DAY],
                               "days_with_failures": with_failures_s / DAY,
                               "gpu_hours": self.gpus * wall[0] / 3600.0, "step_time_s": self.step_time_s,
                               "layout": dict(self.config)}
        if deadline_s is not None:
            out["meets_deadline"] = with_failures_s <= deadline_s
        return out


def _word(value: Any) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else str(value)


def _band(point: float, low: float, high: float) -> dict[str, Any]:
    return {"value": point, "band": [low, high]}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunModel:
    """How a run really goes, beside its steps: failures, checkpoints, restarts, the facility."""

    failures: FailureModel
    checkpoint_mode: Mode
    storage_bandwidth: float
    interval_s: float | None
    """Work between checkpoints (None: Daly's optimum)."""
    relaunch_s: float
    facility: Facility

    def goodput(self, est: Estimate, tokens: float) -> Goodput:
        """Expected wall clock of ``est``'s layout training ``tokens``, failures included."""
        c = est.checkpoint
        return goodput(est.wall_s(tokens), gpus=est.gpus, failures=self.failures, checkpoint_s=c.blocking_s,
                       restart_s=c.restart_s, interval_s=self.interval_s)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunnerUp:
    """The second-best layout at the chosen GPU count, predicted as the chosen one is: whether
    the plan's choice between them is one the bands can make."""

    overrides: tuple[str, ...]
    step_time_s: float
    step_band_s: tuple[float, float]
    indistinguishable: bool
    """One's predicted step lies inside the other's band (their bands share the model's common
    errors, so this reads cautiously)."""

    @classmethod
    def of(cls, chosen: Estimate, overrides: tuple[str, ...], step_s: float, band: tuple[float, float]) -> RunnerUp:
        low, high = chosen.step_band_s
        inside = low <= step_s <= high or band[0] <= chosen.step_time_s <= band[1]
        return cls(overrides=overrides, step_time_s=step_s, step_band_s=band, indistinguishable=inside)

    def to_dict(self) -> dict[str, Any]:
        return {"set": list(self.overrides), "step_time_s": _band(self.step_time_s, *self.step_band_s),
                "indistinguishable": self.indistinguishable}


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """A whole training run: how long, how many GPU-hours, how much energy and money."""

    source: str
    tokens: float
    mode: str
    """``gpus`` (a GPU count was given or taken from the spec) or ``deadline`` (the fewest GPUs
    among those considered that finish in time)."""
    deadline_s: float | None
    price_per_gpu_hour: float | None
    chosen: Estimate
    power: Power
    considered: tuple[int, ...]
    """GPU counts the deadline search considered, in order (empty for a given count)."""
    scanned: tuple[Estimate, ...]
    """Counts evaluated, in order: for a deadline, each considered count from the compute lower
    bound up to the answer; plus any curve counts asked for."""
    unlayable: tuple[int, ...]
    """Evaluated counts on which no layout of the searched space can run."""
    global_batch: str
    """How the global batch was treated (kept at the spec's value, and why)."""
    residuals: str
    seconds: float
    notes: tuple[str, ...]
    run: RunModel
    runner_up: RunnerUp | None = None
    """The next layout at the chosen count (None: no other layout runs there)."""

    # ---- the run -----------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        return self.chosen.gpus

    @property
    def wall_s(self) -> tuple[float, float, float]:
        return self.chosen.wall_s(self.tokens)

    @property
    def days(self) -> tuple[float, float, float]:
        return tuple(s / DAY for s in self.wall_s)  # type: ignore[return-value]

    @property
    def gpu_hours(self) -> tuple[float, float, float]:
        return tuple(self.gpus * s / 3600.0 for s in self.wall_s)  # type: ignore[return-value]

    @property
    def energy_kwh(self) -> tuple[float, float, float]:
        """GPU board energy: GPUs x average power x wall time (the band scales the time at the
        point prediction's power)."""
        return tuple(self.gpus * self.power.watts * s / 3.6e6 for s in self.wall_s)  # type: ignore[return-value]

    @property
    def cost(self) -> tuple[float, float, float] | None:
        if self.price_per_gpu_hour is None:
            return None
        return tuple(h * self.price_per_gpu_hour for h in self.gpu_hours)  # type: ignore[return-value]

    @property
    def goodput(self) -> Goodput:
        """The run with failures, checkpoints and restarts (:mod:`llmp.planning.reliability`)."""
        return self.run.goodput(self.chosen, self.tokens)

    @property
    def days_with_failures(self) -> tuple[float, float, float]:
        return tuple(s / DAY for s in self.goodput.wall_s)  # type: ignore[return-value]

    @property
    def gpu_hours_with_failures(self) -> tuple[float, float, float]:
        return tuple(self.gpus * s / 3600.0 for s in self.goodput.wall_s)  # type: ignore[return-value]

    @property
    def facility_energy_kwh(self) -> tuple[float, float, float]:
        """Energy at the facility's meter: GPUs x (GPU power + node overhead) x PUE x wall clock with
        failures (a job's GPUs draw power while it restarts and redoes lost work)."""
        watts = self.run.facility.watts_per_gpu(self.power.watts, self.power.tdp_watts)
        return tuple(self.gpus * watts * s / 3.6e6 for s in self.goodput.wall_s)  # type: ignore[return-value]

    @property
    def co2_tonnes(self) -> tuple[float, float, float]:
        """CO2-equivalent of the facility energy at the grid intensity (tonnes)."""
        g = self.run.facility.grid_g_per_kwh
        return tuple(kwh * g / 1e6 for kwh in self.facility_energy_kwh)  # type: ignore[return-value]

    @property
    def steps(self) -> float:
        return self.tokens / self.chosen.tokens_per_step

    def hours_with_failures(self, est: Estimate) -> float:
        """GPU-hours of ``est``'s count, failures and checkpoints included (what a run pays for)."""
        return est.gpus * self.run.goodput(est, self.tokens).wall_s[0] / 3600.0

    @property
    def cheaper(self) -> Estimate | None:
        """For a deadline: the scanned count that trains for the fewest GPU-hours, when the chosen
        count costs at least :data:`COSTLIER` times as many (the price of meeting the date)."""
        if self.deadline_s is None or not self.scanned:
            return None
        best = min(self.scanned, key=self.hours_with_failures)
        if best.gpus == self.gpus or self.hours_with_failures(self.chosen) < COSTLIER * self.hours_with_failures(best):
            return None
        return best

    @property
    def slower_with_more(self) -> tuple[tuple[Estimate, Estimate], ...]:
        """(smaller, larger) scanned counts where the larger one takes longer: with the global batch
        fixed, more GPUs split it into fewer microbatches per replica and communicate more."""
        ordered = sorted(self.scanned, key=lambda e: e.gpus)
        out = []
        for i, small in enumerate(ordered):
            wall = self.run.goodput(small, self.tokens).wall_s[0]
            for large in ordered[i + 1:]:
                if self.run.goodput(large, self.tokens).wall_s[0] > wall:
                    out.append((small, large))
                    break
        return tuple(out)

    @property
    def meets_deadline(self) -> bool | None:
        """Whether the expected wall clock, failures and checkpoints included, meets the deadline."""
        return None if self.deadline_s is None else self.goodput.wall_s[0] <= self.deadline_s

    def to_dict(self) -> dict[str, Any]:
        c = self.chosen
        days, hours, kwh, cost = self.days, self.gpu_hours, self.energy_kwh, self.cost
        return {
            "source": self.source, "mode": self.mode, "tokens": self.tokens, "gpus": self.gpus,
            "deadline_days": None if self.deadline_s is None else self.deadline_s / DAY,
            "meets_deadline": self.meets_deadline,
            "meets_deadline_at_band_high": (None if self.deadline_s is None
                                            else self.goodput.wall_s[2] <= self.deadline_s),
            "days": _band(*days), "gpu_hours": _band(*hours), "energy_kwh": _band(*kwh),
            "cost": None if cost is None else _band(*cost), "price_per_gpu_hour": self.price_per_gpu_hour,
            "step_time_s": _band(c.step_time_s, *c.step_band_s), "roofline_step_time_s": c.roofline_step_s,
            "tokens_per_step": c.tokens_per_step, "tokens_per_s": c.tokens_per_step / c.step_time_s,
            "steps": self.steps, "mfu": c.mfu, "memory_per_gpu_bytes": c.memory_per_gpu_bytes,
            "layout": dict(c.config), "set": list(c.overrides),
            "runner_up": None if self.runner_up is None else self.runner_up.to_dict(),
            "power": {"model": self.power.model.value, "watts_per_gpu": self.power.watts,
                      "tdp_watts": self.power.tdp_watts, "busy_fraction": self.power.busy,
                      "idle_fraction": self.power.idle_fraction, "definition": self.power.describe()},
            "global_batch": self.global_batch, "residuals": self.residuals,
            "search": {"layouts_in_space": c.space, "layouts_checked": c.checked, "layouts_evaluated": c.evaluated},
            "considered_gpus": list(self.considered),
            "scanned": [e.to_dict(self.tokens, self.deadline_s, self.run.goodput(e, self.tokens).wall_s[0])
                        for e in self.scanned],
            "unlayable_gpus": list(self.unlayable), "seconds": self.seconds, "notes": list(self.notes),
            "cheaper": None if (cheap := self.cheaper) is None else {
                "gpus": cheap.gpus, "gpu_hours_with_failures": self.hours_with_failures(cheap),
                "days_with_failures": self.run.goodput(cheap, self.tokens).wall_s[0] / DAY,
                "gpu_hours_ratio": self.hours_with_failures(self.chosen) / self.hours_with_failures(cheap)},
            **self._run_dict(),
        }

    def _run_dict(self) -> dict[str, Any]:
        """The run as it goes: the keys docs/plan.md lists under "Failures, checkpoints, energy"."""
        g, c, f = self.goodput, self.chosen.checkpoint, self.run.facility
        return {
            "effective_training_time_ratio": _band(*g.ettr),
            "days_with_failures": _band(*self.days_with_failures),
            "gpu_hours_with_failures": _band(*self.gpu_hours_with_failures),
            "failures": {"mttf_hours": _band(*(m / 3600.0 for m in g.mttf_s)),
                         "expected_failures": _band(*g.failures),
                         "failures_per_day": _band(*self.run.failures.failures_per_day(self.gpus)),
                         "model": g.failure_model},
            "checkpoint": {"bytes": c.bytes, "asynchronous": c.asynchronous, "why": c.how,
                           "write_s": c.write_s, "blocking_s": c.blocking_s, "restart_s": c.restart_s,
                           "relaunch_s": c.relaunch_s, "storage_bandwidth_bytes_per_s": c.storage_bandwidth,
                           "interval_hours": _band(*(t / 3600.0 for t in g.interval_s)),
                           "interval_rule": g.interval_rule},
            "facility_energy_kwh": _band(*self.facility_energy_kwh), "co2_tonnes": _band(*self.co2_tonnes),
            "facility": {"node_overhead_fraction_of_tdp": f.node_overhead, "pue": f.pue,
                         "grid_g_co2e_per_kwh": f.grid_g_per_kwh,
                         "watts_per_gpu": f.watts_per_gpu(self.power.watts, self.power.tdp_watts),
                         "definition": f.describe()},
        }

    def to_table(self) -> str:
        return "\n".join([*self._totals_lines(), *self._run_lines(), *self._note_lines(), *self._layout_lines(),
                          *self._scan_lines(), *self._footer_lines()])

    def _totals_lines(self) -> list[str]:
        """The headline and the run's totals as if nothing failed."""
        hours, kwh, cost = self.gpu_hours, self.energy_kwh, self.cost
        head = f"plan for {format_count(self.tokens)} tokens of {self.source} on {plural(self.gpus, 'GPU')}"
        if self.deadline_s is not None:
            head += f" (fewest of those considered that finish within {self.deadline_s / DAY:.4g} days)"
        lines = [head, ""]
        lines.append(f"wall clock     {_rng(self.wall_s, format_time)}")
        lines.append(f"GPU-hours      {_rng(hours, format_count)}")
        lines.append(f"energy         {_rng(kwh, format_count)} kWh   ({self.power.watts:.0f} W per GPU)")
        if cost is not None:
            lines.append(f"cost           {_rng(cost, ',.0f')}   at {self.price_per_gpu_hour:g} per GPU-hour")
        return lines

    def _run_lines(self) -> list[str]:
        """The run as it really goes (failures, checkpoints, restarts, the facility), and its step."""
        c, g = self.chosen, self.goodput
        ck, ettr = c.checkpoint, g.ettr
        return ["", "as runs really go (failures, checkpoints, restarts)",
                f"wall clock     {_rng(g.wall_s, format_time)} with failures "
                f"(effective training time {ettr[0]:.1%}, band [{ettr[1]:.1%}, {ettr[2]:.1%}])",
                f"GPU-hours      {_rng(self.gpu_hours_with_failures, format_count)}",
                f"failures       MTTF {format_time(g.mttf_s[0])} on {plural(self.gpus, 'GPU')}, "
                f"{format_count(g.failures[0])} expected over the run",
                f"checkpoints    {format_bytes(ck.bytes)} every {format_time(g.interval_s[0])} of work "
                f"({'async' if ck.asynchronous else 'sync'}: {format_time(ck.blocking_s)} blocked each); restart "
                f"{format_time(ck.restart_s)}",
                f"facility       {_rng(self.facility_energy_kwh, format_count)} kWh   CO2 "
                f"{_rng(self.co2_tonnes, format_count)} t",
                f"step           {format_time(c.step_time_s)}   band [{format_time(c.step_band_s[0])}, "
                f"{format_time(c.step_band_s[1])}]   {format_count(c.tokens_per_step)} tokens/step, "
                f"{format_count(self.steps)} steps, MFU {c.mfu:.1%}"]

    def _note_lines(self) -> list[str]:
        """What the reader should know of the choice: a band that misses the deadline, a cheaper
        count, more GPUs that are slower."""
        c, lines = self.chosen, []
        if self.deadline_s is not None and self.goodput.wall_s[2] > self.deadline_s:
            lines.append(f"note: the slow end of the band ({format_time(self.goodput.wall_s[2])} with failures) "
                         "misses the deadline")
        cheap = self.cheaper
        if cheap is not None:
            ratio = self.hours_with_failures(c) / self.hours_with_failures(cheap)
            cheap_wall = self.run.goodput(cheap, self.tokens).wall_s[0]
            lines.append(f"note: meeting the deadline costs {ratio:.1f}x the GPU-hours of the cheapest count scanned: "
                         f"{plural(cheap.gpus, 'GPU')} take {format_time(cheap_wall)}"
                         f" on {format_count(self.hours_with_failures(cheap))} GPU-hours (llmp plan {self.source} "
                         f"--tokens {self.tokens:.0f} --gpus {cheap.gpus})")
        for small, large in self.slower_with_more:
            lines.append(f"note: {plural(large.gpus, 'GPU')} are slower than {small.gpus}: with the global batch kept, "
                         "each replica gets fewer microbatches (a larger pipeline bubble) and communicates more")
        return lines

    def _layout_lines(self) -> list[str]:
        """The chosen layout, its memory, the search that found it, and the runner-up."""
        c = self.chosen
        shown = ("parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "parallel.vp", "train.micro_batch",
                 "train.recompute", "parallel.sequence_parallel", "parallel.zero")
        layout = "  ".join(f"{p.split('.')[-1]}={_word(c.config[p])}" for p in shown if p in c.config)
        lines = ["", f"layout         {layout}",
                 f"memory/GPU     {format_bytes(c.memory_per_gpu_bytes, binary=True)}",
                 (f"searched       {c.space} layouts, {c.checked} checked, {c.evaluated} evaluated "
                  "(branch-and-bound on a step-time lower bound)")]
        r = self.runner_up
        if r is not None:
            level = f"{LEVEL:.0%}"
            verdict = (f"indistinguishable from this one at {level} (one's step lies inside the other's band): "
                       "measure both before choosing" if r.indistinguishable else
                       f"behind this one beyond the {level} band")
            if r.step_time_s < c.step_time_s:
                verdict += "; predicted faster than the layout above, which search's roofline ranked first"
            lines.append(f"runner-up      {format_time(r.step_time_s)} [{format_time(r.step_band_s[0])}, "
                         f"{format_time(r.step_band_s[1])}], {verdict} (--set {' --set '.join(r.overrides)})")
        return lines

    def _scan_lines(self) -> list[str]:
        """The best layout at each GPU count scanned, when more than one was."""
        if len(self.scanned) <= 1:
            return []
        lines = ["", "GPU count scan (best layout at each)"]
        rows = [(e.gpus, e) for e in self.scanned] + [(n, None) for n in self.unlayable]
        for n, e in sorted(rows, key=lambda r: r[0]):
            if e is None:
                lines.append(f"  {n:>7} GPUs  no layout of the searched space runs")
                continue
            wall = self.run.goodput(e, self.tokens).wall_s
            mark = "" if self.deadline_s is None else ("  meets deadline" if wall[0] <= self.deadline_s else "")
            lines.append(f"  {n:>7} GPUs  {format_time(wall[0]):>9}  {format_count(n * wall[0] / 3600):>9} "
                         f"GPU-hours (with failures){mark}")
        return lines

    def _footer_lines(self) -> list[str]:
        """How to reproduce the step, and where each assumption comes from."""
        c, g = self.chosen, self.goodput
        lines = ["", f"reproduce the step: llmp predict {self.source} " + " ".join(
            f"--set {s!r}" if " " in s else f"--set {s}" for s in c.overrides)]
        lines += [f"global batch: {self.global_batch}", f"power: {self.power.describe()}",
                  f"failures: {g.failure_model}",
                  f"checkpoints: {c.checkpoint.describe()}; interval: {g.interval_rule}",
                  f"energy: {self.run.facility.describe()}",
                  f"residuals: {self.residuals}"]
        lines += [f"note: {n}" for n in self.notes]
        return lines


def _rng(v: tuple[float, ...], fmt: str | Callable[[float], str]) -> str:
    """A value and its band: ``v`` is (point, low, high)."""
    show = fmt if callable(fmt) else (lambda x: f"{x:{fmt}}")
    return f"{show(v[0])}   band [{show(v[1])}, {show(v[2])}]"
