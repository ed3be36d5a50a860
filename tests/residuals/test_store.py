"""The store: round trip, strict read-only loading, the correction contract, shipped defaults."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from residual_helpers import FAST_XGB, synthetic

from llmp.analytic.graph import decompose
from llmp.errors import ResidualSchemaError
from llmp.residuals import store
from llmp.residuals.model import ResidualModel

FAMILIES = ("gemm", "norm", "elementwise", "copy")


@pytest.fixture(scope="module")
def fitted(cpu, tmp_path_factory):
    model = ResidualModel(xgb_params=FAST_XGB, n_members=2).fit(synthetic(cpu, FAMILIES, 40))
    path = tmp_path_factory.mktemp("store")
    store.save(model, path, devices=[cpu], samples=["synthetic"])
    return model, path


def _copy(path, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(path, dst)
    return dst


def test_round_trip_predicts_the_same(fitted, cpu):
    model, path = fitted
    loaded = store.load(path)
    items = [o.item for o in synthetic(cpu, FAMILIES, 5, seed=11)]
    a, b = model.predict(items, cpu), loaded.predict(items, cpu)
    np.testing.assert_allclose(a.log_factor, b.log_factor, rtol=1e-6)
    np.testing.assert_allclose(a.spread, b.spread, rtol=1e-6)
    manifest = loaded.manifest
    assert manifest["hardware"][0]["id"] == "cpu" and manifest["seed"] == 0
    assert {g["key"]["family"] for g in manifest["groups"]} == set(FAMILIES)
    assert all(g["cv"]["mape"] >= 0 for g in manifest["groups"])
    for rel in ["manifest.json", *(g["file"] for g in manifest["groups"])]:
        assert (path / rel).is_file()


@pytest.mark.parametrize(("field", "value", "match"), [
    ("format_version", 99, "format_version"),
    ("schema_version", 0, "schema_version"),
    ("target", "raw", "target"),
    ("xgboost", "99.0.0", "xgboost"),
])
def test_tampered_manifest_is_refused(fitted, tmp_path, field, value, match):
    path = _copy(fitted[1], tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest[field] = value
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ResidualSchemaError, match=match):
        store.load(path)


def test_feature_schema_mismatch_is_refused(fitted, tmp_path):
    path = _copy(fitted[1], tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["features"]["gemm"] = manifest["features"]["gemm"][::-1]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ResidualSchemaError, match="feature schema of 'gemm'"):
        store.load(path)


def test_missing_files_are_refused(fitted, tmp_path):
    path = _copy(fitted[1], tmp_path)
    (path / "groups" / "0.ubj").unlink()
    with pytest.raises(ResidualSchemaError, match="group file groups/0.ubj is missing"):
        store.load(path)
    (path / "manifest.json").unlink()
    with pytest.raises(ResidualSchemaError, match="manifest.json is missing"):
        store.load(path)
    with pytest.raises(ResidualSchemaError, match="no such directory"):
        store.load(tmp_path / "nowhere")


def test_loading_never_writes(fitted, tmp_path):
    path = _copy(fitted[1], tmp_path)
    before = {p: p.stat().st_mtime_ns for p in path.rglob("*")}
    store.load(path)
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*")} == before


def test_correct_follows_the_composer_contract(fitted, gpt_spec):
    res = store.load(fitted[1])
    items = [op.work for op in decompose(gpt_spec).ops]
    corr = res.correct(items, gpt_spec).check(len(items))
    families = [op.family for op in decompose(gpt_spec).ops]
    for fam, covered, factor, low, high in zip(families, corr.covered, corr.factor, corr.low, corr.high):
        assert covered == (fam in FAMILIES)
        if not covered:  # families without a model: factor 1, flagged
            assert factor == low == high == 1.0
    assert res.out_of_domain(items, gpt_spec).shape == (len(items),)


@settings(max_examples=15)
@given(hidden=st.sampled_from([64, 128, 192, 256]), layers=st.integers(1, 4), seq=st.sampled_from([32, 64, 128]),
       micro=st.integers(1, 4))
def test_factor_positive_and_band_contains_point(fitted, hidden, layers, seq, micro):
    from llmp import dsl

    text = ('use "cpu_host"\ncluster c { node = cpu_host  nodes = 1 }\n'
            f"model m {{ arch = gpt  layers = {layers}  hidden = {hidden}  heads = 4  vocab = 512  seq_len = {seq} }}\n"
            f"train {{ precision = fp32  global_batch = {micro}  micro_batch = {micro} }}\n")
    spec = dsl.loads(text)
    corr = store.load(fitted[1]).correct([op.work for op in decompose(spec).ops], spec)
    assert np.all(corr.factor > 0)
    assert np.all(corr.low <= corr.factor) and np.all(corr.factor <= corr.high)


def test_default_for_unknown_device_is_none():
    assert store.default_for("no_such_device") is None
    assert store.default_path("h100_sxm5_80gb").parts[-2:] == ("defaults", "h100_sxm5_80gb")


def test_shipped_cpu_defaults_match_the_catalog():
    """The shipped CPU store was fit against today's catalog numbers (refit it when they change:
    ``python benchmarks/residuals_cpu.py --ship``), covers every kernel family and stays small."""
    from llmp.residuals import dataset, design

    res = store.default_for("cpu")
    assert res is not None
    assert set(res.families()) == set(design.FAMILIES)
    recorded = {h["id"]: h["sha256"] for h in res.manifest["hardware"]}
    assert recorded["cpu"] == store.device_fingerprint(dataset.catalog_node("cpu").gpu)["sha256"]
    size = sum(p.stat().st_size for p in store.default_path("cpu").rglob("*") if p.is_file())
    assert size < 2e6
