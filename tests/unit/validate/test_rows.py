"""Reading the published-measurement CSV schema: good files, long-format grouping, bad files."""

from __future__ import annotations

import csv
import io

import published_rows as P
import pytest

from llmp.errors import InputError
from llmp.validate.rows import COLUMNS, Row, drop_copies, group_measurements, read_csv, read_csvs


def test_reads_rows_with_their_line_numbers(csv_file):
    rows = read_csv(csv_file(P.MPT_70B_H100))
    assert [r.line for r in rows] == [2, 3, 4, 5, 6]
    assert rows[0].integer("layers") == 80
    assert rows[0].number("metric_value") == 1007.0
    assert rows[0].integer("gpus_per_node") is None  # blank = not given
    assert rows[0].key == "rows:2"
    assert list(rows[0].to_dict()) == list(COLUMNS)


def test_long_format_rows_group_into_one_measurement_per_run(csv_file):
    text = P.MPT_70B_H100 + "".join(P.MPT_7B_A100_40GB.splitlines(keepends=True)[1:])
    measurements = group_measurements(read_csv(csv_file(text)))
    assert len(measurements) == 2
    assert measurements[0].metric_names == ("tokens_per_sec_per_gpu", "tokens_per_sec", "model_tflops_per_gpu",
                                            "mfu_pct", "hfu_pct")
    assert measurements[1].config.text("model_name") == "MPT-7b"
    assert measurements[0].metric_rows("mfu_pct")[0].number("metric_value") == 41.25
    assert measurements[0].metric_rows("iteration_time_s") == ()


def test_rows_differing_only_in_notes_are_one_measurement(csv_file):
    # One configuration annotated twice (e.g. where each number was read) is one run, scored once.
    text = P.edit(P.SC21_1P7B, "notes", "achieved TFLOP/s as read from the README image", row=2)
    (m,) = group_measurements(read_csv(csv_file(text)))
    assert len(m.rows) == 3
    assert "README image" in m.notes and "DDP-impl=torch" in m.notes


def test_rows_differing_only_in_the_metric_unit_are_one_measurement(csv_file):
    text = P.edit(P.edit(P.SC21_1P7B, "metric_name", "iteration_time_s", row=3), "metric_unit", "ms", row=3)
    (m,) = group_measurements(read_csv(csv_file(text)))
    assert m.metric_names == ("achieved_tflops_per_gpu", "pct_of_peak", "iteration_time_s")


def test_same_run_in_two_files_stays_two_measurements(csv_file):
    rows = read_csvs([str(csv_file(P.SC21_1P7B, "a.csv")), str(csv_file(P.SC21_1P7B, "b.csv"))])
    assert len(group_measurements(rows)) == 2


def test_a_changed_configuration_cell_splits_a_measurement(csv_file):
    text = P.edit(P.SC21_1P7B, "micro_batch", "8", row=2)
    assert len(group_measurements(read_csv(csv_file(text)))) == 2


def test_exact_copies_are_set_apart_with_the_row_they_repeat(csv_file):
    lines = P.SC21_1P7B.splitlines(keepends=True)
    rows, copies = drop_copies(read_csv(csv_file("".join([*lines, lines[1]]))))  # row 2 pasted again as row 5
    assert [r.line for r in rows] == [2, 3, 4]
    ((copy, first),) = copies
    assert (copy.line, first.line) == (5, 2)
    (m,) = group_measurements(rows)
    assert m.lines == "rows:2,3,4"  # a skip names every row of its measurement


def test_the_same_row_in_two_files_is_no_copy(csv_file):
    rows = read_csvs([str(csv_file(P.SC21_1P7B, "a.csv")), str(csv_file(P.SC21_1P7B, "b.csv"))])
    assert drop_copies(rows) == (rows, ())


def test_header_order_is_free(csv_file):
    rows = list(csv.reader(io.StringIO(P.SC21_1P7B)))
    order = list(reversed(range(len(rows[0]))))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[r[i] for i in order] for r in rows])
    assert read_csv(csv_file(buf.getvalue()))[0].integer("hidden") == 2304


@pytest.mark.parametrize("text, expected", [
    ("", "is empty"),
    ("  \n\n", "is empty"),
    (P.HEADER, "has a header but no rows"),
    (P.HEADER.replace(",vocab,", ","), "missing column 'vocab'"),
    (P.HEADER.replace(",hidden,", ",hiden,"), "unknown column 'hiden' (did you mean 'hidden'?)"),
    (P.HEADER.replace("source_ref", "source"), "column 'source' appears more than once"),
    (P.edit(P.SC21_1P7B, "tp", "eight"), "column 'tp' must be a whole number, got 'eight'"),
    (P.edit(P.SC21_1P7B, "layers", "24.5"), "column 'layers' must be a whole number, got '24.5'"),
    (P.edit(P.SC21_1P7B, "metric_value", "137 TFLOP/s"), "column 'metric_value' must be a number"),
    (P.edit(P.SC21_1P7B, "metric_value", ""), "column 'metric_value' is blank"),
    (P.edit(P.SC21_1P7B, "num_gpus", "0"), "column 'num_gpus' must be positive"),
    (P.edit(P.SC21_1P7B, "metric_value", "nan"), "column 'metric_value' must be finite"),
    (P.SC21_1P7B + "megatron-sc21-table1,x\n", "row has 2 cells but the header has 36"),
])
def test_bad_files_name_the_problem_and_the_fix(csv_file, text, expected):
    path = csv_file(text)
    with pytest.raises(InputError) as info:
        read_csv(path)
    message = info.value.render()
    assert expected in message
    assert "hint:" in message
    assert str(path) in message


def test_bad_row_points_at_its_line(csv_file):
    path = csv_file(P.edit(P.SC21_1P7B, "hidden", "wide", row=3))
    with pytest.raises(InputError) as info:
        read_csv(path)
    assert info.value.render().startswith(f"{path}:4:1: error: bad CSV row:")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_csv(tmp_path / "absent.csv")
    with pytest.raises(InputError, match="is a directory"):
        read_csv(tmp_path)
    with pytest.raises(InputError, match="no CSV files given"):
        read_csvs([])


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(P.SC21_1P7B.replace("Narayanan", "Narayánan").encode("latin-1"))
    with pytest.raises(InputError, match="is not UTF-8"):
        read_csv(path)


# -- the FP8 scaling recipe of an fp8 row --------------------------------------------------------
def _fp8_row(precision: str, notes: str = "") -> Row:
    values = {c: "" for c in COLUMNS}
    values.update(precision=precision, dtype="fp8", notes=notes)
    return Row(file="t.csv", line=2, values=values)


@pytest.mark.parametrize("precision,notes,stack,want", [
    ("FP8 hybrid tensorwise (TE)", "", "megatron_core", "current"),
    ("BF16 mixed + Float8 nn.Linear (torchao)", "", "torchtitan", "current"),
    ("FP8", "", "torchtitan", "current"),
    ("FP8", "", "nemo", "delayed"),
    ("amp_fp8", "", "composer", "delayed"),
    ("FP8", "--fp8-recipe blockwise", "megatron_core", "blockwise"),
    ("FP8 delayed scaling", "", "torchtitan", "delayed"),
])
def test_an_fp8_row_runs_the_scaling_recipe_it_names_else_its_stacks(precision, notes, stack, want):
    from llmp.spec.spec import Stack
    from llmp.validate.frameworks import fp8_scaling_of

    scaling, because = fp8_scaling_of(_fp8_row(precision, notes), Stack(stack))
    assert scaling.value == want and because
