"""Gradient bytes per element: FP32 main grads where the stack keeps them (Megatron for BF16 and FP8
runs), the 16-bit dtype otherwise; memory and the data-parallel reduction read the same bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies_analytic import llama, make_spec, with_train

from llmp.analytic.block import Context
from llmp.analytic.grads import grad_bytes
from llmp.analytic.graph import decompose
from llmp.analytic.structure import structure_of
from llmp.compose import predict
from llmp.spec.spec import Precision, Stack
from llmp.stacks import PROFILES

MODEL = llama(layers=4, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)


def _spec(stack: Stack, precision: Precision, **train):
    return with_train(make_spec(MODEL, gpus_per_node=8, global_batch=8), stack=stack, precision=precision, **train)


def _bytes(spec) -> int:
    return grad_bytes(Context.of(spec, structure_of(spec)))


@pytest.mark.parametrize("stack, precision, expected", [
    (Stack.MEGATRON_CORE, Precision.FP8, 4),   # --bf16 + --fp8-format: grad_reduce_in_fp32, FP32 main_grad
    (Stack.NEMO, Precision.FP8, 4),
    (Stack.MEGATRON_CORE, Precision.BF16, 4),
    (Stack.MEGATRON_LM, Precision.FP16, 2),    # fp16: --accumulate-allreduce-grads-in-fp32 off
    (Stack.MEGATRON_DEEPSPEED, Precision.FP16, 2),
    (Stack.TORCHTITAN, Precision.FP8, 4),      # FSDP2's FP32 shards, reduce_dtype float32
    (Stack.GENERIC, Precision.FP32, 4),
])
def test_each_stack_keeps_its_gradient_dtype(stack, precision, expected):
    assert _bytes(_spec(stack, precision)) == expected


@given(st.sampled_from(list(Stack)), st.sampled_from([Precision.BF16, Precision.FP16, Precision.FP8]))
def test_the_spec_field_and_master_weights_override_the_stack(stack, precision):
    assert _bytes(_spec(stack, precision, fp32_grads=True)) == 4
    assert _bytes(_spec(stack, precision, fp32_grads=False)) == 2
    assert _bytes(_spec(stack, precision, fp32_grads=True, master_weights=False)) == 2
    rule = precision in PROFILES[stack].fp32_grads.value
    assert _bytes(_spec(stack, precision)) == (4 if rule else 2)


def test_fp8_megatron_memory_and_dp_traffic_use_fp32_gradients():
    fp32 = _spec(Stack.MEGATRON_CORE, Precision.FP8)
    bf16 = _spec(Stack.MEGATRON_CORE, Precision.FP8, fp32_grads=False)
    assert predict(fp32).memory.grads == pytest.approx(2 * predict(bf16).memory.grads)

    def grad_sync_bytes(spec) -> float:
        ops = [op for op in decompose(spec).ops if op.name.startswith("step.dense_grad_")]
        return sum(float(op.work.bytes) * float(op.count) for op in ops)

    assert grad_sync_bytes(bf16) > 0
    assert grad_sync_bytes(fp32) == pytest.approx(2 * grad_sync_bytes(bf16))
