"""``manifest.json`` of a residual store: its format, read strictly and written byte-stable.

One home for what the manifest holds (STYLE.md rules 21 and 22), on both sides: ``saving.py``
builds the fields and writes them with :func:`write_manifest`; ``store.load`` reads them with
:func:`read_manifest` and the checks here. Reading is strict: a missing, mistyped or non-finite
field, a fingerprint that does not match its numbers, a format or schema mismatch raises
``ResidualSchemaError`` naming the file and the fix, never a guess. The layout of the whole store
directory is in ``store.py``'s module docstring.
"""

from __future__ import annotations

import json
import math
from pathlib import Path, PurePosixPath
from typing import Any

from llmp.errors import ResidualSchemaError
from llmp.residuals import features
from llmp.residuals.fingerprint import RATE_TABLES, SCALAR_NUMBERS, digest
from llmp.residuals.model import GROUP_FIELDS

FORMAT = "llmp-residuals"
FORMAT_VERSION = 3
"""2: ``serves``, fingerprints with the measured ceilings, per-(operator, pass) adjustments.
3: the measured shapes of every group and unit (``domain.Shapes``), the device's ``microarch`` in
its fingerprint, per-operator transfer evidence in cross-GPU units."""
ANY = "any"
"""``serves`` of a cross-GPU store."""
REFIT = "refit it with this llmp: llmp fit SAMPLE_DIR... -o DIR"


# -- writing ---------------------------------------------------------------------------------
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


def write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` with settled floats and sorted keys: the same content, the same bytes.
    The device fingerprints are kept exact: they are the catalog's own numbers, checked by hash."""
    settled = {k: v if k == "hardware" else _settled(v) for k, v in manifest.items()}
    path = directory / "manifest.json"
    path.write_text(json.dumps(settled, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return path


# -- reading ---------------------------------------------------------------------------------
_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "number": (int, float), "list": (list,),
                                       "dict": (dict,), "bool": (bool,)}


class Checker:
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


def check_header(c: Checker, m: dict[str, Any]) -> None:
    """The fields every store has: format, versions, feature schema, grouping and fit settings."""
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


def check_hardware(c: Checker, m: dict[str, Any]) -> None:
    """Every fingerprint complete and matching its numbers; ``serves`` naming fitted devices."""
    entries = c.items(m, "hardware", "dict")
    if not entries:
        raise c.fail("manifest field hardware is empty: the store does not say which devices it was fitted on")
    for i, h in enumerate(entries):
        where = f"hardware[{i}]."
        for key in ("id", "name", "sha256"):
            c.get(h, key, "str", where)
        numbers: dict[str, Any] = {name: {d: float(r) for d, r in sorted(c.mapping(h, name, "number", where).items())}
                                   for name in RATE_TABLES}
        numbers |= {name: float(c.get(h, name, "number", where)) for name in SCALAR_NUMBERS}
        numbers["microarch"] = c.get(h, "microarch", "str", where)
        if digest(numbers) != h["sha256"]:
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


def check_group(c: Checker, g: dict[str, Any], i: int, group_by: tuple[str, ...],
                schema: dict[str, Any]) -> tuple[tuple, str]:
    """Check entry ``i`` of ``groups``; returns its group key (structured, in ``group_by`` order) and family."""
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


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not a number")


def read_manifest(c: Checker) -> dict[str, Any]:
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
