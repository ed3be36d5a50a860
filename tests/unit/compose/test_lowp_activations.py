"""Activations under low-precision recipes: TransformerEngine keeps each linear GEMM's input
quantised for the weight gradient, everything else (residual stream, norms, attention, the
activation's input) in BF16; torchao's Float8Linear keeps the BF16 input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmp
from llmp.analytic.activations import layer_activation_bytes, weight_grad_bytes
from llmp.analytic.block import Context
from llmp.analytic.structure import structure_of

H100 = "examples/llama3_8b_dgx_h100.llmp"          # tp 1, cp 2, no stack line (generic: TE)
B200 = "examples/llama3_70b_nvfp4_dgx_b200.llmp"   # megatron_core, tp > 1 with sequence parallelism
MOE = "examples/mixtral_8x7b_dgx_h100.llmp"
MLA = "examples/deepseek_v3_h800.llmp"

# bytes per element of one saved view, written out from the TE formats (not from llmp.analytic.lowp)
VIEW = {("fp8", "delayed"): 1, ("fp8", "current"): 1, ("fp8", "blockwise"): 1 + 4 / 128,
        ("mxfp8", None): 1 + 1 / 32, ("nvfp4", None): 0.5 + 1 / 16}
RECIPES = [(H100, "fp8", "delayed"), (H100, "fp8", "current"), (H100, "fp8", "blockwise"),
           (B200, "fp8", "delayed"), (B200, "mxfp8", None), (B200, "nvfp4", None)]


def _load(path: str, precision: str, scaling: str | None, *extra: str):
    """The example at ``path`` in ``precision``, its own ``fp8_scaling`` line dropped (DeepSeek-V3's),
    moved to DGX B200 nodes for the microscaling formats (Blackwell's)."""
    with open(path) as f:
        text = "".join(line for line in f if not line.lstrip().startswith("fp8_scaling"))
    if precision in ("mxfp8", "nvfp4"):
        for node in ("dgx_h100", "hgx_h800"):
            text = text.replace(node, "dgx_b200")
    sets = [f"train.precision={precision}", *extra] + ([f"train.fp8_scaling={scaling}"] if scaling else [])
    return llmp.loads(text, filename=path, overrides=sets)


def _ctx(spec) -> Context:
    return Context.of(spec, structure_of(spec))


def _layer(spec, index: int = 0) -> float:
    ctx = _ctx(spec)
    return float(layer_activation_bytes(ctx, ctx.st.kinds[index]))


@pytest.mark.parametrize("path,precision,scaling", RECIPES)
@pytest.mark.parametrize("attention", ["flash2", "unfused"])
def test_a_dense_layer_saves_exactly_its_gemm_inputs_smaller(path, precision, scaling, attention):
    extra = (f"train.attention={attention}",)
    bf16, low = _load(path, "bf16", None, *extra), _load(path, precision, scaling, *extra)
    m, p = low.model, low.parallel
    ctx = _ctx(low)
    tsp, t, h, f, o = ctx.sp_tokens, ctx.tokens, m.hidden, m.ffn_hidden / p.tp, ctx.o_width
    view = VIEW[(precision, scaling)]
    gathered = 2 * view if precision == "nvfp4" and p.sequence_parallel else view  # QKV's and fc1's inputs
    # QKV's and fc1's inputs (the norm outputs) and fc2's input drop from 2 bytes to their saved view(s)
    drop = (2 - gathered) * 2 * tsp * h + (2 - view) * t * f
    # proj's input: quantised as well; flash attention keeps the BF16 output for its own backward
    drop += (2 - view) * t * o if attention.startswith("unfused") else -view * t * o
    assert _layer(bf16) - _layer(low) == pytest.approx(drop, rel=1e-12)


def test_block_scales_are_counted():
    mx, fp8 = _load(B200, "mxfp8", None), _load(B200, "fp8", "delayed")
    ctx = _ctx(mx)
    tsp, t, h = ctx.sp_tokens, ctx.tokens, mx.model.hidden
    saved = 2 * tsp * h + t * ctx.o_width + t * mx.model.ffn_hidden / mx.parallel.tp  # elements of saved GEMM inputs
    assert _layer(mx) - _layer(fp8) == pytest.approx(saved / 32, rel=1e-12)  # one E8M0 per 32 elements


def test_torchao_stacks_keep_the_bf16_input():
    sets = ("train.stack=torchtitan", "parallel.zero=fsdp", "train.attention=sdpa")
    assert _layer(_load(H100, "fp8", "delayed", *sets)) == _layer(_load(H100, "bf16", None, *sets))


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
