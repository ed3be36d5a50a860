"""Writing a fitted model as a residual store (``llmp fit -o DIR``): group files and manifest.

A per-device ``model.ResidualModel`` is written as one ``groups/<i>.ubj`` per group (and its
bootstrap members) with a ``groups`` manifest; a ``transfer.CrossGpuModel`` as its units'
files with a ``transfer`` manifest (``kind`` ``cross_gpu``). Both record the devices the samples
came from (their fingerprints) and which devices the store serves. The layout is in
``store.py``'s module docstring; the manifest's format, and its byte-stable writing, in
``manifest.py``.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmp import __version__
from llmp.errors import InputError
from llmp.hardware.spec import Device
from llmp.residuals import adjustment, features, transfer
from llmp.residuals.adjustment import Adjustment, Stratum
from llmp.residuals.fingerprint import device_fingerprint
from llmp.residuals.manifest import ANY, FORMAT, FORMAT_VERSION, write_manifest
from llmp.residuals.model import ResidualModel
from llmp.residuals.store import CROSS_GPU
from llmp.residuals.transfer import CrossGpuModel


def grammar_version() -> str:
    """Short hash of the shipped grammar (provenance only: the grammar does not affect features)."""
    text = importlib.resources.files("llmp.grammar").joinpath("llmp.lark")
    try:
        return hashlib.sha256(text.read_bytes()).hexdigest()[:12]
    except (FileNotFoundError, OSError):
        return "absent"


def serving(devices: Sequence[Device], serves: str | Sequence[str] | None) -> str | list[str]:
    """The ``serves`` field of a store fitted on ``devices`` (``InputError`` if it names others)."""
    if not devices:
        raise InputError("a residual store must record the devices its samples came from")
    ids = [d.id for d in devices]
    served: str | list[str] = ANY if serves == ANY else list(ids if serves is None else serves)
    if served != ANY and (not served or not set(served) <= set(ids)):
        raise InputError(f"a store can serve only devices it has samples of ({', '.join(ids)}), not "
                         f"{', '.join(served) or 'none'}", hint="or serve 'any' (a cross-GPU store)")
    return served


def make_store_dir(directory: str | os.PathLike[str]) -> Path:
    """Create ``directory/groups`` for a store, or raise ``InputError`` saying why it cannot be."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise InputError(f"cannot write the store to {directory}: it exists and is not a directory",
                         hint="pass -o a new or existing directory")
    try:
        (directory / "groups").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot write the store to {directory}: {err.strerror}") from None
    return directory


def save(model: ResidualModel | CrossGpuModel, directory: str | os.PathLike[str], *, devices: Sequence[Device],
         serves: str | Sequence[str] | None = None, samples: Sequence[str] = (),
         adjustments: Mapping[Stratum, Adjustment] | None = None, extra: dict[str, Any] | None = None) -> Path:
    """Write a fitted model (and optional adaptation) to ``directory``; returns the manifest path.

    ``devices`` are the devices the samples came from (their fingerprints are recorded);
    ``serves`` is ``"any"`` for a cross-GPU store, else the device ids it serves (default: all
    of ``devices``).
    """
    if not isinstance(model, ResidualModel):  # a cross-GPU model (``transfer.CrossGpuModel``)
        return save_cross_gpu(model, directory, devices=devices, serves=ANY if serves is None else serves,
                              samples=samples, adjustments=adjustments, extra=extra)
    model._check_fitted()
    served = serving(devices, serves)
    directory = make_store_dir(directory)
    groups, versions = [], set()
    every = {key: [model.models_[key], *model.members_.get(key, [])] for key in sorted(model.models_)}
    for i, (key, forests) in enumerate(every.items()):  # all read before any is written (out == source)
        files = [f"groups/{i}.ubj", *(f"groups/{i}.m{j}.ubj" for j in range(len(forests) - 1))]
        for rel, forest in zip(files, forests):
            (directory / rel).write_bytes(forest.raw)
            versions.add(forest.version)
        fam = dict(key)["family"]
        groups.append({"index": i, "key": dict(key), "file": files[0], "members": files[1:],
                       "n_samples": model.n_samples_per_group_[key], "cv": model.cv_error_[key],
                       "conformal_q": model.conformal_q_[key],
                       "domain": {k: list(v) for k, v in model.domain_[key].items()},
                       "shapes": model.shapes_[key].to_manifest(),
                       "extrapolation": model.extrapolation_[key],
                       "monotone": features.MONOTONE[fam] if model.monotone else {}})
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "llmp": __version__, "xgboost": ",".join(sorted(versions)),
        "grammar": grammar_version(), "schema_version": features.SCHEMA_VERSION,
        "features": {fam: list(names) for fam, names in sorted(model.feature_names_in_.items())},
        "target": model.target, "group_by": list(model.group_by), "alpha": model.alpha, "seed": model.random_state,
        "xgb_params": model.xgb_params or {}, "cv_folds": model.cv_folds, "min_samples": model.min_samples,
        "groups": groups,
        "skipped_groups": [{"key": dict(k), "n_samples": n} for k, n in model.skipped_groups_.items()],
        "hardware": [device_fingerprint(d) for d in devices], "serves": served, "samples": list(samples),
        "adjustments": adjustment.entries(adjustments),
        **(extra or {}),
    }
    return write_manifest(directory, manifest)



def save_cross_gpu(model: CrossGpuModel, directory: str | os.PathLike[str], *, devices: Sequence[Device],
                   serves: str | Sequence[str] = ANY, samples: Sequence[str] = (),
                   adjustments: Mapping[Stratum, Adjustment] | None = None,
                   extra: dict[str, Any] | None = None) -> Path:
    """Write a fitted ``transfer.CrossGpuModel`` (``kind`` ``cross_gpu``): the same header and
    fingerprints as :func:`save`, its units as ``transfer`` entries instead of ``groups``. It
    serves any device; adapted to one device (``adjustments``), it serves that device."""
    directory = make_store_dir(directory)
    entries = transfer.to_manifest(model, directory)
    versions = sorted({fit.forest.version for fit in model.families_.values() if fit.forest is not None})
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "kind": CROSS_GPU, "llmp": __version__,
        "xgboost": ",".join(versions) or "none", "grammar": grammar_version(),
        "schema_version": features.SCHEMA_VERSION,
        "features": {fam: list(features.FEATURES[fam]) for fam in model.families()},
        "target": "log_ratio", "group_by": ["family"], "alpha": model.alpha, "seed": model.random_state,
        "xgb_params": dict(transfer.TREE_PARAMS), "cv_folds": 2, "min_samples": model.min_samples,
        "groups": [], "transfer": entries, "skipped_groups": [], "adjustments": adjustment.entries(adjustments),
        "hardware": [device_fingerprint(d) for d in devices], "serves": serving(devices, serves),
        "samples": list(samples),
        **(extra or {}),
    }
    return write_manifest(directory, manifest)

