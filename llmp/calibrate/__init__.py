"""``llmp calibrate``: correct one stack on one cluster from a few of the user's own measured steps.

    cal = llmp.calibrate.calibrate(["measured.csv"])       # fit (inputs.py, fit.py)
    cal.save("STACK.json")
    llmp.predict(spec, calibration="STACK.json")   # apply (compose/calibration_file.py, posterior.py)

A calibration fits a few physical factors (the tensor-core and memory-bound kernels' efficiency,
communication efficiency inside and across nodes, a fixed per-step overhead), shrunk toward the
uncalibrated model so that one run moves it only as far as one run can tell (``fit.py``). It is
the separate, explicit path by which measured steps change a prediction: zero-shot predictions
never read one, and ``--calibration`` says so in the provenance.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence

from llmp.analytic.correction import Residuals
from llmp.calibrate import fit as fitting
from llmp.calibrate import inputs
from llmp.compose import band
from llmp.compose.band import CompositionTerm
from llmp.compose.calibration_file import (
    Basis,
    Calibration,
    FittedRow,
    Source,
    as_calibration,
    file_digest,
    load,
)
from llmp.compose.predictor import ROOFLINE_ONLY, priced
from llmp.compose.priced import Priced
from llmp.errors import InfeasibleError, InputError
from llmp.progress import Progress, tick

__all__ = ["Calibration", "as_calibration", "calibrate", "fit_basis", "load"]


def residuals_id(p: Priced) -> str:
    """The id a prediction's provenance gives the store that corrected ``p`` (or roofline only)."""
    return p.residuals.id if p.residuals is not None else ROOFLINE_ONLY


def fit_basis(rows: Sequence[Priced], measured_s: Sequence[float], keys: Sequence[str],
              term: CompositionTerm) -> Basis:
    """Fit the factors on priced rows that were all corrected by one store."""
    ids = sorted({residuals_id(p) for p in rows})
    if len(ids) != 1:
        raise InputError(f"the rows were corrected by different residual stores ({', '.join(ids)})",
                         hint="calibrate the rows of one GPU with one store (--residuals DIR)")
    post = fitting.fit(rows, measured_s, term)
    fitted = tuple(FittedRow(key=k, measured_s=float(m), predicted_s=float(p.step_time(p.times)),
                             calibrated_s=post.point(p)) for p, m, k in zip(rows, measured_s, keys))
    return Basis(residuals=ids[0], posterior=post, rows=fitted)


def calibrate(paths: Sequence[str | os.PathLike[str]], *,
              residuals: Residuals | str | os.PathLike[str] | None = "default", sources: Sequence[str] = (),
              term: CompositionTerm | None = None, progress: Progress | None = None) -> Calibration:
    """Fit a calibration on the measured steps in ``paths`` (the API of ``llmp calibrate``).

    ``residuals`` as for ``llmp.predict``: the calibration holds a basis for predictions made with
    that store, and one for the bare roofline composition (what ``llmp search`` evaluates).
    ``sources``: only rows of these sources. ``term``: the composition term the prior is built from
    (default: the shipped one). ``progress``: told of each row predicted.
    """
    files = [os.fspath(p) for p in paths]
    measured = inputs.read(files, sources)
    term = term or band.composition_term()
    choices = [residuals] + ([None] if residuals is not None and residuals != "none" else [])
    keys = [r.metric_row.key for r in measured.rows]
    times = [r.measured_s for r in measured.rows]
    bases = []
    for c, choice in enumerate(choices):
        rows = []
        for i, r in enumerate(measured.rows):
            tick(progress, c * len(measured.rows) + i, len(choices) * len(measured.rows))
            try:
                rows.append(priced(r.spec, choice))
            except InfeasibleError as err:
                raise InputError(f"{r.measurement.lines}: the layout cannot run: {err.message}",
                                 label="rows llmp cannot model", hint="remove the row") from None
        bases.append(fit_basis(rows, times, keys, term))
    sources_ = tuple(Source(path=f, sha256=file_digest(f),
                            rows=tuple(r.metric_row.key for r in measured.rows if r.metric_row.file == f))
                     for f in measured.files)
    return Calibration(gpu=measured.gpu, stack=measured.stack, bases=tuple(bases), inputs=sources_,
                       composition_term=term, created=datetime.date.today().isoformat())
