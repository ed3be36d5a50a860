"""Operator-level scores of a residual store on measured samples (``llmp score``).

Per sample the store's prediction ``t_roof * factor`` and the roofline alone are compared with
the measured time: error = predicted / measured - 1. Reported per family, per operator
(family and variant: GELU apart from RoPE, a fused norm apart from an unfused one), per pass
and overall, as MAPE and the 90th percentile of |error|, with the roofline's beside them and
the rows counted (how many the store had a model for, how many lay outside its fitted shapes).
This is the L0 level of the validation protocol: the store's error on operators it never saw.

The store for each device is the one ``store.choose`` gives (the same default as ``llmp
predict``), and a store that does not serve a sample's device is refused, as on the predict path.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmp.analytic.collectives import Links
from llmp.errors import InputError
from llmp.hardware.spec import Device
from llmp.progress import Progress, tick
from llmp.residuals import features, store
from llmp.residuals.model import Observation, gemm_layout, stratum_of

GROUPINGS = ("family", "operator", "pass")


FIELDS = ("family", "operator", "pass", "dtype", "device", "layout")
"""What ``score(by=...)`` may group rows by: ``operator`` is family and variant (the unit of
adaptation with ``pass``), ``layout`` a GEMM's layout (``model.gemm_layout``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Errors:
    """predicted / measured - 1 summarised: its mean absolute value (MAPE), the median and 90th
    percentile of its absolute value, and its signed mean (bias: > 0 predicts too slow)."""

    mape: float
    p90: float
    median: float
    bias: float

    @classmethod
    def of(cls, errors: np.ndarray) -> Errors:
        a = np.abs(errors)
        return cls(mape=float(a.mean()), p90=float(np.quantile(a, 0.9)), median=float(np.median(a)),
                   bias=float(errors.mean()))


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """The scores of one group of samples."""

    grouping: str
    """``family``, ``operator``, ``pass`` or ``overall``."""
    name: str
    n: int
    covered: int
    """Rows the store had a model for (the others keep the roofline)."""
    out_of_domain: int
    """Covered rows outside the shapes their model was fitted on."""
    store: Errors
    roofline: Errors

    def to_dict(self) -> dict[str, object]:
        return {"grouping": self.grouping, "name": self.name, "n": self.n, "covered": self.covered,
                "out_of_domain": self.out_of_domain, "mape": self.store.mape, "median": self.store.median,
                "p90": self.store.p90, "bias": self.store.bias, "roofline_mape": self.roofline.mape,
                "roofline_median": self.roofline.median, "roofline_p90": self.roofline.p90,
                "roofline_bias": self.roofline.bias}


@dataclass(frozen=True, kw_only=True, slots=True)
class Score:
    """Scores of a store on samples: one row per group, and what was used and left out."""

    stores: dict[str, str]
    """Device id -> the store that scored its samples (id, scope and path) or why none did."""
    rows: tuple[Row, ...]
    skipped: int
    """Samples that could not be featurised (a dtype without a peak, non-numeric dims)."""
    by: tuple[str, ...] = ()
    """The extra grouping asked for (``score(by=...)``); its rows' ``grouping`` is ``",".join(by)``."""
    per_row: PerRow | None = None

    def overall(self) -> Row:
        return next(r for r in self.rows if r.grouping == "overall")

    def groupings(self) -> tuple[str, ...]:
        return (*GROUPINGS, *((",".join(self.by),) if self.by else ()))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"stores": self.stores, "skipped": self.skipped,
                                  "overall": self.overall().to_dict(),
                                  **{g: [r.to_dict() for r in self.rows if r.grouping == g] for g in GROUPINGS}}
        if self.by:
            out["by"] = {"fields": list(self.by),
                         "groups": [r.to_dict() for r in self.rows if r.grouping == ",".join(self.by)]}
        return out

    def to_table(self) -> str:
        lines = [f"{device}: {what}" for device, what in self.stores.items()]
        head = (f"{'':<34} {'n':>6} {'covered':>8} {'out-dom':>8} {'MAPE':>8} {'median':>8} {'p90':>8} {'bias':>8}"
                f"   {'roofline MAPE':>13} {'p90':>8}")
        shown = (",".join(self.by),) if self.by else GROUPINGS
        for grouping in (*shown, "overall"):
            lines += ["", f"per {grouping}" if grouping != "overall" else "overall", head]
            for r in (r for r in self.rows if r.grouping == grouping):
                lines.append(f"  {r.name:<32} {r.n:>6} {r.covered:>8} {r.out_of_domain:>8} {r.store.mape:>8.1%} "
                             f"{r.store.median:>8.1%} {r.store.p90:>8.1%} {r.store.bias:>+8.1%}   "
                             f"{r.roofline.mape:>13.1%} {r.roofline.p90:>8.1%}")
        if self.skipped:
            lines += ["", f"{self.skipped} samples could not be scored (no peak for their dtype, or symbolic dims)"]
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class PerRow:
    """Every scored sample's times, aligned with the observations scored (NaN: not scored)."""

    measured_s: np.ndarray
    predicted_s: np.ndarray
    roofline_s: np.ndarray
    covered: np.ndarray
    in_domain: np.ndarray


ROW_COLUMNS = ("key", "device", "family", "operator", "pass", "dtype", "layout", "measured_s", "predicted_s",
               "roofline_s", "error", "roofline_error", "covered", "in_domain")
"""Columns of ``write_rows``: error is predicted / measured - 1."""


def _names(obs: Observation) -> dict[str, str]:
    family, variant, pass_, dtype = stratum_of(obs.item)
    return {"family": family, "operator": f"{family}/{variant}" if variant else family, "pass": pass_ or "-",
            "dtype": dtype or "-", "device": obs.device.id, "layout": gemm_layout(obs.item) or "-"}


def parse_by(text: str) -> tuple[str, ...]:
    """``operator,pass`` -> ("operator", "pass"), each a :data:`FIELDS` name."""
    by = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in by if f not in FIELDS]
    if not by or bad:
        raise InputError(f"cannot group scores by {text!r}", hint=f"comma-separated names of: {', '.join(FIELDS)}")
    return by


def write_rows(result: Score, observations: Sequence[Observation], path: str | Path) -> int:
    """Write one CSV row per scored sample (:data:`ROW_COLUMNS`); returns the rows written."""
    rows = result.per_row
    assert rows is not None and len(rows.measured_s) == len(observations), "the observations that were scored"
    try:
        with Path(path).open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(ROW_COLUMNS)
            n = 0
            for i, o in enumerate(observations):
                if not np.isfinite(rows.predicted_s[i]):
                    continue
                names = _names(o)
                m, p, r = rows.measured_s[i], rows.predicted_s[i], rows.roofline_s[i]
                writer.writerow([o.key, names["device"], names["family"], names["operator"], names["pass"],
                                 names["dtype"], names["layout"], f"{m:.6e}", f"{p:.6e}", f"{r:.6e}",
                                 f"{p / m - 1:.6f}", f"{r / m - 1:.6f}", int(rows.covered[i]),
                                 int(rows.in_domain[i])])
                n += 1
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror}") from None
    return n


def score(observations: Sequence[Observation], residuals: object = "default", *,
          by: Sequence[str] = (), progress: Progress | None = None) -> Score:
    """Score a residual store on ``observations``, per family, operator and pass, and per ``by``
    (field names of :data:`FIELDS`, e.g. ``("operator", "pass")``) when given.

    ``residuals`` as for ``llmp.predict``: ``"default"``, ``None``/``"none"``, a store directory or
    a loaded store; it must serve every device the samples come from. ``progress`` is told of each
    device's samples predicted (:mod:`llmp.progress`).
    """
    if not observations:
        raise InputError("no samples to score",
                         hint="pass sample files or directories (llmp sample, llmp import-samples)")
    by = parse_by(",".join(by)) if by else ()
    by_device: dict[tuple[str, Links | None], list[int]] = {}
    for i, o in enumerate(observations):
        by_device.setdefault((o.device.id, o.links), []).append(i)
    n = len(observations)
    predicted, roofline = np.full(n, np.nan), np.full(n, np.nan)
    covered, out_of_domain = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    stores: dict[str, str] = {}
    loaded: dict[str, store.Residuals | None] = {}
    for done, ((device_id, links), rows) in enumerate(by_device.items()):
        tick(progress, done, len(by_device))
        device = observations[rows[0]].device
        if device_id not in loaded:
            loaded[device_id], stores[device_id] = _store_for(residuals, device)
        items = [observations[i].item for i in rows]
        blocks, _ = features.blocks(items, device, links=links)
        res = loaded[device_id]
        pred = res.predict(items, device, links=links, blocks=blocks) if res is not None else None
        for block in blocks.values():
            where = np.asarray(rows)[block.index]
            roofline[where] = block.base_s
            lf = pred.log_factor[block.index] if pred is not None else np.zeros(len(block.index))
            predicted[where] = block.base_s * np.exp(lf)
            if pred is not None:
                covered[where] = pred.has_model[block.index]
                out_of_domain[where] = pred.has_model[block.index] & ~pred.in_domain[block.index]
    tick(progress, len(by_device), len(by_device))
    measured = np.asarray([o.seconds for o in observations])
    ok = np.isfinite(predicted)
    if not ok.any():
        raise InputError("none of the samples could be scored (no device peak for their dtypes, or symbolic dims)")
    per_row = PerRow(measured_s=measured, predicted_s=predicted, roofline_s=roofline, covered=covered,
                     in_domain=covered & ~out_of_domain)
    out = _group_rows(observations, by, ok, per_row, out_of_domain)
    return Score(stores=stores, rows=out, skipped=int((~ok).sum()), by=by, per_row=per_row)


def _store_for(residuals: object, device: Device) -> tuple[store.Residuals | None, str]:
    """The store that scores ``device``'s samples (``store.choose``; refused unless it serves the
    device) and what it is, for the report."""
    choice = store.choose(residuals, device)
    if choice.residuals is not None:
        choice.residuals.require_serves(device)
        what = f"{choice.residuals.id} ({choice.residuals.scope}, {choice.residuals.path}); {choice.note}"
    else:
        what = choice.note
    return choice.residuals, what


def _group_rows(observations: Sequence[Observation], by: tuple[str, ...], ok: np.ndarray, per_row: PerRow,
                out_of_domain: np.ndarray) -> tuple[Row, ...]:
    """One row per name of each grouping (and of the ``by`` fields joined) over the scored samples
    ``ok``, then the overall row."""
    measured, covered = per_row.measured_s, per_row.covered
    err, roof = per_row.predicted_s / measured - 1, per_row.roofline_s / measured - 1
    names = [_names(o) for o in observations]

    def row(grouping: str, name: str, sel: np.ndarray) -> Row:
        return Row(grouping=grouping, name=name, n=int(sel.sum()), covered=int(covered[sel].sum()),
                   out_of_domain=int(out_of_domain[sel].sum()), store=Errors.of(err[sel]),
                   roofline=Errors.of(roof[sel]))

    if by:
        for nm in names:
            nm[",".join(by)] = " ".join(nm[f] for f in by)
    out = []
    for grouping in (*GROUPINGS, *((",".join(by),) if by else ())):
        for name in sorted({names[i][grouping] for i in np.flatnonzero(ok)}):
            out.append(row(grouping, name, ok & np.asarray([nm[grouping] == name for nm in names])))
    out.append(row("overall", "all", ok))
    return tuple(out)
