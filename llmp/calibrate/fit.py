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
calibration rows' uncalibrated step times, so ``omega`` is a fraction of the shortest step).

The prior is the uncalibrated model's own uncertainty (``compose.band``): ``theta ~ N(0, S)``
with ``S = diag(sigma_g^2) + c^2 (1 1^T)``, ``sigma_g`` the time-weighted error of the group's
families in the calibration rows (store intervals, or the roofline's measured error; for the
host, the spread of host CPUs against the measuring one, ``llmp.stacks.host.HOST_SPEED``), ``c^2``
the composition term's second moment (what the ops cannot see, shared by every group), and
``omega ~ HalfNormal(exp(above) - 1)``: an overhead as large as the composition term lets the
unseen part of a step be (its upper width ``above``). ``noise`` starts at the composition term's
``within``: the spread of one stack on one cluster around its own systematic error, measured on
the dev sources.

Fit: the maximum a posteriori point (Levenberg-Marquardt on the whitened residuals, ``omega``
projected onto ``>= 0``); with few rows the prior holds the factors near 1 (a ridge toward the
uncalibrated model), so one run cannot pull the model further than its evidence warrants, and k
runs move it as far as k runs do. Whether there is an overhead at all is a choice between two
models, with and without it, by their Laplace evidence (Bayesian Occam's razor): on runs of one
length an added second and a multiplied factor explain the data equally and the simpler,
multiplicative model wins (it carries a correction to configurations of other sizes neutrally);
an overhead is fitted only when runs of different lengths show one (``OVERHEAD_EVIDENCE``). Uncertainty: the Laplace
approximation at the chosen point. The noise is estimated with the factors (alternating until
both settle): ``NOISE_PSEUDO_ROWS`` pseudo-rows of the prior noise plus the fit's residual sum of
squares, over the rows left after the effective number of fitted parameters. So a user whose runs
agree closely is shrunk less (and gets a narrower band) than one whose runs scatter.
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
    step_times,
)
from llmp.compose.priced import Priced
from llmp.errors import InputError
from llmp.stacks.host import HOST_SPEED

OVERHEAD_EVIDENCE = 1.0
"""Log Bayes factor above which the overhead is fitted: "positive" evidence on Kass and Raftery's
scale (J. Am. Stat. Assoc. 90, 1995, sec. 3.2: 2 ln B > 2), so a near tie keeps the simpler model."""
NOISE_ITERATIONS = 6
"""Rounds of (factors at the noise, noise at the factors); they settle in two to four."""
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


def fit(rows: Sequence[Priced], measured_s: Sequence[float], term: CompositionTerm) -> Posterior:
    """The posterior of the factors given measured step times of ``rows`` (module docstring)."""
    k = len(rows)
    if k == 0 or k != len(measured_s):
        raise InputError("calibration needs at least one measured step, each with its prediction")
    y = np.log(np.asarray(measured_s, float))
    base = np.asarray([p.step_time(p.times) for p in rows], float)
    t_ref = float(base.min())
    prior = prior_of(rows, term)
    problem = _Problem(rows=rows, y=y, t_ref=t_ref, prior=prior, whiten=_whiten(prior))
    noise = prior.noise
    starts: dict[bool, np.ndarray | None] = {False: None, True: None}
    for _ in range(NOISE_ITERATIONS):  # the noise and the factors, each at the other's estimate
        solved = {o: problem.solve(overhead=o, noise=noise, start=starts[o]) for o in (False, True)}
        starts = {o: sol.x for o, sol in solved.items()}
        log_bayes = solved[True].evidence - solved[False].evidence
        chosen = solved[log_bayes > OVERHEAD_EVIDENCE]
        updated = chosen.noise_estimate(prior.noise, k)
        converged = abs(updated - noise) <= 1e-3 * noise
        noise = updated
        if converged:
            break
    x, j, jp = chosen.x, chosen.jacobian, chosen.prior_rows
    cov = np.zeros((len(PARAMS), len(PARAMS)))
    free = len(x)
    inner = np.linalg.inv(j.T @ j / noise**2 + jp.T @ jp)
    cov[:free, :free] = (inner + inner.T) / 2
    mean = np.zeros(len(PARAMS))
    mean[:free] = x
    return Posterior(mean=tuple(float(v) for v in mean), covariance=tuple(tuple(float(v) for v in r) for r in cov),
                     t_ref=t_ref, noise=noise, prior=prior, rows=k, overhead_log_bayes=float(log_bayes))


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
    evidence: float
    """Laplace approximation of the log marginal likelihood (up to a constant shared by both models)."""
    noise: float
    """The noise it was solved at."""

    def noise_estimate(self, prior_noise: float, k: int) -> float:
        """The noise after these residuals: ``NOISE_PSEUDO_ROWS`` pseudo-rows of ``prior_noise``
        plus the residual sum of squares, over the rows left after the effective parameters."""
        j, jp = self.jacobian, self.prior_rows
        hess = j.T @ j / self.noise**2 + jp.T @ jp
        p_eff = float(np.trace(j @ np.linalg.solve(hess, j.T))) / self.noise**2
        rss = float(self.misfit @ self.misfit)
        return math.sqrt((NOISE_PSEUDO_ROWS * prior_noise**2 + rss) / (NOISE_PSEUDO_ROWS + max(k - p_eff, 0.0)))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Problem:
    """The MAP problem on the calibration rows, with or without the overhead."""

    rows: Sequence[Priced]
    y: np.ndarray
    t_ref: float
    prior: Prior
    whiten: np.ndarray

    def model(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log step time per row and its Jacobian in ``x`` (four log factors [, overhead])."""
        g = len(GROUPS)
        probe = np.vstack([np.zeros(g), STEP * np.eye(g)])  # the point and one step per group
        theta, omega = x[:g], (x[g] if len(x) > g else 0.0)
        out, jac = np.empty(len(self.rows)), np.empty((len(self.rows), len(x)))
        for r, p in enumerate(self.rows):
            t = step_times(p, theta + probe)
            total = t[0] + omega * self.t_ref
            out[r] = math.log(total)
            jac[r, :g] = (t[1:] - t[0]) / STEP / total
            if len(x) > g:
                jac[r, g] = self.t_ref / total
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
        r, _ = residuals(x)
        hess = j.T @ j / noise**2 + jp.T @ jp
        _, logdet_h = np.linalg.slogdet(hess)
        _, logdet_p = np.linalg.slogdet(jp.T @ jp)
        evidence = -0.5 * float(r @ r) - 0.5 * logdet_h + 0.5 * logdet_p
        if overhead:  # the half-normal has twice the normal's density, on the half line only: keep
            # the share of the Laplace Gaussian that lies there
            sd = math.sqrt(float(np.linalg.inv(hess)[-1, -1]))
            evidence += math.log(2) + math.log(max(NormalDist().cdf(x[-1] / sd), 1e-300))
        return _Solution(x=x, jacobian=j, prior_rows=jp, misfit=self.y - f, evidence=evidence, noise=noise)


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
