"""Score llmp against measured multi-GPU training runs (validation level L2, DESIGN.md).

    report = llmp.validate.validate(["validation/megatron_sc21.csv"])
    report.overall.mape, report.by_source, report.skipped

Stages, one module each: ``rows`` (read and check the CSV, group long-format rows into
measurements) → ``mapping`` (row → .llmp text → Spec, with ``models``, ``frameworks`` and
``hardware`` filling in what the row leaves blank) → ``score`` (predict, error, aggregates) →
``text`` / ``plot``. ``metrics`` converts a published metric to step time and back.
"""

from __future__ import annotations

from llmp.validate.mapping import Mapped, Skipped, map_measurement
from llmp.validate.rows import Measurement, Row, group_measurements, read_csv, read_csvs
from llmp.validate.score import Report, Scored, Stats, validate
from llmp.validate.skips import SkipReason

__all__ = ["Mapped", "Measurement", "Report", "Row", "Scored", "SkipReason", "Skipped", "Stats",
           "group_measurements", "map_measurement", "read_csv", "read_csvs", "validate"]
