"""Helpers for the residual tests (unit and property): tiny specs, synthetic data, the catalog CPU
device and the committed tiny store as fixtures (each test folder's conftest re-exports them).

Synthetic observations are real kernels (from the sampler's own design) on the real catalog
device, with times drawn from a known smooth log-ratio function: they exercise fitting,
storing and adapting in milliseconds, where real timings would take minutes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from llmp.analytic.kernels import Family, Kernel, Pass
from llmp.hardware.spec import Device, Dtype
from llmp.measure import design, sampling
from llmp.residuals import dataset, features, samplefile, store
from llmp.residuals.model import Observation

FAST_XGB = {"n_estimators": 40, "max_depth": 3, "learning_rate": 0.2, "n_jobs": 1}
TINY_STORE = Path(__file__).resolve().parent / "fixtures" / "tiny_store"
"""A committed fitted CPU store (``fixtures/make_tiny_store.py`` writes it) for the tests that need
some fitted store and are not about fitting; read-only: a test that damages it copies it first."""
TINY_FAMILIES = ("gemm", "norm", "elementwise", "copy")
"""The families ``TINY_STORE`` has a group for."""
A100 = "a100_sxm4_80gb"
"""The catalog A100 the importers' synthetic files name."""




def true_log_ratio(x: dict[str, float], shift: float = 0.0) -> float:
    """A smooth known target: launch-bound small kernels are slow, big ones near the roofline."""
    return 0.3 + shift + 0.8 * math.tanh(x["log_launch_frac"] + 1.0) + 0.1 * x["pass_bwd"]


def synthetic(device: Device, families: tuple[str, ...], n: int, *, seed: int = 0, noise: float = 0.02,
              shift: float | Callable[[Kernel], float] = 0.0) -> list[Observation]:
    """``n`` observations per family with times from ``true_log_ratio`` (log-normal noise);
    ``shift`` moves the log ratio, by a constant or per kernel (a device that speeds up some
    operators and not others)."""
    rng = np.random.default_rng(seed)
    out = []
    for fam in families:
        for case in design.design((fam,), design.RANGES["cpu"], ("fp32",), seed, n):
            kernel = dataset.kernel_of({"family": case.family, "pass": case.pass_, "variant": case.variant,
                                        "dtype": case.dtype, **{k: str(v) for k, v in case.dims}})
            row, t_roof = features.kernel_row(kernel, device)
            x = dict(zip(features.FEATURES[fam], row))
            s = shift(kernel) if callable(shift) else shift
            seconds = t_roof * math.exp(true_log_ratio(x, s) + rng.normal(0, noise))
            out.append(Observation(item=kernel, device=device, seconds=seconds))
    return out


def write_samples(directory: Path, device_id: str, families: tuple[str, ...], n: int, *, seed: int = 0,
                  shift: float | Callable[[Kernel], float] = 0.0) -> Path:
    """Synthetic observations on a catalog device written as the sampler writes them (one file per
    family, through ``samplefile.Appender``), so commands read them as real sample files."""
    device = dataset.catalog_device(device_id)
    meta = {"device_id": device_id, "device_name": device.name, "timing": "synthetic (tests)"}
    for fam in families:
        cases = design.design((fam,), design.RANGES["cpu"], ("fp32",), seed, n)
        obs = synthetic(device, (fam,), n, seed=seed, shift=shift)
        with samplefile.Appender(directory / f"{fam}.csv", sampling.columns(fam), meta) as out:
            for case, o in zip(cases, obs):
                out.append({"key": case.key, "family": case.family, "pass": case.pass_, "variant": case.variant,
                            "dtype": case.dtype, **dict(case.dims), "width": case.width, "time_s": o.seconds,
                            "p10_s": o.seconds, "p90_s": o.seconds, "repeats": 1, "error": ""})
    return directory


@pytest.fixture(scope="session")
def cpu() -> Device:
    return dataset.catalog_device("cpu")


@pytest.fixture(scope="module")
def fitted():
    """The committed tiny store (these tests are about the store, not about fitting one): its
    loaded model and its path."""
    return store.load(TINY_STORE).model, TINY_STORE


def norm_kernel(variant: str, pass_: Pass, tokens: int, hidden: int) -> Kernel:
    return Kernel.make(Family.NORM, Dtype.FP16, pass_, variant, tokens=tokens, hidden=hidden, rms=1)
