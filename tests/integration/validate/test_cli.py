"""``llmp validate``: the JSON contract, the text report, plots, exit codes."""

from __future__ import annotations

import json

import published_rows as P
import pytest

from llmp import dsl
from llmp.cli import main
from llmp.validate.rows import COLUMNS

TWO_SOURCES = P.SC21_1P7B + "".join(P.NEMO_DPO.splitlines(keepends=True)[1:])
"""One predictable measurement (SC21 1.7B) and one skipped one (a NeMo run retagged as DPO)."""


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract(capsys, csv_file):
    code, out, err = _run(capsys, "validate", str(csv_file(TWO_SOURCES)), "--json")
    assert code == 0, err
    doc = json.loads(out)
    for key in ("rows", "mape", "median", "max", "by_source", "by_stack", "by_gpu", "skipped", "skip_counts", "worst",
                "memory", "oom_failures"):
        assert key in doc
    (row,) = doc["rows"]
    for column in COLUMNS:
        assert column in row  # the input row's own columns come back
    assert row["metric"] == "achieved_tflops_per_gpu" and row["metric_name"] == "achieved_tflops_per_gpu"
    assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1)
    assert row["predicted"] > 0 and row["unit"] == "s"
    assert isinstance(row["assumptions"], list) and row["assumptions"]
    assert row["stack"] == "megatron_lm" and row["memory_error"] is None and row["oom"] is False
    assert doc["mape"] == pytest.approx(abs(row["error"]))
    assert set(doc["by_source"]) == {"megatron-sc21-table1"} and set(doc["by_gpu"]) == {"a100_sxm4_80gb"}
    assert doc["by_source"]["megatron-sc21-table1"]["rows"] == 1
    (skip,) = doc["skipped"]
    assert skip["reason"] == "fine-tuning task llmp does not model (preference optimisation)"
    assert skip["row"]["model_name"] == "LLAMA2-7B [DPO]"
    assert doc["skip_counts"] == {"fine-tuning task llmp does not model (preference optimisation)": 1}


def test_text_report_names_rows_aggregates_and_skips(capsys, csv_file):
    code, out, _ = _run(capsys, "validate", str(csv_file(TWO_SOURCES)))
    assert code == 0
    assert "GPT 1.7B (Megatron-LM SC21)" in out and "tp1 pp1 dp32" in out
    assert "Error by source" in out and "Error by gpu" in out and "Worst rows" in out
    assert "Skipped: 1 measurements" in out and "LLAMA2-7B [DPO]" in out


def test_source_filter(capsys, csv_file):
    path = str(csv_file(TWO_SOURCES))
    code, out, err = _run(capsys, "validate", path, "--json", "--source", "nemo-24.07-perf-summary")
    assert code == 1 and "nothing predicted" in err
    doc = json.loads(out)
    assert doc["rows"] == [] and doc["mape"] is None and len(doc["skipped"]) == 1
    code, _, err = _run(capsys, "validate", path, "--source", "megatron-sc21")
    assert code == 1
    assert "no rows with source 'megatron-sc21'" in err and "megatron-sc21-table1" in err


def test_plot_and_specs_are_written(capsys, csv_file, tmp_path):
    pytest.importorskip("matplotlib")
    png, specs = tmp_path / "out.png", tmp_path / "specs"
    code, _, err = _run(capsys, "validate", str(csv_file(TWO_SOURCES)), "--summary", "--plot", str(png),
                        "--specs", str(specs))
    assert code == 0, err
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    (spec_file,) = specs.iterdir()
    assert dsl.load(spec_file).model.hidden == 2304


def test_plot_of_nothing_is_a_clean_error(capsys, csv_file, tmp_path):
    code, _, err = _run(capsys, "validate", str(csv_file(P.NEMO_DPO)), "--plot", str(tmp_path / "x.png"))
    assert code == 1 and "nothing to plot" in err and "Traceback" not in err


@pytest.mark.parametrize("text, message", [
    (P.HEADER.replace(",vocab,", ",") + "x\n", "missing column 'vocab'"),
    (P.edit(P.SC21_1P7B, "tp", "eight"), "column 'tp' must be a whole number"),
    ("", "is empty"),
])
def test_bad_input_exits_1_with_a_diagnostic(capsys, csv_file, text, message):
    code, out, err = _run(capsys, "validate", str(csv_file(text)))
    assert code == 1 and out == ""
    assert message in err and "hint:" in err and "Traceback" not in err


def test_missing_file_and_usage(capsys, tmp_path):
    code, _, err = _run(capsys, "validate", str(tmp_path / "nope.csv"))
    assert code == 1 and "no such file" in err
    with pytest.raises(SystemExit) as info:
        main(["validate"])
    assert info.value.code == 2


def test_nothing_predicted_exits_non_zero_with_the_reasons(capsys, csv_file):
    code, out, err = _run(capsys, "validate", str(csv_file(P.NEMO_DPO)))
    assert code == 1
    assert "no row could be predicted" in out and "Skipped: 1 measurements" in out
    assert "nothing predicted: all 1 measurements were skipped (fine-tuning" in err and "Traceback" not in err


@pytest.mark.parametrize("flags", [(), ("--json",), ("--summary",)])
def test_skipped_rows_are_counted_on_stderr_in_every_format(capsys, csv_file, flags):
    code, _, err = _run(capsys, "validate", str(csv_file(TWO_SOURCES)), *flags)
    assert code == 0
    assert ("1 measurements predicted, 1 skipped: fine-tuning task llmp does not model (preference optimisation): "
            "1 (rows:5,6)") in err


def test_a_copied_row_is_a_counted_skip(capsys, csv_file):
    lines = P.SC21_1P7B.splitlines(keepends=True)
    code, out, err = _run(capsys, "validate", str(csv_file("".join([*lines, lines[2]]))), "--json")
    assert code == 0 and "copy of an earlier row: 1 (rows:5)" in err
    doc = json.loads(out)
    assert len(doc["rows"]) == 1
    (skip,) = doc["skipped"]
    assert skip["lines"] == [5] and skip["detail"].startswith("every cell equals row rows:3")


def test_memory_and_stack_in_the_text_report(capsys, csv_file):
    code, out, err = _run(capsys, "validate", str(csv_file(P.FUNCTIONAL_7B_H100)))
    assert code == 0, err
    assert "Error by stack" in out and "megatron_core" in out
    assert "allocated" in out and "Memory per GPU against measured peaks: 1 rows" in out
    assert "Out-of-memory verdicts on runs that ran: 0" in out


def test_json_memory_error(capsys, csv_file):
    code, out, _ = _run(capsys, "validate", str(csv_file(P.FUNCTIONAL_7B_H100)), "--json")
    assert code == 0
    (row,) = json.loads(out)["rows"]
    assert row["memory"]["kind"] == "allocated" and row["memory"]["measured_bytes"] == pytest.approx(56.55 * 2**30)
    assert row["memory_error"] == pytest.approx(row["memory"]["predicted_bytes"] / row["memory"]["measured_bytes"] - 1)


def test_a_step_time_in_ms_is_read_as_ms(capsys, csv_file):
    text = P.edit(P.edit(P.FUNCTIONAL_7B_H100, "metric_value", "1150.13"), "metric_unit", "ms")
    code, out, _ = _run(capsys, "validate", str(csv_file(text)), "--json")
    assert code == 0
    (row,) = json.loads(out)["rows"]
    assert row["measured"] == pytest.approx(1.15013) and abs(row["error"]) < 0.9


def test_plot_styles_tell_every_source_apart():
    """validation/ holds 13 sources; the default cycle has 10 colours. Each gets its own look."""
    pytest.importorskip("matplotlib")
    from llmp.validate.plot import styles

    assert len(set(styles(140))) == 140
