"""Few-sample adaptation: active choice of samples, and k samples fix a shifted device."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from residual_helpers import FAST_XGB, synthetic

from llmp.residuals import adapt, features, store
from llmp.residuals.model import ResidualModel

FAMILIES = ("norm", "copy")


@pytest.fixture(scope="module")
def base(cpu, tmp_path_factory):
    model = ResidualModel(xgb_params=FAST_XGB, n_members=3).fit(synthetic(cpu, FAMILIES, 50))
    path = tmp_path_factory.mktemp("base")
    store.save(model, path, devices=[cpu])
    return store.load(path)


@pytest.fixture(scope="module")
def other(cpu):
    """A different device: faster memory and a different efficiency (log-ratio shift +0.5)."""
    return dataclasses.replace(cpu, id="cpu_b", name="another CPU", mem_bandwidth=2 * cpu.mem_bandwidth)


def _mape(res, obs, device):
    pred = res.predict([o.item for o in obs], device)
    truth = np.array([np.log(o.seconds / features.roofline_seconds(o.item, device)[1]) for o in obs])
    return float(np.mean(np.abs(np.exp(pred.log_factor - truth) - 1)))


def test_select_active_picks_k_distinct_per_family(base, cpu):
    pool = [o.item for o in synthetic(cpu, FAMILIES, 40, seed=4)]
    chosen = adapt.select_active(base, pool, cpu, 5)
    assert len(chosen) == len(set(chosen.tolist())) == 10
    fams = [features.family_of(pool[i]) for i in chosen]
    assert sorted(fams) == sorted(["norm"] * 5 + ["copy"] * 5)
    pred = base.predict(pool, cpu)
    for fam in FAMILIES:  # the largest uncertainty of each family is among the picks (ties are common)
        idx = [i for i, it in enumerate(pool) if features.family_of(it) == fam]
        picked = [i for i in chosen if i in idx]
        assert pred.spread[picked].max() == pred.spread[idx].max()


def test_k_samples_correct_a_shifted_device(base, other, tmp_path):
    pool = synthetic(other, FAMILIES, 40, seed=1, shift=0.5)
    test = synthetic(other, FAMILIES, 30, seed=2, shift=0.5)
    before = _mape(base, test, other)
    chosen = adapt.select_active(base, [o.item for o in pool], other, 10)
    adjustments = adapt.fit_adjustments(base, [pool[i] for i in chosen])
    assert set(adjustments) == set(FAMILIES)
    assert all(a.n == 10 and 0.2 < a.offset < 0.8 for a in adjustments.values())
    store.save(base.model, tmp_path, devices=[other], adjustments=adjustments)
    adapted = store.load(tmp_path)
    after = _mape(adapted, test, other)
    assert before > 0.3 and after < before / 2


def test_continue_boosting_learns_the_new_device(base, other):
    pool = synthetic(other, FAMILIES, 40, seed=1, shift=0.5)
    test = synthetic(other, FAMILIES, 30, seed=2, shift=0.5)
    boosted = adapt.continue_boosting(base.model, pool, rounds=30)
    pred = boosted.predict([o.item for o in test], other)
    truth = np.array([np.log(o.seconds / features.roofline_seconds(o.item, other)[1]) for o in test])
    assert np.mean(np.abs(np.exp(pred.log_factor - truth) - 1)) < _mape(base, test, other) / 2
