"""Expressions along one field, and where their ``Max``/``Min`` branches switch.

:class:`Along` substitutes every field's value except one, which becomes a positive real
variable ``x`` (counts are relaxed to reals); fields the spec derives from it follow it. On that
one-variable expression a regime boundary is an equation ``a(x) = b(x)`` (two branches of a
``Max``, or FLOPs / peak = bytes / bandwidth), solved with :func:`sympy.solve`. Roots are kept by
positivity and realness, never by position in the list.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

from llmp.sensitivity.branches import Branches
from llmp.sensitivity.closed import number, specialise
from llmp.sensitivity.fields import is_integer
from llmp.spec import schema
from llmp.spec.symbols import symbol_for


class Along:
    """Every field at its value except ``path``, which is the positive real variable :attr:`x`."""

    def __init__(self, path: str, current: float, point: Mapping[sp.Symbol, float],
                 derived: Mapping[str, sp.Expr]) -> None:
        self.path = path
        self.current = current
        self.floor = 1.0 if is_integer(path) else 0.0
        """Smallest meaningful value: counts are at least 1."""
        self.x = sp.Dummy(path.replace(".", "_"), positive=True)
        sym = symbol_for(path)
        follow = {symbol_for(p): e for p, e in derived.items()}
        self.symbols = frozenset(follow) | {sym}
        """The field symbols that move with :attr:`x`."""
        subs = {s: specialise(e, point, {sym: {}}).xreplace({sym: self.x}) for s, e in follow.items()}
        subs[sym] = self.x
        subs.update({s: number(v) for s, v in point.items() if s not in subs})
        self._subs = subs
        self._point = point
        self._cache: dict[sp.Basic, sp.Expr] = {}

    def __call__(self, expr: sp.Expr) -> sp.Expr:
        """``expr`` as a function of :attr:`x` alone."""
        cached = self._cache.get(expr)
        if cached is None:
            cached = expr.xreplace(self._subs)
            self._cache[expr] = cached
        return cached

    def at(self, value: float) -> Branches:
        """An evaluator of expressions in :attr:`x` at ``x = value``."""
        return Branches({self.x: value})

    def reachable(self, value: float) -> bool:
        """Whether the field can take ``value`` in a spec llmp loads: inside its physical range
        (:mod:`llmp.spec.ranges`), and for a measured ceiling not above the peak of its dtype (nor a
        peak below the ceilings measured under it), as the language's own checks require. A flip
        past either is no regime a real configuration can reach."""
        fdef = schema.field_at(self.path)
        r = fdef.plausible if fdef is not None else None
        if r is not None and not r.low <= value <= r.high:
            return False
        head, _, dtype = self.path.rpartition(".")

        def at(path: str) -> float | None:
            v = self._point.get(symbol_for(path))
            return None if v is None else float(v)

        if head in ("gpu.achievable", "gpu.flash_attention"):
            peak = at(f"gpu.flops.{dtype}")
            return peak is None or value <= peak
        if head == "gpu.flops":
            ceilings = [c for c in (at(f"gpu.achievable.{dtype}"), at(f"gpu.flash_attention.{dtype}")) if c]
            return value >= max(ceilings, default=0.0)
        return True

    def roots(self, lhs: sp.Expr, rhs: sp.Expr) -> list[float]:
        """Positive real ``x`` where ``lhs = rhs`` (both expressions of :attr:`x`, without Max/Min).

        Only polynomial boundaries (after clearing denominators) are solved; others, e.g. with
        ``log2(group)`` in ``x``, give no roots.
        """
        num, den = sp.fraction(sp.together(lhs - rhs))
        try:
            poly = sp.Poly(num, self.x)
        except sp.PolynomialError:
            return []
        if poly.degree() < 1 or num.free_symbols - {self.x}:
            return []
        found = []
        for r in sp.solve(poly.as_expr(), self.x):
            if r.is_positive is False or r.is_real is False:
                continue
            v = complex(sp.N(r))
            if abs(v.imag) > 1e-9 * max(abs(v.real), 1e-300) or v.real <= 0:
                continue
            if den.free_symbols and abs(complex(sp.N(den.xreplace({self.x: v.real})))) == 0:
                continue
            found.append(v.real)
        return sorted(x for x in set(found) if self.reachable(x))


def nearest(roots: list[float], current: float, *, span: float = 1e3, floor: float = 0.0) -> list[float]:
    """The closest root below and the closest above ``current``, within a factor ``span`` and not
    below ``floor`` (1 for counts: a micro-batch of 0.4 is not a configuration)."""
    below = [r for r in roots if max(current / span, floor) <= r < current * (1 - 1e-9)]
    above = [r for r in roots if current * (1 + 1e-9) < r <= current * span]
    return ([max(below)] if below else []) + ([min(above)] if above else [])
