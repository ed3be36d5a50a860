"""Few-sample adaptation of a residual store to a new device.

With no samples of its own, a device is predicted through a store from its spec numbers (the
device features; a cross-GPU store is fitted for exactly that). With k samples of its own, two
ways, chosen by what is at hand (benchmarks/unseen_gpu.py compares them, with continued boosting
as a third):

* the other devices' samples are available (``llmp fit OLD... NEW --upweight NEW_ID``):
  refit the shared model on all of them, the new device's samples weighted to a quarter of each
  family's weight (``weighted``). The trees then learn where the new device departs from the
  others, shape by shape. A refit (weighted or not) was the most accurate adaptation at every k
  on every held-out GPU of the benchmark; the weighting helped most on the A40 (k = 5: 10.8% vs
  14.0% MAPE) and cost a little on the A100 (13.5% vs 12.7%).
* only a fitted store is available (``llmp fit NEW --base STORE --budget K``): keep the store's
  trees and correct them per (operator, pass) stratum by a ridge-regularised line in the log
  roofline time (``fit_adjustments``),

      log factor_new = log factor_store + a + b * (log_t_roof - c)

  a level (the device's achievable fraction of peak for that operator) and a tilt with size
  (launch and tail costs weigh more on a faster device). The ridge terms shrink ``a`` and
  (harder) ``b`` to zero when a stratum's few samples do not support them, and the whole line is
  then shrunk toward no correction (k = 0) by the evidence (``_shrinkage``: empirical Bayes over
  the strata): three samples that scatter as much as they depart from the store move it little,
  so whichever rows are picked, k = 3 stays near k = 0 unless its samples agree (issue 24: with
  the ridge alone, llmp's own active picks at k = 3 were worse than k = 0). GEMM strata add an
  offset per GEMM layout (linear, Q K^T, P V: ``model.gemm_layout``) where those samples depart
  from the stratum's line by more than their noise (``_layouts``).

Why per stratum, not per family: a device speeds operators of one family up differently (a
fused RoPE backward and a GELU forward are both "elementwise"). A per-family line fitted on the
samples of one operator moved every other operator of the family with it: at k = 5 all five
elementwise picks were RoPE backward, and adapting on them took GELU from 13% to 155% error. An
adjustment now applies only to the stratum it was fitted on, so a stratum without samples keeps
the store's prediction exactly: adaptation can never make it worse.

The k samples are chosen actively (below), at random per stratum (``select_random``, seeded:
``llmp fit --budget K --seed S``), or named by their sample keys (``picked``: ``--picks FILE``).

Active choice of the k samples (``select_active``): per stratum, cut the candidate shapes into
k equal-count bins of the log roofline time (coverage of the stratum's shape range) and, in each,
pick the one the store is least sure of (spread of its bootstrap members, else the conformal
half-width; among equally unsure ones the bin's middle shape); the picks come most uncertain
first. Picking the k most uncertain shapes outright
was worse in the benchmark: they are the extremes (one-token GEMMs, giant vocabularies), and a
correction fitted on extremes does not transfer to the bulk of the shapes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, Kernel
from llmp.errors import InputError
from llmp.hardware.spec import Device
from llmp.residuals import features
from llmp.residuals.adjustment import Adjustment, Stratum
from llmp.residuals.forest import Forest
from llmp.residuals.model import Observation, ResidualModel, gemm_layout, row_key, stratum_of
from llmp.residuals.store import Residuals
from llmp.residuals.transfer import CrossGpuModel

RIDGE_OFFSET = 0.5
"""Prior weight (in samples) pulling the offset to 0."""
RIDGE_SLOPE = 4.0
"""Prior weight (in samples, on a standardised feature) pulling the slope to 0."""
SLOPE_MIN_SAMPLES = 10
"""Fewer samples of a stratum fit its level only: on the public data (benchmarks/unseen_gpu.py) a
line through 5 GEMM samples tilted by their scatter and made the held-out GEMMs worse than k = 0."""
PRIOR_DOF = 4.0
"""Samples' worth of the pooled scatter a stratum's own scatter is pulled toward (``_shrinkage``)."""
LAYOUT_MIN_SAMPLES = 3
"""Fewer samples of a GEMM layout never move it apart from its stratum."""
ADJUST_FEATURE = {"default": "log_t_roof", "collective": "log_t_base"}


def _feature_for(family: str) -> str:
    return ADJUST_FEATURE["default"] if family in {f.value for f in features.Family} else ADJUST_FEATURE["collective"]


def _one_device(obs: Sequence[Observation]) -> Device:
    devices = {o.device.id for o in obs}
    if len(devices) != 1:
        raise InputError(f"adaptation samples must come from one device, got {sorted(devices)}",
                         hint="adapt to one device at a time (--device-id, or one device's sample files)")
    return obs[0].device


def _observation_blocks(obs: Sequence[Observation]) -> tuple[dict[str, features.Block], np.ndarray, Device]:
    device = _one_device(obs)
    links = next((o.links for o in obs if o.links is not None), None)
    blocks, _ = features.blocks([o.item for o in obs], device, links=links)
    return blocks, np.asarray([o.seconds for o in obs]), device


def select_active(model: ResidualModel | CrossGpuModel | Residuals, items: Sequence[Kernel | Collective],
                  device: Device, k: int, *,
                  links: Links | None = None, blocks: dict[str, features.Block] | None = None) -> np.ndarray:
    """Indices of up to ``k`` candidates per (operator, pass) stratum to measure or use first.

    Per stratum the candidates are cut into ``k`` equal-count bins of the adjustment feature (log
    roofline time); in each bin the one the model is least sure of is picked. A stratum with at
    most ``k`` candidates gives all of them. The result lists the strata's first picks, then
    their second picks, ..., each round most uncertain first, so any prefix is a fair sample.
    """
    if k < 1:
        raise InputError(f"the budget must be a positive number of samples per stratum, got {k}")
    if blocks is None:
        blocks, _ = features.blocks(items, device, links=links)
    pred = model.predict(items, device, links=links, blocks=blocks, spread=True)
    uncertainty = np.where(pred.spread > 0, pred.spread, pred.q)
    per_stratum: list[list[int]] = []
    for fam, block in blocks.items():
        x = block.X[:, block.names.index(_feature_for(fam))]
        rows: dict[Stratum, list[int]] = {}
        for row, i in enumerate(block.index):
            rows.setdefault(stratum_of(items[i]), []).append(row)
        for members in rows.values():
            order = np.asarray(members)[np.argsort(x[members], kind="stable")]
            bins = np.array_split(order, min(k, len(order)))
            picks = [int(block.index[b[_middle_of_most_uncertain(uncertainty[block.index[b]])]]) for b in bins]
            per_stratum.append(sorted(picks, key=lambda i: -uncertainty[i]))
    ranked = [sorted((p[r] for p in per_stratum if r < len(p)), key=lambda i: -uncertainty[i])
              for r in range(max(map(len, per_stratum), default=0))]
    return np.asarray([i for level in ranked for i in level], dtype=np.int64)


def _middle_of_most_uncertain(u: np.ndarray) -> int:
    """Position (in a bin sorted by size) of the candidate to pick: the most uncertain, and among
    equally uncertain ones the middle one. A store without bootstrap members (the cross-GPU store)
    gives every shape of an operator the same band, and the first of the ties was the smallest
    shape of every bin: its picks leaned launch-bound, and at k = 3 its corrections were worse
    than random picks' (benchmarks/unseen_gpu.py, 2026-11-28)."""
    top = np.flatnonzero(u >= u.max() - 1e-12 * max(1.0, abs(float(u.max()))))
    return int(top[len(top) // 2])


def fit_adjustments(base: Residuals, observations: Sequence[Observation], *, alpha: float | None = None,
                    slope: bool = True) -> dict[Stratum, Adjustment]:
    """Per-(operator, pass) corrections of ``base`` from a few samples of one device.

    Each stratum's line is fitted on that stratum's samples only (relative to the base trees; the
    base store's own adjustments, made for another device, are not carried over), then shrunk
    toward no correction by the evidence (:func:`_shrinkage`); GEMM strata add an offset per GEMM
    layout whose samples depart from the stratum's line (:func:`_layouts`). A stratum the base
    store has no model of is adapted from the bare roofline; strata without samples get no
    adjustment.
    """
    if not observations:
        return {}
    blocks, seconds, device = _observation_blocks(observations)
    alpha = base.model.alpha if alpha is None else alpha
    items = [o.item for o in observations]
    links = next((o.links for o in observations if o.links is not None), None)
    # The base model's own prediction (a per-device or a cross-GPU store), without its adjustments.
    pred = base.model.predict(items, device, links=links, blocks=blocks)
    strata: list[tuple[Stratum, np.ndarray, np.ndarray, str, list[int]]] = []
    for fam, block in blocks.items():
        r_all = np.log(seconds[block.index] / block.base_s) - pred.log_factor[block.index]
        feature = _feature_for(fam)
        x_all = block.X[:, block.names.index(feature)]
        by_stratum: dict[Stratum, list[int]] = {}
        for row, i in enumerate(block.index):  # a stratum the base has no model of adapts the roofline
            by_stratum.setdefault(stratum_of(observations[i].item), []).append(row)
        for stratum, rows in sorted(by_stratum.items()):
            strata.append((stratum, r_all[rows], x_all[rows], feature, [int(block.index[r]) for r in rows]))
    weights = _shrinkage([r for _, r, _, _, _ in strata])
    out: dict[Stratum, Adjustment] = {}
    for (stratum, r, x, feature, index), w in zip(strata, weights):
        a, b, c = _ridge_line(r, x, slope=slope)
        a, b = w * a, w * b
        layouts = _layouts([items[i] for i in index], r - (a + b * (x - c)))
        q = _loo_q(r, x, alpha, slope=slope) if len(r) >= 5 else None
        out[stratum] = Adjustment(offset=a, slope=b, feature=feature, center=c, n=len(r), q=q, layouts=layouts)
    return out


def _shrinkage(residuals: Sequence[np.ndarray]) -> list[float]:
    """Per stratum, the share of its samples' correction to keep: the empirical-Bayes weight
    tau^2 / (tau^2 + s^2 / n) of a stratum mean among strata whose true offsets scatter by tau
    around 0 (no correction: k = 0's prediction), each mean measured with noise s^2 / n.

    ``s^2`` is the stratum's own scatter pulled toward the scatter pooled over all strata (three
    samples say little about their own spread); ``tau^2`` is what the strata's means scatter by
    beyond their noise (method of moments). A stratum whose few samples agree on a large offset
    keeps nearly all of it; samples that scatter as much as they depart from 0 are discounted, so
    three unlucky picks cannot move a stratum far from where the store stood without them.
    """
    if not residuals:
        return []
    n = np.asarray([len(r) for r in residuals], dtype=np.float64)
    means = np.asarray([float(r.mean()) for r in residuals])
    ss = np.asarray([float(((r - r.mean()) ** 2).sum()) for r in residuals])
    dof = n - 1
    pooled = float(ss.sum() / dof.sum()) if dof.sum() > 0 else float(np.mean(means ** 2))
    s2 = (ss + PRIOR_DOF * pooled) / (dof + PRIOR_DOF)
    noise = s2 / n
    tau2 = max(0.0, float(np.mean(means ** 2 - noise)))
    if tau2 == 0.0:
        return [0.0] * len(residuals)
    return [float(tau2 / (tau2 + v)) for v in noise]


def _layouts(items: Sequence[Kernel | Collective], r: np.ndarray) -> tuple[tuple[str, float], ...]:
    """Offsets of the GEMM layouts (``model.gemm_layout``) whose samples depart from their stratum's
    correction: a layout with at least ``LAYOUT_MIN_SAMPLES`` samples keeps the positive-part
    James-Stein share max(0, 1 - se^2 / d^2) of its mean departure ``d`` (``se`` its standard
    error), so a departure its samples cannot tell from noise is dropped, and one they agree on kept."""
    by: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by.setdefault(gemm_layout(item), []).append(i)
    if len(by) < 2 or "" in by:
        return ()
    out = []
    for layout, rows in sorted(by.items()):
        if len(rows) < LAYOUT_MIN_SAMPLES:
            continue
        d = float(r[rows].mean())
        se2 = float(r[rows].var(ddof=1)) / len(rows)
        keep = max(0.0, 1.0 - se2 / d ** 2) if d else 0.0
        if keep > 0:
            out.append((layout, keep * d))
    return tuple(out)


def _ridge_line(r: np.ndarray, x: np.ndarray, *, slope: bool) -> tuple[float, float, float]:
    """Minimise sum (r - a - b (x - c)/s)^2 + RIDGE_OFFSET a^2 + RIDGE_SLOPE b^2; return a, b/s, c."""
    c = float(x.mean())
    s = float(x.std()) or 1.0
    z = (x - c) / s
    n = len(r)
    if not slope or n < SLOPE_MIN_SAMPLES:
        return float(r.sum() / (n + RIDGE_OFFSET)), 0.0, c
    A = np.array([[n + RIDGE_OFFSET, z.sum()], [z.sum(), (z * z).sum() + RIDGE_SLOPE]])
    a, b = np.linalg.solve(A, np.array([r.sum(), (r * z).sum()]))
    return float(a), float(b / s), c


def _loo_q(r: np.ndarray, x: np.ndarray, alpha: float, *, slope: bool) -> float:
    """Conformal half-width from leave-one-out residuals of the adjusted prediction."""
    loo = np.empty(len(r))
    for i in range(len(r)):
        keep = np.arange(len(r)) != i
        a, b, c = _ridge_line(r[keep], x[keep], slope=slope)
        loo[i] = r[i] - (a + b * (x[i] - c))
    level = min(1.0, math.ceil((len(r) + 1) * (1 - alpha)) / len(r))
    return float(np.quantile(np.abs(loo), level, method="higher"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Adaptation:
    """The result of adapting a store to a device with a budget of samples per stratum."""

    device: Device
    adjustments: dict[Stratum, Adjustment]
    chosen: tuple[int, ...]
    """Indices of the observations used, in the order they were chosen."""
    unused: tuple[int, ...]
    """Indices of the observations left out (score the adapted store on them: ``score.score``)."""
    strata: dict[Stratum, tuple[int, int]]
    """Per stratum: (samples chosen, samples available)."""


CHOICES = ("active", "random")
"""How ``adapt`` picks its budget of samples: ``select_active`` or ``select_random``."""


def select_random(items: Sequence[Kernel | Collective], k: int, seed: int) -> np.ndarray:
    """Indices of up to ``k`` candidates per (operator, pass) stratum, drawn at random (seeded),
    listed as ``select_active`` lists its picks: every stratum's first, then second, ..."""
    if k < 1:
        raise InputError(f"the budget must be a positive number of samples per stratum, got {k}")
    rng = np.random.default_rng(seed)
    rows: dict[Stratum, list[int]] = {}
    for i, item in enumerate(items):
        rows.setdefault(stratum_of(item), []).append(i)
    per_stratum = [[int(i) for i in rng.permutation(members)[:k]] for _, members in sorted(rows.items())]
    return np.asarray([p[r] for r in range(k) for p in per_stratum if r < len(p)], dtype=np.int64)


def picked(observations: Sequence[Observation], keys: Sequence[str]) -> np.ndarray:
    """Indices of the observations whose sample keys are ``keys`` (``llmp fit --picks``)."""
    where = {o.key: i for i, o in enumerate(observations) if o.key}
    missing = [k for k in keys if k not in where]
    if missing:
        raise InputError(f"{len(missing)} of the {len(keys)} picked keys are not among the samples: {missing[0]!r}",
                         hint="picks name rows by the key column of the sample files given")
    return np.asarray(sorted({where[k] for k in keys}), dtype=np.int64)


def adapt(base: Residuals, observations: Sequence[Observation], budget: int | None = None, *,
          alpha: float | None = None, choice: str = "active", seed: int = 0,
          picks: Sequence[str] | None = None) -> Adaptation:
    """Adapt ``base`` to the device of ``observations`` with ``budget`` samples per (operator,
    pass) stratum, chosen by ``choice`` (``active``: ``select_active``; ``random``:
    ``select_random`` seeded by ``seed``), or with the rows whose keys are ``picks``; neither a
    budget nor picks: every sample."""
    if not observations:
        raise InputError("no samples to adapt with")
    if choice not in CHOICES:
        raise InputError(f"unknown choice of samples {choice!r}", hint=f"choose one of {', '.join(CHOICES)}")
    if picks is not None and budget is not None:
        raise InputError("a budget chooses samples, picks name them: give one of --budget and --picks")
    device = _one_device(observations)
    if picks is not None:
        chosen = picked(observations, picks)
    elif budget is None:
        chosen = np.arange(len(observations))
    elif choice == "random":
        chosen = select_random([o.item for o in observations], budget, seed)
    else:
        links = next((o.links for o in observations if o.links is not None), None)
        chosen = select_active(base.model, [o.item for o in observations], device, budget, links=links)
    taken = set(chosen.tolist())
    strata: dict[Stratum, tuple[int, int]] = {}
    for i, o in enumerate(observations):
        used, available = strata.get(stratum_of(o.item), (0, 0))
        strata[stratum_of(o.item)] = (used + (i in taken), available + 1)
    adjustments = fit_adjustments(base, [observations[int(i)] for i in chosen], alpha=alpha)
    return Adaptation(device=device, adjustments=adjustments, chosen=tuple(int(i) for i in chosen),
                      unused=tuple(i for i in range(len(observations)) if i not in taken),
                      strata=dict(sorted(strata.items())))


def weighted(base: Sequence[Observation], new: Sequence[Observation], *, share: float = 0.25) -> list[Observation]:
    """``base + new`` with the new device's samples weighted to ``share`` of each family's weight.

    A refit on many samples of other devices plus k of the new one is the best adaptation when
    the other devices' samples are at hand (benchmarks/unseen_gpu.py); without weights, 30
    samples among thousands barely move the trees.
    """
    base_n: dict[str, int] = {}
    new_n: dict[str, int] = {}
    for o in base:
        base_n[features.family_of(o.item)] = base_n.get(features.family_of(o.item), 0) + 1
    for o in new:
        new_n[features.family_of(o.item)] = new_n.get(features.family_of(o.item), 0) + 1
    out = list(base)
    for o in new:
        fam = features.family_of(o.item)
        w = max(1.0, share / (1 - share) * base_n.get(fam, 0) / new_n[fam])
        out.append(dataclasses.replace(o, weight=w))
    return out


def continue_boosting(model: ResidualModel, observations: Sequence[Observation], *, rounds: int = 40) -> ResidualModel:
    """A copy of ``model`` whose group boosters were continued on one device's samples (with the
    model's own hyper-parameters and monotone constraints)."""
    import copy

    blocks, seconds, device = _observation_blocks(observations)
    out = copy.copy(model)
    out.models_ = dict(model.models_)
    for fam, block in blocks.items():
        keys = [row_key(model.group_by, observations[i].item, device) for i in block.index]
        for key in set(keys):
            if key not in model.models_:
                continue
            rows = np.asarray([r for r, k in enumerate(keys) if k == key])
            y = np.log(seconds[block.index[rows]] / block.base_s[rows])
            reg = model._regressor(fam, model.random_state).set_params(n_estimators=rounds)
            reg.fit(block.X[rows], y, xgb_model=model.models_[key].to_xgboost().get_booster())
            out.models_[key] = Forest.of(reg)
    return out
