"""How long the CPU thread that issues a training step's kernels takes per layer: torch replicas
of each stack's layer code path, timed on this machine's CPU with tiny tensors.

A GPU runs only what its host thread has issued, so a step whose per-GPU work is small is bound
by the host: Python, the framework's wrappers (modules, custom autograd functions, TorchScript
fusions, activation-checkpointing bookkeeping) and PyTorch's dispatcher, once per kernel. That
path is the same code whatever the device; what differs on a GPU is the CUDA launch itself (and
the CPU's speed), which :mod:`llmp.stacks.host` adds from published figures. So the replicas run
on CPU tensors of a few elements, where the kernels themselves cost next to nothing, and each
pass is timed with the thread's own CPU clock (``time.thread_time``), which other processes on
the machine do not inflate.

A replica is a *host* replica, not a numerical one: it issues the calls the stack's layer makes,
in the same structure, with our own code (read from each stack's source, cited per style):

* ``megatron``: Megatron-LM's ``ParallelTransformerLayer`` as Megatron-LM (v2-v3),
  Megatron-DeepSpeed and GPT-NeoX run it: tensor-parallel region functions around each linear
  layer and a custom autograd function for the GEMM (``megatron/mpu/layers.py``:
  ``ColumnParallelLinear``, ``RowParallelLinear``, ``LinearWithGradAccumulationAndAsyncAllreduce``;
  ``megatron/mpu/mappings.py``), the Apex fused LayerNorm as an autograd function
  (``megatron/model/fused_layer_norm.py``), ``FusedScaleMaskSoftmax`` with its availability
  check (``megatron/model/fused_softmax.py``), attention dropout inside the model-parallel RNG
  tracker's ``fork()`` (``megatron/mpu/random.py``), TorchScript bias-GeLU and
  bias-dropout-add (``megatron/model/fused_bias_gelu.py``, ``megatron/model/transformer.py``),
  and the attention's reshapes, ``baddbmm`` into a preallocated buffer, ``bmm`` and
  permute-contiguous (``megatron/model/transformer.py``: ``ParallelAttention.forward``);
  references: NVIDIA/Megatron-LM@v2.6, microsoft/Megatron-DeepSpeed@main:megatron.
* ``torch``: a plain eager PyTorch block as torchtitan, Hugging Face models (llm-foundry,
  NeMo AutoModel) and llmp's own reference model write it: ``nn.Linear``, ``nn.LayerNorm``,
  ``F.scaled_dot_product_attention``, an activation and residual adds
  (pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py).

Each replica is timed in the four passes a layer runs: its forward recording autograd (``fwd``)
and that forward's backward (``bwd``); and under full activation recompute, the checkpointed
forward (``full_fwd``: the stack's checkpoint function running the layer under ``no_grad``) and
its backward (``full_bwd``: the recomputed forward and the backward). Torch only.
"""

from __future__ import annotations

import gc
import math
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

PASSES = ("fwd", "bwd", "full_fwd", "full_bwd")


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """The tiny layer a replica runs: small enough that the CPU kernels cost next to nothing
    beside the host path, large enough that every code path (heads, the 4h MLP) is taken."""

    hidden: int = 16
    heads: int = 4
    seq: int = 32
    """Past 16, so Megatron's fused softmax applies, as it does at real sequence lengths."""
    batch: int = 1


# ---- the megatron style ----------------------------------------------------------------------


class _Region(torch.autograd.Function):
    """A tensor-parallel region boundary: identity one way, a collective the other (at tp 1
    Megatron calls it all the same)."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def,override]
        return x

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def,override]
        return g


class _LinearFn(torch.autograd.Function):
    """The GEMM as Megatron's custom autograd function: saves input and weight, and in the
    backward computes the input gradient, the weight gradient and the bias gradient itself."""

    @staticmethod
    def forward(ctx, x, weight, bias):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(x, weight)
        ctx.use_bias = bias is not None
        out = torch.matmul(x, weight.t())
        return out + bias if bias is not None else out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        x, weight = ctx.saved_tensors
        grad_input = grad.matmul(weight)
        grad2 = grad.reshape(-1, grad.shape[-1])
        grad_weight = grad2.t().matmul(x.reshape(-1, x.shape[-1]))
        grad_bias = grad2.sum(dim=0) if ctx.use_bias else None
        return grad_input, grad_weight, grad_bias


class _ColumnParallel(nn.Module):
    def __init__(self, n_in: int, n_out: int, *, skip_bias_add: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.skip_bias_add = skip_bias_add

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = _Region.apply(x)
        out = _LinearFn.apply(x, self.weight, None if self.skip_bias_add else self.bias)
        return out, (self.bias if self.skip_bias_add else None)


class _RowParallel(nn.Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = _Region.apply(_LinearFn.apply(x, self.weight, None))
        return out, self.bias


class _LayerNormFn(torch.autograd.Function):
    """Apex's fused LayerNorm as an autograd function (one kernel each way)."""

    @staticmethod
    def forward(ctx, x, weight, bias):  # type: ignore[no-untyped-def,override]
        out, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), weight, bias, 1e-5)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        x, weight, bias, mean, rstd = ctx.saved_tensors
        return torch.ops.aten.native_layer_norm_backward(grad, x, (x.shape[-1],), mean, rstd, weight, bias,
                                                         [True, True, True])


class _FusedLayerNorm(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LayerNormFn.apply(x, self.weight, self.bias)  # type: ignore[no-any-return]


class _ScaledSoftmaxFn(torch.autograd.Function):
    """The fused scale + causal mask + softmax kernel (one kernel each way)."""

    @staticmethod
    def forward(ctx, x, scale):  # type: ignore[no-untyped-def,override]
        y = torch.softmax(x * scale, -1)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        (y,) = ctx.saved_tensors
        return torch._softmax_backward_data(grad, y, -1, y.dtype) * ctx.scale, None


class _FusedScaleMaskSoftmax(nn.Module):
    """Megatron's module: checks in Python whether the fused kernel applies, then calls it."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    @staticmethod
    def available(b: int, heads: int, sq: int, sk: int) -> bool:
        # the conditions of FusedScaleMaskSoftmax.is_kernel_available (causal mask)
        return 16 < sk <= 2048 and sq % 4 == 0 and (b * heads) % 4 == 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, heads, sq, sk = x.size()
        if self.available(b, heads, sq, sk):
            return _ScaledSoftmaxFn.apply(x.view(-1, sq, sk), self.scale).view(b, heads, sq, sk)  # type: ignore[no-any-return]
        return torch.softmax(x * self.scale, -1)


class _RngTracker:
    """The model-parallel RNG tracker: ``fork()`` swaps the generator state in and out."""

    def __init__(self) -> None:
        self.states = {"model-parallel-rng": torch.get_rng_state()}

    class _Fork:
        def __init__(self, tracker: _RngTracker) -> None:
            self.tracker = tracker
            self.saved = torch.get_rng_state()

        def __enter__(self) -> None:
            self.saved = torch.get_rng_state()
            torch.set_rng_state(self.tracker.states["model-parallel-rng"])

        def __exit__(self, *exc: object) -> None:
            self.tracker.states["model-parallel-rng"] = torch.get_rng_state()
            torch.set_rng_state(self.saved)

    def fork(self) -> _RngTracker._Fork:
        return _RngTracker._Fork(self)


def _scripted(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``torch.jit.script``, as the Megatron-family stacks fuse their bias-GeLU and
    bias-dropout-add; recent torch warns that TorchScript is deprecated, which is beside the point
    of a replica of code written with it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(fn)  # type: ignore[no-any-return]


def _bias_gelu_eager(bias: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def _bias_dropout_add_eager(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, prob: float) -> torch.Tensor:
    return residual + F.dropout(x + bias, p=prob, training=True)


_bias_gelu = _scripted(_bias_gelu_eager)
_bias_dropout_add = _scripted(_bias_dropout_add_eager)


class _MegatronAttention(nn.Module):
    def __init__(self, s: Shape, tracker: _RngTracker) -> None:
        super().__init__()
        self.qkv = _ColumnParallel(s.hidden, 3 * s.hidden)
        self.dense = _RowParallel(s.hidden, s.hidden)
        self.heads, self.head_dim = s.heads, s.hidden // s.heads
        self.softmax = _FusedScaleMaskSoftmax(1 / math.sqrt(self.head_dim))
        self.dropout = nn.Dropout(0.1)
        self.tracker = tracker

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mixed, _ = self.qkv(x)
        mixed = mixed.view(*mixed.size()[:-1], self.heads, 3 * self.head_dim)
        q, k, v = torch.split(mixed, self.head_dim, dim=-1)
        b, heads, sq, sk = q.size(1), q.size(2), q.size(0), k.size(0)
        q = q.reshape(sq, b * heads, -1)
        k = k.reshape(sk, b * heads, -1)
        buffer = torch.empty(b * heads, sq, sk, dtype=q.dtype)
        scores = torch.baddbmm(buffer, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=1.0)
        probs = self.softmax(scores.view(b, heads, sq, sk))
        with self.tracker.fork():
            probs = self.dropout(probs)
        v = v.reshape(sk, b * heads, -1)
        context = torch.bmm(probs.view(b * heads, sq, -1), v.transpose(0, 1))
        context = context.view(b, heads, sq, -1).permute(2, 0, 1, 3).contiguous()
        out, bias = self.dense(context.view(*context.size()[:-2], heads * self.head_dim))
        return out, bias


class _MegatronMLP(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.fc1 = _ColumnParallel(s.hidden, 4 * s.hidden, skip_bias_add=True)
        self.fc2 = _RowParallel(4 * s.hidden, s.hidden)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, bias = self.fc1(x)
        return self.fc2(_bias_gelu(bias, y))  # type: ignore[no-any-return]


class MegatronLayer(nn.Module):
    """``ParallelTransformerLayer`` (pre-norm GPT layer) as the Megatron-family stacks run it."""

    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.tracker = tracker = _RngTracker()
        self.norm1, self.norm2 = _FusedLayerNorm(s.hidden), _FusedLayerNorm(s.hidden)
        self.attention, self.mlp = _MegatronAttention(s, tracker), _MegatronMLP(s)

    def checkpointed(self, x: torch.Tensor) -> torch.Tensor:
        """The layer under full activation recompute."""
        return _Checkpoint.apply(self.forward, self.tracker, x)  # type: ignore[no-any-return]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, bias = self.attention(self.norm1(x))
        with torch.enable_grad():
            x = _bias_dropout_add(out, bias.expand_as(x), x, 0.1)
        out, bias = self.mlp(self.norm2(x))
        with torch.enable_grad():
            return _bias_dropout_add(out, bias.expand_as(x), x, 0.1)  # type: ignore[no-any-return]


class _Checkpoint(torch.autograd.Function):
    """Megatron's activation checkpoint (``megatron/mpu/random.py``: ``CheckpointFunction``, as
    DeepSpeed's ``checkpointing.checkpoint`` in Megatron-DeepSpeed and GPT-NeoX): the forward runs
    under ``no_grad`` after saving the RNG states; the backward restores them, runs the forward
    again recording autograd, and calls the autograd engine on it."""

    @staticmethod
    def forward(ctx, run, tracker, x):  # type: ignore[no-untyped-def,override]
        ctx.run, ctx.tracker = run, tracker
        ctx.cpu_state = torch.get_rng_state()
        ctx.tracker_states = dict(tracker.states)
        ctx.save_for_backward(x)
        with torch.no_grad():
            return run(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        (x,) = ctx.saved_tensors
        cpu_state, tracker_states = torch.get_rng_state(), dict(ctx.tracker.states)
        torch.set_rng_state(ctx.cpu_state)
        ctx.tracker.states = dict(ctx.tracker_states)
        detached = x.detach()
        detached.requires_grad = x.requires_grad
        with torch.enable_grad():
            out = ctx.run(detached)
        torch.set_rng_state(cpu_state)
        ctx.tracker.states = tracker_states
        torch.autograd.backward((out,), (grad,))
        return None, None, detached.grad


# ---- the torch style -------------------------------------------------------------------------


class TorchLayer(nn.Module):
    """A pre-norm GPT block written with plain PyTorch modules and functions."""

    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.heads = s.heads
        self.norm1, self.norm2 = nn.LayerNorm(s.hidden), nn.LayerNorm(s.hidden)
        self.qkv, self.proj = nn.Linear(s.hidden, 3 * s.hidden), nn.Linear(s.hidden, s.hidden)
        self.fc1, self.fc2 = nn.Linear(s.hidden, 4 * s.hidden), nn.Linear(4 * s.hidden, s.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, seq, hidden = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, seq, 3, self.heads, -1).transpose(1, 3).unbind(2)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, seq, hidden))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    def checkpointed(self, x: torch.Tensor) -> torch.Tensor:
        """The layer under full activation recompute: torch's non-reentrant checkpoint, as
        torchtitan, Composer (FSDP's ``checkpoint_wrapper``) and Hugging Face models apply it."""
        return torch.utils.checkpoint.checkpoint(self.forward, x, use_reentrant=False)  # type: ignore[no-any-return]


STYLES: dict[str, Callable[[Shape], MegatronLayer | TorchLayer]] = {"megatron": MegatronLayer, "torch": TorchLayer}
"""The replicas by style name (:data:`llmp.stacks.host` maps each stack to one)."""


def _input(style: str, s: Shape) -> torch.Tensor:
    # Megatron keeps activations [seq, batch, hidden]; the torch style [batch, seq, hidden].
    shape = (s.seq, s.batch, s.hidden) if style == "megatron" else (s.batch, s.seq, s.hidden)
    return torch.randn(*shape, requires_grad=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTimes:
    """Host seconds per layer of one replica, per pass (median over repeats)."""

    style: str
    fwd: float
    """Forward recording autograd."""
    bwd: float
    """Backward of a recorded forward."""
    full_fwd: float
    """Forward of a fully recomputed layer: the checkpoint's forward, under ``no_grad``."""
    full_bwd: float
    """Backward of a fully recomputed layer: the recomputed forward and the backward."""
    repeats: int


def _median_cpu_seconds(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the thread CPU seconds per call of ``fn`` (``calls`` a repeat)."""
    for _ in range(max(10, calls // 10)):
        fn()  # warm-up: TorchScript profiles its first runs, the allocator fills its caches
    samples = []
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        samples.append((time.thread_time() - start) / calls)
    return statistics.median(samples)


def time_style(style: str, shape: Shape = Shape(), *, calls: int = 200, repeats: int = 9) -> PassTimes:
    """Time one replica's passes on this CPU (one thread, as each rank's host thread)."""
    torch.set_num_threads(1)
    layer = STYLES[style](shape)
    x = _input(style, shape)

    def forward() -> object:
        return layer(x)

    def forward_backward() -> None:
        y = layer(x)
        y.backward(torch.ones_like(y))

    def full_forward() -> object:
        return layer.checkpointed(x)

    def full_forward_backward() -> None:
        y = layer.checkpointed(x)
        y.backward(torch.ones_like(y))

    gc.collect()
    fwd = _median_cpu_seconds(forward, calls, repeats)
    both = _median_cpu_seconds(forward_backward, calls, repeats)
    full_fwd = _median_cpu_seconds(full_forward, calls, repeats)
    full_both = _median_cpu_seconds(full_forward_backward, calls, repeats)
    return PassTimes(style=style, fwd=fwd, bwd=max(both - fwd, 0.0), full_fwd=full_fwd,
                     full_bwd=max(full_both - full_fwd, 0.0), repeats=repeats)


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return {"cpu": cpu, "core": core(), "python": platform.python_version(), "torch": torch.__version__,
            "system": f"{platform.system()} {platform.release()}"}


ZEN_MODELS = {(23, range(0x30, 0x100)): "zen2", (25, range(0x00, 0x10)): "zen3", (25, range(0x20, 0x30)): "zen3",
              (25, range(0x40, 0x60)): "zen3", (25, range(0x10, 0x20)): "zen4", (25, range(0x60, 0x80)): "zen4",
              (25, range(0xa0, 0xb0)): "zen4"}
"""AMD's (family, model) numbers of its Zen 2-4 cores (family 17h models 30h and up are Zen 2;
19h is Zen 3 and Zen 4, told apart by model: Linux's arch/x86 model tables and AMD's Processor
Programming References)."""


def core() -> str:
    """The core this machine's host thread ran on, as :class:`llmp.hardware.spec.HostCpu` names it
    ("" when it is not one llmp compares against: then node CPUs are not compared)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            fields = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        return ""
    info = {k.strip(): v.strip() for k, v in fields.items()}
    if info.get("vendor_id") != "AuthenticAMD":
        return ""
    family, model = int(info.get("cpu family", "0")), int(info.get("model", "0"))
    return next((name for (fam, models), name in ZEN_MODELS.items() if fam == family and model in models), "")
