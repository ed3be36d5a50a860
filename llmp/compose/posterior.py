"""A calibration's fitted factors, and how they correct a step: what ``llmp.predict``, the sweep
and the band apply. ``llmp.calibrate`` (above this package) fits them; the model is in
``llmp/calibrate/fit.py``'s docstring.

Every op's time is multiplied by ``exp(theta_g)`` of its group ``g`` (the tensor-core kernels,
the other kernels, collectives inside a node, across nodes), the host thread's costs by
``exp(theta_host)`` (the run's CPU against the one they were measured on), and a fixed per-step
overhead is added. :class:`Posterior` holds the factors' posterior: its point, and its band by drawing the
factors and one run's spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from llmp.analytic.kernels import Collective, Family, Tier
from llmp.analytic.op import OpGraph
from llmp.compose import band
from llmp.compose.priced import Priced

NOISE_PSEUDO_ROWS = 3.0
"""How many runs' worth of weight the dev estimate of the noise keeps against the user's own residuals
(the degrees of freedom of its scaled inverse chi-square hyperprior)."""
SCALE_FLOOR = 1e-4
"""A prior scale of 0 (the runs do not show that part) is held at this: a standard deviation 1% of
the zero-shot one, which keeps the factor within a fraction of a percent of the uncalibrated model."""


class Group(StrEnum):
    """What one calibration factor multiplies."""

    TENSOR = "tensor"
    MEMORY = "memory"
    INTRA = "intra"
    INTER = "inter"
    HOST = "host"
    """The host thread's costs (no op's device time): how fast the run's CPU issues kernels."""


GROUPS: tuple[Group, ...] = tuple(Group)
HOST_INDEX = GROUPS.index(Group.HOST)
PARAMS: tuple[str, ...] = (*(g.value for g in GROUPS), "overhead")
"""The fitted parameters: a log factor per group, then the overhead (a fraction of ``t_ref``)."""
TENSOR_FAMILIES = frozenset({Family.GEMM, Family.ATTENTION})


def group_of(work: Any) -> Group:
    """The group of a kernel or collective (module docstring)."""
    if isinstance(work, Collective):
        return Group.INTER if work.tier is Tier.INTER else Group.INTRA
    return Group.TENSOR if work.family in TENSOR_FAMILIES else Group.MEMORY


def group_index(graph: OpGraph) -> np.ndarray:
    """Per op of ``graph``: the index of its group in :data:`GROUPS`."""
    return np.asarray([GROUPS.index(group_of(op.work)) for op in graph.ops], dtype=np.int64)


def scaled(graph: OpGraph, times: Sequence[Any], theta: np.ndarray) -> list[Any]:
    """Per-op ``times`` (numbers or arrays of configurations) multiplied by their group's factor:
    ``theta`` holds a log factor per group, or ``(m, groups)`` of them (then every time becomes ``m``
    draws); the host's factor multiplies no op (:func:`host_scale`)."""
    factor = np.exp(np.asarray(theta, float))
    per_group = [factor[..., g] for g in range(len(GROUPS))]
    return [t * per_group[g] for t, g in zip(times, group_index(graph))]


def host_scale(theta: np.ndarray) -> Any:
    """The factor on the host thread's costs of each row of ``theta``."""
    return np.exp(np.asarray(theta, float)[..., HOST_INDEX])


def overhead_reach(step_s: Any, t_ref: float) -> Any:
    """The share of a calibration's per-step overhead a step of ``step_s`` seconds (calibrated,
    before the overhead) gets: all of it from the shortest calibration step ``t_ref`` up, in
    proportion to the step below it. The runs show a fixed overhead only over the lengths they
    span; below them the correction keeps the ratio the shortest run showed, never more seconds
    than the step itself could hide. ``t_ref`` 0: all of it on every step."""
    step = np.asarray(step_s, float)
    return np.minimum(1.0, step / t_ref) if t_ref > 0 else np.ones_like(step)


def step_times(p: Priced, theta: np.ndarray, overhead_s: np.ndarray | float = 0.0, t_ref: float = 0.0) -> np.ndarray:
    """Calibrated step time of ``p`` for each row of ``theta`` (``(m, groups)`` log factors): one
    composition on arrays of ``m`` draws, plus the per-step overhead in seconds (at its
    :func:`overhead_reach` for steps shorter than ``t_ref``)."""
    theta = np.atleast_2d(np.asarray(theta, float))
    t = np.asarray(p.step_time(scaled(p.graph, p.times, theta), host_scale(theta)), float)
    return t + overhead_s * overhead_reach(t, t_ref)


@dataclass(frozen=True, kw_only=True, slots=True)
class Prior:
    """The uncalibrated model's uncertainty, as the prior of the factors."""

    sigma: tuple[float, ...]
    """Per group: the log-space error of its families in the calibration rows."""
    shift: float
    """Log-space width of the error every group shares (the composition term's second moment)."""
    overhead: float
    """Scale of the half-normal prior of the overhead, as a fraction of ``t_ref``."""
    noise: float
    """Prior log-space spread of one run around the calibrated model."""

    @property
    def parts(self) -> tuple[np.ndarray, np.ndarray]:
        """The covariance's two parts: the shift the device's groups share (the host's factor, the
        run's CPU, shares nothing with them) and each group's own ``diag(sigma^2)``."""
        shared = np.ones(len(self.sigma))
        shared[HOST_INDEX] = 0.0
        return self.shift**2 * np.outer(shared, shared), np.diag(np.asarray(self.sigma) ** 2)

    @property
    def covariance(self) -> np.ndarray:
        shared, own = self.parts
        return shared + own

    def scaled(self, shift: float, contrast: float) -> Prior:
        """This prior with the shared shift's variance times ``shift`` and each group's own times
        ``contrast`` (each at least :data:`SCALE_FLOOR`, so the covariance stays invertible)."""
        return replace(self, shift=self.shift * math.sqrt(max(shift, SCALE_FLOOR)),
                       sigma=tuple(s * math.sqrt(max(contrast, SCALE_FLOOR)) for s in self.sigma))

    def to_dict(self) -> dict[str, Any]:
        return {"sigma": dict(zip((g.value for g in GROUPS), self.sigma)), "shift": self.shift,
                "overhead": self.overhead, "noise": self.noise}


@dataclass(frozen=True, kw_only=True, slots=True)
class Posterior:
    """The fitted factors and their uncertainty (Laplace approximation)."""

    mean: tuple[float, ...]
    """MAP of :data:`PARAMS`: a log factor per group, then the overhead as a fraction of ``t_ref``."""
    covariance: tuple[tuple[float, ...], ...]
    t_ref: float
    """Seconds: the shortest uncalibrated step time among the calibration rows (the overhead's unit)."""
    noise: float
    """Log-space spread of one run around the calibrated model (re-estimated from the rows)."""
    prior: Prior
    rows: int
    overhead_log_bayes: float = 0.0
    """Log Bayes factor of the model with a per-step overhead over the one without (> 0: the
    overhead was fitted; else it is held at 0)."""
    scale_shift: float
    """The prior variance of the shared shift the runs support, as a multiple of the zero-shot one
    (0: the runs show no shift beyond their own scatter, and the factors stay at the prior)."""
    scale_contrast: float
    """The same for each group's own factor (0: the runs cannot tell the groups apart)."""

    @property
    def factors(self) -> dict[str, float]:
        """Per group: how much slower (> 1) or faster than predicted its ops run."""
        return {g.value: math.exp(m) for g, m in zip(GROUPS, self.mean)}

    @property
    def overhead_s(self) -> float:
        """The fitted per-step overhead in seconds (what a step of ``t_ref`` or longer gets)."""
        return self.mean[-1] * self.t_ref

    def overhead_at(self, step_s: Any) -> Any:
        """Seconds of overhead added to calibrated steps of ``step_s`` (numbers or arrays):
        :func:`overhead_reach` of the fitted overhead."""
        return self.overhead_s * overhead_reach(step_s, self.t_ref)

    def to_dict(self) -> dict[str, Any]:
        return {"factors": self.factors, "overhead_s": self.overhead_s, "params": list(PARAMS),
                "mean": list(self.mean), "covariance": [list(r) for r in self.covariance], "t_ref_s": self.t_ref,
                "noise": self.noise, "prior": self.prior.to_dict(), "rows": self.rows,
                "overhead_log_bayes": self.overhead_log_bayes, "scale_shift": self.scale_shift,
                "scale_contrast": self.scale_contrast}

    def point(self, p: Priced) -> float:
        """Calibrated step time of ``p``."""
        return float(step_times(p, np.asarray(self.mean[:-1]), self.overhead_s, self.t_ref)[0])

    def band(self, p: Priced, level: float, draws: int = band.DRAWS) -> band.Band:
        """The calibrated band of ``p``: the factors and overhead drawn from the posterior
        (overhead clipped at 0), composed, then one run's spread (``noise``)."""
        level = band.check_level(level)
        n = len(PARAMS)
        z = band.normal_draws(draws, n + 1)
        chol = np.linalg.cholesky(np.asarray(self.covariance) + 1e-12 * np.eye(n))
        x = np.asarray(self.mean) + z[:, :n] @ chol.T
        omega = np.maximum(x[:, -1], 0.0)
        t = step_times(p, x[:, :-1], omega * self.t_ref, self.t_ref)
        resid = self.noise * z[:, -1]
        log_y = np.log(t) + resid
        low, high = band.quantiles(log_y, level)
        columns = {name: (x[:, i] if name != "overhead" else omega) for i, name in enumerate(PARAMS)}
        share = band.shares(log_y, {**columns, "residual": resid})
        terms = []
        for i, name in enumerate(PARAMS):
            sd = math.sqrt(max(self.covariance[i][i], 0.0)) * (self.t_ref if name == "overhead" else 1.0)
            what = (f"posterior of the per-step overhead ({self.overhead_s:.4g} s, sd {sd:.3g} s)" if name == "overhead"
                    else f"posterior of the {name} factor (x{math.exp(self.mean[i]):.3f}, log sd {sd:.3f})")
            runs = f"{self.rows} measured step{'s' if self.rows != 1 else ''}"
            terms.append(band.Term(name=name, kind="calibration", sigma_below=sd, sigma_above=sd, share=share[name],
                                   source=f"{what}, fitted on {runs}"))
        terms.append(band.Term(name="residual", kind="residual", sigma_below=self.noise, sigma_above=self.noise,
                               share=share["residual"], source=(
                                   "spread of one new run around the calibrated model: the posterior mean of the "
                                   f"noise variance ({NOISE_PSEUDO_ROWS:g} pseudo-runs at the dev sources' "
                                   f"within-stack spread, and the {self.rows} runs' misfit)")))
        return band.Band(low=low, high=high, level=level, draws=draws, method="calibrated", terms=tuple(terms),
                         uncovered=())
