"""Properties of the step-time band: each half of a two-piece error scales on its own side, and the
band is ordered and finite for pipelines."""

from __future__ import annotations

import math

import numpy as np
from compose_helpers import predict
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import gpt, make_spec

from llmp.compose import band


@given(st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_two_piece_scales_each_half(below, above):
    z = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    eta = band.two_piece(z, below, above)
    assert np.allclose(eta[:2], below * z[:2]) and np.allclose(eta[3:], above * z[3:]) and eta[2] == 0


@settings(max_examples=10)
@given(st.sampled_from([1, 2, 4, 8]))
def test_band_is_ordered_and_finite_for_pipelines(pp):
    spec = make_spec(gpt(layers=8), gpus_per_node=pp, pp=pp, global_batch=8)
    p = predict(spec, "default")
    assert 0 < p.band[0] < p.band[1] < math.inf
    assert p.uncertainty.draws == band.DRAWS
