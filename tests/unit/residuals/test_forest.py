"""The numpy forest equals XGBoost's own predictions; the UBJSON reader is strict."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xgboost

from llmp.errors import ResidualSchemaError
from llmp.residuals.forest import Forest, read_ubj


def _fit(seed: int, depth: int, n_features: int = 6, rows: int = 200, **params) -> xgboost.XGBRegressor:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, n_features))
    y = np.sin(X[:, 0] * 2) + X[:, 1] ** 2 - (X[:, 2] > 0.3) + rng.normal(0, 0.05, rows)
    params = {"n_estimators": 30, "max_depth": depth, "learning_rate": 0.3, "n_jobs": 1, "random_state": seed,
              **params}
    return xgboost.XGBRegressor(**params).fit(X, y)


@pytest.mark.parametrize(("seed", "depth", "params"), [
    (0, 1, {}), (1, 3, {}), (2, 6, {}), (3, 4, {"monotone_constraints": (1, 0, -1, 0, 0, 0)}),
    (4, 5, {"base_score": 2.5}), (5, 3, {"tree_method": "exact"}),
])
def test_forest_matches_inplace_predict_with_missing_values(seed, depth, params):
    reg = _fit(seed, depth, **params)
    forest = Forest.of(reg)
    rng = np.random.default_rng(seed + 100)
    X = rng.normal(0, 2, size=(300, 6))
    X[rng.random(X.shape) < 0.15] = np.nan  # missing values take each node's default branch
    expected = reg.get_booster().inplace_predict(X)
    np.testing.assert_allclose(forest.predict(X), expected, rtol=1e-5, atol=1e-5)
    # on the training thresholds exactly: the float32 strict "<" decides
    thresholds = forest.threshold[forest.left != np.arange(len(forest.left))]
    X_edge = np.tile(thresholds[:50, None], (1, 6)).astype(np.float64)
    np.testing.assert_allclose(forest.predict(X_edge), reg.get_booster().inplace_predict(X_edge), rtol=1e-5, atol=1e-5)


def test_forest_round_trips_through_its_bytes():
    reg = _fit(7, 4)
    forest = Forest.of(reg)
    again = Forest.from_bytes(forest.raw)
    X = np.random.default_rng(0).normal(size=(40, 6))
    np.testing.assert_array_equal(forest.predict(X), again.predict(X))
    assert forest.version == xgboost.__version__
    back = forest.to_xgboost()
    np.testing.assert_allclose(back.get_booster().inplace_predict(X), forest.predict(X), rtol=1e-5, atol=1e-5)


def test_forest_checks_the_number_of_columns():
    forest = Forest.of(_fit(8, 2))
    with pytest.raises(ValueError, match="6 feature columns"):
        forest.predict(np.zeros((3, 5)))


@pytest.mark.parametrize("mangle", [
    lambda raw: raw[: len(raw) // 2],  # truncated mid-file
    lambda raw: raw[:-1],  # last byte lost
    lambda raw: b"",
    lambda raw: b"{" + b"\x00" * 40,
    lambda raw: raw + b"}",  # trailing bytes
    lambda raw: b"not a model at all",
    lambda raw: raw.replace(b"reg:squarederror", b"reg:absoluteerr"),  # same length, other objective
])
def test_damaged_model_bytes_are_refused(mangle):
    raw = Forest.of(_fit(9, 3)).raw
    with pytest.raises(ResidualSchemaError):
        Forest.from_bytes(mangle(raw))


def test_a_classifier_is_refused():
    X = np.random.default_rng(0).normal(size=(60, 3))
    clf = xgboost.XGBClassifier(n_estimators=3, max_depth=2).fit(X, (X[:, 0] > 0).astype(int))
    with pytest.raises(ResidualSchemaError, match="objective"):
        Forest.from_bytes(bytes(clf.get_booster().save_raw("ubj")))


# -- the UBJSON reader on documents of every shape ---------------------------------------------
def test_typed_and_counted_containers():
    # [$d#L 3 <3 float32>] and {#L 1 key value}: the optimised forms XGBoost writes
    floats = b"[$d#L" + struct.pack(">q", 3) + struct.pack(">3f", 1.5, -2.0, 0.25)
    doc = b"{#L" + struct.pack(">q", 1) + b"L" + struct.pack(">q", 1) + b"a" + floats
    out = read_ubj(doc)
    np.testing.assert_array_equal(out["a"], np.array([1.5, -2.0, 0.25], dtype=np.float32))
    assert read_ubj(b"[#U\x02Ni\xbai\x07") == [-70, 7]  # int8 items, a no-op 'N' before the first


def test_the_predict_path_never_imports_xgboost():
    """Cold `llmp predict` budget: xgboost (and the scikit-learn it imports) cost ~0.85 s, so a
    prediction with the shipped store must not import it."""
    code = ("import sys, llmp\n"
            "p = llmp.predict(llmp.load('examples/tiny_cpu.llmp'))\n"
            "assert not p.provenance.residuals.startswith('roofline'), p.provenance.residuals\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('xgboost', 'sklearn', 'scipy'))\n"
            "assert not bad, bad\n")
    root = Path(__file__).resolve().parents[3]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
