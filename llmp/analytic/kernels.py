"""Kernel families and their closed-form FLOP and byte counts.

This module is the one place that says what a kernel costs: its work, which
:mod:`~llmp.analytic.roofline` turns into seconds on a device. The operator graph (``analytic``)
instantiates kernels with symbolic dims; the sampler (``residuals``) instantiates the very same
kernels with numeric dims and times them. So the roofline that a residual factor multiplies is,
by construction, the roofline that was measured against.

Formulas work on ints, floats or SymPy expressions alike (exact arithmetic: ``Rational``, never
``0.5``). Byte counts are the compulsory traffic of a well-fused kernel: every input read once,
every output written once.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from llmp.hardware.spec import Dtype


class Family(StrEnum):
    """Kernel families; each gets its own residual model."""

    GEMM = "gemm"
    ATTENTION = "attention"
    NORM = "norm"
    ELEMENTWISE = "elementwise"
    SOFTMAX = "softmax"
    CROSS_ENTROPY = "cross_entropy"
    EMBEDDING = "embedding"
    OPTIMIZER = "optimizer"
    COPY = "copy"
    QUANTIZE = "quantize"


class Pass(StrEnum):
    FWD = "fwd"
    BWD = "bwd"


class Elementwise(StrEnum):
    """Elementwise functions (the ``variant`` of an elementwise kernel)."""

    GELU = "gelu"
    SWIGLU = "swiglu"
    RELU = "relu"
    SQUARED_RELU = "squared_relu"
    """relu(x)^2 (Primer, So et al. 2021; Nemotron-4)."""
    ADD = "add"
    DROPOUT = "dropout"
    ROTARY = "rotary"
    """Rotary embedding of q and k by one fused kernel (TransformerEngine/Apex fused RoPE, vLLM)."""
    ROTARY_UNFUSED = "rotary_unfused"
    """Rotary embedding in eager PyTorch, ``t * cos + rotate_half(t) * sin`` per tensor (GPT-NeoX and
    Megatron-LM ``apply_rotary_pos_emb`` without fusion): six kernels per tensor, q and k each."""
    MASKED_FILL = "masked_fill"
    """In-place ``masked_fill_`` of the attention scores with a broadcast causal mask (unfused
    attention in eager PyTorch); its backward copies the gradient through the view."""


class Fusion(StrEnum):
    """How a norm or a cross-entropy runs: one fused kernel, or eager PyTorch's chain of kernels."""

    FUSED = ""
    UNFUSED = "unfused"


class Quantize(StrEnum):
    """What a quantisation kernel of a low-precision recipe writes (the ``variant`` of a
    ``quantize`` kernel, whose dtype is the target format). The views a GEMM needs: the forward
    reads input and weight rowwise, wgrad reads output gradient and input columnwise, dgrad the
    output gradient rowwise and the weight columnwise (NVIDIA/TransformerEngine
    docs/features/low_precision_training/performance_considerations, "Handling transposes")."""

    CAST = ""
    """Read the BF16 tensor once, write one low-precision copy and its scales (TE ``quantize``
    with one usage; per-tensor FP8 on Blackwell, whose tensor cores read it in any layout)."""
    BOTH = "both"
    """Read once, write a rowwise and a columnwise copy: Hopper FP8's physical transpose
    (TE ``cast_transpose``), and the two differently blocked copies of 1x128 blockwise, MXFP8
    and NVFP4 (TE: "Both versions must be quantized separately from the high-precision source")."""
    AMAX = "amax"
    """Read the BF16 tensor to find its amax before casting: current scaling's first pass
    (TE docs fp8_current_scaling: "two tensor reads were needed - one to compute the amax, and
    one to apply the scaling") and NVFP4's global scale (docs nvfp4, ``s_global``)."""
    TRANSPOSE = "transpose"
    """Read a low-precision copy, write its transpose (2D-blocked weights on Hopper: "columnwise
    data can be created from rowwise data by transposing both the quantized data and the scaling
    factors", docs fp8_blockwise_scaling)."""


class SoftmaxKind(StrEnum):
    """The softmax kernel: a plain row softmax, or Megatron's fused scale + causal mask + softmax."""

    PLAIN = ""
    CAUSAL_FUSED = "causal_fused"
    """``scaled_upper_triang_masked_softmax`` (Megatron-LM megatron/legacy/fused_kernels/
    scaled_upper_triang_masked_softmax.h): reads only the causal triangle, writes zeros above it."""


class AttentionKernel(StrEnum):
    """Which fused attention kernel runs (the ``variant`` of a ``flash = 1`` attention kernel).

    They differ by up to 2x on the same GPU (FlashAttention-3 paper, Shah et al. 2024, Fig. 5:
    FA2 reaches ~350 TFLOP/s forward on an H100, FA3 and cuDNN 600-750), so each has its own
    ceiling (:func:`ceiling`) and its own residual one-hot."""

    FLASH2 = ""
    """FlashAttention-2 (and flash-attn's earlier kernels): the default."""
    FLASH3 = "flash3"
    """FlashAttention-3 (Hopper warp-specialised, wgmma/TMA)."""
    CUDNN = "cudnn"
    """cuDNN fused attention (TransformerEngine's FusedAttention, torch SDPA's cuDNN backend)."""
    FLASH1 = "flash1"
    """FlashAttention 1.x: FlashAttention-2's algorithm at a lower rate (``SAME_ALGORITHM``)."""
    TRITON = "triton"
    """flash-attn's Triton FlashAttention: FlashAttention-2's algorithm at a lower rate."""


SAME_ALGORITHM: dict[str, str] = {AttentionKernel.FLASH1: AttentionKernel.FLASH2,
                                  AttentionKernel.TRITON: AttentionKernel.FLASH2}
"""Variants that launch another variant's kernels (one fused forward, one fused backward, the same
FLOPs and traffic) at a published lower rate (``roofline.ceiling``). No store measured them: a
residual model reads them as the variant they implement, and no feature column is theirs."""


def algorithm(k: Kernel) -> Kernel:
    """``k`` as the kernel whose algorithm it runs: itself, unless ``SAME_ALGORITHM`` names another."""
    same = SAME_ALGORITHM.get(k.variant) if k.family is Family.ATTENTION else None
    return k if same is None else replace(k, variant=same)


VARIANTS: dict[Family, tuple[str, ...]] = {
    Family.GEMM: ("",),
    Family.ATTENTION: tuple(a.value for a in AttentionKernel),
    Family.NORM: tuple(f.value for f in Fusion),
    Family.ELEMENTWISE: tuple(e.value for e in Elementwise),
    Family.SOFTMAX: tuple(s.value for s in SoftmaxKind),
    Family.CROSS_ENTROPY: tuple(f.value for f in Fusion),
    Family.EMBEDDING: ("",),
    Family.OPTIMIZER: ("adam", "sgd"),
    Family.COPY: ("",),
    Family.QUANTIZE: tuple(q.value for q in Quantize),
}
"""The variants each family knows (the first is the default). A variant changes the kernels that
run, so it changes the cost formula: its bytes and its number of launches."""


# Dims each family needs, in a fixed order (the residual feature schema builds on this).
DIMS: dict[Family, tuple[str, ...]] = {
    Family.GEMM: ("m", "n", "k", "batch"),
    Family.ATTENTION: ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "head_dim", "head_dim_v", "window", "causal",
                       "flash"),
    Family.NORM: ("tokens", "hidden", "rms"),
    Family.ELEMENTWISE: ("elements",),
    Family.SOFTMAX: ("rows", "cols"),
    Family.CROSS_ENTROPY: ("tokens", "vocab"),
    Family.EMBEDDING: ("tokens", "hidden", "vocab"),
    Family.OPTIMIZER: ("params",),
    Family.COPY: ("elements",),
    Family.QUANTIZE: ("elements", "scales"),
}


_name = operator.itemgetter(0)


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel launch: a family, its dims, the element dtype and the pass.

    ``variant`` names the elementwise function (``gelu``, ``add``, ...) or the optimizer
    (``adam``, ``sgd``); it is empty for the other families.
    """

    family: Family
    dims: tuple[tuple[str, Any], ...]
    dtype: Dtype
    pass_: Pass = Pass.FWD
    variant: str = ""

    def __post_init__(self) -> None:
        assert tuple(map(_name, self.dims)) == DIMS[self.family], \
            f"{self.family} needs dims {DIMS[self.family]}, got {tuple(map(_name, self.dims))}"
        assert self.variant in VARIANTS[self.family], f"{self.family} has no variant {self.variant!r}"

    def dim(self, name: str) -> Any:
        return dict(self.dims)[name]

    @classmethod
    def make(cls, family: Family, dtype: Dtype, pass_: Pass = Pass.FWD, variant: str = "",
             **dims: Any) -> Kernel:
        """Build a kernel from keyword dims, ordered as ``DIMS[family]``."""
        names = DIMS[family]
        return cls(family, tuple(zip(names, map(dims.__getitem__, names))), dtype, pass_, variant)


@dataclass(frozen=True, slots=True)
class KernelCost:
    """Work and compulsory memory traffic of one kernel."""

    flops: Any
    bytes: Any
    tensor_core: bool
    """Runs at the tensor-core (matrix) peak of its dtype; else at the vector FP32 peak."""
    launches: int = 1
    """Kernels launched: a fused kernel is one; eager PyTorch chains pay one launch each."""


def _gemm(k: Kernel) -> KernelCost:
    # Y[m,n] = X[m,k] @ W[k,n], `batch` independent products: 2mnk FLOPs each (one multiply-add
    # = 2 FLOPs; Kaplan et al. 2020 §2.1). Backward is two GEMMs of the same FLOPs, given as
    # separate kernels: dgrad (m, k, n) and wgrad (k, n, m).
    m, n, kk, b = (k.dim(d) for d in ("m", "n", "k", "batch"))
    if k.dtype.low_precision:
        # Low-precision operands, the result in BF16 (TransformerEngine's FP8/FP4 GEMMs write the
        # activation dtype), plus the block scales the tensor core reads (MXFP8: one byte per 32
        # elements, NVFP4: one per 16).
        operands = b * (m * kk + kk * n)
        scales = operands / _BLOCK[k.dtype] if k.dtype.block_scaled else 0
        return KernelCost(flops=2 * b * m * n * kk, bytes=k.dtype.bits * operands / 8 + scales + 2 * b * m * n,
                          tensor_core=True)
    e = k.dtype.bytes
    return KernelCost(flops=2 * b * m * n * kk, bytes=e * b * (m * kk + kk * n + m * n), tensor_core=True)


_BLOCK = {Dtype.MXFP8: 32, Dtype.NVFP4: 16}
"""Elements per block scale of the microscaling formats (OCP MX: 32, E8M0 scales; NVFP4: 16, E4M3)."""


def _attention(k: Kernel) -> KernelCost:
    # Attention core per head: S = Q K^T (2 s_q s_kv d FLOPs, d = head_dim, the query/key width)
    # and O = P V (2 s_q s_kv d_v, d_v = head_dim_v, the value width; MLA has d = 192, d_v = 128):
    # 2 b h s_q s_kv (d + d_v) forward, 4 b h s_q s_kv d when d_v = d (Dao et al. 2022,
    # FlashAttention benchmark convention). Backward: dV = P^T dO and dP = dO V^T (d_v), dQ, dK and
    # the recomputed S (d): 2 b h s_q s_kv (3 d + 2 d_v), 2.5x forward when d_v = d
    # (FlashAttention-2 paper, §4.1). Causal masking keeps s_q s_kv / 2 of the (query, key) pairs;
    # a sliding window of w keys (w = seq_kv: none) keeps s_q (w - w^2 / (2 s_kv)) of them, the
    # band below the diagonal (w s - w^2/2 pairs for s_q = s_kv = s; for a load-balanced CP rank
    # the same fraction of its s_q rows): FlashAttention-2 ``window_size`` and cuDNN's sliding
    # window skip the tiles outside the band. The window applies to causal kernels only.
    b, h, hkv, sq, skv, d, dv, w, causal, flash = (k.dim(n) for n in DIMS[Family.ATTENTION])
    e = k.dtype.bytes
    if causal:
        pairs2 = sq * (2 * w - w * w / skv)  # twice the (query, key) pairs
    else:
        pairs2 = 2 * sq * skv
    q = b * h * sq * d
    kv = b * hkv * skv * (d + dv)
    o = b * h * sq * dv
    if k.pass_ is Pass.FWD:
        flops = b * h * pairs2 * (d + dv)
        # Flash: read Q, K, V once, write O (+ fp32 logsumexp per row).
        io = e * (q + kv + o) + 4 * b * h * sq
    else:
        flops = b * h * pairs2 * (3 * d + 2 * dv)
        # Flash bwd: read Q, K, V, O, dO, lse; write dQ, dK, dV.
        io = e * (2 * q + 2 * kv + 2 * o) + 4 * b * h * sq
    if not flash:
        # Unfused: the s_q x s_kv score matrix goes through memory (write S, read for softmax,
        # write P, read for PV; the backward reads and writes it three times more).
        scores = b * h * sq * skv
        io = io + e * scores * (4 if k.pass_ is Pass.FWD else 6)
    return KernelCost(flops=flops, bytes=io, tensor_core=True)


def _norm(k: Kernel) -> KernelCost:
    # LayerNorm: mean, variance, normalise, scale, shift ≈ 7 FLOPs/element fwd; RMSNorm ≈ 4.
    # Backward ≈ 2x. Traffic: fwd reads x and writes y; bwd reads x and dy, writes dx
    # (weight grads reduce on chip). Parameters (1-2 vectors of `hidden`) are negligible but kept.
    n, h, rms = k.dim("tokens"), k.dim("hidden"), k.dim("rms")
    e = k.dtype.bytes
    per = 4 if rms else 7
    params = (1 if rms else 2) * h * e
    if k.variant == Fusion.UNFUSED:
        # Eager PyTorch, as GPT-NeoX's RMSNorm (megatron/model/norms.py): x.norm(2, -1) (read x),
        # two scalar ops on the per-row norm, x / rms (read x, write y), scale * y (read y, write
        # y): 5 launches, 5 passes over the activation. Backward through autograd: mul (grad of y
        # and the scale's reduction over tokens), div (two inputs), norm backward, and the adds
        # joining them: ~10 launches and 12 passes.
        if k.pass_ is Pass.FWD:
            return KernelCost(flops=per * n * h, bytes=5 * n * h * e + params, tensor_core=False, launches=5)
        return KernelCost(flops=2 * per * n * h, bytes=12 * n * h * e + 2 * params, tensor_core=False,
                          launches=10)
    if k.pass_ is Pass.FWD:
        return KernelCost(flops=per * n * h, bytes=2 * n * h * e + params, tensor_core=False)
    return KernelCost(flops=2 * per * n * h, bytes=3 * n * h * e + 2 * params, tensor_core=False)


# (reads, writes, flops, launches) per output element for elementwise functions, forward and
# backward. SwiGLU: out = silu(a) * b, `elements` counts outputs, inputs are a and b. Rotary
# unfused (eager `t * cos + cat(-t2, t1) * sin` on q and on k): per tensor mul, neg, cat, mul,
# add (+ the slices as views) = 5 kernels reading/writing 5 and 5 tensor-sized passes, times the
# two tensors; backward mirrors it (mul, mul, slice-backward, neg, add). masked_fill_ in place
# reads and writes the scores; its backward (CopySlices + AsStridedBackward) copies the
# gradient once and fills the masked part: 2 kernels.
_ELEMENTWISE: dict[tuple[str, Pass], tuple[int, int, int, int]] = {
    ("gelu", Pass.FWD): (1, 1, 8, 1), ("gelu", Pass.BWD): (2, 1, 12, 1),
    ("relu", Pass.FWD): (1, 1, 1, 1), ("relu", Pass.BWD): (2, 1, 1, 1),
    ("squared_relu", Pass.FWD): (1, 1, 2, 1), ("squared_relu", Pass.BWD): (2, 1, 3, 1),
    ("swiglu", Pass.FWD): (2, 1, 6, 1), ("swiglu", Pass.BWD): (3, 2, 10, 1),
    ("add", Pass.FWD): (2, 1, 1, 1), ("add", Pass.BWD): (1, 1, 0, 1),
    ("dropout", Pass.FWD): (1, 1, 2, 1), ("dropout", Pass.BWD): (1, 1, 1, 1),
    ("rotary", Pass.FWD): (1, 1, 3, 1), ("rotary", Pass.BWD): (1, 1, 3, 1),
    ("rotary_unfused", Pass.FWD): (5, 5, 3, 10), ("rotary_unfused", Pass.BWD): (5, 5, 3, 10),
    ("masked_fill", Pass.FWD): (1, 1, 0, 1), ("masked_fill", Pass.BWD): (2, 2, 0, 2),
}


def _elementwise(k: Kernel) -> KernelCost:
    n = k.dim("elements")
    reads, writes, flops, launches = _ELEMENTWISE[(k.variant, k.pass_)]
    extra = 0
    if k.variant == Elementwise.DROPOUT:
        extra = n  # one byte of mask per element, written fwd and read bwd
    return KernelCost(flops=flops * n, bytes=(reads + writes) * n * k.dtype.bytes + extra, tensor_core=False,
                      launches=launches)


def _softmax(k: Kernel) -> KernelCost:
    # Row softmax (with scale and mask fused): max, sub, exp, sum, div ≈ 5 FLOPs/element.
    # fwd reads x writes y; bwd reads y and dy, writes dx. The causal fused kernel (square rows
    # x cols scores) reads and computes only the lower triangle but writes every element (zeros
    # above the diagonal); its backward reads two triangles and writes the full gradient.
    n = k.dim("rows") * k.dim("cols")
    e = k.dtype.bytes
    if k.variant == SoftmaxKind.CAUSAL_FUSED:
        if k.pass_ is Pass.FWD:
            return KernelCost(flops=5 * n // 2, bytes=3 * n * e // 2, tensor_core=False)
        return KernelCost(flops=4 * n // 2, bytes=2 * n * e, tensor_core=False)
    if k.pass_ is Pass.FWD:
        return KernelCost(flops=5 * n, bytes=2 * n * e, tensor_core=False)
    return KernelCost(flops=4 * n, bytes=3 * n * e, tensor_core=False)


def _cross_entropy(k: Kernel) -> KernelCost:
    # Vocab-parallel cross-entropy over logits[tokens, vocab] (Megatron): fwd reads the logits
    # (softmax + gather the target); bwd writes softmax - onehot back into a logits-sized grad.
    # Unfused: Megatron-LM's eager `_VocabParallelCrossEntropy` (megatron/core/tensor_parallel/
    # cross_entropy.py): max (read), sub_ in place (read, write), gather of the target logit,
    # exp (read, write), sum (read), log and sub on per-token vectors, div_ in place for the
    # saved softmax (read, write): ~8 launches, 8 passes. Backward: softmax - onehot, scaled by
    # the loss gradient: 2 launches, 3 passes.
    n = k.dim("tokens") * k.dim("vocab")
    e = k.dtype.bytes
    if k.variant == Fusion.UNFUSED:
        if k.pass_ is Pass.FWD:
            return KernelCost(flops=5 * n, bytes=8 * n * e, tensor_core=False, launches=8)
        return KernelCost(flops=2 * n, bytes=3 * n * e, tensor_core=False, launches=2)
    if k.pass_ is Pass.FWD:
        return KernelCost(flops=5 * n, bytes=n * e, tensor_core=False)
    return KernelCost(flops=2 * n, bytes=2 * n * e, tensor_core=False)


def _embedding(k: Kernel) -> KernelCost:
    # fwd: gather `tokens` rows of a [vocab, hidden] table: read + write tokens*hidden.
    # bwd: zero the dense [vocab, hidden] grad, scatter-add the token rows into it.
    n, h, v = k.dim("tokens"), k.dim("hidden"), k.dim("vocab")
    e = k.dtype.bytes
    if k.pass_ is Pass.FWD:
        return KernelCost(flops=0, bytes=2 * n * h * e, tensor_core=False)
    return KernelCost(flops=n * h, bytes=3 * n * h * e + v * h * e, tensor_core=False)


def _optimizer(k: Kernel) -> KernelCost:
    # Fused update over a flat buffer of `params` elements. Adam(W) with fp32 master weights:
    # read grad (dtype) + master, m, v (fp32); write master, m, v (fp32) and the model copy
    # (dtype, when it is not fp32). SGD with momentum: read grad, master, buf; write master, buf.
    # FLOPs ≈ 12/param for Adam (moments, bias correction, sqrt, div, decay), 3 for SGD.
    p = k.dim("params")
    g = k.dtype.bytes
    copy = 0 if k.dtype is Dtype.FP32 else g
    if k.variant == "sgd":
        return KernelCost(flops=3 * p, bytes=p * (g + 4 * 4 + copy), tensor_core=False)
    return KernelCost(flops=12 * p, bytes=p * (g + 6 * 4 + copy), tensor_core=False)


def _copy(k: Kernel) -> KernelCost:
    n = k.dim("elements")
    return KernelCost(flops=0, bytes=2 * n * k.dtype.bytes, tensor_core=False)


_SCALE_BYTES = {Dtype.FP8: 4, Dtype.MXFP8: 1, Dtype.NVFP4: 1}
"""Bytes of one scale factor: FP32 for FP8 (per tensor or per 128 block), E8M0 for MXFP8, E4M3
for NVFP4's block scales."""


def _quantize(k: Kernel) -> KernelCost:
    # BF16 in (two bytes an element), low-precision copies out, one scale per block. Per element
    # and copy: |x|, the block max, a multiply and the conversion (~3 FLOPs on the CUDA cores).
    n, scales = k.dim("elements"), k.dim("scales")
    lp = k.dtype.bits * n / 8
    side = scales * _SCALE_BYTES.get(k.dtype, 4)  # FP32 scales unless the format fixes narrower ones
    if k.variant == Quantize.AMAX:
        return KernelCost(flops=2 * n, bytes=2 * n, tensor_core=False)
    if k.variant == Quantize.TRANSPOSE:
        return KernelCost(flops=0, bytes=2 * lp + 2 * side, tensor_core=False)
    copies = 2 if k.variant == Quantize.BOTH else 1
    return KernelCost(flops=3 * copies * n, bytes=2 * n + copies * lp + side, tensor_core=False)


_COST = {
    Family.GEMM: _gemm, Family.ATTENTION: _attention, Family.NORM: _norm,
    Family.ELEMENTWISE: _elementwise, Family.SOFTMAX: _softmax,
    Family.CROSS_ENTROPY: _cross_entropy, Family.EMBEDDING: _embedding,
    Family.OPTIMIZER: _optimizer, Family.COPY: _copy, Family.QUANTIZE: _quantize,
}


def cost(kernel: Kernel) -> KernelCost:
    """FLOPs and bytes of ``kernel`` as closed forms in its dims."""
    return _COST[kernel.family](kernel)


class CollectiveKind(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


class Tier(StrEnum):
    """Which links a collective's group crosses, given the placement."""

    INTRA = "intra"
    """All ranks in one node (NVLink/NVSwitch)."""
    INTER = "inter"
    """Ranks span nodes: the node NICs are the bottleneck."""
    HOST = "host"
    """Between one GPU and its host's memory (offloading): the GPU's host link (``gpu.host_bandwidth``)."""
    HOST_MEMORY = "host_memory"
    """Within host memory: an offloaded optimizer's update, priced on its memory traffic as a GPU
    optimizer is (``gpu.host_memory_bandwidth``)."""


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective call over a process group.

    ``bytes`` is the size of the full logical buffer per rank as NCCL counts it (nccl-tests
    ``size``): the all-reduce input, the all-gather output, the reduce-scatter input, the
    all-to-all send buffer, the point-to-point message. ``ranks_per_node`` is how many members
    of the group share one node (the group's footprint on a node's NICs).
    """

    kind: CollectiveKind
    bytes: Any
    group: Any
    ranks_per_node: Any
    tier: Tier
