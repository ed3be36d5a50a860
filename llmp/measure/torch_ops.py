"""The torch implementations shared by the sampler and the reference model.

What ``llmp sample`` times and what ``llmp measure`` runs must be the same code, or the
residual factors learned from samples would describe different kernels than the training step
executes. So every op whose implementation is a choice (rotary, SwiGLU, GELU flavour, the
optimizer over a flat master buffer, the attention call) lives here, and both sides call it.

Torch only: no sympy, xgboost or lark, so this runs on a bare GPU node.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
                "fp8": torch.float8_e4m3fn, "mxfp8": torch.float8_e4m3fn}
"""Storage dtype per llmp dtype (the FP8 formats: the target of a ``quantize`` kernel)."""

DROPOUT_P = 0.1
NORM_EPS = 1e-5


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """SDPA on ``[batch, heads, seq, head_dim]``; GQA through ``enable_gqa`` (no repeat_interleave copy).

    On CUDA, bf16/fp16 dispatch to the FlashAttention backend and fp32 to the memory-efficient
    one; on CPU to ATen's fused flash kernel. Either way the score matrix never goes to memory,
    which is the ``flash`` byte model of ``kernels.py``.
    """
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=k.shape[1] != q.shape[1])


def rotary_tables(seq: int, head_dim: int, dtype: torch.dtype,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables ``[seq, 1, head_dim]`` for rotate-half RoPE (Su et al. 2021), base 10000."""
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)[:, None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on ``[..., seq, heads, head_dim]`` (GPT-NeoX/Llama layout)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """SwiGLU (Shazeer 2020): silu(gate) * up."""
    return F.silu(gate) * up


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation (GPT-2/Megatron)."""
    return F.gelu(x, approximate="tanh")


def norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, rms: bool) -> torch.Tensor:
    if rms:
        return F.rms_norm(x, (x.shape[-1],), weight, NORM_EPS)
    return F.layer_norm(x, (x.shape[-1],), weight, bias, NORM_EPS)


class FlatOptimizer:
    """Adam(W) or SGD over one flat buffer, with FP32 master weights when the model is not FP32.

    This is the Megatron layout the analytic optimizer kernel prices: the model's parameters
    and gradients are views into two contiguous buffers of the model dtype; the optimizer keeps
    FP32 master weights (and its states) and, after each step, copies the master back into the
    model buffer. ``torch.optim.AdamW(fused=True)`` on CUDA, ``foreach=True`` on CPU.
    """

    def __init__(self, params: torch.Tensor, grads: torch.Tensor, *, kind: str, lr: float = 1e-4) -> None:
        self.params, self.grads = params, grads
        self.mixed = params.dtype != torch.float32
        self.master = params.detach().float().clone() if self.mixed else params
        self.master.requires_grad_(False)
        fused = params.device.type == "cuda"
        self.opt: torch.optim.Optimizer
        if kind == "sgd":
            self.opt = torch.optim.SGD([self.master], lr=lr, momentum=0.9, foreach=not fused, fused=fused or None)
        else:
            self.opt = torch.optim.AdamW([self.master], lr=lr, weight_decay=0.1, foreach=not fused,
                                         fused=fused or None)

    @torch.no_grad()
    def step(self) -> None:
        self.master.grad = self.grads.float() if self.mixed else self.grads
        self.opt.step()
        if self.mixed:
            self.params.copy_(self.master)
