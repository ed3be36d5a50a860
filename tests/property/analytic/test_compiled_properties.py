"""Symbolic costs, compiled and numeric, on generated inputs: max, min and piecewise broadcast
scalars against arrays; vectorised prices equal the scalar path."""

from __future__ import annotations

import numpy as np
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import specs

from llmp.analytic import compile as compile_exprs
from llmp.analytic.graph import decompose
from llmp.analytic.pricing import price, price_arrays


@settings(max_examples=30)
@given(st.floats(0.1, 10), st.lists(st.floats(0.1, 10), min_size=1, max_size=6))
def test_max_min_piecewise_broadcast_scalars_against_arrays(scalar, values):
    a, b = sp.symbols("a b", positive=True)
    arr = np.asarray(values)
    exprs = [sp.Max(a, b, 2), sp.Min(a, b), sp.Piecewise((a, a > b), (b, True)), sp.Max(a, 3, evaluate=False)]
    fn = compile_exprs(exprs, args=(a, b))
    mx, mn, pw, const = fn({a: scalar, b: arr})
    assert np.allclose(mx, np.maximum(np.maximum(scalar, arr), 2))
    assert np.allclose(mn, np.minimum(scalar, arr))
    assert np.allclose(pw, np.where(scalar > arr, scalar, arr))
    assert np.allclose(const, max(scalar, 3))


@settings(max_examples=20)
@given(specs())
def test_vectorised_prices_equal_the_scalar_path(spec):
    g = decompose(spec)
    one = price(g, spec)
    many = price_arrays(g, spec, 3)
    for col in range(3):
        assert np.allclose(many.time[:, col], np.asarray(one.time, float), rtol=1e-12)
        assert np.allclose(many.flops[:, col], np.asarray(one.flops, float), rtol=1e-12)
        assert np.allclose(many.bytes[:, col], np.asarray(one.bytes, float), rtol=1e-12)
