"""Fixtures for the residual tests: the catalog CPU device and two tiny specs (helpers live in
``tests/residual_helpers.py``, a uniquely named module, so they never clash with other conftest
files, and where the CLI tests and the tiny store's script import them too)."""

from __future__ import annotations

import pytest
from tiny_specs import gpt_spec, llama_spec

from llmp.hardware.spec import Device
from llmp.residuals import dataset

__all__ = ["cpu", "gpt_spec", "llama_spec"]


@pytest.fixture(scope="session")
def cpu() -> Device:
    return dataset.catalog_device("cpu")
