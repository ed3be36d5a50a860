"""llmp.units: exact SI factors, dimensions, and formatters that parse back."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from llmp.errors import InputError
from llmp.units import (
    BANDWIDTH,
    COMPUTE,
    COUNT,
    FREQUENCY,
    POWER,
    SIZE,
    TIME,
    Dimension,
    format_bytes,
    format_count,
    format_flops,
    format_rate,
    format_time,
    parse_quantity,
    unit,
)


@pytest.mark.parametrize("symbol,factor,dim", [
    ("B", 1, SIZE), ("KB", 10**3, SIZE), ("KiB", 2**10, SIZE), ("MB", 10**6, SIZE),
    ("MiB", 2**20, SIZE), ("GB", 10**9, SIZE), ("GiB", 2**30, SIZE), ("TB", 10**12, SIZE),
    ("TiB", 2**40, SIZE), ("B/s", 1, BANDWIDTH), ("KB/s", 10**3, BANDWIDTH),
    ("MB/s", 10**6, BANDWIDTH), ("GB/s", 10**9, BANDWIDTH), ("TB/s", 10**12, BANDWIDTH),
    ("Gb/s", Fraction(10**9, 8), BANDWIDTH), ("Tb/s", Fraction(10**12, 8), BANDWIDTH),
    ("FLOP/s", 1, COMPUTE), ("GFLOP/s", 10**9, COMPUTE), ("TFLOP/s", 10**12, COMPUTE),
    ("PFLOP/s", 10**15, COMPUTE), ("s", 1, TIME), ("ms", Fraction(1, 10**3), TIME),
    ("us", Fraction(1, 10**6), TIME), ("ns", Fraction(1, 10**9), TIME), ("W", 1, POWER),
    ("kW", 1000, POWER), ("Hz", 1, FREQUENCY), ("MHz", 10**6, FREQUENCY),
    ("GHz", 10**9, FREQUENCY),
])
def test_unit_factors_are_exact(symbol: str, factor: Fraction | int, dim: Dimension) -> None:
    u = unit(symbol)
    assert (u.factor, u.dim) == (Fraction(factor), dim)


def test_gib_is_not_gb() -> None:
    assert parse_quantity("80 GiB").value == 80 * 2**30
    assert parse_quantity("80 GB").value == 80 * 10**9
    assert format_bytes(80 * 2**30) == "80 GiB"
    assert format_bytes(80 * 10**9) == "80 GB"


def test_dimension_algebra() -> None:
    assert SIZE / TIME == BANDWIDTH
    assert BANDWIDTH * TIME == SIZE
    assert COUNT * SIZE == SIZE
    assert Dimension(flop=1) / TIME == COMPUTE
    assert FREQUENCY == COUNT / TIME
    assert (SIZE * SIZE).formula() == "B^2"
    assert BANDWIDTH.describe() == "a bandwidth" and BANDWIDTH.example() == "400 GB/s"
    assert (SIZE * TIME).describe() == "a quantity in B*s"


@pytest.mark.parametrize("text", ["80 Gib", "GiB", "80 gb", "1.2.3 GB", "", "x"])
def test_bad_quantities_are_input_errors(text: str) -> None:
    with pytest.raises(InputError):
        parse_quantity(text)


@pytest.mark.parametrize("value,formatter,expected", [
    (3.35e12, format_rate, "3.35 TB/s"), (989e12, format_flops, "989 TFLOP/s"),
    (1979e12, format_flops, "1.98 PFLOP/s"), (50 * 2**20, format_bytes, "50 MiB"),
    (100e6, format_bytes, "100 MB"), (4e-6, format_time, "4 us"), (1.25e-3, format_time, "1.25 ms"),
    (2.5, format_time, "2.5 s"), (3e-9, format_time, "3 ns"), (8_030_261_248, format_count, "8.03 G"),
    (4096, format_count, "4096"), (512, format_bytes, "512 B"), (1500, format_bytes, "1.5 KB"),
])
def test_formatting(value: float, formatter, expected: str) -> None:  # type: ignore[no-untyped-def]
    assert formatter(value) == expected


def test_counts_use_decimal_prefixes() -> None:
    # a parameter count is 10^9-based: 2^30 parameters is 1.07 G, not "1 G"
    assert format_count(2**30) == "1.07 G"


def test_symbolic_values_format_as_expressions() -> None:
    h = sp.Symbol("hidden", positive=True, integer=True)
    assert format_count(4 * h) == "4*hidden"
    assert format_rate(sp.Symbol("gpu_mem_bandwidth", positive=True)) == "gpu_mem_bandwidth B/s"
