"""Few-sample adaptation of the shared residual model to a new device.

With no samples of its own, a device is predicted through the shared model from its spec
numbers (the device features). With k samples of its own (k <= 30 per family), two ways, chosen
by what is at hand (benchmarks/unseen_gpu.py compares them, with continued boosting as a third):

* the other devices' samples are available (``llmp fit OLD... NEW --upweight NEW_ID``):
  refit the shared model on all of them, the new device's samples weighted to a quarter of each
  family's weight (``weighted``). The trees then learn where the new device departs from the
  others, shape by shape. A refit (weighted or not) was the most accurate adaptation at every k
  on every held-out GPU of the benchmark; the weighting helped most on the A40 (k = 5: 10.8% vs
  14.0% MAPE) and cost a little on the A100 (13.5% vs 12.7%).
* only a fitted store is available (``llmp fit NEW --base MODELDIR``): keep the shared trees and
  correct them per family by a ridge-regularised line in the log roofline time,

      log factor_new = log factor_shared + a + b * (log_t_roof - c)

  (``fit_adjustments``): a level (the device's achievable fraction of peak) and a tilt with
  size (launch and tail costs weigh more on a faster device). Two parameters per family do not
  overfit 5 samples; the ridge terms shrink ``a`` and (harder) ``b`` to zero when the samples do
  not support them.

Active choice of the k samples: cut a family's candidate shapes into k equal-count strata of the
log roofline time and, in each, pick the one where the shared model is least sure (spread of its
bootstrap members, else the conformal half-width). Picking the k most uncertain shapes outright
was worse in the benchmark: they are the extremes (one-token GEMMs, giant vocabularies), and a
correction fitted on extremes does not transfer to the bulk of the shapes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, Kernel
from llmp.errors import InputError
from llmp.hardware.spec import Device
from llmp.residuals import features
from llmp.residuals.model import Observation, ResidualModel, row_key
from llmp.residuals.store import Adjustment, Residuals

RIDGE_OFFSET = 0.5
"""Prior weight (in samples) pulling the offset to 0."""
RIDGE_SLOPE = 4.0
"""Prior weight (in samples, on a standardised feature) pulling the slope to 0."""
ADJUST_FEATURE = {"default": "log_t_roof", "collective": "log_t_base"}


def _feature_for(family: str) -> str:
    return ADJUST_FEATURE["default"] if family in {f.value for f in features.Family} else ADJUST_FEATURE["collective"]


def _observation_blocks(obs: Sequence[Observation]) -> tuple[dict[str, features.Block], np.ndarray, Device]:
    devices = {o.device.id for o in obs}
    if len(devices) != 1:
        raise InputError(f"adaptation samples must come from one device, got {sorted(devices)}")
    device = obs[0].device
    links = next((o.links for o in obs if o.links is not None), None)
    blocks, _ = features.blocks([o.item for o in obs], device, links=links)
    return blocks, np.asarray([o.seconds for o in obs]), device


def select_active(model: ResidualModel | Residuals, items: Sequence[Kernel | Collective], device: Device, k: int, *,
                  links: Links | None = None,
                  blocks: dict[str, features.Block] | None = None) -> np.ndarray:
    """Indices of ``k`` candidates per family to measure first (see module docstring).

    Per family, the candidates are cut into ``k`` equal-count strata of the adjustment feature
    (log roofline time); in each stratum the one the shared model is least sure of is picked.
    The strata keep the picks representative of the pool (a line fitted through them holds
    across it); the uncertainty decides within a stratum.
    """
    if blocks is None:
        blocks, _ = features.blocks(items, device, links=links)
    pred = model.predict(items, device, links=links, blocks=blocks)
    uncertainty = np.where(pred.spread > 0, pred.spread, pred.q)
    chosen: list[int] = []
    for fam, block in blocks.items():
        n = len(block.index)
        if k <= 0 or n == 0:
            continue
        if k >= n:
            chosen.extend(int(i) for i in block.index)
            continue
        x = block.X[:, block.names.index(_feature_for(fam))]
        order = np.argsort(x, kind="stable")
        u = uncertainty[block.index]
        for stratum in np.array_split(order, k):
            chosen.append(int(block.index[stratum[int(np.argmax(u[stratum]))]]))
    return np.asarray(sorted(chosen), dtype=np.int64)


def fit_adjustments(base: Residuals, observations: Sequence[Observation], *, alpha: float | None = None,
                    slope: bool = True) -> dict[str, Adjustment]:
    """Per-family (offset, slope) corrections of ``base`` from a few samples of one device."""
    if not observations:
        return {}
    blocks, seconds, device = _observation_blocks(observations)
    alpha = base.model.alpha if alpha is None else alpha
    out: dict[str, Adjustment] = {}
    for fam, block in blocks.items():
        keys = [row_key(base.model.group_by, observations[i].item, device) for i in block.index]
        if not any(key in base.model.models_ for key in keys):
            continue  # no shared model to adjust: the family stays uncovered
        pred = base.model.predict_block(block, keys)
        y = np.log(seconds[block.index] / block.base_s)
        r = y - pred.log_factor
        feature = _feature_for(fam)
        x = block.X[:, block.names.index(feature)]
        a, b, c = _ridge_line(r, x, slope=slope)
        q = _loo_q(r, x, alpha, slope=slope) if len(r) >= 5 else None
        out[fam] = Adjustment(offset=a, slope=b, feature=feature, center=c, n=len(r), q=q)
    return out


def _ridge_line(r: np.ndarray, x: np.ndarray, *, slope: bool) -> tuple[float, float, float]:
    """Minimise sum (r - a - b (x - c)/s)^2 + RIDGE_OFFSET a^2 + RIDGE_SLOPE b^2; return a, b/s, c."""
    c = float(x.mean())
    s = float(x.std()) or 1.0
    z = (x - c) / s
    n = len(r)
    if not slope or n < 3:
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
    """A copy of ``model`` whose group boosters were continued on one device's samples."""
    import copy

    import xgboost

    blocks, seconds, device = _observation_blocks(observations)
    out = copy.copy(model)
    out.models_ = dict(model.models_)
    for block in blocks.values():
        keys = {row_key(model.group_by, observations[i].item, device) for i in block.index}
        for key in keys:
            if key not in model.models_:
                continue
            y = np.log(seconds[block.index] / block.base_s)
            params = {**model.models_[key].get_params(), "n_estimators": rounds}
            reg = xgboost.XGBRegressor(**params)
            out.models_[key] = reg.fit(block.X, y, xgb_model=model.models_[key].get_booster())
    return out
