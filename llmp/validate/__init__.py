"""Score llmp against measured multi-GPU training runs (validation level L2, DESIGN.md).

    report = llmp.validate.validate(["validation/megatron_sc21.csv"])
    report.overall.mape, report.by_source, report.by_stack, report.memory, report.skipped

Stages, one module each: ``rows`` (read and check the CSV, group long-format rows into
measurements: one configuration, one measurement) → ``mapping`` (row → .llmp text → Spec:
``frameworks`` names the stack that ran the row and reads its train cells, ``models`` the
architecture, ``hardware`` the catalog node; ``cells``, ``network_cell`` and ``notes`` read free
text for its meaning) → ``score`` (predict, error, memory against measured peaks, aggregates) → ``text`` /
``plot``. ``metrics`` reads a published metric and its unit and converts it to step time and back.
"""

from __future__ import annotations

from llmp.callable_package import make_callable
from llmp.validate.mapping import Mapped, Skipped, map_measurement
from llmp.validate.rows import Measurement, Row, group_measurements, read_csv, read_csvs
from llmp.validate.score import Report, Scored, Stats, validate
from llmp.validate.skips import SkipReason

__all__ = ["Mapped", "Measurement", "Report", "Row", "Scored", "SkipReason", "Skipped", "Stats",
           "group_measurements", "map_measurement", "read_csv", "read_csvs", "validate"]


make_callable(__name__, validate)  # llmp.validate(...) is this function, whichever was imported first
