"""``ResidualModel``: one XGBoost regressor per group, learning log(t_measured / t_analytic).

sklearn conventions (STYLE.md rule 19): ``__init__`` only stores its arguments; ``fit`` validates
and sets the fitted attributes, which end in ``_``; ``predict`` raises ``NotFittedError`` before
``fit``. The target is the log ratio of the measured time to the analytic (roofline or
alpha-beta) time, so the correction ``exp(prediction)`` is a positive multiplicative factor.

Uncertainty: cross-conformal (CV+, Barber et al. 2021). K-fold out-of-fold residuals give the
CV error *and* the band half-width q = the ceil((n+1)(1-alpha))/n quantile of |residual|, so
[factor * e^-q, factor * e^q] covers ~(1 - alpha) of unseen measurements of that group. Using
every sample for calibration (rather than a separate calibration split) matters when a group
has 30-100 samples. Optional bootstrap members estimate where the model is unsure (used to
pick samples actively on a new device, ``adapt.py``).

Domain: a group knows the feature ranges and the shapes it was fitted on (``domain.Shapes``); a
query beyond them is flagged out of domain (its band widens in the store). Beyond the sizes it
measured, it gets the group's model only where that model was seen to extrapolate better than the
roofline (``extrapolates``), else the bare, tile-quantized roofline.

Fitted groups are kept as :class:`~llmp.residuals.forest.Forest` (the trees as numpy arrays):
xgboost fits them, but predicting never imports it, so a loaded store and a freshly fitted
model predict through the same code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, Family, Kernel
from llmp.errors import InputError, NotFittedError
from llmp.hardware.spec import Device
from llmp.progress import Progress, tick
from llmp.residuals import features
from llmp.residuals.domain import Shapes
from llmp.residuals.forest import Forest

GROUP_FIELDS = ("family", "device", "dtype", "pass")
DEFAULT_XGB: dict[str, object] = {
    "n_estimators": 150, "max_depth": 5, "learning_rate": 0.08, "subsample": 0.85, "colsample_bytree": 0.9,
    "min_child_weight": 2.0, "reg_lambda": 1.0, "tree_method": "hist", "n_jobs": 2, "max_bin": 128,
}
DOMAIN_FEATURES = ("log_flops", "log_bytes", "log_t_roof", "log_t_base", *features.DEVICE_FEATURES)
"""Features whose training range defines a group's sampled domain (queries outside are flagged)."""
DOMAIN_MARGIN = {"log_flops": math.log(2.0), "log_bytes": math.log(2.0), "log_t_roof": math.log(2.0),
                 "log_t_base": math.log(2.0)}
EXTRAPOLATION_SHARE = 0.25
"""Rows held out at each end of a group's sizes to test how its model extrapolates. On the public
data (training data split by size: benchmarks/fit_public.py's extrapolation table, and the
shipped manifests' ``extrapolation``), models of memory-bound families fitted on large shapes were
far worse on small ones than the roofline (A100 norms 106% vs 18% MAPE, H100 embeddings 211% vs
36%), attention models far better (A100 12% vs 41%), GEMMs either way by GPU: so each group is
tested at each end, not assumed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Observation:
    """One measured item on one device: the unit ``fit`` learns from."""

    item: Kernel | Collective
    device: Device
    seconds: float
    links: Links | None = None
    """Collectives: the links of the node/cluster they ran on (for the alpha-beta time)."""
    weight: float = 1.0
    """Training weight (``adapt.weighted`` raises a new device's few samples above the many)."""
    key: str = ""
    """The sample row's ``key`` (its file's key column): how ``llmp fit --picks`` and ``llmp score
    --rows`` name a row; empty for observations not read from a sample file."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupPrediction:
    """Per-row outputs of one prediction call (aligned with the rows passed in)."""

    log_factor: np.ndarray
    q: np.ndarray
    """Half-width of the conformal band in log space (0 where no model)."""
    has_model: np.ndarray
    """A model exists for the row's group (and the row could be featurised)."""
    in_domain: np.ndarray
    """The row lies inside its group's sampled domain (False also where there is no model)."""
    spread: np.ndarray
    """Std of the bootstrap members' predictions (0 without members)."""


def stratum_of(item: Kernel | Collective) -> tuple[str, str, str, str]:
    """(family, variant, pass, dtype): the operator an item is, the pass it runs in, its dtype.

    The unit of few-sample adaptation and of per-operator scores: elementwise GELU and RoPE, or a
    fused and an unfused norm, are different operators of one family, and a device can speed one
    up and not the other; forward and backward kernels of an operator differ again, and so do one
    GEMM in BF16 and in FP8 (other tensor-core paths, other libraries). Collectives are told apart
    by the tier they cross (the variant) and have no pass or dtype.
    """
    if isinstance(item, Kernel):
        return str(item.family), item.variant, str(item.pass_), str(item.dtype)
    return str(item.kind), str(item.tier), "", ""


def gemm_layout(item: Kernel | Collective) -> str:
    """Which GEMM of a stratum a GEMM row is, by its shape: ``linear`` (one product, a layer's weight
    GEMM) or, batched, the dim that is the smallest: ``bmm_k`` (the attention scores Q K^T, whose
    inner dim is the head dim), ``bmm_n`` (P V, whose output width is the head dim), ``bmm_m``.
    A device can speed these up differently (other tiles, other libraries), so adaptation may
    correct them apart (``adapt.fit_adjustments``). Empty for anything but a GEMM."""
    if not isinstance(item, Kernel) or item.family is not Family.GEMM:
        return ""
    dims = {d: int(item.dim(d)) for d in ("m", "n", "k", "batch")}
    if dims["batch"] == 1:
        return "linear"
    return "bmm_" + min(("m", "n", "k"), key=lambda d: (dims[d], d))


def row_key(group_by: tuple[str, ...], item: Kernel | Collective, device: Device) -> tuple[tuple[str, str], ...]:
    """The structured group key of an item: ((field, value), ...) in ``group_by`` order."""
    values = {"family": features.family_of(item), "device": device.id,
              "dtype": str(item.dtype) if isinstance(item, Kernel) else "",
              "pass": str(item.pass_) if isinstance(item, Kernel) else ""}
    return tuple((f, values[f]) for f in group_by)


class ResidualModel:
    """Per-group XGBoost models of log(t_measured / t_analytic) with conformal bands."""

    def __init__(self, group_by: tuple[str, ...] = ("family",), target: str = "log_ratio",
                 xgb_params: dict[str, object] | None = None, random_state: int = 0, alpha: float = 0.1,
                 cv_folds: int = 5, n_members: int = 0, min_samples: int = 8, monotone: bool = True) -> None:
        self.group_by = group_by
        self.target = target
        self.xgb_params = xgb_params
        self.random_state = random_state
        self.alpha = alpha
        self.cv_folds = cv_folds
        self.n_members = n_members
        self.min_samples = min_samples
        self.monotone = monotone

    # -- fitting -----------------------------------------------------------------------------
    def _validate(self) -> None:
        if self.target != "log_ratio":
            raise InputError(f"unknown target {self.target!r}", hint="the only target is 'log_ratio'")
        bad = [g for g in self.group_by if g not in GROUP_FIELDS]
        if bad or "family" not in self.group_by:
            raise InputError(f"group_by {self.group_by} must include 'family' and only use {GROUP_FIELDS}")
        if not 0 < self.alpha < 1:
            raise InputError(f"alpha must lie in (0, 1), got {self.alpha}")

    def _regressor(self, family: str, seed: int):
        import xgboost

        params = {**DEFAULT_XGB, **(self.xgb_params or {}), "random_state": seed}
        if self.monotone:
            mono = features.MONOTONE[family]
            params["monotone_constraints"] = tuple(mono.get(n, 0) for n in features.FEATURES[family])
        return xgboost.XGBRegressor(**params)

    def fit(self, observations: Sequence[Observation], *, progress: Progress | None = None) -> ResidualModel:
        """Fit one model per group; groups with fewer than ``min_samples`` rows get none. ``progress``
        is told of each group fitted (:mod:`llmp.progress`)."""
        self._validate()
        grouped: dict[tuple, list[Observation]] = {}
        for obs in observations:
            if not obs.seconds > 0:
                raise InputError(f"measured time must be positive, got {obs.seconds} for {obs.item}")
            grouped.setdefault(row_key(self.group_by, obs.item, obs.device), []).append(obs)
        self.models_: Mapping[tuple, Forest] = {}
        self.members_: Mapping[tuple, list[Forest]] = {}
        self.feature_names_in_: dict[str, tuple[str, ...]] = {}
        self.n_samples_per_group_: dict[tuple, int] = {}
        self.cv_error_: dict[tuple, dict[str, float]] = {}
        self.conformal_q_: dict[tuple, float] = {}
        self.domain_: dict[tuple, dict[str, tuple[float, float]]] = {}
        self.shapes_: dict[tuple, Shapes] = {}
        self.extrapolation_: dict[tuple, dict[str, float]] = {}
        self.skipped_groups_: dict[tuple, int] = {}
        for n, (key, group) in enumerate(sorted(grouped.items())):
            tick(progress, n, len(grouped))
            X, y, family = self._matrix(group)
            w = np.asarray([o.weight for o in group], dtype=np.float64)
            if len(y) < self.min_samples:
                self.skipped_groups_[key] = len(y)
                continue
            seed = self.random_state + 7919 * n
            oof = self._out_of_fold(family, X, y, w, seed)
            resid = y - oof
            ape = np.abs(np.exp(-resid) - 1.0)  # |predicted / measured - 1|
            level = min(1.0, math.ceil((len(y) + 1) * (1 - self.alpha)) / len(y))
            self.conformal_q_[key] = float(np.quantile(np.abs(resid), level, method="higher"))
            self.cv_error_[key] = {"mape": float(ape.mean()), "p90": float(np.quantile(ape, 0.9)),
                                   "rmse_log": float(np.sqrt(np.mean(resid**2))), "folds": float(self._folds(len(y)))}
            self.models_[key] = Forest.of(self._regressor(family, seed).fit(X, y, sample_weight=w))
            self.members_[key] = self._members(family, X, y, w, seed)
            self.feature_names_in_[family] = features.FEATURES[family]
            self.n_samples_per_group_[key] = len(y)
            names = features.FEATURES[family]
            self.domain_[key] = {f: (float(X[:, names.index(f)].min()), float(X[:, names.index(f)].max()))
                                 for f in DOMAIN_FEATURES if f in names}
            self.shapes_[key] = Shapes.fitted(family, X, names)
            self.extrapolation_[key] = self._extrapolation(family, X, y, w, seed)
        tick(progress, len(grouped), len(grouped))
        if not self.models_:
            raise InputError(f"no group has {self.min_samples}+ samples; nothing to fit",
                             hint="sample more (llmp sample --budget N) or lower min_samples")
        return self

    def _matrix(self, obs: list[Observation]) -> tuple[np.ndarray, np.ndarray, str]:
        family = features.family_of(obs[0].item)
        X, y = [], []
        for o in obs:
            if isinstance(o.item, Kernel):
                row, base = features.kernel_row(o.item, o.device)
            else:
                if o.links is None:
                    raise InputError(f"collective observation without links: {o.item}")
                row, base = features.collective_row(o.item, o.links)
            X.append(row)
            y.append(math.log(o.seconds / base))
        return np.asarray(X), np.asarray(y), family

    def _extrapolation(self, family: str, X: np.ndarray, y: np.ndarray, w: np.ndarray,
                       seed: int) -> dict[str, float]:
        """How the group's model does on shapes far beyond those it was fitted on, against the bare
        (quantized) roofline, at each end of its sizes (bytes moved): fitted on the larger half of
        its rows and scored on the smallest ``EXTRAPOLATION_SHARE`` (``below``: a quarter of the
        sizes lies between them, as between a store's shapes and a narrow shard's), then fitted
        on the smaller half and scored on the largest (``above``). ``cut`` is the group's median
        size, which says which end an out-of-domain query is at."""
        size = X[:, features.FEATURES[family].index("log_bytes")]
        cut = float(np.median(size))
        out = {"cut": cut}
        for end, test, train in (("below", size < np.quantile(size, EXTRAPOLATION_SHARE), size > cut),
                                 ("above", size > np.quantile(size, 1 - EXTRAPOLATION_SHARE), size < cut)):
            if train.sum() < self.min_samples or not test.any():
                out |= {f"{end}_mape": 0.0, f"{end}_roofline_mape": 0.0, f"{end}_n": 0.0}  # too few: not served
                continue
            reg = self._regressor(family, seed + 97).fit(X[train], y[train], sample_weight=w[train])
            out |= {f"{end}_mape": float(np.mean(np.abs(np.exp(reg.predict(X[test]) - y[test]) - 1))),
                    f"{end}_roofline_mape": float(np.mean(np.abs(np.exp(-y[test]) - 1))),
                    f"{end}_n": float(test.sum())}
        return out

    def extrapolates(self, key: tuple, names: tuple[str, ...], X: np.ndarray) -> np.ndarray:
        """Per row: whether the group's model beat the roofline at the end of its sizes the row is
        at (``_extrapolation``): its answer is served out of domain there, else the roofline is."""
        e = self.extrapolation_.get(key)
        if e is None:
            return np.zeros(len(X), dtype=bool)
        ok = {end: e[f"{end}_n"] > 0 and e[f"{end}_mape"] < e[f"{end}_roofline_mape"] for end in ("below", "above")}
        return np.where(X[:, names.index("log_bytes")] < e["cut"], ok["below"], ok["above"])

    def _folds(self, n: int) -> int:
        return max(2, min(self.cv_folds, n))

    def _out_of_fold(self, family: str, X: np.ndarray, y: np.ndarray, w: np.ndarray, seed: int) -> np.ndarray:
        folds = self._folds(len(y))
        order = np.random.default_rng(seed).permutation(len(y))
        oof = np.empty(len(y))
        for f in range(folds):
            test = order[f::folds]
            train = np.setdiff1d(order, test)
            reg = self._regressor(family, seed + f + 1).fit(X[train], y[train], sample_weight=w[train])
            oof[test] = reg.predict(X[test])
        return oof

    def _members(self, family: str, X: np.ndarray, y: np.ndarray, w: np.ndarray, seed: int) -> list[Forest]:
        rng = np.random.default_rng(seed + 1)
        out = []
        for m in range(self.n_members):
            idx = rng.integers(0, len(y), len(y))
            out.append(Forest.of(self._regressor(family, seed + 101 + m).fit(X[idx], y[idx], sample_weight=w[idx])))
        return out

    # -- prediction --------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "models_"):
            raise NotFittedError("this ResidualModel is not fitted yet; call fit(observations) first",
                                 hint="or load a fitted store with llmp.residuals.store.load(DIR)")

    def predict_block(self, block: features.Block, keys: Sequence[tuple], *, spread: bool = False) -> GroupPrediction:
        """Predict the rows of one feature block; ``keys[i]`` is row i's group key.

        ``spread``: also evaluate the bootstrap members (for active sample choice; the predict
        path leaves them unread)."""
        self._check_fitted()
        fitted_names = self.feature_names_in_.get(block.family)
        if fitted_names is not None and fitted_names != block.names:
            raise InputError(f"feature schema of {block.family} changed: fitted on {fitted_names}, got {block.names}")
        n = len(block.X)
        out = _empty(n)
        by_key: dict[tuple, list[int]] = {}
        for i, key in enumerate(keys):
            by_key.setdefault(key, []).append(i)
        for key, rows in by_key.items():
            if key not in self.models_:
                continue
            idx = np.asarray(rows)
            X = block.X[idx]
            inside = self._in_domain(key, block.names, X)
            # Beyond the sizes it measured, the model only where it extrapolated well; between them
            # (a gap in its shapes) and out of domain by the device's numbers alone (a store adapted
            # to a new device), it keeps its answer, flagged.
            served = self._within_sizes(key, block.names, X) | self.extrapolates(key, block.names, X)
            out.log_factor[idx] = np.where(served, self.models_[key].predict(X), 0.0)
            out.q[idx] = self.conformal_q_[key]
            out.has_model[idx] = True
            out.in_domain[idx] = inside
            members = (self.members_.get(key) or []) if spread else []
            if members:
                out.spread[idx] = np.std([m.predict(X) for m in members], axis=0)
        return out

    def _within_sizes(self, key: tuple, names: tuple[str, ...], X: np.ndarray) -> np.ndarray:
        """Bytes moved within the fitted range (with ``DOMAIN_MARGIN``): not an extrapolation in size."""
        lo, hi = self.domain_[key].get("log_bytes", (-math.inf, math.inf))
        col = X[:, names.index("log_bytes")]
        return (col >= lo - DOMAIN_MARGIN["log_bytes"]) & (col <= hi + DOMAIN_MARGIN["log_bytes"])

    def _in_domain(self, key: tuple, names: tuple[str, ...], X: np.ndarray) -> np.ndarray:
        """Inside the fitted range of every ``DOMAIN_FEATURES`` column, and near a measured shape of
        the same kind (``domain.Shapes``)."""
        inside = np.ones(len(X), dtype=bool)
        for f, (lo, hi) in self.domain_[key].items():
            margin = DOMAIN_MARGIN.get(f, 0.02 * max(abs(lo), abs(hi), 1e-9))
            col = X[:, names.index(f)]
            inside &= (col >= lo - margin) & (col <= hi + margin)
        shapes = self.shapes_.get(key)
        if shapes is not None and inside.any():
            inside[inside] = shapes.covers(X[inside], names)
        return inside

    def families(self) -> tuple[str, ...]:
        """The families (and collective kinds) with a fitted group."""
        self._check_fitted()
        return tuple(sorted({dict(k)["family"] for k in self.models_}))

    def predict(self, items: Sequence[Kernel | Collective], device: Device, *, links: Links | None = None,
                blocks: dict[str, features.Block] | None = None, spread: bool = False) -> GroupPrediction:
        """Log factors for ``items`` on ``device`` (rows without a model: 0, uncovered).

        ``blocks`` are ``features.blocks(items, device, links=links)`` when the caller has them;
        ``spread`` evaluates the bootstrap members too.
        """
        self._check_fitted()
        out = _empty(len(items))
        if blocks is None:
            blocks, _ = features.blocks(items, device, links=links)
        for block in blocks.values():
            keys = [row_key(self.group_by, items[i], device) for i in block.index]
            part = self.predict_block(block, keys, spread=spread)
            out.log_factor[block.index] = part.log_factor
            out.q[block.index] = part.q
            out.has_model[block.index] = part.has_model
            out.in_domain[block.index] = part.in_domain
            out.spread[block.index] = part.spread
        return out


def _empty(n: int) -> GroupPrediction:
    return GroupPrediction(log_factor=np.zeros(n), q=np.zeros(n), has_model=np.zeros(n, dtype=bool),
                           in_domain=np.zeros(n, dtype=bool), spread=np.zeros(n))
