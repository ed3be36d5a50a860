"""``llmp calibrate`` and ``--calibration`` in predict, validate and search: the workflow and bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmp.calibrate import calibrate
from llmp.cli import main
from llmp.compose import predict
from llmp.validate.mapping import Mapped, map_measurement
from llmp.validate.rows import COLUMNS, group_measurements, read_csv

LAYOUTS = [(1, 1, 8, 4), (2, 1, 4, 4), (1, 2, 4, 2), (2, 2, 2, 2), (4, 1, 2, 4), (8, 1, 1, 2)]
"""(tp, pp, dp, micro_batch) of a small GPT on one DGX A100 node."""
SLOWER = 1.3
"""The measured steps of these tests run 30% slower than llmp's zero-shot prediction."""


def _row(tp: int, pp: int, dp: int, mb: int, **over: object) -> dict[str, object]:
    row: dict[str, object] = {c: "" for c in COLUMNS}
    row.update(source="my-runs", model_name="GPT 4L h1024", layers=4, hidden=1024, heads=16, kv_heads=16,
               ffn_hidden=4096, vocab=50304, seq_len=1024, gpu="A100 80GB", gpu_id="a100_sxm4_80gb", num_gpus=8,
               gpus_per_node=8, tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=64, precision="bf16", dtype="bf16",
               metric_name="iteration_time_s", metric_value="1.0", metric_unit="s")
    row.update(over)
    return row


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _specs(path: Path) -> list[Mapped]:
    mapped = [map_measurement(m) for m in group_measurements(read_csv(path))]
    assert all(isinstance(m, Mapped) for m in mapped)
    return mapped


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Measured steps: each layout's zero-shot prediction times ``SLOWER``."""
    directory = tmp_path_factory.mktemp("runs")
    draft = _write(directory / "draft.csv", [_row(*layout) for layout in LAYOUTS])
    times = [predict(m.spec).step_time_s * SLOWER for m in _specs(draft)]
    return _write(directory / "runs.csv", [_row(*layout, metric_value=f"{t:.6g}") for layout, t in zip(LAYOUTS, times)])


@pytest.fixture(scope="module")
def stack(runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cal") / "STACK.json"
    code = main(["calibrate", str(_first(runs, 3)), "-o", str(out)])
    assert code == 0
    return out


def _first(runs: Path, k: int) -> Path:
    rows = list(csv.DictReader(runs.open()))[:k]
    return _write(runs.parent / f"first{k}.csv", rows)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # a calibration end to end (2 s)
def test_calibrate_prints_the_factors_and_writes_a_file_with_its_provenance(capsys, runs, tmp_path):
    out = tmp_path / "STACK.json"
    code, text, err = _run(capsys, "calibrate", str(_first(runs, 3)), "-o", str(out))
    assert code == 0, err
    assert "calibrated generic on a100_sxm4_80gb from 3 measured steps" in text and "tensor" in text
    doc = json.loads(out.read_text())
    assert doc["format"] == "llmp-calibration" and doc["gpu"] == "a100_sxm4_80gb" and doc["stack"] == "generic"
    (source,) = doc["inputs"]
    assert source["rows"] == ["first3:2", "first3:3", "first3:4"] and len(source["sha256"]) == 64
    residuals = [b["residuals"] for b in doc["bases"]]
    assert residuals[-1] == "roofline only (no residual models)" and len(residuals) == 2
    for basis in doc["bases"]:
        for row in basis["rows"]:  # in sample, each run moves toward its measurement
            assert abs(row["calibrated_s"] / row["measured_s"] - 1) < abs(row["predicted_s"] / row["measured_s"] - 1)
    assert doc["composition_term"]["format"] == "llmp-composition-term"


def test_predict_applies_it_and_says_so(capsys, runs, stack):
    mapped = _specs(runs)
    spec, measured = mapped[-1].spec, mapped[-1].measured_s  # a layout the calibration never saw
    zero = predict(spec)
    cal = predict(spec, calibration=stack)
    assert abs(cal.step_time_s / measured - 1) < abs(zero.step_time_s / measured - 1)
    assert cal.uncertainty.method == "calibrated" and cal.band[0] < cal.step_time_s < cal.band[1]
    assert "STACK@" in cal.provenance.calibrated_by and zero.provenance.calibrated_by == ""
    assert sum(cal.breakdown.values()) == pytest.approx(cal.step_time_s)
    specfile = stack.parent / "spec.llmp"
    specfile.write_text(mapped[-1].text)
    code, out, err = _run(capsys, "predict", str(specfile), "--calibration", str(stack), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["band_detail"]["method"] == "calibrated" and doc["provenance"]["calibrated_by"]
    assert doc["step_time_s"] == pytest.approx(cal.step_time_s)


@pytest.mark.slow  # calibrates and draws bands at three k
def test_the_band_narrows_as_k_grows(runs):
    spec = _specs(runs)[-1].spec
    widths = []
    for k in (1, 3, 5):
        cal = calibrate([_first(runs, k)])
        p = predict(spec, calibration=cal)
        widths.append(p.band[1] / p.band[0])
    # more runs narrow the band; k = 3 adds layouts whose communication the first one did not show,
    # which can widen it for a while
    assert widths[0] > widths[2] and widths[1] > widths[2]


def test_validate_and_search_take_it(capsys, runs, stack):
    code, out, err = _run(capsys, "validate", str(runs), "--calibration", str(stack), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["mape"] < 0.1 and len(doc["rows"]) == len(LAYOUTS)
    code, zero_out, _ = _run(capsys, "validate", str(runs), "--json")
    assert json.loads(zero_out)["mape"] > 0.2  # zero-shot stays zero-shot
    specfile = stack.parent / "search.llmp"
    specfile.write_text(_specs(runs)[0].text)
    code, out, err = _run(capsys, "search", str(specfile), "--vary", "train.micro_batch=1,2", "--calibration",
                          str(stack), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert any("calibrated by" in n for n in doc["notes"])


def test_rows_of_two_gpus_are_refused(capsys, runs, tmp_path):
    rows = list(csv.DictReader(runs.open()))
    rows[1]["gpu_id"], rows[1]["gpu"] = "h100_sxm5_80gb", "H100"
    code, _, err = _run(capsys, "calibrate", str(_write(tmp_path / "mixed.csv", rows)), "-o", str(tmp_path / "x.json"))
    assert code == 1 and "several GPUs mixed" in err and "a100_sxm4_80gb" in err and "h100_sxm5_80gb" in err
    assert "Traceback" not in err and not (tmp_path / "x.json").exists()


def test_rows_of_two_stacks_are_refused(capsys, runs, tmp_path):
    rows = list(csv.DictReader(runs.open()))
    rows[0]["notes"] = "torchtitan"
    rows[0]["source"] = "torchtitan-llama3-h100-202412"
    code, _, err = _run(capsys, "calibrate", str(_write(tmp_path / "stacks.csv", rows)), "-o", str(tmp_path / "x.json"))
    assert code == 1 and "stacks mixed" in err


def test_contradictory_rows_are_refused(capsys, runs, tmp_path):
    rows = list(csv.DictReader(runs.open()))
    twice = dict(rows[0], metric_value=str(2 * float(rows[0]["metric_value"])), notes="a second run")
    code, _, err = _run(capsys, "calibrate", str(_write(tmp_path / "twice.csv", [*rows, twice])), "-o",
                        str(tmp_path / "x.json"))
    # one measurement (rows equal but for the metric and notes) whose two FLOP rates disagree
    assert code == 1 and "rows of one run disagree" in err and "twice:2" in err and "twice:8" in err
    elsewhere = dict(twice, source_ref="another log of the same run")  # its own measurement, the same spec
    code, _, err = _run(capsys, "calibrate", str(_write(tmp_path / "again.csv", [*rows, elsewhere])), "-o",
                        str(tmp_path / "x.json"))
    assert code == 1 and "contradictory rows" in err and "again:2" in err and "again:8" in err


def test_rows_llmp_cannot_model_are_refused(capsys, runs, tmp_path):
    rows = list(csv.DictReader(runs.open()))
    rows[2]["model_name"] = "GPT 4L h1024 [DPO]"
    code, _, err = _run(capsys, "calibrate", str(_write(tmp_path / "dpo.csv", rows)), "-o", str(tmp_path / "x.json"))
    assert code == 1 and "rows llmp cannot model" in err and "dpo:4" in err and "fine-tuning" in err


def test_an_exact_copy_of_a_row_is_refused_with_the_row_it_repeats(capsys, runs, tmp_path):
    # merged with its original it would count once without a word; calibrate says so and stops
    rows = list(csv.DictReader(runs.open()))
    code, _, err = _run(capsys, "calibrate", str(_write(tmp_path / "copy.csv", [*rows, rows[1]])), "-o",
                        str(tmp_path / "x.json"))
    assert code == 1 and "copy of an earlier row: 1 (copy:8)" in err and "every cell equals row copy:3" in err
    assert not (tmp_path / "x.json").exists()


def test_a_calibration_of_another_gpu_or_store_does_not_apply(capsys, runs, stack, tmp_path):
    code, _, err = _run(capsys, "predict", "examples/llama3_8b_dgx_h100.llmp", "--calibration", str(stack))
    assert code == 1 and "calibration does not apply" in err and "h100_sxm5_80gb" in err
    doc = json.loads(stack.read_text())
    doc["bases"] = doc["bases"][:1]  # only the basis of the default store
    only = tmp_path / "only.json"
    only.write_text(json.dumps(doc))
    specfile = tmp_path / "s.llmp"
    specfile.write_text(_specs(runs)[0].text)
    code, _, err = _run(capsys, "predict", str(specfile), "--no-residuals", "--calibration", str(only))
    assert code == 1 and "fitted on predictions made with" in err and "--no-residuals" in err


@pytest.mark.parametrize("damage", ["not json", "{}", '{"format": "llmp-calibration", "version": 1}'])
def test_a_damaged_file_is_a_clear_error(capsys, tmp_path, damage):
    bad = tmp_path / "bad.json"
    bad.write_text(damage)
    code, _, err = _run(capsys, "predict", "examples/tiny_cpu.llmp", "--calibration", str(bad))
    assert code == 1 and "calibration" in err and "Traceback" not in err


def test_a_missing_output_directory_is_a_clear_error(capsys, runs, tmp_path):
    code, _, err = _run(capsys, "calibrate", str(_first(runs, 1)), "-o", str(tmp_path / "no" / "such" / "x.json"))
    assert code == 1 and "cannot write" in err
