"""Our own reference GPT/Llama in torch, for ``llmp measure`` (no downloads, random weights).

Pre-norm decoder blocks built from explicit fields, so a spec's choices map one to one:
GPT = LayerNorm, GELU MLP, learned positions, biases, tied embeddings; Llama = RMSNorm, SwiGLU
MLP, rotary positions, GQA, no biases, untied head. Attention is SDPA (``torch_ops.attention``),
the same call the sampler times. QKV is one fused linear; SwiGLU's gate and up projections are
one fused linear of width 2*ffn (Megatron's layout): fewer, larger GEMMs.

Precision is Megatron-style mixed precision: parameters, activations and gradients in the
training dtype (bf16/fp16), FP32 master weights and optimizer states in ``FlatOptimizer``. That
is what the analytic model prices (activation bytes = 2 for bf16; optimizer reads the bf16 grad
and writes the bf16 model copy) and what Megatron, NeMo and torchtitan's FSDP run; autocast
would instead keep a second FP32 copy of the residual stream that no framework at scale uses.

Recompute: ``selective`` checkpoints the attention core (Korthikanti et al. 2022), ``full``
checkpoints each whole layer.

Torch only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from llmp.measure import torch_ops


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """The model, precision and step shape a measurement runs (JSON-able; no DSL needed)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    norm: str = "layernorm"
    """``layernorm`` | ``rmsnorm``"""
    activation: str = "gelu"
    """``gelu`` | ``swiglu`` | ``relu``"""
    position: str = "learned"
    """``learned`` | ``rotary`` | ``none``"""
    tied_embeddings: bool = True
    bias: bool = True
    dropout: float = 0.0
    precision: str = "bf16"
    """``fp32`` | ``tf32`` | ``bf16`` | ``fp16``"""
    optimizer: str = "adamw"
    micro_batch: int = 1
    microbatches: int = 1
    """Gradient-accumulation steps per optimizer step."""
    recompute: str = "none"
    """``none`` | ``selective`` | ``full``"""
    dp: int = 1
    dp_bucket_bytes: float = 25e6 * 4

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class Attention(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.c = c
        q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
        self.qkv = nn.Linear(c.hidden, q + 2 * kv, bias=c.bias)
        self.proj = nn.Linear(q, c.hidden, bias=c.bias)

    def _core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch_ops.attention(q, k, v, causal=True)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        c = self.c
        b, s, _ = x.shape
        # Q and K are adjacent in the fused output: one rotary call covers both (the analytic
        # graph's single rotary kernel over tokens x (q_width + kv_width) elements).
        qk, v = self.qkv(x).split(((c.heads + c.kv_heads) * c.head_dim, c.kv_heads * c.head_dim), dim=-1)
        qk = qk.view(b, s, c.heads + c.kv_heads, c.head_dim)
        if rope is not None:
            qk = torch_ops.rotary(qk, *rope)
        q, k = qk.split((c.heads, c.kv_heads), dim=2)
        v = v.view(b, s, c.kv_heads, c.head_dim)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if c.recompute == "selective":
            o = checkpoint(self._core, q, k, v, use_reentrant=False)
        else:
            o = self._core(q, k, v)
        return self.proj(o.transpose(1, 2).reshape(b, s, c.heads * c.head_dim))


class Mlp(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.swiglu = c.activation == "swiglu"
        self.up = nn.Linear(c.hidden, c.ffn_hidden * (2 if self.swiglu else 1), bias=c.bias)
        self.down = nn.Linear(c.ffn_hidden, c.hidden, bias=c.bias)
        self.act = torch_ops.gelu if c.activation == "gelu" else F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            return self.down(torch_ops.swiglu(gate, up))
        return self.down(self.act(h))


class Norm(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.rms = c.norm == "rmsnorm"
        self.weight = nn.Parameter(torch.ones(c.hidden))
        self.bias = None if self.rms else nn.Parameter(torch.zeros(c.hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.norm(x, self.weight, self.bias, self.rms)


class Block(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.p = c.dropout
        self.norm1, self.attn, self.norm2, self.mlp = Norm(c), Attention(c), Norm(c), Mlp(c)

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.p, training=True) if self.p > 0 else x

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        x = x + self._drop(self.attn(self.norm1(x), rope))
        return x + self._drop(self.mlp(self.norm2(x)))


class Transformer(nn.Module):
    """A decoder-only LM whose ``forward(ids, targets)`` returns the mean cross-entropy."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.hidden)
        self.pos = nn.Embedding(c.seq_len, c.hidden) if c.position == "learned" else None
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.final_norm = Norm(c)
        self.head = None if c.tied_embeddings else nn.Linear(c.hidden, c.vocab, bias=False)
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None
        for p in self.parameters():  # GPT-2 style init, scaled so the loss stays finite in bf16
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        c = self.c
        x = self.embed(ids)
        if self.pos is not None:
            x = x + self.pos.weight[: ids.shape[1]]
        if c.dropout > 0:
            x = F.dropout(x, c.dropout, training=True)
        rope = self._rope_tables(ids.shape[1], x) if c.position == "rotary" else None
        for block in self.blocks:
            if c.recompute == "full":
                x = checkpoint(block, x, rope, use_reentrant=False)
            else:
                x = block(x, rope)
        x = self.final_norm(x)
        logits = self.head(x) if self.head is not None else F.linear(x, self.embed.weight)
        return F.cross_entropy(logits.view(-1, c.vocab), targets.view(-1))

    def _rope_tables(self, seq: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self._rope is None or self._rope[0].shape[0] != seq:
            self._rope = torch_ops.rotary_tables(seq, self.c.head_dim, like.dtype, like.device)
        return self._rope


def flatten_(model: nn.Module, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Move every parameter into one flat ``dtype`` buffer and its grad into another (views).

    Autograd then accumulates straight into the flat grad buffer, the optimizer updates one
    flat tensor, and zeroing gradients is one memset: Megatron's contiguous buffers.
    """
    params = list(dict.fromkeys(model.parameters()))  # tied weights once
    total = sum(p.numel() for p in params)
    device = params[0].device
    flat = torch.empty(total, dtype=dtype, device=device)
    grads = torch.zeros(total, dtype=dtype, device=device)
    offset = 0
    for p in params:
        n = p.numel()
        flat[offset:offset + n].copy_(p.detach().reshape(-1))
        p.data = flat[offset:offset + n].view_as(p)
        p.grad = grads[offset:offset + n].view_as(p)
        offset += n
    return flat, grads


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in dict.fromkeys(model.parameters()))
