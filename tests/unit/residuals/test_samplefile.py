"""Sample files: complete lines only, truncated tails tolerated, resume refuses mixed setups."""

from __future__ import annotations

import pytest

from llmp.errors import InputError, ResidualSchemaError
from llmp.residuals import samplefile

COLS = ("key", "value", "error")
META = {"device_kind": "cpu", "device_name": "x", "device_id": "cpu", "torch": "t", "threads": 1, "design": "d"}


def test_append_and_read_back(tmp_path):
    path = tmp_path / "f.csv"
    with samplefile.Appender(path, COLS, META) as a:
        a.append({"key": "a", "value": 1, "error": ""})
        a.append({"key": "b,with,commas", "value": 2, "error": ""})
    table = samplefile.read(path)
    assert table.meta["device_id"] == "cpu"
    assert [r["key"] for r in table.rows] == ["a", "b,with,commas"]
    assert table.dropped == 0


def test_truncated_last_line_is_dropped_and_cut_before_appending(tmp_path):
    path = tmp_path / "f.csv"
    with samplefile.Appender(path, COLS, META) as a:
        a.append({"key": "a", "value": 1, "error": ""})
    with path.open("a") as f:
        f.write("b,2")  # a killed writer left half a line
    table = samplefile.read(path)
    assert [r["key"] for r in table.rows] == ["a"] and table.dropped == 1
    with samplefile.Appender(path, COLS, META) as a:
        assert a.keys == {"a"}
        a.append({"key": "c", "value": 3, "error": ""})
    table = samplefile.read(path)
    assert [r["key"] for r in table.rows] == ["a", "c"] and table.dropped == 0


def test_resume_refuses_another_setup(tmp_path):
    path = tmp_path / "f.csv"
    samplefile.Appender(path, COLS, META).close()
    with pytest.raises(InputError, match="threads"):
        samplefile.Appender(path, COLS, {**META, "threads": 2})


def test_not_a_sample_file(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ResidualSchemaError, match="not an llmp sample file"):
        samplefile.read(path)
