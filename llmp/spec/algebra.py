"""Max, min, log2, ceiling and table lookups that work on numbers, numpy arrays and SymPy expressions alike.

The operator graph, the collective costs, the overlap rules and the memory model are written once
and evaluated three ways: on plain numbers (one prediction), on numpy arrays (a vectorised sweep)
and on SymPy expressions (closed forms for sensitivity). Ordinary arithmetic already works on all
three; these helpers cover the few non-arithmetic functions the formulas need. SymPy is imported
only when a formula meets one of its expressions (:mod:`llmp.sym`); its functions live in
:mod:`~llmp.spec.sympy_functions`.
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

import numpy as np

from llmp.sym import is_expr, sympy


def is_symbolic(*xs: Any) -> bool:
    return any(is_expr(x) for x in xs)


def _is_array(*xs: Any) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


_PLAIN = (int, float)


def vmax(*xs: Any) -> Any:
    """Elementwise maximum: :class:`Maximum` for expressions, ``numpy.maximum`` for arrays."""
    if all(type(x) in _PLAIN for x in xs):
        return max(xs)
    if is_symbolic(*xs):
        from llmp.spec.sympy_functions import Maximum

        return functools.reduce(Maximum, (sympy().sympify(x) for x in xs))
    if _is_array(*xs):
        return functools.reduce(np.maximum, xs)
    return max(xs)


def vmin(*xs: Any) -> Any:
    """Elementwise minimum (see :func:`vmax`)."""
    if all(type(x) in _PLAIN for x in xs):
        return min(xs)
    if is_symbolic(*xs):
        from llmp.spec.sympy_functions import Minimum

        return functools.reduce(Minimum, (sympy().sympify(x) for x in xs))
    if _is_array(*xs):
        return functools.reduce(np.minimum, xs)
    return min(xs)


def vlog2(x: Any) -> Any:
    """Base-2 logarithm, exact for expressions (``log(x)/log(2)``)."""
    if is_symbolic(x):
        return sympy().log(x, 2)
    if _is_array(x):
        return np.log2(x)
    return math.log2(x)


def vceil(x: Any) -> Any:
    """Ceiling: ``math.ceil`` for numbers (an int), ``numpy.ceil`` for arrays, :class:`Ceil` (exact,
    differentiated as its argument) for expressions."""
    if type(x) in _PLAIN:
        return math.ceil(x)
    if is_symbolic(x):
        from llmp.spec.sympy_functions import Ceil

        return Ceil(sympy().sympify(x))
    if _is_array(x):
        return np.ceil(x)
    return math.ceil(x)


def vselect(x: Any, steps: tuple[tuple[Any, Any], ...], otherwise: Any) -> Any:
    """The value of the first ``(bound, value)`` step with ``x <= bound``, else ``otherwise``: a
    table looked up by a number, ``numpy.select`` over arrays, a ``Piecewise`` of an expression."""
    if is_symbolic(x):
        sp = sympy()
        return sp.Piecewise(*((sp.sympify(v), x <= b) for b, v in steps), (sp.sympify(otherwise), True))
    if _is_array(x):
        return np.select([x <= b for b, _ in steps], [v for _, v in steps], otherwise)
    return next((v for b, v in steps if x <= b), otherwise)


def vstep(x: Any, breaks: tuple[float, ...], values: tuple[Any, ...]) -> Any:
    """A piecewise-constant look-up: ``values[i]`` where ``i`` is how many ``breaks`` (ascending)
    are <= ``x`` (so ``len(values) == len(breaks) + 1``). Floats bisect, arrays index elementwise,
    expressions become a :class:`~llmp.spec.sympy_functions.StepTable` (derivative 0)."""
    assert len(values) == len(breaks) + 1, "one value more than breaks"
    if is_symbolic(x):
        from llmp.spec.sympy_functions import StepTable

        return StepTable.of(tuple(breaks), tuple(values))(x)
    if _is_array(x):
        return np.asarray(values, dtype=float)[np.searchsorted(np.asarray(breaks, dtype=float), x, side="right")]
    return values[bisect.bisect_right(breaks, x)]


def positive_part(x: Any) -> Any:
    """``max(0, x)``: the part of a communication that compute does not hide."""
    return vmax(x, 0)


def to_float(x: Any) -> Any:
    """A number or array as float64 (SymPy numbers included); expressions pass through."""
    if isinstance(x, np.ndarray):
        return x.astype(float, copy=False)
    if is_expr(x):
        return float(x) if x.is_number else x
    return float(x)

