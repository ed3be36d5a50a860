"""Residual-model features: a named schema per family, normalised by the hardware.

A row describes one kernel *on one device*: its dims (log), its work and traffic (log FLOPs,
log bytes), where it sits against the device's roofline (arithmetic intensity over the ridge
point, launch overhead over the roofline time, bytes over the last-level cache), how its
tiles fill the device (waves of 128x128 tiles over the SM count and the utilisation of the
last wave), dim alignment, dtype, and the device's own spec numbers (peak, bandwidth, SMs,
cache, clock), so one model can serve many devices. Column order is the schema's, never
positional guesswork (STYLE.md rule 20): ``FEATURES[family]`` names every column.

The roofline here is ``roofline.roofline`` evaluated on the device's numbers (tiles quantized onto
its SMs), so the residual factor multiplies exactly the roofline the analytic graph uses.

Monotone constraints (``MONOTONE``), where physics or every GPU generation so far agrees:
  * GEMM and attention: efficiency does not fall as the work of the same-shaped problem grows
    (more tiles amortise prologue, epilogue, launch and tail waves) -> the target
    log(t/t_roof) is non-increasing in ``log_flops``.
  * All kernel families: a device with a higher peak for the kernel's bound resource (FLOP/s for
    compute-bound families, bytes/s for memory-bound ones) never runs the same kernel more
    than proportionally faster; fixed costs do not shrink with the peak -> the target is
    non-decreasing in ``log_peak`` resp. ``log_bw``.
  Memory-bound families get no work constraint: their efficiency is *not* monotone in size
  (small working sets run from cache, above the DRAM roofline; large ones approach it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from llmp.analytic import collectives, kernels, roofline
from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, Family, Kernel, Pass, Tier
from llmp.hardware.spec import Device, Dtype

SCHEMA_VERSION = 5
"""5: GEMM and attention waves from the kernel's own tiles on the device's architecture
(``llmp.analytic.tiles``), ``log_quant``, rooflines quantized; shape cells in the domain."""
TILE = 128
"""Output tile edge of the waves described for a device without a tile table (``microarch``
absent, e.g. a CPU)."""

_COMMON = ("pass_bwd", "dtype_bytes", "dtype_bf16", "dtype_tf32", "log_flops", "log_bytes", "log_t_roof",
           "log_launch_frac", "log_intensity_rel", "log_bytes_l2")
_DEVICE = ("log_peak", "log_bw", "sms", "log_l2", "clock_ghz")


_ONE_HOT: dict[Family, tuple[str, ...]] = {
    f: tuple(v for v in kernels.VARIANTS[f][1:] if v not in kernels.SAME_ALGORITHM) for f in Family}
"""A family's non-default variants that have a column: ``kernels.VARIANTS`` but the first (the
default, all zeros) and those running another variant's algorithm (``kernels.SAME_ALGORITHM``: a
store reads them as that variant, ``store._correct``)."""


def _variant_names(family: Family) -> tuple[str, ...]:
    """One-hot columns of a family's variants (``_ONE_HOT``), e.g. ``is_unfused`` for norms,
    ``is_rotary`` for elementwise."""
    return tuple(f"is_{v}" for v in _ONE_HOT[family])


_SPECIFIC: dict[str, tuple[str, ...]] = {
    Family.GEMM: ("log_m", "log_n", "log_k", "log_batch", "align_m", "align_n", "align_k", "log_waves",
                  "wave_util", "log_quant"),
    Family.ATTENTION: ("log_batch", "log_heads", "log_group", "log_seq_q", "log_seq_kv", "log_head_dim",
                       "log_head_dim_v", "log_window_frac", "causal", "flash", "log_waves", "wave_util", "log_quant"),
    Family.NORM: ("log_tokens", "log_hidden", "rms", "align_hidden"),
    Family.ELEMENTWISE: ("log_elements",),
    Family.SOFTMAX: ("log_rows", "log_cols", "align_cols"),
    Family.CROSS_ENTROPY: ("log_tokens", "log_vocab", "align_vocab"),
    Family.EMBEDDING: ("log_tokens", "log_hidden", "log_vocab"),
    Family.OPTIMIZER: ("log_params",),
    Family.COPY: ("log_elements",),
    Family.QUANTIZE: ("log_elements", "log_scales"),
}
_SPECIFIC = {f: (*names, *_variant_names(Family(f))) for f, names in _SPECIFIC.items()}

COLLECTIVE_FEATURES = ("log_bytes", "group", "ranks_per_node", "tier_inter", "log_link_bw", "log_link_latency",
                       "log_t_base", "log_latency_frac")

FEATURES: dict[str, tuple[str, ...]] = {
    **{str(f): (*_COMMON, *_SPECIFIC[f], *_DEVICE) for f in Family},
    **{str(k): COLLECTIVE_FEATURES for k in kernels.CollectiveKind},
}
"""Ordered feature names per family (kernel families and collective kinds)."""

_COMPUTE_BOUND = {Family.GEMM, Family.ATTENTION}
MONOTONE: dict[str, dict[str, int]] = {
    **{str(f): ({"log_flops": -1, "log_peak": 1} if f in _COMPUTE_BOUND else {"log_bw": 1}) for f in Family},
    **{str(k): {} for k in kernels.CollectiveKind},
}
"""Monotone constraints per family: feature -> +1 (non-decreasing) / -1 (non-increasing)."""

DEVICE_FEATURES = _DEVICE


def family_of(item: Kernel | Collective) -> str:
    """The residual family of an item: a ``Family`` value, or the collective kind."""
    return str(item.family) if isinstance(item, Kernel) else str(item.kind)


def _log(x: float) -> float:
    return math.log(max(float(x), 1e-30))


def _align(x: int) -> float:
    """log2 of the largest power of two dividing ``x``, capped at 128 (7): the 8/64/128 alignments."""
    x = int(x)
    return float(min(7, (x & -x).bit_length() - 1)) if x > 0 else 0.0


def _waves(k: Kernel, d: dict[str, int], device: Device, c: kernels.KernelCost, peak: float) -> list[float]:
    """How the kernel's grid fills the device: log waves of CTAs over the SMs, the fill of the
    last wave (1 = full), and ``log_quant``, the log of how much the tile and wave quantization
    lengthens its busy time (``roofline.roofline`` with and without the grid; 0 without a tile
    table). Without one, the waves of 128 x 128 tiles (a query's row of ``TILE``) are described."""
    grid = roofline.Grid.of(device)
    launched = roofline.launch_grid(k, grid)
    if launched is None:
        if k.family is Family.GEMM:
            ctas = math.ceil(d["m"] / TILE) * math.ceil(d["n"] / TILE) * d["batch"]
        else:
            ctas = d["batch"] * d["heads"] * math.ceil(d["seq_q"] / TILE)
        waves = ctas / float(device.sms)
    else:
        waves = float(launched[1])
    bw = float(device.mem_bandwidth)
    plain = roofline.roofline(k, c, peak=peak, mem_bandwidth=bw, launch_overhead=0.0)
    quantized = roofline.roofline(k, c, peak=peak, mem_bandwidth=bw, launch_overhead=0.0, grid=grid)
    return [_log(waves), waves / math.ceil(waves) if waves > 0 else 0.0, _log(float(quantized) / float(plain))]


def peak_for(kernel: Kernel, cost: kernels.KernelCost, device: Device) -> float:
    """The compute rate the analytic roofline divides by (``roofline.ceiling``: a measured
    GEMM/attention ceiling where the catalog has one, else the datasheet peak), so a residual
    factor multiplies exactly the roofline that ``llmp predict`` composes."""
    return float(roofline.ceiling(kernel, cost.tensor_core, device)[0])


def roofline_seconds(kernel: Kernel, device: Device) -> tuple[kernels.KernelCost, float]:
    """``roofline.roofline`` on ``device`` in seconds: ``max(F/peak, B/bw) + launches * launch`` with
    the kernel's tiles quantized onto the device's SMs, the very time ``llmp predict`` composes."""
    c = kernels.cost(kernel)
    t = roofline.roofline(kernel, c, peak=peak_for(kernel, c, device), mem_bandwidth=float(device.mem_bandwidth),
                          launch_overhead=float(device.launch_overhead), grid=roofline.Grid.of(device))
    return c, float(t)


@dataclass(frozen=True, kw_only=True, slots=True)
class Block:
    """The feature matrix of the rows of one family, in the schema's column order."""

    family: str
    names: tuple[str, ...]
    X: np.ndarray
    base_s: np.ndarray
    """The analytic time each factor multiplies: roofline (kernels) or alpha-beta (collectives)."""
    index: np.ndarray
    """Positions of these rows in the caller's item list."""


def _device_row(peak: float, device: Device) -> list[float]:
    return [_log(peak), _log(device.mem_bandwidth), float(device.sms), _log(device.l2_cache),
            float(device.clock) / 1e9]


SpecificRow = Callable[[Kernel, dict[str, int], Device, kernels.KernelCost, float], list[float]]

_SPECIFIC_ROW: dict[Family, SpecificRow] = {
    Family.GEMM: lambda k, d, device, c, peak: [
        _log(d["m"]), _log(d["n"]), _log(d["k"]), _log(d["batch"]), _align(d["m"]), _align(d["n"]), _align(d["k"]),
        *_waves(k, d, device, c, peak)],
    Family.ATTENTION: lambda k, d, device, c, peak: [
        _log(d["batch"]), _log(d["heads"]), _log(d["heads"] / d["kv_heads"]), _log(d["seq_q"]), _log(d["seq_kv"]),
        _log(d["head_dim"]), _log(d["head_dim_v"]), _log(d["window"] / d["seq_kv"]), float(d["causal"]),
        float(d["flash"]), *_waves(k, d, device, c, peak)],
    Family.NORM: lambda k, d, *_: [_log(d["tokens"]), _log(d["hidden"]), float(d["rms"]), _align(d["hidden"])],
    Family.ELEMENTWISE: lambda k, d, *_: [_log(d["elements"])],
    Family.SOFTMAX: lambda k, d, *_: [_log(d["rows"]), _log(d["cols"]), _align(d["cols"])],
    Family.CROSS_ENTROPY: lambda k, d, *_: [_log(d["tokens"]), _log(d["vocab"]), _align(d["vocab"])],
    Family.EMBEDDING: lambda k, d, *_: [_log(d["tokens"]), _log(d["hidden"]), _log(d["vocab"])],
    Family.OPTIMIZER: lambda k, d, *_: [_log(d["params"])],
    Family.COPY: lambda k, d, *_: [_log(d["elements"])],
    Family.QUANTIZE: lambda k, d, *_: [_log(d["elements"]), _log(d["scales"])],
}
"""Each kernel family's own feature values, in the order of its names in ``_SPECIFIC``: one entry
per family, read by :func:`kernel_row` (a new family adds its entry here and its names there)."""


def kernel_row(k: Kernel, device: Device) -> tuple[list[float], float]:
    """Features of one kernel on one device (schema order) and its roofline seconds."""
    c, t_roof = roofline_seconds(k, device)
    peak = peak_for(k, c, device)
    flops, nbytes = float(c.flops), float(c.bytes)
    bw, l2 = float(device.mem_bandwidth), float(device.l2_cache)
    common = [float(k.pass_ is Pass.BWD), float(k.dtype.bytes), float(k.dtype is Dtype.BF16),
              float(k.dtype is Dtype.TF32), _log(max(flops, 1.0)), _log(nbytes), _log(t_roof),
              _log(c.launches * float(device.launch_overhead) / t_roof),
              _log((max(flops, 1.0) / nbytes) / (peak / bw)),
              _log(nbytes / l2)]
    d = {n: int(v) for n, v in k.dims}
    f = k.family
    specific = _SPECIFIC_ROW[f](k, d, device, c, peak)
    variants = [float(k.variant == v) for v in _ONE_HOT[f]]
    return [*common, *specific, *variants, *_device_row(peak, device)], t_roof


def collective_row(c: Collective, links: Links) -> tuple[list[float], float]:
    """Features of one collective and its analytic alpha-beta seconds (``collectives.time``)."""
    base_s = float(collectives.time(c, links))
    inter = c.tier is Tier.INTER
    bandwidth = float(links.rail_bandwidth if inter else links.intra_bandwidth)
    latency = float(links.inter_latency if inter else links.intra_latency)
    return [_log(c.bytes), float(c.group), float(c.ranks_per_node), float(inter), _log(bandwidth), _log(latency),
            _log(base_s), _log(latency / base_s)], base_s


def blocks(items: Sequence[Kernel | Collective], device: Device, *,
           links: Links | None = None) -> tuple[dict[str, Block], np.ndarray]:
    """Feature blocks per family for ``items`` on ``device``.

    Collectives need the cluster's ``links``. Items whose dims or device numbers are not
    numeric (a free SymPy symbol), or collectives without links, cannot be featurised; their
    positions are returned as the second value so the caller can flag them uncovered.
    """
    rows: dict[str, list[list[float]]] = {}
    base: dict[str, list[float]] = {}
    where: dict[str, list[int]] = {}
    skipped: list[int] = []
    for i, item in enumerate(items):
        fam = family_of(item)
        try:
            if isinstance(item, Kernel):
                row, t = kernel_row(item, device)
            elif links is None:
                skipped.append(i)
                continue
            else:
                row, t = collective_row(item, links)
        except (TypeError, KeyError, ZeroDivisionError, ValueError):
            # TypeError: a SymPy expression with free symbols; KeyError: no peak for the dtype.
            skipped.append(i)
            continue
        rows.setdefault(fam, []).append(row)
        base.setdefault(fam, []).append(t)
        where.setdefault(fam, []).append(i)
    out = {fam: Block(family=fam, names=FEATURES[fam], X=np.asarray(r, dtype=np.float64),
                      base_s=np.asarray(base[fam]), index=np.asarray(where[fam], dtype=np.int64))
           for fam, r in rows.items()}
    return out, np.asarray(skipped, dtype=np.int64)
