"""Sample files: append-only CSV with a self-describing header, safe to kill at any moment.

Layout of one file (one per kernel family, ``DIR/<family>.csv``, and ``DIR/collectives.csv``)::

    # llmp-samples 1
    # {"device_id": "cpu", "device_name": "...", "torch": "2.13.0", "threads": 2, ...}
    key,family,pass,variant,dtype,m,n,k,batch,width,time_s,p10_s,p90_s,repeats
    gemm/fwd/fwd/fp32/m=...,gemm,fwd,fwd,fp32,512,...

Every row is written with a single ``write(2)`` on an ``O_APPEND`` descriptor as soon as it
is measured, so a killed sampler leaves at most one truncated last line and never a
half-written row in the middle. Reading drops a last line without its newline; reopening for
append cuts it off first. Each row carries a key that is a pure function of the case, and a
rerun skips keys already present, so rows are never lost or duplicated.

Standard library only.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from llmp import files
from llmp.errors import InputError, ResidualSchemaError

MAGIC = "# llmp-samples 1"

RESUME_MUST_MATCH = ("device_kind", "device_name", "device_id", "torch", "threads", "design", "timing")
"""Header fields a resumed file must share with the current run (else the rows would mix setups)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleTable:
    """The rows of one sample file, as strings keyed by column, plus its header record."""

    path: Path
    meta: dict[str, object]
    columns: tuple[str, ...]
    rows: tuple[dict[str, str], ...]
    dropped: int
    """Lines dropped as truncated or malformed (a sampler killed mid-write leaves at most one)."""


def _encode(columns: tuple[str, ...], row: dict[str, object]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([row[c] for c in columns])
    return buf.getvalue()


def read(path: str | Path) -> SampleTable:
    """Read a sample file, tolerating (and counting) a truncated last line."""
    path = Path(path)
    text = files.read_text(path, files.SAMPLES)
    lines = text.split("\n")
    complete, tail = lines[:-1], lines[-1]  # ``tail`` is non-empty only if the last write was cut
    dropped = 1 if tail else 0
    if not complete or complete[0] != MAGIC:
        raise ResidualSchemaError(f"{path} is not an llmp sample file (first line must be '{MAGIC}')",
                                  hint="sample files are written by `llmp sample`")
    try:
        meta = json.loads(complete[1].lstrip("# "))
    except (IndexError, json.JSONDecodeError):
        raise ResidualSchemaError(f"{path}: the second line must be the JSON header record") from None
    body = [line for line in complete[2:] if line]
    if not body:
        return SampleTable(path=path, meta=meta, columns=(), rows=(), dropped=dropped)
    reader = csv.reader(body)
    columns = tuple(next(reader))
    if "key" not in columns:  # a data row where the column line belongs
        raise ResidualSchemaError(f"{path}: the third line must name the columns (key,family,...), "
                                  f"got {body[0][:80]!r}",
                                  hint="sample files are written by `llmp sample` or `llmp import-samples`; "
                                       "restore the column line")
    rows: dict[str, dict[str, str]] = {}
    for values in reader:
        if len(values) != len(columns):
            dropped += 1
            continue
        row = dict(zip(columns, values))
        rows.setdefault(row["key"], row)
    return SampleTable(path=path, meta=meta, columns=columns, rows=tuple(rows.values()), dropped=dropped)


class Appender:
    """Open (or create) a sample file for appending rows one complete line at a time."""

    def __init__(self, path: str | Path, columns: tuple[str, ...], meta: dict[str, object], *,
                 sync: bool = False) -> None:
        self.path = Path(path)
        self.columns = columns
        self.sync = sync
        """``fsync`` after every row: a sampler's rows survive a crashed node, not only a killed
        process (an importer writing thousands of rows it can rewrite does not pay for it)."""
        self.keys: set[str] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            self._resume(meta)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            header = f"{MAGIC}\n# {json.dumps(meta, sort_keys=True)}\n{_encode(columns, dict(zip(columns, columns)))}"
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            tmp.write_text(header)
            os.replace(tmp, self.path)  # the header appears whole or not at all
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _resume(self, meta: dict[str, object]) -> None:
        table = read(self.path)
        for field in RESUME_MUST_MATCH:
            if table.meta.get(field) != meta.get(field):
                raise InputError(
                    f"{self.path} was sampled with {field}={table.meta.get(field)!r}, this run has "
                    f"{meta.get(field)!r}; resuming would mix two setups in one file",
                    hint="sample into a new --out directory, or rerun with the original settings")
        if table.columns and table.columns != self.columns:
            raise ResidualSchemaError(f"{self.path} has columns {table.columns}, expected {self.columns}")
        if not table.columns:  # header written, column line lost: cannot happen with os.replace
            raise ResidualSchemaError(f"{self.path} has no column line")
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):  # cut the truncated last row before appending
            os.truncate(self.path, data.rfind(b"\n") + 1)
        self.keys = {row["key"] for row in table.rows}

    def append(self, row: dict[str, object]) -> None:
        """Write one complete row with a single ``write`` (atomic with respect to a kill)."""
        line = _encode(self.columns, row).encode()
        written = os.write(self._fd, line)
        if written != len(line):  # a short write on a regular file means the disk is full
            raise InputError(f"short write to {self.path} (disk full?)")
        if self.sync:
            os.fsync(self._fd)
        self.keys.add(str(row["key"]))

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
