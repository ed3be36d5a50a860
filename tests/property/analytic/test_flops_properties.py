"""FLOP counting on generated models and layouts: a dense step executes 6N plus causal flash
attention."""

from __future__ import annotations

import pytest
from analytic_helpers import step_flops as _step_flops
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import gpt, llama, make_spec

from llmp.analytic import params


@settings(max_examples=15)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2]),
       per_replica=st.sampled_from([1, 2]), arch=st.sampled_from(["gpt", "llama"]))
def test_dense_step_flops_are_6N_plus_causal_flash_attention(tp, pp, cp, per_replica, arch):
    # Executed GEMM FLOPs = 6 N per token (N = parameters in matmuls: layers + output head);
    # flash attention executes 4 s a d / 2 forward (causal) and 2.5x that backward: 7 L a d s.
    model = gpt(layers=4) if arch == "gpt" else llama(layers=4, hidden=1024, heads=8, kv_heads=8, ffn=2816,
                                                     vocab=32000, seq_len=2048)
    gbs = 16 // (tp * pp * cp) * per_replica
    spec = make_spec(model, nodes=2, global_batch=gbs, tp=tp, pp=pp, cp=cp)
    m = spec.model
    tokens = gbs * m.seq_len
    n_matmul = params.count(m) - params.embedding_params(m) + m.vocab * m.hidden
    expected = tokens * (6 * n_matmul + 7 * m.layers * m.heads * m.head_dim * m.seq_len)
    # norms and biases are parameters but not matmul FLOPs: well under 1% of N here
    assert _step_flops(spec) == pytest.approx(expected, rel=5e-3)
