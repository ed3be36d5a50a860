"""llmp: predict one LLM training step on a cluster from a .llmp spec.

The public API, json-module style::

    import llmp
    spec = llmp.load("examples/llama3_8b_dgx_h100.llmp", overrides=["parallel.tp=4"])
    pred = llmp.predict(spec)                  # Prediction: step time, breakdown, memory, band
    print(pred.to_table())

``llmp.predict(spec)`` applies the residual store ``llmp predict`` applies (the one shipped for the
spec's device, else the shipped cross-GPU store, else none); ``residuals=None`` gives the bare
roofline composition, ``residuals="DIR"`` a store written by ``llmp fit``.

Each name is imported on first use, so ``import llmp`` stays cheap (no SymPy, no XGBoost).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> "module:attribute"
_API = {
    "load": "llmp.dsl:load",
    "loads": "llmp.dsl:loads",
    "Spec": "llmp.spec.spec:Spec",
    "ops": "llmp.compose:ops",
    "cost": "llmp.analytic:cost",
    "predict": "llmp.compose:predict",
    "evaluate": "llmp.compose:evaluate",
    "step_time_expr": "llmp.compose.closed_form:step_time_expr",
    "Prediction": "llmp.compose.prediction:Prediction",
    "validate": "llmp.validate:validate",
    "sensitivity": "llmp.sensitivity:sensitivity",
    "search": "llmp.search:search",
    "plan": "llmp.planning:plan",
    "LlmpError": "llmp.errors:LlmpError",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'llmp' has no attribute {name!r}")
    module, attr = _API[name].split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
