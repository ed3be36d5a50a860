"""The committed tiny store (``tests/fixtures/tiny_store``) is what its script fits today.

Tests that need some fitted store read the committed one instead of fitting their own; this test
refits it with ``tests/fixtures/make_tiny_store.py`` and compares, so a change to the features,
the manifest format, the catalog's CPU numbers or XGBoost cannot leave those tests reading a store
this llmp would no longer write. Slow (an XGBoost fit), and it depends on the installed XGBoost,
which the default suite must not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from residual_helpers import TINY_FAMILIES, TINY_STORE, synthetic

from llmp.residuals import dataset, store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_tiny_store

BUILD = {"llmp", "xgboost", "grammar"}
"""Manifest fields naming the build that wrote the store (provenance, not content)."""
REGENERATE = "the committed tiny store is stale: PYTHONPATH=. python tests/fixtures/make_tiny_store.py"


@pytest.mark.slow  # an XGBoost fit
def test_the_script_reproduces_the_committed_store(tmp_path):
    make_tiny_store.build(tmp_path / "tiny")
    fresh, committed = (json.loads((p / "manifest.json").read_text()) for p in (tmp_path / "tiny", TINY_STORE))
    assert {k: v for k, v in fresh.items() if k not in BUILD} == \
           {k: v for k, v in committed.items() if k not in BUILD}, REGENERATE
    cpu = dataset.catalog_device("cpu")
    items = [o.item for o in synthetic(cpu, TINY_FAMILIES, 10, seed=7)]
    a = store.load(tmp_path / "tiny").predict(items, cpu, spread=True)
    b = store.load(TINY_STORE).predict(items, cpu, spread=True)
    np.testing.assert_allclose(a.log_factor, b.log_factor, rtol=1e-9, err_msg=REGENERATE)
    np.testing.assert_allclose(a.spread, b.spread, rtol=1e-9, err_msg=REGENERATE)
