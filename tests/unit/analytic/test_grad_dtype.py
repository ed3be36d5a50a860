"""Gradient bytes per element: FP32 main grads where the stack keeps them (Megatron for BF16 and FP8
runs), the 16-bit dtype otherwise; memory and the data-parallel reduction read the same bytes."""

from __future__ import annotations

import pytest
from analytic_helpers import grad_spec as _spec
from analytic_helpers import spec_grad_bytes as _bytes

from llmp.analytic.graph import decompose
from llmp.compose import predict
from llmp.spec.spec import Precision, Stack


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


def test_fp8_megatron_memory_and_dp_traffic_use_fp32_gradients():
    fp32 = _spec(Stack.MEGATRON_CORE, Precision.FP8)
    bf16 = _spec(Stack.MEGATRON_CORE, Precision.FP8, fp32_grads=False)
    assert predict(fp32).memory.grads == pytest.approx(2 * predict(bf16).memory.grads)

    def grad_sync_bytes(spec) -> float:
        ops = [op for op in decompose(spec).ops if op.name.startswith("step.dense_grad_")]
        return sum(float(op.work.bytes) * float(op.count) for op in ops)

    assert grad_sync_bytes(bf16) > 0
    assert grad_sync_bytes(fp32) == pytest.approx(2 * grad_sync_bytes(bf16))
