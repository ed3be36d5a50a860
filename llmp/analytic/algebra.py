"""Max, min and log2 that work on numbers, numpy arrays and SymPy expressions alike.

The operator graph, the collective costs, the overlap rules and the memory model are written once
and evaluated three ways: on plain numbers (one prediction), on numpy arrays (a vectorised sweep)
and on SymPy expressions (closed forms for sensitivity). Ordinary arithmetic already works on all
three; these helpers cover the few non-arithmetic functions the formulas need.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import sympy as sp


def is_symbolic(*xs: Any) -> bool:
    return any(isinstance(x, sp.Basic) for x in xs)


def _is_array(*xs: Any) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


def _printed(printer: Any, func: str, args: tuple[sp.Basic, ...]) -> str:
    return f"{func}({', '.join(printer._print(a) for a in args)})"


class Step(sp.Function):
    """Unit step (1 for x > 0, 1/2 at 0, 0 below): the derivative of :class:`Maximum`.

    Evaluates on numbers only, like :class:`Maximum` and for the same reason.
    """

    nargs = 1

    @classmethod
    def eval(cls, x: sp.Basic) -> sp.Basic | None:
        if x.is_number:
            return sp.S.One if bool(x > 0) else (sp.S.Half if x == 0 else sp.S.Zero)
        return None

    def _numpycode(self, printer: Any) -> str:
        return f"{printer._module_format('numpy.heaviside')}({printer._print(self.args[0])}, 0.5)"


class Maximum(sp.Function):
    """max(a, b) that SymPy evaluates only when both arguments are numbers.

    ``sympy.Max`` decides symbolic comparisons from assumptions, and those are wrong for ratios
    of positive integers in SymPy 1.14 (``Max(1, 8/(x*y))`` becomes ``8/(x*y)``, though
    ``x = y = 4`` gives 1/2), so a partially substituted cost could silently take the wrong
    branch. This function stays unevaluated until its arguments are numbers; it differentiates
    with :class:`Step` and prints as ``numpy.maximum`` (broadcasting scalars against arrays).
    """

    nargs = 2

    @classmethod
    def eval(cls, a: sp.Basic, b: sp.Basic) -> sp.Basic | None:
        if a.is_number and b.is_number:
            return a if bool(a >= b) else b
        return None

    def fdiff(self, argindex: int = 1) -> sp.Basic:
        a, b = self.args
        return Step(a - b) if argindex == 1 else Step(b - a)

    def _numpycode(self, printer: Any) -> str:
        return _printed(printer, printer._module_format("numpy.maximum"), self.args)

    def _pythoncode(self, printer: Any) -> str:
        return _printed(printer, "max", self.args)

    def _latex(self, printer: Any) -> str:
        return rf"\max\left({printer._print(self.args[0])}, {printer._print(self.args[1])}\right)"


class Minimum(sp.Function):
    """min(a, b), evaluated only on numbers (see :class:`Maximum`)."""

    nargs = 2

    @classmethod
    def eval(cls, a: sp.Basic, b: sp.Basic) -> sp.Basic | None:
        if a.is_number and b.is_number:
            return a if bool(a <= b) else b
        return None

    def fdiff(self, argindex: int = 1) -> sp.Basic:
        a, b = self.args
        return Step(b - a) if argindex == 1 else Step(a - b)

    def _numpycode(self, printer: Any) -> str:
        return _printed(printer, printer._module_format("numpy.minimum"), self.args)

    def _pythoncode(self, printer: Any) -> str:
        return _printed(printer, "min", self.args)

    def _latex(self, printer: Any) -> str:
        return rf"\min\left({printer._print(self.args[0])}, {printer._print(self.args[1])}\right)"


_PLAIN = (int, float)


def vmax(*xs: Any) -> Any:
    """Elementwise maximum: :class:`Maximum` for expressions, ``numpy.maximum`` for arrays."""
    if all(type(x) in _PLAIN for x in xs):
        return max(xs)
    if is_symbolic(*xs):
        return functools.reduce(Maximum, (sp.sympify(x) for x in xs))
    if _is_array(*xs):
        return functools.reduce(np.maximum, xs)
    return max(xs)


def vmin(*xs: Any) -> Any:
    """Elementwise minimum (see :func:`vmax`)."""
    if all(type(x) in _PLAIN for x in xs):
        return min(xs)
    if is_symbolic(*xs):
        return functools.reduce(Minimum, (sp.sympify(x) for x in xs))
    if _is_array(*xs):
        return functools.reduce(np.minimum, xs)
    return min(xs)


def vlog2(x: Any) -> Any:
    """Base-2 logarithm, exact for expressions (``log(x)/log(2)``)."""
    if is_symbolic(x):
        return sp.log(x, 2)
    if _is_array(x):
        return np.log2(x)
    return math.log2(x)


def positive_part(x: Any) -> Any:
    """``max(0, x)``: the part of a communication that compute does not hide."""
    return vmax(x, 0)


def to_float(x: Any) -> Any:
    """A number or array as float64 (SymPy numbers included); expressions pass through."""
    if isinstance(x, np.ndarray):
        return x.astype(float, copy=False)
    if isinstance(x, sp.Basic):
        return float(x) if x.is_number else x
    return float(x)
