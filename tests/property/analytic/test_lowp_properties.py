"""Low-precision GEMMs on generated shapes: on a compute-bound shape a low-precision GEMM is no
slower than BF16."""

from __future__ import annotations

from analytic_helpers import LOWP_B200_EXAMPLE as B200
from analytic_helpers import LOWP_H100_EXAMPLE as H100
from analytic_helpers import example_gpu as _gpu
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.analytic import kernels, roofline
from llmp.analytic.kernels import Family, Kernel
from llmp.hardware.spec import Dtype


def _time(k: Kernel, device) -> float:
    c = kernels.cost(k)
    rate = roofline.ceiling(k, c.tensor_core, device)[0]
    return float(max(c.flops / rate, c.bytes / device.mem_bandwidth))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(2048, 32768), n=st.integers(2048, 32768), k=st.integers(2048, 32768),
       gpu=st.sampled_from([(H100, Dtype.FP8), (B200, Dtype.FP8), (B200, Dtype.MXFP8), (B200, Dtype.NVFP4)]))
def test_a_low_precision_gemm_is_no_slower_than_bf16_on_a_compute_bound_shape(m, n, k, gpu):
    path, dtype = gpu
    device = _gpu(path)
    bf16 = _time(Kernel.make(Family.GEMM, Dtype.BF16, m=m, n=n, k=k, batch=1), device)
    low = _time(Kernel.make(Family.GEMM, dtype, m=m, n=n, k=k, batch=1), device)
    assert low <= bf16
