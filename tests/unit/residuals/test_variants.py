"""Kernel variants: what a stack actually launches changes bytes and launches, never the FLOPs it
computes, and the roofline pays one launch per kernel."""

from __future__ import annotations

import pytest
import sympy as sp
from residual_helpers import norm_kernel as _norm

from llmp.analytic import kernels, roofline
from llmp.analytic.kernels import VARIANTS, Family, Fusion, Kernel, Pass
from llmp.hardware.spec import Dtype
from llmp.residuals import dataset, features


@pytest.mark.parametrize("family", list(Family))
def test_every_variant_of_every_family_has_a_cost(family):
    dims = {name: 256 for name in kernels.DIMS[family]}
    for variant in VARIANTS[family]:
        for pass_ in Pass:
            c = kernels.cost(Kernel.make(family, Dtype.BF16, pass_, variant, **dims))
            assert c.bytes > 0 and c.launches >= 1


def test_roofline_pays_one_launch_per_kernel():
    launch = sp.Symbol("launch", positive=True)
    k = _norm(Fusion.UNFUSED, Pass.FWD, 8, 8)
    t = roofline.roofline(k, kernels.cost(k), peak=1e15, mem_bandwidth=1e18, launch_overhead=launch)
    assert t.coeff(launch) == 5


def test_an_unknown_variant_is_not_a_kernel():
    with pytest.raises(AssertionError):
        Kernel.make(Family.NORM, Dtype.FP16, Pass.FWD, "fast", tokens=1, hidden=1, rms=1)


def test_a_sample_row_with_an_unknown_variant_names_it():
    row = {"key": "k", "family": "norm", "pass": "fwd", "variant": "turbo", "dtype": "fp16", "tokens": "8",
           "hidden": "64", "rms": "1", "time_s": "1e-5"}
    with pytest.raises(ValueError, match="variant 'turbo'"):
        dataset.kernel_of(row)
    row["variant"] = "unfused"
    assert dataset.kernel_of(row).variant == "unfused"


def test_variant_one_hots_are_features_of_their_family(cpu):
    names = features.FEATURES["norm"]
    assert "is_unfused" in names
    fused, _ = features.kernel_row(_norm(Fusion.FUSED, Pass.FWD, 1024, 1024), cpu)
    unfused, _ = features.kernel_row(_norm(Fusion.UNFUSED, Pass.FWD, 1024, 1024), cpu)
    i = names.index("is_unfused")
    assert (fused[i], unfused[i]) == (0.0, 1.0)
    assert unfused[names.index("log_launch_frac")] > fused[names.index("log_launch_frac")]
