"""Operator-level scores: per family, operator and pass, beside the roofline, rows counted."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from residual_helpers import TINY_STORE, synthetic

from llmp.errors import InputError, ResidualSchemaError
from llmp.residuals import features, score, store
from llmp.residuals.model import stratum_of

FAMILIES = ("norm", "elementwise")


@pytest.fixture(scope="module")
def fitted():
    """The committed tiny store (it has groups for FAMILIES): these tests score a store, not fit one."""
    return store.load(TINY_STORE)


def test_scores_per_family_operator_and_pass(fitted, cpu):
    obs = synthetic(cpu, FAMILIES, 60, seed=9)
    result = score.score(obs, fitted)
    overall = result.overall()
    assert overall.n == len(obs) == overall.covered and result.skipped == 0
    for grouping in ("family", "operator", "pass"):
        rows = [r for r in result.rows if r.grouping == grouping]
        assert sum(r.n for r in rows) == len(obs)
    names = {r.name for r in result.rows if r.grouping == "operator"}
    assert {"norm", "elementwise/gelu", "elementwise/rotary"} <= names
    # the numbers are the errors of the predictions, recomputed here from the store directly
    gelu = [o for o in obs if stratum_of(o.item)[:2] == ("elementwise", "gelu")]
    pred = fitted.predict([o.item for o in gelu], cpu)
    t_roof = np.array([features.roofline_seconds(o.item, cpu)[1] for o in gelu])
    measured = np.array([o.seconds for o in gelu])
    row = next(r for r in result.rows if r.name == "elementwise/gelu")
    assert row.n == len(gelu)
    assert row.store.mape == pytest.approx(np.mean(np.abs(t_roof * np.exp(pred.log_factor) / measured - 1)))
    assert row.roofline.mape == pytest.approx(np.mean(np.abs(t_roof / measured - 1)))
    assert overall.store.mape < overall.roofline.mape / 2  # the synthetic truth is far from the roofline
    d = result.to_dict()
    assert d["overall"]["n"] == len(obs) and {"family", "operator", "pass"} <= set(d)
    assert "per operator" in result.to_table()


def test_none_scores_the_roofline_alone(cpu):
    obs = synthetic(cpu, ("norm",), 20)
    overall = score.score(obs, "none").overall()
    assert overall.store == overall.roofline and overall.covered == 0


def test_a_store_is_scored_only_on_devices_it_serves(fitted, cpu):
    other = dataclasses.replace(cpu, id="cpu_b", mem_bandwidth=2 * cpu.mem_bandwidth)
    with pytest.raises(ResidualSchemaError, match="not for 'cpu_b'"):
        score.score(synthetic(other, ("norm",), 10), fitted)


def test_out_of_domain_rows_are_counted(fitted, cpu):
    big = dataclasses.replace(cpu, mem_bandwidth=cpu.mem_bandwidth * 1000, id="cpu")  # out of the fitted range
    obs = synthetic(cpu, ("norm",), 10)
    moved = [dataclasses.replace(o, device=big) for o in obs]
    cross = dataclasses.replace(fitted, manifest={**fitted.manifest, "serves": "any"})
    assert score.score(moved, cross).overall().out_of_domain == len(obs)
    assert score.score(obs, cross).overall().out_of_domain < len(obs)


def test_no_samples_is_an_input_error():
    with pytest.raises(InputError, match="no samples"):
        score.score([], "none")
