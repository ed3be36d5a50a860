"""Read CSV files in the published-measurement schema and group their rows into measurements.

The schema is the one in validation/README.md (``validation/*.csv``): long format, one row per metric of a
measured run, blank = "the source did not say". Everything a user can get wrong in such a file
(missing file, wrong header, text where a number belongs) is reported here as an
:class:`~llmp.errors.InputError` that names the file, the line and the fix, so nothing later has to
re-check a cell.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmp import files
from llmp.errors import InputError, Span

COLUMNS: tuple[str, ...] = (
    "source", "source_ref", "model_name", "params_b", "layers", "hidden", "heads", "kv_heads",
    "ffn_hidden", "vocab", "seq_len", "moe_experts", "moe_topk", "gpu", "gpu_id", "num_gpus",
    "gpus_per_node", "interconnect_intra", "interconnect_inter", "tp", "pp", "dp", "cp", "ep", "vp",
    "micro_batch", "global_batch", "sequence_parallel", "recompute", "zero_stage_or_fsdp",
    "precision", "dtype", "metric_name", "metric_value", "metric_unit", "notes",
)
"""Every column of the schema, in the published files' order (the order a file uses is free)."""

INT_COLUMNS: frozenset[str] = frozenset({
    "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "moe_experts",
    "moe_topk", "num_gpus", "gpus_per_node", "tp", "pp", "dp", "cp", "ep", "vp", "micro_batch",
    "global_batch",
})
"""Columns that hold whole numbers when they are not blank."""

FLOAT_COLUMNS: frozenset[str] = frozenset({"params_b", "metric_value"})
"""Columns that hold real numbers when they are not blank."""

METRIC_COLUMNS: frozenset[str] = frozenset({"metric_name", "metric_value", "metric_unit"})
"""The columns that differ between the rows of one measurement (long format)."""

FREE_COLUMNS: frozenset[str] = METRIC_COLUMNS | {"notes"}
"""Columns that do not define the measured configuration: rows differing only here are one
measurement (sources annotate each metric row separately, e.g. where a number was read)."""

DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32", "tf32")
"""What the normalised ``dtype`` column may hold (validation/README.md: bf16, fp16, fp8, mxfp8, nvfp4, or
blank; fp32 and tf32 are llmp's other training precisions). The free-text ``precision`` column is read
by :mod:`llmp.validate.cells`."""

REQUIRED: tuple[str, ...] = ("source", "metric_name", "metric_value")
"""Cells no row may leave blank: without them a row measures nothing nameable."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One CSV row: its raw cells (already checked) and where it came from."""

    file: str
    """Path of the CSV file as the user gave it."""
    line: int
    """1-based line of the row in the file (the header is line 1)."""
    values: dict[str, str]
    """Every schema column → its cell text, stripped; blank cells are ``""``."""

    @property
    def key(self) -> str:
        """``<file stem>:<line>``: the row id the peers' prediction file uses too."""
        return f"{Path(self.file).stem}:{self.line}"

    def text(self, column: str) -> str:
        return self.values[column]

    def integer(self, column: str) -> int | None:
        """The cell as an int, ``None`` when blank (cells were checked when the file was read)."""
        cell = self.values[column]
        return None if cell == "" else int(float(cell))

    def number(self, column: str) -> float | None:
        """The cell as a float, ``None`` when blank."""
        cell = self.values[column]
        return None if cell == "" else float(cell)

    def to_dict(self) -> dict[str, str]:
        """The row's own columns, in schema order (what ``--json`` echoes back)."""
        return {c: self.values[c] for c in COLUMNS}


@dataclass(frozen=True, kw_only=True, slots=True)
class Measurement:
    """One measured run: the rows of one file that agree on every configuration column."""

    rows: tuple[Row, ...]
    joined: tuple[str, ...] = ()
    """How rows of another configuration line joined this one (a memory peak typed on its own row)."""

    @property
    def config(self) -> Row:
        """The row that stands for the run's configuration (any row would do; the first)."""
        return self.rows[0]

    def metric_rows(self, name: str) -> tuple[Row, ...]:
        """Every row that reports metric ``name``."""
        return tuple(r for r in self.rows if r.text("metric_name") == name)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Distinct metric names, in order of appearance."""
        return tuple(dict.fromkeys(r.text("metric_name") for r in self.rows))

    @property
    def lines(self) -> str:
        """``<file stem>:<line>[,<line>...]``: every row of the measurement, for a skip to name them all."""
        return f"{Path(self.config.file).stem}:{','.join(str(r.line) for r in self.rows)}"

    @property
    def notes(self) -> str:
        """Every distinct note of the measurement's rows, in order, joined by ``"; "``."""
        return "; ".join(dict.fromkeys(r.text("notes") for r in self.rows if r.text("notes")))


def _span(path: str, line: int) -> Span:
    return Span(file=path, line=line, column=1, end_line=line, end_column=1)


def _suggest(name: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _check_header(path: str, header: list[str]) -> list[str]:
    names = [h.strip() for h in header]
    if not any(names):
        raise InputError("the first line is empty; expected the header row", _span(path, 1),
                         label="bad CSV header", hint=f"the header must name the columns: {', '.join(COLUMNS)}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"column {', '.join(repr(d) for d in dupes)} appears more than once", _span(path, 1),
                         label="bad CSV header", hint="keep one column of each name")
    unknown = [n for n in names if n not in COLUMNS]
    missing = [c for c in COLUMNS if c not in names]
    if unknown:
        what = ", ".join(f"'{u}'{_suggest(u, missing)}" for u in unknown)
        raise InputError(f"unknown column {what}", _span(path, 1), label="bad CSV header",
                         hint="use the schema's column names (validation/README.md, 'Format (all CSVs)')")
    if missing:
        raise InputError(f"missing column {', '.join(repr(m) for m in missing)}", _span(path, 1),
                         label="bad CSV header",
                         hint="add the column(s) to the header (cells may stay blank when the source does not "
                              "give a value); the schema is in validation/README.md")
    return names


def _check_cell(path: str, line: int, column: str, cell: str) -> None:
    if column in REQUIRED and cell == "":
        raise InputError(f"column '{column}' is blank", _span(path, line), label="bad CSV row",
                         hint=f"every row needs {', '.join(REQUIRED)}: one row per reported metric")
    if column == "dtype" and cell and cell.lower() not in DTYPES:
        raise InputError(f"column 'dtype' is {cell!r}, not a number format llmp knows ({', '.join(DTYPES)})",
                         _span(path, line), label="bad CSV row",
                         hint="write one of them, or leave it blank when the source does not say (the precision "
                              "column keeps the source's own words)")
    if cell == "" or (column not in INT_COLUMNS and column not in FLOAT_COLUMNS):
        return
    try:
        value = float(cell)
    except ValueError:
        kind = "a whole number" if column in INT_COLUMNS else "a number"
        raise InputError(f"column '{column}' must be {kind}, got {cell!r}", _span(path, line),
                         label="bad CSV row",
                         hint="write a plain number (no units, no thousands separators), or leave the cell "
                              "blank when the source does not give it") from None
    if not math.isfinite(value):
        raise InputError(f"column '{column}' must be finite, got {cell!r}", _span(path, line), label="bad CSV row",
                         hint="write a plain number, or leave the cell blank")
    if column in INT_COLUMNS and value != int(value):
        raise InputError(f"column '{column}' must be a whole number, got {cell!r}", _span(path, line),
                         label="bad CSV row", hint="counts (layers, GPUs, degrees, batch sizes) are integers")
    if value < 0 or (value == 0 and column in ("metric_value", "num_gpus", "global_batch")):
        raise InputError(f"column '{column}' must be positive, got {cell!r}", _span(path, line),
                         label="bad CSV row", hint="leave the cell blank when the source does not give it")


MAX_ROWS = 100_000
"""Most rows one command reads: 46x the 2,181 published rows in validation/, and about an hour of
predictions; a file of millions of rows is a generated table, not measured runs."""


def read_csv(path: str | Path, most: int = MAX_ROWS) -> tuple[Row, ...]:
    """Read and check one CSV file; every row is returned with its line number.

    Raises :class:`InputError` for a missing or unreadable file, an empty file, a header that is
    not the schema, a row with the wrong number of cells, or a non-numeric numeric cell.
    """
    name = str(path)
    try:
        text = files.read_text(path, files.CSV)
    except InputError as err:
        raise InputError(err.message, label="cannot read CSV",
                         hint=f"pass the CSV files inside it, e.g. {name.rstrip('/')}/*.csv"
                         if Path(name).is_dir() else "give the path of a CSV in the published-measurement "
                         "schema, e.g. validation/*.csv") from None
    if not text.strip():
        raise InputError(f"{name} is empty", label="bad CSV", hint=f"the first line must be the header: "
                         f"{','.join(COLUMNS)}; then one row per measured metric")
    reader = csv.reader(text.splitlines(keepends=True))
    header = _check_header(name, next(reader))
    rows: list[Row] = []
    start = reader.line_num + 1
    for cells in reader:
        line = start
        start = reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue
        if len(rows) >= most:
            raise InputError(f"more than {MAX_ROWS:,} rows in all (at line {line}): more measured runs than any "
                             "validation needs", _span(name, line), label="too many rows",
                             hint="split the file, or choose rows with --source")
        if len(cells) != len(header):
            raise InputError(f"row has {len(cells)} cells but the header has {len(header)}", _span(name, line),
                             label="bad CSV row",
                             hint="quote cells that contain commas (\"a, b\") and keep one cell per column")
        values = {h: c.strip() for h, c in zip(header, cells)}
        for column in COLUMNS:
            _check_cell(name, line, column, values[column])
        rows.append(Row(file=name, line=line, values={c: values[c] for c in COLUMNS}))
    if not rows:
        raise InputError(f"{name} has a header but no rows", label="bad CSV",
                         hint="add one row per measured metric under the header")
    return tuple(rows)


def read_csvs(paths: list[str] | tuple[str, ...]) -> tuple[Row, ...]:
    """All rows of several files, file by file (at most :data:`MAX_ROWS` in all)."""
    if not paths:
        raise InputError("no CSV files given", label="usage", hint="llmp validate validation/*.csv")
    rows: list[Row] = []
    for path in paths:
        rows.extend(read_csv(path, most=MAX_ROWS - len(rows)))
    return tuple(rows)


def drop_copies(rows: tuple[Row, ...] | list[Row]) -> tuple[tuple[Row, ...], tuple[tuple[Row, Row], ...]]:
    """The rows without exact copies, and each copy with the earlier row of its file it repeats.

    A row equal cell for cell to an earlier one (a pasted line, a file concatenated twice) adds no
    measurement: grouped with its original it would silently count once, so callers report it.
    """
    first: dict[tuple[str, tuple[str, ...]], Row] = {}
    kept: list[Row] = []
    copies: list[tuple[Row, Row]] = []
    for row in rows:
        key = (row.file, tuple(row.values[c] for c in COLUMNS))
        if key in first:
            copies.append((row, first[key]))
        else:
            first[key] = row
            kept.append(row)
    return tuple(kept), tuple(copies)


def group_measurements(rows: tuple[Row, ...] | list[Row]) -> tuple[Measurement, ...]:
    """Gather long-format rows into measurements, in order of first appearance.

    Rows belong together when they come from the same file and agree on every column except
    :data:`FREE_COLUMNS` (the metric and its notes): one configuration is one measurement, so a
    run is never counted twice because two of its rows carry different remarks.
    """
    groups: dict[tuple[str, tuple[str, ...]], list[Row]] = {}
    for row in rows:
        key = (row.file, tuple(row.values[c] for c in COLUMNS if c not in FREE_COLUMNS))
        groups.setdefault(key, []).append(row)
    return tuple(Measurement(rows=tuple(g)) for g in groups.values())


JOIN_IGNORED: frozenset[str] = FREE_COLUMNS | {"source_ref"}
"""Columns a memory row may differ in from its step row (a source cites the memory column of a table
apart from its throughput column)."""


def join_memory(measurements: tuple[Measurement, ...], is_memory: Callable[[Row], bool]) -> tuple[Measurement, ...]:
    """Join each measurement that reports only memory peaks to the one step measurement of its file
    with the same configuration: every column equal except :data:`JOIN_IGNORED` and the cells the
    memory row leaves blank. A memory row that matches no measurement, or several, stays on its own
    (and is skipped for want of a time-like metric, naming the rows it could belong to)."""
    memory_only = [m for m in measurements if all(is_memory(r) for r in m.rows)]
    steps = [m for m in measurements if not all(is_memory(r) for r in m.rows)]
    joined: dict[int, list[Measurement]] = {}
    alone: list[Measurement] = []
    for mem in memory_only:
        cfg = mem.config
        matches = [i for i, m in enumerate(steps) if m.config.file == cfg.file and all(
            cfg.values[c] in ("", m.config.values[c]) for c in COLUMNS if c not in JOIN_IGNORED)]
        if len(matches) == 1:
            joined.setdefault(matches[0], []).append(mem)
        else:
            why = (f"its configuration matches {len(matches)} step measurements "
                   f"({', '.join(steps[i].config.key for i in matches[:4])})" if matches else
                   "no step measurement of its file has its configuration")
            alone.append(dataclasses.replace(mem, joined=(why,)))
    out = []
    for i, m in enumerate(steps):
        extra = joined.get(i, [])
        out.append(dataclasses.replace(m, rows=(*m.rows, *(r for e in extra for r in e.rows)),
                                       joined=tuple(f"memory row {r.key} joined (same configuration; "
                                                    "cells it leaves blank and its source_ref aside)"
                                                    for e in extra for r in e.rows)) if extra else m)
    return (*out, *alone)
