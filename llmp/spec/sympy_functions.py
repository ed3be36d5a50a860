"""SymPy functions of the symbolic path: a unit step, max / min that evaluate only on numbers, table
look-ups, and a ceiling that differentiates as its argument.

Imported by :mod:`llmp.spec.algebra` the first time a formula meets a SymPy expression, so
a numeric prediction never loads SymPy (:mod:`llmp.sym`).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import sympy as sp


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


_TABLES = itertools.count()
"""Numbers the :class:`StepTable` subclasses (each table is its own SymPy function)."""


class StepTable(sp.Function):
    """A piecewise-constant function of ``x``: ``values[i]`` on ``[breaks[i-1], breaks[i])``
    (``values[0]`` below the first break, ``values[-1]`` from the last one on).

    Table look-ups of NCCL's cost model (its tree correction by message size, its constants by
    node count, ``log2i``) on expressions. Each table is its own subclass (:meth:`of`), so an
    expression holds only ``x`` as an argument and every walker of expressions sees a function of
    one number. Like :class:`Maximum` it evaluates on numbers only; its derivative is 0 (a step
    changes nothing between its breaks) and it prints as a numpy index into ``values``, so a
    compiled sweep looks every element up at once.
    """

    nargs = 1
    breaks: tuple[float, ...] = ()
    values: tuple[float, ...] = (0.0,)

    @staticmethod
    @functools.cache
    def of(breaks: tuple[float, ...], values: tuple[float, ...]) -> type[StepTable]:
        """The function of one table (one class per table, so equal tables are one function)."""
        return type(f"StepTable{next(_TABLES)}", (StepTable,), {"breaks": breaks, "values": values})

    @classmethod
    def eval(cls, x: sp.Basic) -> sp.Basic | None:
        if x.is_number:
            return sp.sympify(cls.values[sum(1 for b in cls.breaks if bool(x >= b))])
        return None

    def _eval_derivative(self, s: sp.Symbol) -> sp.Basic:
        return sp.S.Zero

    def _numpycode(self, printer: Any) -> str:
        np_ = printer._module_format("numpy")
        return (f"{np_}.asarray({printer._print(tuple(float(v) for v in self.values))})"
                f"[{np_}.searchsorted({np_}.asarray({printer._print(tuple(float(b) for b in self.breaks))}), "
                f"{printer._print(self.args[0])}, side='right')]")

    def _latex(self, printer: Any) -> str:
        return rf"\operatorname{{table}}\left({printer._print(self.args[0])}\right)"


class Ceil(sp.Function):
    """ceiling(x), exact on numbers, differentiated as ``x`` itself.

    Tile and wave counts are ceilings (``ceil(m / 128)``): staircases whose derivative is 0 between
    steps and undefined on them, which would tell ``llmp sensitivity`` that a GEMM's time does not
    depend on its width at all. Their secant over a step has slope 1 in ``x``, so that is the
    derivative taken: elasticities follow the trend of the staircase, the point value its steps.
    """

    nargs = 1

    @classmethod
    def eval(cls, x: sp.Basic) -> sp.Basic | None:
        if x.is_number:
            return sp.ceiling(x)
        return None

    def fdiff(self, argindex: int = 1) -> sp.Basic:
        return sp.S.One

    def _numpycode(self, printer: Any) -> str:
        return f"{printer._module_format('numpy.ceil')}({printer._print(self.args[0])})"

    def _pythoncode(self, printer: Any) -> str:
        return f"{printer._module_format('math.ceil')}({printer._print(self.args[0])})"

    def _latex(self, printer: Any) -> str:
        return rf"\left\lceil {printer._print(self.args[0])} \right\rceil"
