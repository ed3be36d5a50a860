"""Fixtures for the validate tests (unit, property and command line): write CSV snippets to files and
map them; the SC21 1.7B row, mapped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import published_rows as P
import pytest

from llmp.validate.mapping import Mapped, Skipped, map_measurement
from llmp.validate.rows import group_measurements, read_csv


@pytest.fixture
def csv_file(tmp_path: Path) -> Callable[..., Path]:
    """``csv_file(text, name="rows.csv")`` writes ``text`` and returns its path."""

    def write(text: str, name: str = "rows.csv") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def map_snippet(csv_file: Callable[..., Path]) -> Callable[[str], Mapped | Skipped]:
    """Map the single measurement of a snippet."""

    def run(text: str) -> Mapped | Skipped:
        measurements = group_measurements(read_csv(csv_file(text)))
        assert len(measurements) == 1
        return map_measurement(measurements[0])

    return run


@pytest.fixture(scope="module")
def mapped(tmp_path_factory) -> Mapped:
    path = tmp_path_factory.mktemp("rows") / "sc21.csv"
    path.write_text(P.SC21_1P7B, encoding="utf-8")
    result = map_measurement(group_measurements(read_csv(path))[0])
    assert isinstance(result, Mapped)
    return result
