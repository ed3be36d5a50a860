"""A spec priced: its operator graph with each op's analytic time and residual correction
(:class:`Priced`, which :func:`~llmp.compose.predictor.priced` builds).

Kept apart from the predictor so that what composes a priced spec again (a calibration's
posterior, :mod:`~llmp.compose.posterior`, which the predictor applies) imports the type plainly.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.correction import Correction, Residuals
from llmp.analytic.op import OpGraph
from llmp.analytic.pricing import Prices
from llmp.compose import band
from llmp.compose.overlap import OverlapRules
from llmp.compose.step import Step, compose
from llmp.spec.spec import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Priced:
    """A spec's operator graph with each op's analytic time and residual correction: everything
    the composition needs, so the point, the band's draws and ``llmp calibrate`` compose the same."""

    spec: Spec
    graph: OpGraph
    prices: Prices
    correction: Correction
    residuals: Residuals | None
    note: str
    """How the residual store was chosen."""
    errors: band.OpErrors
    """Each op's error in the zero-shot band (``band.op_errors``)."""
    gpu_flops: float
    """FLOPs one GPU executes per step (:func:`~llmp.compose.predictor.gpu_flops`), for the HFU: reused with
    the prices."""

    @property
    def times(self) -> list[float]:
        """Seconds per call of every op after its residual factor."""
        return list(map(operator.mul, map(float, self.prices.time),
                        np.asarray(self.correction.factor, dtype=float).tolist()))

    def compose(self, times: Sequence[Any], host_scale: Any = 1.0) -> Step:
        """The step for per-op ``times`` (floats, or arrays of draws), the host's costs multiplied by
        ``host_scale`` (a number, or an array of draws)."""
        rules = OverlapRules.of(self.spec)
        if not (isinstance(host_scale, (int, float)) and host_scale == 1.0):
            rules = dataclasses.replace(rules, host_scale=host_scale)
        return compose(self.graph, times, rules, self.spec.parallel.schedule)

    def step_time(self, times: Sequence[Any], host_scale: Any = 1.0) -> Any:
        return self.compose(times, host_scale).step_time
