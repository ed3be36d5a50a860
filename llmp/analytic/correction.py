"""The contract between residual models and the composer.

A residual model corrects the analytic time of each kernel or collective by a positive factor
with a band. The composer hands it the items (the :class:`~llmp.analytic.kernels.Kernel` or
:class:`~llmp.analytic.kernels.Collective` of every op, with numeric dims) and the spec; it
returns one :class:`Correction` with one entry per item. ``llmp.residuals`` implements
:class:`Residuals`; nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from llmp.analytic.kernels import Collective, Kernel
from llmp.errors import ResidualSchemaError
from llmp.spec.spec import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Correction:
    """Multiplicative factors on the roofline / alpha-beta time, one per item."""

    factor: np.ndarray
    """Point estimate of measured / analytic time (1 = the analytic time is right)."""
    low: np.ndarray
    """Lower end of the band (a factor too, <= factor)."""
    high: np.ndarray
    """Upper end of the band (>= factor)."""
    covered: np.ndarray
    """bool: a fitted model existed for the item's family (False: factor 1, flagged)."""
    out_of_domain: np.ndarray | None = None
    """bool: the item lies outside the shapes its model was fitted on (its band is widened and the
    prediction's provenance names it); None: nothing flagged."""
    level: float = 0.9
    """How often the measured factor of a covered item falls inside [low, high] (1 - alpha of the
    store's conformal bands; every shipped store is fitted at alpha 0.1). The step-time band
    converts each item's interval to a log-normal error through it (``compose.band``)."""

    @classmethod
    def identity(cls, n: int) -> Correction:
        """No correction: factor 1, zero-width band, nothing covered."""
        ones = np.ones(n)
        return cls(factor=ones, low=ones, high=ones, covered=np.zeros(n, dtype=bool))

    def check(self, n: int) -> Correction:
        """Raise unless the arrays have ``n`` entries and low <= factor <= high, all positive."""
        names = ("factor", "low", "high", "covered") + (("out_of_domain",) if self.out_of_domain is not None else ())
        arrays = {name: np.asarray(getattr(self, name)) for name in names}
        bad = [name for name, a in arrays.items() if a.shape != (n,)]
        if bad:
            raise ResidualSchemaError(f"residual correction has wrong shape for {', '.join(bad)}: expected ({n},)")
        f, lo, hi = arrays["factor"], arrays["low"], arrays["high"]
        if not (np.all(lo > 0) and np.all(lo <= f) and np.all(f <= hi) and np.all(np.isfinite(hi))):
            raise ResidualSchemaError("residual correction needs 0 < low <= factor <= high, all finite")
        if not 0 < self.level < 1:
            raise ResidualSchemaError(f"residual correction level {self.level} must lie in (0, 1)")
        return self


class Residuals(Protocol):
    """What ``llmp.compose.predict`` needs from a loaded residual model store."""

    @property
    def id(self) -> str:
        """A short id of the fitted models (manifest hash), recorded in the provenance."""
        ...

    # A store loaded by ``llmp.residuals.store`` also has ``path`` and ``scope`` ("per-device" or
    # "cross-GPU"), which the provenance reports when present.

    def correct(self, items: Sequence[Kernel | Collective], spec: Spec) -> Correction:
        """One factor and band per item, in order."""
        ...
