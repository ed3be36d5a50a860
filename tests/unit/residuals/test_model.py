"""ResidualModel: sklearn conventions, learning a known target, calibrated bands."""

from __future__ import annotations

import numpy as np
import pytest
from residual_helpers import FAST_XGB, synthetic

from llmp.analytic.kernels import Family, Kernel
from llmp.errors import InputError, NotFittedError
from llmp.hardware.spec import Dtype
from llmp.residuals.model import ResidualModel


def test_not_fitted_before_fit(cpu):
    model = ResidualModel()
    assert not hasattr(model, "models_")
    k = Kernel.make(Family.COPY, Dtype.FP32, elements=1024)
    with pytest.raises(NotFittedError):
        model.predict([k], cpu)


def test_init_only_stores_and_fit_validates(cpu):
    model = ResidualModel(target="raw_time")  # accepted at construction (sklearn convention)
    with pytest.raises(InputError, match="target"):
        model.fit(synthetic(cpu, ("copy",), 10))
    with pytest.raises(InputError, match="group_by"):
        ResidualModel(group_by=("dtype",)).fit(synthetic(cpu, ("copy",), 10))


def test_learns_a_known_log_ratio(cpu):
    obs = synthetic(cpu, ("norm", "copy"), 60)
    model = ResidualModel(xgb_params=FAST_XGB).fit(obs)
    assert set(model.n_samples_per_group_.values()) == {60}
    for key, err in model.cv_error_.items():
        assert err["mape"] < 0.08, (key, err)  # noise is 2%, the target is smooth
        assert model.conformal_q_[key] > 0
    test = synthetic(cpu, ("norm",), 20, seed=9)
    pred = model.predict([o.item for o in test], cpu)
    from llmp.residuals import features

    truth = np.array([np.log(o.seconds / features.roofline_seconds(o.item, cpu)[1]) for o in test])
    assert np.mean(np.abs(np.exp(pred.log_factor - truth) - 1)) < 0.1
    assert pred.has_model.all()


def test_band_covers_most_held_out_points(cpu):
    model = ResidualModel(xgb_params=FAST_XGB, alpha=0.2).fit(synthetic(cpu, ("copy",), 80, noise=0.1))
    test = synthetic(cpu, ("copy",), 80, seed=5, noise=0.1)
    from llmp.residuals import features

    pred = model.predict([o.item for o in test], cpu)
    truth = np.array([np.log(o.seconds / features.roofline_seconds(o.item, cpu)[1]) for o in test])
    inside = np.abs(truth - pred.log_factor) <= pred.q
    assert inside.mean() >= 0.65  # nominal 0.8; finite-sample slack


def test_groups_without_enough_samples_get_no_model(cpu):
    model = ResidualModel(xgb_params=FAST_XGB).fit(synthetic(cpu, ("copy",), 30) + synthetic(cpu, ("norm",), 4))
    assert (("family", "norm"),) in model.skipped_groups_
    norm = synthetic(cpu, ("norm",), 2, seed=3)
    pred = model.predict([o.item for o in norm], cpu)
    assert not pred.has_model.any() and (pred.log_factor == 0).all()
