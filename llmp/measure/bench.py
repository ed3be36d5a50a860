"""Torch micro-benchmarks: one runnable kernel per design ``Case``.

Each family builder allocates one set of random (never zero) inputs and returns a zero-argument
callable that launches exactly the kernel(s) the case names, plus the set's footprint in bytes.
``build`` makes several sets and rotates through them, so that consecutive timed calls do not
find their inputs in the last-level cache (as many sets as cover twice the cache, at most 8,
within a memory cap). Working sets far below the cache stay resident, as they do between a
producer and a consumer op in a real step.

Backward cases build the forward graph once per set and time ``torch.autograd.grad`` of the op's
own backward node(s), with ``retain_graph`` so the same graph is reused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from llmp.measure import torch_ops
from llmp.measure.design import Case

Runner = Callable[[], object]


def _randn(shape: tuple[int, ...], dtype: torch.dtype, dev: torch.device, grad: bool = False) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype, device=dev).requires_grad_(grad)


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _backward(y: torch.Tensor, inputs: tuple[torch.Tensor, ...], dev: torch.device) -> Runner:
    dy = torch.randn_like(y) if y.dim() > 0 else None
    return lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)


def _gemm(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    m, n, k, batch = (c.dim(d) for d in ("m", "n", "k", "batch"))
    if batch > 1:
        a, b = _randn((batch, m, k), dt, dev), _randn((batch, k, n), dt, dev)
        return (lambda: torch.bmm(a, b)), _nbytes(a, b)
    if c.variant == "fwd":  # nn.Linear: x[m,k] @ W[n,k]^T
        x, w = _randn((m, k), dt, dev), _randn((n, k), dt, dev)
        return (lambda: F.linear(x, w)), _nbytes(x, w)
    if c.variant == "dgrad":  # dX[m,n] = dY[m,k] @ W[k,n]
        dy, w = _randn((m, k), dt, dev), _randn((k, n), dt, dev)
        return (lambda: torch.mm(dy, w)), _nbytes(dy, w)
    # wgrad: dW[n,m] = dY[k,n]^T @ X[k,m]  (contraction over the k = tokens rows)
    dy, x = _randn((k, n), dt, dev), _randn((k, m), dt, dev)
    return (lambda: torch.mm(dy.t(), x)), _nbytes(dy, x)


def _attention(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    b, h, hkv, sq, skv, d, dv, causal = (c.dim(n) for n in ("batch", "heads", "kv_heads", "seq_q", "seq_kv",
                                                             "head_dim", "head_dim_v", "causal"))
    if c.dim("window") != skv:
        raise ValueError("SDPA has no sliding window: the sampler times full attention (window = seq_kv) only")
    bwd = c.pass_ == "bwd"
    q = _randn((b, h, sq, d), dt, dev, bwd)
    k, v = _randn((b, hkv, skv, d), dt, dev, bwd), _randn((b, hkv, skv, dv), dt, dev, bwd)
    if not bwd:
        return (lambda: torch_ops.attention(q, k, v, bool(causal))), _nbytes(q, k, v)
    o = torch_ops.attention(q, k, v, bool(causal))
    return _backward(o, (q, k, v), dev), 2 * _nbytes(q, k, v, o)


def _norm(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    n, h, rms = c.dim("tokens"), c.dim("hidden"), bool(c.dim("rms"))
    bwd = c.pass_ == "bwd"
    x = _randn((n, h), dt, dev, bwd)
    w = _randn((h,), dt, dev, bwd)
    bias = None if rms else _randn((h,), dt, dev, bwd)
    if not bwd:
        return (lambda: torch_ops.norm(x, w, bias, rms)), 2 * _nbytes(x)
    y = torch_ops.norm(x, w, bias, rms)
    inputs = (x, w) if bias is None else (x, w, bias)
    return _backward(y, inputs, dev), 3 * _nbytes(x)


def _elementwise(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    width = c.width
    rows = c.dim("elements") // width
    bwd = c.pass_ == "bwd"
    v = c.variant
    if v == "rotary":
        group = 8 if rows % 8 == 0 else 1  # heads sharing one position's cos/sin
        x = _randn((rows // group, group, width), dt, dev, bwd)
        cos, sin = torch_ops.rotary_tables(rows // group, width, dt, dev)
        fn: Callable[[], torch.Tensor] = functools.partial(torch_ops.rotary, x, cos, sin)
        inputs: tuple[torch.Tensor, ...] = (x,)
    elif v in ("swiglu", "add"):
        a, b = _randn((rows, width), dt, dev, bwd), _randn((rows, width), dt, dev, bwd)
        fn = functools.partial(torch_ops.swiglu if v == "swiglu" else torch.add, a, b)
        inputs = (a, b)
    else:
        x = _randn((rows, width), dt, dev, bwd)
        unaries: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "gelu": torch_ops.gelu, "relu": F.relu,
            "dropout": functools.partial(F.dropout, p=torch_ops.DROPOUT_P, training=True)}
        unary = unaries[v]
        fn = functools.partial(unary, x)
        inputs = (x,)
    size = _nbytes(*inputs)
    if not bwd:
        return fn, 2 * size
    return _backward(fn(), inputs, dev), 3 * size


def _softmax(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    bwd = c.pass_ == "bwd"
    x = _randn((c.dim("rows"), c.dim("cols")), dt, dev, bwd)
    if not bwd:
        return (lambda: torch.softmax(x, dim=-1)), 2 * _nbytes(x)
    return _backward(torch.softmax(x, dim=-1), (x,), dev), 3 * _nbytes(x)


def _cross_entropy(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    tokens, vocab = c.dim("tokens"), c.dim("vocab")
    bwd = c.pass_ == "bwd"
    logits = _randn((tokens, vocab), dt, dev, bwd)
    target = torch.randint(0, vocab, (tokens,), device=dev)
    if not bwd:
        return (lambda: F.cross_entropy(logits, target)), _nbytes(logits)
    return _backward(F.cross_entropy(logits, target), (logits,), dev), 2 * _nbytes(logits)


def _embedding(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    tokens, hidden, vocab = c.dim("tokens"), c.dim("hidden"), c.dim("vocab")
    bwd = c.pass_ == "bwd"
    table = _randn((vocab, hidden), dt, dev, bwd)
    ids = torch.randint(0, vocab, (tokens,), device=dev)
    if not bwd:
        return (lambda: F.embedding(ids, table)), 2 * tokens * hidden * table.element_size()
    y = F.embedding(ids, table)
    return _backward(y, (table,), dev), _nbytes(table, y)


def _optimizer(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    n = c.dim("params")
    params, grads = _randn((n,), dt, dev), _randn((n,), dt, dev) * 1e-3
    opt = torch_ops.FlatOptimizer(params, grads, kind=c.variant)
    opt.step()  # materialise the optimizer state outside the timed calls
    return opt.step, _nbytes(params, grads) + n * 4 * (4 if opt.mixed else 3)


def _copy(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    n = c.dim("elements")
    src, dst = _randn((n,), dt, dev), _randn((n,), dt, dev)
    return (lambda: dst.copy_(src)), _nbytes(src, dst)


def _quantize(c: Case, dt: torch.dtype, dev: torch.device) -> tuple[Runner, int]:
    """A recipe's quantisation of a BF16 tensor to ``dt`` (FP8): scale and cast (``""``), also a
    transposed copy (``both``), the amax pass (``amax``), or a transpose of an FP8 copy."""
    width = c.width
    rows = c.dim("elements") // width
    src = _randn((rows, width), torch.bfloat16, dev)
    scale = torch.tensor(0.5, dtype=torch.bfloat16, device=dev)
    if c.variant == "amax":
        return (lambda: src.abs().amax()), _nbytes(src)
    low = (src * scale).to(dt)
    if c.variant == "transpose":
        return (lambda: low.t().contiguous()), 2 * _nbytes(low)
    if c.variant == "both":
        def both() -> object:
            q = (src * scale).to(dt)
            return q, q.t().contiguous()
        return both, _nbytes(src) + 2 * _nbytes(low)
    return (lambda: (src * scale).to(dt)), _nbytes(src) + _nbytes(low)


_BUILDERS = {
    "gemm": _gemm, "attention": _attention, "norm": _norm, "elementwise": _elementwise, "softmax": _softmax,
    "cross_entropy": _cross_entropy, "embedding": _embedding, "optimizer": _optimizer, "copy": _copy,
    "quantize": _quantize,
}


def build(case: Case, dev: torch.device, *, cache: int, memory_cap: int) -> Callable[[int], object]:
    """A callable ``fn(i)`` running the case on input set ``i mod sets`` (see module docstring)."""
    dt = torch_ops.TORCH_DTYPES[case.dtype]
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = case.dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = case.dtype == "tf32"
    first, footprint = _BUILDERS[case.family](case, dt, dev)
    sets = max(1, min(8, math.ceil(2 * cache / max(footprint, 1)), memory_cap // max(footprint, 1)))
    runners = [first] + [_BUILDERS[case.family](case, dt, dev)[0] for _ in range(sets - 1)]
    return lambda i: runners[i % len(runners)]()
