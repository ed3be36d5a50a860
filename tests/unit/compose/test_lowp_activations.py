"""Activations under low-precision recipes: TransformerEngine keeps each linear GEMM's input
quantised for the weight gradient, everything else (residual stream, norms, attention, the
activation's input) in BF16; torchao's Float8Linear keeps the BF16 input."""

from __future__ import annotations

import pytest
from analytic_helpers import context as _ctx
from compose_helpers import ACTIVATIONS_B200_EXAMPLE as B200
from compose_helpers import ACTIVATIONS_H100_EXAMPLE as H100
from compose_helpers import VIEW_BYTES as VIEW
from compose_helpers import layer_activations as _layer
from compose_helpers import load_in_precision as _load

RECIPES = [(H100, "fp8", "delayed"), (H100, "fp8", "current"), (H100, "fp8", "blockwise"),
           (B200, "fp8", "delayed"), (B200, "mxfp8", None), (B200, "nvfp4", None)]


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
