"""Power per GPU over a training run: the two models a plan can state.

* ``tdp`` (default): every GPU draws its board power (the catalog's ``tdp``) for the whole run.
  This is how published training runs report their energy: Meta's Llama 3.1 model card
  ("power consumption is the peak power capacity per GPU device used", 39.3M GPU-hours on
  700 W H100s; meta-llama/llama-models, models/llama3_1/MODEL_CARD.md) and BLOOM's footprint
  (Luccioni et al., JMLR 24(253), 2023, §4: 1,082,990 GPU-hours x 400 W A100 TDP = 433 MWh).
  An upper bound on the boards' energy: GPUs waiting in pipeline bubbles or on exposed
  communication draw less.
* ``utilisation``: P = P_idle + (TDP - P_idle) x u, with u the fraction of the predicted step in
  which the GPU runs compute kernels (the step's breakdown without exposed communication and
  bubble) and P_idle = ``idle_fraction`` x TDP. We found no idle fraction per GPU model we could
  cite, so the caller gives one (measure ``nvidia-smi --query-gpu=power.draw`` on a GPU that
  holds a CUDA context and waits); there is no default. A GPU waiting inside a running job is
  not at its idle power either: telemetry of an academic cluster finds GPUs in a high-power,
  low-activity "execution-idle" state for 19.7% of in-execution time ("The Energy Cost of
  Execution-Idle in GPU Clusters", arXiv:2604.04745), which is why ``tdp`` stays the default.

GPU boards only: no host CPUs, NICs, switches or cooling (PUE); multiply by your facility's
overhead if you have it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from llmp.compose.prediction import COMM
from llmp.errors import InputError


class PowerModel(StrEnum):
    TDP = "tdp"
    UTILISATION = "utilisation"


@dataclass(frozen=True, kw_only=True, slots=True)
class Power:
    """The average power of one GPU over the run and how it was reached."""

    model: PowerModel
    watts: float
    """Average board power per GPU."""
    tdp_watts: float
    busy: float
    """Fraction of the step spent in compute kernels (0..1), from the prediction's breakdown."""
    idle_fraction: float | None
    """P_idle / TDP (the ``utilisation`` model only)."""

    def describe(self) -> str:
        if self.model is PowerModel.TDP:
            return (f"every GPU at its TDP ({self.tdp_watts:.0f} W) for the whole run, as the Llama 3.1 model "
                    "card and BLOOM's footprint count it; GPU boards only")
        return (f"P = P_idle + (TDP - P_idle) x busy = {self.watts:.0f} W per GPU (TDP {self.tdp_watts:.0f} W, "
                f"P_idle {self.idle_fraction:.0%} of TDP, busy {self.busy:.0%} of the step); GPU boards only")


def busy_fraction(breakdown: Mapping[str, float], step_time_s: float) -> float:
    """Share of the step in compute kernels: everything but exposed communication and bubble."""
    waiting = sum(float(v) for k, v in breakdown.items() if k in COMM or k == "bubble")
    return min(1.0, max(0.0, 1.0 - waiting / step_time_s)) if step_time_s > 0 else 0.0


def power(model: PowerModel | str, tdp_watts: float, busy: float, idle_fraction: float | None) -> Power:
    try:
        model = PowerModel(model)
    except ValueError:
        raise InputError(f"unknown power model {model!r}",
                         hint=f"use one of: {', '.join(m.value for m in PowerModel)}") from None
    if model is PowerModel.TDP:
        if idle_fraction is not None:
            raise InputError("an idle power fraction only applies to the utilisation power model",
                             hint="add --power utilisation, or drop --idle-fraction")
        return Power(model=model, watts=tdp_watts, tdp_watts=tdp_watts, busy=busy, idle_fraction=None)
    if idle_fraction is None:
        raise InputError("the utilisation power model needs the GPU's idle power as a fraction of its TDP",
                         hint="e.g. --idle-fraction 0.1 (measure it with nvidia-smi on a waiting GPU), "
                              "or use --power tdp")
    if not 0.0 <= idle_fraction <= 1.0:
        raise InputError(f"the idle power fraction must be between 0 and 1, got {idle_fraction:g}")
    idle = idle_fraction * tdp_watts
    return Power(model=model, watts=idle + (tdp_watts - idle) * busy, tdp_watts=tdp_watts, busy=busy,
                 idle_fraction=idle_fraction)
