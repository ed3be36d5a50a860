"""Stack profiles on generated layouts, precisions and recompute: the generic profile is the same as
no stack."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from stacks_helpers import BASE

from llmp.analytic.graph import decompose
from llmp.compose.predictor import predict
from llmp.dsl import loads

STACK_ONLY = ("grad_accumulate", "step.zero_grad", "step.grad_norm", "step.inf_check", "step.unscale_check",
              "step.loss", "loss_all_reduce", "rotary_cat", "attn.mask", ".bias", "step.optimizer.")


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2]), zero=st.sampled_from(["none", "1", "2", "3"]),
       precision=st.sampled_from(["bf16", "fp16"]), recompute=st.sampled_from(["none", "selective", "full"]),
       arch=st.sampled_from(["gpt", "llama"]))
def test_generic_profile_is_the_same_as_no_stack(tp, pp, zero, precision, recompute, arch) -> None:
    text = BASE.format(arch=arch, model="ffn_hidden = 4096" if arch == "llama" else "", train="{train}",
                       parallel=f"zero = {zero}")
    text = text.replace("precision = fp16", f"precision = {precision}   recompute = {recompute}")
    sets = [f"parallel.tp={tp}", f"parallel.pp={pp}"]
    plain = loads(text.replace("{train}", ""), overrides=sets)
    generic = loads(text.replace("{train}", "stack = generic"), overrides=sets)
    a, b = predict(plain), predict(generic)
    assert a.step_time_s == b.step_time_s and a.memory.total == b.memory.total
    assert not [op.name for op in decompose(plain) if any(s in op.name for s in STACK_ONLY)]
