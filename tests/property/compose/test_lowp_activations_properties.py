"""Activations under low-precision recipes, on every attention, recompute and parallel path: low
precision never keeps more activations than BF16."""

from __future__ import annotations

from analytic_helpers import context as _ctx
from compose_helpers import ACTIVATIONS_B200_EXAMPLE as B200
from compose_helpers import ACTIVATIONS_H100_EXAMPLE as H100
from compose_helpers import VIEW_BYTES as VIEW
from compose_helpers import layer_activations as _layer
from compose_helpers import load_in_precision as _load
from hypothesis import given, settings
from hypothesis import strategies as st

import llmp
from llmp.analytic.activations import weight_grad_bytes
from llmp.analytic.structure import structure_of

MOE = "examples/mixtral_8x7b_dgx_h100.llmp"
MLA = "examples/deepseek_v3_h800.llmp"


@settings(max_examples=40, deadline=None)
@given(recipe=st.sampled_from(list(VIEW)), path=st.sampled_from([H100, B200, MOE, MLA]),
       attention=st.sampled_from(["flash2", "unfused"]),
       recompute=st.sampled_from(["none", "selective", "full"]), sp=st.booleans())
def test_low_precision_never_keeps_more_activations_than_bf16(recipe, path, attention, recompute, sp):
    precision, scaling = recipe
    extra = (f"train.attention={attention}", f"train.recompute={recompute}",
             f"parallel.sequence_parallel={str(sp).lower()}")
    bf16, low = _load(path, "bf16", None, *extra), _load(path, precision, scaling, *extra)
    for i in range(len(structure_of(low).kinds)):
        assert _layer(low, i) <= _layer(bf16, i)
        kind_low, kind_bf16 = _ctx(low).st.kinds[i], _ctx(bf16).st.kinds[i]
        assert float(weight_grad_bytes(_ctx(low), kind_low)) <= float(weight_grad_bytes(_ctx(bf16), kind_bf16))
    assert llmp.predict(low, residuals=None).memory.activations <= llmp.predict(bf16, residuals=None).memory.activations
