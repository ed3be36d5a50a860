"""Tile and wave quantization: what a kernel's grid of tiles costs on a device's SMs.

A GEMM does not run at ``flops / peak``. Its library cuts the ``m x n`` output into tiles of
``tm x tn`` (one CTA each, ``ceil(m / tm) * ceil(n / tn)`` per batch entry), and the GPU runs
them in *waves* of one CTA per SM (a CTA alone on an SM has its tensor cores at the SM's full rate;
where a library keeps two CTAs resident per SM they share that rate, which takes the same time, so
waves are counted per SM): the last wave, partly empty, costs as long as a full one, and
the padding of the edge tiles is computed like real work (NVIDIA Deep Learning Performance
Documentation, "Matrix Multiplication Background User's Guide", sections "Tile Quantization" and
"Wave Quantization", docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication).
A small grid (a narrow tensor-parallel shard, micro-batch 1) leaves most SMs idle; a roofline
that assumes every kernel fills the GPU is then several times too fast.

The model prices the configurations a library chooses between and takes the fastest, as its
heuristics try to (cuBLAS, CUTLASS, hipBLASLt all pick a tile and a split per shape):

* the architecture's main tile, with split-K over ``s`` slices (``s`` in ``splits``): ``s``
  times the CTAs, each reducing ``k / s`` of the contraction, and the ``s`` FP32 partial tiles
  written and read back once more (CUTLASS ``GemmSplitKParallel``: a partial-sum workspace and a
  reduction; cuBLAS does the same for small ``m x n`` with a long ``k``);
* a small tile for grids the main tile cannot fill, at the main tile's rate scaled by how much
  more operand traffic it needs per FLOP: a ``tm x tn`` tile reads ``tm + tn`` elements per
  ``tm * tn`` multiply-adds, so a 64 x 64 tile needs twice the on-chip bandwidth of a 128 x 128
  one ("larger tiles ... use less bandwidth and are more efficient", the same guide, section
  "Tile Quantization"); the main tile is taken to be the one that just keeps its tensor cores fed.

Each configuration costs ``waves * SMs * (FLOPs of one tile)`` over the compute ceiling, against
its bytes over the memory bandwidth (the roofline of :func:`llmp.analytic.roofline.roofline`). Every
configuration costs at least the unquantized roofline and is non-decreasing in every dim; where the
grid fills whole waves of whole tiles the main tile's equals it exactly.

The main tile is 128 x 128 on every architecture here: every generation's library has it (cited
per entry of ``GEMM``; it is the level-0 tile of CUTLASS's sm90 and sm100 generators), and on the
public operator measurements (``../shared/data``, training data: cuBLAS through PyTorch on A100,
H100, A40; XLA on H100 and B200; aiter on MI300X and MI355X) the larger main tiles the libraries
also have overstated the quantization of the cuBLAS sources, which their heuristics avoid by
picking smaller tiles or splitting K (``benchmarks/tile_choice.py``). Split counts are powers of
two up to 8; up to 16 changed no source's fit.

FlashAttention runs one CTA per ``block_m`` query rows of one (batch, head) in the forward, one
per ``block_n`` keys in the backward (FlashAttention-2, Dao 2023, §3.2; the launch grids of
``flash_fwd_launch_template.h`` and ``flash_bwd_launch_template.h``), so its grid is ``batch *
heads * ceil(seq / block)`` CTAs, in waves over the SMs, each padded to whole blocks of keys
and queries. The blocks depend on the kernel, the head dim and the architecture (``FA2_SM80``,
``FA2_SM86``, ``FA3_SM90``). A causal grid's CTAs differ: the last query block (the first key
block, backward) sees every key (query), twice the average, so a causal kernel takes at least
as long as that CTA, two average CTAs; beyond one wave the kernels schedule the long CTAs
first and the waves even out.

All of it is written with :mod:`llmp.spec.algebra`'s ``vceil``, ``vmin``, ``vmax`` and
``vselect``, so it evaluates on numbers, numpy arrays (sweeps) and SymPy expressions alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic.kernels import AttentionKernel
from llmp.hardware.spec import Microarch
from llmp.spec.algebra import vceil, vmax, vmin, vselect

_CUTLASS = "NVIDIA/cutlass@751eb9a:python/cutlass_library/generator.py"


@dataclass(frozen=True, slots=True)
class GemmTiles:
    """The GEMM configurations one architecture's libraries choose between."""

    main: tuple[int, int]
    """CTA output tile (rows x cols) of the default kernel, tried with every split."""
    small: tuple[int, int]
    """The smallest tile the library has, tried without a split."""
    splits: tuple[int, ...]
    """Split-K slice counts tried with the main tile (1 = no split)."""
    source: str


_SPLITS = (1, 2, 4, 8)

GEMM: dict[Microarch, GemmTiles] = {
    Microarch.SM70: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        f"{_CUTLASS} (GenerateSM70_TensorOp_884: tiles 256x128 ... 128x128 ... 64x64)")),
    Microarch.SM80: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        f"{_CUTLASS} (GenerateSM80_TensorOp_16816: tiles 256x128 ... 128x128 ... 64x64)")),
    Microarch.SM86: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        f"{_CUTLASS} (GenerateSM80_TensorOp_16816, built for every sm8x)")),
    Microarch.SM90: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        "NVIDIA/cutlass@d14823d:python/cutlass_library/sm90_shapes.py (level-0 WGMMA 64x128 times the level-0 "
        "MMA multiplier 2x1 = a 128x128 CTA tile; WGMMA 64x64 at multiplier 1x1 = 64x64)")),
    Microarch.SM100: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        "NVIDIA/cutlass@30ac828:python/cutlass_library/sm100_shapes.py (SM100_MMA_SHAPES_16b_DENSE_1SM: "
        "128x128 at level 0, 64x64 at level 2; the 2-SM 256x128 tile is 128x128 per SM)")),
    Microarch.GFX942: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        "ROCm/aiter@e404860:aiter/configs/bf16_tuned_gemm.csv (kernelName: ..._128x128x64..., "
        "bf16gemm_fp32bf16_tn_64x64_splitk_clean; the tuned kernels split K)")),
    Microarch.GFX950: GemmTiles(main=(128, 128), small=(64, 64), splits=_SPLITS, source=(
        "ROCm/aiter@e404860:aiter/configs/bf16_tuned_gemm.csv (gfx950 kernelName: ..._128x128x64..., "
        "bf16gemm_fp32bf16_tn_64x64_splitk_clean)")),
}
"""GEMM tiles per architecture (module docstring)."""


def _efficiency(tile: tuple[int, int], main: tuple[int, int]) -> float:
    """The rate a tile reaches relative to the main tile: the inverse of its operand elements per
    multiply-add, ``(tm + tn) / (tm * tn)``, relative to the main tile's; at most 1."""
    per = (tile[0] + tile[1]) / (tile[0] * tile[1])
    return min(1.0, ((main[0] + main[1]) / (main[0] * main[1])) / per)


def gemm_options(m: Any, n: Any, k: Any, batch: Any, nbytes: Any, *, peak: Any, mem_bandwidth: Any, sms: Any,
                 tiles: GemmTiles) -> list[tuple[Any, Any]]:
    """(compute seconds, memory seconds) of each configuration of ``tiles`` for a GEMM of ``batch``
    products of ``m x k`` by ``k x n`` whose grid runs in waves over ``sms`` SMs. ``nbytes`` is the
    kernel's compulsory traffic (``kernels.cost``); a split adds its partials."""
    tm, tn = tiles.main
    grid = vceil(m / tm) * vceil(n / tn) * batch
    options = []
    for s in tiles.splits:
        waves = vceil(grid * s / sms)
        flops = 2 * tm * tn * (vceil(k / s) if s > 1 else k) * sms * waves
        traffic = nbytes + (2 * 4 * s * m * n * batch if s > 1 else 0)  # FP32 partials written, read back
        options.append((flops / peak, traffic / mem_bandwidth))
    sm, sn = tiles.small
    waves = vceil(vceil(m / sm) * vceil(n / sn) * batch / sms)
    flops = 2 * sm * sn * k * sms * waves / _efficiency(tiles.small, tiles.main)
    options.append((flops / peak, nbytes / mem_bandwidth))
    return options


def gemm_seconds(m: Any, n: Any, k: Any, batch: Any, nbytes: Any, *, peak: Any, mem_bandwidth: Any, sms: Any,
                 tiles: GemmTiles) -> Any:
    """Compute-or-memory seconds of a GEMM: the fastest of its configurations (``gemm_options``)."""
    return vmin(*(vmax(c, mem) for c, mem in gemm_options(m, n, k, batch, nbytes, peak=peak,
                                                          mem_bandwidth=mem_bandwidth, sms=sms, tiles=tiles)))


def gemm_grid(m: Any, n: Any, batch: Any, sms: Any, tiles: GemmTiles) -> tuple[Any, Any]:
    """(CTAs, waves) of the main tile without a split: the grid the residual features describe."""
    tm, tn = tiles.main
    grid = vceil(m / tm) * vceil(n / tn) * batch
    return grid, grid / sms


@dataclass(frozen=True, slots=True)
class FlashTiles:
    """One FlashAttention kernel's blocks on one architecture, by head dim.

    Each table is ``((largest head dim, (block_m, block_n)), ...)`` in increasing head dims; a
    head dim beyond the last takes the last entry. ``block_m`` counts query rows, ``block_n`` keys.
    """

    fwd: tuple[tuple[int, tuple[int, int]], ...]
    fwd_causal: tuple[tuple[int, tuple[int, int]], ...]
    bwd: tuple[tuple[int, tuple[int, int]], ...]
    source: str


_FA2 = "Dao-AILab/flash-attention@01afd16:csrc/flash_attn/src/flash_fwd_launch_template.h (run_mha_fwd_hdim*)"
_FA2_BWD = "Dao-AILab/flash-attention@073afd5:csrc/flash_attn/src/flash_bwd_launch_template.h (run_mha_bwd_hdim*)"
_FA3 = "Dao-AILab/flash-attention@07602ad:hopper/tile_size.h (tile_size_fwd_sm90)"
_FA3_BWD = "Dao-AILab/flash-attention@fc8e93c:hopper/flash_bwd_launch_template.h (run_mha_bwd_hdim*, Arch >= 90)"

FA2_SM80 = FlashTiles(
    fwd=((64, (128, 128)), (256, (128, 64))),
    fwd_causal=((64, (128, 128)), (256, (128, 64))),
    bwd=((64, (128, 128)), (128, (64, 128)), (256, (64, 64))),
    source=f"{_FA2}: 128 x 128 up to d 64, 128 x 64 above (A100, H100); {_FA2_BWD}: 128 x 128 at d 64, 64 x 128 at "
           "d 96 and 128, 64 x 64 above (>= 144 KB shared memory)")
"""FlashAttention-2 on GPUs with A100-class shared memory (sm80, sm90, sm100 run the same kernels)."""

FA2_SM86 = FlashTiles(
    fwd=((64, (128, 128)), (128, (128, 32)), (256, (128, 64))),
    fwd_causal=((64, (128, 128)), (128, (64, 64)), (256, (128, 64))),
    bwd=((96, (64, 128)), (256, (64, 64))),
    source=f"{_FA2}, is_sm8x branches: 128 x 32 non-causal and 64 x 64 causal at d 96 and 128; {_FA2_BWD}: "
           "< 144 KB shared memory")
"""FlashAttention-2 on GA10x (99 KB of shared memory per block)."""

FA3_SM90 = FlashTiles(
    fwd=((64, (192, 192)), (96, (192, 144)), (128, (128, 176)), (192, (128, 128)), (256, (128, 80))),
    fwd_causal=((64, (192, 128)), (96, (192, 144)), (128, (128, 128)), (192, (128, 128)), (256, (128, 80))),
    bwd=((64, (128, 128)), (128, (64, 128)), (192, (64, 96)), (256, (64, 80))),
    source=f"{_FA3}; {_FA3_BWD}")
"""FlashAttention-3 (Hopper, 2-byte inputs)."""


def flash_tiles(variant: str, microarch: Microarch) -> FlashTiles:
    """The blocks of a fused attention kernel (``kernels.AttentionKernel`` value) on an architecture.

    FlashAttention-3 runs only on sm90 and later, and cuDNN publishes no tile sizes: both are
    priced with FlashAttention-3's blocks from sm90 on (cuDNN's Hopper kernels are the same
    warp-specialised design), with FlashAttention-2's before. AMD's CK kernels stand in with
    FlashAttention-2's A100 blocks (an approximation: no tile table of theirs is cited here).
    FlashAttention 1.x and the Triton kernel are priced with FlashAttention-2's blocks.
    """
    if variant in (AttentionKernel.FLASH3, AttentionKernel.CUDNN) and microarch in (Microarch.SM90, Microarch.SM100):
        return FA3_SM90
    return FA2_SM86 if microarch is Microarch.SM86 else FA2_SM80


def _block(head_dim: Any, table: tuple[tuple[int, tuple[int, int]], ...], which: int) -> Any:
    last = table[-1][1][which]
    return vselect(head_dim, tuple((d, blocks[which]) for d, blocks in table[:-1]), last)


def attention_factor(*, batch: Any, heads: Any, seq_q: Any, seq_kv: Any, head_dim: Any, causal: bool, backward: bool,
                     sms: Any, tiles: FlashTiles) -> Any:
    """How much longer than its FLOPs at the ceiling a fused attention kernel runs: the padding of
    queries and keys to whole blocks times the idle SMs of its last wave, and a causal grid at
    least as long as its longest CTA (>= 1; 1 when a non-causal grid fills whole waves of whole
    blocks)."""
    table = tiles.bwd if backward else (tiles.fwd_causal if causal else tiles.fwd)
    bm, bn = _block(head_dim, table, 0), _block(head_dim, table, 1)
    rows, cols = vceil(seq_q / bm), vceil(seq_kv / bn)
    pad = rows * bm / seq_q * (cols * bn / seq_kv)
    grid = batch * heads * (cols if backward else rows)
    waves = vceil(grid / sms)
    return pad * (vmax(waves, 2) if causal else waves) * sms / grid


def attention_grid(*, batch: Any, heads: Any, seq_q: Any, seq_kv: Any, head_dim: Any, causal: bool, backward: bool,
                   sms: Any, tiles: FlashTiles) -> tuple[Any, Any]:
    """(CTAs, waves) of a fused attention kernel's grid."""
    table = tiles.bwd if backward else (tiles.fwd_causal if causal else tiles.fwd)
    block = _block(head_dim, table, 1 if backward else 0)
    grid = batch * heads * vceil((seq_kv if backward else seq_q) / block)
    return grid, grid / sms
