"""Evaluate a piecewise SymPy expression at a point and keep only its active branches.

The composed step time is smooth algebra wrapped in maxima and minima (``Max``/``Min`` or
llmp's ``Maximum``/``Minimum``): each roofline picks compute
or memory, an overlapped collective is ``max(0, t - partner)``, a pipeline waits on its slowest
stage. At a point every ``Max``/``Min`` has one active argument. Replacing each by that argument
gives the *local* closed form: equal to the step time at the point, smooth around it, and its
SymPy derivative is the derivative of the step time wherever no two arguments tie. Where two
different arguments tie (a kink) the local form follows one of them; :attr:`Branches.ties`
records those so a derivative taken there can be reported as one-sided.

Values are computed bottom-up in float64 with a cache per subexpression (the composed
expressions share most of their subtrees), never with ``subs().evalf()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from llmp.errors import SpecError
from llmp.spec.sympy_functions import Maximum, Minimum

MAXIMA = (sp.Max, Maximum)
"""SymPy's ``Max`` and llmp's two-argument :class:`~llmp.spec.sympy_functions.Maximum`."""
MINIMA = (sp.Min, Minimum)
KINKED = MAXIMA + MINIMA
"""Every function whose active argument depends on the point."""

TIE_REL = 1e-12
"""Two branch values closer than this (relative) are a tie: the point sits on a kink."""


@dataclass(frozen=True, slots=True)
class Tie:
    """Two different branches of one ``Max``/``Min`` with equal values at the point."""

    chosen: sp.Expr
    """The branch the local form follows (already reduced)."""
    other: sp.Expr


class Branches:
    """Values and active branches of expressions at one point (``{symbol: number}``)."""

    def __init__(self, point: Mapping[sp.Symbol, float]) -> None:
        self._point = {s: float(v) for s, v in point.items()}
        self._values: dict[sp.Basic, float] = {}
        self._reduced: dict[sp.Basic, sp.Basic] = {}
        self.ties: list[Tie] = []

    @property
    def point(self) -> Mapping[sp.Symbol, float]:
        return self._point

    def value(self, expr: sp.Basic) -> float:
        """``expr`` at the point, as a float."""
        cached = self._values.get(expr)
        if cached is None:
            cached = self._evaluate(expr)
            self._values[expr] = cached
        return cached

    def _evaluate(self, e: sp.Basic) -> float:
        if e.is_Symbol:
            try:
                return self._point[e]
            except KeyError:
                raise SpecError(f"no value for the symbol {e.name!r}",
                                hint="give every free field a value (--at or --set)") from None
        if e.is_Number:
            return float(e)
        if isinstance(e, sp.Piecewise):
            return self.value(self._active_piece(e))
        args = [self.value(a) for a in e.args]
        if e.is_Add:
            return math.fsum(args)
        if e.is_Mul:
            return math.prod(args)
        if e.is_Pow:
            return args[0] ** args[1]
        if isinstance(e, MAXIMA):
            return max(args)
        if isinstance(e, MINIMA):
            return min(args)
        if isinstance(e, sp.log) and len(args) == 1:
            return math.log(args[0])
        return float(e.func(*(sp.Float(a) for a in args)))

    def _holds(self, cond: sp.Basic) -> bool:
        """A ``Piecewise`` condition (a comparison, or ``True``) at the point."""
        if cond is sp.true or cond is sp.false:
            return bool(cond)
        if isinstance(cond, sp.core.relational.Relational):
            return bool(cond.func(sp.Float(self.value(cond.lhs)), sp.Float(self.value(cond.rhs))))
        if isinstance(cond, sp.Or):
            return any(map(self._holds, cond.args))
        if isinstance(cond, sp.And):
            return all(map(self._holds, cond.args))
        if isinstance(cond, sp.Not):
            return not self._holds(cond.args[0])
        raise SpecError(f"cannot evaluate the condition {cond} at the point")

    def _active_piece(self, e: sp.Piecewise) -> sp.Basic:
        """The expression of the first piece whose condition holds at the point (a table lookup,
        e.g. a kernel's tile by head dim: locally constant, so it is also the local form)."""
        return next(piece for piece, cond in e.args if self._holds(cond))

    def reduce(self, expr: sp.Basic) -> sp.Basic:
        """``expr`` with every ``Max``/``Min`` replaced by its argument active at the point."""
        cached = self._reduced.get(expr)
        if cached is None:
            cached = self._reduce(expr)
            self._reduced[expr] = cached
        return cached

    def _reduce(self, e: sp.Basic) -> sp.Basic:
        if not e.args:
            return e
        if isinstance(e, sp.Piecewise):
            return self.reduce(self._active_piece(e))
        if isinstance(e, KINKED):
            values = [self.value(a) for a in e.args]
            best = max(values) if isinstance(e, MAXIMA) else min(values)
            pick = values.index(best)
            chosen = self.reduce(e.args[pick])
            scale = max(abs(best), 1e-300)
            for j, v in enumerate(values):
                if j != pick and abs(v - best) <= TIE_REL * scale:
                    other = self.reduce(e.args[j])
                    if other != chosen:
                        self.ties.append(Tie(chosen=chosen, other=other))
            return chosen
        args = [self.reduce(a) for a in e.args]
        if all(a is b for a, b in zip(args, e.args)):
            return e
        return e.func(*args)
