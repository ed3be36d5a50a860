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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llmp.analytic.collectives import Links
from llmp.errors import InputError
from llmp.progress import Progress, tick
from llmp.residuals import features, store
from llmp.residuals.model import Observation, stratum_of

GROUPINGS = ("family", "operator", "pass")


@dataclass(frozen=True, kw_only=True, slots=True)
class Errors:
    """|predicted / measured - 1| summarised."""

    mape: float
    p90: float

    @classmethod
    def of(cls, errors: np.ndarray) -> Errors:
        a = np.abs(errors)
        return cls(mape=float(a.mean()), p90=float(np.quantile(a, 0.9)))


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
                "out_of_domain": self.out_of_domain, "mape": self.store.mape, "p90": self.store.p90,
                "roofline_mape": self.roofline.mape, "roofline_p90": self.roofline.p90}


@dataclass(frozen=True, kw_only=True, slots=True)
class Score:
    """Scores of a store on samples: one row per group, and what was used and left out."""

    stores: dict[str, str]
    """Device id -> the store that scored its samples (id, scope and path) or why none did."""
    rows: tuple[Row, ...]
    skipped: int
    """Samples that could not be featurised (a dtype without a peak, non-numeric dims)."""

    def overall(self) -> Row:
        return next(r for r in self.rows if r.grouping == "overall")

    def to_dict(self) -> dict[str, object]:
        return {"stores": self.stores, "skipped": self.skipped,
                "overall": self.overall().to_dict(),
                **{g: [r.to_dict() for r in self.rows if r.grouping == g] for g in GROUPINGS}}

    def to_table(self) -> str:
        lines = [f"{device}: {what}" for device, what in self.stores.items()]
        head = (f"{'':<34} {'n':>6} {'covered':>8} {'out-dom':>8} {'MAPE':>8} {'p90':>8}   "
                f"{'roofline MAPE':>13} {'p90':>8}")
        for grouping in (*GROUPINGS, "overall"):
            lines += ["", f"per {grouping}" if grouping != "overall" else "overall", head]
            for r in (r for r in self.rows if r.grouping == grouping):
                lines.append(f"  {r.name:<32} {r.n:>6} {r.covered:>8} {r.out_of_domain:>8} {r.store.mape:>8.1%} "
                             f"{r.store.p90:>8.1%}   {r.roofline.mape:>13.1%} {r.roofline.p90:>8.1%}")
        if self.skipped:
            lines += ["", f"{self.skipped} samples could not be scored (no peak for their dtype, or symbolic dims)"]
        return "\n".join(lines)


def _names(obs: Observation) -> dict[str, str]:
    family, variant, pass_, _ = stratum_of(obs.item)
    return {"family": family, "operator": f"{family}/{variant}" if variant else family, "pass": pass_ or "-"}


def score(observations: Sequence[Observation], residuals: object = "default", *,
          progress: Progress | None = None) -> Score:
    """Score a residual store on ``observations``.

    ``residuals`` as for ``llmp.predict``: ``"default"``, ``None``/``"none"``, a store directory or
    a loaded store; it must serve every device the samples come from. ``progress`` is told of each
    device's samples predicted (:mod:`llmp.progress`).
    """
    if not observations:
        raise InputError("no samples to score",
                         hint="pass sample files or directories (llmp sample, llmp import-samples)")
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
            choice = store.choose(residuals, device)
            if choice.residuals is not None:
                choice.residuals.require_serves(device)
                what = f"{choice.residuals.id} ({choice.residuals.scope}, {choice.residuals.path}); {choice.note}"
            else:
                what = choice.note
            loaded[device_id], stores[device_id] = choice.residuals, what
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
    err, roof = predicted / measured - 1, roofline / measured - 1
    names = [_names(o) for o in observations]

    def row(grouping: str, name: str, sel: np.ndarray) -> Row:
        return Row(grouping=grouping, name=name, n=int(sel.sum()), covered=int(covered[sel].sum()),
                   out_of_domain=int(out_of_domain[sel].sum()), store=Errors.of(err[sel]),
                   roofline=Errors.of(roof[sel]))

    out = []
    for grouping in GROUPINGS:
        for name in sorted({names[i][grouping] for i in np.flatnonzero(ok)}):
            out.append(row(grouping, name, ok & np.asarray([nm[grouping] == name for nm in names])))
    out.append(row("overall", "all", ok))
    return Score(stores=stores, rows=tuple(out), skipped=int((~ok).sum()))
