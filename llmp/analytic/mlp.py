"""The MLP: fc1 (gate and up fused for SwiGLU), the activation, fc2. A dense layer's MLP, a MoE
layer's routed experts (a batch of them, :mod:`~llmp.analytic.moe`) and its shared experts all run
it.

SwiGLU's gate and up matrices run as one GEMM of width ``2 * ffn / tp`` (Megatron-Core
``linear_fc1``); the FLOPs equal two GEMMs of ``ffn / tp``.
"""

from __future__ import annotations

from typing import Any

from llmp.analytic.block import Block, bias
from llmp.analytic.kernels import Elementwise, Family
from llmp.analytic.op import Op
from llmp.spec.model import Activation

_ACTIVATION = {Activation.GELU: Elementwise.GELU, Activation.RELU: Elementwise.RELU,
               Activation.SWIGLU: Elementwise.SWIGLU, Activation.SQUARED_RELU: Elementwise.SQUARED_RELU}


def mlp(blk: Block, tag: str, width: Any, *, rows: Any, batch: Any = 1,
        bwd_comm: tuple[Op, ...] = (), tp: Any = None) -> None:
    """fc1 (fused gate+up for SwiGLU), activation, fc2 on ``rows`` tokens, ``width / tp`` wide
    (``tp``: the tensor-parallel degree splitting it, default ``parallel.tp``).

    The activation with its bias is one kernel when the stack fuses them (Megatron bias-GELU,
    bias-SwiGLU, Liger SwiGLU). Unfused: the bias add is its own kernel (GPT-NeoX
    ``activation_func(intermediate + bias)``) and SwiGLU is eager ``silu(a) * b`` (torchtitan
    ``FeedForward``): a silu kernel, priced as the one-input GELU kernel (same traffic, one
    launch), and a two-input multiply, priced as an add.
    """
    ctx = blk.ctx
    m = ctx.spec.model
    tp = ctx.spec.parallel.tp if tp is None else tp
    act = _ACTIVATION[m.activation]
    fc1 = 2 * width / tp if act is Elementwise.SWIGLU else width / tp
    out = batch * rows * width / tp
    blk.gemm(f"{tag}.fc1", rows, fc1, m.hidden, batch=batch, bwd_comm=bwd_comm)
    if ctx.spec.train.fused_bias_act:
        blk.kernel(f"{tag}.act", Family.ELEMENTWISE, variant=act, elements=out)
    else:
        bias(blk, f"{tag}.fc1", batch * rows * fc1)
        if act is Elementwise.SWIGLU:
            blk.kernel(f"{tag}.act.silu", Family.ELEMENTWISE, variant=Elementwise.GELU, elements=out)
            blk.kernel(f"{tag}.act.mul", Family.ELEMENTWISE, variant=Elementwise.ADD, elements=out)
        else:
            blk.kernel(f"{tag}.act", Family.ELEMENTWISE, variant=act, elements=out)
    blk.gemm(f"{tag}.fc2", rows, m.hidden, width / tp, batch=batch)
