"""The sampler: real torch timings of every family, a bare import path, and exact resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_ranges import TINY

from llmp.measure import design, sampling
from llmp.residuals import samplefile

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("sympy", "lark", "xgboost", "sklearn", "rich", "scipy")


def test_every_family_is_timed(tmp_path):
    config = sampling.SampleConfig(out=tmp_path, ranges=TINY, per_family=2, target_s=0.002, progress=False)
    report = sampling.run(config)
    assert report.failed == () and report.measured == 2 * len(design.FAMILIES)
    for family in design.FAMILIES:
        table = samplefile.read(tmp_path / f"{family}.csv")
        assert table.columns == sampling.columns(family)
        assert len(table.rows) == 2
        assert all(float(r["time_s"]) > 0 for r in table.rows)
        for field in ("device_name", "torch", "date", "timing", "threads", "device_id"):
            assert field in table.meta
        assert table.meta["threads"] == 1 and table.meta["device_id"] == "cpu"
    again = sampling.run(config)  # a rerun finds everything on disk
    assert again.measured == 0 and again.existing == 2 * len(design.FAMILIES)


def _rows(out: Path, families: tuple[str, ...]) -> list[str]:
    keys = []
    for f in families:
        if (out / f"{f}.csv").exists():
            keys += [r["key"] for r in samplefile.read(out / f"{f}.csv").rows]
    return keys


@pytest.mark.slow  # samples in a subprocess it kills
def test_resume_after_sigkill_loses_and_duplicates_nothing(tmp_path):
    """Start the sampler as a process, SIGKILL it mid-run, rerun: every row once, none partial.

    The child also checks the bare-GPU-node rule: the sampler, measure core and collectives
    import neither sympy, lark, xgboost, scikit-learn, rich nor scipy.
    """
    families = ("copy", "elementwise", "norm")
    per_family = 20
    code = ("import sys; from pathlib import Path; sys.path.insert(0, 'tests'); from tiny_ranges import "
            "TINY; import llmp.measure.sampling as sampling, llmp.measure.step, llmp.measure.ranks, "
            f"llmp.measure.collectives, llmp.commands.sample, llmp.cli; heavy = [m for m in {HEAVY!r} if m in "
            f"sys.modules]; assert not heavy, heavy; sampling.run(sampling.SampleConfig(out=Path({str(tmp_path)!r}), "
            f"families={families!r}, ranges=TINY, per_family={per_family}, target_s=0.02, progress=False))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    deadline = time.monotonic() + 60
    while len(_rows(tmp_path, families)) < 8 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _rows(tmp_path, families)
    assert 8 <= len(partial) < per_family * len(families)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    keys = _rows(tmp_path, families)
    expected = [c.key for c in design.design(families, TINY, ("fp32",), 0, per_family)]
    assert len(keys) == len(set(keys)) == len(expected)
    assert set(keys) == set(expected) and set(partial) <= set(keys)
    for f in families:
        assert (tmp_path / f"{f}.csv").read_bytes().endswith(b"\n")
        assert samplefile.read(tmp_path / f"{f}.csv").dropped == 0
