"""``llmp plan`` on the command line: the JSON contract, exit codes, the plot."""

from __future__ import annotations

import json
import sys

import pytest

from llmp.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract(capsys, small_spec):
    code, out, err = run(capsys, "plan", small_spec, "--tokens", "300B", "--gpus", "16", "--price-per-gpu-hour", "2",
                         "--json")
    assert code == 0, err
    data = json.loads(out)
    for key in ("days", "gpu_hours", "energy_kwh", "cost", "step_time_s"):
        value, (low, high) = data[key]["value"], data[key]["band"]
        assert low <= value <= high
    assert data["gpus"] == 16 and data["mode"] == "gpus" and data["tokens"] == 300e9
    assert data["cost"]["value"] == pytest.approx(2 * data["gpu_hours"]["value"])
    assert data["layout"]["parallel.tp"] * data["layout"]["parallel.pp"] * data["layout"]["parallel.dp"] == 16
    assert all(s.count("=") == 1 for s in data["set"])
    assert data["power"]["model"] == "tdp" and data["power"]["watts_per_gpu"] == 700
    assert data["deadline_days"] is None and data["meets_deadline"] is None
    assert {"layouts_in_space", "layouts_checked", "layouts_evaluated"} <= set(data["search"])
    assert "kept" in data["global_batch"]


def test_json_without_a_price_has_no_cost(capsys, small_spec):
    code, out, _ = run(capsys, "plan", small_spec, "--tokens", "1e11", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["cost"] is None and data["price_per_gpu_hour"] is None
    assert data["gpus"] == 8  # the spec's own count


def test_deadline_json_lists_the_scan(capsys, small_spec):
    code, out, err = run(capsys, "plan", small_spec, "--tokens", "100B", "--deadline", "3d", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["mode"] == "deadline" and data["meets_deadline"] is True and data["deadline_days"] == 3
    assert data["scanned"][-1]["gpus"] == data["gpus"] and data["scanned"][-1]["meets_deadline"]
    assert all(not p["meets_deadline"] for p in data["scanned"][:-1])
    assert data["gpus"] in data["considered_gpus"]


def test_the_table_says_how_to_reproduce_the_step(capsys, small_spec):
    code, out, _ = run(capsys, "plan", small_spec, "--tokens", "15T")
    assert code == 0
    assert "wall clock" in out and "GPU-hours" in out and "kWh" in out
    assert f"llmp predict {small_spec} --set parallel.tp=" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["--tokens", "0"], "positive"),
    (["--tokens", "15 trillion"], "token count"),
    (["--tokens", "1T", "--deadline", "30 days"], "30d"),
    (["--tokens", "15T", "--deadline", "1h"], "no GPU count"),
    (["--tokens", "1T", "--gpus", "12"], "whole nodes"),
    (["--tokens", "1T", "--power", "utilisation"], "idle"),
])
def test_bad_input_exits_1_without_a_traceback(capsys, small_spec, argv, needle):
    code, out, err = run(capsys, "plan", small_spec, *argv)
    assert code == 1
    assert needle in err and "Traceback" not in err and out == ""


def test_usage_errors_exit_2(capsys, small_spec):
    with pytest.raises(SystemExit) as info:
        main(["plan", str(small_spec), "--tokens", "1T", "--gpus", "8", "--deadline", "3d"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["plan", str(small_spec)])
    assert info.value.code == 2


@pytest.mark.slow  # a plan search and its chart (2 s)
def test_plot_writes_a_png(capsys, small_spec, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plan.png"
    code, text, err = run(capsys, "plan", small_spec, "--tokens", "100B", "--gpus", "16", "--plot", out)
    assert code == 0, err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written" in text


def test_plot_without_matplotlib_says_how_to_get_it(capsys, small_spec, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the [plot] extra were not installed
    code, _out, err = run(capsys, "plan", small_spec, "--tokens", "100B", "--plot", tmp_path / "p.png")
    assert code == 1
    assert "matplotlib" in err and "llmp[plot]" in err
