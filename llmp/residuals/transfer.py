"""``CrossGpuModel``: residual factors for a GPU no one measured, chosen by how well they transfer.

A tree fitted on a handful of GPUs learns them by name: its device features (peak, bandwidth,
SMs, cache, clock) become a lookup, and a new GPU lands in whichever leaf its numbers fall into.
Measured on the public data (benchmarks/fit_public.py, leave one GPU out), such a model was
worse than the bare roofline for some families. So this model is built to be *safe to transfer*:

* per operator (family, dtype, variant, pass) the median log factor over the GPUs that measured
  it, each GPU weighted equally (``offsets``): what every GPU agrees on, e.g. that an unfused
  RMSNorm runs at a fraction of the bandwidth its bytes would allow;
* optionally an XGBoost tree on the *dimensionless* features only (arithmetic intensity over the
  ridge point, launch cost over the roofline time, bytes over the cache, tile waves over the
  SMs, alignment, pass, dtype, variant) on top of the offsets: how efficiency moves with the
  shape relative to the machine, which carries over between GPUs where absolute sizes do not;
* a shrinkage ``lam`` toward the roofline (log factor 0). Half-shrinkage is the safe choice when
  only one GPU measured a family: in log space, ``0.5 * m`` is closer to the truth ``y`` than the
  roofline whenever ``0 < m < 4 y`` (or the mirror for negative ``y``), i.e. whenever the other
  GPU's factor has the right sign and is not four times too extreme.

Where the evidence for a transfer is missing, the query is out of domain (``FamilyFit.in_domain``:
flagged, its band widened by the store): an operator only one GPU measured (issue 24 found
embedding and LayerNorm backward, measured on the seed's A100 alone, worse than the roofline on a
GPU the project never saw, unflagged), a shape no GPU measured, a tree feature beyond its fitted
range (the tree is then left out, not extrapolated). An operator no GPU measured, or one that made
a held-out GPU worse than the roofline, is served at the roofline and flagged.

Collectives are treated alike, per kind, with the machine (GPU and links) in place of the GPU and
the tier (intra- or inter-node) in place of the kernel's operator: the alpha-beta time stays the
base, so a group size or a link never measured still scales physically.

Which candidate a family gets is decided by leave-one-GPU-out over the GPUs that measured it
(``fit``): a candidate that made any held-out GPU (with ``VETO_MIN_ROWS`` rows or more) worse
than the roofline loses to one that did not; among the rest, the lowest mean ratio of its error
to the roofline's wins. The band half-width is the conformal quantile of the held-out GPUs' log
errors, so it says how far off a GPU nobody measured tends to be, not how well the model fits GPUs it has seen.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, Kernel
from llmp.errors import InputError, NotFittedError, ResidualSchemaError
from llmp.hardware.spec import Device
from llmp.residuals import features
from llmp.residuals.domain import Shapes
from llmp.residuals.forest import Forest
from llmp.residuals.model import DEFAULT_XGB, GroupPrediction, Observation

_ABSOLUTE = frozenset({"log_flops", "log_bytes", "log_t_roof", "log_m", "log_n", "log_k", "log_batch", "log_tokens",
                       "log_hidden", "log_elements", "log_rows", "log_cols", "log_vocab", "log_params", "log_seq_q",
                       "log_seq_kv", "log_heads", "log_link_bw", "log_link_latency", "log_t_base",
                       *features.DEVICE_FEATURES})
"""Features in absolute units (sizes, seconds, the device's own numbers): left out of the transfer tree."""

SHRINK = (0.5, 1.0)
"""Shrinkage levels tried for the offset and offset + tree candidates."""
SINGLE_GPU_SHRINK = 0.5
"""A family only one GPU measured: its offsets at half strength (see the module docstring)."""
TREE_PARAMS: dict[str, object] = {**DEFAULT_XGB, "n_estimators": 80}


def dimensionless(family: str) -> tuple[str, ...]:
    """The features of ``family`` that mean the same on every GPU."""
    return tuple(n for n in features.FEATURES[family] if n not in _ABSOLUTE)


SIBLING = {"bf16": "fp16", "fp16": "bf16"}
"""A dtype a unit nobody measured borrows from: BF16 and FP16 run the same tensor-core and memory
paths at the same peaks. Only a fallback: on the public data, pooling them into one unit let the
seed's FP16 harness veto BF16 transfers and made leave-one-GPU-out worse at k = 0."""


def unit_of(item: Kernel | Collective, dtype: str | None = None) -> str:
    """What a candidate is chosen for: a kernel family in one dtype (``gemm/bf16``), or a collective
    kind. Dtypes are apart because their evidence is: FP8 GEMMs were measured on other GPUs, by
    other libraries, than BF16 ones, and one GPU's odd FP8 rows must not veto BF16's transfer."""
    if isinstance(item, Kernel):
        return f"{item.family}/{dtype or item.dtype}"
    return str(item.kind)


def operator_of(item: Kernel | Collective, dtype: str | None = None) -> str:
    """``dtype/variant/pass`` of a kernel (``dtype`` given: as if it ran in that dtype); a
    collective's tier (intra- or inter-node, where NCCL's algorithms and their overheads differ):
    the unit of the offsets."""
    if isinstance(item, Kernel):
        return f"{dtype or item.dtype}/{item.variant or '-'}/{item.pass_}"
    return str(item.tier)


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """One way to predict a family's log factor on an unmeasured GPU."""

    kind: str
    """``roofline`` (factor 1), ``offsets`` (operator medians) or ``offsets+tree``."""
    lam: float
    """Shrinkage toward the roofline: the prediction is ``lam * (offset + tree)``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyFit:
    """The transfer model of one unit (a family in one dtype; a ``CrossGpuModel`` holds one per unit)."""

    unit: str
    family: str
    candidate: Candidate
    offsets: dict[str, float]
    """Operator -> median log factor over the GPUs that measured it (equal weight per GPU). An
    operator no GPU measured is served at the roofline, out of domain."""
    columns: tuple[str, ...]
    """Features the tree reads (empty without a tree)."""
    forest: Forest | None
    """The tree (evaluated with numpy: predicting never imports xgboost)."""
    q: float
    """Band half-width (log): conformal quantile of the held-out GPUs' log errors."""
    gpus: tuple[str, ...]
    """GPUs whose measurements the family was fitted on."""
    logo: dict[str, dict[str, float]]
    """Held-out GPU -> {"mape": chosen candidate, "roofline_mape": bare roofline, "n": rows}."""
    n_samples: int
    lone: tuple[str, ...] = ()
    """Operators one GPU measured: served (at the unit's shrinkage), but out of domain, since
    nothing shows that their factor carries over to another GPU."""
    vetoed: tuple[str, ...] = ()
    """Operators that made a held-out GPU with ``VETO_MIN_ROWS`` rows of them worse than the
    roofline: served at the roofline, out of domain."""
    shapes: Shapes | None = None
    """The shapes any GPU measured (``domain.Shapes``); None: not recorded (no domain check)."""
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    """The fitted range of each tree column: beyond it the tree is not extrapolated."""

    def _served(self, ops: Sequence[str]) -> np.ndarray:
        return np.asarray([op in self.offsets and op not in self.vetoed for op in ops], dtype=bool)

    def predict(self, X: np.ndarray, names: tuple[str, ...], ops: Sequence[str],
                tree: np.ndarray | None = None) -> np.ndarray:
        """Log factors: ``lam * (offset + tree)`` for the operators it serves, 0 (the roofline)
        for the others; ``tree``: rows whose tree part is added (default all)."""
        if self.candidate.kind == "roofline":
            return np.zeros(len(ops))
        served = self._served(ops)
        base = np.asarray([self.offsets.get(op, 0.0) for op in ops])
        if self.forest is not None:
            cols = [names.index(c) for c in self.columns]
            grown = self.forest.predict(X[:, cols])
            base = base + (grown if tree is None else np.where(tree, grown, 0.0))
        return np.where(served, self.candidate.lam * base, 0.0)

    def in_domain(self, X: np.ndarray, names: tuple[str, ...], ops: Sequence[str]) -> np.ndarray:
        """Rows whose operator it serves, near a shape some GPU measured, inside the tree's ranges.
        A unit that serves the roofline is in domain for every operator two or more GPUs measured
        (its band is the roofline's error on them, held out one GPU at a time)."""
        inside = self._served(ops) & np.asarray([op not in self.lone for op in ops], dtype=bool)
        if self.candidate.kind == "roofline":
            return inside
        inside &= self._ranged(X, names)
        if self.shapes is not None and inside.any():
            inside[inside] = self.shapes.covers(X[inside], names)
        return inside

    def _ranged(self, X: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
        inside = np.ones(len(X), dtype=bool)
        for c, (lo, hi) in self.ranges.items():
            col = X[:, names.index(c)]
            margin = 0.02 * max(abs(lo), abs(hi), 1e-9)
            inside &= (col >= lo - margin) & (col <= hi + margin)
        return inside


@dataclass(frozen=True, slots=True)
class _Rows:
    X: np.ndarray
    y: np.ndarray
    gpu: np.ndarray
    op: np.ndarray

    def take(self, mask: np.ndarray) -> _Rows:
        return _Rows(self.X[mask], self.y[mask], self.gpu[mask], self.op[mask])


def _ape(log_pred: np.ndarray, y: np.ndarray) -> float:
    """Mean |predicted / measured - 1| given log factors."""
    return float(np.mean(np.abs(np.exp(log_pred - y) - 1.0)))


def _gpu_weights(gpu: np.ndarray) -> np.ndarray:
    counts: dict[str, int] = defaultdict(int)
    for g in gpu:
        counts[str(g)] += 1
    return np.asarray([1.0 / counts[str(g)] for g in gpu])


def _offsets(rows: _Rows) -> dict[str, float]:
    per_op: dict[str, list[float]] = defaultdict(list)
    for op in sorted(set(rows.op.tolist())):
        for g in sorted(set(rows.gpu.tolist())):
            sel = (rows.op == op) & (rows.gpu == g)
            if sel.any():
                per_op[op].append(float(np.median(rows.y[sel])))
    return {op: float(np.median(v)) for op, v in per_op.items()}


def _fit_family(unit: str, family: str, rows: _Rows, candidate: Candidate, seed: int) -> FamilyFit:
    offsets = _offsets(rows)
    columns: tuple[str, ...] = ()
    forest = None
    if candidate.kind == "offsets+tree":
        import xgboost

        names = features.FEATURES[family]
        columns = dimensionless(family)
        cols = [names.index(c) for c in columns]
        mono = features.MONOTONE[family]
        base = np.asarray([offsets[op] for op in rows.op])
        booster = xgboost.XGBRegressor(**{**TREE_PARAMS, "random_state": seed,
                                          "monotone_constraints": tuple(mono.get(c, 0) for c in columns)})
        booster.fit(rows.X[:, cols], rows.y - base, sample_weight=_gpu_weights(rows.gpu))
        forest = Forest.of(booster)
    return FamilyFit(unit=unit, family=family, candidate=candidate, offsets=offsets, columns=columns,
                     forest=forest, q=0.0, gpus=tuple(sorted(set(rows.gpu.tolist()))), logo={},
                     n_samples=len(rows.y))


def _candidates(n_gpus: int) -> list[Candidate]:
    if n_gpus < 2:
        return [Candidate(kind="offsets", lam=SINGLE_GPU_SHRINK)]
    return [Candidate(kind="roofline", lam=0.0),
            *(Candidate(kind=k, lam=lam) for k in ("offsets", "offsets+tree") for lam in SHRINK)]


def _held_out(unit: str, family: str, rows: _Rows, candidate: Candidate,
              seed: int) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per GPU: (predicted log factors, measured log factors, operators) of a fit on the other GPUs."""
    out = {}
    names = features.FEATURES[family]
    for g in sorted(set(rows.gpu.tolist())):
        test = rows.gpu == g
        fit = _fit_family(unit, family, rows.take(~test), candidate, seed)
        out[g] = (fit.predict(rows.X[test], names, rows.op[test].tolist()), rows.y[test], rows.op[test])
    return out


def _lone(rows: _Rows) -> tuple[str, ...]:
    """Operators only one GPU measured (``FamilyFit.lone``)."""
    return tuple(op for op in sorted(set(rows.op.tolist())) if len(set(rows.gpu[rows.op == op].tolist())) < 2)


def _vetoed(candidate: Candidate, held: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[str, ...]:
    """Operators the candidate made worse than the roofline on a held-out GPU (``FamilyFit.vetoed``)."""
    if candidate.kind == "roofline":
        return ()
    out = set()
    for p, y, ops in held.values():
        for op in set(ops.tolist()):
            sel = ops == op
            if sel.sum() >= VETO_MIN_ROWS and _ape(p[sel], y[sel]) > _ape(np.zeros(int(sel.sum())), y[sel]):
                out.add(op)
    return tuple(sorted(out))


VETO_MIN_ROWS = 50
"""A held-out GPU with fewer rows of a unit (LLMCompass's 20 A100 GEMMs) counts in the mean ratio
but cannot veto a candidate on its own: a handful of wall-clock rows is not evidence that a
transfer fails."""


def _criterion(held: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[bool, float]:
    """(worse than the roofline on some held-out GPU with enough rows, mean error ratio to the
    roofline)."""
    ratios = {g: _ape(p, y) / max(_ape(np.zeros_like(y), y), 1e-12) for g, (p, y, _) in held.items()}
    worse = any(r > 1.0 for g, r in ratios.items() if len(held[g][1]) >= VETO_MIN_ROWS)
    return worse, float(np.mean(list(ratios.values())))


class CrossGpuModel:
    """Transfer residual models for unmeasured GPUs (see the module docstring).

    sklearn conventions: ``__init__`` stores arguments, ``fit`` sets ``families_``.
    """

    def __init__(self, alpha: float = 0.1, random_state: int = 0, min_samples: int = 8) -> None:
        self.alpha = alpha
        self.random_state = random_state
        self.min_samples = min_samples

    def fit(self, observations: Sequence[Observation]) -> CrossGpuModel:
        """Choose and fit one transfer model per unit (family and dtype) by leave-one-GPU-out."""
        if not 0 < self.alpha < 1:
            raise InputError(f"alpha must lie in (0, 1), got {self.alpha}")
        grouped: dict[str, list[Observation]] = defaultdict(list)
        for o in observations:
            if isinstance(o.item, Kernel) or o.links is not None:
                grouped[unit_of(o.item)].append(o)
        self.families_: dict[str, FamilyFit] = {}
        for n, unit in enumerate(sorted(grouped)):
            family = features.family_of(grouped[unit][0].item)
            rows = _matrix(grouped[unit])
            if len(rows.y) < self.min_samples:
                continue
            seed = self.random_state + 7919 * n
            gpus = sorted(set(rows.gpu.tolist()))
            scored = []
            for cand in _candidates(len(gpus)):
                held = _held_out(unit, family, rows, cand, seed) if len(gpus) > 1 else {}
                scored.append((_criterion(held) if held else (False, 1.0), cand, held))
            _, best, held = min(scored, key=lambda s: (s[0], s[1].kind != "roofline", -s[1].lam))
            fit = _fit_family(unit, family, rows, best, seed)
            if held:
                errors = np.concatenate([np.abs(p - y) for p, y, _ in held.values()])
                weights = np.concatenate([np.full(len(y), 1.0 / len(y)) for _, y, _ in held.values()])
                q = _weighted_quantile(errors, weights, 1 - self.alpha)
                logo = {g: {"mape": _ape(p, y), "roofline_mape": _ape(np.zeros_like(y), y), "n": float(len(y))}
                        for g, (p, y, _) in held.items()}
            else:  # one GPU: no transfer evidence, so the band is as wide as that GPU's spread around the offsets
                pred = fit.predict(rows.X, features.FEATURES[family], rows.op.tolist())
                q = float(np.quantile(np.abs(pred - rows.y), 1 - self.alpha)) + SINGLE_GPU_SHRINK * float(
                    np.median(np.abs(list(fit.offsets.values()))))
                logo = {}
            names = features.FEATURES[family]
            self.families_[unit] = dataclasses.replace(
                fit, q=float(q), logo=logo, lone=_lone(rows), vetoed=_vetoed(best, held),
                shapes=Shapes.fitted(family, rows.X, names),
                ranges={c: (float(rows.X[:, names.index(c)].min()), float(rows.X[:, names.index(c)].max()))
                        for c in fit.columns})
        if not self.families_:
            raise InputError(f"no family and dtype has {self.min_samples}+ samples; nothing to fit")
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "families_"):
            raise NotFittedError("this CrossGpuModel is not fitted yet; call fit(observations) first")

    def _dtype_for(self, item: Kernel | Collective) -> str | None:
        """The dtype whose unit answers for ``item``: its own, else its sibling's (``SIBLING``)."""
        if not isinstance(item, Kernel) or unit_of(item) in self.families_:
            return None
        sibling = SIBLING.get(str(item.dtype))
        return sibling if sibling is not None and unit_of(item, sibling) in self.families_ else None

    def families(self) -> tuple[str, ...]:
        """The families (and collective kinds) this model corrects."""
        self._check_fitted()
        return tuple(sorted({fit.family for fit in self.families_.values()}))

    def predict(self, items: Sequence[Kernel | Collective], device: Device, *, links: Links | None = None,
                blocks: dict[str, features.Block] | None = None, spread: bool = False) -> GroupPrediction:
        """Log factors for ``items`` on any ``device`` (families without a fit: 0, uncovered).
        ``spread`` is accepted for the store's interface; this model has no bootstrap members.

        ``in_domain`` (``FamilyFit.in_domain``) is False where nothing shows the unit's factor
        carries over: an operator without transfer evidence (served at the roofline), a shape no
        GPU measured, or a tree feature outside its fitted range (offsets only, the tree is not
        extrapolated). Its band widens there (``store.OUT_OF_DOMAIN_WIDEN``); elsewhere the band
        is already the error on GPUs the unit never saw, held out one at a time. The provenance
        names the store as cross-GPU.
        """
        self._check_fitted()
        n = len(items)
        out = GroupPrediction(log_factor=np.zeros(n), q=np.zeros(n), has_model=np.zeros(n, dtype=bool),
                              in_domain=np.zeros(n, dtype=bool), spread=np.zeros(n))
        if blocks is None:
            blocks, _ = features.blocks(items, device, links=links)
        for block in blocks.values():
            dtypes = np.asarray([self._dtype_for(items[i]) for i in block.index], dtype=object)
            units = np.asarray([unit_of(items[i], d) for i, d in zip(block.index, dtypes)])
            for unit in sorted(set(units.tolist())):
                fit = self.families_.get(unit)
                if fit is None:
                    continue
                rows = np.flatnonzero(units == unit)
                where = block.index[rows]
                ops = [operator_of(items[i], d) for i, d in zip(where, dtypes[rows])]
                X = block.X[rows]
                inside = fit.in_domain(X, block.names, ops)
                out.log_factor[where] = fit.predict(X, block.names, ops, tree=inside)
                out.q[where] = fit.q
                out.has_model[where] = True
                out.in_domain[where] = inside
        return out


def machine_of(obs: Observation) -> str:
    """What a row's transfer is judged across: the GPU for a kernel; for a collective the GPU and
    the links it ran on (a DGX and a PCIe box with the same GPU are different machines)."""
    if isinstance(obs.item, Kernel) or obs.links is None:
        return obs.device.id
    links = obs.links
    return (f"{obs.device.id}@{float(links.gpus_per_node):g}x{float(links.intra_bandwidth):.3g}B/s"
            f"+{float(links.inter_bandwidth):.3g}B/s")


def _matrix(obs: Sequence[Observation]) -> _Rows:
    X, y, gpu, op = [], [], [], []
    for o in obs:
        if isinstance(o.item, Kernel):
            row, base = features.kernel_row(o.item, o.device)
        else:
            assert o.links is not None  # fit() keeps only collectives with links
            row, base = features.collective_row(o.item, o.links)
        X.append(row)
        y.append(math.log(o.seconds / base))
        gpu.append(machine_of(o))
        op.append(operator_of(o.item))
    return _Rows(np.asarray(X, dtype=np.float64), np.asarray(y), np.asarray(gpu), np.asarray(op))


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, level: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][min(int(np.searchsorted(cum, level)), len(values) - 1)])


# -- persistence (called by ``saving.save`` / ``store.load`` for a manifest of kind ``cross_gpu``) --
def to_manifest(model: CrossGpuModel, directory: Path) -> list[dict[str, Any]]:
    """Write each unit's tree to ``directory/groups/<family>_<dtype>.ubj``; return the manifest entries."""
    model._check_fitted()
    (directory / "groups").mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    for unit, fit in sorted(model.families_.items()):
        file = None
        if fit.forest is not None:
            file = f"groups/{unit.replace('/', '_')}.ubj"
            (directory / file).write_bytes(fit.forest.raw)
        entries.append({"unit": unit, "family": fit.family,
                        "candidate": {"kind": fit.candidate.kind, "lam": fit.candidate.lam},
                        "offsets": dict(sorted(fit.offsets.items())), "lone": list(fit.lone),
                        "vetoed": list(fit.vetoed),
                        "columns": list(fit.columns), "file": file, "q": fit.q, "gpus": list(fit.gpus),
                        "logo": {g: dict(v) for g, v in sorted(fit.logo.items())}, "n_samples": fit.n_samples,
                        "shapes": fit.shapes.to_manifest() if fit.shapes is not None else None,
                        "ranges": {c: list(r) for c, r in sorted(fit.ranges.items())}})
    return entries


def from_manifest(entries: Sequence[Mapping[str, Any]], directory: Path, *, alpha: float, seed: int) -> CrossGpuModel:
    """Rebuild a fitted model from :func:`to_manifest` entries; malformed entries raise
    ``ResidualSchemaError`` naming the family."""
    model = CrossGpuModel(alpha=alpha, random_state=seed)
    model.families_ = {}
    for e in entries:
        family, unit = str(e.get("family")), str(e.get("unit"))
        try:
            if family not in features.FEATURES or unit.split("/")[0] != family:
                raise ValueError(f"unknown family {family!r} or a unit {unit!r} not of it")
            cand = e["candidate"]
            candidate = Candidate(kind=str(cand["kind"]), lam=float(cand["lam"]))
            if candidate.kind not in ("roofline", "offsets", "offsets+tree") or not 0 <= candidate.lam <= 1:
                raise ValueError(f"candidate {cand}")
            columns = tuple(str(c) for c in e["columns"])
            if any(c not in features.FEATURES[family] for c in columns):
                raise ValueError("tree columns are not features of the family")
            offsets = {str(k): float(v) for k, v in dict(e["offsets"]).items()}
            lone, vetoed = (tuple(str(op) for op in e[key]) for key in ("lone", "vetoed"))
            ranges = {str(c): (float(r[0]), float(r[1])) for c, r in dict(e["ranges"]).items()}
            numbers = [*offsets.values(), float(e["q"]), *(x for r in ranges.values() for x in r)]
            if not all(math.isfinite(x) for x in numbers) or float(e["q"]) < 0:
                raise ValueError("non-finite offsets, band or ranges")
            if any(c not in columns for c in ranges) or any(lo > hi for lo, hi in ranges.values()):
                raise ValueError("ranges must be [low, high] of tree columns")
            shapes = (None if e["shapes"] is None else
                      Shapes.from_manifest(family, e["shapes"], f"residual store {directory}: {unit} shapes"))
            forest = None
            if e.get("file"):
                rel = Path(str(e["file"]))
                if rel.is_absolute() or ".." in rel.parts:
                    raise ValueError(f"tree file {rel} lies outside the store")
                forest = Forest.from_bytes((directory / rel).read_bytes())
                if forest.n_features != len(columns):
                    raise ValueError(f"its tree reads {forest.n_features} features, the entry names {len(columns)}")
            elif candidate.kind == "offsets+tree":
                raise ValueError("an offsets+tree candidate without its tree file")
        except (KeyError, TypeError, ValueError, OSError, ResidualSchemaError) as err:
            raise ResidualSchemaError(f"residual store {directory}: cross-GPU entry for {unit!r} is malformed "
                                      f"({str(err).splitlines()[0] if str(err) else type(err).__name__})",
                                      hint="the store was edited or truncated; rebuild it: "
                                           "python benchmarks/fit_public.py --ship") from err
        model.families_[unit] = FamilyFit(
            unit=unit, family=family, candidate=candidate, offsets=offsets, columns=columns, forest=forest,
            q=float(e["q"]), gpus=tuple(str(g) for g in e["gpus"]),
            logo={str(g): {k: float(x) for k, x in dict(v).items()} for g, v in dict(e["logo"]).items()},
            n_samples=int(e["n_samples"]), lone=lone, vetoed=vetoed, shapes=shapes, ranges=ranges)
    return model
