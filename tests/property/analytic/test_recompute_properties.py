"""Selective recompute on generated models: time and memory read the same matmuls."""

from __future__ import annotations

import pytest
from analytic_helpers import context as _ctx
from analytic_helpers import recomputed as _recomputed
from analytic_helpers import titan_spec as _titan
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import gpt, llama

from llmp.analytic.activations import op_sac_bytes
from llmp.analytic.kernels import Family
from llmp.analytic.layer import op_sac_matmuls


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.sampled_from([True, False]), st.sampled_from([8, 32]))
def test_time_and_memory_read_the_same_matmuls(tp, gated, kv_heads):
    model = llama(layers=2, hidden=2048, heads=32, kv_heads=kv_heads, ffn=5632, vocab=32000, seq_len=1024)
    if not gated:
        model = gpt(layers=2, hidden=2048, heads=32, seq_len=1024)
    spec = _titan(model, tp=tp, sequence_parallel=tp > 1)
    ctx = _ctx(spec)
    matmuls = op_sac_matmuls(ctx)
    assert [mm.saved for mm in matmuls] == [i % 2 == 0 for i in range(len(matmuls))]
    redo = _recomputed(spec)
    rerun = {f"{mm.op.removeprefix('layer.')}.{mm.module}" for mm in matmuls if not mm.saved}
    assert rerun == {name for name, op in redo.items() if getattr(op.work, "family", None) is Family.GEMM}
    # memory: the saved matmul outputs, plus the layer input, SDPA output and log-sum-exp and the
    # reduce-scatter outputs
    saved_bytes = sum(ctx.e * mm.rows * mm.width for mm in matmuls if mm.saved)
    h, tokens = model.hidden, 1024
    rest = ctx.e * (tokens / tp * h * (1 + (2 / tp if tp > 1 else 0)) + tokens * model.heads * model.head_dim / tp)
    assert float(op_sac_bytes(ctx)) == pytest.approx(saved_bytes + rest + 4 * model.heads / tp * tokens)
