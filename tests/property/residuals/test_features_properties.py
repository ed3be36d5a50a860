"""Features on generated GEMM shapes: the waves and alignment features follow the shape."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmp.analytic import kernels
from llmp.analytic.kernels import Family, Kernel
from llmp.residuals import features


@given(m=st.integers(1, 4096), n=st.integers(1, 4096), k=st.integers(1, 4096))
def test_gemm_waves_and_alignment(m, n, k, cpu):
    kern = Kernel.make(Family.GEMM, kernels.Dtype.FP32, m=m, n=n, k=k, batch=1)
    row = dict(zip(features.FEATURES["gemm"], features.kernel_row(kern, cpu)[0]))
    assert 0 < row["wave_util"] <= 1
    assert 0 <= row["align_m"] <= 7 and (m % 2 ** int(row["align_m"]) == 0)
