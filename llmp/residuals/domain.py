"""The shapes a residual model was fitted on, and whether a query is among them.

A tree model answers every query, but only near the rows it was fitted on does its answer come
from measurements: a GEMM of a narrow tensor-parallel shard (``n = hidden / 8``) scored by a
store that measured only wide ones gets the correction of the nearest wide shape, silently.
The per-feature ranges the stores always kept (``log_flops`` within the fitted range) do not
catch that: a shape can be inside every range and still far from every measured shape, small
``m`` and small ``n`` having been measured only apart.

So each group keeps its measured *shapes*: the family's dims on a log2 grid of half-octave
cells, with the kernel's kind beside them (pass, element size, variant and flags, which must
match exactly). A query is covered when some measured shape lies within about a factor of two
of it in every dim (``REACH`` cells) and is of its kind; otherwise it is out of domain: flagged
in the prediction's provenance and its band widened (``store.OUT_OF_DOMAIN_WIDEN``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import kernels
from llmp.analytic.kernels import Family
from llmp.errors import ResidualSchemaError
from llmp.residuals import features

CELLS_PER_OCTAVE = 2
"""Grid resolution of a dim: half an octave (a factor of sqrt 2) per cell."""
REACH = 2.5
"""Cells a query may be from a measured shape in each dim: two cells (a factor of two) plus the
half cell of rounding the measured shape to the grid."""
KIND_SCALE = 10
"""Cells one unit of a kind column is worth: more than ``REACH``, so kinds must match exactly."""

_DIMS: dict[str, tuple[str, ...]] = {
    Family.GEMM: ("log_m", "log_n", "log_k", "log_batch"),
    Family.ATTENTION: ("log_batch", "log_heads", "log_group", "log_seq_q", "log_seq_kv", "log_head_dim",
                       "log_head_dim_v"),
    Family.NORM: ("log_tokens", "log_hidden"),
    Family.ELEMENTWISE: ("log_elements",),
    Family.SOFTMAX: ("log_rows", "log_cols"),
    Family.CROSS_ENTROPY: ("log_tokens", "log_vocab"),
    Family.EMBEDDING: ("log_tokens", "log_hidden", "log_vocab"),
    Family.OPTIMIZER: ("log_params",),
    Family.COPY: ("log_elements",),
    Family.QUANTIZE: ("log_elements", "log_scales"),
    **{k: ("log_bytes", "group", "ranks_per_node") for k in kernels.CollectiveKind},
}
"""The dims of each family's shape, as feature names (``log_*`` natural logs, the rest counts)."""
_KIND = ("pass_bwd", "dtype_bytes", "causal", "flash", "rms", "tier_inter")
"""Columns that say which kernel (or collective) it is, besides the variant one-hots (``is_*``)."""


def shape_features(family: str) -> tuple[str, ...]:
    """The feature columns a shape of ``family`` is made of: its dims, then its kind columns."""
    names = features.FEATURES[family]
    kind = tuple(n for n in names if n in _KIND or n.startswith("is_"))
    return (*_DIMS[family], *kind)


def _grid(X: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """Rows of ``X`` (columns ``names``) on the cell grid, unrounded."""
    cols = []
    for j, name in enumerate(names):
        x = X[:, j].astype(np.float64)
        if name.startswith("log_"):
            cols.append(x * (CELLS_PER_OCTAVE / math.log(2)))
        elif name in _KIND or name.startswith("is_"):
            cols.append(x * KIND_SCALE)
        else:
            cols.append(np.log2(np.maximum(x, 1e-30)) * CELLS_PER_OCTAVE)
    return np.stack(cols, axis=1) if cols else np.zeros((len(X), 0))


@dataclass(frozen=True, slots=True)
class Shapes:
    """The measured shapes of one group (distinct grid cells), and the test of coverage."""

    names: tuple[str, ...]
    cells: np.ndarray
    """``(shapes, len(names))`` integer cells, each row distinct."""

    @classmethod
    def fitted(cls, family: str, X: np.ndarray, names: Sequence[str]) -> Shapes:
        """The shapes of the training rows ``X`` (columns ``names``, a family's feature schema)."""
        wanted = shape_features(family)
        cols = [list(names).index(n) for n in wanted]
        cells = np.unique(np.rint(_grid(X[:, cols], wanted)).astype(np.int64), axis=0)
        return cls(names=wanted, cells=cells)

    def covers(self, X: np.ndarray, names: Sequence[str], *, chunk: int = 256) -> np.ndarray:
        """Per row of ``X``: some measured shape is within ``REACH`` cells in every column."""
        cols = [list(names).index(n) for n in self.names]
        q = _grid(X[:, cols], self.names)
        out = np.zeros(len(q), dtype=bool)
        if not len(self.cells):
            return out
        cells = self.cells.astype(np.float64)
        for start in range(0, len(q), chunk):
            part = q[start:start + chunk]
            gap = np.abs(part[:, None, :] - cells[None, :, :]).max(axis=2).min(axis=1)
            out[start:start + chunk] = gap <= REACH
        return out

    def to_manifest(self) -> dict[str, Any]:
        return {"features": list(self.names), "cells": self.cells.tolist()}

    @classmethod
    def from_manifest(cls, family: str, entry: Any, where: str) -> Shapes:
        """Strict reading: the family's shape columns, whole-number cells of that width."""
        try:
            names = tuple(str(n) for n in entry["features"])
            cells = np.asarray(entry["cells"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as err:
            raise ResidualSchemaError(f"{where}: shapes are malformed ({err})",
                                      hint="refit the store with this llmp") from None
        if names != shape_features(family):
            raise ResidualSchemaError(f"{where}: shapes name columns {list(names)}, {family} has "
                                      f"{list(shape_features(family))}", hint="refit the store with this llmp")
        cells = cells.reshape(-1, len(names)) if cells.size else np.zeros((0, len(names)))
        if not np.all(np.isfinite(cells)) or not np.array_equal(cells, np.rint(cells)):
            raise ResidualSchemaError(f"{where}: shape cells must be whole numbers",
                                      hint="refit the store with this llmp")
        return cls(names=names, cells=cells.astype(np.int64))
