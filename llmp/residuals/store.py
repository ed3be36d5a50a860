"""Residual model stores: a directory with ``manifest.json`` and one ``.ubj`` file per group.

Layout (STYLE.md rule 21)::

    MODELDIR/manifest.json        versions, feature schema, groups (structured keys), sample counts,
                                  CV error, conformal half-widths, domains, seed, hardware fingerprints
    MODELDIR/groups/<i>.ubj       XGBRegressor.save_model of group i
    MODELDIR/groups/<i>.m<j>.ubj  bootstrap member j of group i (optional)

No pickles. Loading is strict and read-only (rule 22): a format, schema or target mismatch, a
model saved by a newer XGBoost major version, or a missing file raises ``ResidualSchemaError``
naming the file and the fix. Nothing is refitted or written on the predict path.

``Residuals.correct(items, spec)`` is what ``llmp predict --residuals DIR`` calls: one factor,
band and coverage flag per kernel or collective. Shipped defaults live in
``llmp/hardware/defaults/<device_id>/`` and are found by ``default_for(device_id)``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmp import __version__
from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, Kernel
from llmp.compose.correction import Correction
from llmp.dsl.spec import Spec
from llmp.errors import ResidualSchemaError
from llmp.hardware import catalog
from llmp.hardware.spec import Device
from llmp.residuals import features
from llmp.residuals.model import GroupPrediction, ResidualModel

FORMAT = "llmp-residuals"
FORMAT_VERSION = 1
OUT_OF_DOMAIN_WIDEN = 2.0
"""Band half-width multiplier (log space) for queries outside a group's sampled domain."""


def grammar_version() -> str:
    """Short hash of the shipped grammar (provenance only: the grammar does not affect features)."""
    text = importlib.resources.files("llmp.grammar").joinpath("llmp.lark")
    try:
        return hashlib.sha256(text.read_bytes()).hexdigest()[:12]
    except (FileNotFoundError, OSError):
        return "absent"


def device_fingerprint(device: Device) -> dict[str, object]:
    """The spec numbers a model's device features came from, and their hash."""
    numbers = {"peak_flops": {str(k): float(v) for k, v in sorted(device.peak_flops.items())},
               "mem_bandwidth": float(device.mem_bandwidth), "sms": float(device.sms), "clock": float(device.clock),
               "l2_cache": float(device.l2_cache), "launch_overhead": float(device.launch_overhead)}
    digest = hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()[:16]
    return {"id": device.id, "name": device.name, "sha256": digest, **numbers}


@dataclass(frozen=True, kw_only=True, slots=True)
class Adjustment:
    """A per-family correction fitted on a few samples of a new device (``adapt.py``).

    log factor += offset + slope * (feature - center)
    """

    offset: float
    slope: float = 0.0
    feature: str = "log_t_roof"
    center: float = 0.0
    n: int = 0
    """Samples it was fitted on."""
    q: float | None = None
    """Conformal half-width re-estimated on the new device (None: keep the base group's)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Residuals:
    """A loaded (read-only) residual store: what ``llmp predict --residuals DIR`` uses."""

    path: Path
    manifest: dict[str, Any]
    model: ResidualModel
    adjustments: dict[str, Adjustment] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The store's folder name and the content hash of its manifest, for the provenance
        record (``cpu@dd4b45785e75``: a shipped default is named for its device)."""
        digest = hashlib.sha256(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.path.name}@{digest}"

    def families(self) -> tuple[str, ...]:
        return tuple(sorted({dict(k)["family"] for k in self.model.models_}))

    def predict(self, items: Sequence[Kernel | Collective], device: Device, *, links: Links | None = None,
                blocks: dict[str, features.Block] | None = None) -> GroupPrediction:
        """Per-row log factor, band half-width and coverage, with this store's adjustments applied."""
        if blocks is None:
            blocks, _ = features.blocks(items, device, links=links)
        pred = self.model.predict(items, device, links=links, blocks=blocks)
        if self.adjustments:
            for fam, block in blocks.items():
                adj = self.adjustments.get(fam)
                if adj is None:
                    continue
                x = block.X[:, block.names.index(adj.feature)]
                pred.log_factor[block.index] += adj.offset + adj.slope * (x - adj.center)
                if adj.q is not None:
                    pred.q[block.index] = adj.q
        return pred

    def correct(self, items: Sequence[Kernel | Collective], spec: Spec) -> Correction:
        """Factor, band and coverage per item on ``spec``'s device (``compose.correction`` contract).

        ``covered`` is True where a fitted model exists for the item's group. Items without one
        (family never sampled, symbolic dims, a dtype the device has no peak for) get factor 1,
        a zero-width band and ``covered = False``: flagged, not hidden. Items outside the sampled
        domain of their group keep the model's factor with a band ``OUT_OF_DOMAIN_WIDEN`` times
        wider (``out_of_domain`` lists them).
        """
        pred, pick = self._predict_unique(items, spec)
        widen = np.where(pred.in_domain, 1.0, OUT_OF_DOMAIN_WIDEN)
        factor = np.exp(pred.log_factor)
        return Correction(factor=factor[pick], low=(factor * np.exp(-pred.q * widen))[pick],
                          high=(factor * np.exp(pred.q * widen))[pick], covered=pred.has_model[pick])

    def out_of_domain(self, items: Sequence[Kernel | Collective], spec: Spec) -> np.ndarray:
        """bool per item: a model exists but the item lies outside the range it was sampled on."""
        pred, pick = self._predict_unique(items, spec)
        return (pred.has_model & ~pred.in_domain)[pick]

    def _predict_unique(self, items: Sequence[Kernel | Collective], spec: Spec) -> tuple[GroupPrediction, np.ndarray]:
        """Predict each distinct item once (a step repeats the same kernels per layer)."""
        unique: dict[Kernel | Collective, int] = {}
        for item in items:
            unique.setdefault(item, len(unique))
        pred = self.predict(list(unique), spec.cluster.gpu, links=Links.of(spec))
        return pred, np.asarray([unique[it] for it in items], dtype=np.int64)


# -- saving ----------------------------------------------------------------------------------
def save(model: ResidualModel, directory: str | Path, *, devices: Sequence[Device] = (), samples: Sequence[str] = (),
         adjustments: dict[str, Adjustment] | None = None, extra: dict[str, Any] | None = None) -> Path:
    """Write a fitted model (and optional adaptation) to ``directory``; returns the manifest path."""
    model._check_fitted()
    directory = Path(directory)
    (directory / "groups").mkdir(parents=True, exist_ok=True)
    import xgboost

    groups = []
    for i, key in enumerate(sorted(model.models_)):
        files = [f"groups/{i}.ubj"]
        model.models_[key].save_model(directory / files[0])
        for j, member in enumerate(model.members_.get(key, [])):
            files.append(f"groups/{i}.m{j}.ubj")
            member.save_model(directory / files[-1])
        fam = dict(key)["family"]
        groups.append({"index": i, "key": dict(key), "file": files[0], "members": files[1:],
                       "n_samples": model.n_samples_per_group_[key], "cv": model.cv_error_[key],
                       "conformal_q": model.conformal_q_[key], "domain": {k: list(v) for k, v in model.domain_[key].items()},
                       "monotone": features.MONOTONE[fam] if model.monotone else {}})
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "llmp": __version__, "xgboost": xgboost.__version__,
        "grammar": grammar_version(), "schema_version": features.SCHEMA_VERSION,
        "features": {fam: list(names) for fam, names in sorted(model.feature_names_in_.items())},
        "target": model.target, "group_by": list(model.group_by), "alpha": model.alpha, "seed": model.random_state,
        "xgb_params": model.xgb_params or {}, "cv_folds": model.cv_folds, "min_samples": model.min_samples,
        "groups": groups, "skipped_groups": [{"key": dict(k), "n_samples": n} for k, n in model.skipped_groups_.items()],
        "hardware": [device_fingerprint(d) for d in devices], "samples": list(samples),
        "adjustments": {fam: {"offset": a.offset, "slope": a.slope, "feature": a.feature, "center": a.center,
                              "n": a.n, "q": a.q} for fam, a in sorted((adjustments or {}).items())},
        **(extra or {}),
    }
    path = directory / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path


# -- loading ---------------------------------------------------------------------------------
def _fail(directory: Path, what: str, hint: str) -> ResidualSchemaError:
    return ResidualSchemaError(f"residual store {directory}: {what}", hint=hint)


def _check(manifest: dict[str, Any], directory: Path) -> None:
    refit = "refit it with this llmp: llmp fit SAMPLE_DIR... -o DIR"
    if manifest.get("format") != FORMAT:
        raise _fail(directory, f"manifest format is {manifest.get('format')!r}, expected {FORMAT!r}", refit)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise _fail(directory, f"format_version {manifest.get('format_version')!r}, this llmp reads {FORMAT_VERSION}",
                    refit)
    if manifest.get("schema_version") != features.SCHEMA_VERSION:
        raise _fail(directory, f"feature schema_version {manifest.get('schema_version')!r}, this llmp has "
                    f"{features.SCHEMA_VERSION}", refit)
    if manifest.get("target") != "log_ratio":
        raise _fail(directory, f"unknown target {manifest.get('target')!r}", refit)
    for fam, names in manifest.get("features", {}).items():
        if fam not in features.FEATURES:
            raise _fail(directory, f"unknown family {fam!r} in the feature schema", refit)
        if tuple(names) != features.FEATURES[fam]:
            raise _fail(directory, f"feature schema of {fam!r} differs from this llmp's", refit)
    import xgboost

    saved, have = str(manifest.get("xgboost", "0")).split(".")[0], xgboost.__version__.split(".")[0]
    if not saved.isdigit() or int(saved) > int(have):
        raise _fail(directory, f"saved by xgboost {manifest.get('xgboost')}, installed {xgboost.__version__}",
                    "upgrade xgboost, or refit with the installed one")


def load(directory: str | Path) -> Residuals:
    """Load a residual store strictly and read-only (see module docstring)."""
    import xgboost

    directory = Path(directory)
    path = directory / "manifest.json"
    if not directory.is_dir():
        raise _fail(directory, "no such directory", "pass the -o directory of `llmp fit`")
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise _fail(directory, "manifest.json is missing", "pass the -o directory of `llmp fit`") from None
    except json.JSONDecodeError as err:
        raise _fail(directory, f"manifest.json is not valid JSON ({err.msg} at line {err.lineno})",
                    "the file was edited or truncated; refit") from None
    _check(manifest, directory)
    model = ResidualModel(group_by=tuple(manifest["group_by"]), target=manifest["target"],
                          xgb_params=manifest.get("xgb_params") or None, random_state=manifest["seed"],
                          alpha=manifest["alpha"], cv_folds=manifest.get("cv_folds", 5),
                          min_samples=manifest.get("min_samples", 8))
    model.models_, model.members_ = {}, {}
    model.n_samples_per_group_, model.cv_error_, model.conformal_q_, model.domain_ = {}, {}, {}, {}
    model.skipped_groups_ = {}
    model.feature_names_in_ = {fam: tuple(names) for fam, names in manifest["features"].items()}
    for group in manifest["groups"]:
        key = tuple((f, str(group["key"][f])) for f in model.group_by)
        boosters = []
        for rel in [group["file"], *group.get("members", [])]:
            file = directory / rel
            if not file.is_file():
                raise _fail(directory, f"group file {rel} is missing (group {group['key']})",
                            "the store is incomplete; copy the whole directory or refit")
            reg = xgboost.XGBRegressor()
            try:
                reg.load_model(file)
                reg.get_booster().set_param({"nthread": 1})  # a few rows per call: no OpenMP team
            except xgboost.core.XGBoostError as err:
                raise _fail(directory, f"cannot read {rel}: {str(err).splitlines()[0]}", "refit") from None
            boosters.append(reg)
        model.models_[key], model.members_[key] = boosters[0], boosters[1:]
        model.n_samples_per_group_[key] = int(group["n_samples"])
        model.cv_error_[key] = dict(group["cv"])
        model.conformal_q_[key] = float(group["conformal_q"])
        model.domain_[key] = {k: (float(v[0]), float(v[1])) for k, v in group["domain"].items()}
    adjustments = {fam: Adjustment(offset=a["offset"], slope=a["slope"], feature=a["feature"], center=a["center"],
                                   n=a["n"], q=a["q"]) for fam, a in manifest.get("adjustments", {}).items()}
    for fam, a in adjustments.items():
        if fam not in features.FEATURES or a.feature not in features.FEATURES[fam] or not math.isfinite(a.offset):
            raise _fail(directory, f"adjustment for {fam!r} is malformed", "refit the adaptation")
    return Residuals(path=directory, manifest=manifest, model=model, adjustments=adjustments)


def default_path(device_id: str) -> Path:
    """Where the shipped default store of a catalog device lives: ``llmp/hardware/defaults/<id>/``."""
    return catalog.defaults_dir(device_id)


@functools.cache
def default_for(device_id: str) -> Residuals | None:
    """The shipped default residual store for ``device_id``, or ``None`` when none ships."""
    path = default_path(device_id)
    if not (path / "manifest.json").is_file():
        return None
    return load(path)
