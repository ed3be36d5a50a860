"""Gradient bytes per element on every stack and precision: the spec's field and master weights
override the stack."""

from __future__ import annotations

from analytic_helpers import grad_spec as _spec
from analytic_helpers import spec_grad_bytes as _bytes
from hypothesis import given
from hypothesis import strategies as st

from llmp.spec.spec import Precision, Stack
from llmp.stacks import PROFILES


@given(st.sampled_from(list(Stack)), st.sampled_from([Precision.BF16, Precision.FP16, Precision.FP8]))
def test_the_spec_field_and_master_weights_override_the_stack(stack, precision):
    assert _bytes(_spec(stack, precision, fp32_grads=True)) == 4
    assert _bytes(_spec(stack, precision, fp32_grads=False)) == 2
    assert _bytes(_spec(stack, precision, fp32_grads=True, master_weights=False)) == 2
    rule = precision in PROFILES[stack].fp32_grads.value
    assert _bytes(_spec(stack, precision)) == (4 if rule else 2)
