"""``STACK.json``: a calibration of one stack on one cluster, its inputs and its provenance.

A calibration corrects predictions made the way it was fitted: the same GPU, the same stack, and
the same residual store (its factors correct that store's times, not another's). It therefore
holds one *basis* per way of predicting: the residual store ``llmp calibrate`` used (the shipped
default unless told otherwise) and the bare roofline composition, which ``llmp search`` uses.
Applying it to a spec of another GPU or stack, or with a store it holds no basis for, is refused
with the fix. Reading is strict: a missing, mistyped or non-finite field raises ``InputError``
naming it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, overload

import numpy as np

from llmp import __version__, files
from llmp.compose.band import CompositionTerm
from llmp.compose.posterior import GROUPS, PARAMS, Posterior, Prior
from llmp.errors import InputError
from llmp.spec.spec import Spec

FORMAT = "llmp-calibration"
VERSION = 3
"""3: the prior's scales estimated from the runs (``scale_shift``, ``scale_contrast``); 2: a factor
on the host thread (the host group). Older files are refused (write them again)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FittedRow:
    """One measured step a calibration was fitted on."""

    key: str
    """``<file stem>:<line>`` of its metric row."""
    measured_s: float
    predicted_s: float
    """The uncalibrated prediction (zero-shot)."""
    calibrated_s: float
    """The calibrated prediction of the same step (in sample)."""

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "measured_s": self.measured_s, "predicted_s": self.predicted_s,
                "calibrated_s": self.calibrated_s}


@dataclass(frozen=True, kw_only=True, slots=True)
class Basis:
    """The fitted factors for predictions made with one residual store (or none)."""

    residuals: str
    """The store's id (``Prediction.provenance.residuals``), or the roofline-only marker."""
    posterior: Posterior
    rows: tuple[FittedRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"residuals": self.residuals, "posterior": self.posterior.to_dict(),
                "rows": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    """An input file: where it was and its content hash, and which of its rows were used."""

    path: str
    sha256: str
    rows: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "rows": list(self.rows)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    """What ``llmp calibrate`` writes and ``--calibration`` applies."""

    gpu: str
    """Catalog id of the GPU every row ran on."""
    stack: str
    """The training stack every row ran (``Stack`` value)."""
    bases: tuple[Basis, ...]
    inputs: tuple[Source, ...]
    composition_term: CompositionTerm
    """The composition term the prior was built from (and the band's ``within`` came from)."""
    created: str
    llmp: str = __version__
    path: str = ""
    """Where it was read from (not written)."""

    @property
    def id(self) -> str:
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]
        name = Path(self.path).stem if self.path else "calibration"
        return f"{name}@{digest}"

    @property
    def rows(self) -> int:
        return self.bases[0].posterior.rows

    def check(self, spec: Spec) -> None:
        """``InputError`` unless ``spec`` runs this calibration's GPU and stack."""
        where = f"the calibration {self.path or self.id}"
        gpu, stack = spec.cluster.gpu.id, spec.train.stack.value
        if gpu != self.gpu:
            raise InputError(f"{where} was fitted on {self.gpu}, this spec runs on {gpu}",
                             label="calibration does not apply",
                             hint=f"calibrate {gpu} with its own measured steps: "
                                  "llmp calibrate MEASURED.csv -o STACK.json")
        if stack != self.stack:
            raise InputError(f"{where} was fitted on the {self.stack} stack, this spec runs {stack}",
                             label="calibration does not apply",
                             hint=f"set train.stack = {self.stack} if the runs were that stack, or calibrate {stack}")

    def basis(self, residuals: str) -> Basis:
        """The basis for predictions made with the store ``residuals`` (its id)."""
        for b in self.bases:
            if b.residuals == residuals:
                return b
        fitted = "; ".join(b.residuals for b in self.bases)
        raise InputError(f"the calibration {self.path or self.id} was fitted on predictions made with {fitted}, "
                         f"not with {residuals}", label="calibration does not apply",
                         hint="predict with the residual store it was fitted with, or re-run llmp calibrate with "
                              "this one (--residuals DIR, or --no-residuals)")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "llmp": self.llmp, "created": self.created, "gpu": self.gpu,
                "stack": self.stack, "groups": [g.value for g in GROUPS], "params": list(PARAMS),
                "composition_term": self.composition_term.to_dict(), "inputs": [s.to_dict() for s in self.inputs],
                "bases": [b.to_dict() for b in self.bases]}

    def save(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        try:
            out.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot write the calibration to {out}: {err.strerror}") from None
        return out


def file_digest(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


CALIBRATION = replace(files.JSON, what="a calibration file (STACK.json)")


# -- strict reading ------------------------------------------------------------------------------
class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.path}: {what}", label="bad calibration file",
                          hint="write it again with llmp calibrate MEASURED.csv -o STACK.json")

    def get(self, obj: Any, key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.fail(f"field {where}{key} is missing")
        value = obj[key]
        if kind in (float, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise self.fail(f"field {where}{key} must be a finite number, got {value!r:.40}")
            return float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(f"field {where}{key} must be {getattr(kind, '__name__', kind)}, got {value!r:.40}")
        return value

    def numbers(self, values: Any, n: int, where: str) -> list[float]:
        if not isinstance(values, list) or len(values) != n:
            raise self.fail(f"field {where} must be a list of {n} numbers")
        return [self.get({"v": v}, "v", float, where) for v in values]


def _posterior(r: _Reader, d: Mapping[str, Any], where: str) -> Posterior:
    n = len(PARAMS)
    if r.get(d, "params", list, where) != list(PARAMS):
        raise r.fail(f"{where}params must be {list(PARAMS)}")
    mean = r.numbers(r.get(d, "mean", list, where), n, f"{where}mean")
    cov = [r.numbers(row, n, f"{where}covariance[{i}]") for i, row in enumerate(r.get(d, "covariance", list, where))]
    if len(cov) != n:
        raise r.fail(f"{where}covariance must be {n} x {n}")
    matrix = np.asarray(cov)
    if not np.allclose(matrix, matrix.T) or np.linalg.eigvalsh(matrix).min() < -1e-9:
        raise r.fail(f"{where}covariance must be symmetric and positive semi-definite")
    p = r.get(d, "prior", dict, where)
    sigma = r.get(p, "sigma", dict, f"{where}prior.")
    if sorted(sigma) != sorted(g.value for g in GROUPS):
        raise r.fail(f"{where}prior.sigma must name the groups {[g.value for g in GROUPS]}")
    at = f"{where}prior."
    prior = Prior(sigma=tuple(r.get(sigma, g.value, float, f"{at}sigma.") for g in GROUPS),
                  shift=r.get(p, "shift", float, at), overhead=r.get(p, "overhead", float, at),
                  noise=r.get(p, "noise", float, at))
    t_ref, noise = r.get(d, "t_ref_s", float, where), r.get(d, "noise", float, where)
    rows = r.get(d, "rows", int, where)
    scales = (r.get(d, "scale_shift", float, where), r.get(d, "scale_contrast", float, where))
    if t_ref <= 0 or noise <= 0 or rows < 1 or mean[-1] < 0 or min(scales) < 0:
        raise r.fail(f"{where}t_ref_s and noise must be positive, rows >= 1, the overhead and the scales >= 0")
    return Posterior(mean=tuple(mean), covariance=tuple(tuple(row) for row in cov), t_ref=t_ref, noise=noise,
                     prior=prior, rows=rows, overhead_log_bayes=r.get(d, "overhead_log_bayes", float, where),
                     scale_shift=scales[0], scale_contrast=scales[1])


def from_dict(d: Any, path: str) -> Calibration:
    """Strictly read a calibration (see the module docstring)."""
    r = _Reader(path)
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise r.fail(f"not an {FORMAT} file")
    if d.get("version") != VERSION:
        raise r.fail(f"version {d.get('version')!r}; this llmp reads version {VERSION}")
    try:
        term = CompositionTerm.from_dict(r.get(d, "composition_term", dict), f"{path}: composition_term")
    except Exception as err:  # re-raised as this file's error
        raise r.fail(str(getattr(err, "message", err))) from None
    bases = []
    for i, b in enumerate(r.get(d, "bases", list)):
        where = f"bases[{i}]."
        rows = tuple(FittedRow(key=r.get(row, "key", str, f"{where}rows[{j}]."),
                               measured_s=r.get(row, "measured_s", float, f"{where}rows[{j}]."),
                               predicted_s=r.get(row, "predicted_s", float, f"{where}rows[{j}]."),
                               calibrated_s=r.get(row, "calibrated_s", float, f"{where}rows[{j}]."))
                     for j, row in enumerate(r.get(b, "rows", list, where)))
        bases.append(Basis(residuals=r.get(b, "residuals", str, where),
                           posterior=_posterior(r, r.get(b, "posterior", dict, where), f"{where}posterior."),
                           rows=rows))
    if not bases:
        raise r.fail("it holds no fitted basis")
    inputs = tuple(Source(path=r.get(s, "path", str, f"inputs[{i}]."), sha256=r.get(s, "sha256", str, f"inputs[{i}]."),
                          rows=tuple(str(k) for k in r.get(s, "rows", list, f"inputs[{i}].")))
                   for i, s in enumerate(r.get(d, "inputs", list)))
    return Calibration(gpu=r.get(d, "gpu", str), stack=r.get(d, "stack", str), bases=tuple(bases), inputs=inputs,
                       composition_term=term, created=r.get(d, "created", str), llmp=r.get(d, "llmp", str), path=path)


def load(path: str | os.PathLike[str]) -> Calibration:
    """Read ``STACK.json`` written by ``llmp calibrate``."""
    name = os.fspath(path)
    try:
        text = files.read_text(name, CALIBRATION)
    except InputError as err:
        raise InputError(err.message, label="cannot read calibration",
                         hint="write one with llmp calibrate MEASURED.csv -o STACK.json") from None
    try:
        data = files.parse_json(text, name, constants=False)
    except InputError as err:
        raise InputError(err.message, label="bad calibration file",
                         hint="write it again with llmp calibrate MEASURED.csv -o STACK.json") from None
    return from_dict(data, name)


@overload
def as_calibration(value: None) -> None: ...


@overload
def as_calibration(value: Calibration | str | os.PathLike[str]) -> Calibration: ...


def as_calibration(value: Calibration | str | os.PathLike[str] | None) -> Calibration | None:
    """A loaded calibration from a path (or as given; ``None`` stays ``None``)."""
    if value is None or isinstance(value, Calibration):
        return value
    return load(value)

