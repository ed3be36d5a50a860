"""Importers on generated shapes and spans: a composite split keeps the ratio and the sum."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from residual_helpers import A100

from llmp.analytic.kernels import Family, Kernel, Pass
from llmp.hardware.spec import Dtype
from llmp.residuals import dataset, features
from llmp.residuals.importers import common


@given(m=st.integers(1, 1 << 16), n=st.integers(1, 1 << 16), k=st.integers(1, 1 << 16), batch=st.integers(1, 64),
       span=st.floats(1e-6, 10.0))
def test_composite_split_keeps_the_ratio_and_the_sum(m, n, k, batch, span):
    device = dataset.catalog_device(A100)
    dgrad = Kernel.make(Family.GEMM, Dtype.FP16, Pass.BWD, m=m, n=k, k=n, batch=batch)
    wgrad = Kernel.make(Family.GEMM, Dtype.FP16, Pass.BWD, m=k, n=n, k=m, batch=batch)
    shares = common.split_span([dgrad, wgrad], span, device)
    assert math.fsum(shares) == pytest.approx(span, rel=1e-12)
    r = [t / features.roofline_seconds(kern, device)[1] for t, kern in zip(shares, (dgrad, wgrad))]
    assert r[0] == pytest.approx(r[1], rel=1e-12)
