"""Composition: per-op times → one training step (pipeline timeline, overlap, memory) → Prediction.

Public API: :func:`predict`, :class:`Prediction`, :func:`ops` (each op's costs, as ``llmp ops``
prints them), :func:`evaluate` (vectorised sweeps), :class:`OverlapRules`. The closed form is
SymPy's and lives in :mod:`llmp.compose.closed_form` (``step_time_expr``), so that importing this
package for ``predict`` never loads SymPy; the residual models' contract is
:mod:`llmp.analytic.correction`'s.
"""

from __future__ import annotations

from llmp.compose.overlap import OverlapRules
from llmp.compose.prediction import Prediction
from llmp.compose.predictor import ops, predict
from llmp.compose.sweep import evaluate

__all__ = ["OverlapRules", "Prediction", "evaluate", "ops", "predict"]
