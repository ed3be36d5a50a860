"""How long a kernel's work takes on a device: the roofline (Williams et al. 2009) over the compute
ceiling it runs against, with GEMM and fused-attention tiles quantized onto the device's SMs.

:mod:`~llmp.analytic.kernels` says what work a kernel does (its FLOPs and compulsory bytes, the
same for every device); this module prices that work on one device, for the operator graph
(:mod:`~llmp.analytic.pricing`, :mod:`~llmp.analytic.compiled`) and the residual features alike,
so a residual factor multiplies exactly the time ``llmp predict`` composes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.analytic import tiles
from llmp.analytic.kernels import DIMS, SAME_ALGORITHM, AttentionKernel, Family, Kernel, KernelCost, Pass, algorithm
from llmp.hardware import published
from llmp.hardware.spec import Device, Dtype, Microarch
from llmp.spec.algebra import vmax


@dataclass(frozen=True, slots=True)
class Grid:
    """What a kernel's grid of tiles runs on: the device's SMs and the tiles its architecture's
    libraries launch (:mod:`llmp.analytic.tiles`)."""

    sms: Any
    """SMs (compute units on AMD): CTAs run in waves of this many."""
    microarch: Microarch | None
    """None: no tile table, kernels are priced as if they filled every SM."""

    @classmethod
    def of(cls, device: Device) -> Grid:
        return cls(sms=device.sms, microarch=device.microarch)


def roofline(k: Kernel, c: KernelCost, *, peak: Any, mem_bandwidth: Any, launch_overhead: Any,
             grid: Grid | None = None) -> Any:
    """Seconds of one call: ``max(flops / peak, bytes / bw) + launches * launch`` (Williams et al.
    2009, plus a fixed cost per kernel launched), with the tiles of GEMMs and fused attention
    kernels quantized onto the device's SMs where ``grid`` names an architecture (``tiles``).

    ``peak`` is the compute ceiling the kernel runs against (:func:`ceiling`: tensor-core kernels
    at their dtype's, the rest at the vector FP32 peak, since element math is done in FP32 on CUDA
    cores whatever the storage dtype). The same formula serves numbers, numpy arrays and SymPy
    expressions (``llmp.spec.algebra``). Quantized, it is never below the plain roofline, and
    equal to it when the grid fills whole waves of whole tiles.
    """
    return _busy(k, c, peak, mem_bandwidth, grid) + c.launches * launch_overhead


def _busy(k: Kernel, c: KernelCost, peak: Any, mem_bandwidth: Any, grid: Grid | None) -> Any:
    if grid is None or grid.microarch is None or not c.tensor_core:
        return vmax(c.flops / peak, c.bytes / mem_bandwidth)
    arch = grid.microarch
    if k.family is Family.GEMM:
        m, n, kk, b = (k.dim(d) for d in DIMS[Family.GEMM])
        return tiles.gemm_seconds(m, n, kk, b, c.bytes, peak=peak, mem_bandwidth=mem_bandwidth, sms=grid.sms,
                                  tiles=tiles.GEMM[arch])
    if k.family is Family.ATTENTION and k.dim("flash"):
        factor = tiles.attention_factor(**_attention_shape(k), sms=grid.sms, tiles=tiles.flash_tiles(k.variant, arch))
        return vmax(c.flops * factor / peak, c.bytes / mem_bandwidth)
    return vmax(c.flops / peak, c.bytes / mem_bandwidth)


def memory_bound(k: Kernel, c: KernelCost, *, peak: float, mem_bandwidth: float, grid: Grid | None = None) -> bool:
    """Whether the configuration :func:`roofline` prices a kernel at is limited by its memory
    traffic rather than its compute (numbers only): what a prediction's op table calls its bound."""
    if grid is not None and grid.microarch is not None and c.tensor_core and k.family is Family.GEMM:
        m, n, kk, b = (k.dim(d) for d in DIMS[Family.GEMM])
        options = tiles.gemm_options(m, n, kk, b, c.bytes, peak=peak, mem_bandwidth=mem_bandwidth, sms=grid.sms,
                                     tiles=tiles.GEMM[grid.microarch])
        compute, memory = min(options, key=lambda o: max(o))
        return bool(memory >= compute)
    busy = float(_busy(k, c, peak, mem_bandwidth, grid))
    return bool(float(c.bytes) / mem_bandwidth >= busy * (1 - 1e-12))


def _attention_shape(k: Kernel) -> dict[str, Any]:
    """The dims a fused attention kernel's grid depends on (``tiles.attention_factor``)."""
    return {"batch": k.dim("batch"), "heads": k.dim("heads"), "seq_q": k.dim("seq_q"), "seq_kv": k.dim("seq_kv"),
            "head_dim": k.dim("head_dim"), "causal": bool(k.dim("causal")), "backward": k.pass_ is Pass.BWD}


def launch_grid(k: Kernel, grid: Grid) -> tuple[Any, Any] | None:
    """(CTAs, waves over the SMs) of a GEMM's main tile or a fused attention kernel's grid on an
    architecture with a tile table; None for other kernels (what the residual features describe)."""
    if grid.microarch is None:
        return None
    if k.family is Family.GEMM:
        return tiles.gemm_grid(k.dim("m"), k.dim("n"), k.dim("batch"), grid.sms, tiles.GEMM[grid.microarch])
    if k.family is Family.ATTENTION and k.dim("flash"):
        return tiles.attention_grid(**_attention_shape(k), sms=grid.sms,
                                    tiles=tiles.flash_tiles(k.variant, grid.microarch))
    return None


class Ceiling(StrEnum):
    """Which compute ceiling a kernel's roofline divides its FLOPs by."""

    PEAK = "datasheet peak"
    """``gpu.flops``: the dtype's dense peak (no micro-benchmark facts for this kernel)."""
    ACHIEVABLE = "achievable"
    """``gpu.achievable``: the best GEMM rate a published micro-benchmark measured (MAMF)."""
    FLASH_ATTENTION = "flash_attention"
    """``gpu.flash_attention``: the best published fused-attention rate."""
    VECTOR = "fp32 vector peak"
    """Element-wise and reduction kernels: CUDA-core FP32 math."""


def ceiling(k: Kernel, tensor_core: bool, device: Device) -> tuple[Any, Ceiling]:
    """The compute rate ``k``'s roofline runs against, and which one it is (an "empirical roofline").

    Tensor-core kernels take the best rate measured on the device for their kind when the
    catalog has one: FlashAttention-2 its ``flash_attention`` rate (the published FA2 figures),
    else the ``achievable`` GEMM rate (attention is two GEMMs and a softmax on the same tensor
    cores, so the GEMM ceiling bounds it too); FlashAttention-3 and cuDNN attention, which use
    the same tensor-core paths as the best GEMMs, the ``achievable`` GEMM rate; GEMMs and
    unfused attention the ``achievable`` rate; else the datasheet peak. FlashAttention 1.x and the
    Triton kernel run at FlashAttention-2's ceiling times their published rate relative to it on
    the same shapes (``hardware.published.relative_rate``).
    These are ceilings from each benchmark's best shape, so small kernels stay optimistic.
    Raises ``KeyError`` when the device has no peak for the dtype.
    """
    if not tensor_core:
        return device.peak_flops[Dtype.FP32], Ceiling.VECTOR
    if k.family is Family.ATTENTION and k.variant in SAME_ALGORITHM:
        rate, which = ceiling(algorithm(k), tensor_core, device)
        return rate * published.relative_rate(k.variant, _number(k.dim("head_dim")), bool(k.dim("causal"))), which
    peak = device.peak_flops[k.dtype]
    if (k.family is Family.ATTENTION and k.dim("flash") and k.variant == AttentionKernel.FLASH2
            and device.flash_attention is not None):
        rate = device.flash_attention.rates.get(k.dtype)
        if rate is not None:
            return rate, Ceiling.FLASH_ATTENTION
    if k.family in (Family.GEMM, Family.ATTENTION) and device.achievable is not None:
        rate = device.achievable.rates.get(k.dtype)
        if rate is not None:
            return rate, Ceiling.ACHIEVABLE
        fp8 = device.achievable.rates.get(Dtype.FP8)
        if k.dtype.block_scaled and fp8 is not None and Dtype.FP8 in device.peak_flops:
            # A microscaling GEMM runs on the same tensor-core pipeline as per-tensor FP8: with no
            # measurement of its own it reaches the fraction of its peak FP8 was measured at.
            return fp8 * peak / device.peak_flops[Dtype.FP8], Ceiling.ACHIEVABLE
    return peak, Ceiling.PEAK


def _number(value: Any) -> float | None:
    """A dim's value, or None while it is a symbol."""
    try:
        return float(value)
    except TypeError:
        return None
