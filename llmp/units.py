"""Units: parse unit literals once into SI, check dimensions, and format numbers for humans.

Inside llmp every quantity is SI — bytes, FLOP/s, seconds, bytes/s, watts, hertz — and a
:class:`Dimension` says which. Unit literals exist only at the edges: the DSL (``80 GiB``,
``3.35 TB/s``, ``400 Gb/s``) and the formatters below. Factors are exact :class:`Fraction`s so
``GB`` (10^9 bytes) and ``GiB`` (2^30 bytes) can never be confused and ``Gb/s`` (bits) is
exactly 10^9/8 bytes/s.

Formatting follows one rule: decimal SI prefixes for counts and rates (a "G" is 10^9, never
2^30), binary prefixes only for memory capacities, and then labelled ``KiB``/``MiB``/``GiB``.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from llmp.errors import InputError
from llmp.sym import has_free_symbols


@dataclass(frozen=True, slots=True)
class Dimension:
    """Exponents of the base dimensions llmp measures: bytes, FLOP, seconds and watts.

    Hertz is 1/second; a plain number (a count) is all zeros. Multiplying and dividing
    quantities multiplies and divides their dimensions; adding needs equal dimensions.
    """

    bytes: int = 0
    flop: int = 0
    seconds: int = 0
    watts: int = 0

    def __mul__(self, other: Dimension) -> Dimension:
        return Dimension(bytes=self.bytes + other.bytes, flop=self.flop + other.flop,
                         seconds=self.seconds + other.seconds, watts=self.watts + other.watts)

    def __truediv__(self, other: Dimension) -> Dimension:
        return Dimension(bytes=self.bytes - other.bytes, flop=self.flop - other.flop,
                         seconds=self.seconds - other.seconds, watts=self.watts - other.watts)

    @property
    def is_count(self) -> bool:
        return self == COUNT

    def describe(self) -> str:
        """A noun phrase for messages: ``a bandwidth``, ``a size``, or the unit formula."""
        named = _NAMES.get(self)
        if named is not None:
            return named[0]
        return f"a quantity in {self.formula()}"

    def example(self) -> str:
        """A literal of this dimension for hints (``400 GB/s``); empty for unnamed ones."""
        named = _NAMES.get(self)
        return named[1] if named is not None else ""

    def formula(self) -> str:
        """The SI unit, e.g. ``B/s`` or ``FLOP/s`` or ``B*s``; ``1`` for a count."""
        num = [f"{u}^{e}" if e > 1 else u for u, e in self._parts() if e > 0]
        den = [f"{u}^{-e}" if e < -1 else u for u, e in self._parts() if e < 0]
        text = "*".join(num) or "1"
        return text + "".join(f"/{d}" for d in den)

    def _parts(self) -> tuple[tuple[str, int], ...]:
        return (("B", self.bytes), ("FLOP", self.flop), ("s", self.seconds), ("W", self.watts))


COUNT = Dimension()
SIZE = Dimension(bytes=1)
BANDWIDTH = Dimension(bytes=1, seconds=-1)
COMPUTE = Dimension(flop=1, seconds=-1)
TIME = Dimension(seconds=1)
POWER = Dimension(watts=1)
FREQUENCY = Dimension(seconds=-1)

_NAMES: dict[Dimension, tuple[str, str]] = {
    COUNT: ("a plain number", "4096"),
    SIZE: ("a size", "80 GiB"),
    BANDWIDTH: ("a bandwidth", "400 GB/s"),
    COMPUTE: ("a compute rate", "989 TFLOP/s"),
    TIME: ("a time", "5 us"),
    POWER: ("a power", "700 W"),
    FREQUENCY: ("a frequency", "1830 MHz"),
}


@dataclass(frozen=True, slots=True)
class Unit:
    """A unit literal: its spelling, its exact factor to SI and its dimension."""

    symbol: str
    factor: Fraction
    dim: Dimension


def _table() -> MappingProxyType[str, Unit]:
    entries: list[tuple[str, Fraction, Dimension]] = [("B", Fraction(1), SIZE)]
    for prefix, power in (("K", 1), ("M", 2), ("G", 3), ("T", 4), ("P", 5)):
        entries.append((f"{prefix}B", Fraction(1000) ** power, SIZE))
        entries.append((f"{prefix}iB", Fraction(1024) ** power, SIZE))
    entries.append(("B/s", Fraction(1), BANDWIDTH))
    for prefix, power in (("K", 1), ("M", 2), ("G", 3), ("T", 4)):
        entries.append((f"{prefix}B/s", Fraction(1000) ** power, BANDWIDTH))
    for prefix, power in (("M", 2), ("G", 3), ("T", 4)):  # bits per second: 1 b = 1/8 B
        entries.append((f"{prefix}b/s", Fraction(1000) ** power / 8, BANDWIDTH))
    for prefix, power in (("", 0), ("G", 3), ("T", 4), ("P", 5)):
        entries.append((f"{prefix}FLOP/s", Fraction(1000) ** power, COMPUTE))
    # the micro sign (U+00B5) and the Greek mu (U+03BC) both spell micro, as does ASCII "u"
    for symbol, factor in (("s", 1), ("ms", Fraction(1, 10**3)), ("us", Fraction(1, 10**6)),
                           ("\u00b5s", Fraction(1, 10**6)), ("\u03bcs", Fraction(1, 10**6)),
                           ("ns", Fraction(1, 10**9))):
        entries.append((symbol, Fraction(factor), TIME))
    entries += [("W", Fraction(1), POWER), ("kW", Fraction(1000), POWER),
                ("Hz", Fraction(1), FREQUENCY), ("MHz", Fraction(10**6), FREQUENCY),
                ("GHz", Fraction(10**9), FREQUENCY)]
    return MappingProxyType({s: Unit(s, f, d) for s, f, d in entries})


UNITS = _table()
"""Every unit literal the DSL accepts, by spelling (case matters: ``Gb/s`` is bits)."""


def unit(symbol: str) -> Unit:
    """The :class:`Unit` spelled ``symbol``; :class:`InputError` with a did-you-mean if none."""
    try:
        return UNITS[symbol]
    except KeyError:
        raise InputError(unknown_unit_message(symbol), hint=f"known units: {', '.join(UNITS)}") from None


def _fold(symbol: str) -> str:
    """A spelling with the usual slips undone: case, ``ps``/``sec``/``S`` for per second,
    ``FLOPS`` for FLOP/s, ``u``/``µ`` for micro. Units that fold alike are the candidates."""
    text = symbol.lower().replace("\u00b5", "u").replace("\u03bc", "u")
    text = re.sub(r"flop(?:s|/s|/sec)?$", "flop/s", text)
    text = re.sub(r"bytes?$", "b", text)
    text = re.sub(r"watts?$", "w", text)
    text = re.sub(r"hertz$", "hz", text)
    text = re.sub(r"^(k|kilo|m|mega|g|giga)w$", lambda m: m.group(1)[0] + "w", text)
    text = re.sub(r"(?:/sec|/secs|ps)$", "/s", text)
    text = re.sub(r"(?<=b)s$", "/s", text)  # TBs, GBs
    return re.sub(r"^([mun]?)(?:sec|secs|seconds?)$", r"\1s", text)


def suggest_units(symbol: str) -> tuple[str, ...]:
    """The units a misspelt ``symbol`` most likely meant, best first (empty: no good guess).

    ``gib`` -> GiB, ``TFLOPS`` -> TFLOP/s, ``Gbps`` -> Gb/s, ``usec`` -> us; a spelling that
    folds onto two units (``tb/s``: bytes or bits) gets both; else the closest spellings.
    """
    folded = _fold(symbol)
    alike = [s for s in UNITS if _fold(s) == folded and s != symbol and s[-2:] not in ("\u00b5s", "\u03bcs")]
    if alike:
        return tuple(sorted(alike, key=lambda s: -difflib.SequenceMatcher(None, symbol, s).ratio()))
    ascii_units = [s for s in UNITS if s.isascii()]
    return tuple(difflib.get_close_matches(symbol, ascii_units, n=1, cutoff=0.7))


def unknown_unit_message(symbol: str) -> str:
    """``unknown unit 'GiBB' — did you mean 'GiB'?`` (or without a guess)."""
    guesses = suggest_units(symbol)
    text = f"unknown unit {symbol!r}"
    if guesses:
        text += " \u2014 did you mean " + " or ".join(f"'{g}'" for g in guesses[:2]) + "?"
    return text


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact SI magnitude with its dimension."""

    value: Fraction
    dim: Dimension

    def __float__(self) -> float:
        return float(self.value)


def parse_quantity(text: str) -> Quantity:
    """Parse ``"80 GiB"``, ``"3.35TB/s"``, ``"1_000"`` or ``"2e-3 s"`` into SI, exactly.

    For edges outside the DSL (CSV columns, CLI flags); the DSL itself lexes units with the
    grammar and calls :func:`unit`.
    """
    stripped = text.strip()
    cut = len(stripped)
    while cut > 0 and not (stripped[cut - 1].isdigit() or stripped[cut - 1] == "."):
        cut -= 1
    number, symbol = stripped[:cut].strip(), stripped[cut:].strip()
    try:
        value = Fraction(number.replace("_", ""))
    except (ValueError, ZeroDivisionError):
        raise InputError(f"not a number with a unit: {text!r}",
                         hint="write a number then a unit, e.g. '80 GiB' or '400 Gb/s'") from None
    if not symbol:
        return Quantity(value, COUNT)
    u = unit(symbol)
    return Quantity(value * u.factor, u.dim)


# ---- formatting -------------------------------------------------------------------------

_DECIMAL = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((2**50, "Pi"), (2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


def _digits(x: float, sig: int) -> str:
    """``x`` to ``sig`` significant digits without trailing zeros or exponent noise."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if not 1e-3 <= abs(x) < 1e6:  # beyond the prefixes: 1e-18 or 1e30, never 19 zeros
        return f"{x:.{sig}g}".replace("e+", "e")
    decimals = max(0, sig - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _symbolic(x: Any) -> str | None:
    """The text of a value that is still a SymPy expression with free symbols, else None."""
    if has_free_symbols(x):
        return str(x)
    return None


def _scaled(x: Any, scales: tuple[tuple[float, str], ...], unit_text: str, sig: int) -> str:
    free = _symbolic(x)
    if free is not None:
        return f"{free} {unit_text}"
    value = float(x)
    if abs(value) >= 1e4 * scales[0][0]:  # past the largest prefix: 5e20 B, not 500000 PB
        return f"{_digits(value, sig)} {unit_text}"
    for scale, prefix in scales:
        if abs(value) >= scale:
            if prefix == "k" and unit_text.startswith("B"):
                prefix = "K"  # the DSL spells kilobytes KB, so formatted sizes parse back
            return f"{_digits(value / scale, sig)} {prefix}{unit_text}"
    return f"{_digits(value, sig)} {unit_text}"


def _significant(x: float) -> int:
    """Significant digits ``x`` needs when written exactly (to 9 digits): 80 → 1, 85.9 → 3."""
    text = f"{x:.9g}".lstrip("-")
    mantissa = text.split("e")[0].replace(".", "").strip("0")
    return len(mantissa)


def _scale_of(value: float, scales: tuple[tuple[float, str], ...]) -> float:
    return next((scale for scale, _ in scales if abs(value) >= scale), 1.0)


def format_bytes(x: Any, *, binary: bool | None = None, sig: int = 3) -> str:
    """A size: ``80 GiB`` (binary prefixes) or ``100 MB`` (decimal prefixes).

    ``binary=None`` picks whichever prefix family writes the value more exactly, so a
    capacity given as ``80 GiB`` prints as ``80 GiB`` and a bucket of ``100 MB`` as ``100 MB``.
    """
    if binary is None and _symbolic(x) is None:
        value = float(x)
        b = _significant(value / _scale_of(value, _BINARY))
        d = _significant(value / _scale_of(value, _DECIMAL))
        binary = b < d
    return _scaled(x, _BINARY if binary else _DECIMAL, "B", sig)


def format_rate(x: Any, *, sig: int = 3) -> str:
    """A bandwidth in bytes/s with decimal prefixes: ``3.35 TB/s``."""
    return _scaled(x, _DECIMAL, "B/s", sig)


def format_flops(x: Any, *, sig: int = 3) -> str:
    """A compute rate in FLOP/s with decimal prefixes: ``989 TFLOP/s``."""
    return _scaled(x, _DECIMAL, "FLOP/s", sig)


def format_count(x: Any, *, sig: int = 3) -> str:
    """A plain count with decimal SI prefixes: ``8.03 G`` parameters (never 2^30-based)."""
    free = _symbolic(x)
    if free is not None:
        return free
    value = float(x)
    if value == int(value) and abs(value) < 1e4:
        return str(int(value))
    if abs(value) >= 1e18:  # past the largest prefix
        return _digits(value, sig)
    for scale, prefix in _DECIMAL:
        if abs(value) >= scale:
            return f"{_digits(value / scale, sig)} {prefix}"
    return _digits(value, sig)


def format_time(x: Any, *, sig: int = 3) -> str:
    """A duration: ``4 us``, ``1.25 ms``, ``2.5 s``, ``3.2 h`` for long runs."""
    free = _symbolic(x)
    if free is not None:
        return f"{free} s"
    value = float(x)
    size = abs(value)
    if size == 0 or not math.isfinite(value):
        return f"{_digits(value, sig)} s"
    if size < 1e-9 or size >= 1e6 * 86400.0:  # below a nanosecond, above a million days
        return f"{_digits(value, sig)} s"
    for scale, name in ((86400.0, "d"), (3600.0, "h"), (1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if size >= scale and not (name in ("d", "h") and size < 2 * scale):
            return f"{_digits(value / scale, sig)} {name}"
    return f"{_digits(value / 1e-9, sig)} ns"


def format_power(x: Any, *, sig: int = 3) -> str:
    """A power in watts: ``700 W``, ``1.2 kW``."""
    return _scaled(x, _DECIMAL, "W", sig)


def format_frequency(x: Any, *, sig: int = 3) -> str:
    """A frequency: ``1.83 GHz``."""
    return _scaled(x, _DECIMAL, "Hz", sig)


def format_quantity(x: Any, dim: Dimension, *, sig: int = 3) -> str:
    """Format ``x`` (SI) by its dimension; unnamed dimensions print the SI formula."""
    formatter = {SIZE: format_bytes, BANDWIDTH: format_rate, COMPUTE: format_flops,
                 TIME: format_time, POWER: format_power, FREQUENCY: format_frequency,
                 COUNT: format_count}.get(dim)
    if formatter is not None:
        return formatter(x, sig=sig)
    free = _symbolic(x)
    return f"{free if free is not None else _digits(float(x), sig)} {dim.formula()}"


def plural(n: Any, one: str, many: str | None = None) -> str:
    """``1 microbatch``, ``2 microbatches``: a count with its noun in the right number."""
    return f"{n} {one if n == 1 else (many or one + 's')}"
