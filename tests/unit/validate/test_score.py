"""Scoring: error sign, metric round trip of a prediction, aggregates and attribution."""

from __future__ import annotations

import dataclasses
import statistics

import published_rows as P
import pytest

from llmp.compose.prediction import MemoryReport
from llmp.validate.mapping import map_measurement
from llmp.validate.notes import MemoryKind, MemoryReading
from llmp.validate.rows import group_measurements, read_csv
from llmp.validate.score import (
    GIB,
    Report,
    Scored,
    attribution,
    check_memory,
    score,
    summarize,
)


def test_a_real_prediction_is_scored(mapped):
    s = score(mapped)
    assert isinstance(s, Scored)
    assert s.predicted_s > 0
    assert sum(s.breakdown.values()) == pytest.approx(s.predicted_s, rel=1e-6)
    assert s.to_dict()["error"] == pytest.approx(s.predicted_s / s.measured_s - 1)


def test_summaries_and_worst_rows(mapped):
    rows = [Scored(mapped=dataclasses.replace(mapped, measured_s=10.0), predicted_s=p, breakdown={})
            for p in (9.0, 10.5, 13.0)]
    stats = summarize(rows)
    assert stats.rows == 3
    assert stats.mape == pytest.approx((0.1 + 0.05 + 0.3) / 3)
    assert stats.median == pytest.approx(0.1)
    assert stats.max == pytest.approx(0.3)
    assert stats.bias == pytest.approx((-0.1 + 0.05 + 0.3) / 3)
    report = Report(rows=tuple(rows), skipped=())
    assert report.worst(1)[0].predicted_s == 13.0
    assert report.by_source["megatron-sc21-table1"].rows == 3


def test_attribution_finds_the_category_the_error_follows(mapped):
    # Rows whose error grows with their share of "dp" time, and a "gemm" share that is constant.
    rows = []
    for share in (0.1, 0.2, 0.3, 0.4):
        predicted = 10.0
        rows.append(Scored(mapped=dataclasses.replace(mapped, measured_s=predicted / (1 - share)),
                           predicted_s=predicted, breakdown={"dp": share * predicted, "gemm": 5.0}))
    found = {a.category: a for a in attribution(rows)}
    assert found["dp"].correlation == pytest.approx(-1.0, abs=0.05)
    assert found["dp"].mean_share == pytest.approx(0.25)
    assert found["gemm"].correlation is None  # constant share says nothing


def _memory(total_gib: float, *, overhead_gib: float = 1.0, rank: int = 0, capacity_gib: float = 80.0) -> MemoryReport:
    total = total_gib * GIB
    return MemoryReport(weights=0.0, grads=0.0, optimizer=0.0, activations=total - overhead_gib * GIB, logits=0.0,
                        overhead=overhead_gib * GIB, total=total, capacity=capacity_gib * GIB,
                        oom=total > capacity_gib * GIB, rank=rank)


def test_memory_is_compared_with_the_allocator_figure_it_measures():
    allocated = MemoryReading(kind=MemoryKind.ALLOCATED, bytes=50 * GIB, text="mem-max-allocated-bytes max 50 GiB")
    reserved = MemoryReading(kind=MemoryKind.RESERVED, bytes=60 * GIB, text="max_reserved 60 GiB")
    check = check_memory((reserved, allocated), _memory(56.0), pp=1)
    assert check.kind is MemoryKind.ALLOCATED                     # allocated preferred to reserved
    assert check.predicted == pytest.approx(55 * GIB)             # llmp's tensors, without context/NCCL overhead
    assert check.error == pytest.approx(55 / 50 - 1)
    device = MemoryReading(kind=MemoryKind.DEVICE, bytes=70 * GIB, text="nvidia-smi 70 GiB")
    assert check_memory((device,), _memory(56.0), pp=1).predicted == pytest.approx(56 * GIB)  # device: everything
    assert check_memory((), _memory(56.0), pp=1) is None


def test_a_one_rank_figure_is_compared_only_on_that_rank():
    last = MemoryReading(kind=MemoryKind.ALLOCATED, bytes=50 * GIB, text="x", one_rank=True)
    assert check_memory((last,), _memory(56.0, rank=0), pp=4).error is None
    assert "pipeline rank 0" in check_memory((last,), _memory(56.0, rank=0), pp=4).note
    assert check_memory((last,), _memory(56.0, rank=3), pp=4).error == pytest.approx(55 / 50 - 1)


def test_memory_stats_and_oom_failures(mapped):
    reading = MemoryReading(kind=MemoryKind.ALLOCATED, bytes=50 * GIB, text="x")
    rows = [Scored(mapped=mapped, predicted_s=1.0, breakdown={}, memory=_memory(t),
                   memory_check=check_memory((reading,), _memory(t), pp=1)) for t in (46.0, 56.0, 91.0)]
    report = Report(rows=tuple(rows), skipped=())
    stats = report.memory
    assert stats.rows == 3 and stats.bias == pytest.approx(statistics.fmean([-0.1, 0.1, 0.8]))
    assert [r.memory.total / GIB for r in report.oom_failures] == [91.0]
    doc = report.to_dict()
    assert doc["oom_failures"] == [rows[2].key] and doc["memory"]["rows"] == 3
    assert doc["rows"][2]["oom"] and doc["rows"][0]["memory_error"] == pytest.approx(-0.1)
    assert set(doc["by_stack"]) == {"megatron_lm"}


def test_a_measured_memory_peak_is_scored(tmp_path):
    path = tmp_path / "ci.csv"
    path.write_text(P.FUNCTIONAL_7B_H100, encoding="utf-8")
    result = score(map_measurement(group_measurements(read_csv(path))[0]))
    assert isinstance(result, Scored) and result.memory_check is not None
    assert result.memory_check.kind is MemoryKind.ALLOCATED
    assert result.memory_check.measured == pytest.approx(56.55 * GIB)
    assert not result.oom_failure
