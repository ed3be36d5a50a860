"""Few-sample adaptation: active choice per (operator, pass), adjustments that never touch a stratum
they had no samples of, k samples fix a shifted device, continued boosting."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from residual_helpers import FAST_XGB, TINY_STORE, synthetic

from llmp.errors import InputError
from llmp.residuals import adapt, features, saving, store
from llmp.residuals.model import ResidualModel, stratum_of

FAMILIES = ("norm", "copy")


@pytest.fixture(scope="module")
def base():
    """The committed tiny store (it has groups for FAMILIES and bootstrap members for a spread):
    these tests adapt a store, not fit one."""
    return store.load(TINY_STORE)


@pytest.fixture(scope="module")
def other(cpu):
    """A different device: faster memory and a different efficiency (log-ratio shift)."""
    return dataclasses.replace(cpu, id="cpu_b", name="another CPU", mem_bandwidth=2 * cpu.mem_bandwidth)


def _errors(res, obs, device):
    pred = res.predict([o.item for o in obs], device)
    truth = np.array([np.log(o.seconds / features.roofline_seconds(o.item, device)[1]) for o in obs])
    return np.abs(np.exp(pred.log_factor - truth) - 1)


def _mape(res, obs, device):
    return float(np.mean(_errors(res, obs, device)))


def test_select_active_picks_k_per_operator_and_pass(base, cpu):
    pool = [o.item for o in synthetic(cpu, FAMILIES, 40, seed=4)]
    chosen = adapt.select_active(base, pool, cpu, 5)
    assert len(chosen) == len(set(chosen.tolist()))
    available = Counter(stratum_of(it) for it in pool)
    picked = Counter(stratum_of(pool[i]) for i in chosen)
    assert set(available) == {("norm", "", "fwd", "fp32"), ("norm", "", "bwd", "fp32"), ("copy", "", "fwd", "fp32")}
    assert picked == {s: min(5, n) for s, n in available.items()}
    assert {stratum_of(pool[i]) for i in chosen[:len(available)]} == set(available)  # one of each first
    spread = base.predict(pool, cpu, spread=True).spread
    for s in available:  # each stratum's first pick is its most uncertain pick
        mine = [i for i in chosen if stratum_of(pool[i]) == s]
        assert spread[mine[0]] == spread[mine].max()


def test_select_active_takes_everything_of_a_small_stratum_and_refuses_no_budget(base, cpu):
    pool = [o.item for o in synthetic(cpu, ("copy",), 3, seed=5)]
    assert sorted(adapt.select_active(base, pool, cpu, 10).tolist()) == [0, 1, 2]
    with pytest.raises(InputError, match="positive"):
        adapt.select_active(base, pool, cpu, 0)


def test_k_samples_correct_a_shifted_device(base, other, tmp_path):
    pool = synthetic(other, FAMILIES, 40, seed=1, shift=0.5)
    test = synthetic(other, FAMILIES, 30, seed=2, shift=0.5)
    before = _mape(base, test, other)
    result = adapt.adapt(base, pool, 5)
    assert set(result.adjustments) == {("norm", "", "fwd", "fp32"), ("norm", "", "bwd", "fp32"),
                                       ("copy", "", "fwd", "fp32")}
    assert all(a.n == 5 and 0.2 < a.offset < 0.8 for a in result.adjustments.values())
    assert len(result.chosen) + len(result.unused) == len(pool)
    assert result.strata[("copy", "", "fwd", "fp32")] == (5, 40)
    saving.save(base.model, tmp_path, devices=[other], adjustments=result.adjustments)
    adapted = store.load(tmp_path)
    assert adapted.serves == ("cpu_b",) and adapted.adjustments.keys() == result.adjustments.keys()
    for key, a in result.adjustments.items():  # written with manifest.DIGITS significant digits
        b = adapted.adjustments[key]
        assert (b.feature, b.n) == (a.feature, a.n)
        assert (b.offset, b.slope, b.center, b.q) == pytest.approx((a.offset, a.slope, a.center, a.q), rel=1e-11)
    after = _mape(adapted, test, other)
    assert before > 0.3 and after < before / 2


# -- the GELU failure mode --------------------------------------------------------------------
def _rotary_bwd(kernel) -> float:
    """The new device runs the RoPE backward kernel 4.5x slower than the base predicts, and every
    other elementwise operator as the base predicts."""
    return 1.5 if (kernel.variant, str(kernel.pass_)) == ("rotary", "bwd") else 0.0


@pytest.fixture(scope="module")
def elementwise_base(cpu, tmp_path_factory):
    model = ResidualModel(xgb_params=FAST_XGB).fit(synthetic(cpu, ("elementwise",), 300, seed=3))
    path = tmp_path_factory.mktemp("ew")
    saving.save(model, path, devices=[cpu])
    return store.load(path)


def test_a_family_wide_correction_fitted_on_rope_backward_wrecks_gelu(elementwise_base, other):
    """Reproduces the failure the per-stratum adjustments fix: five RoPE-backward samples (all an
    active choice by family made) move every elementwise operator, and GELU's error explodes."""
    pool = synthetic(other, ("elementwise",), 400, seed=1, shift=_rotary_bwd)
    test = synthetic(other, ("elementwise",), 300, seed=2, shift=_rotary_bwd)
    gelu = [o for o in test if o.item.variant == "gelu"]
    rope_picks = [o for o in pool if stratum_of(o.item) == ("elementwise", "rotary", "bwd", "fp32")][:5]
    (line,) = adapt.fit_adjustments(elementwise_base, rope_picks).values()
    everywhere = {("elementwise", v, p, "fp32"): line for v in ("gelu", "swiglu", "relu", "add", "dropout", "rotary")
                  for p in ("fwd", "bwd")}
    family_wide = dataclasses.replace(elementwise_base, adjustments=everywhere)
    base_gelu = _mape(elementwise_base, gelu, other)
    assert base_gelu < 0.3
    assert _mape(family_wide, gelu, other) > 1.5 > 3 * base_gelu


def test_adapting_never_touches_a_stratum_it_had_no_samples_of(elementwise_base, other):
    pool = synthetic(other, ("elementwise",), 400, seed=1, shift=_rotary_bwd)
    test = synthetic(other, ("elementwise",), 300, seed=2, shift=_rotary_bwd)
    rope_only = [o for o in pool if stratum_of(o.item) == ("elementwise", "rotary", "bwd", "fp32")]
    result = adapt.adapt(elementwise_base, rope_only, 5)
    assert set(result.adjustments) == {("elementwise", "rotary", "bwd", "fp32")}
    adapted = dataclasses.replace(elementwise_base, adjustments=result.adjustments)
    others = [o for o in test if stratum_of(o.item) != ("elementwise", "rotary", "bwd", "fp32")]
    rope = [o for o in test if stratum_of(o.item) == ("elementwise", "rotary", "bwd", "fp32")]
    np.testing.assert_array_equal(adapted.predict([o.item for o in others], other).log_factor,
                                  elementwise_base.predict([o.item for o in others], other).log_factor)
    assert _mape(adapted, rope, other) < _mape(elementwise_base, rope, other) / 3


def test_adapting_with_a_budget_per_stratum_fixes_rope_and_keeps_gelu(elementwise_base, other):
    pool = synthetic(other, ("elementwise",), 400, seed=1, shift=_rotary_bwd)
    test = synthetic(other, ("elementwise",), 300, seed=2, shift=_rotary_bwd)
    result = adapt.adapt(elementwise_base, pool, 5)
    assert len(result.adjustments) == 12 and all(a.n == 5 for a in result.adjustments.values())
    adapted = dataclasses.replace(elementwise_base, adjustments=result.adjustments)
    for stratum in result.adjustments:
        rows = [o for o in test if stratum_of(o.item) == stratum]
        before, after = _mape(elementwise_base, rows, other), _mape(adapted, rows, other)
        if stratum == ("elementwise", "rotary", "bwd", "fp32"):
            assert after < before / 3
        else:  # five samples of an unshifted operator move it by noise at most
            assert after <= before + 0.05, (stratum, before, after)


def test_adaptation_samples_must_come_from_one_device(base, cpu, other):
    mixed = synthetic(cpu, ("copy",), 5) + synthetic(other, ("copy",), 5)
    with pytest.raises(InputError, match="one device"):
        adapt.adapt(base, mixed, 3)


def test_continue_boosting_learns_the_new_device(base, other):
    pool = synthetic(other, FAMILIES, 40, seed=1, shift=0.5)
    test = synthetic(other, FAMILIES, 30, seed=2, shift=0.5)
    boosted = adapt.continue_boosting(base.model, pool, rounds=30)
    pred = boosted.predict([o.item for o in test], other)
    truth = np.array([np.log(o.seconds / features.roofline_seconds(o.item, other)[1]) for o in test])
    assert np.mean(np.abs(np.exp(pred.log_factor - truth) - 1)) < _mape(base, test, other) / 2


def test_a_stratum_the_base_never_modelled_is_adapted_from_the_roofline(elementwise_base, other):
    """A new device measured for an operator the store has no model of (here: norms on an
    elementwise-only store): its few samples correct the bare roofline instead of being dropped."""
    pool = synthetic(other, ("norm",), 200, seed=1, shift=0.8)
    test = synthetic(other, ("norm",), 100, seed=2, shift=0.8)
    assert not elementwise_base.predict([o.item for o in test], other).has_model.any()
    result = adapt.adapt(elementwise_base, pool, 5)
    assert {s[0] for s in result.adjustments} == {"norm"}
    adapted = dataclasses.replace(elementwise_base, adjustments=result.adjustments)
    pred = adapted.predict([o.item for o in test], other)
    assert pred.has_model.all() and not pred.in_domain.any() and (pred.q > 0).all()
    roof = np.mean(np.abs(np.asarray([features.roofline_seconds(o.item, other)[1] / o.seconds for o in test]) - 1))
    assert _mape(adapted, test, other) < 0.85 * roof
