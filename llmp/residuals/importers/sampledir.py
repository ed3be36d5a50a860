"""The sample directory an import writes, in the exact format ``llmp sample`` writes.

``DIR/<family>.csv`` + ``DIR/collectives.csv`` (``samplefile`` format: magic line, JSON header
record, columns of ``sampling.columns`` / ``collectives.COLUMNS`` plus ``source_ref`` and
``note``) and ``DIR/import.json`` (the manifest ``common.finish`` built). Rows come sorted by key
and nothing holds a date or an absolute path, so a rerun on the same inputs writes the same
bytes; the directory is replaced atomically.

The modules with the column tuples (``sampling``, ``collectives``) import torch, which llmp's
predict/fit side does not need, so the tuples are repeated here and a test checks they agree.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llmp.analytic.kernels import DIMS, Family
from llmp.errors import InputError
from llmp.residuals import samplefile
from llmp.residuals.importers.common import IMPORTER_VERSION, NOTE_TAGS, Imported, Sample

SAMPLE_TAIL = ("width", "time_s", "p10_s", "p90_s", "repeats", "error")
"""``llmp.measure.sampling.SAMPLE_COLUMNS_TAIL`` (tests/unit/residuals/test_importers.py checks they agree)."""
COLLECTIVE_BASE = ("key", "kind", "bytes", "group", "ranks_per_node", "tier", "dtype", "backend", "time_s", "p10_s",
                   "p90_s", "repeats", "error")
"""``llmp.measure.collectives.COLUMNS`` (checked by the same test)."""
EXTRA = ("source_ref", "note")
"""Columns an imported row adds: where it was read (``owner/repo@commit:path:line``) and what is
special about its time (``;``-separated tags, legend in the header record's ``note_tags``)."""
COLLECTIVE_COLUMNS = (*COLLECTIVE_BASE, *EXTRA)
MANIFEST = "import.json"


def kernel_columns(family: str) -> tuple[str, ...]:
    """``sampling.columns(family)`` plus :data:`EXTRA`."""
    return ("key", "family", "pass", "variant", "dtype", *DIMS[Family(family)], *SAMPLE_TAIL, *EXTRA)


def _file_text(meta: dict[str, Any], columns: tuple[str, ...], rows: Iterable[dict[str, object]]) -> str:
    lines = [samplefile.MAGIC, "# " + json.dumps(meta, sort_keys=True)]
    body = _csv_lines([dict(zip(columns, columns)), *rows], columns)
    return "\n".join(lines) + "\n" + body


def _csv_lines(rows: Iterable[dict[str, object]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for r in rows:
        writer.writerow([r[c] for c in columns])
    return buf.getvalue()


def render(imported: Imported) -> dict[str, str]:
    """File name -> text of every file of the import directory."""
    c = imported.collected
    meta = {**c.meta, "device_id": c.device_id, "importer": IMPORTER_VERSION, "note_tags": NOTE_TAGS}
    out: dict[str, str] = {}
    by_family: dict[str, list[Sample]] = {}
    for s in imported.samples:
        by_family.setdefault(s.family if s.is_kernel else "collectives", []).append(s)
    for fam, samples in sorted(by_family.items()):
        if fam == "collectives":
            out["collectives.csv"] = _file_text({**meta, "node_id": c.node_id}, COLLECTIVE_COLUMNS,
                                                (s.row() for s in samples))
        else:
            out[f"{fam}.csv"] = _file_text(meta, kernel_columns(fam), (s.row() for s in samples))
    out[MANIFEST] = json.dumps(imported.manifest, indent=1, sort_keys=True) + "\n"
    return out


def write(imported: Imported, out: Path) -> int:
    """Write the import directory, replacing ``out`` atomically (built beside it, then renamed in).
    Returns the bytes written. Refuses to replace a directory that is not an earlier import."""
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise InputError(f"{out} exists and is not a directory", hint="choose another -o")
        if any(out.iterdir()) and not (out / MANIFEST).is_file():
            raise InputError(f"{out} is a non-empty directory that no import wrote (no {MANIFEST})",
                             hint="choose a new or empty -o directory; an import replaces it whole")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        size = 0
        for name, text in render(imported).items():
            data = text.encode("utf-8")
            (tmp / name).write_bytes(data)
            size += len(data)
        os.chmod(tmp, 0o755)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.rename(out, old / "previous")
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return size
