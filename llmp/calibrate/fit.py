"""A few physical factors fitted on a few measured steps, shrunk toward the uncalibrated model.

The model of one measured step ``r`` of one stack on one cluster::

    log t_r = log( T_r(theta) + omega * t_ref ) + e_r,        e_r ~ N(0, noise^2)

``T_r(theta)`` is llmp's own composition of the step (the same schedule and overlaps as
``llmp predict``) with every op's time multiplied by ``exp(theta_g)`` of its group ``g``:

* ``tensor``: GEMM and attention kernels (compute efficiency of the tensor-core kernels),
* ``memory``: every other kernel family (norms, elementwise, softmax, loss, embedding, optimizer),
* ``intra`` / ``inter``: collectives inside a node / across nodes (communication efficiency per
  link tier),
* ``host``: the host thread's dispatch and launch costs (the run's CPU against the one they were
  measured on; it moves only steps the host paces),

and ``omega * t_ref`` is a fixed per-step overhead in seconds (``t_ref``: the shortest of the
calibration rows' uncalibrated step times, so ``omega`` is a fraction of the shortest step). The
runs show a fixed overhead only over the lengths they span: a step shorter than ``t_ref`` gets it
in proportion to its length (``posterior.overhead_reach``), so seconds seen on long steps are not
added whole to a step a tenth as long (on llm-foundry's A100 runs, three steps of 9-35 s put 3.9 s
on a 0.6 s step).

The prior is the uncalibrated model's own uncertainty (``compose.band``): ``theta ~ N(0, S)``
with ``S = diag(sigma_g^2) + c^2 (1 1^T)``, ``sigma_g`` the time-weighted error of the group's
families in the calibration rows (store intervals, or the roofline's measured error; for the
host, the spread of host CPUs against the measuring one, ``llmp.stacks.host.HOST_SPEED``), ``c^2``
the composition term's second moment (what the ops cannot see, shared by every group; both at
the scales the runs support, below), and
``omega ~ HalfNormal(exp(above) - 1)``: an overhead as large as the composition term lets the
unseen part of a step be (its upper width ``above``). ``noise`` starts at the composition term's
``within``: the spread of one stack on one cluster around its own systematic error, measured on
the dev sources.

How far the runs may move the factors is itself estimated from the runs (empirical Bayes, the
evidence approximation: MacKay, "Bayesian interpolation", Neural Computation 4(3), 1992; Bishop,
*Pattern Recognition and Machine Learning*, 2006, sec. 3.5). The prior's two parts get a scale
each, ``theta ~ N(0, a S_shift + b S_own)``: ``S_shift`` the shift every device group shares,
``S_own`` each group's own error. ``a`` and ``b`` maximise the marginal likelihood of the runs,
linearised at the current factors, with the noise integrated out under a scaled inverse
chi-square hyperprior of ``NOISE_PSEUDO_ROWS`` pseudo-runs at the prior noise, and a log-uniform
hyperprior on each part's variance as the runs see it (:func:`hyper`). So a part moves
only as far as the runs show it beyond their own scatter: runs that agree with the uncalibrated
model within their spread give ``a = 0`` and the factors stay at the prior (the zero-shot
prediction, never worse than it by more than chance); a shift every run shows is followed; group
factors that the runs cannot tell apart (their steps lean on the groups alike) add no likelihood,
their scale stays at 0 and they stay at the prior. Once the runs' scatter is known it also sets
the band's spread (``Posterior.noise``).

Fit: at those scales and noise, the maximum a posteriori point (Levenberg-Marquardt on the
whitened residuals, ``omega`` projected onto ``>= 0``); then the scales and noise again at that
point, until they repeat (``HYPER_ITERATIONS``). Whether there is an overhead at all is a choice
between two models, with and without it, each with its own scales, by their evidence (the
marginal likelihood :func:`hyper` maximises, the overhead's half-normal read on its half line;
Bayesian Occam's razor): on
runs of one length an added second and a multiplied factor explain the data equally and the
simpler, multiplicative model wins (it carries a correction to configurations of other sizes
neutrally); an overhead is fitted only when runs of different lengths show one
(``OVERHEAD_EVIDENCE``). Uncertainty: the Laplace approximation at the chosen point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from llmp.analytic.op import Scope
from llmp.compose import band
from llmp.compose.band import CompositionTerm
from llmp.compose.posterior import (
    GROUPS,
    NOISE_PSEUDO_ROWS,
    PARAMS,
    Group,
    Posterior,
    Prior,
    group_index,
    overhead_reach,
    step_times,
)
from llmp.compose.priced import Priced
from llmp.errors import InputError
from llmp.stacks.host import HOST_SPEED

OVERHEAD_EVIDENCE = 1.0
"""Log Bayes factor above which the overhead is fitted: "positive" evidence on Kass and Raftery's
scale (J. Am. Stat. Assoc. 90, 1995, sec. 3.2: 2 ln B > 2), so a near tie keeps the simpler model."""
HYPER_ITERATIONS = 6
"""Most rounds of (scales and noise at the factors, factors at them); they end early when the
scales and the noise repeat."""
SCALES: tuple[float, ...] = (0.0, *(float(v) for v in np.geomspace(1e-3, 16.0, 60)))
"""The grid of the prior's scales: 0 (the factor held at the uncalibrated model), then 0.001 to 16
times the zero-shot variance in steps of 18%; 16 (four times its width) lets runs far outside the
zero-shot band be followed without making the prior flat."""
NOISES: tuple[float, ...] = tuple(float(v) for v in np.geomspace(0.02, 20.0, 200))
"""The grid of the noise, as multiples of the prior noise (steps of 3.5%)."""
STEP = 1e-3
"""Finite-difference step of the factors (log space) for the Jacobian."""
TOLERANCE = 1e-5
"""The fit stops when no parameter moves by more than this (log factors: a 0.001% change)."""


def prior_of(rows: Sequence[Priced], term: CompositionTerm) -> Prior:
    """The prior (module docstring) from the rows' own operator errors and the composition term."""
    num = np.zeros(len(GROUPS))
    den = np.zeros(len(GROUPS))
    for p in rows:
        errors = band.op_errors(p.graph, p.correction, p.spec.cluster.gpu.id)
        gi = group_index(p.graph)
        per_layer = float(p.graph.layers_per_chunk)
        for op, t, s, g in zip(p.graph.ops, p.times, errors.sigma, gi):
            w = t * float(op.count) * (per_layer if op.scope is Scope.LAYER else 1.0)
            num[g] += w * s**2
            den[g] += w
    measured = den > 0
    widest = float(np.sqrt(num[measured] / den[measured]).max()) if measured.any() else 1.0
    sigma = tuple(float(math.sqrt(num[g] / den[g])) if measured[g] else widest for g in range(len(GROUPS)))
    # The host's factor: the run's CPU against the measuring one (llmp.stacks.host.HOST_SPEED).
    sigma = tuple(math.sqrt((HOST_SPEED.below**2 + HOST_SPEED.above**2) / 2) if GROUPS[g] is Group.HOST else v
                  for g, v in enumerate(sigma))
    shift = math.sqrt((term.below**2 + term.above**2) / 2)
    return Prior(sigma=sigma, shift=shift, overhead=max(math.expm1(term.above), 1e-3), noise=max(term.within, 1e-3))


def _whiten(prior: Prior) -> np.ndarray:
    """``W`` with ``W^T W = S^-1``: the prior residual of ``theta`` is ``W theta``."""
    return np.linalg.inv(np.linalg.cholesky(prior.covariance))


@dataclass(frozen=True, kw_only=True, slots=True)
class Hyper:
    """The prior's two scales and the noise, estimated from the runs (module docstring)."""

    shift: float
    """Multiplies the prior variance of the shift every device group shares."""
    contrast: float
    """Multiplies the prior variance of each group's own factor."""
    noise: float
    evidence: float
    """The log marginal likelihood with the hyperpriors at these scales, the noise integrated out
    (up to a constant shared by the models with and without an overhead)."""


def hyper(jac: np.ndarray, pseudo: np.ndarray, prior: Prior) -> Hyper:
    """The type-II maximum of the linearised model ``pseudo = jac x + e`` (module docstring): the
    marginal likelihood of the runs under ``theta ~ N(0, shift S_shift + contrast S_own)`` (and,
    when ``jac`` has the overhead's column, the overhead at its own prior, as a normal) and ``e ~
    N(0, noise^2)``, times the noise's scaled inverse chi-square hyperprior and, per part (shift,
    own factors, overhead), a log-uniform hyperprior on the variance the runs see of it (``scale g
    + noise^2 / k``, ``g`` the part's mean variance per run at scale 1; the overhead's scale is 1
    or, without its column, 0). The noise is integrated out on :data:`NOISES` and the scales
    maximised on :data:`SCALES` x :data:`SCALES` (every point of the grid at once); the noise
    returned is its posterior mean (root mean square) at those scales.

    The scale hyperprior is what keeps few runs from costing accuracy. With one part and k runs
    whose mean misfit is ``m`` (standard error ``s``), the flat hyperprior moves the model by
    ``m (1 - s^2 / m^2)`` where that is positive, the log-uniform one by ``m (1 - 3 s^2 / m^2)``.
    Simulated (a normal mean, its squared error against the uncalibrated model's): where the true
    shift is 0.6 ``s``, the worst case for any shrinkage, the flat rule costs 1.6 times the
    uncalibrated model's error and this one 1.1 times; at 1.5 ``s`` and beyond both gain (0.55 and
    0.73 of it at 1.5 ``s``, 0.16 and 0.29 at 3 ``s``)."""
    k, n = jac.shape
    g = len(GROUPS)
    parts = [np.zeros((n, n)) for _ in range(3)]  # the shift, each group's own, the overhead
    parts[0][:g, :g], parts[1][:g, :g] = prior.parts
    if n > g:
        parts[2][g, g] = prior.overhead**2
    shared, own, overhead = parts
    scales = np.asarray(SCALES)
    sigma = scales[:, None, None, None] * shared + scales[None, :, None, None] * own + overhead  # (s, c, n, n)
    w, v = np.linalg.eigh(sigma)
    root = (v * np.sqrt(np.clip(w, 0.0, None))[..., None, :]) @ np.swapaxes(v, -1, -2)  # Sigma^(1/2)
    gram = root @ (jac.T @ jac) @ root
    mu, basis = np.linalg.eigh(gram)
    proj = np.einsum("scji,scj->sci", basis, root @ (jac.T @ pseudo))  # V^T Sigma^(1/2) J^T r
    var = np.asarray(NOISES)[:, None] ** 2 * prior.noise**2  # (m, 1)
    mu = np.clip(mu, 0.0, None)[:, :, None, :]  # (s, c, 1, n)
    logdet = k * np.log(var[:, 0]) + np.log1p(mu / var).sum(-1)  # (s, c, m)
    quad = (float(pseudo @ pseudo) - (proj[:, :, None, :] ** 2 / (var + mu)).sum(-1)) / var[:, 0]
    nu = NOISE_PSEUDO_ROWS
    log_hyper = -(nu / 2 + 1) * np.log(var[:, 0]) - nu * prior.noise**2 / (2 * var[:, 0])
    seen = [float(np.trace(jac @ part @ jac.T)) / k for part in parts]  # per run, at scale 1
    per_run = var[:, 0] / k
    log_scale = (-np.log(scales[:, None, None] * seen[0] + per_run) - np.log(scales[None, :, None] * seen[1] + per_run)
                 - np.log(seen[2] + per_run))
    # the noise integrated out, not maximised: three runs barely know it, and its maximum would
    # understate it (the grid is even in log noise: d noise^2 = 2 noise^2 d log noise)
    joint = -0.5 * (logdet + quad) + log_hyper + log_scale + np.log(var[:, 0])
    top = joint.max(axis=-1, keepdims=True)
    weight = np.exp(joint - top)
    evidence = top[..., 0] + np.log(weight.sum(-1))  # (s, c)
    s, c = np.unravel_index(int(np.argmax(evidence)), evidence.shape)
    mean_var = float(weight[s, c] @ var[:, 0] / weight[s, c].sum())
    return Hyper(shift=float(scales[s]), contrast=float(scales[c]), noise=math.sqrt(mean_var),
                 evidence=float(evidence[s, c]))


def fit(rows: Sequence[Priced], measured_s: Sequence[float], term: CompositionTerm) -> Posterior:
    """The posterior of the factors given measured step times of ``rows`` (module docstring)."""
    k = len(rows)
    if k == 0 or k != len(measured_s):
        raise InputError("calibration needs at least one measured step, each with its prediction")
    y = np.log(np.asarray(measured_s, float))
    base = np.asarray([p.step_time(p.times) for p in rows], float)
    t_ref = float(base.min())
    prior = prior_of(rows, term)
    models = {o: _empirical(rows, y, t_ref, prior, overhead=o) for o in (False, True)}
    log_bayes = (models[True][1].evidence + models[True][0].half_line) - models[False][1].evidence
    chosen, h = models[log_bayes > OVERHEAD_EVIDENCE]
    x = chosen.x
    j, jp = chosen.jacobian, chosen.prior_rows
    cov = np.zeros((len(PARAMS), len(PARAMS)))
    free = len(x)
    inner = np.linalg.inv(j.T @ j / h.noise**2 + jp.T @ jp)
    cov[:free, :free] = (inner + inner.T) / 2
    mean = np.zeros(len(PARAMS))
    mean[:free] = x
    return Posterior(mean=tuple(float(v) for v in mean), covariance=tuple(tuple(float(v) for v in r) for r in cov),
                     t_ref=t_ref, noise=chosen.spread(prior.noise, inner), prior=prior, rows=k,
                     overhead_log_bayes=float(log_bayes), scale_shift=h.shift, scale_contrast=h.contrast)


def _empirical(rows: Sequence[Priced], y: np.ndarray, t_ref: float, prior: Prior, *,
               overhead: bool) -> tuple[_Solution, Hyper]:
    """One model (with or without the overhead): the scales and the noise at the factors, the
    factors at them, until the scales and the noise repeat."""
    x = np.zeros(len(GROUPS) + int(overhead))
    seen: set[tuple[float, float, float]] = set()
    for _ in range(HYPER_ITERATIONS):
        f, jac = _Problem(rows=rows, y=y, t_ref=t_ref, prior=prior, whiten=np.eye(len(GROUPS))).model(x)
        h = hyper(jac, y - f + jac @ x, prior)
        scaled = prior.scaled(h.shift, h.contrast)
        solution = _Problem(rows=rows, y=y, t_ref=t_ref, prior=scaled, whiten=_whiten(scaled)).solve(
            overhead=overhead, noise=h.noise, start=x)
        x = solution.x
        if (h.shift, h.contrast, h.noise) in seen:
            break
        seen.add((h.shift, h.contrast, h.noise))
    return solution, h


@dataclass(frozen=True, kw_only=True, slots=True)
class _Solution:
    x: np.ndarray
    """MAP of the free parameters (the four log factors, and the overhead when fitted)."""
    jacobian: np.ndarray
    """d log step / d x per row at ``x``."""
    prior_rows: np.ndarray
    """The whitened prior's rows (``P = prior_rows^T prior_rows`` is the prior precision)."""
    misfit: np.ndarray
    """log measured - log calibrated, per row."""
    half_line: float
    """With the overhead: the log of twice the share of its Laplace Gaussian on ``>= 0`` (its prior
    is a half-normal; the evidence of :func:`hyper` reads it as a normal); 0 without."""
    noise: float
    """The noise it was solved at."""

    def spread(self, prior_noise: float, inner: np.ndarray) -> float:
        """The spread of one new run around the calibrated model: the posterior mean of the noise
        variance, ``(nu s0^2 + RSS) / (nu + k - p_eff - 2)`` (scaled inverse chi-square with
        ``nu = NOISE_PSEUDO_ROWS`` pseudo-runs at ``s0 = prior_noise``; ``p_eff`` the effective
        number of fitted parameters, ``inner`` the Laplace covariance), at the fitted point: the
        misfit the factors leave, with what the runs leave unknown of the noise."""
        p_eff = float(np.trace(self.jacobian @ inner @ self.jacobian.T)) / self.noise**2
        dof = NOISE_PSEUDO_ROWS + max(len(self.misfit) - p_eff, 0.0) - 2
        return math.sqrt((NOISE_PSEUDO_ROWS * prior_noise**2 + float(self.misfit @ self.misfit)) / dof)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Problem:
    """The MAP problem on the calibration rows, with or without the overhead."""

    rows: Sequence[Priced]
    y: np.ndarray
    t_ref: float
    prior: Prior
    whiten: np.ndarray

    def model(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log step time per row and its Jacobian in ``x`` (the log factors [, overhead])."""
        g = len(GROUPS)
        probe = np.vstack([np.zeros(g), STEP * np.eye(g)])  # the point and one step per group
        theta, omega = x[:g], (x[g] if len(x) > g else 0.0)
        out, jac = np.empty(len(self.rows)), np.empty((len(self.rows), len(x)))
        for r, p in enumerate(self.rows):
            t = step_times(p, theta + probe)
            reach = overhead_reach(t, self.t_ref)
            total = t + omega * self.t_ref * reach
            out[r] = math.log(total[0])
            jac[r, :g] = (np.log(total[1:]) - out[r]) / STEP
            if len(x) > g:
                jac[r, g] = self.t_ref * reach[0] / total[0]
        return out, jac

    def prior_rows(self, n: int) -> np.ndarray:
        g = len(GROUPS)
        jp = np.zeros((n, n))
        jp[:g, :g] = self.whiten
        if n > g:
            jp[g, g] = 1 / self.prior.overhead
        return jp

    def solve(self, *, overhead: bool, noise: float, start: np.ndarray | None = None) -> _Solution:
        n = len(GROUPS) + int(overhead)
        jp = self.prior_rows(n)

        def residuals(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f, j = self.model(x)
            return np.concatenate([(self.y - f) / noise, jp @ x]), np.vstack([-j / noise, jp])

        x = _minimise(residuals, np.zeros(n) if start is None else start, bounded=overhead)
        f, j = self.model(x)
        half_line = 0.0
        if overhead:  # the half-normal has twice the normal's density, on the half line only: keep
            # the share of the Laplace Gaussian that lies there
            sd = math.sqrt(float(np.linalg.inv(j.T @ j / noise**2 + jp.T @ jp)[-1, -1]))
            half_line = math.log(2) + math.log(max(NormalDist().cdf(x[-1] / sd), 1e-300))
        return _Solution(x=x, jacobian=j, prior_rows=jp, misfit=self.y - f, half_line=half_line, noise=noise)


def _minimise(residuals: Any, start: np.ndarray, *, bounded: bool, iterations: int = 100) -> np.ndarray:
    """Levenberg-Marquardt from ``start`` on ``residuals(x) -> (r, J)``; ``bounded``: the last
    parameter is kept >= 0 (held at 0 while the step would push it below)."""
    x = np.array(start, float)
    n = len(x)
    r, j = residuals(x)
    cost = float(r @ r)
    damping = 1e-3
    for _ in range(iterations):
        free = np.ones(n, bool)
        if bounded and x[-1] <= 0.0 and (j.T @ r)[-1] > 0:  # the gradient pushes the overhead below 0
            free[-1] = False
        jf = j[:, free]
        h = jf.T @ jf
        step = np.zeros(n)
        step[free] = np.linalg.solve(h + damping * (np.diag(np.diag(h)) + 1e-9 * np.eye(len(h))), -(jf.T @ r))
        trial = x + step
        if bounded:
            trial[-1] = max(trial[-1], 0.0)
        if float(np.abs(trial - x).max()) < TOLERANCE:
            break
        with np.errstate(over="ignore", invalid="ignore"):
            r_new, j_new = residuals(trial)
        new_cost = float(r_new @ r_new)
        if math.isfinite(new_cost) and new_cost < cost:
            done = cost - new_cost <= 1e-10 * cost
            x, r, j, cost = trial, r_new, j_new, new_cost
            damping = max(damping / 3, 1e-9)
            if done:
                break
        else:
            damping *= 4
            if damping > 1e10:
                break
    return x
