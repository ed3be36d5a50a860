"""Tile and wave quantization (``llmp.analytic.tiles``): the physics it must keep, on numbers,
arrays and SymPy alike."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from analytic_helpers import A100_BANDWIDTH as BW
from analytic_helpers import A100_GEMM_PEAK as PEAK
from analytic_helpers import attention_kernel as attention
from analytic_helpers import attention_ratio, gemm_time, plain_time

from llmp.analytic import kernels, roofline, tiles
from llmp.analytic.kernels import Family, Kernel
from llmp.analytic.roofline import Grid
from llmp.dsl import catalog
from llmp.hardware.spec import Dtype, Microarch
from llmp.spec.algebra import vceil, vselect

A100 = catalog.gpu("a100_sxm4_80gb")


def test_a_hand_worked_a100_gemm():
    """m = 2048 tokens, n = 384 (a 3 x 1024 / 8 QKV shard), k = 2048, fp16 on an A100 (108 SMs,
    271.2 TFLOP/s measured GEMM ceiling, 2.039 TB/s):

    * unquantized: 2 * 2048 * 384 * 2048 = 3.221e9 FLOPs / 271.2e12 = 11.88 us (bytes: 2 * (2048 *
      2048 + 2048 * 384 + 2048 * 384) = 11.53 MB, 5.65 us);
    * 128 x 128 tiles: 16 x 3 = 48 CTAs, one wave on 108 SMs: 108 * 2 * 128 * 128 * 2048 = 7.248e9
      FLOPs of SM time, 26.7 us;
    * split K in 2: 96 CTAs of k = 1024, still one wave: 13.36 us; its FP32 partials add
      2 * 4 * 2 * 2048 * 384 = 12.58 MB, 24.1 MB in all, 11.8 us: compute-bound, 13.36 us;
    * split in 4 or 8: 192 / 384 CTAs in 2 / 4 waves of k = 512 / 256: 13.36 us of compute, but
      36.7 / 61.9 MB of traffic, 18.0 / 30.3 us;
    * 64 x 64 tiles: 32 x 6 = 192 CTAs in 2 waves at half the main tile's rate: 26.7 us.

    The fastest is the 2-way split: 13.36 us, 1.125 x the unquantized roofline.
    """
    assert plain_time(2048, 384, 2048) == pytest.approx(11.88e-6, rel=1e-3)
    assert gemm_time(2048, 384, 2048) == pytest.approx(108 * 2 * 128 * 128 * 1024 / PEAK, rel=1e-12)
    assert gemm_time(2048, 384, 2048) / plain_time(2048, 384, 2048) == pytest.approx(1.125, rel=1e-3)


def test_a_narrow_shard_on_a_big_gpu_is_priced_by_its_waves():
    # A 1024 x 128 x 1024 GEMM (micro-batch 1 of 1024 tokens, an 8-way shard of hidden 1024)
    # fills 8 of 108 SMs with its 128 x 128 tiles: split K 8 ways and the small tile both leave
    # most of the GPU idle, so it runs several times slower than its FLOPs at the ceiling.
    assert gemm_time(1024, 128, 1024) > 2.5 * plain_time(1024, 128, 1024)


def test_a_device_without_a_tile_table_keeps_the_plain_roofline():
    kern = Kernel.make(Family.GEMM, Dtype.FP16, m=100, n=100, k=100, batch=1)
    c = kernels.cost(kern)
    plain = roofline.roofline(kern, c, peak=PEAK, mem_bandwidth=BW, launch_overhead=5e-6)
    assert roofline.roofline(kern, c, peak=PEAK, mem_bandwidth=BW, launch_overhead=5e-6,
                             grid=Grid(sms=108, microarch=None)) == plain


def test_attention_grids_that_fill_whole_waves_cost_the_roofline():
    # FlashAttention-2 forward at d 128 on sm80: 128-query blocks, 64-key blocks; 108 heads x 1
    # block = one full wave on 108 SMs.
    assert attention_ratio(attention(1, 108, 128, 128, causal=False)) == pytest.approx(1.0, rel=1e-12)
    assert attention_ratio(attention(4, 27, 1024, 128, causal=False)) == pytest.approx(1.0, rel=1e-12)


def test_a_causal_grid_of_one_wave_waits_for_its_longest_block():
    # 8 CTAs (one batch, one head, 1024 queries in 128-row blocks): the last block sees every key,
    # twice the average, and 100 of 108 SMs idle.
    assert attention_ratio(attention(1, 1, 1024, 128, causal=True)) == pytest.approx(2 * 108 / 8, rel=1e-12)


def test_numbers_arrays_and_sympy_give_the_same_time():
    m, n, k, hd, seq = sp.symbols("m n k head_dim seq", positive=True)
    peak, bw, sm = sp.symbols("peak bw sms", positive=True)
    gemm = tiles.gemm_seconds(m, n, k, 1, 2 * (m * k + k * n + m * n), peak=peak, mem_bandwidth=bw, sms=sm,
                              tiles=tiles.GEMM[Microarch.SM90])
    attn = tiles.attention_factor(batch=2, heads=8, seq_q=seq, seq_kv=seq, head_dim=hd, causal=True, backward=False,
                                  sms=sm, tiles=tiles.FA3_SM90)
    f = sp.lambdify((m, n, k, hd, seq, peak, bw, sm), (gemm, attn), modules="numpy")
    rng = np.random.default_rng(0)
    cols = [rng.integers(1, 9000, 50).astype(float) for _ in range(3)]
    cols += [rng.choice([64.0, 96.0, 128.0, 192.0, 256.0], 50), rng.integers(64, 9000, 50).astype(float)]
    g_arr, a_arr = f(*cols, 9.9e14, 3.35e12, 132.0)
    for i in range(50):
        mi, ni, ki, hdi, si = (int(c[i]) for c in cols)
        g = tiles.gemm_seconds(mi, ni, ki, 1, 2 * (mi * ki + ki * ni + mi * ni), peak=9.9e14, mem_bandwidth=3.35e12,
                               sms=132, tiles=tiles.GEMM[Microarch.SM90])
        a = tiles.attention_factor(batch=2, heads=8, seq_q=si, seq_kv=si, head_dim=hdi, causal=True, backward=False,
                                   sms=132, tiles=tiles.FA3_SM90)
        at = {m: mi, n: ni, k: ki, hd: hdi, seq: si, peak: sp.Float(9.9e14), bw: sp.Float(3.35e12), sm: 132}
        assert g == pytest.approx(g_arr[i], rel=1e-12) == pytest.approx(float(gemm.subs(at)), rel=1e-12)
        assert a == pytest.approx(a_arr[i], rel=1e-12) == pytest.approx(float(attn.subs(at)), rel=1e-12)


def test_ceilings_and_table_lookups_broadcast_and_differentiate():
    x = sp.Symbol("x", positive=True)
    assert vceil(7 / 2) == 4 and isinstance(vceil(7 / 2), int)
    assert np.array_equal(vceil(np.array([0.5, 1.0, 1.5])), [1.0, 1.0, 2.0])
    assert sp.diff(128 * vceil(x / 128), x) == 1  # the staircase's slope on average
    assert vceil(x / 128).subs(x, 129) == 2
    steps = ((64, 1), (128, 2))
    assert [vselect(v, steps, 3) for v in (10, 64, 100, 300)] == [1, 1, 2, 3]
    assert np.array_equal(vselect(np.array([10.0, 100.0, 300.0]), steps, 3), [1, 2, 3])
    assert [vselect(x, steps, 3).subs(x, v) for v in (10, 100, 300)] == [1, 2, 3]


def test_every_catalog_gpu_names_its_architecture():
    from llmp.hardware.catalog import catalog_ids

    for gpu_id in catalog_ids()["gpu"]:
        g = catalog.gpu(gpu_id)
        if g.vendor in ("NVIDIA", "AMD"):
            assert g.microarch in tiles.GEMM, gpu_id
    assert catalog.gpu("cpu").microarch is None


def test_pricing_a_spec_quantizes_its_small_kernels():
    # The vTrain grid's smallest layout: hidden 1024, tp 8, micro-batch 1 of 1024 tokens on A100s.
    from llmp import dsl
    from llmp.analytic.graph import decompose
    from llmp.analytic.pricing import Hardware, kernel_price

    spec = dsl.loads('use "dgx_a100"\ncluster c { node = dgx_a100  nodes = 1 }\n'
                     "model m { arch = gpt  layers = 2  hidden = 1024  heads = 16  vocab = 50304  seq_len = 1024 }\n"
                     "train { precision = fp16  global_batch = 8  micro_batch = 1  parallel { tp = 8 } }\n")
    hw = Hardware.of(spec)
    qkv = next(op.work for op in decompose(spec).ops if op.name.endswith("qkv") and op.work.family is Family.GEMM)
    c = kernels.cost(qkv)
    busy = kernel_price(qkv, hw)[2] - float(hw.launch_overhead)
    assert busy > 2 * float(c.flops) / hw.peak_for(qkv, True)  # 1024 x 384 x 1024: 24 tiles on 108 SMs
    assert math.isclose(kernel_price(qkv, hw)[0], float(c.flops))
