"""The run as it really goes: failures against GPU count, Young/Daly checkpoint intervals, restarts,
facility energy. Examples of the formulas first (their properties: ``tests/property/plan/``), then the
plan that carries them."""

from __future__ import annotations

import json
import math

import pytest

import llmp
from llmp.cli import main
from llmp.errors import InputError
from llmp.planning.facility import Facility
from llmp.planning.reliability import RSC1_PER_1000_NODE_DAYS, FailureModel, expected_wall_s


def test_the_published_fit_gives_the_papers_own_projections():
    # Kokolis et al. project 1.8 h on 16,384 GPUs and 0.23 h on 131,072 from RSC-1's rate.
    model = FailureModel.published()
    assert model.mttf_s(16384)[0] / 3600 == pytest.approx(1.8, abs=0.01)
    assert model.mttf_s(131072)[0] / 3600 == pytest.approx(0.23, abs=0.01)
    assert model.rate[0] * 8 * 1000 == pytest.approx(RSC1_PER_1000_NODE_DAYS)


def test_a_given_mttf_scales_as_one_over_the_gpu_count():
    model = FailureModel.from_mttf(3 * 3600.0, 16384)
    assert model.mttf_s(16384)[0] == pytest.approx(3 * 3600.0)
    assert model.mttf_s(8192)[0] == pytest.approx(6 * 3600.0)


def test_a_bad_interval_is_an_input_error():
    with pytest.raises(InputError, match="interval"):
        expected_wall_s(1e6, 0.0, 1.0, 1.0, 1e4)


def test_facility_inputs_are_checked():
    with pytest.raises(InputError, match="PUE"):
        Facility(pue=0.9)
    with pytest.raises(InputError, match="node overhead"):
        Facility(node_overhead=math.nan)
    assert Facility(node_overhead=0.0, pue=1.0).watts_per_gpu(500.0, 700.0) == 500.0


# ---- the plan carries them ---------------------------------------------------------------


@pytest.fixture(scope="module")
def planned(small_spec):
    return llmp.plan(small_spec, tokens="300B", gpus=64)


def test_the_plan_reports_the_run_with_failures(planned):
    g = planned.goodput
    assert g.wall_s[0] >= planned.wall_s[0]
    assert planned.days_with_failures[0] >= planned.days[0]
    ettr = g.ettr
    assert 0 < ettr[1] <= ettr[0] <= ettr[2] <= 1
    assert g.failures[0] == pytest.approx(g.wall_s[0] / g.mttf_s[0])
    c = planned.chosen.checkpoint
    assert c.bytes > 0 and c.blocking_s > 0 and c.restart_s >= c.write_s


def test_energy_lies_between_idle_and_tdp_bounds(small_spec):
    idle = 0.1
    p = llmp.plan(small_spec, tokens="300B", gpus=64, power_model="utilisation", idle_fraction=idle)
    tdp = p.power.tdp_watts
    assert idle * tdp <= p.power.watts <= tdp
    gpus, hours = p.gpus, p.goodput.wall_s[0] / 3600.0
    f = p.run.facility
    low = gpus * (idle * tdp + f.node_overhead * tdp) * f.pue * hours / 1000.0
    high = gpus * (tdp + f.node_overhead * tdp) * f.pue * hours / 1000.0
    assert low <= p.facility_energy_kwh[0] <= high
    assert p.co2_tonnes[0] == pytest.approx(p.facility_energy_kwh[0] * f.grid_g_per_kwh / 1e6)


def test_a_slower_restart_lowers_the_effective_time(small_spec):
    fast = llmp.plan(small_spec, tokens="300B", gpus=64, mttf="1h")
    slow = llmp.plan(small_spec, tokens="300B", gpus=64, mttf="1h", restart="30min")
    assert slow.goodput.ettr[0] < fast.goodput.ettr[0]


def test_async_checkpoints_block_for_the_copy_to_host_and_lose_the_write_in_flight(small_spec):
    sync = llmp.plan(small_spec, tokens="300B", gpus=64, checkpoint="sync").chosen.checkpoint
    asyn = llmp.plan(small_spec, tokens="300B", gpus=64, checkpoint="async").chosen.checkpoint
    assert asyn.asynchronous and not sync.asynchronous
    assert sync.blocking_s == pytest.approx(sync.write_s)
    assert asyn.write_s == pytest.approx(sync.write_s)
    assert asyn.restart_s == pytest.approx(sync.restart_s + sync.write_s)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"mttf": "3 hours"}, "duration"),
    ({"mttf": "3h@zero"}, "GPU count"),
    ({"mttf": "3h", "deadline": "30d"}, "measured on"),
    ({"checkpoint": "sometimes"}, "checkpoint mode"),
    ({"storage_bandwidth": "2TB"}, "bandwidth"),
    ({"restart": "-1h"}, "duration"),
    ({"checkpoint_interval": "0h"}, "duration"),
    ({"pue": 0.5}, "PUE"),
    ({"grid_intensity": -1.0}, "grid intensity"),
])
def test_bad_run_inputs_are_clear_errors(small_spec, kwargs, needle):
    with pytest.raises(InputError, match=needle):
        llmp.plan(small_spec, tokens="300B", **({"gpus": 8} | kwargs if "deadline" not in kwargs else kwargs))


def test_the_json_keys_docs_plan_md_lists(capsys, small_spec):
    assert main(["plan", str(small_spec), "--tokens", "300B", "--gpus", "16", "--json", "--restart", "10min",
                 "--pue", "1.1", "--grid-intensity", "400", "--storage-bandwidth", "1TB/s"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("effective_training_time_ratio", "days_with_failures", "gpu_hours_with_failures", "failures",
                "checkpoint", "facility_energy_kwh", "co2_tonnes", "facility"):
        assert key in data
    assert data["facility"]["pue"] == 1.1
    assert data["checkpoint"]["relaunch_s"] == 600.0
    assert set(data["effective_training_time_ratio"]) == {"value", "band"}


def test_bad_run_flags_exit_1_without_a_traceback(capsys, small_spec):
    assert main(["plan", str(small_spec), "--tokens", "300B", "--mttf", "soon"]) == 1
    err = capsys.readouterr().err
    assert "cannot read a duration" in err and "Traceback" not in err
