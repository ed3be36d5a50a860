"""The one registry of GPU names: every name points at a catalog GPU, and the resolver takes ids,
aliases and driver names (with or without spaces, as the seed's file prefixes write them)."""

from __future__ import annotations

import pytest

from llmp.errors import InputError
from llmp.hardware import catalog, names


def test_every_name_points_at_a_catalog_gpu():
    gpus = set(catalog.catalog_ids()["gpu"])
    for tool, table in names.NAMES.items():
        targets = {v for v in table.values() if v is not None}
        missing = targets - gpus - {"mi210"}  # kernels.csv's MI210 is written before the catalog has it
        assert not missing, (tool, missing)


@pytest.mark.parametrize("name, ident", [
    ("gh200", "gh200_96gb"),
    ("gh200_96gb", "gh200_96gb"),
    ("NVIDIA GH200 480GB", "gh200_96gb"),
    ("NVIDIAGH200480GB", "gh200_96gb"),
    ("NVIDIAA100-SXM4-80GB", "a100_sxm4_80gb"),
    (" h100_sxm5_80gb ", "h100_sxm5_80gb"),
])
def test_resolver_takes_ids_aliases_and_driver_names(name, ident):
    assert names.gpu_id(name) == ident


@pytest.mark.parametrize("name", ["NVIDIA H100", "h100", "../x", ""])
def test_unknown_names_are_refused_with_the_choices(name):
    with pytest.raises(InputError, match="names no catalog GPU") as err:
        names.gpu_id(name)
    assert "gh200" in str(err.value.hint)
