"""Shared pytest setup: Hypothesis profiles and the ``--update-golden`` switch.

Profiles: ``dev`` (the default: few examples, fast feedback), ``ci`` (more examples,
derandomized so a CI failure reproduces), selected when the ``CI`` environment variable is
set, and ``thorough`` (1,000 random examples per property, for the scaling-law properties run
on their own: ``LLMP_HYPOTHESIS_PROFILE=thorough python -m pytest tests/property/analytic/test_scaling.py``).
Deadlines are off in both: the first example of a test may build the grammar or import SymPy, and
a timing flake is not a finding.

Each pytest-xdist worker is one process per core, so the threaded libraries (XGBoost's and torch's
OpenMP pools) run one thread each: a pool per worker sized to every core oversubscribes the
machine, and its spinning threads doubled the suite's CPU time.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before any test module imports xgboost or torch

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=20, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("LLMP_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/integration/golden/* from the current output instead of comparing")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when the run should rewrite golden files rather than compare against them."""
    return bool(request.config.getoption("--update-golden"))
