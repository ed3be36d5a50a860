"""Symbolic costs, their compiled form and the numeric paths agree with each other."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sympy as sp
from strategies_analytic import gpt, make_spec

from llmp.analytic import compile as compile_exprs
from llmp.analytic import cost
from llmp.analytic.graph import decompose
from llmp.analytic.pricing import price
from llmp.spec.symbols import symbol_for


@pytest.fixture(scope="module")
def symbolic():
    return cost(make_spec(gpt(layers=4, dropout=0.1), nodes=2, tp=2, pp=2, cp=2, sequence_parallel=True,
                          zero="1", global_batch=16))


def test_costs_are_expressions_in_the_spec_symbols(symbolic):
    free = set().union(*(c.time.free_symbols for c in symbolic.ops))
    for path in ("model.hidden", "train.micro_batch", "parallel.tp", "gpu.mem_bandwidth", "gpu.flops.bf16",
                 "gpu.launch_overhead", "node.intra.bandwidth", "cluster.inter.bandwidth"):
        assert symbol_for(path) in free, path
    assert set(symbolic.point) >= free


def test_symbolic_costs_at_the_point_equal_the_numeric_prices(symbolic):
    spec = make_spec(gpt(layers=4, dropout=0.1), nodes=2, tp=2, pp=2, cp=2, sequence_parallel=True,
                     zero="1", global_batch=16)
    g = decompose(spec)
    numeric = price(g, spec)
    compiled = compile_exprs([c.time for c in symbolic.ops])
    values = compiled(symbolic.point)
    assert np.allclose(values, np.asarray(numeric.time, float), rtol=1e-12)


def test_lambdified_equals_subs_at_random_points(symbolic):
    rng = random.Random(3)
    chosen = rng.sample(list(symbolic.ops), 6)
    exprs = [c.time for c in chosen] + [c.flops for c in chosen] + [c.bytes for c in chosen]
    fn = compile_exprs(exprs)
    for _ in range(2):
        point = {s: v * rng.uniform(0.5, 2.0) if not s.is_integer else v for s, v in symbolic.point.items()}
        got = fn(point)
        for e, g in zip(exprs, got):
            want = float(e.subs(point))
            assert float(g) == pytest.approx(want, rel=1e-9)


def test_compiled_args_follow_the_registry_order(symbolic):
    fn = compile_exprs([c.time for c in symbolic.ops])
    from llmp.spec.symbols import registry
    order = list(registry())
    positions = [order.index(s.name) for s in fn.args]
    assert positions == sorted(positions)


def test_compile_is_cached_on_the_expressions():
    x = symbol_for("model.hidden")
    assert compile_exprs([2 * x]) is compile_exprs([2 * x])


def test_partial_substitution_never_takes_a_wrong_branch():
    # sympy.Max(1, 8/(x*y)) evaluates to 8/(x*y) for positive integers x, y (wrong at x = y = 4);
    # the model's own max stays unevaluated until every argument is a number.
    from llmp.spec.algebra import vmax, vmin
    x, y = sp.symbols("x y", integer=True, positive=True)
    assert vmax(1, 8 / (x * y)).subs(x, 4).subs(y, 4) == 1
    assert vmin(1, 8 / (x * y)).subs(x, 1).subs(y, 2) == 1
    assert float(sp.diff(vmax(x, 2 * y), x).subs({x: 3, y: 1})) == 1.0


def test_group_placement_survives_sequential_subs():
    from llmp.analytic import layout
    from llmp.analytic.structure import structure_of
    from llmp.spec import specpath
    spec = make_spec(gpt(layers=2, hidden=512, heads=8, seq_len=512, vocab=32000), nodes=2, global_batch=32,
                     tp=2, cp=2)
    sym, point = specpath.symbolize(spec)
    st_ = structure_of(spec)
    for name in layout.GROUP_NAMES:
        numeric = layout.group(spec, name, st_)
        symbolic = layout.group(sym, name, st_)
        assert float(sp.sympify(symbolic.size).subs(point)) == numeric.size, name
        assert (symbolic.ranks_per_node, symbolic.tier) == (numeric.ranks_per_node, numeric.tier), name
