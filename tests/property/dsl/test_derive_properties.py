"""Derived devices on generated changes: a derived device is its base with exactly the written
fields replaced."""

from __future__ import annotations

import dataclasses

import pytest
from dsl_helpers import derived_device as device
from hypothesis import given
from hypothesis import strategies as st
from strategies import GiB

from llmp.hardware.spec import Device


@given(st.dictionaries(st.sampled_from(["memory", "mem_bandwidth", "sms", "clock", "tdp", "l2_cache"]),
                       st.integers(min_value=100, max_value=10_000), max_size=6))  # 100 MHz: a clock's least
def test_derived_device_is_the_base_with_exactly_the_written_fields_replaced(changes: dict[str, int]) -> None:
    units = {"memory": ("GiB", GiB), "mem_bandwidth": ("GB/s", 1e9), "sms": ("", 1), "clock": ("MHz", 1e6),
             "tdp": ("W", 1.0), "l2_cache": ("MiB", 2**20)}
    body = "  ".join(f"{name} = {value} {units[name][0]}".rstrip() for name, value in changes.items())
    derived = device(f"gpu h100_96 from h100_sxm5_80gb {{ {body} }}")
    base = device("", "h100_sxm5_80gb")
    expected = dataclasses.replace(base, **{n: v * units[n][1] for n, v in changes.items()})
    for f in dataclasses.fields(Device):
        if f.name not in ("id", "name", "derivation"):
            got, want = getattr(derived, f.name), getattr(expected, f.name)
            assert got == (pytest.approx(want) if isinstance(want, float) else want), f.name
