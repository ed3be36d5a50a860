"""llmp.units on generated quantities: decimal and binary prefixes never coincide, bits per second
are an eighth of bytes, and formatted quantities parse back."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.units import BANDWIDTH, SIZE, TIME, UNITS, Dimension, format_quantity, parse_quantity


@given(st.sampled_from(["K", "M", "G", "T"]))
def test_decimal_and_binary_prefixes_never_coincide(prefix: str) -> None:
    decimal, binary = UNITS[f"{prefix}B"].factor, UNITS[f"{prefix}iB"].factor
    assert binary / decimal == Fraction(1024, 1000) ** ("KMGT".index(prefix) + 1)


@given(st.integers(1, 10**6))
def test_bits_per_second_are_an_eighth_of_bytes(n: int) -> None:
    assert parse_quantity(f"{n} Gb/s").value * 8 == parse_quantity(f"{n} GB/s").value
    assert parse_quantity(f"{n} Tb/s").value * 8 == parse_quantity(f"{n} TB/s").value


@given(st.sampled_from([SIZE, BANDWIDTH, TIME]),
       st.floats(1e-9, 1e15, allow_nan=False, allow_infinity=False))
def test_formatted_quantities_parse_back(dim: Dimension, value: float) -> None:
    if (dim == BANDWIDTH and value >= 1e15) or (dim == TIME and value >= 3600):
        return  # no PB/s and no hours in the DSL (format_time writes "2 h" for people)
    text = format_quantity(value, dim, sig=12)
    back = parse_quantity(text)
    assert back.dim == dim
    assert float(back.value) == pytest.approx(value, rel=1e-9, abs=1e-21)
