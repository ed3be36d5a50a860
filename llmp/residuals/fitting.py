"""Sample files -> a residual store on disk: what ``llmp fit`` runs.

Two ways (``adapt.py`` explains when each is best):

* ``fit``: fit a store on sample files (one XGBoost model per group, CV error, conformal band);
  ``upweight`` weights a new device's few samples among many of other devices; ``serves="any"``
  makes it a cross-GPU store.
* ``adapt_store``: adapt a fitted store to the device of the samples with ``budget`` samples per
  (operator, pass) stratum, chosen actively or at random (seeded), or with the rows a picks file
  names (``read_picks``); the adapted store and the store before adaptation
  are both scored on the samples left unused, so the report says what the adaptation bought.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llmp import files
from llmp.errors import InputError
from llmp.progress import Progress
from llmp.residuals import adapt, dataset, fingerprint, samplefile, saving, score, store
from llmp.residuals.manifest import ANY
from llmp.residuals.model import ResidualModel


@dataclass(frozen=True, kw_only=True, slots=True)
class FitResult:
    store: store.Residuals
    """The store written, loaded back."""
    data: dataset.LoadReport
    adaptation: adapt.Adaptation | None = None
    held_out: score.Score | None = None
    """The adapted store on the samples the budget left unused (None: none were left)."""
    held_out_before: score.Score | None = None
    """The same samples scored before adaptation (the base trees on the new device)."""


def _load(samples: Sequence[str | Path], *, device_id: str | None, node_id: str | None,
          families: Sequence[str] | None) -> dataset.LoadReport:
    data = dataset.load(samples, device_id=device_id, node_id=node_id, families=families)
    if not data.observations:
        reasons = "; ".join(f"{k}: {v}" for k, v in data.skipped.items())
        raise InputError("the sample files hold no usable rows", hint=reasons or None)
    return data


def fit(samples: Sequence[str | Path], out: str | Path, *, device_id: str | None = None, node_id: str | None = None,
        families: Sequence[str] | None = None, group_by: Sequence[str] = ("family",), alpha: float = 0.1,
        seed: int = 0, members: int = 0, upweight: str | None = None, serves: str | Sequence[str] | None = None,
        xgb_params: dict[str, object] | None = None, progress: Progress | None = None) -> FitResult:
    """Fit a store on the samples under ``samples`` and write it to ``out`` (``progress``: told of
    each group fitted)."""
    files.output_dir(out, "the store")  # before minutes of fitting, not after
    data = _load(samples, device_id=device_id, node_id=node_id, families=families)
    saving.serving(data.devices, serves)  # refuse before fitting, not after
    observations = list(data.observations)
    if upweight is not None:
        new = [o for o in observations if o.device.id == upweight]
        if not new:
            raise InputError(f"--upweight {upweight}: no samples of that device",
                             hint=f"devices in the samples: {', '.join(d.id for d in data.devices)}")
        observations = adapt.weighted([o for o in observations if o.device.id != upweight], new)
    model = ResidualModel(group_by=tuple(group_by), alpha=alpha, random_state=seed, n_members=members,
                          xgb_params=xgb_params).fit(observations, progress=progress)
    saving.save(model, out, devices=data.devices, serves=serves, samples=data.files)
    return FitResult(store=store.load(out), data=data)


def _recorded(base: store.Residuals, *, exclude: str) -> list:
    """The devices a store's manifest fingerprints, rebuilt from the catalog where it still has
    them with the same numbers (others are left out of the adapted store's record)."""
    out = []
    for h in base.manifest.get("hardware", ()):
        if h["id"] == exclude:
            continue
        try:
            device = dataset.catalog_device(h["id"])
        except Exception:  # a device no longer in the catalog
            continue
        if fingerprint.device_fingerprint(device)["sha256"] == h["sha256"]:
            out.append(device)
    return out


def read_picks(path: str | Path) -> list[str]:
    """Sample keys from ``path``: a sample file (its rows), a CSV with a ``key`` column (``llmp score
    --rows`` writes one), or one key per line (blank lines and ``#`` comments skipped)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read the picks file {path}: {getattr(err, 'strerror', None) or err}",
                         hint="--picks takes a text file of sample keys") from None
    if text.startswith(samplefile.MAGIC):
        return [row["key"] for row in samplefile.read(path).rows]
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if lines and "key" in next(csv.reader(lines[:1])):
        return [row["key"] for row in csv.DictReader(lines)]
    keys = [line.strip() for line in lines]
    if not keys:
        raise InputError(f"the picks file {path} names no sample keys",
                         hint="one key per line, as in the key column of the sample files")
    return keys


def adapt_store(samples: Sequence[str | Path], out: str | Path, base: str | Path | store.Residuals, *,
                budget: int | None = None, device_id: str | None = None, node_id: str | None = None,
                families: Sequence[str] | None = None, choice: str = "active", seed: int = 0,
                picks: Sequence[str] | None = None) -> FitResult:
    """Adapt the store ``base`` to the samples' device with ``budget`` samples per (operator,
    pass) stratum chosen by ``choice`` (``adapt.adapt``), or with the rows named by ``picks``
    (neither: all of them), and write the adapted store to ``out``."""
    files.output_dir(out, "the store")
    base = base if isinstance(base, store.Residuals) else store.load(base)
    data = _load(samples, device_id=device_id, node_id=node_id, families=families)
    result = adapt.adapt(base, data.observations, budget, choice=choice, seed=seed, picks=picks)
    device = result.device
    # The adapted store serves the new device only; a cross-GPU base keeps the fingerprints of the
    # GPUs it was fitted on beside the new device's.
    devices = [device] if base.serves != ANY else [*_recorded(base, exclude=device.id), device]
    saving.save(base.model, out, devices=devices, serves=[device.id], samples=data.files,
               adjustments=result.adjustments,
               extra={"adapted_from": {"path": str(base.path), "id": base.id, "scope": base.scope},
                      "adaptation": {"budget": budget, "choice": "picks" if picks is not None else choice,
                                     "seed": seed if choice == "random" and picks is None else None,
                                     "chosen": len(result.chosen), "unused": len(result.unused)}})
    adapted = store.load(out)
    held_out = before = None
    if result.unused:
        rest = [data.observations[i] for i in result.unused]
        held_out = score.score(rest, adapted)
        before = score.score(rest, dataclasses.replace(adapted, adjustments={}))
    return FitResult(store=adapted, data=data, adaptation=result, held_out=held_out, held_out_before=before)
