"""Measured ceilings as properties: a lower link efficiency never makes a collective faster, a
higher measured GEMM or attention rate never slows a step."""

from __future__ import annotations

import dataclasses

import numpy as np
from analytic_helpers import TERA, calibrated
from analytic_helpers import calibration_node as node
from analytic_helpers import collective as _c
from hypothesis import given
from hypothesis import strategies as st
from strategies_analytic import make_spec

from llmp.analytic.collectives import Links, time
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import CollectiveKind, Tier
from llmp.analytic.pricing import price
from llmp.analytic.structure import structure_of
from llmp.compose import predict


@given(st.sampled_from(list(CollectiveKind)), st.sampled_from([2, 4, 8, 16, 32]), st.sampled_from([1, 2, 8]),
       st.floats(1e3, 1e10), st.floats(0.05, 1.0), st.floats(0.05, 1.0))
def test_a_lower_efficiency_never_makes_a_collective_faster(kind, n, r, size, low, high):
    low, high = sorted((low, high))
    r = min(r, n)
    tier = Tier.INTRA if r == n and n <= 8 else Tier.INTER
    c = _c(kind, size, n, r=r, tier=tier)
    nic = node().inter
    slow = Links.between(node(efficiency=low), dataclasses.replace(nic, efficiency=low))
    fast = Links.between(node(efficiency=high), dataclasses.replace(nic, efficiency=high))
    assert time(c, slow) >= time(c, fast) * (1 - 1e-12)


@given(st.floats(100, 989), st.floats(100, 989))
def test_a_higher_measured_rate_never_slows_a_step(a: float, b: float):
    low, high = sorted((a, b))
    spec = make_spec()
    slow, fast = (dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, node=dataclasses.replace(
        spec.cluster.node, gpu=calibrated(r * TERA, r * TERA / 2)))) for r in (low, high))
    graph = decompose(spec, structure_of(spec))
    t_slow, t_fast = (np.array(price(graph, s).time, dtype=float) for s in (slow, fast))
    assert np.all(t_slow >= t_fast * (1 - 1e-12))
    assert np.all(t_fast >= np.array(price(graph, spec).time, dtype=float) * (1 - 1e-12))  # >= datasheet roofline
    assert predict(slow).step_time_s >= predict(fast).step_time_s * (1 - 1e-12) >= predict(spec).step_time_s * (
        1 - 1e-9)
