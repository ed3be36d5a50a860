"""Context parallelism on generated layouts: every way of sharing K and V does the same attention
work."""

from __future__ import annotations

import pytest
from analytic_helpers import cp_spec as _spec
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Family, Kernel
from llmp.analytic.pricing import price
from llmp.spec.spec import CpComm


def _attention_flops(spec):
    g = decompose(spec)
    f = price(g, spec).flops
    return sum(float(f[i]) for i, op in enumerate(g.ops)
               if isinstance(op.work, Kernel) and op.work.family is Family.ATTENTION)


@settings(max_examples=10, deadline=None)
@given(cp=st.sampled_from([2, 4]), tp=st.sampled_from([1, 2]))
def test_every_variant_does_the_same_attention_work(cp, tp):
    # Load-balanced ring, gathered K/V and Ulysses each leave a rank 1/cp of the causal work.
    flops = {c: _attention_flops(_spec(c, cp=cp, tp=tp)) for c in CpComm}
    assert flops[CpComm.ALL_GATHER] == pytest.approx(flops[CpComm.P2P], rel=1e-12)
    assert flops[CpComm.A2A] == pytest.approx(flops[CpComm.P2P], rel=1e-12)
