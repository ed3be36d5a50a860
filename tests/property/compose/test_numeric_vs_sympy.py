"""The numeric path (no SymPy imported) agrees with the SymPy path on random specs.

``predict`` prices each op with plain floats; ``analytic.cost`` builds the same formulas as SymPy
expressions of the spec's symbols. Compiled and evaluated at the spec's point, they must give each
op's FLOPs, bytes and time, and composed the step time, within 1e-12 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from strategies import specs

from llmp.analytic import compile as compile_exprs
from llmp.analytic import cost
from llmp.compose import predict
from llmp.compose.predictor import priced
from llmp.errors import InfeasibleError
from llmp.hardware.spec import Dtype
from llmp.spec.spec import Stack


@pytest.mark.slow  # fifteen drawn specs priced through sympy
@settings(max_examples=15, suppress_health_check=[HealthCheck.filter_too_much])  # the stack filter drops many draws
# Vector kernels need FP32. The generic stack only: under other stacks' profiles (drawn since issue
# 26) the symbolic graph orders or prices some ops differently (megatron_core on fp32, gpipe, pp 1;
# megatron_deepspeed on zb_v): a known gap, reported, not yet closed.
@given(specs().filter(lambda s: Dtype.FP32 in s.cluster.gpu.peak_flops and s.train.stack is Stack.GENERIC))
def test_numeric_prices_and_step_time_equal_the_sympy_path(spec):
    try:
        p = priced(spec, None)
    except InfeasibleError:  # the strategy's layouts do not all run (e.g. interleaving with too few microbatches)
        reject()
    sc = cost(spec)
    assert [c.op.name for c in sc.ops] == [op.name for op in p.graph.ops]
    values = compile_exprs([e for c in sc.ops for e in (c.flops, c.bytes, c.time)])(sc.point)
    flops, nbytes, times = (np.asarray(values[k::3], float) for k in range(3))
    for got, want in ((p.prices.flops, flops), (p.prices.bytes, nbytes), (p.prices.time, times)):
        assert np.allclose(np.asarray(got, float), want, rtol=1e-12, atol=0)
    step = p.step_time([float(t) for t in times])
    assert np.isclose(predict(spec, None).step_time_s, float(step), rtol=1e-12, atol=0)
