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
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from llmp import __version__
from llmp.analytic.collectives import Links
from llmp.analytic.correction import Correction
from llmp.analytic.kernels import Collective, Kernel
from llmp.errors import InputError, ResidualSchemaError
from llmp.hardware import catalog
from llmp.hardware.spec import Device
from llmp.recent import Recent
from llmp.residuals import features, transfer
from llmp.residuals.domain import Shapes
from llmp.residuals.forest import Forest
from llmp.residuals.model import GROUP_FIELDS, GroupPrediction, ResidualModel, gemm_layout, stratum_of
from llmp.residuals.transfer import CrossGpuModel
from llmp.spec.spec import Spec

FORMAT = "llmp-residuals"
FORMAT_VERSION = 3
"""2: ``serves``, fingerprints with the measured ceilings, per-(operator, pass) adjustments.
3: the measured shapes of every group and unit (``domain.Shapes``), the device's ``microarch`` in
its fingerprint, per-operator transfer evidence in cross-GPU units."""
ANY = "any"
"""``serves`` of a cross-GPU store."""
CROSS_GPU = "cross_gpu"
"""Folder of the shipped cross-GPU store under ``llmp/hardware/defaults/``."""
OUT_OF_DOMAIN_WIDEN = 2.0
"""Band half-width multiplier (log space) for queries outside a group's sampled domain."""
REFIT = "refit it with this llmp: llmp fit SAMPLE_DIR... -o DIR"

Stratum = tuple[str, str, str, str]
"""(family, variant, pass, dtype): see ``model.stratum_of``."""


def grammar_version() -> str:
    """Short hash of the shipped grammar (provenance only: the grammar does not affect features)."""
    text = importlib.resources.files("llmp.grammar").joinpath("llmp.lark")
    try:
        return hashlib.sha256(text.read_bytes()).hexdigest()[:12]
    except (FileNotFoundError, OSError):
        return "absent"


# -- fingerprints ----------------------------------------------------------------------------
_RATE_TABLES = ("peak_flops", "achievable", "flash_attention")
_SCALAR_NUMBERS = ("mem_bandwidth", "sms", "clock", "l2_cache", "launch_overhead")


def _numbers(device: Device) -> dict[str, Any]:
    """The spec numbers a device's features and rooflines are computed from (``features.py``,
    ``kernels.ceiling``, ``kernels.roofline``): peaks, measured ceilings, bandwidth, SMs, clock,
    cache, launch cost, and the architecture whose tiles quantize its kernels."""
    def rates(table: Any) -> dict[str, float]:
        return {str(k): float(v) for k, v in sorted(table.items())}

    return {"peak_flops": rates(device.peak_flops),
            "achievable": rates(device.achievable.rates) if device.achievable else {},
            "flash_attention": rates(device.flash_attention.rates) if device.flash_attention else {},
            **{name: float(getattr(device, name)) for name in _SCALAR_NUMBERS},
            "microarch": device.microarch.value if device.microarch is not None else ""}


def _digest(numbers: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()[:16]


def device_fingerprint(device: Device) -> dict[str, object]:
    """The spec numbers a model's device features came from, and their hash."""
    numbers = _numbers(device)
    return {"id": device.id, "name": device.name, "sha256": _digest(numbers), **numbers}


def _differences(recorded: dict[str, Any], numbers: dict[str, Any]) -> list[str]:
    out = []
    for name in (*_RATE_TABLES, *_SCALAR_NUMBERS, "microarch"):
        a, b = recorded.get(name), numbers[name]
        if a != b:
            out.append(f"{name} {a} -> {b}" if name not in _RATE_TABLES else f"{name}")
    return out


# -- the loaded store ------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Adjustment:
    """A correction of one (operator, pass) stratum fitted on a few samples of a new device
    (``adapt.py``): log factor += offset + slope * (feature - center)."""

    offset: float
    slope: float = 0.0
    feature: str = "log_t_roof"
    center: float = 0.0
    n: int = 0
    """Samples it was fitted on."""
    q: float | None = None
    """Conformal half-width re-estimated on the new device (None: keep the base group's)."""
    layouts: tuple[tuple[str, float], ...] = ()
    """GEMM strata: offsets added for the GEMM layouts (``model.gemm_layout``) whose samples departed
    from the stratum's own correction (linear, Q K^T and P V GEMMs adapt apart when they differ)."""

    def shift(self, item: Kernel | Collective, x: float) -> float:
        """The log-factor correction of ``item`` whose adjustment feature is ``x``."""
        return self.offset + self.slope * (x - self.center) + dict(self.layouts).get(gemm_layout(item), 0.0)


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
        if device.id not in serves:
            return (f"it was fitted for {', '.join(serves) or 'no device'}, not for '{device.id}'")
        recorded = next((h for h in self.manifest.get("hardware", ()) if h["id"] == device.id), None)
        if recorded is None:
            return f"it records no fingerprint of '{device.id}'"
        try:
            numbers = _numbers(device)
        except (TypeError, ValueError):
            return f"the numbers of '{device.id}' are not all numeric"
        if _digest(numbers) != recorded["sha256"]:
            return (f"the numbers of '{device.id}' differ from those it was fitted with "
                    f"({'; '.join(_differences(recorded, numbers))})")
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
    for item in items:  # a step repeats the same kernels per layer: predict each once
        unique.setdefault(item, len(unique))
    pred = store.predict(list(unique), spec.cluster.gpu, links=Links.of(spec))
    pick = np.asarray([unique[it] for it in items], dtype=np.int64)
    widen = np.where(pred.in_domain, 1.0, OUT_OF_DOMAIN_WIDEN)
    factor = np.exp(pred.log_factor)
    return Correction(factor=factor[pick], low=(factor * np.exp(-pred.q * widen))[pick],
                      high=(factor * np.exp(pred.q * widen))[pick], covered=pred.has_model[pick],
                      out_of_domain=(pred.has_model & ~pred.in_domain)[pick], level=1 - float(store.manifest["alpha"]))


# -- saving ----------------------------------------------------------------------------------
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
        "adjustments": _adjustment_entries(adjustments),
        **(extra or {}),
    }
    return _write_manifest(directory, manifest)


DIGITS = 12
"""Significant digits every float of a manifest is written with. Fitting sums in an order that
threads and BLAS builds may change, which moves the last of a float's 17 digits between two builds
of the same store; cut to 12, a rebuild writes the same bytes, and the store's id (a hash of its
manifest) names its content, not that noise. 1e-12 relative is far below any band or domain margin."""


def _settled(value: Any) -> Any:
    """``value`` with every float cut to :data:`DIGITS` significant digits (dicts and lists walked)."""
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: _settled(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_settled(v) for v in value]
    return value


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` with settled floats and sorted keys: the same content, the same bytes.
    The device fingerprints are kept exact: they are the catalog's own numbers, checked by hash."""
    settled = {k: v if k == "hardware" else _settled(v) for k, v in manifest.items()}
    path = directory / "manifest.json"
    path.write_text(json.dumps(settled, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return path


def _adjustment_entries(adjustments: Mapping[Stratum, Adjustment] | None) -> list[dict[str, Any]]:
    return [{"family": s[0], "variant": s[1], "pass": s[2], "dtype": s[3], "offset": a.offset, "slope": a.slope,
             "feature": a.feature, "center": a.center, "n": a.n, "q": a.q, "layouts": dict(a.layouts)}
            for s, a in sorted((adjustments or {}).items())]


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
        "groups": [], "transfer": entries, "skipped_groups": [], "adjustments": _adjustment_entries(adjustments),
        "hardware": [device_fingerprint(d) for d in devices], "serves": serving(devices, serves),
        "samples": list(samples),
        **(extra or {}),
    }
    return _write_manifest(directory, manifest)


# -- loading ---------------------------------------------------------------------------------
_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "number": (int, float), "list": (list,),
                                       "dict": (dict,), "bool": (bool,)}


class _Checker:
    """Strict reading of a manifest: every field present, of its type, finite."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def fail(self, what: str, hint: str = REFIT) -> ResidualSchemaError:
        return ResidualSchemaError(f"residual store {self.directory}: {what}", hint=hint)

    def value(self, value: Any, kind: str, where: str) -> Any:
        ok = isinstance(value, _KINDS[kind]) and (kind == "bool" or not isinstance(value, bool))
        if not ok:
            raise self.fail(f"{where} must be a {kind}, got {type(value).__name__} {value!r:.40}",
                            "the manifest was edited or written by another tool; " + REFIT)
        if kind == "number" and not math.isfinite(value):
            raise self.fail(f"{where} is {value}, not a finite number", "the manifest was edited; " + REFIT)
        return value

    def get(self, obj: dict[str, Any], key: str, kind: str, where: str = "") -> Any:
        if key not in obj:
            raise self.fail(f"manifest field {where}{key} is missing", "the manifest was edited or truncated; " + REFIT)
        return self.value(obj[key], kind, f"{where}{key}")

    def items(self, obj: dict[str, Any], key: str, kind: str, where: str = "") -> list[Any]:
        """A list field whose every element is of ``kind``."""
        return [self.value(v, kind, f"{where}{key}[{i}]") for i, v in enumerate(self.get(obj, key, "list", where))]

    def mapping(self, obj: dict[str, Any], key: str, kind: str, where: str = "") -> dict[str, Any]:
        """A dict field whose every value is of ``kind``."""
        return {k: self.value(v, kind, f"{where}{key}.{k}") for k, v in self.get(obj, key, "dict", where).items()}

    def relative_file(self, rel: str, where: str) -> Path:
        parts = PurePosixPath(rel).parts
        if not rel or PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in rel:
            raise self.fail(f"{where} {rel!r} is not a path inside the store")
        path = self.directory / rel
        if not path.is_file():
            raise self.fail(f"group file {rel} is missing",
                            "the store is incomplete; copy the whole directory or refit")
        return path


def _check_header(c: _Checker, m: dict[str, Any]) -> None:
    if m.get("format") != FORMAT:
        raise c.fail(f"manifest format is {m.get('format')!r}, expected {FORMAT!r}")
    if m.get("format_version") != FORMAT_VERSION:
        raise c.fail(f"format_version {m.get('format_version')!r}, this llmp reads {FORMAT_VERSION}")
    if m.get("schema_version") != features.SCHEMA_VERSION:
        raise c.fail(f"feature schema_version {m.get('schema_version')!r}, this llmp has {features.SCHEMA_VERSION}")
    if m.get("target") != "log_ratio":
        raise c.fail(f"unknown target {m.get('target')!r}")
    for key in ("llmp", "xgboost", "grammar"):
        c.get(m, key, "str")
    for fam, names in c.mapping(m, "features", "list").items():
        if fam not in features.FEATURES:
            raise c.fail(f"unknown family {fam!r} in the feature schema")
        if tuple(names) != features.FEATURES[fam]:
            raise c.fail(f"feature schema of {fam!r} differs from this llmp's")
    group_by = c.items(m, "group_by", "str")
    if "family" not in group_by or not set(group_by) <= set(GROUP_FIELDS) or len(set(group_by)) != len(group_by):
        raise c.fail(f"group_by {group_by} must hold 'family' and only {GROUP_FIELDS}")
    if not 0 < c.get(m, "alpha", "number") < 1:
        raise c.fail(f"alpha {m['alpha']} must lie in (0, 1)")
    c.get(m, "seed", "int")
    if c.get(m, "cv_folds", "int") < 2 or c.get(m, "min_samples", "int") < 1:
        raise c.fail("cv_folds must be >= 2 and min_samples >= 1")
    c.get(m, "xgb_params", "dict")
    c.items(m, "samples", "str")
    for i, group in enumerate(c.items(m, "skipped_groups", "dict")):
        c.get(group, "key", "dict", f"skipped_groups[{i}].")
        c.get(group, "n_samples", "int", f"skipped_groups[{i}].")


def _check_hardware(c: _Checker, m: dict[str, Any]) -> None:
    """Every fingerprint complete and matching its numbers; ``serves`` naming fitted devices."""
    entries = c.items(m, "hardware", "dict")
    if not entries:
        raise c.fail("manifest field hardware is empty: the store does not say which devices it was fitted on")
    for i, h in enumerate(entries):
        where = f"hardware[{i}]."
        for key in ("id", "name", "sha256"):
            c.get(h, key, "str", where)
        numbers: dict[str, Any] = {name: {d: float(r) for d, r in sorted(c.mapping(h, name, "number", where).items())}
                                   for name in _RATE_TABLES}
        numbers |= {name: float(c.get(h, name, "number", where)) for name in _SCALAR_NUMBERS}
        numbers["microarch"] = c.get(h, "microarch", "str", where)
        if _digest(numbers) != h["sha256"]:
            raise c.fail(f"the fingerprint of device '{h['id']}' does not match its numbers (the manifest was edited)")
    ids = [h["id"] for h in entries]
    serves = m.get("serves")
    if serves == ANY:
        return
    if "serves" not in m:
        raise c.fail("manifest field serves is missing: the store does not say which devices it serves")
    served = c.items(m, "serves", "str")
    unknown = [s for s in served if s not in ids]
    if not served or unknown or len(set(served)) != len(served):
        raise c.fail(f"serves {served} must be 'any' or distinct ids of its fitted devices ({', '.join(ids)})")


def _check_group(c: _Checker, g: dict[str, Any], i: int, group_by: tuple[str, ...],
                 schema: dict[str, Any]) -> tuple[tuple, str]:
    where = f"groups[{i}]."
    key = c.mapping(g, "key", "str", where)
    if set(key) != set(group_by):
        raise c.fail(f"{where}key has fields {sorted(key)}, the store groups by {list(group_by)}")
    fam = key["family"]
    if fam not in schema:
        raise c.fail(f"{where}key names family {fam!r}, which has no feature schema in the manifest")
    c.get(g, "index", "int", where)
    if c.get(g, "n_samples", "int", where) < 1:
        raise c.fail(f"{where}n_samples must be positive")
    c.mapping(g, "cv", "number", where)
    if c.get(g, "conformal_q", "number", where) < 0:
        raise c.fail(f"{where}conformal_q must not be negative")
    for name, bounds in c.mapping(g, "domain", "list", where).items():
        bounds = [c.value(b, "number", f"{where}domain.{name}") for b in bounds]
        if name not in features.FEATURES[fam] or len(bounds) != 2 or bounds[0] > bounds[1]:
            raise c.fail(f"{where}domain.{name} must be a [low, high] range of a feature of {fam}")
    c.get(g, "monotone", "dict", where)
    c.get(g, "file", "str", where)
    c.items(g, "members", "str", where)
    return tuple((f, key[f]) for f in group_by), fam


def _check_adjustments(c: _Checker, m: dict[str, Any]) -> dict[Stratum, Adjustment]:
    out: dict[Stratum, Adjustment] = {}
    for i, a in enumerate(c.items(m, "adjustments", "dict")):
        where = f"adjustments[{i}]."
        stratum = (c.get(a, "family", "str", where), c.get(a, "variant", "str", where), c.get(a, "pass", "str", where),
                   c.get(a, "dtype", "str", where))
        feature = c.get(a, "feature", "str", where)
        if stratum[0] not in features.FEATURES or feature not in features.FEATURES[stratum[0]]:
            raise c.fail(f"{where} adjusts family {stratum[0]!r} on feature {feature!r}, which it does not have")
        q = a.get("q")
        if q is not None and c.value(q, "number", f"{where}q") < 0:
            raise c.fail(f"{where}q must not be negative")
        if c.get(a, "n", "int", where) < 1 or stratum in out:
            raise c.fail(f"{where} needs n >= 1 and a stratum not adjusted twice")
        layouts = a.get("layouts", {})  # absent in stores adapted before GEMM layouts adapted apart
        if not isinstance(layouts, dict) or not all(isinstance(v, (int, float)) and math.isfinite(v)
                                                    for v in layouts.values()):
            raise c.fail(f"{where}layouts must map GEMM layouts to finite offsets")
        out[stratum] = Adjustment(offset=float(c.get(a, "offset", "number", where)),
                                  slope=float(c.get(a, "slope", "number", where)), feature=feature,
                                  center=float(c.get(a, "center", "number", where)), n=int(a["n"]),
                                  q=None if q is None else float(q),
                                  layouts=tuple(sorted((str(k), float(v)) for k, v in layouts.items())))
    return out


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not a number")


def _forest_loader(c: _Checker, path: Path, n_features: int) -> Callable[[], Forest]:
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


def _read_manifest(c: _Checker) -> dict[str, Any]:
    """The JSON object in ``manifest.json`` of ``c.directory``, or the error that says what is wrong with it."""
    try:
        manifest = json.loads((c.directory / "manifest.json").read_text(encoding="utf-8"),
                              parse_constant=_reject_constant)
    except FileNotFoundError:
        raise c.fail("manifest.json is missing", "pass the -o directory of `llmp fit`") from None
    except (OSError, UnicodeDecodeError) as err:
        raise c.fail(f"cannot read manifest.json ({err})", "the file is damaged; refit") from None
    except json.JSONDecodeError as err:
        raise c.fail(f"manifest.json is not valid JSON ({err.msg} at line {err.lineno})",
                     "the file was edited or truncated; refit") from None
    except ValueError as err:
        raise c.fail(f"manifest.json holds {err}", "the manifest was edited; " + REFIT) from None
    if not isinstance(manifest, dict):
        raise c.fail("manifest.json is not a JSON object")
    return manifest


def load(directory: str | os.PathLike[str]) -> Residuals:
    """Load a residual store strictly and read-only (see module docstring)."""
    directory = Path(directory)
    c = _Checker(directory)
    if not directory.is_dir():
        raise c.fail("no such directory", "pass the -o directory of `llmp fit`")
    manifest = _read_manifest(c)
    _check_header(c, manifest)
    _check_hardware(c, manifest)
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
        key, fam = _check_group(c, group, i, group_by, schema)
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
    return Residuals(path=directory, manifest=manifest, model=model, adjustments=_check_adjustments(c, manifest))


def _load_cross_gpu(c: _Checker, manifest: dict[str, Any], directory: Path) -> Residuals:
    entries = c.items(manifest, "transfer", "dict")
    if not entries:
        raise c.fail("the cross-GPU store has no families")
    model = transfer.from_manifest(entries, directory, alpha=float(manifest["alpha"]), seed=int(manifest["seed"]))
    return Residuals(path=directory, manifest=manifest, model=model, adjustments=_check_adjustments(c, manifest))


# -- which store -----------------------------------------------------------------------------
def default_path(device_id: str) -> Path:
    """Where the shipped default store of a catalog device lives: ``llmp/hardware/defaults/<id>/``."""
    return catalog.defaults_dir(device_id)


@functools.cache
def shipped_manifest(name: str) -> dict[str, Any] | None:
    """The manifest of the store shipped as ``name``, or ``None`` when none ships: what the band
    reads (each family's measured roofline error), without loading the store's models, which a
    prediction with ``--no-residuals`` never uses."""
    directory = default_path(name)
    return _read_manifest(_Checker(directory)) if (directory / "manifest.json").is_file() else None


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
    if own is not None:
        why = own.refusal(device)
        if why is None:
            if cross is None or set(own.families()) >= set(cross.families()):
                return Choice(residuals=own, note=f"default: the store shipped for {device.id}")
            return Choice(residuals=Layered(primary=own, fallback=cross),
                          note=f"default: the store shipped for {device.id}, the shipped cross-GPU store for "
                               f"families it has no model of")
        skipped = f"the store shipped for {device.id} does not apply ({why}); "
    if cross is not None:
        return Choice(residuals=cross, note=f"default: {skipped}the shipped cross-GPU store")
    return Choice(residuals=None, note=f"default: {skipped}no residual store ships for {device.id}, "
                                       "nor a cross-GPU one")


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
