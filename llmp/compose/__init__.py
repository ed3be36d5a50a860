"""Composition: per-op times → one training step (pipeline timeline, overlap, memory) → Prediction.

Public API: :func:`predict`, :class:`Prediction`, :class:`Correction` (the residual models'
contract), :func:`ops` (each op's costs, as ``llmp ops`` prints them), :func:`evaluate`
(vectorised sweeps), :func:`step_time_expr` (closed form), :class:`OverlapRules`.
"""

from __future__ import annotations

from typing import Any

from llmp.compose.correction import Correction, Residuals
from llmp.compose.overlap import OverlapRules
from llmp.compose.prediction import Prediction
from llmp.compose.predictor import ops, predict
from llmp.compose.sweep import evaluate


def __getattr__(name: str) -> Any:
    # The closed form is SymPy's: imported on first use, so ``predict`` never loads SymPy.
    if name == "step_time_expr":
        from llmp.compose.closed_form import step_time_expr

        return step_time_expr
    raise AttributeError(f"module 'llmp.compose' has no attribute {name!r}")

__all__ = ["Correction", "OverlapRules", "Prediction", "Residuals", "evaluate", "ops", "predict", "step_time_expr"]
