"""Collectives a machine's own measurements priced: no residual correction on top, their band from
the measurements, and a line in the provenance.

A collective a shipped table served (:mod:`llmp.analytic.measured`, ``Prices.served``) is a
measurement of that machine, so the residual stores, which learn what NCCL's model misses on other
machines, must not correct it again: its factor is 1 and its interval is the spread of the raw
measurements around the table (``q``, at the stores' own 90% level), which the band then draws
from like any corrected op. Collectives of a measured machine that fell outside its tables (a size
or group shape nobody measured) keep the model and the store's correction, and the provenance
says so.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from llmp.analytic.correction import Correction
from llmp.analytic.measured import LEVEL
from llmp.analytic.op import OpGraph
from llmp.analytic.pricing import Prices
from llmp.compose.band import z_of


def served_mask(prices: Prices, n: int) -> np.ndarray:
    """bool per op: a measured table gave its time."""
    served = prices.served or (None,) * n
    return np.asarray([s is not None and s.seconds is not None for s in served], dtype=bool)


def apply(corr: Correction, prices: Prices) -> Correction:
    """``corr`` with every served op at factor 1 and its band ``exp(+-q)`` (``q`` moved to the
    correction's level), counted as covered (a measurement, not a bare model)."""
    n = len(corr.factor)
    mask = served_mask(prices, n)
    if not mask.any():
        return corr
    # q is the table's |log| error at LEVEL; the same normal error at the correction's own level
    q = np.asarray([s.q if m and s is not None else 0.0 for s, m in zip(prices.served, mask)])
    q = q * z_of(corr.level) / z_of(LEVEL)
    factor, low, high = (np.array(a, dtype=float, copy=True) for a in (corr.factor, corr.low, corr.high))
    covered = np.array(corr.covered, dtype=bool, copy=True)
    factor[mask], low[mask], high[mask], covered[mask] = 1.0, np.exp(-q[mask]), np.exp(q[mask]), True
    ood = None if corr.out_of_domain is None else np.array(corr.out_of_domain, dtype=bool, copy=True)
    if ood is not None:
        ood[mask] = False
    return Correction(factor=factor, low=low, high=high, covered=covered, out_of_domain=ood, level=corr.level)


def notes(graph: OpGraph, prices: Prices) -> tuple[str, ...]:
    """One line per measured series that served ops, and per series some ops fell outside of."""
    used: dict[str, list[str]] = defaultdict(list)
    outside: dict[str, list[str]] = defaultdict(list)
    why: dict[str, str] = {}
    for op, s in zip(graph.ops, prices.served or ()):
        if s is None:
            continue
        if s.seconds is not None:
            used[f"{s.series} (band +-{100 * (np.exp(s.q) - 1):.0f}%)"].append(op.name)
        else:
            outside[s.series].append(op.name)
            why.setdefault(s.series, s.note)
    lines = [f"measured on this machine, not corrected further: {', '.join(dict.fromkeys(names))}: {series}"
             for series, names in sorted(used.items())]
    lines += [f"model, outside this machine's measurements: {', '.join(dict.fromkeys(names))} ({why[series]})"
              for series, names in sorted(outside.items())]
    return tuple(lines)
