"""Tile and wave quantization on generated shapes: GEMM and attention times never fall as a
dimension grows, past a tile boundary costs at least the boundary, quantized never beats the plain
roofline, and whole waves of whole tiles cost exactly the roofline."""

from __future__ import annotations

import pytest
from analytic_helpers import attention_kernel as attention
from analytic_helpers import attention_ratio, gemm_time, plain_time
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.analytic import kernels, roofline, tiles
from llmp.analytic.roofline import Grid

archs = st.sampled_from(sorted(tiles.GEMM, key=str))
dims = st.integers(1, 20000)
sms = st.integers(8, 320)


@settings(max_examples=60, deadline=None)
@given(m=dims, n=dims, k=dims, b=st.integers(1, 64), arch=archs, sm=sms, which=st.sampled_from("mnkb"))
def test_gemm_time_never_falls_as_a_dim_grows(m, n, k, b, arch, sm, which):
    before = {"m": m, "n": n, "k": k, "b": b}
    after = dict(before, **{which: before[which] + 1})
    t0 = gemm_time(before["m"], before["n"], before["k"], before["b"], arch=arch, sm=sm)
    t1 = gemm_time(after["m"], after["n"], after["k"], after["b"], arch=arch, sm=sm)
    assert t1 >= t0 * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(tiles_=st.integers(1, 64), other=dims, k=dims, arch=archs, sm=sms)
def test_one_element_past_a_tile_boundary_costs_at_least_the_boundary(tiles_, other, k, arch, sm):
    edge = 128 * tiles_
    assert gemm_time(edge + 1, other, k, arch=arch, sm=sm) >= gemm_time(edge, other, k, arch=arch, sm=sm)
    assert gemm_time(other, edge + 1, k, arch=arch, sm=sm) >= gemm_time(other, edge, k, arch=arch, sm=sm)


@settings(max_examples=60, deadline=None)
@given(m=dims, n=dims, k=dims, b=st.integers(1, 64), arch=archs, sm=sms)
def test_quantized_never_beats_the_plain_roofline(m, n, k, b, arch, sm):
    assert gemm_time(m, n, k, b, arch=arch, sm=sm) >= plain_time(m, n, k, b) * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 12), waves=st.integers(1, 6), k=st.integers(4096, 32768), arch=archs)
def test_whole_waves_of_whole_tiles_cost_exactly_the_roofline(rows, waves, k, arch):
    # rows x (waves * 12) tiles of 128 x 128 fill `waves` waves of 12 * rows SMs; k large enough
    # to be compute-bound.
    sm = 12 * rows
    m, n = 128 * rows, 128 * 12 * waves
    assert gemm_time(m, n, k, arch=arch, sm=sm) == pytest.approx(plain_time(m, n, k), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 16), heads=st.integers(1, 64), seq=st.integers(64, 8192),
       head_dim=st.sampled_from([64, 80, 96, 128, 192, 256]), causal=st.booleans(), bwd=st.booleans(),
       variant=st.sampled_from(["", "flash3", "cudnn"]), arch=archs, which=st.sampled_from(["batch", "heads", "seq"]))
def test_attention_time_never_falls_as_its_grid_grows(batch, heads, seq, head_dim, causal, bwd, variant, arch,
                                                      which):
    shape = {"batch": batch, "heads": heads, "seq": seq}
    grown = dict(shape, **{which: shape[which] + 1})
    t = []
    for s in (shape, grown):
        k = attention(s["batch"], s["heads"], s["seq"], head_dim, causal=causal, bwd=bwd, variant=variant)
        t.append(float(roofline.roofline(k, kernels.cost(k), peak=5e14, mem_bandwidth=3e12, launch_overhead=0.0,
                                         grid=Grid(sms=132, microarch=arch))))
        assert attention_ratio(k, arch, 132) >= 1 - 1e-12
    assert t[1] >= t[0] * (1 - 1e-12)
