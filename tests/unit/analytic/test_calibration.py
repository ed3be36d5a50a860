"""Measured ceilings in the analytic model: link efficiency and mesh topology in the collective
cost, achievable GEMM and flash-attention rates in the roofline; scalar, sweep and symbolic
paths agree."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from analytic_helpers import TERA, calibrated
from analytic_helpers import calibration_node as node
from analytic_helpers import collective as _c
from strategies_analytic import h100, llama, make_spec

from llmp.analytic import collectives, cost, kernels, nccl, roofline
from llmp.analytic.collectives import Links, time
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import CollectiveKind, Family, Kernel, Pass
from llmp.analytic.pricing import Hardware, kernel_price, price, price_arrays
from llmp.analytic.roofline import Ceiling
from llmp.analytic.structure import structure_of
from llmp.hardware.spec import Dtype, Link

GIB = 2**30


def test_links_run_at_line_rate_times_efficiency():
    links = Links.between(node(efficiency=0.8), Link(id="ib", bandwidth=200e9, latency=5e-6, efficiency=0.9))
    assert links.intra_bandwidth == pytest.approx(240e9) and links.inter_bandwidth == pytest.approx(180e9)
    assert links.intra_latency == 3e-6 and links.intra_peer_bandwidth is None


@pytest.mark.parametrize("kind", list(CollectiveKind))
def test_bandwidth_term_scales_as_one_over_efficiency(kind: CollectiveKind):
    # The bytes term of NCCL's Simple ring (and of point-to-point) runs at line rate x efficiency.
    size, n = 4 * GIB, 8
    line, slow = (Links.between(node(eff), node().inter) for eff in (1.0, 0.75))

    def bytes_term(links: Links) -> float:
        if kind in (CollectiveKind.SEND_RECV, CollectiveKind.ALL_TO_ALL):
            return time(_c(kind, size, n), links) - time(_c(kind, 0.0, n), links)
        ring = [nccl.ring(collectives.call(_c(kind, s, n)), links.fabric(n), nccl.Protocol.SIMPLE) for s in (size, 0.0)]
        return ring[0] - ring[1]

    assert bytes_term(slow) == pytest.approx(bytes_term(line) / 0.75, rel=1e-12)


def test_a_pair_in_a_mesh_gets_only_its_pairs_links():
    # Perlmutter: 300 GB/s per GPU, 100 GB/s per pair. A 2-GPU all-reduce runs at 100, 4 GPUs at 300:
    # NCCL's ring/Simple, baseLat 8.4 us + 2 steps x (NVLink 3.4 us + the link's 3 us), bytes at 100 GB/s.
    mesh = Links.between(node(peer=100e9, gpus=4), node().inter)
    switch = Links.between(node(gpus=4), node().inter)
    size = 4 * GIB
    two = time(_c(CollectiveKind.ALL_REDUCE, size, 2), mesh)
    assert two == pytest.approx(8.4e-6 + 2 * (3.4e-6 + 3e-6) + size / 100e9, rel=1e-12)
    assert time(_c(CollectiveKind.SEND_RECV, size, 2), mesh) == pytest.approx(8.4e-6 + 3.4e-6 + 3e-6 + size / 100e9)
    four = _c(CollectiveKind.ALL_REDUCE, size, 4)
    assert time(four, mesh) == pytest.approx(time(four, switch), rel=1e-12)
    assert mesh.group_bandwidth(3) == pytest.approx(200e9)


def test_sweep_and_scalar_pricing_agree_on_a_calibrated_mesh():
    model = llama(layers=4, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=2048)
    spec = make_spec(model, gpus_per_node=4, nodes=2, global_batch=16, tp=2, pp=2)
    c = spec.cluster
    intra = dataclasses.replace(c.node.intra, efficiency=0.78, peer_bandwidth=100e9)
    spec = dataclasses.replace(spec, cluster=dataclasses.replace(
        c, node=dataclasses.replace(c.node, intra=intra), inter=dataclasses.replace(c.inter, efficiency=0.9)))
    graph = decompose(spec, structure_of(spec))
    one = price(graph, spec)
    many = price_arrays(graph, spec, 3)
    assert np.allclose(many.time, np.array(one.time, dtype=float)[:, None], rtol=1e-12)


def _kernels() -> tuple[Kernel, Kernel, Kernel]:
    gemm = Kernel.make(Family.GEMM, Dtype.BF16, m=8192, n=8192, k=8192, batch=1)
    attn = Kernel.make(Family.ATTENTION, Dtype.BF16, Pass.BWD, batch=1, heads=32, kv_heads=8, seq_q=8192,
                       seq_kv=8192, head_dim=128, head_dim_v=128, window=8192, causal=True, flash=True)
    norm = Kernel.make(Family.NORM, Dtype.BF16, tokens=8192, hidden=8192, rms=True)
    return gemm, attn, norm


def test_each_kernel_kind_takes_its_measured_ceiling():
    gemm, attn, norm = _kernels()
    device = calibrated()
    assert roofline.ceiling(gemm, True, device) == (pytest.approx(794.5 * TERA), Ceiling.ACHIEVABLE)
    assert roofline.ceiling(attn, True, device) == (pytest.approx(338 * TERA), Ceiling.FLASH_ATTENTION)
    assert roofline.ceiling(norm, False, device) == (pytest.approx(67 * TERA), Ceiling.VECTOR)
    # attention without its own rate is bounded by the GEMM ceiling; nothing measured: datasheet
    assert roofline.ceiling(attn, True, calibrated(attention=None))[1] is Ceiling.ACHIEVABLE
    assert roofline.ceiling(gemm, True, h100()) == (pytest.approx(989 * TERA), Ceiling.PEAK)
    fp8 = Kernel.make(Family.GEMM, Dtype.FP8, m=8192, n=8192, k=8192, batch=1)
    assert roofline.ceiling(fp8, True, device) == (pytest.approx(1979 * TERA), Ceiling.PEAK)


def test_compute_bound_gemm_time_is_flops_over_the_measured_rate():
    gemm, attn, _ = _kernels()
    hw = Hardware.of(make_spec(device=calibrated()))
    flops, _, seconds = kernel_price(gemm, hw)
    assert seconds == pytest.approx(flops / 794.5e12 + 5e-6, rel=1e-12)
    # A forward+backward figure is reproduced: both passes at one rate = 3.5 x forward FLOPs / rate.
    fwd = dataclasses.replace(attn, pass_=Pass.FWD)
    t = kernel_price(fwd, hw)[2] + kernel_price(attn, hw)[2] - 2 * 5e-6
    assert t == pytest.approx(3.5 * float(kernels.cost(fwd).flops) / 338e12, rel=1e-12)


def test_symbolic_cost_has_the_ceiling_as_a_symbol_and_matches_the_numbers():
    spec = make_spec(device=calibrated())
    sc = cost(spec)
    names = {s.name for op in sc.ops for s in op.time.free_symbols}
    assert {"gpu_achievable_bf16", "gpu_flash_attention_bf16", "node_intra_efficiency"} <= names
    assert "gpu_flops_bf16" not in names  # the datasheet peak no longer prices any kernel
    numbers = price(decompose(spec, structure_of(spec)), spec).time
    for op, t in zip(sc.ops[:40], numbers[:40]):
        assert float(op.time.subs(sc.point)) == pytest.approx(float(t), rel=1e-9)


def test_links_of_a_spec_apply_the_catalog_efficiency():
    spec = make_spec()
    c = spec.cluster
    spec = dataclasses.replace(spec, cluster=dataclasses.replace(
        c, node=dataclasses.replace(c.node, intra=dataclasses.replace(c.node.intra, efficiency=0.5))))
    assert collectives.Links.of(spec).intra_bandwidth == pytest.approx(c.node.intra.bandwidth * 0.5)
