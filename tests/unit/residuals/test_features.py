"""Features: named schema per family, and the roofline the factor multiplies is roofline.roofline."""

from __future__ import annotations

import math

import pytest

from llmp.analytic import collectives, kernels, roofline
from llmp.analytic.kernels import Collective, CollectiveKind, Family, Kernel, Tier
from llmp.measure import design
from llmp.residuals import features


def test_schema_names_every_family_and_is_unique():
    for fam in [*(f.value for f in Family), *(k.value for k in CollectiveKind)]:
        names = features.FEATURES[fam]
        assert len(names) == len(set(names))
        for feature in features.MONOTONE[fam]:
            assert feature in names
    for fam in (f.value for f in Family):
        assert set(features.DEVICE_FEATURES) <= set(features.FEATURES[fam])


@pytest.mark.parametrize("family", design.FAMILIES)
def test_numeric_roofline_equals_the_sympy_roofline(family):
    """The factor's baseline (floats) is ``roofline.roofline`` evaluated exactly in SymPy (tile and
    wave quantization on an A100 included)."""
    import sympy as sp

    from llmp.residuals import dataset

    gpu = dataset.catalog_device("a100_sxm4_80gb")
    for case in design.design((family,), design.RANGES["cuda"], ("fp16",), 1, 5):
        k = dataset.kernel_of({"family": case.family, "pass": case.pass_, "variant": case.variant,
                               "dtype": case.dtype, **{n: str(v) for n, v in case.dims}})
        c, t = features.roofline_seconds(k, gpu)
        exact = roofline.roofline(k, kernels.cost(k), peak=sp.Float(features.peak_for(k, c, gpu), 30),
                                  mem_bandwidth=sp.Float(gpu.mem_bandwidth, 30),
                                  launch_overhead=sp.Rational(5, 10**6), grid=roofline.Grid(
                                      sms=sp.Integer(gpu.sms), microarch=gpu.microarch))
        assert t == pytest.approx(float(exact), rel=1e-12)
        row, _ = features.kernel_row(k, gpu)
        assert len(row) == len(features.FEATURES[family]) and all(math.isfinite(v) for v in row)


def test_symbolic_items_are_skipped_not_crashed(cpu):
    import sympy as sp

    h = sp.Symbol("hidden", positive=True, integer=True)
    items = [Kernel.make(Family.NORM, kernels.Dtype.FP32, tokens=64, hidden=h, rms=True),
             Kernel.make(Family.NORM, kernels.Dtype.FP32, tokens=64, hidden=128, rms=True),
             Collective(kind=CollectiveKind.ALL_REDUCE, bytes=1 << 20, group=2, ranks_per_node=2, tier=Tier.INTRA)]
    blocks, skipped = features.blocks(items, cpu)  # no links: the collective cannot be priced
    assert list(skipped) == [0, 2]
    assert list(blocks["norm"].index) == [1]


def test_collective_features_use_the_alpha_beta_time(cpu):
    links = collectives.Links(gpus_per_node=1, intra_bandwidth=1e9, intra_latency=1e-4, inter_bandwidth=1e9,
                              inter_latency=1e-4)
    c = Collective(kind=CollectiveKind.ALL_GATHER, bytes=1 << 20, group=2, ranks_per_node=2, tier=Tier.INTRA)
    row, base = features.collective_row(c, links)
    assert base == pytest.approx(float(collectives.time(c, links)))
    assert dict(zip(features.COLLECTIVE_FEATURES, row))["log_t_base"] == pytest.approx(math.log(base))


def test_residual_baseline_is_the_calibrated_roofline_predict_uses():
    # A GPU with a published GEMM ceiling: the sample's roofline must divide by that ceiling,
    # as llmp predict does, or a fitted factor would correct the same gap twice.
    from pathlib import Path

    from llmp.analytic import kernels as K
    from llmp.dsl import load
    from llmp.hardware.spec import Dtype as D
    from llmp.residuals import features as F

    spec = load(Path(__file__).resolve().parents[3] / "examples" / "llama3_8b_dgx_h100.llmp")
    gpu = spec.cluster.gpu
    # 11 x 12 tiles of 128 x 128: one full wave on the H100's 132 SMs, so no quantization.
    gemm = K.Kernel.make(K.Family.GEMM, D.BF16, m=11 * 128, n=12 * 128, k=16384, batch=1)
    cost, seconds = F.roofline_seconds(gemm, gpu)
    assert gpu.achievable is not None and float(gpu.achievable.rates[D.BF16]) < float(gpu.peak_flops[D.BF16])
    assert seconds == pytest.approx(float(cost.flops) / float(gpu.achievable.rates[D.BF16])
                                    + float(gpu.launch_overhead))
