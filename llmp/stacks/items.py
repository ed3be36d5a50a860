"""Pieces several stack profiles are written with: the item of a feature a stack does not have,
the note of an equal pipeline split, and the citation of TransformerEngine's saved GEMM input,
which Megatron-Core, NeMo and Composer's FP8 all run.
"""

from __future__ import annotations

from llmp.stacks.profile import Item

EQUAL = "equal split; layers that do not divide need stage_layers or first/last_stage_layers"
"""The note of a stack that splits the layers equally over the pipeline stages."""

TE_SAVE = ("NVIDIA/TransformerEngine@0004dbd (TE 1.x):transformer_engine/pytorch/module/linear.py (_Linear.forward: "
           "ctx.save_for_backward of the FP8 inputmat_t or inputmat), layernorm_linear.py (_LayerNormLinear.forward: "
           "the FP8 ln_out); TE 2.x keeps the quantised input's columnwise view (update_usage(rowwise_usage=False))")
"""What TransformerEngine's linear layers keep of an FP8 GEMM's input for the backward."""


def no(what: str, source: str) -> Item:
    """The item of a feature the stack does not have (``False``), with what it does instead."""
    return Item(False, source, what)
