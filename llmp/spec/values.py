"""Values while resolving: exact numbers with dimensions, words, booleans, strings.

Arithmetic is exact: literals become :class:`Fraction` (``3.35`` is 335/100, never a binary
float) and stay so through ``+ - * /``; a free symbol turns a number into a SymPy expression
built from the AST, never from text. Only when a value lands in a field is it converted to the
field's type (``int`` for counts, SI ``float`` for quantities) by the ``to_*`` functions, which
also check dimension, integrality and sign and say what they expected.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from llmp.errors import Span, SpecError
from llmp.spec.schema import Bound, FieldDef, paths
from llmp.sym import is_expr, sympy
from llmp.units import COUNT, Dimension, format_quantity

if TYPE_CHECKING:
    import sympy as sp

Magnitude: TypeAlias = "Fraction | sp.Expr"

MAX_DIGITS = 64
"""Digits a number literal may have: every range ends below 1e30 (31 digits), and exact decimals
past 64 digits carry no meaning (Python refuses 4,300-digit integers outright)."""

LIMIT = Fraction(10) ** 30
"""Largest magnitude a field accepts; far above any real count or rate, far below overflow."""

MAXIMA: Mapping[str, float] = MappingProxyType({
    path: fdef.plausible.high for path, fdef in paths().items() if fdef.plausible is not None})
"""The largest value of each ``section.field`` path (:mod:`llmp.spec.ranges`), for checks outside
the language (``llmp import-hf``'s config keys, ``llmp search --gpus``)."""


@dataclass(frozen=True, slots=True)
class Num:
    """A number: exact magnitude in SI and its dimension."""

    value: Magnitude
    dim: Dimension

    def show(self) -> str:
        """``80 GiB``, ``4096``, ``100/3``, ``4*hidden``: for messages."""
        if isinstance(self.value, Fraction):
            if abs(self.value) > LIMIT:
                return "(a number beyond 1e30)"
            if self.dim == COUNT:
                whole = self.value.denominator == 1 and abs(self.value) < 10**15
                return str(self.value) if whole else f"{float(self.value):.6g}"
            return format_quantity(float(self.value), self.dim)
        return f"{self.value} {self.dim.formula()}" if self.dim != COUNT else str(self.value)

    def describe(self) -> str:
        return f"{self.dim.describe()} {self.show()}"


@dataclass(frozen=True, slots=True)
class Word:
    """A bare word: an enum value (``llama``, ``1f1b``) or a block id (``dgx_h100``)."""

    text: str

    def describe(self) -> str:
        return f"the word '{self.text}'"


@dataclass(frozen=True, slots=True)
class Flag:
    value: bool

    def describe(self) -> str:
        return f"the boolean {'true' if self.value else 'false'}"


@dataclass(frozen=True, slots=True)
class Text:
    value: str

    def describe(self) -> str:
        return f"the string {self.value!r}"


Val = Num | Word | Flag | Text


def number(text: str, span: Span) -> Fraction:
    """The exact value of a number literal (``1_000``, ``3.35``, ``2e-3``)."""
    plain = text.replace("_", "")
    mantissa, _, exponent = plain.lower().partition("e")
    if len(mantissa) > MAX_DIGITS or len(exponent) > MAX_DIGITS:
        raise SpecError(f"number of {len(mantissa)} digits is beyond any real value", span, label="bad number",
                        hint=f"a value llmp reads has at most {MAX_DIGITS} digits; write large ones with an "
                             "exponent (4e9) or a unit (4 GB)")
    if exponent and abs(int(exponent)) > 60:
        raise SpecError(f"number {text} is out of range", span, label="bad number",
                        hint="exponents beyond 1e60 are not meaningful here")
    return Fraction(mantissa) * Fraction(10) ** int(exponent or 0)


def _sym(x: Magnitude) -> sp.Expr:
    if isinstance(x, Fraction):
        return sympy().Rational(x.numerator, x.denominator)
    return x


def _normal(x: Any) -> Magnitude:
    """Back to a Fraction when SymPy arithmetic has cancelled every symbol."""
    if is_expr(x) and x.is_Rational:
        return Fraction(int(x.p), int(x.q))
    return x


def _number_or_raise(val: Val, op: str, span: Span) -> Num:
    if not isinstance(val, Num):
        raise SpecError(f"cannot use {val.describe()} in arithmetic ('{op}')", span,
                        label="type error", hint="only numbers and quantities can be combined")
    return val


def arith(op: str, left: Val, right: Val, span: Span) -> Num:
    """``left op right`` for op in + - * /, checking dimensions and division by zero."""
    a = _number_or_raise(left, op, span)
    b = _number_or_raise(right, op, span)
    if op in "+-":
        if a.dim != b.dim:
            verb = "add" if op == "+" else "subtract"
            raise SpecError(f"cannot {verb} {a.describe()} and {b.describe()}", span,
                            label="unit mismatch",
                            hint="both sides of + and - need the same kind of unit")
        value = a.value + b.value if op == "+" else a.value - b.value
        return Num(_normal(value), a.dim)
    if op == "*":
        if isinstance(a.value, Fraction) and isinstance(b.value, Fraction):
            return Num(a.value * b.value, a.dim * b.dim)
        return Num(_normal(_sym(a.value) * _sym(b.value)), a.dim * b.dim)
    divisor = b.value
    if divisor == 0 if isinstance(divisor, Fraction) else (is_expr(divisor) and divisor.is_zero):
        raise SpecError("division by zero", span, label="bad expression")
    if isinstance(a.value, Fraction) and isinstance(b.value, Fraction):
        return Num(a.value / b.value, a.dim / b.dim)
    return Num(_normal(_sym(a.value) / _sym(b.value)), a.dim / b.dim)


def negate(val: Val, span: Span) -> Num:
    a = _number_or_raise(val, "-", span)
    return Num(_normal(-a.value), a.dim)


# ---- conversion into a field --------------------------------------------------------------

def _violates(v: Magnitude, bound: Bound) -> bool:
    """True when ``v`` is certainly outside ``bound`` (unknown for free symbols = False)."""
    if isinstance(v, Fraction):
        if bound is Bound.POSITIVE:
            return v <= 0
        if bound is Bound.NONNEGATIVE:
            return v < 0
        if bound is Bound.EFFICIENCY:
            return not 0 < v <= 1
        return not 0 <= v < 1
    if bound is Bound.POSITIVE:
        return v.is_positive is False
    if bound is Bound.EFFICIENCY:
        return v.is_positive is False or (v - 1).is_positive is True
    return v.is_nonnegative is False


_BOUND_TEXT = {Bound.POSITIVE: "positive", Bound.NONNEGATIVE: "zero or more",
               Bound.FRACTION: "at least 0 and below 1", Bound.EFFICIENCY: "above 0 and at most 1"}


def _check_range(num: Num, path: str, span: Span) -> None:
    if isinstance(num.value, Fraction) and abs(num.value) > LIMIT:
        raise SpecError(f"{path} is out of range (beyond 1e30 in SI units)", span,
                        label="bad value")


def _check_plausible(num: Num, fdef: FieldDef, path: str, span: Span) -> None:
    """The field's physical range (:mod:`llmp.spec.ranges`), after its sign (:func:`_check_bound`)."""
    r = fdef.plausible
    if r is None or not isinstance(num.value, Fraction) or num.value < 0:  # a sign is _check_bound's
        return
    if num.value == 0 and fdef.bound in (Bound.NONNEGATIVE, Bound.FRACTION):
        return  # 0 means none (no window, no scale-up link)
    if not Fraction(str(r.low)) <= num.value <= Fraction(str(r.high)):  # the decimal bounds, exactly
        low, high = (format_quantity(x, fdef.dim) if fdef.dim != COUNT else
                     f"{int(x):,}" if x == int(x) else f"{x:g}" for x in (r.low, r.high))
        raise SpecError(f"{path} = {num.show()} is outside the physical range {low} to {high} ({r.why})", span,
                        label="bad value", hint="check the unit and the exponent (the ranges and their sources "
                        "are llmp/spec/ranges.py)")


def _check_bound(num: Num, fdef: FieldDef, path: str, span: Span) -> None:
    if fdef.bound is not None and _violates(num.value, fdef.bound):
        raise SpecError(f"{path} must be {_BOUND_TEXT[fdef.bound]}, got {num.show()}", span,
                        label="bad value")


def _dimension(val: Val, fdef: FieldDef, path: str, span: Span) -> Num:
    if not isinstance(val, Num):
        raise SpecError(f"{path} expects {_expected(fdef.dim)}, got {val.describe()}", span,
                        label="wrong type")
    if val.dim != fdef.dim:
        hint = None
        if val.dim == COUNT:
            hint = f"add a unit, e.g. {fdef.dim.example()}"
        elif fdef.dim == COUNT:
            hint = "this field is a plain number; drop the unit"
        raise SpecError(f"{path} expects {_expected(fdef.dim)}, got {val.describe()}", span,
                        label="wrong unit", hint=hint)
    return val


def _expected(dim: Dimension) -> str:
    example = dim.example()
    return f"{dim.describe()} (e.g. {example})" if example else dim.describe()


def to_count(val: Val, fdef: FieldDef, path: str, span: Span) -> int | sp.Expr:
    """A whole number (or an integer-valued expression of free symbols)."""
    num = _dimension(val, fdef, path, span)
    _check_range(num, path, span)
    v = num.value
    if isinstance(v, Fraction):
        if v.denominator != 1:
            raise SpecError(f"{path} must be a whole number, got {v} (= {float(v):.6g})", span,
                            label="not a whole number")
        _check_bound(num, fdef, path, span)
        _check_plausible(num, fdef, path, span)
        return int(v)
    if v.is_integer is False:
        raise SpecError(f"{path} must be a whole number, got {v}", span,
                        label="not a whole number")
    _check_bound(num, fdef, path, span)
    return v


def to_real(val: Val, fdef: FieldDef, path: str, span: Span) -> float | sp.Expr:
    """An SI float of the field's dimension (or an expression of free symbols)."""
    num = _dimension(val, fdef, path, span)
    _check_range(num, path, span)
    _check_bound(num, fdef, path, span)
    _check_plausible(num, fdef, path, span)
    return float(num.value) if isinstance(num.value, Fraction) else num.value


def to_enum(val: Val, fdef: FieldDef, path: str, span: Span) -> StrEnum:
    """A member of the field's enum; numbers are accepted for ``zero`` (0 means none)."""
    enum = fdef.enum
    assert enum is not None
    choices = [m.value for m in enum]
    if isinstance(val, Num) and isinstance(val.value, Fraction) and val.dim == COUNT:
        text = "none" if val.value == 0 else str(val.value)
    elif isinstance(val, Word):
        text = val.text
    else:
        raise SpecError(f"{path} expects one of {', '.join(choices)}; got {val.describe()}",
                        span, label="wrong type")
    if text in choices:
        return enum(text)
    close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'?" if close else None
    raise SpecError(f"{path} = '{text}'; expected one of {', '.join(choices)}", span,
                    label="unknown value", hint=hint)


def to_bool(val: Val, fdef: FieldDef, path: str, span: Span) -> bool:
    if not isinstance(val, Flag):
        raise SpecError(f"{path} expects true or false, got {val.describe()}", span,
                        label="wrong type")
    return val.value


def to_string(val: Val, fdef: FieldDef, path: str, span: Span) -> str:
    if not isinstance(val, Text):
        raise SpecError(f'{path} expects a string in double quotes, got {val.describe()}', span,
                        label="wrong type")
    return val.value


def _expr(x: Any) -> sp.Expr:
    return sympy().Integer(x) if isinstance(x, int) else x


def divides(d: Any, n: Any) -> bool | None:
    """Whether ``d`` divides ``n`` (spec values: ints or SymPy); None when free symbols leave it
    undecided (``8*x`` is divisible by 8 for any integer ``x``)."""
    if isinstance(d, int) and isinstance(n, int):
        return n % d == 0
    zero = sympy().Mod(_expr(n), _expr(d)).is_zero
    return None if zero is None else bool(zero)


def compare(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 as ``a`` <, ==, > ``b`` (spec values: numbers or SymPy); None when undecided."""
    if not (is_expr(a) or is_expr(b)):  # plain numbers: no SymPy needed (llmp.sym)
        return (a > b) - (a < b)
    diff = sympy().expand(_expr(a) - _expr(b))
    if diff.is_zero:
        return 0
    if diff.is_positive:
        return 1
    if diff.is_negative:
        return -1
    return None
