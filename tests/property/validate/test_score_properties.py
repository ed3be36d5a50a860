"""Scoring on generated predictions: the error's sign follows prediction against measurement, and a
predicted metric round-trips to the step time."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.validate.metrics import step_time
from llmp.validate.score import Scored


@given(predicted=st.floats(1e-3, 1e4))
def test_error_sign_follows_prediction_vs_measurement(mapped, predicted):
    s = Scored(mapped=mapped, predicted_s=predicted, breakdown={})
    assert (s.error > 0) == (s.predicted_s > s.measured_s)
    assert (s.error < 0) == (s.predicted_s < s.measured_s)
    # On the published metric (a FLOP rate here) the sign flips: slower step, lower TFLOP/s.
    assert (s.predicted_metric < 137) == (s.error > 0)


@given(predicted=st.floats(1e-3, 1e4))
def test_predicted_metric_round_trips_to_the_step_time(mapped, predicted):
    s = Scored(mapped=mapped, predicted_s=predicted, breakdown={})
    assert step_time(dataclasses.replace(mapped.reading, value=s.predicted_metric), mapped.context) == pytest.approx(
        predicted, rel=1e-12)
