"""The analytic model: operator graph, closed-form FLOPs/bytes, roofline and alpha-beta times.

Public API:

* ``ops(spec) -> OpGraph``: the operators of one step (per chunk, microbatch and rank);
* ``cost(spec) -> SymbolicCost``: each op's FLOPs, bytes and seconds as SymPy expressions of
  the spec's symbols, with the spec's values as ``point``;
* ``compile(exprs) -> CompiledCost``: lambdified, cached, vectorised evaluation.

Composing ops into a step (``evaluate``, ``step_time_expr``) is :mod:`llmp.compose`'s, the floor
above this one.

Module names avoid the function names (``graph``, ``symbolic``, ``compiled``) so that
``llmp.analytic.cost`` stays the function.
"""

from __future__ import annotations

import importlib
from typing import Any

from llmp.analytic.graph import decompose
from llmp.analytic.op import Op, OpGraph
from llmp.spec.spec import Spec

_LAZY = {
    # SymPy-backed: imported on first use, so a numeric prediction never loads SymPy (llmp.sym).
    "CompiledCost": "llmp.analytic.compiled", "compile": "llmp.analytic.compiled",
    "OpCost": "llmp.analytic.symbolic", "SymbolicCost": "llmp.analytic.symbolic", "cost": "llmp.analytic.symbolic",
}


def ops(spec: Spec) -> OpGraph:
    """The operator graph of ``spec`` (numeric dims)."""
    return decompose(spec)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'llmp.analytic' has no attribute {name!r}")


__all__ = [
    "CompiledCost",
    "Op",
    "OpCost",
    "OpGraph",
    "SymbolicCost",
    "compile",
    "cost",
    "decompose",
    "ops",
]
