"""Scoring: error sign, metric round trip of a prediction, aggregates and attribution."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.validate.mapping import Mapped, map_measurement
from llmp.validate.metrics import step_time
from llmp.validate.rows import group_measurements, read_csv
from llmp.validate.score import Report, Scored, attribution, score, summarize
from tests.validate import published_rows as P


@pytest.fixture(scope="module")
def mapped(tmp_path_factory) -> Mapped:
    path = tmp_path_factory.mktemp("rows") / "sc21.csv"
    path.write_text(P.SC21_1P7B, encoding="utf-8")
    result = map_measurement(group_measurements(read_csv(path))[0])
    assert isinstance(result, Mapped)
    return result


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
    assert step_time(mapped.metric, s.predicted_metric, mapped.context) == pytest.approx(predicted, rel=1e-12)


def test_a_real_prediction_is_scored(mapped):
    s = score(mapped)
    assert isinstance(s, Scored)
    assert s.predicted_s > 0
    assert sum(s.breakdown.values()) == pytest.approx(s.predicted_s, rel=1e-6)
    assert s.to_dict()["error"] == pytest.approx(s.predicted_s / s.measured_s - 1)


def test_summaries_and_worst_rows(mapped):
    rows = [Scored(mapped=dataclasses.replace(mapped, measured_s=10.0), predicted_s=p, breakdown={})
            for p in (9.0, 10.5, 13.0)]
    stats = summarize(rows)
    assert stats.rows == 3
    assert stats.mape == pytest.approx((0.1 + 0.05 + 0.3) / 3)
    assert stats.median == pytest.approx(0.1)
    assert stats.max == pytest.approx(0.3)
    assert stats.bias == pytest.approx((-0.1 + 0.05 + 0.3) / 3)
    report = Report(rows=tuple(rows), skipped=())
    assert report.worst(1)[0].predicted_s == 13.0
    assert report.by_source["megatron-sc21-table1"].rows == 3


def test_attribution_finds_the_category_the_error_follows(mapped):
    # Rows whose error grows with their share of "dp" time, and a "gemm" share that is constant.
    rows = []
    for share in (0.1, 0.2, 0.3, 0.4):
        predicted = 10.0
        rows.append(Scored(mapped=dataclasses.replace(mapped, measured_s=predicted / (1 - share)),
                           predicted_s=predicted, breakdown={"dp": share * predicted, "gemm": 5.0}))
    found = {a.category: a for a in attribution(rows)}
    assert found["dp"].correlation == pytest.approx(-1.0, abs=0.05)
    assert found["dp"].mean_share == pytest.approx(0.25)
    assert found["gemm"].correlation is None  # constant share says nothing
