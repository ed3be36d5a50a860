"""Fixtures for the residual tests: the catalog CPU device and two tiny specs (helpers live in
``residual_helpers.py``, a uniquely named module, so they never clash with other conftest files)."""

from __future__ import annotations

import pytest
from residual_helpers import TINY_GPT, TINY_LLAMA

from llmp.hardware.spec import Device
from llmp.residuals import dataset


@pytest.fixture(scope="session")
def cpu() -> Device:
    return dataset.catalog_device("cpu")


@pytest.fixture(scope="session")
def gpt_spec():
    from llmp import dsl

    return dsl.loads(TINY_GPT, filename="tiny_gpt.llmp")


@pytest.fixture(scope="session")
def llama_spec():
    from llmp import dsl

    return dsl.loads(TINY_LLAMA, filename="tiny_llama.llmp")
