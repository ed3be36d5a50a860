"""Adaptations: corrections of single (operator, pass) strata fitted on a few samples of a new device.

``adapt.py`` fits them, a store carries them next to its base model (``store.Residuals``
applies them to the rows of their strata), and the manifest records them as ``adjustments``:
written by :func:`entries`, read strictly by :func:`from_manifest`. Their own module, below the
store and its saving, so that each of those reads one definition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmp.analytic.kernels import Collective, Kernel
from llmp.residuals import features
from llmp.residuals.manifest import Checker
from llmp.residuals.model import gemm_layout

Stratum = tuple[str, str, str, str]
"""(family, variant, pass, dtype): see ``model.stratum_of``."""


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


def entries(adjustments: Mapping[Stratum, Adjustment] | None) -> list[dict[str, Any]]:
    """The manifest's ``adjustments`` field (sorted by stratum)."""
    return [{"family": s[0], "variant": s[1], "pass": s[2], "dtype": s[3], "offset": a.offset, "slope": a.slope,
             "feature": a.feature, "center": a.center, "n": a.n, "q": a.q, "layouts": dict(a.layouts)}
            for s, a in sorted((adjustments or {}).items())]


def from_manifest(c: Checker, m: dict[str, Any]) -> dict[Stratum, Adjustment]:
    """The manifest's ``adjustments``, each field checked (``manifest.Checker``), by stratum."""
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

