"""Mixture of experts on generated layouts: expert FLOPs per GPU do not depend on how the experts
are split, and a narrower window never costs more."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import make_spec, mixtral

from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Family, Kernel, Pass, cost
from llmp.analytic.op import Scope
from llmp.analytic.pricing import price
from llmp.hardware.spec import Dtype
from llmp.spec.spec import Dispatcher


@settings(max_examples=12, deadline=None)
@given(ep=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2, 4]), etp=st.sampled_from([None, 1, 2]),
       dispatcher=st.sampled_from(list(Dispatcher)))
def test_expert_flops_per_gpu_do_not_depend_on_how_experts_are_split(ep, tp, etp, dispatcher):
    # Every GPU computes its own tokens' share of the expert work, however ep and etp split the experts:
    # 6 h f (tokens / tp) top_k per layer, fwd + bwd.
    if etp is not None and tp % etp:
        etp = None
    dp = 32 // tp
    spec = make_spec(mixtral(layers=2), nodes=4, ep=ep, tp=tp, etp=etp, dispatcher=dispatcher,
                     sequence_parallel=tp > 1, global_batch=dp)
    g = decompose(spec)
    f = price(g, spec).flops
    m = spec.model
    experts = sum(float(f[i]) for i, op in enumerate(g.ops)
                  if op.scope is Scope.LAYER and ".moe.experts.fc" in op.name and not op.recompute)
    tokens = m.seq_len / tp
    assert experts == pytest.approx(3 * 2 * 3 * m.hidden * m.moe.expert_ffn_hidden * tokens * m.moe.top_k, rel=1e-9)


@settings(max_examples=40)
@given(s=st.sampled_from([512, 1024, 4096]), frac=st.sampled_from([1, 2, 4, 8, 32]))
def test_a_narrower_window_never_costs_more(s, frac):
    def flops(w):
        return cost(Kernel.make(Family.ATTENTION, Dtype.BF16, Pass.FWD, batch=1, heads=8, kv_heads=8, seq_q=s,
                                seq_kv=s, head_dim=64, head_dim_v=64, window=w, causal=True, flash=True)).flops
    assert flops(s // frac) <= flops(s) and flops(s // frac) >= flops(s) / frac
