"""Residual model stores: a directory with ``manifest.json`` and one ``.ubj`` file per group.

Layout (STYLE.md rule 21)::

    MODELDIR/manifest.json        versions, feature schema, groups (structured keys), sample counts,
                                  CV error, conformal half-widths, domains (feature ranges and the
                                  measured shapes, ``domain.py``), seed, the devices it
                                  serves and the fingerprints of their spec numbers
    MODELDIR/groups/<i>.ubj       the XGBoost model of group i (Universal Binary JSON)
    MODELDIR/groups/<i>.m<j>.ubj  bootstrap member j of group i (optional)

A store serves only what it was fitted for. ``serves`` lists the device ids a per-device store
was fitted on, or is ``"any"`` for a cross-GPU store, whose hardware-normalised features serve
every other device (catalog or user-defined). ``hardware`` holds, per fitted device, the spec
numbers its features and rooflines were computed from and their hash. Applying a per-device
store to another device, or to a device whose numbers differ from its fingerprint (the catalog
changed, or ``--set gpu.*``), is refused: its factors correct a roofline that is not there.

No pickles. Loading is strict and read-only (rule 22): a missing, mistyped or non-finite field,
a fingerprint that does not match its numbers, a format or schema mismatch, or a missing or
unreadable group file raises ``ResidualSchemaError`` naming the file and the fix. Nothing is
refitted or written on the predict path. Group files are read on first use (a spec touches a
few families), with numpy (``forest.py``): predicting never imports xgboost.

Which store a prediction uses (``choose``): a path or a loaded store when given; by default the
store shipped for the spec's device in ``llmp/hardware/defaults/<device_id>/`` if it serves the
spec's numbers, else the shipped cross-GPU store (``defaults/cross_gpu/``), else none.
``llmp.predict``, ``llmp predict``, ``llmp validate`` and ``llmp score`` all call it.

This module is the loaded store (what it serves, how it corrects), its loading and the choice;
around it: the manifest's format and strict checks (``manifest.py``), device fingerprints
(``fingerprint.py``), adaptations (``adjustment.py``) and writing a fitted model (``saving.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmp.analytic import kernels
from llmp.analytic.collectives import Links
from llmp.analytic.correction import Correction
from llmp.analytic.kernels import Collective, Kernel
from llmp.dsl import catalog as parts
from llmp.errors import ResidualSchemaError
from llmp.hardware import catalog
from llmp.hardware.spec import Device
from llmp.recent import Recent
from llmp.residuals import adjustment, features, fingerprint, transfer
from llmp.residuals.adjustment import Adjustment, Stratum
from llmp.residuals.domain import Shapes
from llmp.residuals.forest import Forest
from llmp.residuals.manifest import ANY, Checker, check_group, check_hardware, check_header, read_manifest
from llmp.residuals.model import GroupPrediction, ResidualModel, stratum_of
from llmp.residuals.transfer import CrossGpuModel
from llmp.spec.spec import Spec

CROSS_GPU = "cross_gpu"
"""Folder of the shipped cross-GPU store under ``llmp/hardware/defaults/``."""
OUT_OF_DOMAIN_WIDEN = 2.0
"""Band half-width multiplier (log space) for queries outside a group's sampled domain."""


# -- the loaded store ------------------------------------------------------------------------
class _Lazy(Mapping):
    """Group key -> value read from the store on first use; membership never reads a file."""

    def __init__(self, loaders: dict[tuple, Callable[[], Any]]) -> None:
        self._loaders = loaders
        self._loaded: dict[tuple, Any] = {}

    def __getitem__(self, key: tuple) -> Any:
        if key not in self._loaded:
            self._loaded[key] = self._loaders[key]()
        return self._loaded[key]

    def __contains__(self, key: object) -> bool:
        return key in self._loaders

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)


@dataclass(frozen=True, kw_only=True, slots=True)
class Residuals:
    """A loaded (read-only) residual store: what ``llmp predict --residuals DIR`` uses."""

    path: Path
    manifest: dict[str, Any]
    model: ResidualModel | CrossGpuModel
    """Per-device groups, or the cross-GPU transfer model (``serves == "any"``)."""
    adjustments: dict[Stratum, Adjustment] = field(default_factory=dict)
    twin_for: str = ""
    """A device with no store of its own that this per-device store also serves: the same die as
    the device it was fitted for, with other memory (``fingerprint.same_silicon``; ``twin``)."""
    _id: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        # Hashed once: the manifest is read-only, and every prediction names the store.
        digest = hashlib.sha256(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()[:12]
        object.__setattr__(self, "_id", f"{self.path.name}@{digest}")

    @property
    def id(self) -> str:
        """The store's folder name and the content hash of its manifest, for the provenance
        record (``cpu@dd4b45785e75``: a shipped default is named for its device)."""
        return self._id

    @property
    def serves(self) -> str | tuple[str, ...]:
        """``"any"`` (a cross-GPU store) or the ids of the devices it was fitted for."""
        serves = self.manifest.get("serves", ())
        return ANY if serves == ANY else tuple(serves)

    @property
    def scope(self) -> str:
        return "cross-GPU" if self.serves == ANY else "per-device"

    def families(self) -> tuple[str, ...]:
        return self.model.families()

    def refusal(self, device: Device) -> str | None:
        """Why this store must not correct ``device`` (None: it serves it)."""
        serves = self.serves
        if serves == ANY:
            return None
        twin = device.id not in serves and device.id == self.twin_for
        if device.id not in serves and not twin:
            return (f"it was fitted for {', '.join(serves) or 'no device'}, not for '{device.id}'")
        fitted = serves[0] if twin else device.id
        recorded = _recorded(self.manifest, fitted)
        if recorded is None:
            return f"it records no fingerprint of '{fitted}'"
        try:
            numbers = fingerprint.numbers(device)
        except (TypeError, ValueError):
            return f"the numbers of '{device.id}' are not all numeric"
        if twin:
            return None if fingerprint.same_silicon(recorded, numbers) else (
                f"the numbers of '{device.id}' are no longer those of '{fitted}' but for memory")
        if fingerprint.digest(numbers) != recorded["sha256"]:
            return (f"the numbers of '{device.id}' differ from those it was fitted with "
                    f"({'; '.join(fingerprint.differences(recorded, numbers))})")
        return None

    def require_serves(self, device: Device) -> None:
        """Raise ``ResidualSchemaError`` unless this store serves ``device`` (see module docstring)."""
        why = self.refusal(device)
        if why is not None:
            changed = device.id in self.serves
            raise ResidualSchemaError(
                f"residual store {self.path} does not serve this spec's device: {why}",
                hint=("refit the store on samples taken with these numbers (llmp fit ... -o DIR)" if changed else
                      f"use a store fitted for '{device.id}', the cross-GPU store, or adapt one to it "
                      "(llmp fit SAMPLES --base STORE --budget K -o DIR); --no-residuals gives the bare roofline"))

    def predict(self, items: Sequence[Kernel | Collective], device: Device, *, links: Links | None = None,
                blocks: dict[str, features.Block] | None = None, spread: bool = False) -> GroupPrediction:
        """Per-row log factor, band half-width and coverage, with this store's adjustments applied
        to the rows of the strata they were fitted for (every other row keeps the base model's)."""
        if blocks is None:
            blocks, _ = features.blocks(items, device, links=links)
        pred = self.model.predict(items, device, links=links, blocks=blocks, spread=spread)
        if self.adjustments:
            for block in blocks.values():
                for row, i in enumerate(block.index):
                    adj = self.adjustments.get(stratum_of(items[i]))
                    if adj is None:
                        continue
                    shift = adj.shift(items[i], float(block.X[row, block.names.index(adj.feature)]))
                    if not pred.has_model[i]:
                        # A stratum the base store has no model of, adapted from the bare roofline:
                        # without a held-out spread (fewer than 5 samples) the band spans the
                        # roofline and the shift, the only two answers there is evidence for.
                        pred.has_model[i], pred.in_domain[i] = True, False
                        pred.q[i] = abs(shift)
                    pred.log_factor[i] += shift
                    if adj.q is not None:
                        pred.q[i] = adj.q
        return pred

    def correct(self, items: Sequence[Kernel | Collective], spec: Spec) -> Correction:
        """Factor, band and coverage per item on ``spec``'s device (``compose.correction`` contract).

        Refused (``ResidualSchemaError``) when the store does not serve the spec's device.
        ``covered`` is True where a fitted model exists for the item's group. Items without one
        (family never sampled, symbolic dims, a dtype the device has no peak for) get factor 1,
        a zero-width band and ``covered = False``: flagged, not hidden. Items outside the sampled
        domain of their group keep the model's factor with a band ``OUT_OF_DOMAIN_WIDEN`` times
        wider and are flagged ``out_of_domain``.
        """
        return _correct(self, items, spec)


@dataclass(frozen=True, kw_only=True, slots=True)
class Layered:
    """A device's own store, with the cross-GPU store for the families it never measured.

    The public measurements cover each GPU unevenly (the H100 has GEMMs and norms but no
    attention; the H200 attention and norms only), so a device's store alone would leave whole
    families at the bare roofline. Rows its own store covers use it; the others the cross-GPU
    store, whose band says how far off an unmeasured GPU tends to be.
    """

    primary: Residuals
    fallback: Residuals

    @property
    def id(self) -> str:
        return f"{self.primary.id}+{self.fallback.id}"

    @property
    def path(self) -> Path:
        return self.primary.path

    @property
    def manifest(self) -> dict[str, Any]:
        return self.primary.manifest

    @property
    def serves(self) -> str | tuple[str, ...]:
        return self.primary.serves

    @property
    def scope(self) -> str:
        return "per-device, cross-GPU where it has no model"

    def families(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.primary.families()) | set(self.fallback.families())))

    def refusal(self, device: Device) -> str | None:
        return self.primary.refusal(device)

    def require_serves(self, device: Device) -> None:
        self.primary.require_serves(device)

    def predict(self, items: Sequence[Kernel | Collective], device: Device, *, links: Links | None = None,
                blocks: dict[str, features.Block] | None = None, spread: bool = False) -> GroupPrediction:
        if blocks is None:
            blocks, _ = features.blocks(items, device, links=links)
        own = self.primary.predict(items, device, links=links, blocks=blocks, spread=spread)
        if own.has_model.all():
            return own
        other = self.fallback.predict(items, device, links=links, blocks=blocks, spread=spread)
        use = ~own.has_model & other.has_model
        for name in ("log_factor", "q", "has_model", "in_domain", "spread"):
            getattr(own, name)[use] = getattr(other, name)[use]
        return own

    def correct(self, items: Sequence[Kernel | Collective], spec: Spec) -> Correction:
        """As :meth:`Residuals.correct`, each row from the store that covers it."""
        return _correct(self, items, spec)


def _correct(store: Residuals | Layered, items: Sequence[Kernel | Collective], spec: Spec) -> Correction:
    store.require_serves(spec.cluster.gpu)
    unique: dict[Kernel | Collective, int] = {}
    # A kernel running another's algorithm at a lower ceiling takes that kernel's factor: its
    # roofline already carries the lower rate (``kernels.SAME_ALGORITHM``, ``roofline.ceiling``).
    items = [kernels.algorithm(it) if isinstance(it, Kernel) else it for it in items]
    for item in items:  # a step repeats the same kernels per layer: predict each once
        unique.setdefault(item, len(unique))
    pred = store.predict(list(unique), spec.cluster.gpu, links=Links.of(spec))
    pick = np.asarray([unique[it] for it in items], dtype=np.int64)
    widen = np.where(pred.in_domain, 1.0, OUT_OF_DOMAIN_WIDEN)
    factor = np.exp(pred.log_factor)
    return Correction(factor=factor[pick], low=(factor * np.exp(-pred.q * widen))[pick],
                      high=(factor * np.exp(pred.q * widen))[pick], covered=pred.has_model[pick],
                      out_of_domain=(pred.has_model & ~pred.in_domain)[pick], level=1 - float(store.manifest["alpha"]))


# -- loading ---------------------------------------------------------------------------------
def _forest_loader(c: Checker, path: Path, n_features: int) -> Callable[[], Forest]:
    def read() -> Forest:
        try:
            forest = Forest.from_bytes(path.read_bytes())
        except OSError as err:
            raise c.fail(f"cannot read {path.name}: {err.strerror}", "the store is incomplete; refit") from None
        except ResidualSchemaError as err:
            raise c.fail(f"{path.relative_to(c.directory)}: {err.message}",
                         "the file is truncated or was replaced; refit") from None
        if forest.n_features != n_features:
            raise c.fail(f"{path.relative_to(c.directory)} has {forest.n_features} features, its family "
                         f"{n_features}", "refit")
        return forest
    return read


def _members_loader(readers: list[Callable[[], Forest]]) -> Callable[[], list[Forest]]:
    return lambda: [read() for read in readers]


def load(directory: str | os.PathLike[str]) -> Residuals:
    """Load a residual store strictly and read-only (see module docstring)."""
    directory = Path(directory)
    c = Checker(directory)
    if not directory.is_dir():
        raise c.fail("no such directory", "pass the -o directory of `llmp fit`")
    manifest = read_manifest(c)
    check_header(c, manifest)
    check_hardware(c, manifest)
    kind = manifest.get("kind", "groups")
    if kind == CROSS_GPU:
        return _load_cross_gpu(c, manifest, directory)
    if kind != "groups":
        raise c.fail(f"unknown store kind {kind!r}", "refit it with this llmp")
    group_by = tuple(manifest["group_by"])
    schema = manifest["features"]
    model = ResidualModel(group_by=group_by, target=manifest["target"],
                          xgb_params=manifest["xgb_params"] or None, random_state=manifest["seed"],
                          alpha=manifest["alpha"], cv_folds=manifest["cv_folds"], min_samples=manifest["min_samples"])
    models, members = {}, {}
    model.n_samples_per_group_, model.cv_error_, model.conformal_q_, model.domain_ = {}, {}, {}, {}
    model.shapes_, model.extrapolation_ = {}, {}
    model.skipped_groups_ = {}
    model.feature_names_in_ = {fam: tuple(names) for fam, names in schema.items()}
    groups = c.items(manifest, "groups", "dict")
    if not groups:
        raise c.fail("the store has no fitted groups")
    for i, group in enumerate(groups):
        key, fam = check_group(c, group, i, group_by, schema)
        if key in models:
            raise c.fail(f"group {dict(key)} appears twice")
        n = len(features.FEATURES[fam])
        models[key] = _forest_loader(c, c.relative_file(group["file"], f"groups[{i}].file"), n)
        members[key] = _members_loader([_forest_loader(c, c.relative_file(rel, f"groups[{i}].members"), n)
                                        for rel in group["members"]])
        model.n_samples_per_group_[key] = group["n_samples"]
        model.cv_error_[key] = {k: float(v) for k, v in group["cv"].items()}
        model.conformal_q_[key] = float(group["conformal_q"])
        model.domain_[key] = {k: (float(v[0]), float(v[1])) for k, v in group["domain"].items()}
        model.shapes_[key] = Shapes.from_manifest(fam, c.get(group, "shapes", "dict", f"groups[{i}]."),
                                                  f"residual store {directory}: groups[{i}].shapes")
        extrapolation = c.get(group, "extrapolation", "dict", f"groups[{i}].")
        model.extrapolation_[key] = {k: float(c.value(extrapolation.get(k), "number", f"groups[{i}].extrapolation.{k}"))
                                     for k in ("cut", *(f"{end}_{what}" for end in ("below", "above")
                                                        for what in ("mape", "roofline_mape", "n")))}
    model.models_, model.members_ = _Lazy(models), _Lazy(members)
    return Residuals(path=directory, manifest=manifest, model=model, adjustments=adjustment.from_manifest(c, manifest))


def _load_cross_gpu(c: Checker, manifest: dict[str, Any], directory: Path) -> Residuals:
    entries = c.items(manifest, "transfer", "dict")
    if not entries:
        raise c.fail("the cross-GPU store has no families")
    model = transfer.from_manifest(entries, directory, alpha=float(manifest["alpha"]), seed=int(manifest["seed"]))
    return Residuals(path=directory, manifest=manifest, model=model, adjustments=adjustment.from_manifest(c, manifest))


# -- which store -----------------------------------------------------------------------------
def default_path(device_id: str) -> Path:
    """Where the shipped default store of a catalog device lives: ``llmp/hardware/defaults/<id>/``."""
    return catalog.defaults_dir(device_id)


@functools.cache
def shipped_manifest(name: str, root: Path | None = None) -> dict[str, Any] | None:
    """The manifest of the store shipped as ``name``, or ``None`` when none ships: what the band
    reads (each family's measured roofline error) and :func:`twin` scans, without loading the
    store's models, which a prediction with ``--no-residuals`` never uses (``root`` as for
    ``shipped``)."""
    directory = default_path(name) if root is None else Path(root) / name
    return read_manifest(Checker(directory)) if (directory / "manifest.json").is_file() else None


def _recorded(manifest: Mapping[str, Any], device_id: str) -> dict[str, Any] | None:
    """The fingerprint a store's manifest records of ``device_id`` (None: it records none)."""
    return next((h for h in manifest.get("hardware", ()) if h["id"] == device_id), None)


@functools.cache
def shipped(name: str, root: Path | None = None) -> Residuals | None:
    """The store shipped as ``name`` (a device id or ``cross_gpu``), or ``None`` when none ships.

    ``root``: the folder holding shipped stores (default: ``llmp/hardware/defaults/``, where
    ``catalog.defaults_dir`` points); a store is read once per process.
    """
    path = default_path(name) if root is None else Path(root) / name
    return load(path) if (path / "manifest.json").is_file() else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    """The store a prediction uses and why (for its provenance)."""

    residuals: Any
    """A loaded store (or any ``analytic.correction.Residuals``), or None for the bare roofline."""
    note: str


_DEFAULTS = Recent(8)
""":func:`default_for` of the last few devices, by identity."""


def default_for(device: Device, *, root: Path | None = None) -> Choice:
    """The default store of ``device``: the one shipped for it if it serves these numbers, else the
    shipped cross-GPU store, else none (``root`` as for ``shipped``).

    A pure function of the device (an immutable spec section) and the shipped stores (read once,
    ``shipped``), kept for the last few device objects: a loop predicting on one loaded spec
    does not fingerprint its device's numbers on every call. A device with other numbers is a
    new object, and is checked afresh."""
    return _DEFAULTS.of(device, lambda: _default_for(device, root), root)


def _default_for(device: Device, root: Path | None) -> Choice:
    skipped = ""
    cross = shipped(CROSS_GPU, root)
    if cross is not None and cross.serves != ANY:
        raise ResidualSchemaError(f"the shipped cross-GPU store {cross.path} does not serve 'any' device",
                                  hint="the shipped store is misconfigured: refit it with --serves any")
    own = shipped(device.id, root)
    named = f"the store shipped for {device.id}"
    if own is None:
        own = twin(device, root)
        named = "" if own is None else (f"the store shipped for {own.serves[0]}, the same die as {device.id} with "
                                        "other memory (its factors correct rooflines on this part's own bandwidth)")
    if own is not None:
        why = own.refusal(device)
        if why is None:
            if cross is None or set(own.families()) >= set(cross.families()):
                return Choice(residuals=own, note=f"default: {named}")
            return Choice(residuals=Layered(primary=own, fallback=cross),
                          note=f"default: {named}, the shipped cross-GPU store for families it has no model of")
        skipped = f"{named} does not apply ({why}); "
    if cross is not None:
        return Choice(residuals=cross, note=f"default: {skipped}the shipped cross-GPU store")
    return Choice(residuals=None, note=f"default: {skipped}no residual store ships for {device.id}, "
                                       "nor a cross-GPU one")


def twin(device: Device, root: Path | None = None) -> Residuals | None:
    """The shipped per-device store of another part with ``device``'s die, board power and other
    memory, serving ``device`` too; None when no shipped store is of its silicon. The A100 SXM4
    40 GB has no measurements of its own; the 80 GB part's are of the same SMs, clock, L2, tensor
    cores and 400 W. A part held to less power is not a twin: its kernels run at lower clocks."""
    try:
        numbers = fingerprint.numbers(device)
    except (TypeError, ValueError):
        return None
    folder = catalog.defaults_dir(CROSS_GPU).parent if root is None else Path(root)
    if not folder.is_dir():
        return None
    for name in sorted(p.name for p in folder.iterdir() if (p / "manifest.json").is_file()):
        serves = (shipped_manifest(name, root) or {}).get("serves")
        if not isinstance(serves, list) or len(serves) != 1:  # "any", or a store of several parts
            continue
        recorded = _recorded(shipped_manifest(name, root) or {}, serves[0])
        if (recorded is not None and fingerprint.same_silicon(recorded, numbers)
                and parts.gpu(serves[0]).tdp == device.tdp):  # the same operating point too
            return _as_twin(name, device.id, root)
    return None


@functools.cache
def _as_twin(name: str, device_id: str, root: Path | None) -> Residuals:
    """One twin object per (store, device): predictions reuse their prices by the store's identity."""
    found = shipped(name, root)
    assert found is not None
    return replace(found, twin_for=device_id)


def choose(choice: Any, device: Device) -> Choice:
    """The residual store for predictions on ``device`` (the one function every caller uses).

    ``choice``: ``"default"`` (``default_for``), ``None`` or ``"none"`` (the bare roofline), a
    store directory (``str`` or path), or an already loaded store (used as given).
    """
    if choice is None or choice == "none":
        return Choice(residuals=None, note="residual models turned off")
    if choice == "default":
        return default_for(device)
    if isinstance(choice, (str, os.PathLike)):
        return Choice(residuals=load(choice), note=f"given: {os.fspath(choice)}")
    return Choice(residuals=choice, note="given")
