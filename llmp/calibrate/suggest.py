"""Which runs to measure before calibrating: the layouts that pin down the factors best.

A calibration (``fit.py``) learns a log factor per group (tensor-core kernels, the other
kernels, collectives inside and across nodes, the host thread) and a per-step overhead. A run
tells it about a factor in proportion to how much of the run's step that factor scales: a
host-bound run says nothing of the network, a one-node run nothing of the inter-node links. So
the runs worth measuring are those whose steps lean on different factors.

This is a Bayesian D-optimal design (Chaloner and Verdinelli, "Bayesian experimental design: a
review", Statistical Science 10(3), 1995, sec. 2.1): each candidate run ``r`` is linearised at
the uncalibrated model, ``log t_r ~ log T_r + j_r . theta``, with ``j_r`` its step's elasticity
to each parameter (finite differences of the very composition ``llmp predict`` runs); with the
calibration's own prior precision ``A0`` and run-to-run noise, measuring a set ``R`` leaves the
posterior precision ``A0 + sum_r j_r j_r^T / noise^2``. Runs are picked greedily to maximise its
log determinant (the matrix determinant lemma makes each step a quadratic form; greedy is within
``1 - 1/e`` of the best set, the criterion being submodular). The candidates are the layouts
``llmp search`` finds feasible for the spec.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llmp.analytic.correction import Residuals
from llmp.calibrate.fit import prior_of
from llmp.compose import band
from llmp.compose.band import CompositionTerm
from llmp.compose.posterior import PARAMS, step_times
from llmp.compose.predictor import priced
from llmp.compose.priced import Priced
from llmp.errors import InfeasibleError, InputError
from llmp.progress import Progress, tick
from llmp.search import load, search
from llmp.search.space import row_spec

STEP = 1e-2
"""Finite-difference step of the log factors (1%): the step's elasticity to each group."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Pick:
    """One run worth measuring."""

    overrides: tuple[str, ...]
    """``--set`` arguments that turn the spec into this run's layout."""
    step_time_s: float
    """Its uncalibrated predicted step."""
    shares: dict[str, float]
    """Its step's elasticity to each factor (and to the overhead, as a fraction of the shortest
    candidate's step): what measuring it teaches."""
    gain: float
    """How much it adds to the log determinant of the posterior precision, given the runs picked
    before it (nats): the information it brings that they do not."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Suggestion:
    """The runs to measure, in order, and what they leave unknown."""

    spec: str
    candidates: int
    """Feasible layouts considered."""
    picks: tuple[Pick, ...]
    prior_sd: dict[str, float]
    """Each parameter's prior standard deviation (log factor; the overhead as a fraction)."""
    expected_sd: dict[str, float]
    """Each parameter's standard deviation once the picks are measured (linearised)."""

    def to_dict(self) -> dict[str, object]:
        return {"spec": self.spec, "candidates": self.candidates,
                "picks": [{"set": list(p.overrides), "step_time_s": p.step_time_s, "shares": p.shares,
                           "gain_nats": p.gain} for p in self.picks],
                "prior_sd": self.prior_sd, "expected_sd": self.expected_sd}


def elasticities(p: Priced, t_ref: float) -> np.ndarray:
    """``d log T / d theta_g`` for each group at the uncalibrated point, then ``d log T / d omega``
    (the overhead ``omega * t_ref``): central differences of the composition."""
    groups = len(PARAMS) - 1
    base = float(p.step_time(p.times))
    theta = np.vstack([STEP * np.eye(groups), -STEP * np.eye(groups)])
    t = step_times(p, theta)
    rows = (np.log(t[:groups]) - np.log(t[groups:])) / (2 * STEP)
    return np.append(rows, t_ref / base)


def design(rows: np.ndarray, precision: np.ndarray, noise: float, n: int) -> tuple[list[int], list[float], np.ndarray]:
    """Greedy Bayesian D-optimal choice of ``n`` of ``rows`` (module docstring): the indices in
    the order picked, each one's gain in log determinant, and the posterior covariance after all."""
    cov = np.linalg.inv(precision)
    chosen: list[int] = []
    gains: list[float] = []
    for _ in range(min(n, len(rows))):
        quad = np.einsum("ij,jk,ik->i", rows, cov, rows) / noise**2
        quad[chosen] = -np.inf
        best = int(np.argmax(quad))
        chosen.append(best)
        gains.append(float(math.log1p(quad[best])))
        v = cov @ rows[best] / noise
        cov = cov - np.outer(v, v) / (1.0 + quad[best])  # Sherman-Morrison: one run's rank-one update
    return chosen, gains, cov


def suggest(spec: str | os.PathLike[str], n: int, *, gpus: Sequence[int] = (), sets: Sequence[str] = (),
            residuals: Residuals | str | os.PathLike[str] | None = "default", term: CompositionTerm | None = None,
            candidates: int = 60, progress: Progress | None = None) -> Suggestion:
    """The ``n`` runs of ``spec``'s layouts (on ``gpus`` GPUs, or its own count) worth measuring to
    calibrate its stack on its cluster (``llmp calibrate --suggest N``); ``candidates``: how many of
    the fastest feasible layouts are considered; ``progress``: told of each candidate priced.

    The search ranks the layouts by the roofline composition (``residuals=None``: the set of the
    ``candidates`` fastest is the same, and no band is drawn for them); each candidate's spec is
    the loaded spec with the search's fields replaced (``search.space.row_spec``), not the text
    parsed again."""
    if not 1 <= n <= 50:
        raise InputError(f"--suggest needs a count of runs from 1 to 50, got {n}",
                         hint="three to five runs are what a calibration usually needs")
    source = os.fspath(spec)
    loaded, resolve = load(source, sets)
    found = search(loaded, gpus=gpus, layouts=not gpus, top=candidates, resolve=resolve, residuals=None)
    rows: list[tuple[tuple[str, ...], Priced]] = []
    for i, c in enumerate(found.ranked):
        tick(progress, i, len(found.ranked))
        layout = row_spec(loaded, {p: np.asarray([v], dtype=object) for p, v in c.config.items()}, 0)
        try:
            rows.append(((*sets, *c.overrides()), priced(layout, residuals)))
        except InfeasibleError:
            continue
    if not rows:
        raise InputError(f"no feasible layout of {source} to suggest runs from",
                         hint="llmp search SPEC --gpus N lists why each layout is dropped")
    term = term if term is not None else band.composition_term()
    prior = prior_of([p for _, p in rows], term)
    t_ref = min(float(p.step_time(p.times)) for _, p in rows)
    jac = np.asarray([elasticities(p, t_ref) for _, p in rows])
    tick(progress, len(found.ranked), len(found.ranked))
    groups = len(PARAMS) - 1
    precision = np.zeros((len(PARAMS), len(PARAMS)))
    precision[:groups, :groups] = np.linalg.inv(prior.covariance)
    precision[groups, groups] = 1.0 / prior.overhead**2
    chosen, gains, cov = design(jac, precision, prior.noise, n)
    prior_cov = np.linalg.inv(precision)
    picks = tuple(Pick(overrides=rows[i][0], step_time_s=float(rows[i][1].step_time(rows[i][1].times)),
                       shares={k: float(v) for k, v in zip(PARAMS, jac[i])}, gain=g) for i, g in zip(chosen, gains))
    return Suggestion(spec=source, candidates=len(rows), picks=picks,
                      prior_sd={k: float(math.sqrt(prior_cov[i, i])) for i, k in enumerate(PARAMS)},
                      expected_sd={k: float(math.sqrt(max(cov[i, i], 0.0))) for i, k in enumerate(PARAMS)})
