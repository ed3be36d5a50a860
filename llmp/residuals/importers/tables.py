"""Reading the sources' CSV files: which files to read, their rows, and checked cells.

Every importer reads public CSVs whose cells it must not guess at: a file named explicitly that
is not of the format, a row with the wrong number of cells, a missing column, a cell that is not
a finite number, a negative or zero time, or a shape that does not divide is an ``InputError``
naming the file and line (``where``), never a silently dropped or rounded row.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmp import files
from llmp.errors import InputError


def discover(paths: Sequence[str | Path], accept: Callable[[Path], bool], fmt: str) -> tuple[list[Path], list[Path]]:
    """Files to read under ``paths`` (directories walked recursively, sorted) and files found in a
    directory walk that are not ``fmt`` files (listed in the manifest, not read). A file named
    explicitly that ``accept`` refuses is an error: the user said it is such a file."""
    take: list[Path] = []
    other: list[Path] = []
    if not paths:
        raise InputError("no input paths given", hint="pass the files or directories to import")
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(q for q in p.rglob("*.csv") if q.is_file()):
                (take if accept(f) else other).append(f)
        elif p.is_file():
            if not accept(p):
                raise InputError(f"{p.name} is not a {fmt} file (by its name and place)",
                                 hint=f"see `llmp import-samples --help` for the {fmt} files it reads")
            take.append(p)
        else:
            raise InputError(f"no such file or directory: {p}")
    unique: list[Path] = []  # the first mention of each file, in order
    seen: set[Path] = set()
    for f in take:
        if f.resolve() not in seen:
            seen.add(f.resolve())
            unique.append(f)
    return unique, [f for f in other if f.resolve() not in seen]


@dataclass(frozen=True, slots=True)
class Table:
    """A CSV file's data rows with the 1-based line each starts on (header = line 1)."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[int, dict[str, str]], ...]


def read_table(path: Path, required: Sequence[str], fmt: str) -> Table:
    """Read a CSV (LF or CRLF) and check that it has ``required`` columns."""
    text = files.read_text(path, files.SAMPLES)
    try:
        with io.StringIO(text, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path.name} is empty", hint=f"expected a {fmt} CSV with a header line")
            header = [h.strip() for h in header]
            rows = []
            start = reader.line_num + 1
            for values in reader:
                line, start = start, reader.line_num + 1
                if not values or all(not v.strip() for v in values):
                    continue
                if len(values) != len(header):
                    raise InputError(f"{path.name}:{line}: {len(values)} cells, the header has {len(header)}",
                                     hint=f"is this a {fmt} CSV?")
                rows.append((line, dict(zip(header, (v.strip() for v in values)))))
    except csv.Error as err:
        raise InputError(f"{path.name}: malformed CSV ({err})") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"{path.name} lacks the columns {', '.join(missing)}",
                         hint=f"is this a {fmt} file? it has: {', '.join(header) or '(none)'}")
    return Table(name=path.name, columns=tuple(header), rows=tuple(rows))


def number(row: dict[str, str], column: str, where: str) -> float:
    """A finite number from a cell (``1024.0`` and ``1024`` alike)."""
    text = row[column]
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: column '{column}' is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: column '{column}' is not finite: {text!r}")
    return value


def integer(row: dict[str, str], column: str, where: str) -> int:
    """A whole number, also when written as a float (the seed writes ``2.0``)."""
    value = number(row, column, where)
    if value != int(value):
        raise InputError(f"{where}: column '{column}' must be a whole number, got {row[column]!r}")
    if value < 0:
        raise InputError(f"{where}: column '{column}' is negative: {row[column]!r}")
    return int(value)


def seconds(row: dict[str, str], column: str, where: str, scale: float) -> float:
    """A time cell in seconds (``scale`` converts the source's unit); must be positive."""
    value = number(row, column, where)
    if value < 0:
        raise InputError(f"{where}: negative time in '{column}': {row[column]!r}")
    if value == 0:
        raise InputError(f"{where}: zero time in '{column}'", hint="a measured time is positive")
    return value * scale


def exact_div(a: int, b: int, where: str, what: str) -> int:
    """``a / b`` when ``b`` divides ``a`` (a shape per worker, a head dim), else the error naming ``what``."""
    if b <= 0 or a % b:
        raise InputError(f"{where}: {what}: {a} is not divisible by {b}")
    return a // b
