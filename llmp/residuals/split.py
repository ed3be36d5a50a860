"""Held-out splits of sample files by shape, never by row (``llmp split``).

A store scored on rows whose shapes it was fitted on scores its memory: a GEMM's forward, its
dgrad and its wgrad are the same three numbers permuted, and a shape re-measured by a second
source is the same shape. So a split puts whole *shapes* on one side: a row's shape is its
family with its dims sorted (a GEMM's three passes land together) or, for a collective, its
kind, bytes, group and GPUs per node (:func:`shape_key`); a seeded hash of it picks the side.
The two halves are written as sample directories in the very format they were read in (header
records untouched), so ``llmp fit`` reads one half and ``llmp score`` the other.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llmp.analytic.kernels import Collective, Kernel
from llmp.errors import InputError
from llmp.residuals import dataset, features, samplefile

BY = ("shape",)
"""What a split may hold out together. Rows are never split one by one (see the module docstring)."""
MANIFEST = "split.json"
SIDES = ("train", "test")


def shape_key(item: Kernel | Collective) -> str:
    """The shape a row measured, independent of pass, role and source: its family and sorted dims."""
    dims = sorted(int(v) for _, v in item.dims) if isinstance(item, Kernel) else \
        [int(item.bytes), int(item.group), int(item.ranks_per_node)]
    return f"{features.family_of(item)}:{dims}"


def in_test(key: str, test: float, seed: int) -> bool:
    """Whether shape ``key`` is held out: a seeded hash of it, uniform in [0, 1), below ``test``."""
    digest = hashlib.sha256(f"{seed}|{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < test


@dataclass(frozen=True, kw_only=True, slots=True)
class SplitReport:
    """What a split wrote: rows and distinct shapes per side, and the files."""

    out: Path
    rows: dict[str, int]
    shapes: dict[str, int]
    files: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"out": str(self.out), "rows": self.rows, "shapes": self.shapes, "files": list(self.files)}


def _files(paths: Sequence[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(q for q in p.glob("*.csv")))
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"no such sample file or directory: {p}")
    if not files:
        raise InputError(f"no sample files (*.csv) in {', '.join(map(str, paths))}",
                         hint="run llmp sample or llmp import-samples first")
    names = [f.name for f in files]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"two sample files named {twice[0]}: the halves keep file names",
                         hint="split one sample directory at a time")
    return files


def _text(table: samplefile.SampleTable, rows: list[dict[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    for row in rows:
        writer.writerow([row[c] for c in table.columns])
    return f"{samplefile.MAGIC}\n# {json.dumps(table.meta, sort_keys=True)}\n{buf.getvalue()}"


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
        raise InputError(f"{out} exists and is not an earlier split (no {MANIFEST})",
                         hint="choose a new or empty -o directory; a split replaces it whole")


def split(paths: Sequence[str | Path], out: str | Path, *, by: str = "shape", test: float = 0.5,
          seed: int = 0) -> SplitReport:
    """Split the sample rows under ``paths`` into ``out/train`` and ``out/test`` by shape:
    a share ``test`` of the shapes (seeded by ``seed``) is held out, with every row of each."""
    if by not in BY:
        raise InputError(f"cannot split by {by!r}", hint="held-out scoring splits by shape: --by shape")
    if not 0 < test < 1:
        raise InputError(f"--test must be a share between 0 and 1 (exclusive), got {test}")
    out = Path(out)
    _check_out(out)
    halves: dict[str, dict[str, str]] = {side: {} for side in SIDES}
    rows = dict.fromkeys(SIDES, 0)
    shapes: dict[str, set[str]] = {side: set() for side in SIDES}
    for path in _files(paths):
        table = samplefile.read(path)
        if not table.rows:
            continue
        is_coll = "kind" in table.columns
        parts: dict[str, list[dict[str, str]]] = {side: [] for side in SIDES}
        for row in table.rows:
            try:
                key = shape_key(dataset.collective_of(row) if is_coll else dataset.kernel_of(row))
            except ValueError as err:
                raise InputError(f"{path}: row {row.get('key', '?')!r}: {err}",
                                 hint="sample files are written by llmp sample or llmp import-samples") from None
            side = "test" if in_test(key, test, seed) else "train"
            parts[side].append(row)
            shapes[side].add(key)
        for side in SIDES:
            if parts[side]:
                halves[side][path.name] = _text(table, parts[side])
                rows[side] += len(parts[side])
    for side in SIDES:
        if not rows[side]:
            raise InputError(f"the {side} half would be empty ({sum(rows.values())} rows, "
                             f"{len(shapes['train'] | shapes['test'])} shapes)",
                             hint="split more samples, or choose another --test share")
    report = SplitReport(out=out, rows=rows, shapes={s: len(v) for s, v in shapes.items()},
                         files=tuple(sorted(set(halves["train"]) | set(halves["test"]))))
    if out.exists():
        shutil.rmtree(out)
    for side in SIDES:
        (out / side).mkdir(parents=True)
        for name, text in halves[side].items():
            (out / side / name).write_text(text, encoding="utf-8")
    manifest = {"by": by, "test": test, "seed": seed, **report.to_dict()}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return report
