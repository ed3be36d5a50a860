"""Memory per GPU on generated layouts: ZeRO stages reduce memory monotonically, and master
remainders keep two bytes of the master copy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_analytic import llama, make_spec, with_parallel, with_train

from llmp.compose import predict
from llmp.spec.spec import Precision, ZeroStage


@settings(max_examples=15)
@given(st.sampled_from([2, 4, 8]), st.booleans())
def test_zero_stages_reduce_memory_monotonically(dp, flash):
    base = make_spec(llama(layers=4, hidden=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000, seq_len=1024),
                     gpus_per_node=dp, global_batch=dp, flash=flash)
    totals = [predict(with_parallel(base, zero=z)).memory.total
              for z in (ZeroStage.NONE, ZeroStage.Z1, ZeroStage.Z2, ZeroStage.Z3)]
    assert totals[0] > totals[1] > totals[2] > totals[3]
    fsdp = predict(with_parallel(base, zero=ZeroStage.FSDP)).memory
    z3 = predict(with_parallel(base, zero=ZeroStage.Z3)).memory
    # FSDP's FP32 shard is the master copy: Adam keeps m and v (8 bytes), ZeRO-3 also an FP32 master (12)
    assert fsdp.optimizer == pytest.approx(z3.optimizer * 8 / 12)
    assert fsdp.grads == pytest.approx(z3.grads)


@settings(max_examples=20)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([ZeroStage.NONE, ZeroStage.Z1, ZeroStage.Z2, ZeroStage.Z3]),
       st.sampled_from([Precision.BF16, Precision.FP8]))
def test_master_remainders_keep_two_bytes_of_the_master_copy(dp, zero, precision):
    # Apex DistributedFusedAdam(store_param_remainders=True): FP32 m and v (8 bytes) and an int16
    # remainder (2) per parameter instead of a 4-byte FP32 master; weights and gradients unchanged.
    base = make_spec(llama(layers=2, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024),
                     gpus_per_node=dp, global_batch=dp, precision=precision, zero=zero)
    full, rem = predict(base).memory, predict(with_train(base, master_remainders=True)).memory
    assert rem.optimizer == pytest.approx(full.optimizer * 10 / 12)
    assert (rem.weights, rem.grads, rem.activations) == pytest.approx((full.weights, full.grads, full.activations))
    params = full.grads / 4 * (dp if zero in (ZeroStage.Z2, ZeroStage.Z3) else 1)  # FP32 main grads, unsharded
    assert full.optimizer - rem.optimizer == pytest.approx(2 * params / (dp if zero is not ZeroStage.NONE else 1))
