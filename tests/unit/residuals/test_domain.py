"""Every store knows the shapes it was fitted on, and flags (and widens) a query far from them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from residual_helpers import FAST_XGB, synthetic

from llmp.analytic.kernels import Family, Kernel, Pass
from llmp.errors import ResidualSchemaError
from llmp.hardware.spec import Dtype
from llmp.residuals import dataset, features, saving, store
from llmp.residuals.domain import Shapes, shape_features
from llmp.residuals.model import Observation, ResidualModel


def gemm(m: int, n: int, k: int, pass_: Pass = Pass.FWD) -> Kernel:
    return Kernel.make(Family.GEMM, Dtype.FP16, pass_, m=m, n=n, k=k, batch=1)


@pytest.fixture(scope="module")
def a100():
    return dataset.catalog_device("a100_sxm4_80gb")


def shapes_of(items: list[Kernel], device) -> Shapes:
    blocks, _ = features.blocks(items, device)
    block = blocks["gemm"]
    return Shapes.fitted("gemm", block.X, block.names)


def covered(shapes: Shapes, items: list[Kernel], device) -> list[bool]:
    blocks, _ = features.blocks(items, device)
    return shapes.covers(blocks["gemm"].X, blocks["gemm"].names).tolist()


def test_a_shape_within_a_factor_of_two_is_covered_one_four_times_away_is_not(a100):
    shapes = shapes_of([gemm(4096, 4096, 4096), gemm(8192, 1024, 4096)], a100)
    assert covered(shapes, [gemm(4096, 4096, 4096), gemm(3000, 6000, 5000), gemm(8192, 2048, 2048)], a100) == [
        True, True, True]
    # A narrow shard: every dim inside the measured ranges, but n = 256 is 4x from any measured n.
    assert covered(shapes, [gemm(4096, 256, 4096), gemm(1024, 4096, 4096)], a100) == [False, False]


def test_the_kind_of_kernel_must_match(a100):
    shapes = shapes_of([gemm(4096, 4096, 4096)], a100)
    assert covered(shapes, [gemm(4096, 4096, 4096, Pass.BWD)], a100) == [False]
    assert "pass_bwd" in shape_features("gemm") and "log_m" in shape_features("gemm")
    assert "is_unfused" in shape_features("norm") and "rms" in shape_features("norm")


def test_a_store_flags_and_widens_what_it_never_measured(a100, tmp_path):
    rng = np.random.default_rng(0)
    wide = [gemm(int(m), int(n), int(k)) for m, n, k in 2 ** rng.integers(11, 14, (60, 3))]
    obs = [Observation(item=k, device=a100, seconds=1.2 * features.roofline_seconds(k, a100)[1]) for k in wide]
    model = ResidualModel(xgb_params=FAST_XGB).fit(obs)
    saving.save(model, tmp_path / "s", devices=[a100])
    loaded = store.load(tmp_path / "s")

    from llmp import dsl

    spec = dsl.loads('use "dgx_a100"\ncluster c { node = dgx_a100  nodes = 1 }\n'
                     "model m { arch = gpt  layers = 2  hidden = 4096  heads = 32  vocab = 50304  seq_len = 2048 }\n"
                     "train { precision = fp16  global_batch = 8  micro_batch = 1 }\n")
    narrow, measured = gemm(2048, 128, 4096), wide[0]
    corr = loaded.correct([narrow, measured], spec)
    assert corr.covered.all() and corr.out_of_domain.tolist() == [True, False]
    q = float(loaded.model.conformal_q_[next(iter(loaded.model.conformal_q_))])
    narrow_half = np.log(corr.high[0] / corr.factor[0])
    assert narrow_half == pytest.approx(store.OUT_OF_DOMAIN_WIDEN * q)
    assert np.log(corr.high[1] / corr.factor[1]) == pytest.approx(q)


def test_shapes_survive_the_manifest_and_a_tampered_one_is_refused(a100, tmp_path):
    obs = synthetic(a100, ("gemm",), 30)
    model = ResidualModel(xgb_params=FAST_XGB).fit(obs)
    saving.save(model, tmp_path / "s", devices=[a100])
    loaded = store.load(tmp_path / "s")
    key = next(iter(model.shapes_))
    assert np.array_equal(loaded.model.shapes_[key].cells, model.shapes_[key].cells)
    path = tmp_path / "s" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["groups"][0]["shapes"]["cells"][0][0] += 0.5
    path.write_text(json.dumps(manifest))
    with pytest.raises(ResidualSchemaError, match="whole numbers"):
        store.load(tmp_path / "s")


def test_out_of_domain_the_roofline_is_served_where_the_model_failed_to_extrapolate(a100):
    rng = np.random.default_rng(1)
    wide = [gemm(int(m), int(n), int(k)) for m, n, k in 2 ** rng.integers(11, 14, (60, 3))]
    obs = [Observation(item=k, device=a100, seconds=1.2 * features.roofline_seconds(k, a100)[1]) for k in wide]
    model = ResidualModel(xgb_params=FAST_XGB).fit(obs)
    key = next(iter(model.models_))
    narrow = [gemm(64, 64, 64), gemm(2**17, 2**15, 64)]  # far below and above the measured sizes
    served = model.predict(narrow, a100)
    assert not served.in_domain.any() and np.all(served.log_factor > 0)  # a constant factor extrapolates
    failed = dict(model.extrapolation_[key], below_mape=1.0, below_roofline_mape=0.5)
    model.extrapolation_[key] = failed
    below_failed = model.predict(narrow, a100)
    assert below_failed.log_factor[0] == 0 and below_failed.log_factor[1] > 0 and below_failed.q[0] > 0
