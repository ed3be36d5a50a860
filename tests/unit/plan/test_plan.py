"""A whole run: scaling in tokens, the band carried to every total, the deadline search, bad input."""

from __future__ import annotations

import itertools
import math

import pytest

import llmp
from llmp.errors import InfeasibleError, LlmpError
from llmp.planning import considered_counts, plan
from llmp.planning.report import DAY, RunnerUp


def test_public_api_is_registered():
    assert llmp.plan is plan  # the package is llmp.planning, so importing it cannot shadow the function
    assert "plan" in llmp.__all__


def test_totals_follow_from_the_step(on8):
    c = on8.chosen
    steps = 100e9 / c.tokens_per_step
    assert on8.days[0] == pytest.approx(steps * c.step_time_s / DAY)
    assert on8.gpu_hours[0] == pytest.approx(8 * steps * c.step_time_s / 3600)
    assert on8.energy_kwh[0] == pytest.approx(on8.gpu_hours[0] * on8.power.watts / 1000)
    assert on8.cost[0] == pytest.approx(on8.gpu_hours[0] * 2.5)
    assert on8.power.watts == 700.0  # the H100 SXM's TDP under the default model


def test_the_step_band_carries_to_every_total(on8):
    low, high = on8.chosen.step_band_s
    point = on8.chosen.step_time_s
    assert low <= point <= high and low < high  # the shipped H100 residual store gives a band
    for total in (on8.days, on8.gpu_hours, on8.energy_kwh, on8.cost):
        assert total[1] <= total[0] <= total[2]
        assert total[1] / total[0] == pytest.approx(low / point)
        assert total[2] / total[0] == pytest.approx(high / point)


def test_the_layout_and_the_step_do_not_depend_on_the_token_count(small_spec):
    a = plan(small_spec, tokens="10B", gpus=8, residuals=None)
    b = plan(small_spec, tokens="30B", gpus=8, residuals=None)
    assert a.chosen == b.chosen
    assert b.days[0] == pytest.approx(3 * a.days[0])


def test_more_gpus_train_faster_while_data_parallelism_can_grow(small_spec):
    # With the global batch kept (64 sequences), doubling the GPUs can double dp up to 64; the
    # best layout's days fall at every doubling here. Not a law: a fixed batch, memory and the
    # residual corrections can make a larger count no faster (the plan reports what it finds).
    days = [plan(small_spec, tokens="10B", gpus=n, residuals=None).days[0] for n in (8, 16, 32)]
    assert all(b < a for a, b in itertools.pairwise(days))


def test_the_deadline_gets_the_smallest_feasible_count_considered(small_spec):
    by_count = {n: plan(small_spec, tokens="100B", gpus=n).days[0] for n in (8, 16)}
    deadline = (by_count[16] + by_count[8]) / 2  # 16 GPUs finish in time, 8 do not
    assert by_count[16] < deadline < by_count[8]
    result = plan(small_spec, tokens="100B", deadline=deadline * DAY)
    assert result.mode == "deadline" and result.meets_deadline
    assert result.gpus == 16
    assert result.days[0] == pytest.approx(by_count[16])
    below = [n for n in result.considered if n < result.gpus]
    for n in below:  # every smaller count considered misses the deadline, or has no layout
        try:
            assert plan(small_spec, tokens="100B", gpus=n).days[0] > deadline
        except InfeasibleError:
            assert n in result.unlayable or n not in [e.gpus for e in result.scanned]
    assert [e.gpus for e in result.scanned][-1] == 16


def test_the_compute_lower_bound_is_below_the_answer(small_spec):
    result = plan(small_spec, tokens="100B", deadline="5d")
    assert result.meets_deadline
    note = next(n for n in result.notes if n.startswith("deadline search"))
    lower = float(note.split("compute lower bound ")[1].split(" GPUs")[0].replace(",", ""))
    assert lower <= result.gpus
    assert result.chosen.mfu < 1.0


def test_considered_counts():
    assert considered_counts(8, 200) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192]
    counts = considered_counts(8, 10**6)
    assert all(b > a for a, b in itertools.pairwise(counts))
    assert all(b / a <= 2.0 for a, b in itertools.pairwise(counts))
    assert all(b / a <= 1.25 + 1e-9 for a, b in itertools.pairwise(counts) if a >= 32)


def test_an_unreachable_deadline_is_an_error_before_any_search(small_spec):
    with pytest.raises(InfeasibleError) as info:
        plan(small_spec, tokens="15T", deadline="1h")
    assert "at least" in info.value.message and "global batch" in info.value.message


def test_a_deadline_beyond_max_gpus_names_the_fastest(small_spec):
    fastest16 = plan(small_spec, tokens="100B", gpus=16).days[0]
    with pytest.raises(InfeasibleError) as info:
        plan(small_spec, tokens="100B", deadline=0.9 * fastest16 * DAY, max_gpus=16)
    assert "the fastest was" in info.value.message and "on 16 GPUs" in info.value.message
    assert "--max-gpus" in info.value.hint


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"tokens": 0}, "positive"),
    ({"tokens": "-3T"}, "token"),
    ({"tokens": "15TB"}, "token count"),
    ({"tokens": "1T", "gpus": 8, "deadline": "3d"}, "not both"),
    ({"tokens": "1T", "deadline": "30 days"}, "duration"),
    ({"tokens": "1T", "deadline": "0d"}, "positive"),
    ({"tokens": "1T", "gpus": 0}, "positive whole number"),
    ({"tokens": "1T", "gpus": 12}, "whole nodes"),
    ({"tokens": "1T", "price_per_gpu_hour": -1.0}, "price"),
    ({"tokens": "1T", "price_per_gpu_hour": math.nan}, "price"),
    ({"tokens": "1T", "power_model": "utilisation"}, "idle"),
    ({"tokens": "1T", "power_model": "watts"}, "power model"),
    ({"tokens": "1T", "idle_fraction": 0.1}, "utilisation"),
    ({"tokens": "1T", "power_model": "utilisation", "idle_fraction": 1.5}, "between 0 and 1"),
])
def test_bad_input_is_a_clear_error(small_spec, kwargs, needle):
    with pytest.raises(LlmpError) as info:
        plan(small_spec, **kwargs)
    assert needle in info.value.message


def test_utilisation_power_is_between_idle_and_tdp(small_spec):
    result = plan(small_spec, tokens="100B", gpus=16, power_model="utilisation", idle_fraction=0.1)
    p = result.power
    assert 0.0 < p.busy <= 1.0
    assert 70.0 <= p.watts <= 700.0
    assert p.watts == pytest.approx(70.0 + 630.0 * p.busy)
    tdp = plan(small_spec, tokens="100B", gpus=16)
    assert result.energy_kwh[0] <= tdp.energy_kwh[0]


def test_no_layout_is_an_infeasible_error(small_spec):
    with pytest.raises(InfeasibleError):
        plan(small_spec, tokens="1T", gpus=8, sets=["gpu.memory=2GiB"])  # no layout fits


def test_the_runner_up_says_whether_the_bands_can_choose(on8):
    r = on8.runner_up
    assert r is not None and r.overrides != on8.chosen.overrides
    low, high = on8.chosen.step_band_s
    inside = low <= r.step_time_s <= high or r.step_band_s[0] <= on8.chosen.step_time_s <= r.step_band_s[1]
    assert r.indistinguishable is inside
    again = llmp.predict(llmp.load(on8.source, r.overrides))
    assert again.step_time_s == pytest.approx(r.step_time_s, rel=1e-9)
    assert on8.to_dict()["runner_up"]["indistinguishable"] is inside
    assert "runner-up" in on8.to_table()


def test_the_runner_up_verdict_follows_the_bands(on8):
    chosen = on8.chosen
    high = chosen.step_band_s[1]
    assert RunnerUp.of(chosen, ("x=1",), high * 0.999, (high * 0.99, high * 2)).indistinguishable
    assert not RunnerUp.of(chosen, ("x=1",), high * 1.5, (high * 1.01, high * 2)).indistinguishable
    assert RunnerUp.of(chosen, ("x=1",), high * 1.5, (chosen.step_time_s * 0.99, high * 2)).indistinguishable
