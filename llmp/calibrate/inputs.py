"""The measured steps a calibration is fitted on: read, mapped and checked.

Rows come in the published-measurement schema (``validation/*.csv``, or what ``llmp measure
--csv`` appends) and go through the same reading and mapping as ``llmp validate``
(``llmp.validate``), so a row means the same to both. A calibration is of one stack on one
cluster, so the checks refuse, each with the rows named and the fix:

* a row llmp cannot model (the mapping's own reason: fine-tuning, MoE without widths, ...) or an
  exact copy of an earlier row (it would count one step twice or, merged, silently once);
* rows of several GPUs, or of several stacks;
* contradictory rows: one configuration measured twice (two rows of one measurement reporting
  its metric, or two measurements that resolve to the same spec) with values further apart than
  ``CONTRADICTION`` (run-to-run noise of a training step is a few percent; two such numbers
  cannot both be that step on that cluster).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmp.compose.predictor import spec_hash
from llmp.errors import InputError
from llmp.validate.mapping import Mapped, Skipped, map_measurement
from llmp.validate.score import read_measurements, skip_summary

CONTRADICTION = 1.25
"""Two measurements of one configuration further apart than this factor contradict each other."""
SHOWN = 5
"""Rows named in a refusal before the rest are counted."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """The checked rows of one stack on one cluster."""

    rows: tuple[Mapped, ...]
    gpu: str
    stack: str
    files: tuple[str, ...]


def _listing(items: Sequence[str]) -> str:
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def read(paths: Sequence[str], sources: Sequence[str] = ()) -> Measured:
    """Read and check the measured rows in ``paths`` (only ``sources`` when given)."""
    measurements, copies = read_measurements(paths, sources)
    mapped: list[Mapped] = []
    skipped: list[Skipped] = []
    for m in measurements:
        result = map_measurement(m)
        if isinstance(result, Mapped):
            mapped.append(result)
        else:
            skipped.append(result)
    skipped += copies
    if skipped:
        raise InputError(f"llmp cannot model {len(skipped)} of the {len(measurements) + len(copies)} measured steps "
                         f"({skip_summary(skipped)}): "
                         + _listing([f"{s.measurement.lines}: {s.reason.value} ({s.detail.splitlines()[0]})"
                                     for s in skipped]),
                         label="rows llmp cannot model",
                         hint="remove them (llmp validate FILE shows each row's full diagnostic), or pick the rows "
                              "to calibrate on with --source")
    if not mapped:
        raise InputError("no measured steps in the given files", label="nothing to calibrate")
    for what, of in (("GPUs", lambda r: r.spec.cluster.gpu.id), ("stacks", lambda r: r.spec.train.stack.value)):
        seen: dict[str, list[str]] = {}
        for r in mapped:
            seen.setdefault(of(r), []).append(r.metric_row.key)
        if len(seen) > 1:
            parts = [f"{name} ({len(keys)} row{'s' if len(keys) > 1 else ''}: {_listing(keys)})"
                     for name, keys in sorted(seen.items())]
            raise InputError(f"the rows mix {len(seen)} {what}: " + ", ".join(parts),
                             label=f"several {what} mixed",
                             hint="a calibration is of one stack on one cluster: split the rows into one file each "
                                  "(or select them with --source) and calibrate each")
    _check_contradictions(mapped)
    first = mapped[0]
    return Measured(rows=tuple(mapped), gpu=first.spec.cluster.gpu.id, stack=first.spec.train.stack.value,
                    files=tuple(dict.fromkeys(r.metric_row.file for r in mapped)))


def _check_contradictions(rows: Sequence[Mapped]) -> None:
    bad = contradictions(rows)
    if bad:
        raise InputError(f"{len(bad)} configuration{'s were' if len(bad) > 1 else ' was'} measured more than once "
                         f"with step times over {math.floor((CONTRADICTION - 1) * 100)}% apart: " + _listing(bad),
                         label="contradictory rows",
                         hint="two such numbers cannot both be this configuration on this cluster: keep the one "
                              "you trust, or check the stack and cluster columns (they may be different runs)")


def contradictions(rows: Sequence[Mapped]) -> list[str]:
    """Every configuration among ``rows`` measured twice with values over ``CONTRADICTION`` apart."""
    bad = []
    for r in rows:  # rows of one configuration that report the scored metric differently
        values = [row.number("metric_value") or 0.0 for row in r.measurement.metric_rows(r.reading.name)]
        if len(values) > 1 and max(values) > CONTRADICTION * min(values):
            bad.append(" vs ".join(f"{row.key} ({row.text('metric_value')} {row.text('metric_unit')})"
                                   for row in r.measurement.metric_rows(r.reading.name)))
    same: dict[str, list[Mapped]] = {}
    for r in rows:  # the configuration, not where it was written down
        same.setdefault(spec_hash(dataclasses.replace(r.spec, source="")), []).append(r)
    for group in same.values():
        times = [r.measured_s for r in group]
        if max(times) / min(times) > CONTRADICTION:
            bad.append(" vs ".join(f"{r.metric_row.key} ({r.measured_s:.4g} s)" for r in group))
    return bad
