"""Fine-tuning on generated layouts: rank-0 adapters are the frozen base's step, and a rank adds
time."""

from __future__ import annotations

from analytic_helpers import finetune_spec as _spec
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.compose import predict


@settings(max_examples=12, deadline=None)
@given(rank=st.sampled_from([1, 4, 16, 64]), tp=st.sampled_from([1, 2]), packed=st.sampled_from([0, 512]))
def test_rank_zero_adapters_are_the_frozen_base_step_and_a_rank_adds_time(rank, tp, packed):
    def step(block: str) -> float:
        return float(predict(_spec(block, tp=tp), residuals=None).step_time_s)

    frozen = step(f"finetune {{ method = lora  lora_qkv = false  lora_proj = false  lora_fc1 = false  "
                  f"lora_fc2 = false  sample_len = {packed} }}")
    assert step(f"finetune {{ method = lora  lora_rank = 0  sample_len = {packed} }}") == frozen
    assert step(f"finetune {{ method = lora  lora_rank = {rank}  sample_len = {packed} }}") > frozen
